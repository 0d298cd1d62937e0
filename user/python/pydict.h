/* SPDX-License-Identifier: MIT */
/*
 * A dict of the target, read with process_vm_readv: the keys object (3.10's dk_size
 * indices, 3.11+'s log2 sizes and kinds), split values, the entries in insertion order, and
 * str keys compared by name, several names in one pass. What objects.c builds attribute
 * lookups on. Errors as objects.h says; dicts bounded to CT_PY_DICT_MAX entries.
 */
#ifndef CT_PYTHON_PYDICT_H
#define CT_PYTHON_PYDICT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "commtrace/pyabi.h"
#include "commtrace/pyobjabi.h"

#define CT_PY_DICT_MAX	   4096 /* entries scanned in one dict: bigger is refused (-E2BIG) */
#define CT_PY_ATTR_MAX	   128	/* longest attribute name ct_py_getattr() looks up */
#define CT_PY_GETATTRS_MAX 8	/* names ct_py_getattrs() looks up at once */
#define CT_PY_TPNAME_MAX   64	/* type names compared against ("builtin_function_or_method") */

/* One dict's entries as the scan needs them: where they are and how to read a pair. */
struct ct_py_dict_view {
	uint64_t entries;  /* address of entry 0 */
	uint64_t values;   /* split table: address of value 0, else 0 */
	uint32_t nentries; /* entries in use or deleted (dk_nentries) */
	uint32_t nvalues;  /* values readable at values (bounds nentries of a split table) */
	uint16_t esize, ekey, evalue;
};

/* What a scan is looking for: str keys equal to any of n names, or the key of a value. */
struct ct_py_dict_match {
	const char *const *names;
	size_t n, lens[CT_PY_GETATTRS_MAX], maxlen;
	uint64_t found[CT_PY_GETATTRS_MAX]; /* by name: each name's value, 0 where not found */
	uint64_t value;
	uint64_t str_type; /* the target's str type, once a key's tp_name said "str" */
	uint64_t found_key, found_value; /* by value */
};

/* m looking for names, which must be short ASCII names: 0, or -EINVAL. */
int ct_py_match_names(struct ct_py_dict_match *m, const char *const *names, size_t n);

/* obj's type and that type's tp_flags. */
int ct_py_type_of(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		  uint64_t obj, uint64_t *type, uint64_t *flags);

/* tp_name of the type object at type. */
int ct_py_type_tpname(pid_t pid, const struct ct_py_offsets *o, uint64_t type, char *buf,
		      size_t len);

/* The view of the dict (or subclass) at dict; of split values of keys. */
int ct_py_dict_view(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		    uint64_t dict, struct ct_py_dict_view *v);
int ct_py_values_view(pid_t pid, const struct ct_py_objoffsets *oo, uint64_t keys, uint64_t values,
		      struct ct_py_dict_view *v);

/* Scan v until m is satisfied: by names (m->found; -ENOENT when none is), or by value. */
int ct_py_dict_scan(pid_t pid, const struct ct_py_offsets *o, const struct ct_py_dict_view *v,
		    struct ct_py_dict_match *m);

/* The str key under which dict (a dict or subclass, e.g. OrderedDict) holds value. */
int ct_py_dict_key_of(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		      uint64_t dict, uint64_t value, char *buf, size_t len);

/*
 * Call fn(ctx, key, value) for each entry of dict (a dict or subclass) in insertion order,
 * up to CT_PY_DICT_MAX entries (more: -E2BIG); fn returns non-zero to stop early. 0 once
 * the walk ended, -errno when the dict could not be read (fn was not called then).
 */
int ct_py_dict_foreach(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		       uint64_t dict, int (*fn)(void *ctx, uint64_t key, uint64_t value),
		       void *ctx);

#endif
