/* SPDX-License-Identifier: MIT */
/*
 * The live path's middle: ring-buffer records (events.c) or recorded ones (replay.c) in;
 * per-function statistics, the call tree, the diagnosis and the sinks (--chrome) out.
 */
#ifndef CT_CALLS_H
#define CT_CALLS_H

#include <stdbool.h>
#include <stdint.h>
#include "commtrace/abi.h"

/* Communicators larger than this are taken for garbage, not for the world (rank fallback). */
#define CT_MAX_COMM_SIZE (1 << 24)

struct ct_session;
struct ct_proc;
struct ct_func;
struct ct_libdesc;
struct ct_tree_call;

/* One call as every consumer sees it: built once per entry record. */
struct ct_call {
	const struct ct_call_event *ev;
	struct ct_proc *p;
	const struct ct_func *fn;
	const struct ct_libdesc *lib;
	uint64_t sent, recv;	/* bytes (catalog rules) */
	const char *dtype, *op; /* names, or NULL */
	int32_t node;		/* its tree node (an outermost call with a stack), or -1 */
};

/*
 * An entry record with its whole stack: the outermost frames it shares with its thread's
 * last one put back (bpf/stackshare.bpf.h), before anything else reads it; where that one
 * is not known here, without a stack, counted (stacks_lost). ev itself when it shares
 * none, else the session's copy, good until the next record; NULL: no memory to make it.
 */
const struct ct_call_event *ct_calls_whole(struct ct_session *s, const struct ct_call_event *ev);
/*
 * An entry record (made whole). recorded: the Python side of the call as a recording kept it
 * (replay), NULL to resolve the stack from the live process.
 */
void ct_calls_on_call(struct ct_session *s, const struct ct_call_event *ev,
		      const struct ct_tree_call *recorded);
void ct_calls_on_ret(struct ct_session *s, const struct ct_ret_event *ev);
/* --ops: a profiled Python call's entry or exit. */
void ct_calls_on_op(struct ct_session *s, const struct ct_op_event *ev);
/* --ops on torch 2.x: an op at its dispatch; a Python autograd Function's backward begun. */
void ct_calls_on_dispatch(struct ct_session *s, const struct ct_dispatch_event *ev);
void ct_calls_on_gradfn(struct ct_session *s, const struct ct_gradfn_event *ev, bool words);
/* A backward pass began (CT_EV_BACKWARD) or ended on a thread. */
void ct_calls_on_backward(struct ct_session *s, const struct ct_hdr *h);
/* CT_EV_CAPTURE: objects BPF copied at the call whose record comes next on that thread. */
void ct_calls_on_capture(struct ct_session *s, const struct ct_capture_event *ev);
/* CT_EV_UNSEEN: a call that entered before tracing began returned. */
void ct_calls_on_unseen(struct ct_session *s, const struct ct_hdr *h);

#endif
