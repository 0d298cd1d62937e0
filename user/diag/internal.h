/* SPDX-License-Identifier: MIT */
/*
 * The diagnosis' insides, shared by its files (diag.h is the outside).
 *
 * Communicator identity: a handle is an address in one process. Across processes, a
 * communicator is (layer library, group size, ordinal, leader), the ordinal being the
 * order in which the process first used a handle of that library and size: ranks that
 * create and use their groups in the same order (SPMD programs do) agree on it; the
 * leader, where the library tells it (Open MPI), the world rank of the group's rank 0,
 * tells apart the groups of one size and order (every TP group of a job). Two processes
 * claiming the same rank in one identity make it ambiguous: it is not matched.
 *
 * Tables grow with what the job has (processes, identities, members), up to hard caps
 * a 16k-rank job fits under (diag.h); lookups are hashed, and a collective is matched
 * when its identity's arrival count for that sequence number says every member is in.
 *
 * Sequence number: the n-th collective on that communicator in that process, since
 * attach. One layer per process: c10d over Gloo is matched at the c10d layer (the
 * caller's thread, with the Python stack); the gloo:: call that executes it on a worker
 * thread is linked to it (oldest c10d call of the same kind still waiting) and gives its
 * completion. Calls nested in another traced call (NCCL under c10d) are not matched.
 *
 * Files, each calling only those before it: core.c, steps.c, comms.c, log.c, match.c,
 * hangs.c, patterns.c, diag.c (the entry points), print.c, progress.c; diag_json.c,
 * diag_metrics.c and diag_replay.c use diag.h only.
 */
#ifndef CT_DIAG_INTERNAL_H
#define CT_DIAG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "diag/diag.h"

struct rec {
	uint64_t seq; /* 0: empty slot */
	uint64_t ts, end;
	uint64_t count, bytes;
	const char *function, *dtype;
	uint32_t tid;
	uint8_t kind;
	bool has_count, returned, exec_wait, exec_started, exec_done, aborted, alerted;
	bool matched, helper;
	uint8_t nstack;
	int32_t logi; /* its diag_log entry, -1: none */
	int8_t site;  /* index in stack of the call site, -1: none */
	struct ct_stack_line stack[CT_DIAG_STACK];
};

struct member {
	int32_t comm, proc;
	int32_t comm_rank;
	uint64_t issued;    /* sequence number of the last collective */
	uint64_t completed; /* the highest one completed (progress.c) */
	uint64_t wait_ns, matched;
	uint64_t late, late_max, late_seq, late_ts;
	const char *late_fn;
	char late_site[256];
	struct rec w[CT_DIAG_WINDOW];
};

struct comm {
	uint8_t lib;
	int32_t size;
	uint32_t ordinal;
	int32_t leader; /* world rank of the group's rank 0, -1 unknown */
	int32_t *members;
	int nmembers, capmembers;
	struct {
		uint64_t seq;
		uint32_t arrived; /* members whose record of seq is in its window */
	} arr[CT_DIAG_WINDOW];
	bool ambiguous;
	uint64_t matched, mismatches, collectives;
	struct ct_diag_finding *mismatch; /* the first, allocated then */
};

struct sigent {
	uint32_t sig;
	uint8_t kind;
	bool helper;
	uint64_t bytes;
	const char *function;
	struct ct_stack_line site;
	bool has_site;
};

struct run {
	uint32_t p;
	uint64_t start, end, steps;
	uint64_t first_vol, last_vol, base_vol;
	uint32_t growth;
};

struct steps {
	struct sigent e[CT_DIAG_SIGS];
	uint64_t n;
	struct run cur, best;
};

struct newcomm {
	uint64_t index; /* position in the process' collective sequence */
	const char *function;
	bool creation; /* a creation call (else: first use of a new handle) */
	bool has_site;
	struct ct_stack_line site;
	char comm[48];
};

struct pair {
	struct ct_stack_line a, b;
	bool has_a, has_b;
	int32_t ca, cb;
	const char *fa, *fb;
	uint64_t count, max_gap, ts;
	uint32_t tid;
};

struct dproc {
	uint32_t pid;
	int rank;
	bool c10d_gloo, exited;
	struct {
		uint64_t handle, last;
		uint8_t lib;
		int32_t size, leader;
		int32_t member;
	} h[CT_DIAG_HANDLES];
	int nh;
	uint64_t clock;
	struct {
		uint8_t lib;
		int32_t size;
		uint32_t next;
	} ord[16];
	int nord;
	struct {
		int32_t member;
		uint64_t seq;
	} pend[CT_DIAG_PENDING];
	int npend;
	struct {
		uint32_t tid;
		int32_t member;
		uint64_t seq;
		bool exec;
	} fl[CT_DIAG_INFLIGHT];
	struct {
		uint32_t tid;
		int32_t member;
		uint64_t seq;
	} last[CT_DIAG_INFLIGHT];
	struct pair pairs[CT_DIAG_PAIRS];
	int npairs;
	struct newcomm nc[CT_DIAG_NEWCOMMS];
	uint64_t nnc;	       /* added; the ring keeps the last CT_DIAG_NEWCOMMS */
	uint64_t nc_confirmed; /* evicted ones that were inside a step run */
	uint64_t wait_ns, matched, late;
	int32_t *mem; /* its members */
	int nmem, capmem;
	struct steps st;
	/* diag_log (merge): the first CT_DIAG_LOG collectives, stacks deduplicated */
	struct ct_diag_logrec *log;
	uint32_t nlog, caplog;
	struct logstack {
		uint32_t hash;
		uint8_t n;
		struct ct_stack_line l[CT_DIAG_STACK];
	} * stacks;
	int nstacks;
};

