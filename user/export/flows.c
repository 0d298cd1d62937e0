// SPDX-License-Identifier: MIT
/*
 * The pure parts behind the Chrome trace's nesting and its flow arrows (flows.h): the
 * Perfetto nesting check, the cross-rank matcher, the c10d-to-Gloo handoff queue.
 */
#include <stdlib.h>
#include <string.h>
#include "export/flows.h"

static int span_cmp(const void *a, const void *b)
{
	const struct ct_span *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end)
		return x->end > y->end ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

size_t ct_span_check(struct ct_span *spans, size_t n)
{
	/* The open spans enclosing the current one; depth is bounded by n. */
	size_t *stack, top = 0, bad = 0;

	if (!n)
		return 0;
	qsort(spans, n, sizeof(*spans), span_cmp);
	stack = malloc(n * sizeof(*stack));
	if (!stack)
		return 0;
	for (size_t i = 0; i < n; i++) {
		struct ct_span *s = &spans[i];

		s->bad = false;
		while (top && spans[stack[top - 1]].end <= s->start &&
		       !(spans[stack[top - 1]].end == s->start && s->end == s->start))
			top--;
		if (top && s->end > spans[stack[top - 1]].end) {
			s->bad = true;
			bad++;
			continue;
		}
		stack[top++] = i;
	}
	free(stack);
	return bad;
}

bool ct_xmatch_add(struct ct_xmatch *m, const struct ct_xkey *k, const struct ct_xhalf *h,
		   struct ct_xhalf *first)
{
	for (uint32_t i = 0; i < CT_XMATCH_SLOTS; i++) {
		const typeof(m->slot[0]) *e = &m->slot[i];

		if (e->used && e->key.function == k->function && e->key.comm == k->comm &&
		    e->key.sub == k->sub && e->key.seq == k->seq) {
			if (e->first.pid == h->pid)
				return false; /* the same process twice: not another rank's half */
			*first = e->first;
			return true;
		}
	}
	if (m->slot[m->next].used)
		m->evicted++;
	m->slot[m->next].used = true;
	m->slot[m->next].key = *k;
	m->slot[m->next].first = *h;
	m->next = (m->next + 1) % CT_XMATCH_SLOTS;
	return false;
}

int ct_handoff_caller(struct ct_handoff *q, uint8_t kind, const struct ct_xhalf *src)
{
	int i = (int)q->next;

	if (q->slot[i].used)
		q->evicted++; /* never matched or never completed: its arrow is lost */
	memset(&q->slot[i], 0, sizeof(q->slot[i]));
	q->slot[i].used = true;
	q->slot[i].kind = kind;
	q->slot[i].src = *src;
	q->next = (q->next + 1) % CT_HANDOFF_SLOTS;
	return i;
}

int ct_handoff_worker(struct ct_handoff *q, uint8_t kind, const struct ct_xhalf *dst)
{
	int best = -1;

	for (int i = 0; i < CT_HANDOFF_SLOTS; i++) {
		const typeof(q->slot[0]) *e = &q->slot[i];

		if (!e->used || e->matched || e->kind != kind || e->src.ts > dst->ts)
			continue;
		if (best < 0 || e->src.ts < q->slot[best].src.ts)
			best = i;
	}
	if (best >= 0) {
		q->slot[best].matched = true;
		q->slot[best].dst = *dst;
	}
	return best;
}

bool ct_handoff_end(struct ct_handoff *q, int slot, bool worker, uint64_t end, struct ct_xhalf *src,
		    struct ct_xhalf *dst)
{
	typeof(q->slot[0]) *e;

	if (slot < 0 || slot >= CT_HANDOFF_SLOTS || !q->slot[slot].used)
		return false;
	e = &q->slot[slot];
	if (worker) {
		e->dst.end = end;
		e->dst_done = true;
	} else {
		e->src.end = end;
		e->src_done = true;
	}
	if (!e->matched || !e->src_done || !e->dst_done)
		return false;
	*src = e->src;
	*dst = e->dst;
	e->used = false;
	return true;
}
