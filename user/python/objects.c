// SPDX-License-Identifier: MIT
/* Names of the objects Python frames point to, read from the target with process_vm_readv. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commtrace/pyoffsets.h"
#include "python/objects.h"
#include "python/pyproc.h"
#include "python/symbolize.h"

#define PY_TPNAME_MAX	  64  /* type names compared against ("builtin_function_or_method") */
#define PY_KEYS_HDR_MAX	  64  /* PyDictKeysObject up to dk_indices: 40 (3.10), 32 after */
#define PY_STR_HDR_MAX	  128 /* PyASCIIObject: 48 (3.10/3.11), 40 after */
#define PY_DICT_LOG2_MAX  30  /* no dict here has a billion slots: garbage, not a table */
#define PY_CALLABLE_DEPTH 2   /* a bound method of a bound method is as deep as it goes */

/* One dict's entries as the scan needs them: where they are and how to read a pair. */
struct dict_view {
	uint64_t entries;  /* address of entry 0 */
	uint64_t values;   /* split table: address of value 0, else 0 */
	uint32_t nentries; /* entries in use or deleted (dk_nentries) */
	uint32_t nvalues;  /* values readable at values (bounds nentries of a split table) */
	uint16_t esize, ekey, evalue;
};

/* What a scan is looking for: str keys equal to any of n names, or the key of a value. */
struct dict_match {
	const char *const *names;
	size_t n, lens[CT_PY_GETATTRS_MAX], maxlen;
	uint64_t found[CT_PY_GETATTRS_MAX]; /* by name: each name's value, 0 where not found */
	uint64_t value;
	uint64_t str_type; /* the target's str type, once a key's tp_name said "str" */
	uint64_t found_key, found_value; /* by value */
};

/* m looking for names, which must be short ASCII names: 0, or -EINVAL. */
static int match_names(struct dict_match *m, const char *const *names, size_t n)
{
	*m = (struct dict_match){.names = names, .n = n};
	if (!n || n > CT_PY_GETATTRS_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		m->lens[i] = names[i] ? strnlen(names[i], CT_PY_ATTR_MAX) : 0;
		if (!m->lens[i] || m->lens[i] >= CT_PY_ATTR_MAX)
			return -EINVAL;
		for (size_t j = 0; j < m->lens[i]; j++)
			if ((unsigned char)names[i][j] >= 0x80)
				return -EINVAL; /* only compact ASCII keys are compared */
		if (m->lens[i] > m->maxlen)
			m->maxlen = m->lens[i];
	}
	return 0;
}

static int rd64(pid_t pid, uint64_t addr, uint64_t *v)
{
	return ct_py_read_mem(pid, addr, v, sizeof(*v));
}

static int read_type(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		     uint64_t obj, uint64_t *type, uint64_t *flags)
{
	int err = rd64(pid, obj + o->object_type, type);

	if (!err && !*type)
		err = -EINVAL;
	if (!err)
		err = rd64(pid, *type + oo->type_flags, flags);
	return err;
}

static int type_name(pid_t pid, const struct ct_py_offsets *o, uint64_t type, char *buf, size_t len)
{
	uint64_t np;
	int err = rd64(pid, type + o->type_name, &np);

	if (!err)
		err = ct_py_read_cstr(pid, np, buf, len);
	return err;
}

/*
 * Keys object to view. 3.10: dk_size slots of 1/2/4/8-byte indices (by dk_size, as
 * Objects/dict-common.h's DK_IXSIZE), general entries only. 3.11+: 1 << dk_log2_index_bytes
 * bytes of indices, then general or unicode entries by dk_kind (the rule the generator
 * checked against DK_ENTRIES()).
 */
static int keys_view(pid_t pid, const struct ct_py_objoffsets *oo, uint64_t keys,
		     struct dict_view *v)
{
	uint8_t hdr[PY_KEYS_HDR_MAX];
	uint64_t size, ixbytes;
	int64_t n;
	int err;