/* An open-addressing index of a table: slot → entry + 1 (0 empty), by a 64-bit key. */
struct diag_index {
	uint64_t *keys;
	int32_t *at;
	uint32_t cap, n; /* cap a power of two, n <= cap / 2 */
};

struct ct_diag {
	struct ct_diag_opts o;
	struct dproc **procs;
	int nprocs, capprocs;
	struct diag_index proc_ix; /* by pid */
	struct comm **comms;
	int ncomms, capcomms;
	struct diag_index comm_ix; /* by (lib, size, ordinal, leader) */
	struct member **members;
	int nmembers, capmembers;
	struct rec **mrecs; /* diag_match_try's scratch: a record and a member per member */
	struct member **mms;
	int capscratch;
	uint64_t matched;
	struct ct_diag_top top[CT_DIAG_TOP];
	int ntop;
	struct ct_diag_finding hangs[CT_DIAG_HANGS];
	int nhangs;
	struct ct_diag_finding *f;
	int nf;
	struct ct_diag_drops drops;
	uint64_t kind_hw[CT_DIAG_KINDS + 1]; /* findings per kind, high-water (--metrics) */
	uint64_t skew_max, skew_last;
	bool last_late;
	uint64_t nlog; /* logged collectives, all processes */
	struct {       /* what the latest ct_diag_call gave its call (ct_diag_call_id) */
		uint32_t pid, tid;
		uint64_t ts, seq;
		int32_t member; /* -1: no identity */
	} last;
};

/* core.c */
bool diag_matchable(uint8_t kind);
bool diag_is_reduction(uint8_t kind);
bool diag_count_comparable(uint8_t kind, const char *fn);
bool diag_dtype_comparable(uint8_t kind, const char *a, const char *b);
int diag_site_index(const struct ct_stack_line *s, int n);
bool diag_helper_frame(const struct ct_stack_line *s, int n);
void diag_fmt_line(char *buf, size_t len, const struct ct_stack_line *l);
void diag_fmt_stack(char *buf, size_t len, const struct rec *r);
void diag_fmt_site(char *buf, size_t len, const struct rec *r);
void diag_who(char *buf, size_t len, const struct dproc *p);
void diag_comm_name(const struct comm *c, char *buf, size_t len);
void diag_fmt_secs(char *buf, size_t len, uint64_t ns);
struct dproc *diag_proc_find(struct ct_diag *d, uint32_t pid);
struct dproc *diag_proc_get(struct ct_diag *d, uint32_t pid, int rank);
struct rec *diag_rec_of(struct ct_diag *d, int32_t member, uint64_t seq);
int diag_proc_index(const struct ct_diag *d, const struct dproc *p);
/* The index: entry + 1 of key, or 0; add (0, or -ENOMEM). */
int32_t diag_index_get(const struct diag_index *x, uint64_t key);
int diag_index_put(struct diag_index *x, uint64_t key, int32_t entry);
/* Room for one more pointer in a growing table of at most max (false: full or no memory). */
bool diag_grow(void *table, int n, int *cap, int max);

/* steps.c */
const struct run *diag_steady_run(const struct ct_diag *d, const struct steps *st);
void diag_steps_add(struct steps *st, const struct ct_diag_call *c,
		    const struct ct_stack_line *site, bool helper);
bool diag_in_run(const struct run *r, uint64_t index);
void diag_newcomm_add(struct ct_diag *d, struct dproc *p, const char *fn, bool creation,
		      const struct ct_stack_line *site, const char *comm);

/* comms.c */
int32_t diag_handle_member(struct ct_diag *d, struct dproc *p, const struct ct_diag_call *c,
			   const struct ct_stack_line *site);

/* log.c */
int32_t diag_log_add(struct ct_diag *d, struct dproc *p, const struct ct_diag_call *c, int32_t comm,
		     int si, bool helper, bool creation);
void diag_log_end(struct dproc *p, const struct rec *r, uint64_t ts);

/* match.c */
/* A member's record of seq entered its window: the collective is matched once all are in. */
void diag_match_arrived(struct ct_diag *d, int32_t ci, uint64_t seq);

/* hangs.c */
bool diag_blocked(const struct rec *r);

#endif
