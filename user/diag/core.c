// SPDX-License-Identifier: MIT
/* The diagnosis' tables and the helpers every part of it uses: construction, processes, formatting
 * of sites and stacks. */
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
	snprintf(buf, len, "%s#%u/%d", ct_lib_name(c->lib), c->ordinal, c->size);
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
		free(d->procs[i]);
	}
	for (int i = 0; i < d->ncomms; i++)
		free(d->comms[i]);
	for (int i = 0; i < d->nmembers; i++)
		free(d->members[i]);
	free(d->f);
	free(d);
}

struct dproc *diag_proc_find(struct ct_diag *d, uint32_t pid)
{
	for (int i = 0; i < d->nprocs; i++)
		if (d->procs[i]->pid == pid)
			return d->procs[i];
	return NULL;
}

struct dproc *diag_proc_get(struct ct_diag *d, uint32_t pid, int rank)
{
	struct dproc *p = diag_proc_find(d, pid);

	if (p) {
		if (rank >= 0)
			p->rank = rank;
		return p;
	}
	if (d->nprocs == CT_DIAG_PROCS)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->rank = rank;
	d->procs[d->nprocs++] = p;
	return p;
}

struct rec *diag_rec_of(struct ct_diag *d, int16_t member, uint64_t seq)
{
	struct rec *r;

	if (member < 0 || member >= d->nmembers || !seq)
		return NULL;
	r = &d->members[member]->w[(seq - 1) % CT_DIAG_WINDOW];
	return r->seq == seq ? r : NULL;
}

int diag_proc_index(const struct ct_diag *d, const struct dproc *p)
{
	for (int i = 0; i < d->nprocs; i++)
		if (d->procs[i] == p)
			return i;
	return -1;
}

bool ct_diag_proc_late(const struct ct_diag *d, int i, int *rank, uint64_t *late)
{
	if (i < 0 || i >= d->nprocs)
		return false;
	*rank = d->procs[i]->rank;
	*late = 0;
	for (int k = 0; k < d->nmembers; k++)
		if (d->members[k]->proc == i)
			*late += d->members[k]->late;
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
