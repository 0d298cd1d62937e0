// SPDX-License-Identifier: MIT
/* The diagnosis for a person, on stderr at the end of a run. */
#include "diag/internal.h"

void ct_diag_print(struct ct_diag *d, FILE *out, bool verbose)
{
	const struct ct_diag_finding *f;
	const struct ct_diag_drops *dr = &d->drops;
	int n = ct_diag_findings(d, &f), ranks = 0;
	bool late = false;
	char a[32];

	for (int i = 0; i < d->nprocs; i++)
		ranks += d->procs[i]->matched > 0;
	for (int i = 0; i < n; i++)
		late |= f[i].kind == CT_DF_LATE_RANK;
	if (n)
		fprintf(out,
			"commtrace: diagnosis: %d finding%s; %llu collectives matched across ranks "
			"on %d communicator%s\n",
			n, n == 1 ? "" : "s", (unsigned long long)d->matched, d->ncomms,
			d->ncomms == 1 ? "" : "s");
	else if (!d->matched)
		fprintf(out,
			"commtrace: diagnosis: no collective to match across ranks (trace "
			"every rank of a communicator with one tracer, or merge the reports)\n");
	else {
		/* A healthy job: one line, with the worst skew as the measure of how healthy. */
		fprintf(out,
			"commtrace: diagnosis: %d ranks agree on %llu collectives over %d "
			"communicator%s: no mismatch, no hang, no late rank",
			ranks, (unsigned long long)d->matched, d->ncomms,
			d->ncomms == 1 ? "" : "s");
		if (d->ntop && d->top[0].skew_ns) {
			diag_fmt_secs(a, sizeof(a), d->top[0].skew_ns);
			fprintf(out, "; worst skew %s (%s #%llu %s, last rank %d)", a,
				d->top[0].comm, (unsigned long long)d->top[0].seq,
				d->top[0].function, d->top[0].last_rank);
		}
		fputc('\n', out);
	}
	for (int i = 0; i < n; i++)
		fprintf(out, "  [%s] %s: %s\n", ct_diag_severity_name(f[i].severity),
			ct_diag_kind_name(f[i].kind), f[i].summary);
	/* The evidence of a late rank, or what -v asks for. */
	for (int i = 0; (verbose || late) && i < d->ntop && d->top[i].skew_ns; i++) {
		diag_fmt_secs(a, sizeof(a), d->top[i].skew_ns);
		fprintf(out, "  skew: %s #%llu %s %s, last rank %d (pid %u)\n", d->top[i].comm,
			(unsigned long long)d->top[i].seq, d->top[i].function, a,
			d->top[i].last_rank, d->top[i].last_pid);
	}
	for (int i = 0; (verbose || late) && i < d->nprocs; i++) {
		const struct dproc *p = d->procs[i];

		if (p->matched) {
			diag_fmt_secs(a, sizeof(a), p->wait_ns);
			fprintf(out,
				"  waiting for other ranks: rank %d (pid %u) %s over %llu "
				"collectives\n",
				p->rank, p->pid, a, (unsigned long long)p->matched);
		}
	}
	for (int i = 0; verbose && i < d->nprocs; i++) {
		const struct dproc *p = d->procs[i];
		struct ct_diag_steps_info si;

		ct_diag_proc_steps(d, i, &si);
		if (si.period)
			fprintf(
			    out,
			    "  steps: rank %d (pid %u) %llu steps of %u collectives, %llu -> %llu "
			    "bytes per step\n",
			    p->rank, p->pid, (unsigned long long)si.steps, si.period,
			    (unsigned long long)si.first_step_bytes,
			    (unsigned long long)si.last_step_bytes);
	}
	if (dr->comms_over_limit || dr->members_over_limit || dr->procs_over_limit ||
	    dr->window_evicted || dr->handles_evicted || dr->pending_evicted ||
	    dr->executions_unmatched || dr->ambiguous || dr->hangs_over_limit ||
	    dr->findings_over_limit || dr->newcomm_evicted || dr->log_dropped ||
	    dr->log_stacks_dropped)
		fprintf(
		    out,
		    "  diagnosis limits: communicators %llu, members %llu, processes %llu, "
		    "window evicted %llu, handles evicted %llu, pending evicted %llu, "
		    "executions unmatched %llu, ambiguous %llu, hangs %llu, findings %llu, "
		    "new communicators evicted %llu, log %llu, log stacks %llu\n",
		    (unsigned long long)dr->comms_over_limit,
		    (unsigned long long)dr->members_over_limit,
		    (unsigned long long)dr->procs_over_limit,
		    (unsigned long long)dr->window_evicted, (unsigned long long)dr->handles_evicted,
		    (unsigned long long)dr->pending_evicted,
		    (unsigned long long)dr->executions_unmatched, (unsigned long long)dr->ambiguous,
		    (unsigned long long)dr->hangs_over_limit,
		    (unsigned long long)dr->findings_over_limit,
		    (unsigned long long)dr->newcomm_evicted, (unsigned long long)dr->log_dropped,
		    (unsigned long long)dr->log_stacks_dropped);
}
