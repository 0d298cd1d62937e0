// SPDX-License-Identifier: MIT
/* Names of the objects Python frames point to, read from the target with process_vm_readv. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commtrace/pyoffsets.h"
#include "python/objects.h"
#include "python/pydict.h"
#include "python/pyproc.h"
#include "python/symbolize.h"
#include "util/hash.h"

#define PY_CALLABLE_DEPTH 2 /* a bound method of a bound method is as deep as it goes */

static int rd64(pid_t pid, uint64_t addr, uint64_t *v)
{
	return ct_py_read_mem(pid, addr, v, sizeof(*v));
}

/* The instance attributes of obj, wherever this version keeps them. */
static int instance_attrs(pid_t pid, const struct ct_py_objoffsets *oo,
			  const struct ct_py_offsets *o, uint64_t obj, struct ct_py_dict_view *v)
{
	uint64_t type, flags, slot, keys;
	int64_t off;
	int err = ct_py_type_of(pid, oo, o, obj, &type, &flags);

	if (err)
		return err;
	if (oo->tpflags_managed_dict && (flags & oo->tpflags_managed_dict)) {
		/* 3.11+: the slot 3 words before the object (past the GC header's end). */
		err = rd64(pid, obj + (uint64_t)(int64_t)oo->managed_dict, &slot);
		if (err)
			return err;
		if (oo->managed_values_tag && (slot & oo->managed_values_tag)) {
			/* 3.12: no dict yet, the slot holds the values pointer - tag. */
			err = rd64(pid, type + oo->ht_cached_keys, &keys);
			return err ? err
				   : ct_py_values_view(pid, oo, keys, slot + oo->managed_values_tag,
						       v);
		}
		/* A materialized dict is authoritative (3.13: it may share the inline values). */
		if (slot)
			return ct_py_dict_view(pid, oo, o, slot, v);
		if (oo->managed_values) {
			/* 3.11: values in the slot before the dict's. */
			err = rd64(pid, obj + (uint64_t)(int64_t)oo->managed_values, &slot);
			if (err || !slot)
				return err ? err : -ENOENT;
		} else if (oo->inline_values != CT_PY_NONE && (flags & oo->tpflags_inline_values)) {
			uint8_t valid;

			/* 3.13: embedded right after the object; invalid once a dict took over. */
			slot = obj + oo->inline_values;
			err = ct_py_read_mem(pid, slot + oo->values_valid, &valid, 1);
			if (err || !valid)
				return err ? err : -ENOENT;
		} else {
			return -ENOENT;
		}
		err = rd64(pid, type + oo->ht_cached_keys, &keys);
		return err ? err : ct_py_values_view(pid, oo, keys, slot, v);
	}
	err = rd64(pid, type + oo->type_dictoffset, (uint64_t *)&off);
	if (err)
		return err;
	if (!off)
		return -ENOENT;
	if (off < 0) {
		/* From the end of a variable-size object, as _PyObject_GetDictPtr() computes it:
		 * basicsize + |ob_size| * itemsize, rounded up to a pointer. */
		int64_t size, base, item;

		err = rd64(pid, obj + oo->var_size, (uint64_t *)&size);
		if (!err)
			err = rd64(pid, type + oo->type_basicsize, (uint64_t *)&base);
		if (!err)
			err = rd64(pid, type + oo->type_itemsize, (uint64_t *)&item);
		if (err)
			return err;
		if (size < 0)
			size = -size;
		if (base < 0 || item < 0 || size > (1LL << 40) || item > (1LL << 20))
			return -EINVAL;
		off += (base + size * item + 7) & ~7LL;
	}
	err = rd64(pid, obj + (uint64_t)off, &slot);
	if (err || !slot)
		return err ? err : -ENOENT;
	return ct_py_dict_view(pid, oo, o, slot, v);
}

/*
 * A __slots__ attribute (DTensor keeps _local_tensor and _spec so): a member descriptor of
 * that name in the dict of a type of the object's MRO, whose PyMemberDef gives the offset
 * of the PyObject * in the object. A type no later than 16 deep in the MRO.
 */
#define SLOT_MRO_MAX 16

/* Where type keeps the slot m names (its one name): 0 and *off, -ENOENT where none does, or
 * -errno. */
