/* SPDX-License-Identifier: MIT */
/*
 * Autograd contexts: the forward module path of each (pid, ctx) an autograd Function's
 * apply made (libtorch_python's THPFunction_new: its entry's stack gives the path, its
 * return the ctx), for the backward that runs with that ctx (BackwardCFunction.apply):
 * its collectives, and with --ops its ops, go under that path. Bounded: a 4-way set-
 * associative table; a ctx evicted by a newer one is counted as replaced.
 */
#ifndef CT_PYTHON_AUTOGRAD_H
#define CT_PYTHON_AUTOGRAD_H

#include <stdint.h>
#include <sys/types.h>
#include "tree.h"

#define CT_CTX_MAX_PATH 16

struct ct_ctx_path {
	uint8_t n;
	struct ct_tree_frame f[CT_CTX_MAX_PATH]; /* its module frames, outermost first */
};

struct ct_autograd_stats {
	uint64_t contexts;     /* contexts recorded with their module path */
	uint64_t replaced;     /* of them, dropped from the table by a newer one */
	uint64_t attributed;   /* backward collectives put under their forward's module */
	uint64_t unattributed; /* backward collectives whose ctx was not (or no longer) known */
};

struct ct_ctxtab;

struct ct_ctxtab *ct_ctxtab_new(void);
void ct_ctxtab_free(struct ct_ctxtab *t);
/* THPFunction_new entered on (pid, tid), under these frames (their modules are kept). */
void ct_ctxtab_enter(struct ct_ctxtab *t, pid_t pid, pid_t tid, const struct ct_tree_frame *path,
		     int n);
/* Its return: ctx (0: it failed) gets the path of the entry on that thread, if any. */
void ct_ctxtab_created(struct ct_ctxtab *t, pid_t pid, pid_t tid, uint64_t ctx);
/* The forward module path of ctx, or NULL when it is not (or no longer) known. */
const struct ct_ctx_path *ct_ctxtab_find(const struct ct_ctxtab *t, pid_t pid, uint64_t ctx);
/* Its counters; attributed/unattributed are the caller's to count. */
struct ct_autograd_stats *ct_ctxtab_stats(struct ct_ctxtab *t);

#endif
