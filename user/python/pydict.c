// SPDX-License-Identifier: MIT
/* Reading a dict of the target: its keys object, split values, entries, str keys by name. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commtrace/pyoffsets.h"
#include "python/pydict.h"
#include "python/pyproc.h"
#include "python/symbolize.h"

#define PY_KEYS_HDR_MAX	 64  /* PyDictKeysObject up to dk_indices: 40 (3.10), 32 after */
#define PY_STR_HDR_MAX	 128 /* PyASCIIObject: 48 (3.10/3.11), 40 after */
#define PY_DICT_LOG2_MAX 30  /* no dict here has a billion slots: garbage, not a table */

/* m looking for names, which must be short ASCII names: 0, or -EINVAL. */
int ct_py_match_names(struct ct_py_dict_match *m, const char *const *names, size_t n)
{
	*m = (struct ct_py_dict_match){.names = names, .n = n};
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

int ct_py_type_of(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		  uint64_t obj, uint64_t *type, uint64_t *flags)
{
	int err = rd64(pid, obj + o->object_type, type);

	if (!err && !*type)
		err = -EINVAL;
	if (!err)
		err = rd64(pid, *type + oo->type_flags, flags);
	return err;
}

int ct_py_type_tpname(pid_t pid, const struct ct_py_offsets *o, uint64_t type, char *buf,
		      size_t len)
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
		     struct ct_py_dict_view *v)
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
int ct_py_values_view(pid_t pid, const struct ct_py_objoffsets *oo, uint64_t keys, uint64_t values,
		      struct ct_py_dict_view *v)
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

int ct_py_dict_view(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		    uint64_t dict, struct ct_py_dict_view *v)
{
	uint64_t type, flags, keys, values;
	int err = ct_py_type_of(pid, oo, o, dict, &type, &flags);

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
	return values ? ct_py_values_view(pid, oo, keys, values, v) : keys_view(pid, oo, keys, v);
}

/* Which of m's names is the str whose first bytes (its header, then up to m->maxlen bytes of
 * data) are in buf, or -1. Only ASCII names are looked up, so only compact ASCII keys can
 * match: the header alone rejects most keys (type, kind, length). */
static int key_which(pid_t pid, const struct ct_py_offsets *o, struct ct_py_dict_match *m,
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
		char tn[CT_PY_TPNAME_MAX];

		/* str is a static type: confirmed once, a compare after that. */
		if (m->str_type || !type || ct_py_type_tpname(pid, o, type, tn, sizeof(tn)) ||
		    strcmp(tn, "str"))
			return -1;
		m->str_type = type;
	}
	return which;
}

/* How much of a key key_which() needs, or 0 where the offsets do not fit the header. */
static size_t key_bytes(const struct ct_py_offsets *o, const struct ct_py_dict_match *m)
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
static int dict_pairs(pid_t pid, const struct ct_py_dict_view *v, uint64_t **keys, uint64_t **vals,
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

/* Walk the entries: 0 when all were seen, what fn returned when it stopped the walk,
 * -errno when they could not be read. */
static int dict_walk(pid_t pid, const struct ct_py_dict_view *v, entry_fn fn, void *ctx)
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
static int dict_find_names(pid_t pid, const struct ct_py_offsets *o,
			   const struct ct_py_dict_view *v, struct ct_py_dict_match *m)
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
	struct ct_py_dict_match *m = ctx;

	if (val != m->value)
		return 0;
	m->found_key = key;
	m->found_value = val;
	return 1;
}

/* Walk the entries until m is satisfied: by names, or by value. */
int ct_py_dict_scan(pid_t pid, const struct ct_py_offsets *o, const struct ct_py_dict_view *v,
		    struct ct_py_dict_match *m)
{
	int err;

	m->found_key = m->found_value = 0;
	memset(m->found, 0, sizeof(m->found));
	if (m->names)
		return dict_find_names(pid, o, v, m);
	err = dict_walk(pid, v, match_entry, m);
	return err == 1 ? 0 : err ? err : -ENOENT;
}

int ct_py_dict_key_of(pid_t pid, const struct ct_py_objoffsets *oo, const struct ct_py_offsets *o,
		      uint64_t dict, uint64_t value, char *buf, size_t len)
{
	struct ct_py_dict_match m = {.value = value};
	struct ct_py_dict_view v;
	int err;

	if (!len)
		return -EINVAL;
	buf[0] = '\0';
	if (!oo || !o || !dict || !value)
		return -EINVAL;
	err = ct_py_dict_view(pid, oo, o, dict, &v);
	if (!err)
		err = ct_py_dict_scan(pid, o, &v, &m);
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
	struct ct_py_dict_view v;
	int err;

	if (!oo || !o || !dict || !fn)
		return -EINVAL;
	err = ct_py_dict_view(pid, oo, o, dict, &v);
	if (!err)
		err = dict_walk(pid, &v, foreach_entry, &c);
	return err < 0 ? err : 0;
}
