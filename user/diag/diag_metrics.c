// SPDX-License-Identifier: MIT
/*
 * The diagnosis' findings for --metrics (user/metrics/metrics.h): the hook the
 * exposition calls at each render, from the trace loop.
 */
#include <stdlib.h>
#include <string.h>
#include "diag/diag.h"
#include "metrics/metrics.h"
#include "session.h"

void ct_diag_metrics_fill(const struct ct_session *s, struct ct_metrics_findings *out)
{
	struct ct_diag_live lv;

	memset(out, 0, sizeof(*out));
	if (!s->diag)
		return; /* no diagnosis (out of memory): say so, not "no hang" */
	ct_diag_live(s->diag, &lv);
	out->available = true;
	for (int k = 1; k <= CT_DIAG_KINDS && out->n_kinds < CT_METRICS_FINDING_KINDS; k++) {
		out->by_kind[out->n_kinds].kind = ct_diag_kind_name((uint8_t)k);
		out->by_kind[out->n_kinds++].total = lv.by_kind[k];
	}
	out->ranks_hung = lv.ranks_hung;
	out->ranks_late = lv.ranks_late;
	out->matched = lv.matched;
	out->skew_max_ns = lv.skew_max_ns;
	out->skew_last_ns = lv.skew_last_ns;
	for (int i = 0; i < ct_diag_nprocs(s->diag); i++) {
		int rank, j;
		uint64_t late;

		if (!ct_diag_proc_late(s->diag, i, &rank, &late))
			continue;
		if (rank < 0)
			rank = -1;
		for (j = 0; j < out->n_late; j++) /* a rank seen twice (a restart): summed */
			if (out->late[j].rank == rank)
				break;
		if (j == out->n_late) {
			if (out->n_late == CT_METRICS_LATE_RANKS)
				continue;
			out->late[out->n_late].rank = rank;
			out->late[out->n_late++].late = 0;
		}
		out->late[j].late += late;
	}
}

int ct_diag_metrics_progress(const struct ct_session *s, struct ct_metrics_progress *out, int max,
			     uint64_t now)
{
	struct ct_diag_progress *g = s->diag ? calloc((size_t)max, sizeof(*g)) : NULL;
	int n = g ? ct_diag_progress(s->diag, g, max) : 0;

	for (int i = 0; i < n; i++) {
		out[i] = (struct ct_metrics_progress){
		    .pid = g[i].pid,
		    .rank = g[i].rank,
		    .entered = g[i].entered,
		    .completed = g[i].completed,
		    .inflight = g[i].inflight && !g[i].exited,
		};
		snprintf(out[i].comm, sizeof(out[i].comm), "%s", g[i].comm);
		if (out[i].inflight && now > g[i].inflight_ts)
			out[i].inflight_ns = now - g[i].inflight_ts;
	}
	free(g);
	return n;
}