	if (!keys || oo->keys_indices > sizeof(hdr) ||
	    (size_t)oo->keys_nentries + 8 > oo->keys_indices ||
	    (oo->keys_size != CT_PY_NONE && (size_t)oo->keys_size + 8 > oo->keys_indices) ||
	    (oo->keys_size == CT_PY_NONE &&
	     (oo->keys_log2_size >= oo->keys_indices ||
	      oo->keys_log2_index_bytes >= oo->keys_indices || oo->keys_kind >= oo->keys_indices)))
		return -EINVAL;
	err = ct_py_read_mem(pid, keys, hdr, oo->keys_indices);
	if (err)
		return err;
	memcpy(&n, hdr + oo->keys_nentries, sizeof(n));
	v->esize = oo->entry_size;
	v->ekey = oo->entry_key;
	v->evalue = oo->entry_value;
	if (oo->keys_size != CT_PY_NONE) {
		int64_t sz;

		memcpy(&sz, hdr + oo->keys_size, sizeof(sz));
		if (sz < 8 || sz > (1LL << PY_DICT_LOG2_MAX) || (sz & (sz - 1)))
			return -EINVAL;
		size = (uint64_t)sz;
		ixbytes = size * (size <= 0xff ? 1 : size <= 0xffff ? 2 : 4);
	} else {
		uint8_t l2 = hdr[oo->keys_log2_size], l2ix = hdr[oo->keys_log2_index_bytes];
		uint8_t kind = hdr[oo->keys_kind];

		/* An index is 1 to 8 bytes: log2 of the index bytes is log2_size + 0..3. */
		if (l2 > PY_DICT_LOG2_MAX || l2ix < l2 || l2ix > l2 + 3)
			return -EINVAL;
		if (kind != oo->kind_general && kind != oo->kind_unicode && kind != oo->kind_split)
			return -EINVAL;
		size = 1ULL << l2;
		ixbytes = 1ULL << l2ix;
		if (kind != oo->kind_general) {
			v->esize = oo->uentry_size;
			v->ekey = oo->uentry_key;
			v->evalue = oo->uentry_value;
		}
	}
	if (n < 0 || (uint64_t)n > size)
		return -EINVAL;
	if (n > CT_PY_DICT_MAX)
		return -E2BIG;
	v->nentries = (uint32_t)n;
	v->entries = keys + oo->keys_indices + ixbytes;
	v->values = 0;
	v->nvalues = 0;
	return 0;
}

/* Split values (PyDictValues) of keys; 3.13 says how many it holds. */
static int values_view(pid_t pid, const struct ct_py_objoffsets *oo, uint64_t keys, uint64_t values,
		       struct dict_view *v)
{
	int err = keys_view(pid, oo, keys, v);

	if (err)
		return err;
	v->values = values + oo->values_array;
	v->nvalues = v->nentries;
	if (oo->values_capacity != CT_PY_NONE) {
		uint8_t cap;

		err = ct_py_read_mem(pid, values + oo->values_capacity, &cap, 1);
		if (err)
			return err;
		if (cap < v->nvalues)
			v->nvalues = cap;
	}
	return 0;
}

static int dict_view(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		     uint64_t dict, struct dict_view *v)
{
	uint64_t type, flags, keys, values;
	int err = read_type(pid, oo, o, dict, &type, &flags);

	if (err)
		return err;
	/* Subclasses too: OrderedDict (torch 1.13's _modules) starts with a PyDictObject. */
	if (!(flags & oo->tpflags_dict_subclass))
		return -EINVAL;
	err = rd64(pid, dict + oo->dict_keys, &keys);
	if (!err)
		err = rd64(pid, dict + oo->dict_values, &values);
	if (err)
		return err;
	return values ? values_view(pid, oo, keys, values, v) : keys_view(pid, oo, keys, v);
}

/* Which of m's names is the str whose first bytes (its header, then up to m->maxlen bytes of
 * data) are in buf, or -1. Only ASCII names are looked up, so only compact ASCII keys can
 * match: the header alone rejects most keys (type, kind, length). */
