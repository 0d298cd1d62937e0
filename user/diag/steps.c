// SPDX-License-Identifier: MIT
/* Training steps: the period of a process' collective sequence, the runs of whole steps, the
 * communicators first used inside them. */
#include <string.h>
#include "diag/internal.h"

static uint32_t find_period(uint32_t (*get)(const void *, uint64_t), const void *ctx, uint64_t n,
			    uint64_t floor, uint32_t max_p, uint64_t *len)
{
	uint64_t avail = n - floor;

	for (uint32_t p = 1; p <= max_p && 3ULL * p <= avail; p++) {
		uint64_t j = n - 1, l = p;

		while (j >= floor + p && get(ctx, j) == get(ctx, j - p)) {
			l++;
			j--;
		}
		if (l >= 3ULL * p) {
			*len = l;
			return p;
		}
	}
	return 0;
}

static uint32_t get_linear(const void *ctx, uint64_t i)
{
	return ((const uint32_t *)ctx)[i];
}

uint32_t ct_diag_period(const uint32_t *sig, uint64_t n, uint32_t max_p, uint64_t *len)
{
	*len = 0;
	return find_period(get_linear, sig, n, 0, max_p, len);
}

static uint32_t get_ring(const void *ctx, uint64_t i)
{
	return ((const struct steps *)ctx)->e[i % CT_DIAG_SIGS].sig;
}

static void run_step(const struct steps *st, struct run *r, uint64_t last)
{
	uint64_t vol = 0;

	for (uint64_t k = last + 1 - r->p; k <= last; k++)
		vol += st->e[k % CT_DIAG_SIGS].bytes;
	if (!r->steps) {
		r->first_vol = r->base_vol = vol;
		r->growth = 0;
	} else if (vol > r->last_vol) {
		r->growth++;
	} else {
		r->growth = 0;
		r->base_vol = vol;
	}
	r->last_vol = vol;
	r->steps++;
}

static uint32_t sig_hash(const struct ct_diag_call *c, const struct ct_stack_line *site)
{
	uint64_t v[6] = {c->lib,
			 c->kind,
			 (uint64_t)(uintptr_t)c->function,
			 (uint64_t)c->comm_size,
			 site ? (uint64_t)(uintptr_t)site->qualname : 0,
			 site ? (uint64_t)site->line : 0};
	uint32_t h = 2166136261u;

	for (int i = 0; i < 6; i++)
		for (int b = 0; b < 8; b++) {
			h ^= (uint8_t)(v[i] >> (8 * b));
			h *= 16777619u;
		}
	return h;
}

/* Collectives covered by whole steps of a run. */
static uint64_t coverage(const struct run *r)
{
	return r->steps * r->p;
}

static const struct run *best_run(const struct steps *st)
{
	return coverage(&st->cur) > coverage(&st->best) ? &st->cur : &st->best;
}

/*
 * The training steps: the periodic run that covers the most collectives, with at least
 * min_repeats steps and at least half of the process' collectives (a loop of a few
 * calls from one line, inside a step, is not the step). NULL: none.
 */
const struct run *diag_steady_run(const struct ct_diag *d, const struct steps *st)
{
	const struct run *b = best_run(st);

	if (!b->p || b->steps < d->o.min_repeats || coverage(b) * 2 < st->n)
		return NULL;
	return b;
}

void diag_steps_add(struct steps *st, const struct ct_diag_call *c,
		    const struct ct_stack_line *site, bool helper)
{
	uint64_t i = st->n++, floor, len;
	struct sigent *e = &st->e[i % CT_DIAG_SIGS];
	uint32_t p;

	memset(e, 0, sizeof(*e));
	e->sig = sig_hash(c, site);
	e->kind = c->kind;
	e->helper = helper;
	e->bytes = c->bytes;
	e->function = c->function;
	if (site) {
		e->site = *site;
		e->has_site = true;
	}
	if (st->cur.p) {
		p = st->cur.p;
		if (st->e[(i - p) % CT_DIAG_SIGS].sig == e->sig) {
			st->cur.end = i;
			if ((i - st->cur.start + 1) % p == 0)
				run_step(st, &st->cur, i);
			return;
		}
		if (coverage(&st->cur) > coverage(&st->best))
			st->best = st->cur;
		memset(&st->cur, 0, sizeof(st->cur));
	}
	floor = st->n > CT_DIAG_SIGS ? st->n - CT_DIAG_SIGS : 0;
	p = find_period(get_ring, st, st->n, floor, CT_DIAG_MAX_PERIOD, &len);
	if (!p)
		return;
	st->cur.p = p;
	st->cur.start = st->n - len;
	st->cur.end = i;
	for (uint64_t k = st->cur.start + p - 1; k <= i; k += p)
		run_step(st, &st->cur, k);
}

bool diag_in_run(const struct run *r, uint64_t index)
{
	return r->p && r->steps >= 2 && index >= r->start + r->p && index <= r->end;
}

void diag_newcomm_add(struct ct_diag *d, struct dproc *p, const char *fn, bool creation,
		      const struct ct_stack_line *site, const char *comm)
{
	struct newcomm *n = &p->nc[p->nnc % CT_DIAG_NEWCOMMS];

	if (p->nnc >= CT_DIAG_NEWCOMMS) {
		/* Judged now, with the runs known now. */
		if (diag_in_run(&p->st.cur, n->index) || diag_in_run(&p->st.best, n->index))
			p->nc_confirmed++;
		d->drops.newcomm_evicted++;
	}
	memset(n, 0, sizeof(*n));
	n->index = p->st.n;
	n->function = fn;
	n->creation = creation;
	if (site) {
		n->site = *site;
		n->has_site = true;
	}
	snprintf(n->comm, sizeof(n->comm), "%s", comm ? comm : "");
	p->nnc++;
}

bool ct_diag_proc_steps(const struct ct_diag *d, int i, struct ct_diag_steps_info *si)
{
	const struct run *b;

	if (i < 0 || i >= d->nprocs)
		return false;
	b = diag_steady_run(d, &d->procs[i]->st);
	memset(si, 0, sizeof(*si));
	si->pid = d->procs[i]->pid;
	si->rank = d->procs[i]->rank;
	si->signatures = d->procs[i]->st.n;
	if (b) {
		si->period = b->p;
		si->steps = b->steps;
		si->first_step_bytes = b->first_vol;
		si->last_step_bytes = b->last_vol;
		si->growth_steps = b->growth;
	}
	return true;
}
