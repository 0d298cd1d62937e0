#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Generate include/commtrace/pyoffsets.h: one struct ct_py_offsets per CPython minor version,
# measured with offsetof()/sizeof() against each interpreter's OWN headers (the internal
# ones too, through Py_BUILD_CORE), never typed by hand. Run by hand when an interpreter is
# added; the build only uses the committed header.
#
#   scripts/gen-pyoffsets.sh [OUT]        (default: include/commtrace/pyoffsets.h)
#
# Interpreters: pyenv 3.10.13 3.11.7 3.12.1 3.13.0 and Debian's /usr/bin/python3.11
# (python3.11-dev). Both 3.11 builds are measured; when every field agrees one table is
# emitted. When a second build of a minor version differs, its table is kept as
# ct_py_offsets_3_N_<label> and the script warns loudly: the lookup keys on major.minor
# only (all the BPF side knows), so such a build needs the caller to pick by path.
#
# Per-version layout differences the probe program below encodes (CPython history):
#  3.10  Frames are heap PyFrameObjects: tstate->frame, f_back, f_code and f_lasti, an
#        INSTRUCTION INDEX (int; the byte offset is 2*f_lasti). No _PyInterpreterFrame,
#        no co_qualname (use co_name), no co_code_adaptive (bytecode in the co_code bytes
#        object), no PyThreadState.native_thread_id (added in 3.11), the
#        thread list is PyInterpreterState.tstate_head. co_linetable has 3.10's own
#        (start delta, line delta) byte-pair format (PEP 626).
#  3.11  _PyInterpreterFrame lives in the thread's data stack; reached through
#        tstate->cframe->current_frame. prev_instr points at the last executed code unit.
#        co_linetable becomes the PEP 657 location table; co_qualname and the
#        co_code_adaptive bytecode array appear; the thread list moves to
#        interp->threads.head. Frames have an owner, but no C-stack shim frames yet, so
#        frame_owner stays CT_PY_NONE (pyabi.h) and the walker reads nothing there.
#  3.12  f_code moves to the head of _PyInterpreterFrame; shim frames owned by
#        FRAME_OWNED_BY_CSTACK must be skipped by walkers. PyASCIIObject
#        loses wstr (PEP 623), so compact string data moves 8 bytes down.
#  3.13  _PyCFrame is gone: tstate->current_frame. f_code becomes f_executable
#        (a PyObject: a code object, or None for shims) and prev_instr becomes instr_ptr (the
#        instruction being executed; a suspended generator's points past its YIELD_VALUE).
#        _PyRuntime starts with _Py_DebugOffsets (cookie "xdebugpy"), whose own
#        layout is emitted too (ct_py_debug_layout_3_13) so user space can read it.
#
# A second table per version, struct ct_py_objoffsets (pyobjabi.h, user space only), names
# the objects frames point to: types, dicts, functions, methods. Instance dicts: 3.10 at
# tp_dictoffset; 3.11 Py_TPFLAGS_MANAGED_DICT puts the dict 3 words before the object and the
# values (keyed by the type's ht_cached_keys) 4 words before; 3.12 shares one slot, a values
# pointer tagged by its low bit; 3.13 embeds the values after the object
# (Py_TPFLAGS_INLINE_VALUES, with a valid flag) and keeps the dict slot. Dict keys: 3.10's
# are not in its installed headers and come from its libpython's DWARF (gdb); 3.11+ have
# dk_log2_index_bytes and a kind (unicode entries hold no hash). Tuples and ints (read for
# parameter placements): 3.10/3.11 ints keep a signed digit count in ob_size; 3.12+ a tagged
# lv_tag (digit count << _PyLong_NON_SIZE_BITS, sign in the low bits).
set -euo pipefail

cd "$(dirname "$0")/.."
OUT=${1:-include/commtrace/pyoffsets.h}
CC=${CC:-cc}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

PYENV=${PYENV_ROOT:-/root/.pyenv}/versions
# "label config-script" pairs; the label names the build in comments and diagnostics.
INTERPS=(
	"pyenv-3.10.13 $PYENV/3.10.13/bin/python3.10-config"
	"pyenv-3.11.7 $PYENV/3.11.7/bin/python3.11-config"
	"debian-3.11 /usr/bin/python3.11-config"
	"pyenv-3.12.1 $PYENV/3.12.1/bin/python3.12-config"
	"pyenv-3.13.0 $PYENV/3.13.0/bin/python3.13-config"
)

