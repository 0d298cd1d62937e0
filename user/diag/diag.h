/* SPDX-License-Identifier: MIT */
/*
 * Diagnosis over the collected calls of every traced rank (README "Diagnosis"):
 * cross-rank matching of collectives by communicator and sequence number (arrival
 * skew, the late rank, time spent waiting for others), mismatched collectives, hangs
 * (a live alert), training steps found from the periodic pattern of collectives, and
 * seed 003's anti-patterns (communicator creation during training, the same full-tensor
 * all-gather every step, reductions on different communicators serialized back to back).
 *
 * Pure logic over struct ct_diag_call / ct_diag_ret: no BPF, no session, so the unit
 * tests drive it with synthetic sequences. Bounded: tables that grow with the job up to
 * hard caps a 16k-rank job fits under, per-process tables of fixed size, and a counter for
 * everything that did not fit or was evicted (struct ct_diag_drops).
 */
#ifndef CT_DIAG_H
#define CT_DIAG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "tree.h"

#define CT_DIAG_COMMS	   65536  /* communicator identities per session (grown as seen) */
#define CT_DIAG_MEMBERS	   262144 /* (process, communicator) pairs per session (grown) */
#define CT_DIAG_WINDOW	   32	  /* recent collectives kept per (process, communicator) */
#define CT_DIAG_PROCS	   32768  /* processes (grown) */
#define CT_DIAG_HANDLES	   64	  /* communicator handles remembered per process */
#define CT_DIAG_STACK	   8	  /* frames kept per collective, innermost first */
#define CT_DIAG_SIGS	   1024	  /* collective signatures kept per process (steps) */
#define CT_DIAG_MAX_PERIOD 256	  /* longest step, in collectives */
#define CT_DIAG_PENDING	   64	  /* c10d calls per process awaiting their Gloo execution */
#define CT_DIAG_INFLIGHT   16	  /* threads per process inside a traced collective */
#define CT_DIAG_NEWCOMMS   64	  /* communicator creations / first uses remembered per process */
#define CT_DIAG_PAIRS	   16	  /* serialized reduction pairs per process */
#define CT_DIAG_FINDINGS   128	  /* findings in a report */
#define CT_DIAG_HANGS	   32	  /* hang alerts remembered */
#define CT_DIAG_TOP	   5	  /* collectives listed by skew */
#define CT_DIAG_FRANKS	   16	  /* ranks named per finding */
#define CT_DIAG_LOG	   16384  /* logged collectives per process (diag_log, merge) */
#define CT_DIAG_LOG_TOTAL  262144 /* logged collectives per session */
#define CT_DIAG_LOG_STACKS 256	  /* distinct stacks per process' log */

/* A collective (or communicator creation) entry, as the diagnosis needs it. */
struct ct_diag_call {
	uint32_t pid, tid;
	int rank; /* the process' global rank, -1 unknown */
	uint8_t lib, kind, depth;
	const char *function; /* static (catalog) string */
	uint64_t comm;	      /* communicator handle, process-local */
	int32_t comm_size, comm_rank;
	bool has_leader; /* leader: the world rank of the communicator's rank 0 */
	int32_t leader;
	bool has_count;
	uint64_t count;
	const char *dtype;		   /* NULL unknown; stable string */
	uint64_t bytes;			   /* the larger of sent and received */
	uint64_t ts;			   /* CLOCK_MONOTONIC ns */
	const struct ct_stack_line *stack; /* innermost first, interned strings */
	int nstack;
	/* A Gloo call of a process that runs torch's c10d: the execution of a c10d call, even
	 * before one was seen (it was made before the attach), never a collective of its own. */
	bool c10d;
	/* merge's replay (diag_replay.c): the call comes from a diag_log, not from probes */
	bool replayed;
	bool helper; /* replayed: under a full_tensor/unshard frame */
};