static int key_which(pid_t pid, const struct ct_py_offsets *o, struct dict_match *m,
		     const uint8_t *buf)
{
	uint64_t type;
	int64_t slen;
	uint32_t state;
	int which = -1;

	memcpy(&type, buf + o->object_type, sizeof(type));
	memcpy(&slen, buf + o->unicode_length, sizeof(slen));
	memcpy(&state, buf + o->unicode_state, sizeof(state));
	if (slen < 1 || (uint64_t)slen > m->maxlen || !(state >> CT_PY_STATE_COMPACT_BIT & 1) ||
	    !(state >> CT_PY_STATE_ASCII_BIT & 1))
		return -1;
	for (size_t i = 0; i < m->n && which < 0; i++)
		if (m->lens[i] == (uint64_t)slen &&
		    !memcmp(buf + o->unicode_ascii_data, m->names[i], m->lens[i]))
			which = (int)i;
	if (which >= 0 && type != m->str_type) {
		char tn[PY_TPNAME_MAX];

		/* str is a static type: confirmed once, a compare after that. */
		if (m->str_type || !type || type_name(pid, o, type, tn, sizeof(tn)) ||
		    strcmp(tn, "str"))
			return -1;
		m->str_type = type;
	}
	return which;
}

/* How much of a key key_which() needs, or 0 where the offsets do not fit the header. */
static size_t key_bytes(const struct ct_py_offsets *o, const struct dict_match *m)
{
	if (o->unicode_ascii_data > PY_STR_HDR_MAX ||
	    (size_t)o->unicode_length + 8 > o->unicode_ascii_data ||
	    (size_t)o->unicode_state + 4 > o->unicode_ascii_data ||
	    (size_t)o->object_type + 8 > o->unicode_ascii_data)
		return 0;
	return o->unicode_ascii_data + m->maxlen;
}

/* Called per live entry in entry (insertion) order: 0 goes on, anything else stops. */
typedef int (*entry_fn)(void *ctx, uint64_t key, uint64_t value);

/*
 * The live entries' keys and values (one read, plus one for split values), in entry
 * (insertion) order: *n of them in *keys and *vals, which the caller frees. 0 or -errno.
 */
static int dict_pairs(pid_t pid, const struct dict_view *v, uint64_t **keys, uint64_t **vals,
		      uint32_t *n)
{
	uint8_t *ents = NULL;
	uint64_t *split = NULL;
	int err = 0;

	*keys = *vals = NULL;
	*n = 0;
	if (!v->nentries)
		return 0;
	if (v->esize < 16 || (size_t)v->ekey + 8 > v->esize || (size_t)v->evalue + 8 > v->esize)
		return -EINVAL;
	ents = malloc((size_t)v->nentries * v->esize);
	if (v->values && v->nvalues)
		split = malloc((size_t)v->nvalues * sizeof(*split));
	*keys = malloc((size_t)v->nentries * sizeof(**keys));
	*vals = malloc((size_t)v->nentries * sizeof(**vals));
	if (!ents || !*keys || !*vals || (v->values && v->nvalues && !split)) {
		err = -ENOMEM;
		goto out;
	}
	if (ct_py_read_mem(pid, v->entries, ents, (size_t)v->nentries * v->esize) ||
	    (split && ct_py_read_mem(pid, v->values, split, (size_t)v->nvalues * sizeof(*split)))) {
		err = -EFAULT;
		goto out;
	}
	for (uint32_t i = 0; i < v->nentries; i++) {
		uint64_t key, val = 0;

		memcpy(&key, ents + (size_t)i * v->esize + v->ekey, sizeof(key));
		if (!v->values)
			memcpy(&val, ents + (size_t)i * v->esize + v->evalue, sizeof(val));
		else if (i < v->nvalues && split)
			val = split[i];
		/* A deleted entry has no key; a split slot this instance never set, no value. */
		if (key && val) {
			(*keys)[*n] = key;
			(*vals)[(*n)++] = val;
		}
	}
out:
	free(ents);
	free(split);
	if (err) {
		free(*keys);
		free(*vals);
		*keys = *vals = NULL;
		*n = 0;
	}
	return err;
}

