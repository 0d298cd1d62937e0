// SPDX-License-Identifier: MIT
/* The diagnosis' entry points: a call, a return, a process gone, a replayed call (merge); what each
 * updates. */
#include <string.h>
#include "catalog/catalog.h"
#include "diag/internal.h"

static void inflight_set(struct dproc *p, uint32_t tid, int32_t member, uint64_t seq, bool exec)
{
	int slot = -1;

	for (int i = 0; i < CT_DIAG_INFLIGHT; i++) {
		if (p->fl[i].tid == tid) {
			slot = i;
			break;
		}
		if (!p->fl[i].tid && slot < 0)
			slot = i;
	}
	if (slot < 0)
		slot = (int)(tid % CT_DIAG_INFLIGHT);
	p->fl[slot].tid = tid;
	p->fl[slot].member = member;
	p->fl[slot].seq = seq;
	p->fl[slot].exec = exec;
}

static void exec_start(struct ct_diag *d, struct dproc *p, const struct ct_diag_call *c)
{
	for (int i = 0; i < p->npend; i++) {
		struct rec *r = diag_rec_of(d, p->pend[i].member, p->pend[i].seq);

		if (!r) { /* evicted from the window meanwhile */
			memmove(&p->pend[i], &p->pend[i + 1],
				(p->npend - i - 1) * sizeof(p->pend[0]));
			p->npend--;
			i--;
			d->drops.pending_evicted++;
			continue;
		}
		if (r->kind != c->kind || r->ts > c->ts)
			continue;
		r->exec_started = true;
		d->last.member = p->pend[i].member; /* the execution carries its call's identity */
		d->last.seq = p->pend[i].seq;
		inflight_set(p, c->tid, p->pend[i].member, p->pend[i].seq, true);
		memmove(&p->pend[i], &p->pend[i + 1], (p->npend - i - 1) * sizeof(p->pend[0]));
		p->npend--;
		return;
	}
	d->drops.executions_unmatched++;
}

static void pair_add(struct dproc *p, const struct rec *a, const struct rec *b, int32_t ca,
		     int32_t cb, uint64_t gap)
{
	struct pair *x = NULL;

	for (int i = 0; i < p->npairs; i++) {
		struct pair *y = &p->pairs[i];

		if (y->ca == ca && y->cb == cb && y->fa == a->function && y->fb == b->function &&
		    (a->site < 0 || (y->a.qualname == a->stack[a->site].qualname &&
				     y->a.line == a->stack[a->site].line)) &&
		    (b->site < 0 || (y->b.qualname == b->stack[b->site].qualname &&
				     y->b.line == b->stack[b->site].line))) {
			x = y;
			break;
		}
	}
	if (!x) {
		if (p->npairs == CT_DIAG_PAIRS)
			return;
		x = &p->pairs[p->npairs++];
		memset(x, 0, sizeof(*x));
		x->ca = ca;
		x->cb = cb;
		x->fa = a->function;
		x->fb = b->function;
		if (a->site >= 0) {
			x->a = a->stack[a->site];
			x->has_a = true;
		}
		if (b->site >= 0) {
			x->b = b->stack[b->site];
			x->has_b = true;
		}
		x->ts = b->ts;
		x->tid = b->tid;
	}
	x->count++;
	if (gap > x->max_gap)
		x->max_gap = gap;
}

/* Reductions on different communicators, the next issued only once the last completed. */
static void serial_check(struct ct_diag *d, struct dproc *p, int32_t mi, const struct rec *r)
{
	int slot = -1;

	for (int i = 0; i < CT_DIAG_INFLIGHT; i++) {
		if (p->last[i].tid == r->tid) {
			slot = i;
			break;
		}
		if (!p->last[i].tid && slot < 0)
			slot = i;
	}
	if (slot < 0)
		slot = (int)(r->tid % CT_DIAG_INFLIGHT);
	if (p->last[slot].tid == r->tid) {
		const struct rec *prev = diag_rec_of(d, p->last[slot].member, p->last[slot].seq);
		int32_t pc = prev ? d->members[p->last[slot].member]->comm : -1;
		int32_t rc = d->members[mi]->comm;

		if (prev && diag_is_reduction(prev->kind) && diag_is_reduction(r->kind) &&
		    pc != rc && prev->end && r->ts >= prev->end &&
		    r->ts - prev->end <= d->o.serial_gap_ns)
			pair_add(p, prev, r, pc, rc, r->ts - prev->end);
	}
	p->last[slot].tid = r->tid;
	p->last[slot].member = mi;
	p->last[slot].seq = r->seq;
}

