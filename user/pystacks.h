/* SPDX-License-Identifier: MIT */
/* Python stacks: interpreter registration with BPF, and stacks into the call tree. */
#ifndef CT_PYSTACKS_H
#define CT_PYSTACKS_H

#include "python/autograd.h"
#include "session.h"
#include "targets.h"

/* Symbolizer cache and framework profiles (built in + --profile). 0 or -errno (err set). */
int ct_py_init(struct ct_session *s, char *err, size_t errlen);
void ct_py_free(struct ct_session *s);
/* Detect CPython in a process and give BPF its layout; a process without is fine. */
int ct_py_attach_proc(struct ct_session *s, struct ct_proc *p);
/* A call's Python stack, resolved: the fields of a tree call that come from the stack. */
struct ct_py_resolved {
	struct ct_tree_call call; /* helper, phase, truncated, path, stack; the rest is zero */
	bool attributed;	  /* a backward collective under its forward's module path */
	struct ct_tree_frame path[CT_TREE_MAX_DEPTH];
	struct ct_stack_line stack[CT_TREE_MAX_STACK];
};

/* The stack of an outermost call, symbolized and matched against the profiles: 0, or -1
 * where the process has no Python (or the record no frames). */
int ct_py_resolve(struct ct_session *s, struct ct_proc *p, const struct ct_call_event *ev,
		  struct ct_py_resolved *out);
/* The same for another record's stack (an op's, --ops on torch 2.x); no attribution counted. */
int ct_py_resolve_stack(struct ct_session *s, struct ct_proc *p, const struct ct_hdr *h,
			const struct ct_pystack *py, struct ct_py_resolved *out);
/* Objects BPF copied at a call (a redistribution's specs), for resolving that call's stack. */
void ct_py_on_capture(struct ct_session *s, struct ct_proc *p, const struct ct_capture_event *ev);
/* --ops (user/pyops.c). */
struct ct_ops_stats {
	uint64_t entries;	 /* entry records received */
	uint64_t kept;		 /* of them, profiled calls (tree nodes) */
	uint64_t unclassified;	 /* of them, sent before BPF knew their code object */
	uint64_t unwanted;	 /* of them, not profiled although BPF knew it (0 unless
				    the verdict map evicted it) */
	uint64_t verdicts;	 /* verdicts written to BPF */
	uint64_t unresolved;	 /* of them, code objects no longer readable */
	uint64_t unpaired;	 /* exits that matched no entry */
	uint64_t late;		 /* exits sent late: the kernel omitted their uretprobe */
	uint64_t lost;		 /* calls not followed: no thread slot, too deep */
	uint64_t captured;	 /* value records whose DTensors BPF copied at the call */
	uint64_t gradfns;	 /* torch 2.x: Python autograd Functions' backwards begun */
	uint64_t gradfn_unknown; /* of them, with a ctx not (or no longer) known */
};

void ct_py_on_op(struct ct_session *s, struct ct_proc *p, const struct ct_op_event *ev);
/* Whether p's --ops sees ops at their dispatch (torch 2.x), and an op is open on thread tid. */
bool ct_py_ops_by_dispatch(const struct ct_proc *p);
bool ct_py_op_open(const struct ct_proc *p, uint32_t tid);
/* torch 2.x: an op dispatched to a tensor subclass, with its stack (the modules around it). */
void ct_py_on_dispatch(struct ct_session *s, struct ct_proc *p, const struct ct_dispatch_event *ev);
/* torch 2.x: a Python autograd Function's backward began (its backward ops follow); words:
 * the record has the node's words (ev->ctx 0: where PyNode::obj is, unknown). */
void ct_py_on_gradfn(struct ct_session *s, struct ct_proc *p, const struct ct_gradfn_event *ev,
		     bool words);
/* A backward pass began or ended on thread tid (its ops are the backward's between). */
void ct_py_on_backward(struct ct_proc *p, uint32_t tid, bool begin);

/*
 * Backward attribution: an autograd Function's ctx is made by THPFunction_new. Its entry's
 * stack (the forward) gives the module path, its return the ctx; a backward collective
 * under BackwardCFunction.apply(ctx) is then put under that module (ct_py_resolve).
 */
void ct_py_ctx_enter(struct ct_session *s, struct ct_proc *p, const struct ct_call_event *ev);
void ct_py_ctx_created(struct ct_session *s, struct ct_proc *p, uint32_t tid, uint64_t ctx);
const struct ct_autograd_stats *ct_py_autograd_stats(const struct ct_session *s);
const struct ct_ops_stats *ct_py_ops_stats(const struct ct_session *s);
/* Where --ops saw the processes' ops: "dispatch" (torch 2.x), "frames", both, or "none". */
const char *ct_py_ops_seen_at(const struct ct_session *s);
/* What symbolizing Python stacks did and could not do. */
struct ct_py_counts {
	uint64_t stacks, frames;
	uint64_t stacks_known; /* every code object checked in BPF: named from the cache */
	uint64_t captured;     /* of those, named from objects BPF copied at the call */
	uint64_t frames_late;  /* of those, frames no longer cached: read from the process later */
	uint64_t frames_repeated; /* frames of those named as in the thread's last stack */
	uint64_t known_failed;	  /* code objects BPF could not be told of (their stacks wake) */
	uint64_t held;		  /* code objects BPF was told are held (CT_PYC_HELD) */
	uint64_t
	    unverifiable; /* code objects BPF could not tell from a reuse (their stacks wake) */
	uint64_t frames_reused;	    /* unresolved: the code object's address was reused meanwhile */
	uint64_t frames_unreadable; /* unresolved: BPF could not read the code object at capture */
	uint64_t frames_unresolved; /* code objects unreadable: the process had exited */
	uint64_t names_by_class;    /* module frames named by their class, not their attribute */
	uint64_t stacks_cut;	    /* a frame unreadable at the call: those further out missing */
};

const struct ct_py_counts *ct_py_counts(const struct ct_session *s);

#endif
