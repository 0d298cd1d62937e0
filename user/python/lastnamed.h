/* SPDX-License-Identifier: MIT */
/*
 * Each thread's last stack as named, so that the outer frames a call shares with it are
 * not named again. A training loop calls its collectives from the same outer frames step
 * after step, and naming each frame (a cache lookup, its line) was most of the reader's
 * time per stack.
 */
#ifndef CT_LASTNAMED_H
#define CT_LASTNAMED_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "python/symbolize.h"

/* Threads of a process whose last named stack is kept; past them, the least recently used
 * goes. */
#define CT_NAMED_THREADS 64

struct ct_named_stacks;

/*
 * ct_py_symbolize_many() of thread tid's stack raw (n frames, innermost first), which then
 * becomes the thread's last: *named and *rc are its frames as named, until the next stack
 * of the process. In a stack whose every code object BPF checked at the call (checked),
 * the outermost frames that are, word for word, those at the same distance from the
 * outermost end of the thread's last stack, each named there, keep its names and line:
 * the same code object (checked against what the reader resolved at its address) at the
 * same instruction. Returns how many frames did, or -ENOMEM (nothing named). *ns is made
 * at the first stack.
 */
int ct_named_stack(struct ct_named_stacks **ns, struct ct_pysym_cache *c, pid_t pid, uint32_t tid,
		   const struct ct_py_offsets *o, const struct ct_pyframe_raw *raw, int n,
		   bool checked, const struct ct_pyframe **named, const int **rc);
void ct_named_stacks_free(struct ct_named_stacks *ns);

#endif
