/* SPDX-License-Identifier: MIT */
/*
 * What tracing cost the traced processes, accounted without touching them (--cost; JSON
 * "cost", docs/json.md):
 * - the probe hits and the BPF programs' own time, from the kernel's per-program counters,
 *   which count only while BPF statistics are on (kernel.bpf_stats_enabled, or the
 *   BPF_ENABLE_STATS file descriptor that --cost holds while it traces);
 * - what one probe hit costs on this machine, an entry probe's and a return probe's apart
 *   (x86-64's return trampoline makes a system call, Linux 6.11+, cheaper than a
 *   breakpoint), measured before attaching on the tracer itself with a program that does
 *   nothing, so that the hits become CPU time: a hit is 3 to 7 times dearer on some VMs
 *   than on others;
 * - the traced processes' own CPU time over the trace, and the tracer's.
 * What a probe hit does to the target's caches is not in these figures.
 */
#ifndef CT_COST_H
#define CT_COST_H

#include <stdbool.h>
#include <stdint.h>

#define CT_COST_PROGS 16 /* loaded programs; 10 now */

struct ct_cost {
	int stats_fd;	  /* BPF_ENABLE_STATS held by --cost, or -1 */
	bool on_at_start; /* statistics on when tracing started */
	const char *why;  /* NULL: counted for the whole trace; else why not */
	struct {
		const char *name; /* the BPF program: ct_entry, ct_exit, ct_py_session, ... */
		uint64_t runs, ns;
		bool uprobe; /* a uprobe or uretprobe: each run a hit in a target */
		bool ret;    /* a uretprobe: each run a return hit */
	} prog[CT_COST_PROGS], base[CT_COST_PROGS]; /* since ct_cost_begin; at it */
	int n_prog;
	uint64_t hits, bpf_ns;	   /* over every uprobe program */
	uint64_t ret_hits;	   /* of the hits, a return probe's */
	double hit_ns, ret_ns;	   /* one entry hit, one return hit here; 0: not measured */
	uint64_t targets_start_ns; /* CPU of the processes named by -p when attached */
	int64_t targets_cpu_ns;	   /* over the trace; -1 unknown (not read, not reaped) */
	uint64_t tracer_cpu_ns;
};

struct ct_session;

/* Before attaching: statistics on (with --cost), one hit measured, the targets' CPU time
 * so far. */
void ct_cost_begin(struct ct_session *s);
/* The counters and the tracer's CPU now (--metrics, every second). */
void ct_cost_sample(struct ct_session *s);
/* After the last record: the counters, the CPU times; statistics off. */
void ct_cost_end(struct ct_session *s);
/* What the hits cost the targets: each kind of hit at its price, + BPF time (ns); 0 when
 * not counted. */
double ct_cost_targets_added_ns(const struct ct_cost *c);

#endif