/* Called per live entry in entry (insertion) order: 0 goes on, anything else stops. */
typedef int (*entry_fn)(void *ctx, uint64_t key, uint64_t value);

/* Walk the entries: 0 when all were seen, what fn returned when it stopped the walk,
 * -errno when they could not be read. */
static int dict_walk(pid_t pid, const struct dict_view *v, entry_fn fn, void *ctx)
{
	uint64_t *keys, *vals;
	uint32_t n;
	int err = dict_pairs(pid, v, &keys, &vals, &n);

	for (uint32_t i = 0; i < n && !err; i++)
		err = fn(ctx, keys[i], vals[i]);
	free(keys);
	free(vals);
	return err;
}

/*
 * For each of m's names, the first entry whose key it is (m->found): every key's header and
 * data read at once (one process_vm_readv for the whole dict, where a key at a time cost one
 * each), then compared. -ENOENT when none is found.
 */
static int dict_find_names(pid_t pid, const struct ct_py_offsets *o, const struct dict_view *v,
			   struct dict_match *m)
{
	size_t kb = key_bytes(o, m);
	uint64_t *keys, *vals;
	uint8_t *bufs = NULL;
	bool *ok = NULL;
	uint32_t n;
	int err = kb ? dict_pairs(pid, v, &keys, &vals, &n) : -EINVAL;

	if (err)
		return err;
	err = -ENOENT;
	if (n) {
		size_t found = 0;

		bufs = malloc((size_t)n * kb);
		ok = malloc((size_t)n * sizeof(*ok));
		err = !bufs || !ok ? -ENOMEM : ct_py_read_many(pid, keys, n, kb, bufs, ok);
		for (uint32_t i = 0; !err && i < n && found < m->n; i++) {
			int w = ok[i] ? key_which(pid, o, m, bufs + (size_t)i * kb) : -1;

			if (w >= 0 && !m->found[w]) {
				m->found[w] = vals[i];
				found++;
			}
		}
		if (!err && !found)
			err = -ENOENT;
	}
	free(bufs);
	free(ok);
	free(keys);
	free(vals);
	return err;
}

/* By value: the entry holding m->value. */
static int match_entry(void *ctx, uint64_t key, uint64_t val)
{
	struct dict_match *m = ctx;

	if (val != m->value)
		return 0;
	m->found_key = key;
	m->found_value = val;
	return 1;
}

/* Walk the entries until m is satisfied: by names, or by value. */
static int dict_scan(pid_t pid, const struct ct_py_offsets *o, const struct dict_view *v,
		     struct dict_match *m)
{
	int err;

	m->found_key = m->found_value = 0;
	memset(m->found, 0, sizeof(m->found));
	if (m->names)
		return dict_find_names(pid, o, v, m);
	err = dict_walk(pid, v, match_entry, m);
	return err == 1 ? 0 : err ? err : -ENOENT;
}

