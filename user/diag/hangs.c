// SPDX-License-Identifier: MIT
/* Hangs: a rank blocked in a collective while the others moved on or never came, alerted while
 * tracing. */
#include <string.h>
#include "diag/internal.h"

bool diag_blocked(const struct rec *r)
{
	if (!r->seq || r->aborted)
		return false;
	return !r->returned || (r->exec_wait && r->exec_started && !r->exec_done);
}

static void hang_alert(struct ct_diag *d, struct member *m, struct rec *r, uint64_t now)
{
	struct comm *c = d->comms[m->comm];
	struct dproc *p = d->procs[m->proc];
	struct ct_diag_finding *f;
	char me[64], buf[64], dur[32], miss[160], comm[48];
	size_t off = 0;
	int missing = 0, moved = 0;
	char moved_s[160] = "";
	size_t moff = 0;

	r->alerted = true;
	if (d->nhangs == CT_DIAG_HANGS) {
		d->drops.hangs_over_limit++;
		return;
	}
	f = &d->hangs[d->nhangs];
	memset(f, 0, sizeof(*f));
	f->kind = CT_DF_HANG;
	f->severity = CT_DS_ERROR;
	f->pid = p->pid;
	f->tid = r->tid;
	f->ts = r->ts;
	f->ranks[0] = p->rank;
	f->pids[0] = p->pid;
	f->nranks = 1;
	diag_comm_name(c, f->comm, sizeof(f->comm));
	f->function = r->function;
	f->seq = r->seq;
	f->value_ns = now - r->ts;
	diag_fmt_site(f->site, sizeof(f->site), r);
	diag_fmt_stack(f->stack, sizeof(f->stack), r);
	for (int i = 0; i < c->nmembers; i++) {
		struct member *o = d->members[c->members[i]];
		struct dproc *op = d->procs[o->proc];
		const struct rec *orr = diag_rec_of(d, c->members[i], r->seq);
		int w;

		if (o == m)
			continue;
		diag_who(buf, sizeof(buf), op);
		if (o->issued < r->seq) {
			w = snprintf(f->what + off, sizeof(f->what) - off, "%s%s at #%llu%s",
				     missing ? ", " : "", buf, (unsigned long long)o->issued,
				     op->exited ? " exited" : "");
			if (w > 0 && (size_t)w < sizeof(f->what) - off)
				off += (size_t)w;
			missing++;
			if (f->nranks < CT_DIAG_FRANKS) {
				f->ranks[f->nranks] = op->rank;
				f->pids[f->nranks++] = op->pid;
			}
		} else if (o->issued > r->seq || (orr && orr->end)) {
			w = snprintf(moved_s + moff, sizeof(moved_s) - moff, "%s%s at #%llu",
				     moved ? ", " : "", buf, (unsigned long long)o->issued);
			if (w > 0 && (size_t)w < sizeof(moved_s) - moff)
				moff += (size_t)w;
			moved++;
		}
	}
	if (c->nmembers < c->size) {
		int w = snprintf(f->what + off, sizeof(f->what) - off, "%s%d rank%s not traced",
				 missing ? ", " : "", c->size - c->nmembers,
				 c->size - c->nmembers == 1 ? "" : "s");

		if (w > 0 && (size_t)w < sizeof(f->what) - off)
			off += (size_t)w;
	}
	if (!missing && !moved && c->nmembers == c->size) {
		/* Every rank is inside it: a stuck collective, not a rank left behind. */
		r->alerted = false;
		return;
	}
	d->nhangs++;
	snprintf(miss, sizeof(miss), "%s", f->what[0] ? f->what : "none");
	snprintf(comm, sizeof(comm), "%s", f->comm);
	diag_who(me, sizeof(me), p);
	diag_fmt_secs(dur, sizeof(dur), f->value_ns);
	snprintf(f->summary, sizeof(f->summary), "%s blocked %s in %s #%llu on %s; missing: %s%s%s",
		 me, dur, r->function, (unsigned long long)r->seq, comm, miss,
		 moved ? "; moved on: " : "", moved ? moved_s : "");
	if (d->o.alerts) {
		fprintf(d->o.alerts, "commtrace: HANG: %s\n  stack: %s\n", f->summary,
			f->stack[0] ? f->stack : "(no Python stack)");
		fflush(d->o.alerts);
	}
}

int ct_diag_check(struct ct_diag *d, uint64_t now)
{
	int before;

	if (!d || !d->o.hang_ns)
		return 0;
	before = d->nhangs;
	for (int i = 0; i < d->nmembers; i++) {
		struct member *m = d->members[i];

		if (d->comms[m->comm]->ambiguous)
			continue;
		for (int k = 0; k < CT_DIAG_WINDOW; k++) {
			struct rec *r = &m->w[k];

			if (diag_blocked(r) && !r->alerted && now > r->ts &&
			    now - r->ts >= d->o.hang_ns)
				hang_alert(d, m, r, now);
		}
	}
	return d->nhangs - before;
}