static int slot_offset(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		       uint64_t type, struct ct_py_dict_match *m, uint64_t *off)
{
	uint64_t mro, types[SLOT_MRO_MAX], dict, def;
	char tn[32];
	size_t n = 0;
	int32_t kind;
	int err = rd64(pid, type + oo->type_mro, &mro);

	if (!err)
		err = ct_py_tuple_items(pid, oo, o, mro, types, SLOT_MRO_MAX, &n);
	for (size_t i = 0; !err && i < n; i++) {
		struct ct_py_dict_view v;

		err = rd64(pid, types[i] + oo->type_dict, &dict);
		if (err || !dict)
			continue; /* 3.12+: a static type keeps its dict elsewhere */
		err = ct_py_dict_view(pid, oo, o, dict, &v);
		if (!err)
			err = ct_py_dict_scan(pid, o, &v, m);
		if (err == -ENOENT) {
			err = 0;
			continue;
		}
		if (err)
			break;
		/* A member descriptor, holding an object (not a property, not an int slot). */
		if (ct_py_read_type_name(pid, o, m->found[0], tn, sizeof(tn)) ||
		    strcmp(tn, "member_descriptor") ||
		    rd64(pid, m->found[0] + oo->descr_member, &def) || !def ||
		    ct_py_read_mem(pid, def + oo->memberdef_type, &kind, sizeof(kind)) ||
		    kind != (int32_t)oo->member_object_ex ||
		    rd64(pid, def + oo->memberdef_offset, off) || !*off || *off > (1u << 16))
			return -ENOENT;
		return 0;
	}
	return err ? err : -ENOENT;
}

/*
 * slot_offset()'s answers, per (pid, type, tp_version_tag, name). The walk reads every
 * dict of the MRO, hundreds of keys for a torch tensor type, for each attribute an object
 * lacks (`_placements` of a DTensor). A type's version tag changes when it or a base is
 * modified, and a process never gives one tag to two types, so an answer kept under the
 * same nonzero tag is what the walk would find. Direct-mapped: a collision only costs a
 * walk.
 */
#define SLOT_MEMO      512
#define SLOT_MEMO_NAME 32

static struct slot_memo {
	pid_t pid;
	uint32_t tag;
	uint64_t type;
	uint64_t off; /* 0: no such slot */
	char name[SLOT_MEMO_NAME];
} slot_memo[SLOT_MEMO];

int ct_py_slot_offset(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		      uint64_t obj, const char *name, uint64_t *offset)
{
	struct slot_memo *e = NULL;
	struct ct_py_dict_match one, *m = &one;
	uint64_t type, off = 0;
	uint32_t tag = 0;
	int err;

	if (!oo->type_dict || !oo->descr_member || ct_py_match_names(m, &name, 1))
		return -ENOENT;
	err = rd64(pid, obj + o->object_type, &type);
	if (err)
		return err;
	if (m->lens[0] < SLOT_MEMO_NAME &&
	    !ct_py_read_mem(pid, type + oo->type_version_tag, &tag, sizeof(tag)) && tag) {
		uint64_t h = ct_hash_mix(type ^ tag, (uint64_t)pid);

		for (size_t i = 0; i < m->lens[0]; i++)
			h = h * 31 + (unsigned char)name[i];
		e = &slot_memo[h % SLOT_MEMO];
	}
	if (e && e->pid == pid && e->type == type && e->tag == tag && !strcmp(e->name, name)) {
		off = e->off;
		err = off ? 0 : -ENOENT;
	} else {
		err = slot_offset(pid, oo, o, type, m, &off);
		if (e && (!err || err == -ENOENT)) {
			*e = (struct slot_memo){
			    .pid = pid, .tag = tag, .type = type, .off = err ? 0 : off};
			memcpy(e->name, name, m->lens[0]);
		}
	}
	*offset = off;
	return err;
}

static int slot_attr(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		     uint64_t obj, const char *name, uint64_t *value)
{
	uint64_t off;
	int err = ct_py_slot_offset(pid, oo, o, obj, name, &off);

	if (err)
		return err;
	err = rd64(pid, obj + off, value);
	return err ? err : *value ? 0 : -ENOENT;
}

int ct_py_getattrs(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		   uint64_t obj, const char *const *names, size_t n, uint64_t *values)
{
	struct ct_py_dict_match m;
	struct ct_py_dict_view v;
	int err, found = 0;

	if (n && n <= CT_PY_GETATTRS_MAX)
		memset(values, 0, n * sizeof(*values));
	if (!oo || !o || !obj || ct_py_match_names(&m, names, n))
		return -EINVAL;
	err = instance_attrs(pid, oo, o, obj, &v);
	if (!err)
		err = ct_py_dict_scan(pid, o, &v, &m);
	if (err == -ESRCH)
		return err;
	for (size_t i = 0; i < n; i++) {
		values[i] = m.found[i];
		if (!values[i] && slot_attr(pid, oo, o, obj, names[i], &values[i]) == -ESRCH)
			return -ESRCH;
		found += values[i] != 0;
	}
	return found;
}

int ct_py_getattr(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		  uint64_t obj, const char *name, uint64_t *value)
{
	int found = ct_py_getattrs(pid, oo, o, obj, &name, 1, value);

	return found < 0 ? found : found ? 0 : -ENOENT;
}

