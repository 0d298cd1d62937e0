// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "commtrace/pyoffsets.h"
#include "python/opvals.h"
#include "python/params.h"
#include "python/symbolize.h"
#include "util/hash.h"
#include "util/intern.h"

#define TYPE_CACHE     1024 /* (pid, type) slots, direct-mapped */
#define TYPE_BASES_MAX 16   /* tp_base links followed */
#define TYPE_NAME_MAX  128
#define PLACEMENTS_MAX 192

struct type_slot {
	pid_t pid;
	uint64_t type;
	const char *kind; /* interned short name */
	bool tensor;
};

/*
 * A DTensor's placements and mesh as described from its spec (a DTensorSpec, immutable, and
 * mostly one of the few that torch's sharding propagation caches), with what they were
 * made of: the spec's first fields (its mesh and placements among them), the placements
 * tuple's items and each placement's type and field (Shard's dim: a small int, immortal).
 * The same spec address with all of those the same has the same placements and mesh.
 */
#define DIST_CACHE  512 /* (pid, spec) slots, direct-mapped */
#define DIST_FIELDS 4	/* the spec's fields compared */
#define DIST_SIG    (DIST_FIELDS + 1 + 2 * CT_CAP_ITEMS)

struct dist_slot {
	pid_t pid;
	uint64_t spec;
	uint64_t sig[DIST_SIG];
	const char *placements, *mesh; /* interned */
};

struct ct_opvals_cache {
	struct type_slot slots[TYPE_CACHE];
	struct ct_mesh_memo mesh; /* the mesh described last: mostly the only one */
	struct dist_slot dist[DIST_CACHE];
};

struct ct_opvals_cache *ct_opvals_cache_new(void)
{
	return calloc(1, sizeof(struct ct_opvals_cache));
}

void ct_opvals_cache_free(struct ct_opvals_cache *c)
{
	free(c);
}

static int type_name(pid_t pid, const struct ct_py_offsets *o, uint64_t type, char *buf, size_t len)
{
	uint64_t name;
	int err = ct_py_read_mem(pid, type + o->type_name, &name, sizeof(name));

	if (!err)
		err = ct_py_read_cstr(pid, name, buf, len); /* page by page: near a mapping's end */
	return err;
}

/* torch's tensor base: "torch._C._TensorBase" (1.x), "torch._C.TensorBase" (2.x). */
static bool is_tensor_base(const char *name)
{
	return !strcmp(name, "torch._C._TensorBase") || !strcmp(name, "torch._C.TensorBase");
}

/* A reference count a live object can have (a freed block's first word is a free-list
 * pointer). */
static bool refcount_sane(uint64_t refcnt)
{
	return refcnt >= 1 && refcnt <= UINT32_MAX;
}

static const struct type_slot *classify(struct ct_opvals_cache *c, pid_t pid,
					const struct ct_py_offsets *o, uint64_t type)
{
	const struct ct_py_objoffsets *oo = ct_py_objoffsets_for(o->major, o->minor);
	struct type_slot *s = &c->slots[ct_hash_mix(type, (uint64_t)pid) % TYPE_CACHE];
	char name[TYPE_NAME_MAX], base[TYPE_NAME_MAX];
	const char *dot;
	uint64_t t = type;

	if (s->pid == pid && s->type == type && s->kind)
		return s;
	if (!oo || type_name(pid, o, type, name, sizeof(name)))
		return NULL;
	memset(s, 0, sizeof(*s));
	for (int i = 0; i < TYPE_BASES_MAX && t; i++) {
		if (type_name(pid, o, t, base, sizeof(base)))
			break;
		if (is_tensor_base(base)) {
			s->tensor = true;
			break;
		}
		if (ct_py_read_mem(pid, t + oo->type_base, &t, sizeof(t)))
			break;
	}
	dot = strrchr(name, '.');
	s->kind = ct_intern(!strcmp(name, "NoneType") ? "None" : dot ? dot + 1 : name);
	s->pid = pid;
	s->type = type;
	return s;
}

