// SPDX-License-Identifier: MIT
/* The human summary on stderr: live every -i seconds and once at the end. */
#include <stdio.h>
#include "drops.h"
#include "export/export.h"
#include "pystacks.h"
#include "targets.h"

static const char *fmt_ns(char *buf, size_t len, uint64_t ns, bool any)
{
	if (!any)
		snprintf(buf, len, "-");
	else if (ns < 10000)
		snprintf(buf, len, "%lluns", (unsigned long long)ns);
	else if (ns < 10000000)
		snprintf(buf, len, "%.1fus", ns / 1e3);
	else if (ns < 10000000000ULL)
		snprintf(buf, len, "%.1fms", ns / 1e6);
	else
		snprintf(buf, len, "%.1fs", ns / 1e9);
	return buf;
}

static const char *fmt_bytes(char *buf, size_t len, uint64_t b)
{
	if (b < 10000)
		snprintf(buf, len, "%lluB", (unsigned long long)b);
	else if (b < 10000ULL << 10)
		snprintf(buf, len, "%.1fKiB", b / 1024.0);
	else if (b < 10000ULL << 20)
		snprintf(buf, len, "%.1fMiB", b / 1048576.0);
	else
		snprintf(buf, len, "%.1fGiB", b / 1073741824.0);
	return buf;
}

/* A bandwidth in bytes/s as nccl-tests prints it (GB/s = 1e9), smaller ones scaled. */
static const char *fmt_bw(char *buf, size_t len, const struct ct_hist *h)
{
	double bw = (double)ct_hist_quantile(h, 0.5);

	if (!h->n)
		snprintf(buf, len, "-");
	else if (bw >= 1e9)
		snprintf(buf, len, "%.2fGB/s", bw / 1e9);
	else if (bw >= 1e6)
		snprintf(buf, len, "%.1fMB/s", bw / 1e6);
	else
		snprintf(buf, len, "%.1fKB/s", bw / 1e3);
	return buf;
}

/* --cost: what the probes cost the traced processes, and the tracer's own CPU. */
static void cost_line(const struct ct_session *s, FILE *out)
{
	const struct ct_cost *c = &s->cost;
	char a[32], b[32], t[32], share[96] = "";

	fmt_ns(t, sizeof(t), c->tracer_cpu_ns, true);
	if (c->why) {
		fprintf(out, "commtrace: cost: probe hits not counted: %s; the tracer's CPU %s\n",
			c->why, t);
		return;
	}
	if (c->targets_cpu_ns > 0)
		snprintf(share, sizeof(share), " (%.2f%% of their %s)",
			 100.0 * ct_cost_targets_added_ns(c) / (double)c->targets_cpu_ns,
			 fmt_ns(b, sizeof(b), (uint64_t)c->targets_cpu_ns, true));
	fprintf(out,
		"commtrace: cost: %llu probe hits (%llu at returns) x %.0fns / %.0fns (an entry / "
		"return hit, measured here) + %s in BPF = %s of the traced processes' CPU%s; the "
		"tracer's CPU %s\n",
		(unsigned long long)c->hits, (unsigned long long)c->ret_hits, c->hit_ns, c->ret_ns,
		fmt_ns(a, sizeof(a), c->bpf_ns, true),
		fmt_ns(b, sizeof(b), (uint64_t)ct_cost_targets_added_ns(c), true), share, t);
}

void ct_export_summary(struct ct_session *s, FILE *out, bool final)
{
	uint64_t calls = 0;
	char a[32], b[32], c[32], d[32], e[32], g[32], h[32];

	for (int i = 0; i < s->n_procs; i++)
		calls += s->procs[i]->calls;
	fprintf(out, "commtrace: %s: %d process%s, %llu calls, %llu dropped events\n",
		final ? "final" : "live", s->n_procs, s->n_procs == 1 ? "" : "es",
		(unsigned long long)calls, (unsigned long long)ct_session_drops(s));
	if (final && s->opts->cost)
		cost_line(s, out);
	if (!calls)
		return;
	fprintf(out, "%-8s %-4s %-5s %-32s %8s %10s %10s %9s %9s %9s %9s %10s\n", "PID", "RANK",
		"LIB", "FUNCTION", "CALLS", "SENT", "RECEIVED", "MIN", "P50", "P99", "MAX",
		"BUSBW");
	for (int i = 0; i < s->n_procs; i++) {
		struct ct_proc *p = s->procs[i];
		char rank[16];

		snprintf(rank, sizeof(rank), p->rank >= 0 ? "%d" : "-", p->rank);
		for (uint32_t id = 0; id < ct_catalog_size(); id++) {
			const struct ct_fstats *st = p->stats[id];
			const struct ct_libdesc *lib;
			const struct ct_func *fn;
			bool any;

			if (!st || !st->calls)
				continue;
			fn = ct_catalog_func(id, &lib);
			any = st->lat.n > 0;
			fprintf(out, "%-8d %-4s %-5s %-32s %8llu %10s %10s %9s %9s %9s %9s %10s\n",
				p->pid, rank, lib->name, fn->name, (unsigned long long)st->calls,
				fmt_bytes(a, sizeof(a), st->bytes_sent),
				fmt_bytes(b, sizeof(b), st->bytes_recv),
				fmt_ns(c, sizeof(c), st->lat.min, any),
				fmt_ns(d, sizeof(d), ct_hist_quantile(&st->lat, 0.5), any),
				fmt_ns(e, sizeof(e), ct_hist_quantile(&st->lat, 0.99), any),
				fmt_ns(g, sizeof(g), st->lat.max, any),
				fmt_bw(h, sizeof(h), &st->busbw));
		}
	}
	if (final)
		fprintf(
		    out,
		    "commtrace: BUSBW: p50 bus bandwidth as nccl-tests defines it; '-' where the "
		    "durations are not the transfer's (c10d, NCCL, HCCL: enqueue; MPI I-forms: "
		    "post)\n");
	if (ct_session_drops(s) || s->drops[CT_DROP_UNPAIRED] || s->drops[CT_DROP_DEPTH])
		fprintf(out,
			"commtrace: drops: ring buffer full %llu (returns %llu, process events "
			"%llu), thread table full %llu, user space %llu; unpaired returns %llu, "
			"nesting too deep %llu\n",
			(unsigned long long)s->drops[CT_DROP_RINGBUF],
			(unsigned long long)s->drops[CT_DROP_RINGBUF_RET],
			(unsigned long long)s->drops[CT_DROP_RINGBUF_PROC],
			(unsigned long long)s->drops[CT_DROP_THREADS],
			(unsigned long long)s->dropped_user,
			(unsigned long long)s->drops[CT_DROP_UNPAIRED],
			(unsigned long long)s->drops[CT_DROP_DEPTH]);
	if (s->drops[CT_DROP_OPS] || s->drops[CT_DROP_OPS_DEPTH])
		fprintf(out, "commtrace: --ops: records lost %llu, calls nested too deep %llu\n",
			(unsigned long long)s->drops[CT_DROP_OPS],
			(unsigned long long)s->drops[CT_DROP_OPS_DEPTH]);
	if (ct_py_ops_stats(s) && ct_py_ops_stats(s)->late)
		fprintf(out,
			"commtrace: --ops: %llu calls' ends seen late (the kernel sets no return "
			"probe past 64 nested frames): their end times are upper bounds\n",
			(unsigned long long)ct_py_ops_stats(s)->late);
}