cat >"$TMP/probe.c" <<'PROBE'
/* Prints the initializer of a struct ct_py_offsets for the interpreter whose headers it
 * is compiled against. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <frameobject.h>
#include <structmember.h>
#if PY_VERSION_HEX < 0x030b0000
#include <longintrepr.h>
#endif
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#if PY_VERSION_HEX >= 0x030b0000
#include "internal/pycore_frame.h"
#include "internal/pycore_code.h"
#include "internal/pycore_dict.h"
#include "internal/pycore_object.h"
#endif

#define NONE 0xffff
#define F(name, val) printf("\t.%s = %lu,\n", name, (unsigned long)(val))
#define N(name) printf("\t.%s = CT_PY_NONE,\n", name)
#define MEMBER_SIZE(type, m) sizeof(((type *)0)->m)

/* Bit positions inside PyASCIIObject.state, found by setting each bit field in a zeroed
 * object: the symbolizer decodes kind/compact/ascii with them. */
static unsigned long state_shift(int which)
{
	PyASCIIObject o;
	unsigned int w;

	memset(&o, 0, sizeof(o));
	switch (which) {
	case 0: o.state.kind = 1; break;
	case 1: o.state.compact = 1; break;
	default: o.state.ascii = 1; break;
	}
	memcpy(&w, &o.state, sizeof(w));
	return (unsigned long)__builtin_ctz(w);
}

/*
 * The struct ct_py_objoffsets (pyobjabi.h) initializer, as "#obj" lines. Where the headers
 * locate a thing with an inline function rather than a field (the managed dict slots
 * before an object, 3.12's tagged values pointer, 3.13's inline values, where the entries
 * follow the index table), the function is called on a fake object and the result measured,
 * so that the layout still comes from the headers. 1 if a header breaks what objects.c
 * assumes (sizes of the fields it reads, the entries rule).
 */
#define O(name, val) printf("#obj\t.%s = %lu,\n", name, (unsigned long)(val))
#define ON(name) printf("#obj\t.%s = CT_PY_NONE,\n", name)
#define OS(name, val) printf("#obj\t.%s = %ld,\n", name, (long)(val))
#define CHECK(cond)                                                                   \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "probe: layout assumption broken: %s\n", #cond); \
			return 1;                                                     \
		}                                                                     \
	} while (0)

