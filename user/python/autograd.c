// SPDX-License-Identifier: MIT
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "python/autograd.h"
#include "util/hash.h"
#include "util/log.h"

#define CTX_SETS 2048 /* 4 ways each: 8192 contexts */
#define CTX_WAYS 4
#define CTX_OPEN 8

struct ctx_slot {
	pid_t pid;
	uint64_t ctx;
	uint64_t made; /* when it was recorded (contexts so far): the oldest way goes first */
	struct ct_ctx_path path;
};

/*
 * Between THPFunction_new's entry (the stack) and its return (the ctx), per thread; and the
 * contexts made there lately whose module has not called a child since (open).
 */
struct ctx_pending {
	pid_t pid, tid;
	bool entered; /* path is the stack of the call in flight */
	struct ct_ctx_path path;
	uint64_t open[CTX_OPEN];
	int nopen;
};

struct ct_ctxtab {
	struct ctx_slot slots[CTX_SETS][CTX_WAYS];
	struct ctx_pending pending[CT_TREE_MAX_THREADS];
	struct ct_autograd_stats stats;
};

struct ct_ctxtab *ct_ctxtab_new(void)
{
	return calloc(1, sizeof(struct ct_ctxtab));
}

void ct_ctxtab_free(struct ct_ctxtab *t)
{
	free(t);
}

struct ct_autograd_stats *ct_ctxtab_stats(struct ct_ctxtab *t)
{
	return &t->stats;
}

static struct ctx_slot *set_of(const struct ct_ctxtab *t, pid_t pid, uint64_t ctx)
{
	return (struct ctx_slot *)t->slots[ct_hash_mix(ctx, (uint64_t)pid) % CTX_SETS];
}

static struct ctx_slot *lookup(const struct ct_ctxtab *t, pid_t pid, uint64_t ctx)
{
	struct ctx_slot *set = ctx ? set_of(t, pid, ctx) : NULL;

	for (int w = 0; set && w < CTX_WAYS; w++)
		if (set[w].ctx == ctx && set[w].pid == pid)
			return &set[w];
	return NULL;
}

const struct ct_ctx_path *ct_ctxtab_find(const struct ct_ctxtab *t, pid_t pid, uint64_t ctx)
{
	const struct ctx_slot *c = lookup(t, pid, ctx);

	return c ? &c->path : NULL;
}

/* Its slot: its own (an address reused by a newer ctx), else an empty way, else the oldest. */
static struct ctx_slot *insert(struct ct_ctxtab *t, pid_t pid, uint64_t ctx)
{
	struct ctx_slot *set = set_of(t, pid, ctx), *c = lookup(t, pid, ctx);

	for (int w = 0; !c && w < CTX_WAYS; w++)
		if (!set[w].ctx)
			c = &set[w];
	if (!c) {
		c = &set[0];
		for (int w = 1; w < CTX_WAYS; w++)
			if (set[w].made < c->made)
				c = &set[w];
		t->stats.replaced++;
	}
	return c;
}

static struct ctx_pending *pending(struct ct_ctxtab *t, pid_t pid, pid_t tid, bool add)
{
	struct ctx_pending *free_slot = NULL;

	for (int i = 0; i < CT_TREE_MAX_THREADS; i++) {
		if (t->pending[i].pid == pid && t->pending[i].tid == tid)
			return &t->pending[i];
		if (!t->pending[i].tid && !free_slot)
			free_slot = &t->pending[i];
	}
	if (!add)
		return NULL;
	/* More threads creating contexts at once than slots: reuse one by tid. */
	return free_slot ? free_slot : &t->pending[tid % CT_TREE_MAX_THREADS];
}

void ct_ctxtab_enter(struct ct_ctxtab *t, pid_t pid, pid_t tid, const struct ct_tree_frame *path,
		     int n)
{
	struct ctx_pending *pd = pending(t, pid, tid, true);

	if (pd->pid != pid || pd->tid != tid)
		pd->nopen = 0; /* the slot changes threads: the other's contexts stay as they are */
	pd->pid = pid;
	pd->tid = tid;
	pd->entered = true;
	pd->path.n = 0;
	for (int i = 0; i < n && pd->path.n < CT_CTX_MAX_PATH; i++)
		if (path[i].type == CT_NODE_MODULE)
			pd->path.f[pd->path.n++] = path[i];
}

/* Whether p's frames begin q's. */
static bool begins(const struct ct_ctx_path *p, const struct ct_ctx_path *q)
{
	if (q->n < p->n)
		return false;
	for (int i = 0; i < p->n; i++)
		if (q->f[i].code != p->f[i].code || q->f[i].self != p->f[i].self)
			return false;
	return true;
}

/*
 * CommDebugMode names, in the backward, the module whose output gradient was ready last: for
 * a context a module made before calling its children (an input redistribution in its
 * forward pre-hook), that is its first child called afterwards, the last one whose output
 * gradient the backward produces. The context's path gets that child when the next context
 * of the thread is made inside it; a context made elsewhere closes the question.
 */
static void children(struct ct_ctxtab *t, struct ctx_pending *pd)
{
	int keep = 0;

	for (int i = 0; i < pd->nopen; i++) {
		struct ctx_slot *c = lookup(t, pd->pid, pd->open[i]);

		if (!c)
			continue;
		if (pd->path.n > c->path.n && begins(&c->path, &pd->path)) {
			/* a call inside its module */
			if (c->path.n < CT_CTX_MAX_PATH) {
				c->path.f[c->path.n] = pd->path.f[c->path.n];
				c->path.n++;
			}
			continue;
		}
		if (pd->path.n == c->path.n && begins(&c->path, &pd->path))
			pd->open[keep++] = pd->open[i]; /* still in the same module: wait on */
	}
	pd->nopen = keep;
}

void ct_ctxtab_created(struct ct_ctxtab *t, pid_t pid, pid_t tid, uint64_t ctx)
{
	struct ctx_pending *pd = pending(t, pid, tid, false);
	struct ctx_slot *c;

	if (!pd || !pd->entered)
		return; /* its entry had no stack (or was lost): no module to give it */
	children(t, pd);
	if (ctx) {
		c = insert(t, pid, ctx);
		ct_debug(
		    "commtrace: pid %d tid %d: autograd ctx 0x%llx from a path of %d modules\n",
		    pid, tid, (unsigned long long)ctx, pd->path.n);
		c->pid = pid;
		c->ctx = ctx;
		c->made = ++t->stats.contexts;
		c->path = pd->path;
		if (pd->nopen == CTX_OPEN) {
			memmove(pd->open, pd->open + 1, sizeof(pd->open[0]) * (CTX_OPEN - 1));
			pd->nopen--;
		}
		pd->open[pd->nopen++] = ctx;
	}
	/* The path is this call's; the open contexts are the thread's. */
	pd->path.n = 0;
	pd->entered = false;
}
