/* SPDX-License-Identifier: MIT */
/*
 * Naming the objects a Python frame points to. The BPF walker sends, per frame, `self`
 * (localsplus[0]) and `arg1` (localsplus[1]); at a collective user space wants the name of
 * the op being dispatched ("linear", "add.Tensor") and the attribute name of an nn.Module
 * in its parent ("fc2"). Everything is read from the target with process_vm_readv: the
 * instance __dict__ only (no descriptors, no class lookup, no code run in the target), every
 * read checked, dicts bounded to CT_PY_DICT_MAX entries. The layouts are the generated
 * struct ct_py_objoffsets of the version (ct_py_objoffsets_for(), pyoffsets.h).
 *
 * Errors: -ESRCH/-EFAULT/-EPERM (unreadable), -EINVAL (not the kind of object expected),
 * -ENOENT (no such attribute / key / no instance dict), -E2BIG (a dict over the bound).
 */
#ifndef CT_PYTHON_OBJECTS_H
#define CT_PYTHON_OBJECTS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <stdbool.h>
#include "commtrace/pyabi.h"
#include "commtrace/pyobjabi.h"
#include "python/pydict.h"

/*
 * __name__ of a callable: a builtin's PyMethodDef.ml_name, a Python function's func_name, a
 * bound method's function's, a method descriptor's d_name, a class's own name, else a
 * str "__name__" in the instance dict (torch 2.x OpOverload), else the type's tp_name. 0
 * with a name in buf, or -errno when not even the type could be read.
 */
int ct_py_callable_name(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
			uint64_t obj, char *buf, size_t len);

/* Whether obj is a class (its type has Py_TPFLAGS_TYPE_SUBCLASS). */
bool ct_py_is_class(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		    uint64_t obj);

/*
 * The value (a PyObject address) of attribute name in the instance __dict__ of obj: 3.10 at
 * tp_dictoffset; 3.11+ managed dicts (a dict before the object, or values shared with the
 * type's cached keys: before the object in 3.11/3.12, inline after it in 3.13).
 */
int ct_py_getattr(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		  uint64_t obj, const char *name, uint64_t *value);

/*
 * Where obj's type keeps the __slots__ attribute name (a member descriptor's offset in the
 * object, cached per type version): 0 and *offset, -ENOENT where it has no such slot, or
 * -errno.
 */
int ct_py_slot_offset(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		      uint64_t obj, const char *name, uint64_t *offset);

/*
 * Several attributes of obj found at once (one read of its dict for all): values[i] is that
 * of names[i], 0 where obj has none. How many were found, or -errno (-EINVAL: more than
 * CT_PY_GETATTRS_MAX names, or a name ct_py_getattr() would refuse).
 */
int ct_py_getattrs(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		   uint64_t obj, const char *const *names, size_t n, uint64_t *values);

/*
 * The name of nn.Module child under parent: its key in parent._modules ("fc2", "0"), or,
 * when it is deeper (a ModuleList's item called by its owner's owner), the dotted path of
 * keys ("layers.3"), searched breadth-first up to 4 levels and 256 submodules. On error
 * the caller falls back to the class name.
 */
int ct_py_module_name(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		      uint64_t parent, uint64_t child, char *buf, size_t len);

/* The items of a tuple (exact type tuple): up to max addresses in items, their count in *n;
 * -E2BIG if it holds more than max. */
int ct_py_tuple_items(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		      uint64_t tuple, uint64_t *items, size_t max, size_t *n);

/* The value of an int (exact type int) that fits int64_t; -ERANGE past that. */
int ct_py_read_int(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		   uint64_t obj, int64_t *value);

#endif
