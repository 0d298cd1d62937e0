// SPDX-License-Identifier: MIT
/* The diagnosis in the --json document: "findings" and "diagnosis" (docs/json.md). */
#include <stdlib.h>
#include <cJSON.h>
#include "diag/diag.h"

static cJSON *num(double v)
{
	return cJSON_CreateNumber(v);
}

static void str_or_null(cJSON *o, const char *k, const char *v)
{
	if (v && v[0])
		cJSON_AddStringToObject(o, k, v);
	else
		cJSON_AddNullToObject(o, k);
}

/* The evidence of one finding: only the fields its kind has. */
cJSON *ct_diag_evidence(const struct ct_diag_finding *f)
{
	cJSON *e = cJSON_CreateObject();

	switch (f->kind) {
	case CT_DF_LATE_RANK:
		cJSON_AddStringToObject(e, "communicator", f->comm);
		cJSON_AddItemToObject(e, "collectives_late", num((double)f->count));
		cJSON_AddItemToObject(e, "collectives_matched", num((double)f->total));
		cJSON_AddItemToObject(e, "max_skew_ns", num((double)f->value_ns));
		cJSON_AddItemToObject(e, "max_skew_seq", num((double)f->seq));
		str_or_null(e, "function", f->function);
		str_or_null(e, "call_site", f->site);
		break;
	case CT_DF_MISMATCH:
		cJSON_AddStringToObject(e, "communicator", f->comm);
		cJSON_AddItemToObject(e, "seq", num((double)f->seq));
		cJSON_AddStringToObject(e, "differs", f->what);
		str_or_null(e, "function", f->function);
		str_or_null(e, "function_other", f->function2);
		cJSON_AddItemToObject(e, "bytes", num((double)f->bytes));
		cJSON_AddItemToObject(e, "bytes_other", num((double)f->bytes2));
		cJSON_AddItemToObject(e, "mismatched_collectives", num((double)f->count));
		cJSON_AddItemToObject(e, "collectives_matched", num((double)f->total));
		str_or_null(e, "call_site", f->site);
		str_or_null(e, "call_site_other", f->site2);
		str_or_null(e, "stack", f->stack);
		str_or_null(e, "stack_other", f->stack2);
		break;
	case CT_DF_HANG:
		cJSON_AddStringToObject(e, "communicator", f->comm);
		cJSON_AddItemToObject(e, "seq", num((double)f->seq));
		str_or_null(e, "function", f->function);
		cJSON_AddItemToObject(e, "blocked_ns", num((double)f->value_ns));
		str_or_null(e, "missing", f->what);
		str_or_null(e, "call_site", f->site);
		str_or_null(e, "stack", f->stack);
		break;
	case CT_DF_COMM_CREATION:
		str_or_null(e, "communicator", f->comm);
		cJSON_AddItemToObject(e, "communicators", num((double)f->count));
		cJSON_AddItemToObject(e, "steps", num((double)f->total));
		str_or_null(e, "function", f->function);
		str_or_null(e, "call_site", f->site);
		break;
	case CT_DF_REPEATED_ALLGATHER:
		cJSON_AddItemToObject(e, "steps", num((double)f->count));
		cJSON_AddItemToObject(e, "bytes", num((double)f->bytes));
		str_or_null(e, "function", f->function);
		str_or_null(e, "call_site", f->site);
		break;
	case CT_DF_SERIAL_REDUCTIONS:
		cJSON_AddItemToObject(e, "occurrences", num((double)f->count));
		cJSON_AddItemToObject(e, "max_gap_ns", num((double)f->value_ns));
		str_or_null(e, "communicators", f->what);
		str_or_null(e, "function", f->function);
		str_or_null(e, "function_next", f->function2);
		str_or_null(e, "call_site", f->site);
		str_or_null(e, "call_site_next", f->site2);
		break;
	case CT_DF_TRAFFIC_GROWTH:
		cJSON_AddItemToObject(e, "steps_growing", num((double)f->count));
		cJSON_AddItemToObject(e, "steps", num((double)f->total));
		cJSON_AddItemToObject(e, "bytes_per_step_from", num((double)f->bytes));
		cJSON_AddItemToObject(e, "bytes_per_step_to", num((double)f->bytes2));
		break;
	}
	return e;
}

