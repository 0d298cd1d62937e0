// SPDX-License-Identifier: MIT
/* The diagnosis' tables and the helpers every part of it uses: construction, processes, formatting
 * of sites and stacks. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "catalog/catalog.h"
#include "diag/internal.h"

bool diag_matchable(uint8_t kind)
{
	switch (kind) {
	case CT_K_ALLREDUCE:
	case CT_K_REDUCE:
	case CT_K_BROADCAST:
	case CT_K_ALLGATHER:
	case CT_K_GATHER:
	case CT_K_SCATTER:
	case CT_K_ALLTOALL:
	case CT_K_REDUCE_SCATTER:
	case CT_K_BARRIER:
		return true;
	}
	return false;
}

bool diag_is_reduction(uint8_t kind)
{
	return kind == CT_K_ALLREDUCE || kind == CT_K_REDUCE || kind == CT_K_REDUCE_SCATTER;
}

/* Counts every rank must pass alike: not the vector forms, not a scatter's (root only). */
bool diag_count_comparable(uint8_t kind, const char *fn)
{
	size_t n = strlen(fn);

	if (n && fn[n - 1] == 'v')
		return false;
	return kind != CT_K_SCATTER && kind != CT_K_BARRIER;
}

bool diag_dtype_comparable(uint8_t kind, const char *a, const char *b)
{
	return kind != CT_K_SCATTER && a && b && strcmp(a, "derived") && strcmp(b, "derived");
}

/* Frames of the framework itself are not the call site the user wants. */
static bool library_file(const char *f)
{
	return !f || strstr(f, "/torch/") || strstr(f, "-packages/") || strstr(f, "<frozen");
}

int diag_site_index(const struct ct_stack_line *s, int n)
{
	for (int i = 0; i < n; i++)
		if (!library_file(s[i].file))
			return i;
	return n ? 0 : -1;
}

bool diag_helper_frame(const struct ct_stack_line *s, int n)
{
	for (int i = 0; i < n; i++)
		if (s[i].qualname &&
		    (strstr(s[i].qualname, "full_tensor") || strstr(s[i].qualname, "unshard")))
			return true;
	return false;
}

void diag_fmt_line(char *buf, size_t len, const struct ct_stack_line *l)
{
	snprintf(buf, len, "%s (%s:%d)", l->qualname ? l->qualname : "?", l->file ? l->file : "?",
		 l->line);
}

void diag_fmt_stack(char *buf, size_t len, const struct rec *r)
{
	size_t off = 0;

	buf[0] = 0;
	for (int i = 0; i < r->nstack && off + 1 < len; i++) {
		int w = snprintf(buf + off, len - off, "%s%s (%s:%d)", i ? " <- " : "",
				 r->stack[i].qualname ? r->stack[i].qualname : "?",
				 r->stack[i].file ? r->stack[i].file : "?", r->stack[i].line);

		if (w < 0)
			break;
		off += (size_t)w;
	}
}

void diag_fmt_site(char *buf, size_t len, const struct rec *r)
{
	if (r->site >= 0)
		diag_fmt_line(buf, len, &r->stack[r->site]);
	else
		buf[0] = 0;
}

void diag_who(char *buf, size_t len, const struct dproc *p)
{
	if (p->rank >= 0)
		snprintf(buf, len, "rank %d (pid %u)", p->rank, p->pid);
	else
		snprintf(buf, len, "pid %u", p->pid);
}

void diag_comm_name(const struct comm *c, char *buf, size_t len)
{
	if (c->leader >= 0)
		snprintf(buf, len, "%s#%u/%d@%d", ct_lib_name(c->lib), c->ordinal, c->size,
			 c->leader);
	else
		snprintf(buf, len, "%s#%u/%d", ct_lib_name(c->lib), c->ordinal, c->size);
}

static uint32_t ix_slot(uint64_t key, uint32_t cap)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	key ^= key >> 33;
	return (uint32_t)key & (cap - 1);
}

int32_t diag_index_get(const struct diag_index *x, uint64_t key)
{
	if (!x->cap)
		return 0;
	for (uint32_t i = ix_slot(key, x->cap);; i = (i + 1) & (x->cap - 1)) {
		if (!x->at[i])
			return 0;
		if (x->keys[i] == key)
			return x->at[i];
	}
}

int diag_index_put(struct diag_index *x, uint64_t key, int32_t entry)
{
	uint32_t i;

	if ((x->n + 1) * 2 > x->cap) {
		struct diag_index y = {.cap = x->cap ? x->cap * 2 : 64};

		y.keys = calloc(y.cap, sizeof(*y.keys));
		y.at = calloc(y.cap, sizeof(*y.at));
		if (!y.keys || !y.at) {
			free(y.keys);
			free(y.at);
			return -ENOMEM;
		}
		for (uint32_t k = 0; k < x->cap; k++)
			if (x->at[k])
				diag_index_put(&y, x->keys[k], x->at[k] - 1);
		free(x->keys);
		free(x->at);
		*x = y;
	}
	for (i = ix_slot(key, x->cap); x->at[i]; i = (i + 1) & (x->cap - 1))
		;
	x->keys[i] = key;
	x->at[i] = entry + 1;
	x->n++;
	return 0;
}