struct ct_diag_opts {
	uint64_t hang_ns;	/* a collective blocked this long is a hang */
	uint64_t late_ns;	/* arrival skew from which the last rank is named late */
	uint64_t serial_gap_ns; /* max gap between a reduction's end and the next's start */
	uint32_t min_repeats;	/* occurrences / steps a steady-state pattern needs */
	FILE *alerts;		/* live alerts (stderr), or NULL */
	bool no_log;		/* keep no diag_log (merge's replay) */
	/* Caps of the tables (0: CT_DIAG_PROCS, _COMMS, _MEMBERS; never above them). */
	uint32_t max_procs, max_comms, max_members;
};

enum ct_diag_kind {
	CT_DF_LATE_RANK = 1,
	CT_DF_MISMATCH,
	CT_DF_HANG,
	CT_DF_COMM_CREATION,
	CT_DF_REPEATED_ALLGATHER,
	CT_DF_SERIAL_REDUCTIONS,
	CT_DF_TRAFFIC_GROWTH,
};

enum ct_diag_severity {
	CT_DS_INFO = 0,
	CT_DS_WARNING,
	CT_DS_ERROR,
};

struct ct_diag_finding {
	uint8_t kind, severity;
	int nranks;
	int ranks[CT_DIAG_FRANKS]; /* global ranks, -1 unknown */
	uint32_t pids[CT_DIAG_FRANKS];
	uint32_t pid, tid; /* where it happened (Chrome instant event) */
	uint64_t ts;
	char comm[48]; /* communicator identity, "c10d#0/2" */
	const char *function, *function2;
	uint64_t seq;
	uint64_t count;	   /* occurrences, collectives, steps */
	uint64_t total;	   /* out of (collectives matched, steps) */
	uint64_t value_ns; /* skew, blocked time, gap */
	uint64_t bytes, bytes2;
	char what[160];	 /* mismatch: what differs; hang: who is missing */
	char site[256];	 /* call site "qualname (file:line)" */
	char site2[256]; /* the other side's site (mismatch, serial reductions) */
	char stack[1024], stack2[1024];
	char summary[512];
};

struct ct_diag_drops {
	uint64_t comms_over_limit;     /* collectives on identities past CT_DIAG_COMMS */
	uint64_t members_over_limit;   /* collectives of (process, comm) past CT_DIAG_MEMBERS */
	uint64_t procs_over_limit;     /* calls of processes past CT_DIAG_PROCS */
	uint64_t window_evicted;       /* collectives evicted before all ranks arrived */
	uint64_t handles_evicted;      /* communicator handles forgotten (oldest use first) */
	uint64_t pending_evicted;      /* c10d calls whose Gloo execution was never seen */
	uint64_t executions_unmatched; /* Gloo executions with no c10d call to belong to */
	uint64_t ambiguous;	       /* collectives on an identity two ranks claim */
	uint64_t hangs_over_limit;
	uint64_t findings_over_limit;
	uint64_t newcomm_evicted;
	uint64_t log_dropped;	     /* collectives past the diag_log caps (not logged) */
	uint64_t log_stacks_dropped; /* logged collectives whose stack did not fit the table */
	uint64_t unseen_dropped;     /* halves of collectives in flight when tracing began */
	uint64_t unseen_unaligned;   /* such collectives whose communicator was not certain */
};

struct ct_diag_top {
	char comm[48];
	const char *function;
	uint64_t seq, skew_ns, ts;
	int last_rank;
	uint32_t last_pid;
};

struct ct_diag_steps_info {
	uint32_t pid;
	int rank;
	uint32_t period; /* collectives per step, 0: no step found */
	uint64_t steps;
	uint64_t first_step_bytes, last_step_bytes;
	uint32_t growth_steps; /* consecutive step-over-step increases ending at the last */
	uint64_t signatures;   /* collectives seen */
};

/*
 * How far one process has got on one communicator (Flight Recorder's pg_status, NCCL
 * RAS' "launched up to"): the last sequence number it entered and the highest it
 * completed, and the oldest call it is still inside, with its age and call site.
 */
