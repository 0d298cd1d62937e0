/* SPDX-License-Identifier: MIT */
/*
 * Each thread's last stacks, kept per process for CT_LAST_STACKS threads:
 * - its last call stack as sent, to put back the outermost frames a call record shares with
 *   it and does not carry (struct ct_pystack.nsame, bpf/stackshare.bpf.h);
 * - its last stack as named (a call's or an op's), so that the outer frames the next one
 *   shares with it are not named again. A training loop calls its collectives from the same
 *   outer frames step after step, and naming each frame (a cache lookup, its line) was most
 *   of the reader's time per stack.
 */
#ifndef CT_LASTSTACK_H
#define CT_LASTSTACK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "commtrace/abi.h"
#include "python/symbolize.h"

/* Threads of a process whose last stacks are kept; past them, the least recently used goes. */
#define CT_LAST_STACKS 64

struct ct_last_stacks;

/*
 * ev with its whole stack, and that stack remembered as its thread's last call stack (when
 * it has frames): ev itself when it shares none, else *whole, filled. NULL when the frames
 * it shares are not known here (a thread forgotten past CT_LAST_STACKS, a stack whose
 * record was malformed): the call goes on without its stack. *ls is made at the first stack.
 */
const struct ct_call_event *ct_last_stack_whole(struct ct_last_stacks **ls,
						const struct ct_call_event *ev,
						struct ct_call_event *whole);

/*
 * ct_py_symbolize_many() of thread tid's stack raw (n frames, innermost first), which then
 * becomes the thread's last named stack: *named and *rc are its frames as named, until the
 * next stack of the process is named. In a stack whose every code object BPF checked at the
 * call (checked), the outermost frames that are, word for word, those at the same distance
 * from the outermost end of the thread's last named stack, each named there, keep its names
 * and line: the same code object (checked against what the reader resolved at its address)
 * at the same instruction. Returns how many frames did, or -ENOMEM (nothing named). *ls is
 * made at the first stack.
 */
int ct_last_stack_named(struct ct_last_stacks **ls, struct ct_pysym_cache *c, pid_t pid,
			uint32_t tid, const struct ct_py_offsets *o,
			const struct ct_pyframe_raw *raw, int n, bool checked,
			const struct ct_pyframe **named, const int **rc);

void ct_last_stacks_free(struct ct_last_stacks *ls);

#endif