bool diag_grow(void *table, int n, int *cap, int max)
{
	void **t;
	int nc;

	if (n < *cap)
		return true;
	if (n >= max)
		return false;
	nc = *cap ? *cap * 2 : 16;
	if (nc > max)
		nc = max;
	t = realloc(*(void ***)table, (size_t)nc * sizeof(*t));
	if (!t)
		return false;
	*(void ***)table = t;
	*cap = nc;
	return true;
}

void diag_fmt_secs(char *buf, size_t len, uint64_t ns)
{
	snprintf(buf, len, "%.3f s", (double)ns / 1e9);
}

struct ct_diag *ct_diag_new(const struct ct_diag_opts *o)
{
	struct ct_diag *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->o = *o;
	d->last.member = -1;
	if (!d->o.min_repeats)
		d->o.min_repeats = 3;
	if (!d->o.max_procs || d->o.max_procs > CT_DIAG_PROCS)
		d->o.max_procs = CT_DIAG_PROCS;
	if (!d->o.max_comms || d->o.max_comms > CT_DIAG_COMMS)
		d->o.max_comms = CT_DIAG_COMMS;
	if (!d->o.max_members || d->o.max_members > CT_DIAG_MEMBERS)
		d->o.max_members = CT_DIAG_MEMBERS;
	d->f = calloc(CT_DIAG_FINDINGS, sizeof(*d->f));
	if (!d->f) {
		free(d);
		return NULL;
	}
	return d;
}

void ct_diag_free(struct ct_diag *d)
{
	if (!d)
		return;
	for (int i = 0; i < d->nprocs; i++) {
		free(d->procs[i]->log);
		free(d->procs[i]->stacks);
		free(d->procs[i]->mem);
		free(d->procs[i]);
	}
	for (int i = 0; i < d->ncomms; i++) {
		free(d->comms[i]->members);
		free(d->comms[i]->mismatch);
		free(d->comms[i]);
	}
	for (int i = 0; i < d->nmembers; i++)
		free(d->members[i]);
	free(d->procs);
	free(d->comms);
	free(d->members);
	free(d->proc_ix.keys);
	free(d->proc_ix.at);
	free(d->comm_ix.keys);
	free(d->comm_ix.at);
	free(d->mrecs);
	free(d->mms);
	free(d->f);
	free(d);
}

struct dproc *diag_proc_find(struct ct_diag *d, uint32_t pid)
{
	int32_t at = diag_index_get(&d->proc_ix, pid);

	return at ? d->procs[at - 1] : NULL;
}

struct dproc *diag_proc_get(struct ct_diag *d, uint32_t pid, int rank)
{
	struct dproc *p = diag_proc_find(d, pid);

	if (p) {
		if (rank >= 0)
			p->rank = rank;
		return p;
	}
	if (!diag_grow(&d->procs, d->nprocs, &d->capprocs, (int)d->o.max_procs))
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p || diag_index_put(&d->proc_ix, pid, d->nprocs)) {
		free(p);
		return NULL;
	}
	p->pid = pid;
	p->rank = rank;
	d->procs[d->nprocs++] = p;
	return p;
}

struct rec *diag_rec_of(struct ct_diag *d, int32_t member, uint64_t seq)
{
	struct rec *r;

	if (member < 0 || member >= d->nmembers || !seq)
		return NULL;
	r = &d->members[member]->w[(seq - 1) % CT_DIAG_WINDOW];
	return r->seq == seq ? r : NULL;
}

int diag_proc_index(const struct ct_diag *d, const struct dproc *p)
{
	return diag_index_get(&d->proc_ix, p->pid) - 1;
}

bool ct_diag_proc_late(const struct ct_diag *d, int i, int *rank, uint64_t *late)
{
	if (i < 0 || i >= d->nprocs)
		return false;
	*rank = d->procs[i]->rank;
	*late = d->procs[i]->late;
	return true;
}

const struct ct_diag_opts *ct_diag_options(const struct ct_diag *d)
{
	return &d->o;
}

const struct ct_diag_drops *ct_diag_drops(const struct ct_diag *d)
{
	return &d->drops;
}

int ct_diag_nprocs(const struct ct_diag *d)
{
	return d->nprocs;
}

bool ct_diag_proc_wait(const struct ct_diag *d, int i, uint32_t *pid, int *rank, uint64_t *wait_ns,
		       uint64_t *matched)
{
	if (i < 0 || i >= d->nprocs)
		return false;
	*pid = d->procs[i]->pid;
	*rank = d->procs[i]->rank;
	*wait_ns = d->procs[i]->wait_ns;
	*matched = d->procs[i]->matched;
	return true;
}
