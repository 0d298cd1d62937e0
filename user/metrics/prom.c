// SPDX-License-Identifier: MIT
/*
 * The Prometheus text exposition (format 0.0.4) of a session, and --metrics' address
 * parser. Pure functions of the session: the HTTP side is in user/metrics/http.c.
 *
 * Labels are bounded: pid, rank, library, function, kind on per-call series (at most
 * CT_MAX_TARGETS processes × the catalog's functions), reason on drops, kind on findings
 * (a fixed set). No stack, address or communicator handle is ever a label.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include "drops.h"
#include "export/export.h"
#include "metrics/metrics.h"
#include "session.h"
#include "util/clock.h"
#include "targets.h"
#include "util/sbuf.h"
#include "ct_version.h"

int ct_metrics_parse_addr(const char *spec, struct sockaddr_storage *ss, socklen_t *len, char *err,
			  size_t errlen)
{
	char host[64];
	const char *port_s, *colon;
	unsigned long port;
	char *end;
	size_t hl;

	memset(ss, 0, sizeof(*ss));
	if (!spec || !*spec)
		goto bad;
	if (spec[0] == '[') { /* [IPv6]:PORT */
		const char *close = strchr(spec, ']');

		if (!close || close[1] != ':')
			goto bad;
		hl = (size_t)(close - spec - 1);
		if (hl == 0 || hl >= sizeof(host))
			goto bad;
		memcpy(host, spec + 1, hl);
		host[hl] = 0;
		port_s = close + 2;
	} else {
		colon = strrchr(spec, ':');
		if (!colon) {
			snprintf(host, sizeof(host), "127.0.0.1");
			port_s = spec;
		} else {
			hl = (size_t)(colon - spec);
			if (hl == 0 || hl >= sizeof(host) || memchr(spec, ':', hl))
				goto bad;
			memcpy(host, spec, hl);
			host[hl] = 0;
			port_s = colon + 1;
		}
	}
	if (*port_s < '0' || *port_s > '9')
		goto bad;
	errno = 0;
	port = strtoul(port_s, &end, 10);
	if (errno || *end || port > 65535)
		goto bad;
	if (!strcmp(host, "localhost"))
		snprintf(host, sizeof(host), "127.0.0.1");
	if (spec[0] == '[') {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
			goto bad;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		*len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;

		if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
			goto bad;
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		*len = sizeof(*a);
	}
	return 0;
bad:
	snprintf(err, errlen,
		 "invalid --metrics '%s': expected PORT (on 127.0.0.1), ADDR:PORT with an IPv4 "
		 "address or localhost, or [IPv6]:PORT; PORT from 0 (any free port) to 65535",
		 spec ? spec : "");
	return -EINVAL;
}

/* No diagnosis module linked: say so rather than export zeros. */
__attribute__((weak)) void ct_diag_metrics_fill(const struct ct_session *s,
						struct ct_metrics_findings *out)
{
	memset(out, 0, sizeof(*out));
}

/* A label value: backslash, double quote and newline escaped (the format's rules). */
static void label(struct ct_sbuf *b, const char *name, const char *v, bool first)
{
	ct_sbuf_printf(b, "%s%s=\"", first ? "" : ",", name);
	for (; v && *v; v++) {
		if (*v == '\\')
			ct_sbuf_printf(b, "\\\\");
		else if (*v == '"')
			ct_sbuf_printf(b, "\\\"");
		else if (*v == '\n')
			ct_sbuf_printf(b, "\\n");
		else
			ct_sbuf_printf(b, "%c", *v);
	}
	ct_sbuf_printf(b, "\"");
}