/* tp_name of obj's type, compared against want. */
static int type_is(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		   uint64_t obj, const char *want)
{
	char tn[CT_PY_TPNAME_MAX];
	uint64_t type, flags;
	int err = ct_py_type_of(pid, oo, o, obj, &type, &flags);

	if (!err)
		err = ct_py_type_tpname(pid, o, type, tn, sizeof(tn));
	if (err)
		return err;
	return strcmp(tn, want) ? -EINVAL : 0;
}

int ct_py_tuple_items(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		      uint64_t tuple, uint64_t *items, size_t max, size_t *n)
{
	int64_t size;
	int err;

	*n = 0;
	if (!oo || !o || !tuple)
		return -EINVAL;
	err = type_is(pid, oo, o, tuple, "tuple");
	if (!err)
		err = rd64(pid, tuple + oo->var_size, (uint64_t *)&size);
	if (err)
		return err;
	if (size < 0)
		return -EINVAL;
	if ((uint64_t)size > max)
		return -E2BIG;
	if (size) {
		err = ct_py_read_mem(pid, tuple + oo->tuple_items, items,
				     (size_t)size * sizeof(*items));
		if (err)
			return err;
	}
	*n = (size_t)size;
	return 0;
}

int ct_py_read_int(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		   uint64_t obj, int64_t *value)
{
	uint32_t digits[3]; /* digit: uint32_t (the generator asserts it) */
	uint64_t word, ndigits, mag = 0;
	bool neg;
	int err;

	*value = 0;
	if (!oo || !o || !obj || !oo->long_shift || oo->long_shift > 30)
		return -EINVAL;
	err = type_is(pid, oo, o, obj, "int");
	if (!err)
		err = rd64(pid, obj + oo->long_size, &word);
	if (err)
		return err;
	if (oo->long_tagged) {
		/* 3.12+: sign 0 positive, 1 zero, 2 negative; the digit count above it. */
		neg = (word & 3) == 2;
		ndigits = word >> oo->long_tag_shift;
	} else {
		neg = (int64_t)word < 0;
		ndigits = neg ? (uint64_t)(-(int64_t)word) : word;
	}
	/* Up to 90 bits read; values past int64 are refused. */
	if (ndigits > 3)
		return -ERANGE;
	if (ndigits) {
		err = ct_py_read_mem(pid, obj + oo->long_digits, digits, ndigits * 4);
		if (err)
			return err;
	}
	for (uint64_t i = ndigits; i-- > 0;) {
		if (mag >> (63 - oo->long_shift))
			return -ERANGE;
		mag = mag << oo->long_shift | (digits[i] & ((1u << oo->long_shift) - 1));
	}
	if (mag > (uint64_t)INT64_MAX)
		return -ERANGE;
	*value = neg ? -(int64_t)mag : (int64_t)mag;
	return 0;
}

/* Breadth-first search of parent's submodules for child, bounded. */
#define MODULE_SEARCH_DEPTH 4	/* "layers.3.mlp.down_proj" is 4 deep */
#define MODULE_SEARCH_MAX   256 /* submodules looked into */

struct module_search {
	pid_t pid;
	const struct ct_py_objoffsets *oo;
	const struct ct_py_offsets *o;
	uint64_t child;
	struct {
		uint64_t obj;
		int parent; /* index in q, -1: the root of the search */
		uint64_t key;
	} q[MODULE_SEARCH_MAX];
	int n, at, found;
};

static int search_entry(void *ctx, uint64_t key, uint64_t val)
{
	struct module_search *m = ctx;

	if (m->n == MODULE_SEARCH_MAX)
		return 1;
	m->q[m->n].obj = val;
	m->q[m->n].parent = m->at;
	m->q[m->n].key = key;
	if (val == m->child) {
		m->found = m->n++;
		return 1;
	}
	m->n++;
	return 0;
}

static int depth_of(const struct module_search *m, int i)
{
	int d = 0;

	for (; i >= 0; i = m->q[i].parent)
		d++;
	return d;
}