struct ct_diag_progress {
	uint32_t pid;
	int rank;      /* the process' global rank, -1 unknown */
	char comm[48]; /* communicator identity, "c10d#0/2" */
	int32_t comm_rank;
	uint64_t entered, completed;
	bool inflight;
	uint64_t inflight_seq, inflight_ts; /* the oldest call not completed */
	const char *inflight_fn;
	char site[256]; /* its call site "qualname (file:line)", "" if none */
	bool exited;	/* the process has exited (its call in flight was cut short) */
	int comm_index; /* the identity's order of first use (the sort) */
};

struct ct_diag;

struct ct_diag *ct_diag_new(const struct ct_diag_opts *o);
void ct_diag_free(struct ct_diag *d);
void ct_diag_call(struct ct_diag *d, const struct ct_diag_call *c);
/* A traced call returned at ts (depth: as in the record). */
void ct_diag_ret(struct ct_diag *d, uint32_t pid, uint32_t tid, uint8_t depth, uint64_t ts);
/*
 * Process pid returned at ts from a call on lib whose entry was before tracing began. The
 * other ranks of that collective that entered it later are seen in it and this rank is
 * not: on the one communicator of lib that this process has no collective on yet, the
 * members whose only collective so far entered before ts have it dropped (unseen_dropped),
 * so that sequence numbers agree again. None or several such communicators: nothing is
 * dropped (unseen_unaligned).
 */
void ct_diag_unseen(struct ct_diag *d, uint32_t pid, uint8_t lib, uint64_t ts);
/* The process is gone: what it had in flight will never complete. */
void ct_diag_proc_exit(struct ct_diag *d, uint32_t pid);
/* Periodic: hang alerts (printed to opts.alerts). Returns the number of new alerts. */
int ct_diag_check(struct ct_diag *d, uint64_t now);

/* Builds the findings (replacing earlier ones); returns how many, sets *out. */
int ct_diag_findings(struct ct_diag *d, const struct ct_diag_finding **out);
const char *ct_diag_kind_name(uint8_t kind);
const char *ct_diag_severity_name(uint8_t sev);

/* Aggregates for the report. */
const struct ct_diag_drops *ct_diag_drops(const struct ct_diag *d);
uint64_t ct_diag_matched(const struct ct_diag *d);
int ct_diag_top(const struct ct_diag *d, const struct ct_diag_top **out);
/* Per process: the time it spent waiting for other ranks in matched collectives. */
int ct_diag_nprocs(const struct ct_diag *d);
bool ct_diag_proc_wait(const struct ct_diag *d, int i, uint32_t *pid, int *rank, uint64_t *wait_ns,
		       uint64_t *matched);
bool ct_diag_proc_steps(const struct ct_diag *d, int i, struct ct_diag_steps_info *si);
/* Communicator identities: name ("mpi#0/2"), traced members, collectives issued (max). */
int ct_diag_ncomms(const struct ct_diag *d);
bool ct_diag_comm_info(const struct ct_diag *d, int i, char *name, size_t len, int *members,
		       uint64_t *collectives, bool *ambiguous);
/*
 * The identity (index for ct_diag_comm_info) and sequence number the latest ct_diag_call
 * gave its call, if that call is this one (pid, tid, ts): a matchable collective on an
 * identity, or a Gloo execution linked to its c10d call (then that call's identity and
 * number). false: the call has none (not matchable, nested, over the limits, no group
 * size) or another call came since. The Chrome export keys rank→rank flows on it.
 */
bool ct_diag_call_id(const struct ct_diag *d, uint32_t pid, uint32_t tid, uint64_t ts, int *comm,
		     uint64_t *seq);

/* Step detection alone (unit tests): the smallest period p <= max_p such that the last
 * n entries of sig end with at least 3 repetitions; 0 if none. *len: the periodic run. */
uint32_t ct_diag_period(const uint32_t *sig, uint64_t n, uint32_t max_p, uint64_t *len);