static void family(struct ct_sbuf *b, const char *name, const char *type, const char *help)
{
	ct_sbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* pid and rank, the first labels of a series; no rank: an empty value, which Prometheus
 * treats as absent. */
static void pid_rank_labels(struct ct_sbuf *b, long pid, int rank)
{
	char v[16];

	snprintf(v, sizeof(v), "%ld", pid);
	label(b, "pid", v, true);
	if (rank >= 0)
		snprintf(v, sizeof(v), "%d", rank);
	else
		v[0] = 0;
	label(b, "rank", v, false);
}

static void proc_labels(struct ct_sbuf *b, const struct ct_proc *p)
{
	pid_rank_labels(b, p->pid, p->rank);
}

static void call_labels(struct ct_sbuf *b, const struct ct_proc *p, uint32_t id)
{
	const struct ct_libdesc *d;
	const struct ct_func *fn = ct_catalog_func(id, &d);

	proc_labels(b, p);
	label(b, "library", d->name, false);
	label(b, "function", fn->name, false);
	label(b, "kind", ct_kind_name(fn->kind), false);
}

enum call_metric {
	M_CALLS,
	M_COMPLETED,
	M_SENT,
	M_RECV,
	M_INFLIGHT,
	M_DURATION,
	M_BUSBW,
	M_MAX,
};

static const struct {
	const char *name, *type, *help;
} call_metrics[M_MAX] = {
    [M_CALLS] = {"commtrace_calls_total", "counter",
		 "Calls entered (counted at entry: calls that never returned are included)."},
    [M_COMPLETED] = {"commtrace_calls_completed_total", "counter", "Calls that returned."},
    [M_SENT] = {"commtrace_sent_bytes_total", "counter",
		"Bytes of the send buffers passed to the calls (count x element size)."},
    [M_RECV] = {"commtrace_received_bytes_total", "counter",
		"Bytes of the receive buffers passed to the calls (count x element size)."},
    [M_INFLIGHT] = {"commtrace_in_flight_calls", "gauge",
		    "Calls entered and not returned, in processes still running."},
    [M_DURATION] = {"commtrace_call_duration_seconds", "histogram",
		    "Duration of completed calls (README: what the time means per library)."},
    [M_BUSBW] = {"commtrace_busbw_bytes_per_second", "histogram",
		 "Bus bandwidth of completed calls as nccl-tests defines it, where the duration "
		 "times the transfer (Gloo, blocking MPI; not c10d, NCCL, HCCL, MPI I-forms)."},
};

/* The le label of each bandwidth bucket (bytes/s). */
static const char *const bw_le[CT_BW_BUCKETS] = {
    "1e+06", "1e+07",	"1e+08", "2.5e+08", "5e+08", "1e+09", "2.5e+09", "5e+09",
    "1e+10", "2.5e+10", "5e+10", "1e+11",   "2e+11", "4e+11", "8e+11",
};

/* The le label of each fixed bucket, as Prometheus' own clients print them. */
static const char *const dur_le[CT_DUR_BUCKETS] = {
    "1e-06", "5e-06", "1e-05", "5e-05", "0.0001", "0.0005", "0.001", "0.005",
    "0.01",  "0.05",  "0.1",   "0.5",	"1",	  "5",	    "10",    "60",
};

/* One histogram's series: its n fixed buckets then +Inf (cumulative), _sum, _count. */
static void render_hist(struct ct_sbuf *b, const char *name, const struct ct_proc *p, uint32_t id,
			const uint64_t *counts, unsigned int n, const char *const *le,
			const char *sum)
{
	uint64_t cum = 0;

	for (unsigned int k = 0; k <= n; k++) {
		cum += counts[k];
		ct_sbuf_printf(b, "%s_bucket{", name);
		call_labels(b, p, id);
		label(b, "le", k < n ? le[k] : "+Inf", false);
		ct_sbuf_printf(b, "} %llu\n", (unsigned long long)cum);
	}
	ct_sbuf_printf(b, "%s_sum{", name);
	call_labels(b, p, id);
	ct_sbuf_printf(b, "} %s\n", sum);
	ct_sbuf_printf(b, "%s_count{", name);
	call_labels(b, p, id);
	ct_sbuf_printf(b, "} %llu\n", (unsigned long long)cum);
}

static void render_call(struct ct_sbuf *b, enum call_metric m, const struct ct_proc *p, uint32_t id,
			const struct ct_fstats *st)
{
	const char *name = call_metrics[m].name;
	char sum[48];
	uint64_t v = 0;

	switch (m) {
	case M_CALLS:
		v = st->calls;
		break;
	case M_COMPLETED:
		v = st->returned;
		break;
	case M_SENT:
		v = st->bytes_sent;
		break;
	case M_RECV:
		v = st->bytes_recv;
		break;
	case M_INFLIGHT:
		v = !p->exited && st->calls > st->returned ? st->calls - st->returned : 0;
		break;
	case M_DURATION:
		snprintf(sum, sizeof(sum), "%llu.%09llu",
			 (unsigned long long)(st->lat.total / 1000000000),
			 (unsigned long long)(st->lat.total % 1000000000));
		render_hist(b, name, p, id, st->dur, CT_DUR_BUCKETS, dur_le, sum);
		return;
	case M_BUSBW:
		if (!st->busbw.n)
			return;
		snprintf(sum, sizeof(sum), "%llu", (unsigned long long)st->busbw.total);
		render_hist(b, name, p, id, st->bwb, CT_BW_BUCKETS, bw_le, sum);
		return;
	default:
		return;
	}
	ct_sbuf_printf(b, "%s{", name);
	call_labels(b, p, id);
	ct_sbuf_printf(b, "} %llu\n", (unsigned long long)v);
}

static void progress_labels(struct ct_sbuf *b, const struct ct_metrics_progress *g)
{
	pid_rank_labels(b, g->pid, g->rank);
	label(b, "communicator", g->comm, false);
}

static void counter(struct ct_sbuf *b, const char *name, const char *help, uint64_t v)
{
	family(b, name, "counter", help);
	ct_sbuf_printf(b, "%s %llu\n", name, (unsigned long long)v);
}

static void render_findings(struct ct_session *s, struct ct_sbuf *b)
{
	struct ct_metrics_findings f;

	memset(&f, 0, sizeof(f));
	ct_diag_metrics_fill(s, &f);
	family(b, "commtrace_diagnosis_available", "gauge",
	       "1 when the cross-rank diagnosis feeds the findings metrics, 0 when it does not.");
	ct_sbuf_printf(b, "commtrace_diagnosis_available %d\n", f.available ? 1 : 0);
	if (!f.available)
		return;
	family(b, "commtrace_findings_total", "counter",
	       "Cross-rank diagnosis findings so far, by kind.");
	for (int i = 0; i < f.n_kinds && i < CT_METRICS_FINDING_KINDS; i++) {
		ct_sbuf_printf(b, "commtrace_findings_total{");
		label(b, "kind", f.by_kind[i].kind, true);
		ct_sbuf_printf(b, "} %llu\n", (unsigned long long)f.by_kind[i].total);
	}
	family(b, "commtrace_hung_ranks", "gauge", "Ranks with a collective hung now.");
	ct_sbuf_printf(b, "commtrace_hung_ranks %u\n", f.ranks_hung);
	family(b, "commtrace_late_ranks", "gauge",
	       "Ranks found late in the latest matched collective.");
	ct_sbuf_printf(b, "commtrace_late_ranks %u\n", f.ranks_late);
	counter(b, "commtrace_collectives_matched_total",
		"Collectives matched across every rank of their communicator.", f.matched);
	family(b, "commtrace_skew_max_seconds", "gauge",
	       "Largest arrival skew (last entry - first entry) of a matched collective.");
	ct_sbuf_printf(b, "commtrace_skew_max_seconds %llu.%09llu\n",
		       (unsigned long long)(f.skew_max_ns / 1000000000),
		       (unsigned long long)(f.skew_max_ns % 1000000000));
	family(b, "commtrace_skew_last_seconds", "gauge",
	       "Arrival skew of the latest matched collective.");
	ct_sbuf_printf(b, "commtrace_skew_last_seconds %llu.%09llu\n",
		       (unsigned long long)(f.skew_last_ns / 1000000000),
		       (unsigned long long)(f.skew_last_ns % 1000000000));
	family(b, "commtrace_late_collectives_total", "counter",
	       "Matched collectives at which the rank arrived last with skew >= --late-after.");
	for (int i = 0; i < f.n_late && i < CT_METRICS_LATE_RANKS; i++) {
		char r[16] = "";

		if (f.late[i].rank >= 0)
			snprintf(r, sizeof(r), "%d", f.late[i].rank);
		ct_sbuf_printf(b, "commtrace_late_collectives_total{");
		label(b, "rank", r, true);
		ct_sbuf_printf(b, "} %llu\n", (unsigned long long)f.late[i].late);
	}
}

/* Per (process, communicator): the last sequence numbers and the call in flight. */
static void render_progress(struct ct_session *s, struct ct_sbuf *b)
{
	struct ct_metrics_progress *g = calloc(CT_METRICS_PROGRESS, sizeof(*g));
	int n =
	    g ? ct_diag_metrics_progress(s, g, CT_METRICS_PROGRESS, ct_now_ns(CLOCK_MONOTONIC)) : 0;

	family(b, "commtrace_comm_last_seq", "gauge",
	       "Per process and communicator: the sequence number of the last collective "
	       "entered (state=entered) and the highest completed (state=completed).");
	for (int i = 0; i < n; i++) {
		for (int st = 0; st < 2; st++) {
			ct_sbuf_printf(b, "commtrace_comm_last_seq{");
			progress_labels(b, &g[i]);
			label(b, "state", st ? "completed" : "entered", false);
			ct_sbuf_printf(b, "} %llu\n",
				       (unsigned long long)(st ? g[i].completed : g[i].entered));
		}
	}
	family(b, "commtrace_comm_inflight_seconds", "gauge",
	       "Per process and communicator: how long the oldest collective not completed has "
	       "been in flight (0: none).");
	for (int i = 0; i < n; i++) {
		ct_sbuf_printf(b, "commtrace_comm_inflight_seconds{");
		progress_labels(b, &g[i]);
		ct_sbuf_printf(b, "} %llu.%09llu\n",
			       (unsigned long long)(g[i].inflight_ns / 1000000000),
			       (unsigned long long)(g[i].inflight_ns % 1000000000));
	}
	free(g);
}

/* --cost (user/cost.h): what tracing costs the traced processes, sampled every second. */
static void render_cost(struct ct_session *s, struct ct_sbuf *b)
{
	const struct ct_cost *c = &s->cost;

	if (!s->opts || !s->opts->cost || !c->on_at_start)
		return;
	family(b, "commtrace_probe_hits_total", "counter",
	       "Probe hits (runs of the uprobe programs) by kind of probe (--cost).");
	ct_sbuf_printf(b, "commtrace_probe_hits_total{probe=\"entry\"} %llu\n",
		       (unsigned long long)(c->hits - c->ret_hits));
	ct_sbuf_printf(b, "commtrace_probe_hits_total{probe=\"return\"} %llu\n",
		       (unsigned long long)c->ret_hits);
	family(b, "commtrace_bpf_seconds_total", "counter",
	       "Run time of the uprobe programs, as the kernel counts it (--cost).");
	ct_sbuf_printf(b, "commtrace_bpf_seconds_total %.9f\n", (double)c->bpf_ns / 1e9);
	family(b, "commtrace_probe_hit_seconds", "gauge",
	       "What one probe hit costs on this machine by kind, measured at the start (--cost).");
	ct_sbuf_printf(b, "commtrace_probe_hit_seconds{probe=\"entry\"} %.12g\n", c->hit_ns / 1e9);
	ct_sbuf_printf(b, "commtrace_probe_hit_seconds{probe=\"return\"} %.12g\n", c->ret_ns / 1e9);
	family(b, "commtrace_targets_added_cpu_seconds_total", "counter",
	       "CPU time the probes took from the traced processes: each hit at its price + BPF "
	       "time (--cost).");
	ct_sbuf_printf(b, "commtrace_targets_added_cpu_seconds_total %.9f\n",
		       ct_cost_targets_added_ns(c) / 1e9);
	family(b, "commtrace_tracer_cpu_seconds_total", "counter",
	       "The tracer's own CPU time, user and system (--cost).");
	ct_sbuf_printf(b, "commtrace_tracer_cpu_seconds_total %.9f\n",
		       (double)c->tracer_cpu_ns / 1e9);
}

void ct_metrics_render(struct ct_session *s, struct ct_sbuf *b, uint64_t wall_ns, double render_s)
{
	uint32_t nfuncs = (uint32_t)ct_catalog_size();
	int live = 0;

	ct_sbuf_reset(b);
	family(b, "commtrace_build_info", "gauge", "The tracer's version.");
	ct_sbuf_printf(b, "commtrace_build_info{");
	label(b, "version", CT_VERSION, true);
	ct_sbuf_printf(b, "} 1\n");
	family(b, "commtrace_snapshot_timestamp_seconds", "gauge",
	       "Wall-clock time of this snapshot: every event the kernel had produced by then "
	       "is counted.");
	ct_sbuf_printf(b, "commtrace_snapshot_timestamp_seconds %llu.%09llu\n",
		       (unsigned long long)(wall_ns / 1000000000),
		       (unsigned long long)(wall_ns % 1000000000));
	family(b, "commtrace_render_seconds", "gauge",
	       "Time the previous snapshot took to render.");
	ct_sbuf_printf(b, "commtrace_render_seconds %.9f\n", render_s);

	for (int m = 0; m < M_MAX; m++) {
		family(b, call_metrics[m].name, call_metrics[m].type, call_metrics[m].help);
		for (int i = 0; i < s->n_procs; i++) {
			const struct ct_proc *p = s->procs[i];

			if (!p->stats)
				continue;
			for (uint32_t id = 0; id < nfuncs; id++)
				if (p->stats[id] && p->stats[id]->calls)
					render_call(b, (enum call_metric)m, p, id, p->stats[id]);
		}
	}

	family(b, "commtrace_process_info", "gauge",
	       "A traced process (value 1): its rank and world size from its environment, its "
	       "name.");
	for (int i = 0; i < s->n_procs; i++) {
		const struct ct_proc *p = s->procs[i];
		char w[16];

		snprintf(w, sizeof(w), p->world >= 0 ? "%d" : "", p->world);
		ct_sbuf_printf(b, "commtrace_process_info{");
		proc_labels(b, p);
		label(b, "world_size", w, false);
		label(b, "comm", p->comm, false);
		ct_sbuf_printf(b, "} 1\n");
		live += !p->exited;
	}
	family(b, "commtrace_process_exited", "gauge",
	       "1 once the traced process has exited (its counters stay), else 0.");
	for (int i = 0; i < s->n_procs; i++) {
		ct_sbuf_printf(b, "commtrace_process_exited{");
		proc_labels(b, s->procs[i]);
		ct_sbuf_printf(b, "} %d\n", s->procs[i]->exited ? 1 : 0);
	}
	family(b, "commtrace_traced_processes", "gauge", "Traced processes still running.");
	ct_sbuf_printf(b, "commtrace_traced_processes %d\n", live);

	counter(b, "commtrace_events_total", "Records received from the kernel.", s->events);
	counter(b, "commtrace_dropped_events_total",
		"Events lost: ring buffer full, kernel thread table full, user-space allocation "
		"failures (0: nothing lost).",
		ct_session_drops(s));
	family(b, "commtrace_drops_total", "counter",
	       "Drops and anomalies by reason, as in the JSON report's drops (docs/json.md).");
	for (int k = 0; k < CT_DROP_MAX; k++) {
		ct_sbuf_printf(b, "commtrace_drops_total{");
		label(b, "reason", ct_drop_name(k), true);
		ct_sbuf_printf(b, "} %llu\n", (unsigned long long)s->drops[k]);
	}
	ct_sbuf_printf(b, "commtrace_drops_total{reason=\"user_space\"} %llu\n",
		       (unsigned long long)s->dropped_user);
	ct_sbuf_printf(b, "commtrace_drops_total{reason=\"processes_over_limit\"} %llu\n",
		       (unsigned long long)s->lost_procs);
	ct_sbuf_printf(b, "commtrace_drops_total{reason=\"group_size_unknown\"} %llu\n",
		       (unsigned long long)s->group_size_unknown);
	render_cost(s, b);
	render_findings(s, b);
	render_progress(s, b);
}
