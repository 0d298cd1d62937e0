// SPDX-License-Identifier: MIT
/*
 * Each thread's last call stack (laststack.h): the frames of the last call record of the
 * thread that had any, whole, in the order BPF sent them, so that the next record's
 * shared outermost frames are copied from here. Kept per process, for CT_LAST_STACKS
 * threads.
 */
#include <stdlib.h>
#include <string.h>
#include "laststack.h"

struct last_stack {
	uint32_t tid, n, cap;
	uint64_t used; /* the clock at its last use: the least recently used is replaced */
	struct ct_pyframe_raw *frames;
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

void ct_last_stacks_free(struct ct_last_stacks *ls)
{
	if (!ls)
		return;
	for (int i = 0; i < ls->n; i++)
		free(ls->t[i].frames);
	free(ls);
}
