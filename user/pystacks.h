/* SPDX-License-Identifier: MIT */
/* Python stacks: interpreter registration with BPF, and stacks into the call tree. */
#ifndef CT_PYSTACKS_H
#define CT_PYSTACKS_H

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
	struct ct_tree_frame path[CT_TREE_MAX_DEPTH];
	struct ct_stack_line stack[CT_TREE_MAX_STACK];
};

/* The stack of an outermost call, symbolized and matched against the profiles: 0, or -1
 * where the process has no Python (or the record no frames). */
int ct_py_resolve(struct ct_session *s, struct ct_proc *p, const struct ct_call_event *ev,
		  struct ct_py_resolved *out);
/* --ops (user/pystacks.c). */
struct ct_ops_stats {
	uint64_t entries;      /* entry records received */
	uint64_t kept;	       /* of them, profiled calls (tree nodes) */
	uint64_t unclassified; /* of them, sent before BPF knew their code object */
	uint64_t unwanted;     /* of them, not profiled although BPF knew it (0 unless
				  the verdict map evicted it) */
	uint64_t verdicts;     /* verdicts written to BPF */
	uint64_t unresolved;   /* of them, code objects no longer readable */
	uint64_t unpaired;     /* exits that matched no entry */
	uint64_t lost;	       /* calls not followed: no thread slot, too deep */
};

void ct_py_on_op(struct ct_session *s, struct ct_proc *p, const struct ct_op_event *ev);
const struct ct_ops_stats *ct_py_ops_stats(const struct ct_session *s);
void ct_py_stats(const struct ct_session *s, uint64_t *stacks, uint64_t *frames, uint64_t *errors);

#endif