static int obj_offsets(void)
{
	static union {
		PyObject align;
		char c[512];
	} mem;
	static PyTypeObject tp;
	PyObject *obj = (PyObject *)(mem.c + 256);

	printf("#obj\t.major = %d,\n#obj\t.minor = %d,\n", PY_MAJOR_VERSION, PY_MINOR_VERSION);
	_Static_assert(MEMBER_SIZE(PyVarObject, ob_size) == 8, "Py_ssize_t ob_size");
	_Static_assert(MEMBER_SIZE(PyTypeObject, tp_flags) == 8, "unsigned long tp_flags");
	_Static_assert(MEMBER_SIZE(PyTypeObject, tp_dictoffset) == 8, "Py_ssize_t");
	_Static_assert(MEMBER_SIZE(PyTypeObject, tp_basicsize) == 8, "Py_ssize_t");
	_Static_assert(MEMBER_SIZE(PyTypeObject, tp_itemsize) == 8, "Py_ssize_t");
	_Static_assert(MEMBER_SIZE(PyDictObject, ma_used) == 8, "Py_ssize_t ma_used");
	O("var_size", offsetof(PyVarObject, ob_size));
	O("type_flags", offsetof(PyTypeObject, tp_flags));
	O("type_basicsize", offsetof(PyTypeObject, tp_basicsize));
	O("type_itemsize", offsetof(PyTypeObject, tp_itemsize));
	O("type_dictoffset", offsetof(PyTypeObject, tp_dictoffset));
	O("type_dealloc", offsetof(PyTypeObject, tp_dealloc));
	O("type_base", offsetof(PyTypeObject, tp_base));
	O("ht_cached_keys", offsetof(PyHeapTypeObject, ht_cached_keys));
	/* __slots__ attributes (DTensor's _spec): member descriptors in the types' dicts. */
	O("type_dict", offsetof(PyTypeObject, tp_dict));
	O("type_mro", offsetof(PyTypeObject, tp_mro));
	_Static_assert(MEMBER_SIZE(PyTypeObject, tp_version_tag) == 4, "unsigned int");
	O("type_version_tag", offsetof(PyTypeObject, tp_version_tag));
	O("descr_member", offsetof(PyMemberDescrObject, d_member));
	O("memberdef_type", offsetof(PyMemberDef, type));
	O("memberdef_offset", offsetof(PyMemberDef, offset));
	O("member_object_ex", T_OBJECT_EX);
	O("tpflags_dict_subclass", Py_TPFLAGS_DICT_SUBCLASS);
	O("tpflags_type_subclass", Py_TPFLAGS_TYPE_SUBCLASS);
	O("tpflags_tuple_subclass", Py_TPFLAGS_TUPLE_SUBCLASS);
#ifdef Py_TPFLAGS_MANAGED_DICT
	O("tpflags_managed_dict", Py_TPFLAGS_MANAGED_DICT);
	tp.tp_flags = Py_TPFLAGS_MANAGED_DICT;
#else
	O("tpflags_managed_dict", 0);
#endif
#ifdef Py_TPFLAGS_INLINE_VALUES
	O("tpflags_inline_values", Py_TPFLAGS_INLINE_VALUES);
	tp.tp_flags |= Py_TPFLAGS_INLINE_VALUES;
#else
	O("tpflags_inline_values", 0);
#endif
	tp.tp_basicsize = sizeof(PyObject);
	obj->ob_type = &tp;
#if PY_VERSION_HEX >= 0x030d0000
	OS("managed_dict", (char *)_PyObject_ManagedDictPointer(obj) - (char *)obj);
	OS("managed_values", 0);
	O("managed_values_tag", 0);
	O("inline_values", (char *)_PyObject_InlineValues(obj) - (char *)obj);
#elif PY_VERSION_HEX >= 0x030c0000
	OS("managed_dict", (char *)_PyObject_DictOrValuesPointer(obj) - (char *)obj);
	OS("managed_values", 0);
	{
		PyDictValues *v = (PyDictValues *)(mem.c + 64);
		PyDictOrValues d;
		uintptr_t tag;

		_PyDictOrValues_SetValues(&d, v);
		tag = (uintptr_t)v - (uintptr_t)d.values;
		/* objects.c tests the tag bit and adds the tag back. */
		CHECK(tag && !(tag & (tag - 1)) && _PyDictOrValues_IsValues(d));
		CHECK(((uintptr_t)d.values & tag) && _PyDictOrValues_GetValues(d) == v);
		d.dict = obj;
		CHECK(!_PyDictOrValues_IsValues(d) && !((uintptr_t)d.dict & tag));
		O("managed_values_tag", tag);
	}
	ON("inline_values");
#elif PY_VERSION_HEX >= 0x030b0000
	OS("managed_dict", (char *)_PyObject_ManagedDictPointer(obj) - (char *)obj);
	OS("managed_values", (char *)_PyObject_ValuesPointer(obj) - (char *)obj);
	O("managed_values_tag", 0);
	ON("inline_values");
#else
	OS("managed_dict", 0);
	OS("managed_values", 0);
	O("managed_values_tag", 0);
	ON("inline_values");
#endif
#if PY_VERSION_HEX >= 0x030d0000
	O("values_array", offsetof(PyDictValues, values));
	O("values_capacity", offsetof(PyDictValues, capacity));
	O("values_valid", offsetof(PyDictValues, valid));
	_Static_assert(MEMBER_SIZE(PyDictValues, capacity) == 1, "uint8_t capacity");
	_Static_assert(MEMBER_SIZE(PyDictValues, valid) == 1, "uint8_t valid");
#elif PY_VERSION_HEX >= 0x030b0000
	O("values_array", offsetof(PyDictValues, values));
	ON("values_capacity");
	ON("values_valid");
#else
	O("values_array", 0); /* PyObject **ma_values */
	ON("values_capacity");
	ON("values_valid");
#endif
	O("dict_used", offsetof(PyDictObject, ma_used));
	O("dict_keys", offsetof(PyDictObject, ma_keys));
	O("dict_values", offsetof(PyDictObject, ma_values));
#if PY_VERSION_HEX >= 0x030b0000
	_Static_assert(MEMBER_SIZE(PyDictKeysObject, dk_log2_size) == 1, "uint8_t");
	_Static_assert(MEMBER_SIZE(PyDictKeysObject, dk_log2_index_bytes) == 1, "uint8_t");
	_Static_assert(MEMBER_SIZE(PyDictKeysObject, dk_kind) == 1, "uint8_t");
	_Static_assert(MEMBER_SIZE(PyDictKeysObject, dk_nentries) == 8, "Py_ssize_t");
	ON("keys_size");
	O("keys_log2_size", offsetof(PyDictKeysObject, dk_log2_size));
	O("keys_log2_index_bytes", offsetof(PyDictKeysObject, dk_log2_index_bytes));
	O("keys_kind", offsetof(PyDictKeysObject, dk_kind));
	O("keys_nentries", offsetof(PyDictKeysObject, dk_nentries));
	O("keys_indices", offsetof(PyDictKeysObject, dk_indices));
	O("kind_general", DICT_KEYS_GENERAL);
	O("kind_unicode", DICT_KEYS_UNICODE);
	O("kind_split", DICT_KEYS_SPLIT);
	{
		/* pydict.c: entries at dk_indices + (1 << dk_log2_index_bytes), either kind. */
		PyDictKeysObject *k = (PyDictKeysObject *)mem.c;

		memset(&mem, 0, sizeof(mem));
		k->dk_log2_size = 3;
		k->dk_log2_index_bytes = 3;
		k->dk_kind = DICT_KEYS_GENERAL;
		CHECK((char *)DK_ENTRIES(k) == k->dk_indices + 8);
		k->dk_kind = DICT_KEYS_UNICODE;
		CHECK((char *)DK_UNICODE_ENTRIES(k) == k->dk_indices + 8);
	}
	O("entry_size", sizeof(PyDictKeyEntry));
	O("entry_key", offsetof(PyDictKeyEntry, me_key));
	O("entry_value", offsetof(PyDictKeyEntry, me_value));
	O("uentry_size", sizeof(PyDictUnicodeEntry));
	O("uentry_key", offsetof(PyDictUnicodeEntry, me_key));
	O("uentry_value", offsetof(PyDictUnicodeEntry, me_value));
#else
	/* Not in 3.10's installed headers (Objects/dict-common.h): the script read these from
	 * the DWARF of the interpreter's libpython and passed them in. */
	O("keys_size", CT_DK_SIZE);
	ON("keys_log2_size");
	ON("keys_log2_index_bytes");
	ON("keys_kind");
	O("keys_nentries", CT_DK_NENTRIES);
	O("keys_indices", CT_DK_INDICES);
	O("kind_general", 0);
	O("kind_unicode", 0xff);
	O("kind_split", 0xff);
	O("entry_size", CT_DKE_SIZE);
	O("entry_key", CT_DKE_KEY);
	O("entry_value", CT_DKE_VALUE);
	ON("uentry_size");
	ON("uentry_key");
	ON("uentry_value");
#endif
	O("cfunc_ml", offsetof(PyCFunctionObject, m_ml));
	O("methoddef_name", offsetof(PyMethodDef, ml_name));
	O("func_name", offsetof(PyFunctionObject, func_name));
	O("func_qualname", offsetof(PyFunctionObject, func_qualname));
	O("func_code", offsetof(PyFunctionObject, func_code));
	O("method_func", offsetof(PyMethodObject, im_func));
	O("descr_name", offsetof(PyDescrObject, d_name));
	/* Tuples and ints: placement tuples of parameters (user/python/params.c). */
	_Static_assert(sizeof(digit) == 4, "uint32_t digits");
	O("tuple_items", offsetof(PyTupleObject, ob_item));
#if PY_VERSION_HEX >= 0x030c0000
	_Static_assert(MEMBER_SIZE(PyLongObject, long_value.lv_tag) == 8, "uintptr_t lv_tag");
	O("long_size", offsetof(PyLongObject, long_value.lv_tag));
	O("long_digits", offsetof(PyLongObject, long_value.ob_digit));
	O("long_tagged", 1);
	O("long_tag_shift", _PyLong_NON_SIZE_BITS);
#else
	O("long_size", offsetof(PyLongObject, ob_base.ob_size));
	O("long_digits", offsetof(PyLongObject, ob_digit));
	O("long_tagged", 0);
	O("long_tag_shift", 0);
#endif
	O("long_shift", PyLong_SHIFT);
	return 0;
}