/* The instance attributes of obj, wherever this version keeps them. */
static int instance_attrs(pid_t pid, const struct ct_py_objoffsets *oo,
			  const struct ct_py_offsets *o, uint64_t obj, struct dict_view *v)
{
	uint64_t type, flags, slot, keys;
	int64_t off;
	int err = read_type(pid, oo, o, obj, &type, &flags);

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
				   : values_view(pid, oo, keys, slot + oo->managed_values_tag, v);
		}
		/* A materialized dict is authoritative (3.13: it may share the inline values). */
		if (slot)
			return dict_view(pid, oo, o, slot, v);
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
		return err ? err : values_view(pid, oo, keys, slot, v);
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
	return dict_view(pid, oo, o, slot, v);
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
		       uint64_t type, struct dict_match *m, uint64_t *off)
{
	uint64_t mro, types[SLOT_MRO_MAX], dict, def;
	char tn[32];
	size_t n = 0;
	int32_t kind;
	int err = rd64(pid, type + oo->type_mro, &mro);

	if (!err)
		err = ct_py_tuple_items(pid, oo, o, mro, types, SLOT_MRO_MAX, &n);
	for (size_t i = 0; !err && i < n; i++) {
		struct dict_view v;

		err = rd64(pid, types[i] + oo->type_dict, &dict);
		if (err || !dict)
			continue; /* 3.12+: a static type keeps its dict elsewhere */
		err = dict_view(pid, oo, o, dict, &v);
		if (!err)
			err = dict_scan(pid, o, &v, m);
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

static int slot_attr(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		     uint64_t obj, const char *name, uint64_t *value)
{
	struct slot_memo *e = NULL;
	struct dict_match one, *m = &one;
	uint64_t type, off = 0;
	uint32_t tag = 0;
	int err;

	if (!oo->type_dict || !oo->descr_member || match_names(m, &name, 1))
		return -ENOENT;
	err = rd64(pid, obj + o->object_type, &type);
	if (err)
		return err;
	if (m->lens[0] < SLOT_MEMO_NAME &&
	    !ct_py_read_mem(pid, type + oo->type_version_tag, &tag, sizeof(tag)) && tag) {
		uint64_t h = (type >> 4) ^ tag ^ (uint64_t)pid * 0x9e3779b97f4a7c15ULL;

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
	if (err)
		return err;
	err = rd64(pid, obj + off, value);
	return err ? err : *value ? 0 : -ENOENT;
}

int ct_py_getattrs(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		   uint64_t obj, const char *const *names, size_t n, uint64_t *values)
{
	struct dict_match m;
	struct dict_view v;
	int err, found = 0;

	if (n && n <= CT_PY_GETATTRS_MAX)
		memset(values, 0, n * sizeof(*values));
	if (!oo || !o || !obj || match_names(&m, names, n))
		return -EINVAL;
	err = instance_attrs(pid, oo, o, obj, &v);
	if (!err)
		err = dict_scan(pid, o, &v, &m);
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

int ct_py_dict_key_of(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		      uint64_t dict, uint64_t value, char *buf, size_t len)
{
	struct dict_match m = {.value = value};
	struct dict_view v;
	int err;

	if (!len)
		return -EINVAL;
	buf[0] = '\0';
	if (!oo || !o || !dict || !value)
		return -EINVAL;
	err = dict_view(pid, oo, o, dict, &v);
	if (!err)
		err = dict_scan(pid, o, &v, &m);
	if (!err)
		err = ct_py_read_str(pid, o, m.found_key, buf, len);
	return err;
}

struct foreach_ctx {
	int (*fn)(void *ctx, uint64_t key, uint64_t value);
	void *ctx;
};

static int foreach_entry(void *ctx, uint64_t key, uint64_t val)
{
	struct foreach_ctx *c = ctx;

	/* What the caller returns must not read as dict_walk's own errors. */
	return c->fn(c->ctx, key, val) ? 1 : 0;
}

int ct_py_dict_foreach(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		       uint64_t dict, int (*fn)(void *ctx, uint64_t key, uint64_t value), void *ctx)
{
	struct foreach_ctx c = {.fn = fn, .ctx = ctx};
	struct dict_view v;
	int err;

	if (!oo || !o || !dict || !fn)
		return -EINVAL;
	err = dict_view(pid, oo, o, dict, &v);
	if (!err)
		err = dict_walk(pid, &v, foreach_entry, &c);
	return err < 0 ? err : 0;
}

/* tp_name of obj's type, compared against want. */
static int type_is(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		   uint64_t obj, const char *want)
{
	char tn[PY_TPNAME_MAX];
	uint64_t type, flags;
	int err = read_type(pid, oo, o, obj, &type, &flags);

	if (!err)
		err = type_name(pid, o, type, tn, sizeof(tn));
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
	char tn[PY_TPNAME_MAX];
	uint64_t type, flags, p;
	int err = read_type(pid, oo, o, obj, &type, &flags);

	if (!err)
		err = type_name(pid, o, type, tn, sizeof(tn));
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

		if (!type_name(pid, o, obj, cn, sizeof(cn))) {
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

	return oo && o && obj && !read_type(pid, oo, o, obj, &type, &flags) &&
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