/* The call's record: *mi_out and the returned sequence number (0: none). */
static uint64_t diag_call(struct ct_diag *d, const struct ct_diag_call *c, int32_t *mi_out)
{
	const struct ct_stack_line *site = NULL;
	struct dproc *p;
	struct member *m;
	struct rec *r;
	int32_t mi;
	int si;
	bool helper;

	*mi_out = -1;
	if (!d)
		return 0;
	d->last.pid = c->pid;
	d->last.tid = c->tid;
	d->last.ts = c->ts;
	d->last.member = -1;
	if (c->depth != 0)
		return 0;
	if (c->kind != CT_K_COMM_INIT && c->kind != CT_K_COMM_SPLIT && !diag_matchable(c->kind))
		return 0;
	p = diag_proc_get(d, c->pid, c->rank);
	if (!p) {
		d->drops.procs_over_limit++;
		return 0;
	}
	si = c->nstack > 0 ? diag_site_index(c->stack, c->nstack) : -1;
	if (si >= 0)
		site = &c->stack[si];
	if (c->kind == CT_K_COMM_INIT || c->kind == CT_K_COMM_SPLIT) {
		diag_newcomm_add(d, p, c->function, true, site, NULL);
		diag_log_add(d, p, c, -1, si, false, true);
		return 0;
	}
	if (c->lib == CT_LIB_GLOO && (p->c10d_gloo || c->c10d) && !c->replayed) {
		exec_start(d, p, c);
		return 0;
	}
	helper = c->replayed ? c->helper : diag_helper_frame(c->stack, c->nstack);
	mi = diag_handle_member(d, p, c, site);
	diag_steps_add(&p->st, c, site, helper);
	if (mi < 0) {
		diag_log_add(d, p, c, -1, si, helper, false);
		return 0;
	}
	m = d->members[mi];
	d->comms[m->comm]->collectives++;
	if (d->comms[m->comm]->ambiguous)
		d->drops.ambiguous++;
	m->issued++;
	r = &m->w[(m->issued - 1) % CT_DIAG_WINDOW];
	if (r->seq && !r->matched && !d->comms[m->comm]->ambiguous &&
	    d->comms[m->comm]->nmembers == d->comms[m->comm]->size)
		d->drops.window_evicted++;
	memset(r, 0, sizeof(*r));
	r->seq = m->issued;
	r->ts = c->ts;
	r->count = c->count;
	r->has_count = c->has_count;
	r->bytes = c->bytes;
	r->function = c->function;
	r->dtype = c->dtype;
	r->tid = c->tid;
	r->kind = c->kind;
	r->helper = helper;
	r->site = (int8_t)(si < CT_DIAG_STACK ? si : -1);
	r->nstack = (uint8_t)(c->nstack < CT_DIAG_STACK ? c->nstack : CT_DIAG_STACK);
	if (c->nstack > 0)
		memcpy(r->stack, c->stack, r->nstack * sizeof(r->stack[0]));
	if (si >= CT_DIAG_STACK) { /* keep the site as the last frame shown */
		r->stack[CT_DIAG_STACK - 1] = c->stack[si];
		r->site = CT_DIAG_STACK - 1;
	}
	r->logi = diag_log_add(d, p, c, m->comm, si, helper, false);
	*mi_out = mi;
	d->last.member = mi;
	d->last.seq = r->seq;
	if (c->replayed) { /* its completion comes from ct_diag_replay's end event */
		serial_check(d, p, mi, r);
		diag_match_arrived(d, m->comm, r->seq);
		return r->seq;
	}
	if (c->lib == CT_LIB_C10D && !strncmp(c->function, "ProcessGroupGloo::", 18)) {
		p->c10d_gloo = true;
		r->exec_wait = true;
		if (p->npend == CT_DIAG_PENDING) {
			memmove(&p->pend[0], &p->pend[1], (p->npend - 1) * sizeof(p->pend[0]));
			p->npend--;
			d->drops.pending_evicted++;
		}
		p->pend[p->npend].member = mi;
		p->pend[p->npend].seq = r->seq;
		p->npend++;
	}
	inflight_set(p, c->tid, mi, r->seq, false);
	serial_check(d, p, mi, r);
	diag_match_arrived(d, m->comm, r->seq);
	return r->seq;
}

void ct_diag_call(struct ct_diag *d, const struct ct_diag_call *c)
{
	int32_t mi;

	diag_call(d, c, &mi);
}

/* A collective completed: its end, its log entry, its member's progress. */
static void rec_end(struct ct_diag *d, struct dproc *p, int32_t member, struct rec *r, uint64_t ts)
{
	struct member *m = d->members[member];

	r->end = ts;
	diag_log_end(p, r, ts);
	if (r->seq > m->completed)
		m->completed = r->seq;
}

