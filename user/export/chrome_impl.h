/* SPDX-License-Identifier: MIT */
/*
 * The Chrome exporter's insides, shared by its files: chrome_out.c (the document, its
 * processes and threads), chrome_tree.c (module/op slices and findings at the end),
 * chrome.c (calls as they come, the metadata, open and close).
 */
#ifndef CT_EXPORT_CHROME_IMPL_H
#define CT_EXPORT_CHROME_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "export/chrome.h"
#include "commtrace/abi.h"
#include "export/flows.h"
#include "session.h"
#include "util/sbuf.h"

#define CH_THREADS	1024	    /* threads with a track; more are counted, not written */
#define CH_META_RESERVE (64u << 10) /* kept free under the size cap for the closing metadata */

/* A call entered and not yet written: its slice is written when it returns. */
struct pend {
	bool on;
	uint16_t probe_id;
	uint64_t ts;
	const struct ct_func *fn;
	const struct ct_libdesc *d;
	uint64_t sent, recv;
	const char *dtype;
	const char *op; /* reduce op name (ct_op_name), or NULL */
	uint64_t val[CT_NVAL];
	int32_t node; /* tree node, or -1 */
	uint64_t seq;
	int32_t comm_id;   /* the diagnosis' communicator identity (ct_diag_call_id), or -1 */
	uint64_t comm_seq; /* the collective's number on it */
	uint32_t sub;	   /* n-th collective nested in the call whose identity it took */
	uint32_t nested;   /* depth 0: the collectives nested in it so far */
	int hand;	   /* handoff slot, or -1 */
	bool worker;
};

struct cthread {
	uint32_t pid, tid;
	bool used;
	struct pend call[CT_MAX_DEPTH];
};

struct cproc {
	uint32_t pid;
	bool named;
	int nspid;
	int threads;
	struct ct_handoff hand;
	uint64_t *node_end; /* per tree node: the end its slice was written with, 0: none */
	int32_t node_cap;
};

struct ct_chrome {
	struct ct_chrome_opts o;
	FILE *f;
	char tmp[4096];
	char host[256];
	struct ct_sbuf b;
	uint64_t bytes, events, calls_written, calls_unreturned, calls_outside, calls_capped;
	uint64_t calls_lost_entry, threads_over, tree_slices, tree_dropped, flows_handoff;
	uint64_t flows_rank, flow_id, unidentified;
	bool capped, window_said;
	uint64_t capped_at_ns;
	uint64_t events_capped; /* events not written for the size cap */
	struct cthread th[CH_THREADS];
	struct cproc *procs[CT_MAX_TARGETS];
	int nprocs;
	struct ct_xmatch xm;
	const struct ct_diag *diag; /* the session's: communicator identities */
	int err;
};

/* chrome_out.c */
struct ct_chrome *ch_chrome_of(struct ct_session *s);
bool ch_emit(struct ct_chrome *c, uint64_t ts_ns);
bool ch_in_window(struct ct_chrome *c, struct ct_session *s, uint64_t ts);
struct cproc *ch_cproc_get(struct ct_chrome *c, struct ct_proc *p);
void ch_name_process(struct ct_chrome *c, struct ct_proc *p, struct cproc *cp);
struct cthread *ch_thread_get(struct ct_chrome *c, struct ct_proc *p, struct cproc *cp,
			      uint32_t tid, const char *comm, bool add);
void ch_node_end_set(struct cproc *cp, int32_t node, uint64_t end);
bool ch_emit_flow(struct ct_chrome *c, const char *name, const struct ct_xhalf *a,
		  const struct ct_xhalf *b);
bool ch_fn_is_collective(const struct ct_func *fn);
const char *ch_phase_name(uint8_t phase);
bool ch_comm_ident(const struct ct_chrome *c, int32_t id, char *name, size_t len, bool *ambiguous);

/* chrome_tree.c */
void ch_emit_tree(struct ct_chrome *c, struct ct_proc *p, struct cproc *cp);
void ch_emit_findings(struct ct_chrome *c, struct ct_session *s);

#endif
