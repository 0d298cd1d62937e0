// SPDX-License-Identifier: MIT
/*
 * Each thread's last stacks (laststack.h), kept per process for CT_LAST_STACKS threads:
 * - its last call stack whole, in the order BPF sent it, so that the next call record's
 *   shared outermost frames are copied from here;
 * - its last named stack: its raw frames, to compare the next stack's with, and what each
 *   was named. A stack is named in place: the frames it shares with the last one stay where
 *   they are (or move as a block where its depth changed), and only the others are named.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "laststack.h"

struct last_stack {
	uint32_t tid;
	uint64_t used; /* the clock at its last use: the least recently used is replaced */
	/* the last call stack, as sent: n frames */
	uint32_t n, cap;
	struct ct_pyframe_raw *frames;
	/* the last named stack: nnamed frames, raw and as named */
	int nnamed, named_cap;
	struct ct_pyframe_raw *raw;
	struct ct_pyframe *named;
	int *rc;
};

struct ct_last_stacks {
	uint64_t clock;
	int n;
	struct last_stack t[CT_LAST_STACKS];
};

static struct last_stack *find(struct ct_last_stacks *ls, uint32_t tid)
{
	for (int i = 0; i < ls->n; i++)
		if (ls->t[i].tid == tid)
			return &ls->t[i];
	return NULL;
}

/* The thread's slot, made (or taken from the least recently used thread) if need be. */
static struct last_stack *slot(struct ct_last_stacks *ls, uint32_t tid)
{
	struct last_stack *e = find(ls, tid);

	if (e)
		return e;
	if (ls->n < CT_LAST_STACKS) {
		e = &ls->t[ls->n++];
	} else {
		e = &ls->t[0];
		for (int i = 1; i < ls->n; i++)
			if (ls->t[i].used < e->used)
				e = &ls->t[i];
	}
	e->tid = tid;
	e->n = 0;
	e->nnamed = 0;
	return e;
}

static bool remember(struct last_stack *e, const struct ct_pyframe_raw *f, uint32_t n)
{
	if (n > e->cap) {
		struct ct_pyframe_raw *m = realloc(e->frames, n * sizeof(*f));

		if (!m) {
			e->n = 0;
			return false;
		}
		e->frames = m;
		e->cap = n;
	}
	memmove(e->frames, f, n * sizeof(*f));
	e->n = n;
	return true;
}

const struct ct_call_event *ct_last_stack_whole(struct ct_last_stacks **ls,
						const struct ct_call_event *ev,
						struct ct_call_event *whole)
{
	uint32_t sent = ev->py.nframes, same = ev->py.nsame;
	struct last_stack *e;

	if (!sent && !same)
		return ev;
	if (!*ls && !(*ls = calloc(1, sizeof(**ls))))
		return same ? NULL : ev;
	e = same ? find(*ls, ev->hdr.tid) : slot(*ls, ev->hdr.tid);
	if (e)
		e->used = ++(*ls)->clock;
	if (!same) {
		remember(e, ev->py.frames, sent);
		return ev;
	}
	if (!e || same > e->n || sent + same > CT_PY_MAX_FRAMES) {
		if (e)
			e->n = 0; /* what follows cannot share with a stack not known here */
		return NULL;
	}
	memcpy(whole, ev, CT_CALL_EVENT_SIZE(sent));
	memcpy(&whole->py.frames[sent], &e->frames[e->n - same], same * sizeof(*e->frames));
	whole->py.nframes = (uint16_t)(sent + same);
	whole->py.nsame = 0;
	remember(e, whole->py.frames, sent + same);
	return whole;
}

/* Room for n named frames in e; false (e holding none) when memory ran out. */
static bool room(struct last_stack *e, int n)
{
	struct ct_pyframe_raw *r;
	struct ct_pyframe *f;
	int *c;

	if (n <= e->named_cap)
		return true;
	if ((r = realloc(e->raw, n * sizeof(*r))))
		e->raw = r;
	if ((f = realloc(e->named, n * sizeof(*f))))
		e->named = f;
	if ((c = realloc(e->rc, n * sizeof(*c))))
		e->rc = c;
	if (!r || !f || !c) {
		e->nnamed = 0;
		return false;
	}
	e->named_cap = n;
	return true;
}

int ct_last_stack_named(struct ct_last_stacks **ls, struct ct_pysym_cache *c, pid_t pid,
			uint32_t tid, const struct ct_py_offsets *o,
			const struct ct_pyframe_raw *raw, int n, bool checked,
			const struct ct_pyframe **named, const int **rc)
{
	struct last_stack *e;
	int k = n, m;

	if (!*ls && !(*ls = calloc(1, sizeof(**ls))))
		return -ENOMEM;
	e = slot(*ls, tid);
	e->used = ++(*ls)->clock;
	m = e->nnamed;
	/* frames [k, n) are the last named stack's [m, e->nnamed), named there */
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
	e->nnamed = n;
	*named = e->named;
	*rc = e->rc;
	return n - k;
}

void ct_last_stacks_free(struct ct_last_stacks *ls)
{
	if (!ls)
		return;
	for (int i = 0; i < ls->n; i++) {
		free(ls->t[i].frames);
		free(ls->t[i].raw);
		free(ls->t[i].named);
		free(ls->t[i].rc);
	}
	free(ls);
}
