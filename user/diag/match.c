// SPDX-License-Identifier: MIT
/* Matching: one collective's halves across ranks by identity and sequence number; arrival skew and
 * mismatches. */
#include <stdlib.h>
#include <string.h>
#include "diag/internal.h"

/* t, on communicator c, among the largest skews (its name formatted only if it is). */
static void top_add(struct ct_diag *d, const struct ct_diag_top *t, const struct comm *c)
{
	int i = d->ntop < CT_DIAG_TOP ? d->ntop++ : CT_DIAG_TOP - 1;

	if (i == CT_DIAG_TOP - 1 && d->ntop == CT_DIAG_TOP && d->top[i].skew_ns >= t->skew_ns &&
	    d->top[i].function)
		return;
	d->top[i] = *t;
	diag_comm_name(c, d->top[i].comm, sizeof(d->top[i].comm));
	for (; i > 0 && d->top[i - 1].skew_ns < d->top[i].skew_ns; i--) {
		struct ct_diag_top x = d->top[i - 1];

		d->top[i - 1] = d->top[i];
		d->top[i] = x;
	}
}

static void mismatch_what(char *buf, size_t len, const struct rec *a, const struct rec *b)
{
	buf[0] = 0;
	if (a->kind != b->kind || strcmp(a->function, b->function))
		snprintf(buf, len, "collective %s vs %s", a->function, b->function);
	else if (a->has_count && b->has_count && diag_count_comparable(a->kind, a->function) &&
		 a->count != b->count)
		snprintf(buf, len, "count %llu vs %llu", (unsigned long long)a->count,
			 (unsigned long long)b->count);
	else if (diag_dtype_comparable(a->kind, a->dtype, b->dtype) && strcmp(a->dtype, b->dtype))
		snprintf(buf, len, "dtype %s vs %s", a->dtype, b->dtype);
}

/* Room for a record and a member per member of c. */
static bool scratch(struct ct_diag *d, int n)
{
	struct rec **r;
	struct member **m;

	if (n <= d->capscratch)
		return true;
	r = realloc(d->mrecs, (size_t)n * sizeof(*r));
	if (r)
		d->mrecs = r;
	m = realloc(d->mms, (size_t)n * sizeof(*m));
	if (m)
		d->mms = m;
	if (!r || !m)
		return false;
	d->capscratch = n;
	return true;
}

