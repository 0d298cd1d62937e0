/* SPDX-License-Identifier: MIT */
/*
 * Each thread's last call stack, to put back the outermost frames a call record shares
 * with it and does not carry (struct ct_pystack.nsame, bpf/stackshare.bpf.h).
 */
#ifndef CT_LASTSTACK_H
#define CT_LASTSTACK_H

#include <stdbool.h>
#include <stdint.h>
#include "commtrace/abi.h"

/* Threads of a process whose last stack is kept; past them, the least recently used goes. */
#define CT_LAST_STACKS 64

struct ct_last_stacks;

/*
 * ev with its whole stack, and that stack remembered as its thread's last (when it has
 * frames): ev itself when it shares none, else *whole, filled. NULL when the frames it
 * shares are not known here (a thread forgotten past CT_LAST_STACKS, a stack whose record
 * was malformed): the call goes on without its stack. *ls is made at the first stack.
 */
const struct ct_call_event *ct_last_stack_whole(struct ct_last_stacks **ls,
						const struct ct_call_event *ev,
						struct ct_call_event *whole);
void ct_last_stacks_free(struct ct_last_stacks *ls);

#endif
