// SPDX-License-Identifier: MIT
/* The diag_log: each process' matchable collectives in order, with deduplicated stacks, for merge
 * (docs/json.md). */
#include <stdlib.h>
#include <string.h>
#include "diag/internal.h"

/* The frames kept for a collective: the innermost CT_DIAG_STACK, the call site last if deeper. */
static uint8_t keep_frames(struct ct_stack_line *out, const struct ct_stack_line *in, int n, int si)
{
	uint8_t k = (uint8_t)(n < CT_DIAG_STACK ? (n > 0 ? n : 0) : CT_DIAG_STACK);

	if (k)
		memcpy(out, in, k * sizeof(*out));
	if (si >= CT_DIAG_STACK)
		out[CT_DIAG_STACK - 1] = in[si];
	return k;
}

static int16_t log_stack(struct ct_diag *d, struct dproc *p, const struct ct_stack_line *l,
			 uint8_t n)
{
	uint32_t h = 2166136261u;
	struct logstack *e;

	if (!n)
		return -1;
	for (int i = 0; i < n; i++)
		h = (h ^ (uint32_t)(uintptr_t)l[i].qualname ^ (uint32_t)l[i].line) * 16777619u;
	for (int i = 0; i < p->nstacks; i++) {
		e = &p->stacks[i];
		if (e->hash == h && e->n == n && !memcmp(e->l, l, n * sizeof(*l)))
			return (int16_t)i;
	}
	if (!p->stacks)
		p->stacks = calloc(CT_DIAG_LOG_STACKS, sizeof(*p->stacks));
	if (!p->stacks || p->nstacks == CT_DIAG_LOG_STACKS) {
		d->drops.log_stacks_dropped++;
		return -1;
	}
	e = &p->stacks[p->nstacks];
	e->hash = h;
	e->n = n;
	memcpy(e->l, l, n * sizeof(*l));
	return (int16_t)p->nstacks++;
}

/* Appends a collective (or creation) to the process' diag_log; its index, or -1. */
int32_t diag_log_add(struct ct_diag *d, struct dproc *p, const struct ct_diag_call *c, int32_t comm,
		     int si, bool helper, bool creation)
{
	struct ct_stack_line fr[CT_DIAG_STACK];
	struct ct_diag_logrec *e;

	if (d->o.no_log)
		return -1;
	if (p->nlog == CT_DIAG_LOG || d->nlog >= CT_DIAG_LOG_TOTAL) {
		d->drops.log_dropped++;
		return -1;
	}
	if (p->nlog == p->caplog) {
		uint32_t cap = p->caplog ? p->caplog * 2 : 64;
		struct ct_diag_logrec *n = realloc(p->log, cap * sizeof(*n));

		if (!n) {
			d->drops.log_dropped++;
			return -1;
		}
		p->log = n;
		p->caplog = cap;
	}
	e = &p->log[p->nlog];
	memset(e, 0, sizeof(*e));
	e->ts = c->ts;
	e->count = c->count;
	e->has_count = c->has_count;
	e->bytes = c->bytes;
	e->function = c->function;
	e->dtype = c->dtype;
	e->tid = c->tid;
	e->comm_size = c->comm_size;
	e->comm_rank = c->comm_rank;
	e->comm = comm;
	e->helper = helper;
	e->creation = creation;
	e->stack =
	    c->nstack > 0 ? log_stack(d, p, fr, keep_frames(fr, c->stack, c->nstack, si)) : -1;
	d->nlog++;
	return (int32_t)p->nlog++;
}

void diag_log_end(struct dproc *p, const struct rec *r, uint64_t ts)
{
	if (r->logi >= 0 && (uint32_t)r->logi < p->nlog)
		p->log[r->logi].end = ts;
}

bool ct_diag_log_get(const struct ct_diag *d, uint32_t pid, const struct ct_diag_logrec **recs,
		     uint32_t *n)
{
	const struct dproc *p = diag_proc_find((struct ct_diag *)d, pid);

	if (!p)
		return false;
	*recs = p->log;
	*n = p->nlog;
	return true;
}

int ct_diag_log_stack(const struct ct_diag *d, uint32_t pid, int i, const struct ct_stack_line **l)
{
	const struct dproc *p = diag_proc_find((struct ct_diag *)d, pid);

	if (!p || i < 0 || i >= p->nstacks)
		return 0;
	*l = p->stacks[i].l;
	return p->stacks[i].n;
}

int ct_diag_log_nstacks(const struct ct_diag *d, uint32_t pid)
{
	const struct dproc *p = diag_proc_find((struct ct_diag *)d, pid);

	return p ? p->nstacks : 0;
}