/* Every member's record of seq is in: the collective's skew, waits and mismatches. */
static void match(struct ct_diag *d, struct comm *c, uint64_t seq)
{
	struct rec **recs = d->mrecs, *ref = NULL;
	struct member **ms = d->mms, *last = NULL, *refm = NULL;
	uint64_t lo = UINT64_MAX, hi = 0;
	char what[160];

	for (int i = 0; i < c->nmembers; i++) {
		ms[i] = d->members[c->members[i]];
		recs[i] = diag_rec_of(d, c->members[i], seq);
		if (!recs[i] || recs[i]->matched)
			return;
	}
	for (int i = 0; i < c->nmembers; i++) {
		recs[i]->matched = true;
		if (recs[i]->ts < lo)
			lo = recs[i]->ts;
		if (recs[i]->ts >= hi) {
			hi = recs[i]->ts;
			last = ms[i];
		}
		if (!refm || ms[i]->comm_rank < refm->comm_rank) {
			refm = ms[i];
			ref = recs[i];
		}
	}
	c->matched++;
	d->matched++;
	d->skew_last = hi - lo;
	if (hi - lo > d->skew_max)
		d->skew_max = hi - lo;
	d->last_late = hi - lo >= d->o.late_ns;
	for (int i = 0; i < c->nmembers; i++) {
		struct dproc *p = d->procs[ms[i]->proc];

		ms[i]->wait_ns += hi - recs[i]->ts;
		ms[i]->matched++;
		p->wait_ns += hi - recs[i]->ts;
		p->matched++;
	}
	{
		struct ct_diag_top t = {.function = ref->function, .seq = seq, .skew_ns = hi - lo};
		struct dproc *lp = d->procs[last->proc];

		t.last_rank = lp->rank;
		t.last_pid = lp->pid;
		t.ts = lo;
		top_add(d, &t, c);
	}
	if (hi - lo >= d->o.late_ns) {
		int li = 0;

		for (int i = 0; i < c->nmembers; i++)
			if (ms[i] == last)
				li = i;
		last->late++;
		d->procs[last->proc]->late++;
		if (hi - lo > last->late_max) {
			last->late_max = hi - lo;
			last->late_seq = seq;
			last->late_fn = recs[li]->function;
			last->late_ts = lo;
			diag_fmt_site(last->late_site, sizeof(last->late_site), recs[li]);
		}
	}
	for (int i = 0; i < c->nmembers; i++) {
		struct ct_diag_finding *f;
		struct dproc *pa, *pb;
		char wa[64], wb[64];

		if (recs[i] == ref)
			continue;
		mismatch_what(what, sizeof(what), ref, recs[i]);
		if (!what[0])
			continue;
		c->mismatches++;
		if (c->mismatch || !(c->mismatch = malloc(sizeof(*c->mismatch))))
			break;
		f = c->mismatch;
		pa = d->procs[refm->proc];
		pb = d->procs[ms[i]->proc];
		memset(f, 0, sizeof(*f));
		f->kind = CT_DF_MISMATCH;
		f->severity = CT_DS_ERROR;
		f->nranks = 2;
		f->ranks[0] = pa->rank;
		f->pids[0] = pa->pid;
		f->ranks[1] = pb->rank;
		f->pids[1] = pb->pid;
		f->pid = pb->pid;
		f->tid = recs[i]->tid;
		f->ts = recs[i]->ts;
		diag_comm_name(c, f->comm, sizeof(f->comm));
		f->function = ref->function;
		f->function2 = recs[i]->function;
		f->seq = seq;
		f->count = ref->count;
		f->bytes = ref->bytes;
		f->bytes2 = recs[i]->bytes;
		snprintf(f->what, sizeof(f->what), "%s", what);
		diag_fmt_site(f->site, sizeof(f->site), ref);
		diag_fmt_site(f->site2, sizeof(f->site2), recs[i]);
		diag_fmt_stack(f->stack, sizeof(f->stack), ref);
		diag_fmt_stack(f->stack2, sizeof(f->stack2), recs[i]);
		diag_who(wa, sizeof(wa), pa);
		diag_who(wb, sizeof(wb), pb);
		snprintf(f->summary, sizeof(f->summary),
			 "%s at #%llu of %s: %s has %s, %s has %s (%s)", "mismatched collective",
			 (unsigned long long)seq, f->comm, wa, ref->function, wb, recs[i]->function,
			 what);
		if (d->o.alerts)
			fprintf(d->o.alerts, "commtrace: MISMATCH: %s\n  %s: %s\n  %s: %s\n",
				f->summary, wa, f->stack[0] ? f->stack : "(no Python stack)", wb,
				f->stack2[0] ? f->stack2 : "(no Python stack)");
		break;
	}
}

void diag_match_arrived(struct ct_diag *d, int32_t ci, uint64_t seq)
{
	struct comm *c = d->comms[ci];
	int k = (int)((seq - 1) % CT_DIAG_WINDOW);

	if (c->arr[k].seq < seq) { /* an older number here can no longer match: evicted */
		c->arr[k].seq = seq;
		c->arr[k].arrived = 0;
	} else if (c->arr[k].seq > seq) {
		return;
	}
	if (++c->arr[k].arrived < (uint32_t)c->size || c->ambiguous || c->nmembers != c->size)
		return;
	if (!scratch(d, c->nmembers)) {
		d->drops.window_evicted++; /* no memory to match it: it counts as not matched */
		return;
	}
	match(d, c, seq);
}

uint64_t ct_diag_matched(const struct ct_diag *d)
{
	return d->matched;
}

int ct_diag_top(const struct ct_diag *d, const struct ct_diag_top **out)
{
	*out = d->top;
	return d->ntop;
}