/* The findings of the time, for --metrics (diag_metrics.c; CT_DIAG_KINDS kinds). */
#define CT_DIAG_KINDS 7
struct ct_diag_live {
	uint64_t by_kind[CT_DIAG_KINDS + 1]; /* findings so far (high-water), by kind */
	uint32_t ranks_hung;		     /* processes blocked in an alerted hang now */
	uint32_t ranks_late; /* 1 when the latest matched collective had a late rank */
	uint64_t matched;
	uint64_t skew_max_ns, skew_last_ns;
};
void ct_diag_live(struct ct_diag *d, struct ct_diag_live *out);
/* Per process: collectives in which it arrived last with skew >= late_after. */
bool ct_diag_proc_late(const struct ct_diag *d, int i, int *rank, uint64_t *late);

/*
 * The per-process log of matchable collectives and communicator creations (--json
 * "diag_log", docs/json.md) and its replay by merge (diag_replay.c): the same logic over
 * the calls of several tracers, clocks already aligned.
 */
struct ct_diag_logrec {
	uint64_t ts, end; /* end 0: not completed */
	uint64_t count, bytes;
	const char *function, *dtype;
	uint32_t tid;
	int32_t comm_size, comm_rank;
	int32_t comm;  /* identity index, -1: none (creation, over limits) */
	int16_t stack; /* index in the process' stack table, -1: none */
	bool has_count, helper, creation;
};
struct cJSON *ct_diag_log_json(const struct ct_diag *d, uint32_t pid);
struct ct_diag_replay_proc {
	struct cJSON *proc;  /* a --json process object with its diag_log, ts_ns aligned */
	uint32_t pid;	     /* the pid to report it under (unique in the replay) */
	uint64_t window_end; /* its tracer's end_ns on the aligned clock */
};
/* 0, or -EINVAL with a message (a malformed diag_log). Fills d; hang checks every 250 ms. */
int ct_diag_replay(struct ct_diag *d, const struct ct_diag_replay_proc *procs, int n, char *err,
		   size_t errlen);
const struct ct_diag_opts *ct_diag_options(const struct ct_diag *d);
/* The replay's steps: a logged call (c->replayed), then its completion (sequence number). */
uint64_t ct_diag_replay_call(struct ct_diag *d, const struct ct_diag_call *c, int32_t *member);
void ct_diag_replay_end(struct ct_diag *d, uint32_t pid, int32_t member, uint64_t seq, uint64_t ts);
/* The log of a process (NULL/0 when none), its stack table. */
bool ct_diag_log_get(const struct ct_diag *d, uint32_t pid, const struct ct_diag_logrec **recs,
		     uint32_t *n);
int ct_diag_log_nstacks(const struct ct_diag *d, uint32_t pid);
int ct_diag_log_stack(const struct ct_diag *d, uint32_t pid, int i, const struct ct_stack_line **l);

/* The text report (stderr summary). */
/*
 * The diagnosis for a person: the findings with their evidence, or one line for a healthy
 * job (the ranks agree; the worst skew). verbose: every skew, wait and step line too.
 */
void ct_diag_print(struct ct_diag *d, FILE *out, bool verbose);

/* progress.c: the (process, communicator) pairs; every one, by communicator then rank, into
 * out (at most max); the number. */
int ct_diag_nmembers(const struct ct_diag *d);
int ct_diag_progress(const struct ct_diag *d, struct ct_diag_progress *out, int max);
/* A compact table of it at time now (the live summary, SIGUSR1); rows printed. */
int ct_diag_progress_print(const struct ct_diag *d, FILE *out, uint64_t now);

/* diag_json.c: "findings" and "diagnosis" into the --json root (d NULL: empty). */
struct cJSON;
void ct_diag_json(struct ct_diag *d, struct cJSON *root);
/* "progress": ct_diag_progress as JSON; now (monotonic ns) gives the ages, 0: none. */
void ct_diag_progress_json(const struct ct_diag *d, struct cJSON *root, uint64_t now);
struct cJSON *ct_diag_evidence(const struct ct_diag_finding *f);

#endif