int ct_py_module_name(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		      uint64_t parent, uint64_t child, char *buf, size_t len)
{
	struct module_search *m;
	int chain[MODULE_SEARCH_DEPTH], nchain = 0, err = -ENOENT;
	size_t off = 0;

	if (!len)
		return -EINVAL;
	buf[0] = '\0';
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	*m = (struct module_search){.pid = pid, .oo = oo, .o = o, .child = child, .found = -1};
	/* The direct children first, then theirs: a ModuleList's item is found as "3" of
	 * "layers", named "layers.3". */
	for (m->at = -1; m->found < 0 && m->at < m->n; m->at++) {
		uint64_t obj = m->at < 0 ? parent : m->q[m->at].obj, modules;

		if (m->at >= 0 && depth_of(m, m->at) >= MODULE_SEARCH_DEPTH)
			continue;
		int rc = ct_py_getattr(pid, oo, o, obj, "_modules", &modules);

		if (!rc)
			rc = ct_py_dict_foreach(pid, oo, o, modules, search_entry, m);
		if (rc && m->at < 0) { /* the parent itself has no readable _modules */
			err = rc;
			break;
		}
	}
	if (m->found >= 0) {
		for (int i = m->found; i >= 0 && nchain < MODULE_SEARCH_DEPTH; i = m->q[i].parent)
			chain[nchain++] = i;
		err = 0;
		for (int k = nchain - 1; k >= 0 && !err; k--) {
			if (off && off + 1 < len)
				buf[off++] = '.';
			err = ct_py_read_str(pid, o, m->q[chain[k]].key, buf + off, len - off);
			off += strlen(buf + off);
		}
	}
	free(m);
	return err;
}

static bool name_in(const char *name, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(name, *list))
			return true;
	return false;
}

/* PyCFunctionObject and the types that start with one (PyCMethodObject, Cython's). */
static const char *const cfunc_types[] = {"builtin_function_or_method", "builtin_method",
					  "cython_function_or_method", NULL};
/* PyDescr_COMMON: d_name. */
static const char *const descr_types[] = {"method_descriptor", "classmethod_descriptor",
					  "wrapper_descriptor", NULL};

static int callable_name(pid_t pid, const struct ct_py_objoffsets *oo,
			 const struct ct_py_offsets *o, uint64_t obj, char *buf, size_t len,
			 int depth)
{
	char tn[CT_PY_TPNAME_MAX];
	uint64_t type, flags, p;
	int err = ct_py_type_of(pid, oo, o, obj, &type, &flags);

	if (!err)
		err = ct_py_type_tpname(pid, o, type, tn, sizeof(tn));
	if (err)
		return err;
	if (name_in(tn, cfunc_types)) {
		err = rd64(pid, obj + oo->cfunc_ml, &p);
		if (!err && p)
			err = rd64(pid, p + oo->methoddef_name, &p);
		if (!err && p && !ct_py_read_cstr(pid, p, buf, len) && buf[0])
			return 0;
	} else if (!strcmp(tn, "function")) {
		if (!rd64(pid, obj + oo->func_name, &p) && !ct_py_read_str(pid, o, p, buf, len))
			return 0;
	} else if (!strcmp(tn, "method")) {
		if (depth < PY_CALLABLE_DEPTH && !rd64(pid, obj + oo->method_func, &p) && p &&
		    !callable_name(pid, oo, o, p, buf, len, depth + 1))
			return 0;
	} else if (name_in(tn, descr_types)) {
		if (!rd64(pid, obj + oo->descr_name, &p) && !ct_py_read_str(pid, o, p, buf, len))
			return 0;
	} else if (flags & oo->tpflags_type_subclass) {
		/* A class: its own tp_name, "module.Name" for static types, the name for heap. */
		char cn[CT_PY_NAME_MAX];

		if (!ct_py_type_tpname(pid, o, obj, cn, sizeof(cn))) {
			const char *dot = strrchr(cn, '.');

			snprintf(buf, len, "%s", dot ? dot + 1 : cn);
			return 0;
		}
	}
	/* torch 2.x OpOverload / OpOverloadPacket keep __name__ in the instance dict
	 * ("addmm.default") and the schema's name in __qualname__ ("aten::addmm"): named as
	 * str() names them, "aten.addmm.default". */
	if (!ct_py_getattr(pid, oo, o, obj, "__name__", &p) &&
	    !ct_py_read_str(pid, o, p, buf, len)) {
		char qn[CT_PY_NAME_MAX], *sep;

		if (!ct_py_getattr(pid, oo, o, obj, "__qualname__", &p) &&
		    !ct_py_read_str(pid, o, p, qn, sizeof(qn)) && (sep = strstr(qn, "::")) &&
		    sep > qn) {
			char nm[CT_PY_NAME_MAX];

			snprintf(nm, sizeof(nm), "%s", buf);
			snprintf(buf, len, "%.*s.%s", (int)(sep - qn), qn, nm);
		}
		return 0;
	}
	snprintf(buf, len, "%s", tn);
	return 0;
}

bool ct_py_is_class(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		    uint64_t obj)
{
	uint64_t type, flags;

	return oo && o && obj && !ct_py_type_of(pid, oo, o, obj, &type, &flags) &&
	       (flags & oo->tpflags_type_subclass);
}

int ct_py_callable_name(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
			uint64_t obj, char *buf, size_t len)
{
	if (!len)
		return -EINVAL;
	buf[0] = '\0';
	if (!oo || !o || !obj)
		return -EINVAL;
	return callable_name(pid, oo, o, obj, buf, len, 0);
}
