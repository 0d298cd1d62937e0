// SPDX-License-Identifier: MIT
/*
 * Each thread's last stack as named (lastnamed.h): its raw frames, to compare the next
 * stack's with, and what each was named, kept per process for CT_NAMED_THREADS threads. A
 * stack is named in place: the frames it shares with the last one stay where they are (or
 * move as a block where its depth changed), and only the others are named.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "python/lastnamed.h"

struct named_stack {
	uint32_t tid;
	int n, cap;
	uint64_t used; /* the clock at its last use: the least recently used is replaced */
	struct ct_pyframe_raw *raw;
	struct ct_pyframe *named;
	int *rc;
};

struct ct_named_stacks {
	uint64_t clock;
	int n;
	struct named_stack t[CT_NAMED_THREADS];
};

/* The thread's slot, made (or taken from the least recently used thread) if need be. */
static struct named_stack *slot(struct ct_named_stacks *ns, uint32_t tid)
{
	struct named_stack *e = NULL;

	for (int i = 0; i < ns->n; i++)
		if (ns->t[i].tid == tid)
			e = &ns->t[i];
	if (!e && ns->n < CT_NAMED_THREADS) {
		e = &ns->t[ns->n++];
	} else if (!e) {
		e = &ns->t[0];
		for (int i = 1; i < ns->n; i++)
			if (ns->t[i].used < e->used)
				e = &ns->t[i];
		e->n = 0;
	}
	e->tid = tid;
	e->used = ++ns->clock;
	return e;
}

/* Room for n frames in e; false (e holding none) when memory ran out. */
static bool room(struct named_stack *e, int n)
{
	struct ct_pyframe_raw *r;
	struct ct_pyframe *f;
	int *c;

	if (n <= e->cap)
		return true;
	if ((r = realloc(e->raw, n * sizeof(*r))))
		e->raw = r;
	if ((f = realloc(e->named, n * sizeof(*f))))
		e->named = f;
	if ((c = realloc(e->rc, n * sizeof(*c))))
		e->rc = c;
	if (!r || !f || !c) {
		e->n = 0;
		return false;
	}
	e->cap = n;
	return true;
}

int ct_named_stack(struct ct_named_stacks **ns, struct ct_pysym_cache *c, pid_t pid, uint32_t tid,
		   const struct ct_py_offsets *o, const struct ct_pyframe_raw *raw, int n,
		   bool checked, const struct ct_pyframe **named, const int **rc)
{
	struct named_stack *e;
	int k = n, m;

	if (!*ns && !(*ns = calloc(1, sizeof(**ns))))
		return -ENOMEM;
	e = slot(*ns, tid);
	m = e->n;
	/* frames [k, n) are the last stack's [m, e->n), named there */
	while (checked && k > 0 && m > 0 && !e->rc[m - 1] &&
	       !memcmp(&raw[k - 1], &e->raw[m - 1], sizeof(*raw))) {
		e->named[m - 1].fresh = 0; /* BPF was told of it when it was named */
		k--;
		m--;
	}
	if (!room(e, n))
		return -ENOMEM;
	if (k != m) {
		memmove(&e->raw[k], &e->raw[m], (n - k) * sizeof(*e->raw));
		memmove(&e->named[k], &e->named[m], (n - k) * sizeof(*e->named));
		memmove(&e->rc[k], &e->rc[m], (n - k) * sizeof(*e->rc));
	}
	memcpy(e->raw, raw, k * sizeof(*raw));
	ct_py_symbolize_many(c, pid, o, raw, k, checked, e->named, e->rc);
	e->n = n;
	*named = e->named;
	*rc = e->rc;
	return n - k;
}

void ct_named_stacks_free(struct ct_named_stacks *ns)
{
	if (!ns)
		return;
	for (int i = 0; i < ns->n; i++) {
		free(ns->t[i].raw);
		free(ns->t[i].named);
		free(ns->t[i].rc);
	}
	free(ns);
}