/* The process' diag_log (docs/json.md), or NULL when it has none. */
cJSON *ct_diag_log_json(const struct ct_diag *d, uint32_t pid)
{
	const struct ct_diag_logrec *recs;
	cJSON *o, *arr, *st;
	uint32_t n;

	if (!d || ct_diag_options(d)->no_log || !ct_diag_log_get(d, pid, &recs, &n))
		return NULL;
	o = cJSON_CreateObject();
	st = cJSON_AddArrayToObject(o, "stacks");
	for (int i = 0; i < ct_diag_log_nstacks(d, pid); i++) {
		const struct ct_stack_line *l;
		int k = ct_diag_log_stack(d, pid, i, &l);
		cJSON *fr = cJSON_CreateArray();

		for (int j = 0; j < k; j++) {
			cJSON *f = cJSON_CreateObject();

			str_or_null(f, "qualname", l[j].qualname);
			str_or_null(f, "file", l[j].file);
			cJSON_AddItemToObject(f, "line", num(l[j].line));
			cJSON_AddItemToArray(fr, f);
		}
		cJSON_AddItemToArray(st, fr);
	}
	arr = cJSON_AddArrayToObject(o, "records");
	for (uint32_t i = 0; i < n; i++) {
		const struct ct_diag_logrec *r = &recs[i];
		cJSON *e = cJSON_CreateObject();
		char comm[48];

		cJSON_AddItemToObject(e, "ts_ns", num((double)r->ts));
		/* null: not completed when tracing ended (in flight, hung, killed) */
		cJSON_AddItemToObject(e, "dur_ns",
				      r->end && r->end >= r->ts ? num((double)(r->end - r->ts))
								: cJSON_CreateNull());
		cJSON_AddItemToObject(e, "tid", num(r->tid));
		cJSON_AddStringToObject(e, "function", r->function);
		if (r->creation) {
			cJSON_AddBoolToObject(e, "creation", true);
		} else {
			if (r->comm >= 0 &&
			    ct_diag_comm_info(d, r->comm, comm, sizeof(comm), &(int){0},
					      &(uint64_t){0}, &(bool){false}))
				cJSON_AddStringToObject(e, "comm", comm);
			else
				cJSON_AddNullToObject(e, "comm");
			cJSON_AddItemToObject(e, "group_size", num(r->comm_size));
			cJSON_AddItemToObject(e, "comm_rank", num(r->comm_rank));
			cJSON_AddItemToObject(
			    e, "count", r->has_count ? num((double)r->count) : cJSON_CreateNull());
			str_or_null(e, "dtype", r->dtype);
			cJSON_AddItemToObject(e, "bytes", num((double)r->bytes));
			if (r->helper)
				cJSON_AddBoolToObject(e, "helper", true);
		}
		cJSON_AddItemToObject(e, "stack",
				      r->stack >= 0 ? num(r->stack) : cJSON_CreateNull());
		cJSON_AddItemToArray(arr, e);
	}
	cJSON_AddItemToObject(o, "cap", num(CT_DIAG_LOG));
	return o;
}