int ct_opvals_is_tensor(struct ct_opvals_cache *c, pid_t pid, const struct ct_py_offsets *o,
			uint64_t obj, uint64_t type)
{
	uint64_t head[2] = {0, type}; /* ob_refcnt, ob_type */
	const struct type_slot *t;

	if (!type &&
	    (!obj || ct_py_read_mem(pid, obj, head, sizeof(head)) || !refcount_sane(head[0])))
		return -ESRCH;
	t = classify(c, pid, o, head[1]);
	return !t ? -ESRCH : t->tensor;
}

int ct_opval_shape(const struct ct_op_val *r, int64_t *shape)
{
	uint64_t prod = 1;

	if (!r->impl || r->ndim > CT_OP_DIMS || !ct_torch_dtype_name(r->dtype))
		return -1;
	for (uint64_t d = 0; d < r->ndim; d++) {
		if (r->sizes[d] < 0 ||
		    (r->sizes[d] && prod > (uint64_t)INT64_MAX / (uint64_t)r->sizes[d]))
			return -1;
		prod *= (uint64_t)r->sizes[d];
	}
	if (r->numel < 0 || prod != (uint64_t)r->numel)
		return -1;
	memcpy(shape, r->sizes, sizeof(r->sizes[0]) * r->ndim);
	return (int)r->ndim;
}

/* The shape and dtype BPF read, if they check. */
static void tensor_fields(const struct ct_op_val *r, struct ct_value *v)
{
	int64_t shape[CT_OP_DIMS];
	int ndim = ct_opval_shape(r, shape);

	if (ndim < 0)
		return;
	v->dtype = ct_torch_dtype_name(r->dtype);
	v->ndim = ndim;
	memcpy(v->shape, shape, sizeof(shape[0]) * (size_t)ndim);
}

/* An object's head (ob_refcnt, ob_type) says it is still the one BPF saw: its type, a sane
 * reference count (a freed block's first word is a free list pointer). */
static bool head_alive(const uint64_t *head, const struct ct_op_val *r)
{
	return head[1] == r->type && refcount_sane(head[0]);
}

/*
 * What the DTensor at obj's placements and mesh are made of (struct dist_slot), where sl
 * says where a DTensor keeps its spec and a spec its placements: its spec's address, then
 * 0; -errno where that is not known or could not be read.
 */
static int dist_sig(pid_t pid, const struct ct_py_offsets *o, const struct ct_spec_bpf *sl,
		    uint64_t obj, uint64_t *spec, uint64_t *sig)
{
	const struct ct_py_objoffsets *oo = ct_py_objoffsets_for(o->major, o->minor);
	uint64_t n = 0, items[CT_CAP_ITEMS];
	int err;

	memset(sig, 0, DIST_SIG * sizeof(*sig));
	if (!oo || !sl->dtensor || !sl->type)
		return -ENOTSUP;
	err = ct_py_read_mem(pid, obj + sl->dtensor_spec, spec, sizeof(*spec));
	if (!err)
		err = ct_py_read_mem(pid, *spec + sl->item, sig, DIST_FIELDS * sizeof(*sig));
	if (!err)
		err = ct_py_read_mem(pid, *spec + sl->slot, &sig[DIST_FIELDS], sizeof(*sig));
	if (!err)
		err = ct_py_read_mem(pid, sig[DIST_FIELDS] + oo->var_size, &n, sizeof(n));
	if (!err && n > CT_CAP_ITEMS)
		err = -E2BIG;
	if (!err && n)
		err = ct_py_read_mem(pid, sig[DIST_FIELDS] + oo->tuple_items, items, n * 8);
	for (uint64_t k = 0; !err && k < n; k++) {
		err = ct_py_read_mem(pid, items[k] + o->object_type, &sig[DIST_FIELDS + 1 + 2 * k],
				     sizeof(*sig));
		if (!err)
			err = ct_py_read_mem(pid, items[k] + sl->item,
					     &sig[DIST_FIELDS + 2 + 2 * k], sizeof(*sig));
	}
	return err;
}