void ct_diag_ret(struct ct_diag *d, uint32_t pid, uint32_t tid, uint8_t depth, uint64_t ts)
{
	struct dproc *p;
	struct rec *r;

	if (!d || depth != 0 || !(p = diag_proc_find(d, pid)))
		return;
	for (int i = 0; i < CT_DIAG_INFLIGHT; i++) {
		if (p->fl[i].tid != tid)
			continue;
		r = diag_rec_of(d, p->fl[i].member, p->fl[i].seq);
		if (r && p->fl[i].exec) {
			r->exec_done = true;
			rec_end(d, p, p->fl[i].member, r, ts);
		} else if (r) {
			r->returned = true;
			if (!r->exec_wait)
				rec_end(d, p, p->fl[i].member, r, ts);
		}
		p->fl[i].tid = 0;
		return;
	}
}

/*
 * Drops member mi's first and only collective: its record and arrival, its pending
 * execution, in-flight and last-call slots, and its diag_log entry if it is the last one.
 */
static void drop_first(struct ct_diag *d, int32_t mi)
{
	struct member *m = d->members[mi];
	struct comm *c = d->comms[m->comm];
	struct dproc *p = d->procs[m->proc];
	struct rec *r = &m->w[0];

	for (int i = 0; i < p->npend; i++) {
		if (p->pend[i].member != mi || p->pend[i].seq != 1)
			continue;
		memmove(&p->pend[i], &p->pend[i + 1], (p->npend - i - 1) * sizeof(p->pend[0]));
		p->npend--;
		break;
	}
	for (int i = 0; i < CT_DIAG_INFLIGHT; i++) {
		if (p->fl[i].tid && p->fl[i].member == mi && p->fl[i].seq == 1)
			p->fl[i].tid = 0;
		if (p->last[i].tid && p->last[i].member == mi && p->last[i].seq == 1)
			p->last[i].tid = 0;
	}
	if (r->logi >= 0 && (uint32_t)r->logi + 1 == p->nlog) {
		p->nlog--;
		d->nlog--;
	}
	if (c->arr[0].seq == 1 && c->arr[0].arrived)
		c->arr[0].arrived--;
	c->collectives--;
	memset(r, 0, sizeof(*r));
	m->issued = 0;
	m->completed = 0;
	d->drops.unseen_dropped++;
}

/* Is m's only collective so far unmatched and entered by ts? */
static bool first_only(const struct member *m, uint64_t ts)
{
	return m->issued == 1 && !m->w[0].matched && m->w[0].ts <= ts;
}

void ct_diag_unseen(struct ct_diag *d, uint32_t pid, uint8_t lib, uint64_t ts)
{
	struct dproc *p;
	int32_t found = -1;
	struct comm *c;

	if (!d)
		return;
	p = diag_proc_find(d, pid);
	for (int ci = 0; ci < d->ncomms; ci++) {
		bool mine = false, some = false;

		c = d->comms[ci];
		if (c->lib != lib || c->nmembers >= c->size)
			continue;
		for (int k = 0; k < c->nmembers; k++) {
			const struct member *m = d->members[c->members[k]];

			mine |= p && d->procs[m->proc] == p;
			some |= first_only(m, ts);
		}
		if (mine || !some)
			continue;
		if (found >= 0) {
			d->drops.unseen_unaligned++;
			return;
		}
		found = ci;
	}
	if (found < 0)
		return;
	c = d->comms[found];
	for (int k = 0; k < c->nmembers; k++)
		if (first_only(d->members[c->members[k]], ts))
			drop_first(d, c->members[k]);
}

uint64_t ct_diag_replay_call(struct ct_diag *d, const struct ct_diag_call *c, int32_t *member)
{
	return diag_call(d, c, member);
}

void ct_diag_replay_end(struct ct_diag *d, uint32_t pid, int32_t member, uint64_t seq, uint64_t ts)
{
	struct dproc *p = diag_proc_find(d, pid);
	struct rec *r = diag_rec_of(d, member, seq);

	if (!p || !r)
		return;
	r->returned = true;
	rec_end(d, p, member, r, ts);
}

void ct_diag_proc_exit(struct ct_diag *d, uint32_t pid)
{
	struct dproc *p = d ? diag_proc_find(d, pid) : NULL;

	if (!p || p->exited)
		return;
	p->exited = true;
	for (int i = 0; i < p->nmem; i++) {
		struct member *m = d->members[p->mem[i]];

		for (int k = 0; k < CT_DIAG_WINDOW; k++)
			if (m->w[k].seq && !m->w[k].end)
				m->w[k].aborted = true;
	}
}

bool ct_diag_call_id(const struct ct_diag *d, uint32_t pid, uint32_t tid, uint64_t ts, int *comm,
		     uint64_t *seq)
{
	if (!d || d->last.member < 0 || d->last.pid != pid || d->last.tid != tid ||
	    d->last.ts != ts)
		return false;
	*comm = d->members[d->last.member]->comm;
	*seq = d->last.seq;
	return true;
}