void ct_diag_progress_json(const struct ct_diag *d, cJSON *root, uint64_t now)
{
	int max = ct_diag_nmembers(d);
	struct ct_diag_progress *g = calloc((size_t)max + 1, sizeof(*g));
	cJSON *arr = cJSON_CreateArray();
	int n = g ? ct_diag_progress(d, g, max) : 0;

	for (int i = 0; i < n; i++) {
		cJSON *o = cJSON_CreateObject(), *fl;

		cJSON_AddNumberToObject(o, "pid", g[i].pid);
		if (g[i].rank >= 0)
			cJSON_AddNumberToObject(o, "rank", g[i].rank);
		else
			cJSON_AddNullToObject(o, "rank");
		cJSON_AddStringToObject(o, "communicator", g[i].comm);
		cJSON_AddNumberToObject(o, "comm_rank", g[i].comm_rank);
		cJSON_AddNumberToObject(o, "entered", (double)g[i].entered);
		cJSON_AddNumberToObject(o, "completed", (double)g[i].completed);
		if (!g[i].inflight) {
			cJSON_AddNullToObject(o, "in_flight");
		} else {
			fl = cJSON_AddObjectToObject(o, "in_flight");
			cJSON_AddNumberToObject(fl, "seq", (double)g[i].inflight_seq);
			cJSON_AddStringToObject(fl, "function", g[i].inflight_fn);
			cJSON_AddNumberToObject(fl, "ts_ns", (double)g[i].inflight_ts);
			if (now && !g[i].exited && now > g[i].inflight_ts)
				cJSON_AddNumberToObject(fl, "age_ns",
							(double)(now - g[i].inflight_ts));
			else
				cJSON_AddNullToObject(fl, "age_ns");
			cJSON_AddBoolToObject(fl, "cut_short", g[i].exited);
			if (g[i].site[0])
				cJSON_AddStringToObject(fl, "site", g[i].site);
			else
				cJSON_AddNullToObject(fl, "site");
		}
		cJSON_AddItemToArray(arr, o);
	}
	free(g);
	cJSON_AddItemToObject(root, "progress", arr);
}