int main(void)
{
	printf("\t.major = %d,\n\t.minor = %d,\n", PY_MAJOR_VERSION, PY_MINOR_VERSION);
	F("runtime_interp_head", offsetof(_PyRuntimeState, interpreters.head));
#if PY_VERSION_HEX >= 0x030b0000
	F("interp_threads_head", offsetof(PyInterpreterState, threads.head));
#else
	F("interp_threads_head", offsetof(PyInterpreterState, tstate_head));
#endif
	F("tstate_next", offsetof(PyThreadState, next));
#if PY_VERSION_HEX >= 0x030b0000
	_Static_assert(MEMBER_SIZE(PyThreadState, native_thread_id) == 8, "unsigned long");
	F("tstate_native_tid", offsetof(PyThreadState, native_thread_id));
#else
	N("tstate_native_tid");
#endif
#if PY_VERSION_HEX >= 0x030d0000
	F("tstate_frame", offsetof(PyThreadState, current_frame));
	N("cframe_current_frame");
#elif PY_VERSION_HEX >= 0x030b0000
	F("tstate_frame", offsetof(PyThreadState, cframe));
	F("cframe_current_frame", offsetof(_PyCFrame, current_frame));
#else
	F("tstate_frame", offsetof(PyThreadState, frame));
	N("cframe_current_frame");
#endif
#if PY_VERSION_HEX >= 0x030d0000
	F("frame_code", offsetof(_PyInterpreterFrame, f_executable));
	F("frame_previous", offsetof(_PyInterpreterFrame, previous));
	F("frame_instr", offsetof(_PyInterpreterFrame, instr_ptr));
#elif PY_VERSION_HEX >= 0x030b0000
	F("frame_code", offsetof(_PyInterpreterFrame, f_code));
	F("frame_previous", offsetof(_PyInterpreterFrame, previous));
	F("frame_instr", offsetof(_PyInterpreterFrame, prev_instr));
#else
	F("frame_code", offsetof(PyFrameObject, f_code));
	F("frame_previous", offsetof(PyFrameObject, f_back));
	_Static_assert(MEMBER_SIZE(PyFrameObject, f_lasti) == 4, "int f_lasti");
	F("frame_instr", offsetof(PyFrameObject, f_lasti));
#endif
#if PY_VERSION_HEX >= 0x030c0000
	F("frame_owner", offsetof(_PyInterpreterFrame, owner));
	F("frame_localsplus", offsetof(_PyInterpreterFrame, localsplus));
#elif PY_VERSION_HEX >= 0x030b0000
	/* pyabi.h: CT_PY_NONE before 3.12, which spares the walker a read per frame. */
	printf("\t/* owner exists at %lu but 3.11 has no C-stack shim frames */\n",
	       (unsigned long)offsetof(_PyInterpreterFrame, owner));
	N("frame_owner");
	F("frame_localsplus", offsetof(_PyInterpreterFrame, localsplus));
#else
	N("frame_owner");
	F("frame_localsplus", offsetof(PyFrameObject, f_localsplus));
#endif
#if PY_VERSION_HEX >= 0x030c0000
	F("owner_cstack", FRAME_OWNED_BY_CSTACK);
#else
	printf("\t.owner_cstack = 0xff,\n");
#endif
	F("instr_is_index", PY_VERSION_HEX < 0x030b0000);

	F("code_filename", offsetof(PyCodeObject, co_filename));
	F("code_name", offsetof(PyCodeObject, co_name));
#if PY_VERSION_HEX >= 0x030b0000
	F("code_qualname", offsetof(PyCodeObject, co_qualname));
#else
	N("code_qualname");
#endif
	F("code_linetable", offsetof(PyCodeObject, co_linetable));
	_Static_assert(MEMBER_SIZE(PyCodeObject, co_firstlineno) == 4, "int co_firstlineno");
	F("code_firstlineno", offsetof(PyCodeObject, co_firstlineno));
#if PY_VERSION_HEX >= 0x030b0000
	F("code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
	N("code_code");
#else
	N("code_adaptive");
	F("code_code", offsetof(PyCodeObject, co_code));
#endif
	F("bytes_data", offsetof(PyBytesObject, ob_sval));
	F("bytes_size", offsetof(PyBytesObject, ob_base.ob_size));
	F("unicode_state", offsetof(PyASCIIObject, state));
	F("unicode_length", offsetof(PyASCIIObject, length));
	F("unicode_ascii_data", sizeof(PyASCIIObject));
	F("unicode_compact_data", sizeof(PyCompactUnicodeObject));
	F("type_name", offsetof(PyTypeObject, tp_name));
	F("object_type", offsetof(PyObject, ob_type));
	/* pthread_self() of the thread: glibc's TCB, which is what fs points to. 3.10 has no
	 * native_thread_id; the walker matches this against the task's fs base instead. */
	F("tstate_thread_id", offsetof(PyThreadState, thread_id));
	/* The function a frame runs: --ops looks through a functools.wraps wrapper by it. */
#if PY_VERSION_HEX >= 0x030c0000
	F("frame_func", offsetof(_PyInterpreterFrame, f_funcobj));
#elif PY_VERSION_HEX >= 0x030b0000
	F("frame_func", offsetof(_PyInterpreterFrame, f_func));
#else
	N("frame_func");
#endif
	/* Known code objects (pyabi.h): co_version, a counter unique to each code object made
	 * (3.12+); before it, the cached hashes of its name and file strings. */
#if PY_VERSION_HEX >= 0x030c0000
	_Static_assert(MEMBER_SIZE(PyCodeObject, co_version) == 4, "uint32_t co_version");
	F("code_version", offsetof(PyCodeObject, co_version));
#else
	N("code_version");
#endif
	F("unicode_hash", offsetof(PyASCIIObject, hash));
	/* 3.11+ keep a kind byte per local (a bytes object): a first local that is neither a cell
	 * nor a free variable holds its object itself, and the walker need not look inside. */
#if PY_VERSION_HEX >= 0x030b0000
	F("code_localspluskinds", offsetof(PyCodeObject, co_localspluskinds));
	F("fast_cell_kinds", CO_FAST_CELL | CO_FAST_FREE);
#else
	N("code_localspluskinds");
	F("fast_cell_kinds", 0);
#endif
	/* Not a struct field: checked equal across versions by the script. */
	printf("#state %lu %lu %lu\n", state_shift(0), state_shift(1), state_shift(2));
#if PY_VERSION_HEX >= 0x030d0000
#define D(name, m) printf("#debug\t.%s = %lu,\n", name, (unsigned long)offsetof(_Py_DebugOffsets, m))
	_Static_assert(offsetof(_PyRuntimeState, debug_offsets) == 0, "debug offsets first");
	printf("#debug\t.major = %d,\n#debug\t.minor = %d,\n", PY_MAJOR_VERSION, PY_MINOR_VERSION);
	printf("#debug\t.size = %lu,\n", (unsigned long)sizeof(_Py_DebugOffsets));
	D("version", version);
	D("free_threaded", free_threaded);
	D("runtime_size", runtime_state.size);
	D("runtime_interp_head", runtime_state.interpreters_head);
	D("interp_size", interpreter_state.size);
	D("interp_threads_head", interpreter_state.threads_head);
	D("tstate_size", thread_state.size);
	D("tstate_next", thread_state.next);
	D("tstate_native_tid", thread_state.native_thread_id);
	D("tstate_frame", thread_state.current_frame);
	D("frame_size", interpreter_frame.size);
	D("frame_previous", interpreter_frame.previous);
	D("frame_code", interpreter_frame.executable);
	D("frame_instr", interpreter_frame.instr_ptr);
	D("frame_localsplus", interpreter_frame.localsplus);
	D("frame_owner", interpreter_frame.owner);
	D("code_size", code_object.size);
	D("code_filename", code_object.filename);
	D("code_name", code_object.name);
	D("code_qualname", code_object.qualname);
	D("code_linetable", code_object.linetable);
	D("code_firstlineno", code_object.firstlineno);
	D("code_adaptive", code_object.co_code_adaptive);
	D("object_size", pyobject.size);
	D("object_type", pyobject.ob_type);
	D("type_size", type_object.size);
	D("type_name", type_object.tp_name);
	D("bytes_obj_size", bytes_object.size);
	D("bytes_size", bytes_object.ob_size);
	D("bytes_data", bytes_object.ob_sval);
	D("unicode_size", unicode_object.size);
	D("unicode_state", unicode_object.state);
	D("unicode_length", unicode_object.length);
	D("unicode_ascii_data", unicode_object.asciiobject_size);
#endif
	return obj_offsets();
}
PROBE

# 3.10 keeps PyDictKeysObject and PyDictKeyEntry in Objects/dict-common.h, which is not
# installed: read them from the DWARF of the build's own libpython (pyenv builds keep debug
# info) with gdb, as -D flags for the probe. Prints nothing for a build whose headers have
# them (3.11+: internal/pycore_dict.h).
dwarf_dict_keys() {
	local label=$1 cfg=$2 inc=$3 lib out
	[[ -f $inc/internal/pycore_dict.h ]] && return 0
	lib=$(find "$("$cfg" --prefix)/lib" -maxdepth 1 -name 'libpython3*.so.1.0' | head -n 1)
	if [[ -z $lib ]] || ! command -v gdb >/dev/null; then
		echo "gen-pyoffsets: $label: dict layout needs gdb and libpython's debug info" >&2
		return 1
	fi
	out=$(gdb -nx -batch \
		-ex 'print (long)sizeof(((struct _dictkeysobject *)0)->dk_size)' \
		-ex 'print (long)sizeof(((struct _dictkeysobject *)0)->dk_nentries)' \
		-ex 'print (long)&((struct _dictkeysobject *)0)->dk_size' \
		-ex 'print (long)&((struct _dictkeysobject *)0)->dk_nentries' \
		-ex 'print (long)&((struct _dictkeysobject *)0)->dk_indices' \
		-ex 'print (long)sizeof(PyDictKeyEntry)' \
		-ex 'print (long)&((PyDictKeyEntry *)0)->me_key' \
		-ex 'print (long)&((PyDictKeyEntry *)0)->me_value' \
		"$lib" 2>&1 | sed -n 's/^\$[0-9]* = \([0-9]*\)$/\1/p' | tr '\n' ' ')
	# shellcheck disable=SC2086 # one word per value
	set -- $out
	if [[ $# -ne 8 || $1 -ne 8 || $2 -ne 8 ]]; then
		echo "gen-pyoffsets: $label: unexpected dict layout from $lib: $out" >&2
		return 1
	fi
	echo "-DCT_DK_SIZE=$3 -DCT_DK_NENTRIES=$4 -DCT_DK_INDICES=$5" \
		"-DCT_DKE_SIZE=$6 -DCT_DKE_KEY=$7 -DCT_DKE_VALUE=$8"
}

declare -A BODY STATE DEBUG OBJ LABEL EXTRA_BODY
EXTRA=()
for entry in "${INTERPS[@]}"; do
	read -r label cfg <<<"$entry"
	if [[ ! -x $cfg ]]; then
		echo "gen-pyoffsets: $label: $cfg not found, skipped" >&2
		continue
	fi
	incs=$("$cfg" --includes)
	inc1=${incs%% *}
	dkdefs=$(dwarf_dict_keys "$label" "$cfg" "${inc1#-I}")
	# The internal headers include each other by bare name ("pycore_xxx.h").
	# shellcheck disable=SC2086
	$CC -std=gnu11 -w $incs -I"${inc1#-I}/internal" $dkdefs "$TMP/probe.c" \
		-o "$TMP/probe-$label"
	"$TMP/probe-$label" >"$TMP/out-$label"
	body=$(grep -v '^#' "$TMP/out-$label")
	minor=$(sed -n 's/^\t\.minor = \([0-9]*\),$/\1/p' "$TMP/out-$label")
	state=$(sed -n 's/^#state //p' "$TMP/out-$label")
	debug=$(sed -n 's/^#debug//p' "$TMP/out-$label")
	obj=$(sed -n 's/^#obj//p' "$TMP/out-$label")
	# ct_py_objoffsets_for() keys on major.minor too, and no caller picks by path yet.
	if [[ -n ${OBJ[$minor]:-} && ${OBJ[$minor]} != "$obj" ]]; then
		echo "gen-pyoffsets: object layout differs between ${LABEL[$minor]} and $label:" >&2
		diff <(echo "${OBJ[$minor]}") <(echo "$obj") >&2 || true
		exit 1
	fi
	if [[ -n ${BODY[$minor]:-} ]]; then
		if [[ ${BODY[$minor]} != "$body" ]]; then
			echo "gen-pyoffsets: WARNING: LAYOUT DIFFERS between ${LABEL[$minor]} and $label:" >&2
			diff <(echo "${BODY[$minor]}") <(echo "$body") >&2 || true
			EXTRA+=("$minor ${label//[-.]/_} $label")
			EXTRA_BODY["$label"]=$body
			continue
		fi
		LABEL[$minor]+=", $label"
		continue
	fi
	BODY[$minor]=$body
	STATE[$minor]=$state
	DEBUG[$minor]=$debug
	OBJ[$minor]=$obj
	LABEL[$minor]=$label
done

minors=$(printf '%s\n' "${!BODY[@]}" | sort -n)
first_state=
for m in $minors; do
	if [[ -z $first_state ]]; then
		first_state=${STATE[$m]}
	elif [[ ${STATE[$m]} != "$first_state" ]]; then
		echo "gen-pyoffsets: PyASCIIObject.state bit layout differs in 3.$m" >&2
		exit 1
	fi
done
read -r kind_shift compact_bit ascii_bit <<<"$first_state"

{
	cat <<HDR
/* SPDX-License-Identifier: MIT */
/*
 * GENERATED by scripts/gen-pyoffsets.sh from each interpreter's own headers; do not edit.
 * The script's header comment explains what moved between versions and why.
 */
#ifndef COMMTRACE_PYOFFSETS_H
#define COMMTRACE_PYOFFSETS_H

#include "commtrace/pyabi.h"
#include "commtrace/pyobjabi.h"

/* PyASCIIObject.state bit fields, identical in every version below. */
#define CT_PY_STATE_KIND_SHIFT	$kind_shift
#define CT_PY_STATE_KIND_MASK	0x7
#define CT_PY_STATE_COMPACT_BIT $compact_bit
#define CT_PY_STATE_ASCII_BIT	$ascii_bit

HDR
	for m in $minors; do
		echo "/* ${LABEL[$m]} */"
		echo "static const struct ct_py_offsets ct_py_offsets_3_$m = {"
		echo "${BODY[$m]}"
		echo "};"
		echo
	done
	for x in "${EXTRA[@]}"; do
		read -r m ident label <<<"$x"
		echo "/* $label: DIFFERS from ${LABEL[$m]}, not returned by ct_py_offsets_for() */"
		echo "static const struct ct_py_offsets ct_py_offsets_3_${m}_$ident = {"
		echo "${EXTRA_BODY[$label]}"
		echo "};"
		echo
	done
	cat <<'HDR'
/*
 * Where the fields that out-of-process tools need sit inside _Py_DebugOffsets, the table
 * CPython 3.13+ places at the start of _PyRuntime. Its own layout changes between minor
 * versions, so it is generated per version too; user space reads it, the BPF side does not.
 */
struct ct_py_debug_layout {
	__u16 major, minor;
	__u16 size; /* sizeof(_Py_DebugOffsets) */
	__u16 version, free_threaded;
	__u16 runtime_size, runtime_interp_head;
	__u16 interp_size, interp_threads_head;
	__u16 tstate_size, tstate_next, tstate_native_tid, tstate_frame;
	__u16 frame_size, frame_previous, frame_code, frame_instr, frame_localsplus, frame_owner;
	__u16 code_size, code_filename, code_name, code_qualname, code_linetable;
	__u16 code_firstlineno, code_adaptive;
	__u16 object_size, object_type, type_size, type_name;
	__u16 bytes_obj_size, bytes_size, bytes_data;
	__u16 unicode_size, unicode_state, unicode_length, unicode_ascii_data;
};

HDR
	for m in $minors; do
		[[ -n ${DEBUG[$m]} ]] || continue
		echo "static const struct ct_py_debug_layout ct_py_debug_layout_3_$m = {"
		echo "${DEBUG[$m]}"
		echo "};"
		echo
	done
	echo "/* The generated table of a CPython version, or NULL for one this build does not know. */"
	echo "static inline const struct ct_py_offsets *ct_py_offsets_for(int major, int minor)"
	echo "{"
	echo "	if (major != 3)"
	echo "		return 0;"
	echo "	switch (minor) {"
	for m in $minors; do
		echo "	case $m:"
		echo "		return &ct_py_offsets_3_$m;"
	done
	echo "	default:"
	echo "		return 0;"
	echo "	}"
	echo "}"
	echo
	echo "/* The newest _Py_DebugOffsets layout known, tried for versions newer than the tables. */"
	last=
	for m in $minors; do [[ -n ${DEBUG[$m]} ]] && last=$m; done
	echo "static inline const struct ct_py_debug_layout *ct_py_debug_layout_for(int major, int minor)"
	echo "{"
	echo "	if (major != 3)"
	echo "		return 0;"
	echo "	switch (minor) {"
	for m in $minors; do
		[[ -n ${DEBUG[$m]} ]] || continue
		echo "	case $m:"
		echo "		return &ct_py_debug_layout_3_$m;"
	done
	echo "	default:"
	echo "		return minor > $last ? &ct_py_debug_layout_3_$last : 0;"
	echo "	}"
	echo "}"
	echo
	echo "/* Object layouts (pyobjabi.h), user space only: the labels above say which builds. */"
	for m in $minors; do
		echo "static const struct ct_py_objoffsets ct_py_objoffsets_3_$m = {"
		echo "${OBJ[$m]}"
		echo "};"
		echo
	done
	echo "/* The object layout of a CPython version, or NULL for one this build does not know. */"
	echo "static inline const struct ct_py_objoffsets *ct_py_objoffsets_for(int major, int minor)"
	echo "{"
	echo "	if (major != 3)"
	echo "		return 0;"
	echo "	switch (minor) {"
	for m in $minors; do
		echo "	case $m:"
		echo "		return &ct_py_objoffsets_3_$m;"
	done
	echo "	default:"
	echo "		return 0;"
	echo "	}"
	echo "}"
	echo
	echo "#endif"
} >"$TMP/pyoffsets.h"
# The committed file passes `make lint` like any other header.
if command -v clang-format >/dev/null; then
	clang-format --assume-filename="$OUT" <"$TMP/pyoffsets.h" >"$TMP/formatted.h"
	mv "$TMP/formatted.h" "$TMP/pyoffsets.h"
fi
mv "$TMP/pyoffsets.h" "$OUT"
# shellcheck disable=SC2086 # one word per minor version
echo "gen-pyoffsets: wrote $OUT for $(printf '3.%s ' $minors)" >&2
