/* SPDX-License-Identifier: MIT */
/*
 * CPython object layouts that only user space needs: enough of types, dicts, functions and
 * methods to name the objects a Python frame points to (the op of a dispatch, a module's
 * attribute name in its parent). Kept out of pyabi.h, which the BPF side compiles.
 * One struct ct_py_objoffsets per interpreter version, generated from each interpreter's
 * own headers (3.10's dict keys, absent from its headers, from its libpython's DWARF) by
 * scripts/gen-pyoffsets.sh into include/commtrace/pyoffsets.h.
 * CT_PY_NONE (pyabi.h) marks a field the version does not have.
 */
#ifndef COMMTRACE_PYOBJABI_H
#define COMMTRACE_PYOBJABI_H

#include <linux/types.h>

struct ct_py_objoffsets {
	__u16 major, minor;

	/* Objects and types. */
	__u16 var_size;	       /* PyVarObject.ob_size (Py_ssize_t) */
	__u16 type_flags;      /* PyTypeObject.tp_flags (unsigned long) */
	__u16 type_basicsize;  /* tp_basicsize (Py_ssize_t) */
	__u16 type_itemsize;   /* tp_itemsize (Py_ssize_t) */
	__u16 type_dictoffset; /* tp_dictoffset (Py_ssize_t; < 0: from the end of a var object) */
	__u16 type_dealloc;   /* tp_dealloc (destructor): PyCode_Type's is where code objects die */
	__u16 type_base;      /* tp_base (PyTypeObject *) */
	__u16 ht_cached_keys; /* PyHeapTypeObject.ht_cached_keys: keys shared by instances */
	__u16 type_dict;      /* tp_dict (a heap type's own dict) */
	__u16 type_mro;	      /* tp_mro (a tuple of types) */
	__u16 type_version_tag;	      /* tp_version_tag (unsigned int): never reused, 0 = none */
	__u16 descr_member;	      /* PyMemberDescrObject.d_member (PyMemberDef *) */
	__u16 memberdef_type;	      /* PyMemberDef.type (int) */
	__u16 memberdef_offset;	      /* PyMemberDef.offset (Py_ssize_t) */
	__u16 member_object_ex;	      /* T_OBJECT_EX: a __slots__ slot holding a PyObject * */
	__u32 tpflags_dict_subclass;  /* Py_TPFLAGS_DICT_SUBCLASS */
	__u32 tpflags_type_subclass;  /* Py_TPFLAGS_TYPE_SUBCLASS: the object is a class */
	__u32 tpflags_tuple_subclass; /* Py_TPFLAGS_TUPLE_SUBCLASS */
	__u32 tpflags_managed_dict;   /* Py_TPFLAGS_MANAGED_DICT (3.11+), else 0 */
	__u32 tpflags_inline_values;  /* Py_TPFLAGS_INLINE_VALUES (3.13+), else 0 */

	/* Instance dicts the interpreter manages before the object (3.11+). */
	__s16 managed_dict;	  /* dict pointer's offset from the object (< 0), 0 if none */
	__s16 managed_values;	  /* 3.11: values pointer's offset (< 0), else 0 */
	__u16 managed_values_tag; /* 3.12: the dict slot holds values - tag, tag bit set; else 0 */
	__u16 inline_values;	  /* 3.13+: PyDictValues embedded at this offset, else CT_PY_NONE */

	/* PyDictValues: values of a split table, indexed like the keys' entries. */
	__u16 values_array;    /* offsetof(values); 0 where it is a bare PyObject ** (3.10) */
	__u16 values_capacity; /* uint8_t capacity (3.13+), else CT_PY_NONE */
	__u16 values_valid;    /* uint8_t valid (3.13+): 0 once a dict took the values over */

	/* PyDictObject. */
	__u16 dict_used;   /* ma_used (Py_ssize_t) */
	__u16 dict_keys;   /* ma_keys */
	__u16 dict_values; /* ma_values: non-NULL for a split table */

	/* PyDictKeysObject: the entries follow the index table. */
	__u16 keys_size;	       /* 3.10: dk_size (Py_ssize_t), else CT_PY_NONE */
	__u16 keys_log2_size;	       /* 3.11+: dk_log2_size (uint8_t), else CT_PY_NONE */
	__u16 keys_log2_index_bytes;   /* 3.11+: dk_log2_index_bytes (uint8_t), else CT_PY_NONE */
	__u16 keys_kind;	       /* 3.11+: dk_kind (uint8_t), else CT_PY_NONE */
	__u16 keys_nentries;	       /* dk_nentries (Py_ssize_t) */
	__u16 keys_indices;	       /* dk_indices[] */
	__u8 kind_general;	       /* DICT_KEYS_GENERAL (3.11+; 3.10 tables are all general) */
	__u8 kind_unicode, kind_split; /* DICT_KEYS_UNICODE / _SPLIT, 0xff before 3.11 */
	__u16 entry_size, entry_key, entry_value;    /* PyDictKeyEntry */
	__u16 uentry_size, uentry_key, uentry_value; /* PyDictUnicodeEntry (3.11+), CT_PY_NONE */

	/* Callables. */
	__u16 cfunc_ml;	      /* PyCFunctionObject.m_ml (builtin_function_or_method) */
	__u16 methoddef_name; /* PyMethodDef.ml_name (const char *) */
	__u16 func_name;      /* PyFunctionObject.func_name (str) */
	__u16 func_qualname;  /* PyFunctionObject.func_qualname (str) */
	__u16 func_code;      /* PyFunctionObject.func_code (a code object) */
	__u16 method_func;    /* PyMethodObject.im_func (a bound method's function) */
	__u16 descr_name;     /* PyDescrObject.d_name (str; method_descriptor etc.) */

	/* Tuples and ints (parameter placements, e.g. Shard.dim). */
	__u16 tuple_items; /* PyTupleObject.ob_item[] (the count at var_size) */
	__u16 long_size;   /* 3.10/3.11: ob_size (signed digit count); 3.12+: lv_tag */
	__u16 long_digits; /* ob_digit[] (uint32_t) */
	__u8 long_tagged;  /* 3.12+: lv_tag = digits << long_tag_shift | sign (0 +, 1 zero, 2 -) */
	__u8 long_tag_shift; /* _PyLong_NON_SIZE_BITS (3.12+), else 0 */
	__u8 long_shift;     /* PyLong_SHIFT: value bits per digit */
};

#endif