void ct_diag_json(struct ct_diag *d, cJSON *root)
{
	const struct ct_diag_finding *f;
	const struct ct_diag_top *top;
	const struct ct_diag_drops *dr;
	cJSON *arr = cJSON_CreateArray(), *dg = cJSON_CreateObject(), *x;
	int n;

	if (!d) {
		cJSON_AddItemToObject(root, "findings", arr);
		cJSON_AddItemToObject(root, "diagnosis", cJSON_CreateNull());
		cJSON_Delete(dg);
		return;
	}
	n = ct_diag_findings(d, &f);
	for (int i = 0; i < n; i++) {
		cJSON *o = cJSON_CreateObject(), *ranks = cJSON_CreateArray();
		cJSON *pids = cJSON_CreateArray();

		cJSON_AddStringToObject(o, "kind", ct_diag_kind_name(f[i].kind));
		cJSON_AddStringToObject(o, "severity", ct_diag_severity_name(f[i].severity));
		for (int k = 0; k < f[i].nranks; k++) {
			cJSON_AddItemToArray(ranks, f[i].ranks[k] >= 0 ? num(f[i].ranks[k])
								       : cJSON_CreateNull());
			cJSON_AddItemToArray(pids, num(f[i].pids[k]));
		}
		cJSON_AddItemToObject(o, "ranks", ranks);
		cJSON_AddItemToObject(o, "pids", pids);
		cJSON_AddStringToObject(o, "summary", f[i].summary);
		cJSON_AddItemToObject(o, "evidence", ct_diag_evidence(&f[i]));
		cJSON_AddItemToArray(arr, o);
	}
	cJSON_AddItemToObject(root, "findings", arr);

	cJSON_AddItemToObject(dg, "collectives_matched", num((double)ct_diag_matched(d)));
	x = cJSON_CreateArray();
	for (int i = 0; i < ct_diag_ncomms(d); i++) {
		cJSON *c = cJSON_CreateObject();
		char name[48];
		int members;
		uint64_t colls;
		bool amb;

		ct_diag_comm_info(d, i, name, sizeof(name), &members, &colls, &amb);
		cJSON_AddStringToObject(c, "id", name);
		cJSON_AddItemToObject(c, "traced_ranks", num(members));
		cJSON_AddItemToObject(c, "collectives", num((double)colls));
		cJSON_AddBoolToObject(c, "ambiguous", amb);
		cJSON_AddItemToArray(x, c);
	}
	cJSON_AddItemToObject(dg, "communicators", x);
	x = cJSON_CreateArray();
	n = ct_diag_top(d, &top);
	for (int i = 0; i < n; i++) {
		cJSON *t = cJSON_CreateObject();

		cJSON_AddStringToObject(t, "communicator", top[i].comm);
		cJSON_AddItemToObject(t, "seq", num((double)top[i].seq));
		cJSON_AddStringToObject(t, "function", top[i].function);
		cJSON_AddItemToObject(t, "skew_ns", num((double)top[i].skew_ns));
		cJSON_AddItemToObject(t, "last_rank",
				      top[i].last_rank >= 0 ? num(top[i].last_rank)
							    : cJSON_CreateNull());
		cJSON_AddItemToObject(t, "last_pid", num(top[i].last_pid));
		cJSON_AddItemToArray(x, t);
	}
	cJSON_AddItemToObject(dg, "top_skew", x);
	x = cJSON_CreateArray();
	for (int i = 0; i < ct_diag_nprocs(d); i++) {
		cJSON *p = cJSON_CreateObject();
		struct ct_diag_steps_info si;
		uint32_t pid;
		int rank;
		uint64_t wait, matched;

		ct_diag_proc_wait(d, i, &pid, &rank, &wait, &matched);
		ct_diag_proc_steps(d, i, &si);
		cJSON_AddItemToObject(p, "pid", num(pid));
		cJSON_AddItemToObject(p, "rank", rank >= 0 ? num(rank) : cJSON_CreateNull());
		cJSON_AddItemToObject(p, "collectives_matched", num((double)matched));
		cJSON_AddItemToObject(p, "wait_ns", num((double)wait));
		cJSON_AddItemToObject(p, "collectives", num((double)si.signatures));
		cJSON_AddItemToObject(p, "steps", num((double)si.steps));
		cJSON_AddItemToObject(p, "collectives_per_step", num(si.period));
		cJSON_AddItemToObject(p, "first_step_bytes", num((double)si.first_step_bytes));
		cJSON_AddItemToObject(p, "last_step_bytes", num((double)si.last_step_bytes));
		cJSON_AddItemToObject(p, "steps_growing", num(si.growth_steps));
		cJSON_AddItemToArray(x, p);
	}
	cJSON_AddItemToObject(dg, "processes", x);
	dr = ct_diag_drops(d);
	x = cJSON_CreateObject();
	cJSON_AddItemToObject(x, "communicators_over_limit", num((double)dr->comms_over_limit));
	cJSON_AddItemToObject(x, "members_over_limit", num((double)dr->members_over_limit));
	cJSON_AddItemToObject(x, "processes_over_limit", num((double)dr->procs_over_limit));
	cJSON_AddItemToObject(x, "window_evicted", num((double)dr->window_evicted));
	cJSON_AddItemToObject(x, "handles_evicted", num((double)dr->handles_evicted));
	cJSON_AddItemToObject(x, "pending_evicted", num((double)dr->pending_evicted));
	cJSON_AddItemToObject(x, "executions_unmatched", num((double)dr->executions_unmatched));
	cJSON_AddItemToObject(x, "ambiguous", num((double)dr->ambiguous));
	cJSON_AddItemToObject(x, "hangs_over_limit", num((double)dr->hangs_over_limit));
	cJSON_AddItemToObject(x, "findings_over_limit", num((double)dr->findings_over_limit));
	cJSON_AddItemToObject(x, "new_communicators_evicted", num((double)dr->newcomm_evicted));
	cJSON_AddItemToObject(x, "log_dropped", num((double)dr->log_dropped));
	cJSON_AddItemToObject(x, "log_stacks_dropped", num((double)dr->log_stacks_dropped));
	cJSON_AddItemToObject(x, "in_flight_at_start_dropped", num((double)dr->unseen_dropped));
	cJSON_AddItemToObject(x, "in_flight_at_start_unaligned", num((double)dr->unseen_unaligned));
	cJSON_AddItemToObject(dg, "drops", x);
	{
		const struct ct_diag_opts *o = ct_diag_options(d);

		x = cJSON_CreateObject();
		cJSON_AddItemToObject(x, "hang_after_ns", num((double)o->hang_ns));
		cJSON_AddItemToObject(x, "late_after_ns", num((double)o->late_ns));
		cJSON_AddItemToObject(x, "serial_gap_ns", num((double)o->serial_gap_ns));
		cJSON_AddItemToObject(x, "min_repeats", num(o->min_repeats));
		cJSON_AddItemToObject(dg, "options", x);
	}
	cJSON_AddItemToObject(root, "diagnosis", dg);
}