static struct dist_slot *dist_slot(struct ct_opvals_cache *c, pid_t pid, uint64_t spec)
{
	return &c->dist[ct_hash_mix(spec, (uint64_t)pid) % DIST_CACHE];
}

void ct_opvals_describe(struct ct_opvals_cache *c, pid_t pid, const struct ct_pyproc *py,
			const struct ct_torch_layout *tl, const struct ct_spec_bpf *sl,
			const struct ct_op_vals *raw, struct ct_values *out)
{
	_Static_assert(CT_VALUE_DIMS == CT_OP_DIMS && CT_VALUES_MAX == CT_OP_VALS,
		       "tree.h and abi.h agree");
	char pl[PLACEMENTS_MAX], mesh[sizeof(c->mesh.str)];
	uint64_t heads[CT_OP_VALS][2], addrs[CT_OP_VALS];
	bool ok[CT_OP_VALS], dtensor[CT_OP_VALS] = {false};
	int idx[CT_OP_VALS], nread = 0;

	memset(out, 0, sizeof(*out));
	ct_py_snapshot_begin(pid); /* the tensors' types and specs, read once for all */
	out->total = raw->total;
	out->tuple = raw->tuple;
	out->n = raw->n > CT_OP_VALS ? CT_OP_VALS : raw->n;
	for (int i = 0; i < out->n; i++) {
		const struct ct_op_val *r = &raw->v[i];
		struct ct_value *v = &out->v[i];
		const struct type_slot *t =
		    r->type ? classify(c, pid, &py->offsets, r->type) : NULL;
		uint64_t head[2] = {0, 0};

		v->ndim = -1;
		v->kind = t ? t->kind : ct_intern("?");
		if (!t || !t->tensor)
			continue;
		tensor_fields(r, v);
		v->no_layout = !tl;
		/*
		 * Placements and mesh are read now, from user space: only while the object still
		 * looks alive, before the reads (its head's line, which the reads need, is read
		 * first) and after them (one being deallocated has a count of 0 while its
		 * attributes go). An object freed meanwhile gets neither; one whose memory was
		 * reused by another tensor of the same type would give that one's.
		 */
		dtensor[i] = !strcmp(t->kind, "DTensor");
		if (!ct_py_read_mem(pid, r->obj, head, sizeof(head)) && head_alive(head, r)) {
			uint64_t spec = 0, sig[DIST_SIG];
			bool signed_ =
			    dtensor[i] && !dist_sig(pid, &py->offsets, sl, r->obj, &spec, sig);
			struct dist_slot *d = signed_ ? dist_slot(c, pid, spec) : NULL;

			if (d && d->pid == pid && d->spec == spec &&
			    !memcmp(d->sig, sig, sizeof(sig))) {
				v->placements = d->placements;
				v->mesh = d->mesh;
			} else {
				if (!ct_tensor_dist(pid, &py->offsets, tl, r->obj, &c->mesh, pl,
						    sizeof(pl), mesh, sizeof(mesh)))
					v->mesh = ct_intern(mesh);
				if (pl[0])
					v->placements = ct_intern(pl);
				if (d && v->placements && v->mesh) {
					*d = (struct dist_slot){.pid = pid,
								.spec = spec,
								.placements = v->placements,
								.mesh = v->mesh};
					memcpy(d->sig, sig, sizeof(sig));
				}
			}
			idx[nread] = i;
			addrs[nread++] = r->obj;
			continue;
		}
		v->freed = 1;
	}
	ct_py_snapshot_end();
	/* Alive after: the heads of all the op's tensors read again now, in one call. */
	if (nread && ct_py_read_many(pid, addrs, (size_t)nread, sizeof(heads[0]), heads, ok))
		memset(ok, 0, sizeof(ok));
	for (int k = 0; k < nread; k++) {
		struct ct_value *v = &out->v[idx[k]];

		/* A DTensor has both: one without was torn down while it was read. */
		if (ok[k] && head_alive(heads[k], &raw->v[idx[k]]) &&
		    (!dtensor[idx[k]] || (v->placements && v->mesh)))
			continue;
		v->placements = v->mesh = NULL;
		v->freed = 1;
	}
}
