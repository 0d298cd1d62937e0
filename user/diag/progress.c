// SPDX-License-Identifier: MIT
/*
 * Progress per (process, communicator): the question asked first when a job hangs, "how
 * far did each rank get on each communicator, and which call is it inside, since when?"
 * (diag.h, struct ct_diag_progress). Read from the members' windows, nothing kept beside.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "diag/internal.h"

static void fill(const struct ct_diag *d, const struct member *m, struct ct_diag_progress *o)
{
	const struct dproc *p = d->procs[m->proc];
	const struct rec *old = NULL;

	memset(o, 0, sizeof(*o));
	o->pid = p->pid;
	o->rank = p->rank;
	o->exited = p->exited;
	diag_comm_name(d->comms[m->comm], o->comm, sizeof(o->comm));
	o->comm_rank = m->comm_rank;
	o->entered = m->issued;
	o->completed = m->completed;
	/* The oldest call not completed: still inside it, or cut short by the exit. */
	for (int k = 0; k < CT_DIAG_WINDOW; k++) {
		const struct rec *r = &m->w[k];

		if (r->seq && !r->end && (!old || r->seq < old->seq))
			old = r;
	}
	if (!old)
		return;
	o->inflight = true;
	o->inflight_seq = old->seq;
	o->inflight_ts = old->ts;
	o->inflight_fn = old->function;
	diag_fmt_site(o->site, sizeof(o->site), old);
}

/* By communicator (in the order first seen), then rank, then pid. */
static int by_comm_rank(const void *a, const void *b)
{
	const struct ct_diag_progress *x = a, *y = b;

	if (x->comm_index != y->comm_index)
		return x->comm_index < y->comm_index ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

int ct_diag_nmembers(const struct ct_diag *d)
{
	return d ? d->nmembers : 0;
}

int ct_diag_progress(const struct ct_diag *d, struct ct_diag_progress *out, int max)
{
	int n = 0;

	for (int i = 0; d && i < d->nmembers && n < max; i++) {
		if (!d->members[i]->issued)
			continue;
		fill(d, d->members[i], &out[n]);
		out[n++].comm_index = d->members[i]->comm;
	}
	qsort(out, (size_t)n, sizeof(*out), by_comm_rank);
	return n;
}

int ct_diag_progress_print(const struct ct_diag *d, FILE *out, uint64_t now)
{
	struct ct_diag_progress *g = d ? calloc((size_t)d->nmembers + 1, sizeof(*g)) : NULL;
	int n = g ? ct_diag_progress(d, g, d->nmembers) : 0;

	for (int i = 0; i < n; i++) {
		char rank[16], age[32];

		if (!i)
			fprintf(out, "%-8s %-4s %-14s %10s %10s  %s\n", "PID", "RANK",
				"COMMUNICATOR", "ENTERED", "COMPLETED", "IN FLIGHT (oldest)");
		snprintf(rank, sizeof(rank), g[i].rank >= 0 ? "%d" : "-", g[i].rank);
		fprintf(out, "%-8u %-4s %-14s %10llu %10llu  ", g[i].pid, rank, g[i].comm,
			(unsigned long long)g[i].entered, (unsigned long long)g[i].completed);
		if (!g[i].inflight) {
			fprintf(out, "-\n");
			continue;
		}
		diag_fmt_secs(age, sizeof(age),
			      now > g[i].inflight_ts ? now - g[i].inflight_ts : 0);
		fprintf(out, "#%llu %s, %s%s%s%s\n", (unsigned long long)g[i].inflight_seq,
			g[i].inflight_fn, g[i].exited ? "cut short by the exit" : age,
			g[i].exited ? "" : " in it", g[i].site[0] ? " at " : "", g[i].site);
	}
	free(g);
	return n;
}
