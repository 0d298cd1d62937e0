// SPDX-License-Identifier: MIT
/* laststack.c: a call record's shared outermost frames put back from its thread's last. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "laststack.h"

static struct ct_call_event *call(uint32_t tid, uint16_t sent, uint16_t same, uint64_t base)
{
	struct ct_call_event *ev = calloc(1, sizeof(*ev));

	ev->hdr.type = CT_EV_CALL;
	ev->hdr.tid = tid;
	ev->py.nframes = sent;
	ev->py.nsame = same;
	for (int i = 0; i < sent; i++) {
		ev->py.frames[i].code = base + (uint64_t)i;
		ev->py.frames[i].instr = 7;
	}
	return ev;
}

/* Codes of the whole stack, innermost first, as a string of their low digits. */
static void codes(const struct ct_call_event *ev, char *out)
{
	for (int i = 0; i < ev->py.nframes; i++)
		out[i] = (char)('0' + ev->py.frames[i].code % 10);
	out[ev->py.nframes] = 0;
}

TEST(laststack_puts_back_shared_frames)
{
	struct ct_last_stacks *ls = NULL;
	struct ct_call_event *whole = calloc(1, sizeof(*whole));
	struct ct_call_event *a = call(10, 5, 0, 100), *b = call(10, 2, 3, 200),
			     *c = call(11, 4, 0, 300), *d = call(10, 1, 5, 400),
			     *e = call(12, 1, 2, 500), *f = call(10, 1, 7, 600);
	const struct ct_call_event *w;
	char s[CT_PY_MAX_FRAMES + 1];

	/* a whole stack is its own, and becomes the thread's last */
	w = ct_last_stack_whole(&ls, a, whole);
	ASSERT_TRUE(w == a, "nothing shared: the record itself");
	/* 2 sent, the outermost 3 of a's 5 (102, 103, 104) put back */
	w = ct_last_stack_whole(&ls, b, whole);
	ASSERT_TRUE(w == whole, "made whole");
	codes(w, s);
	ASSERT_STREQ(s, "01234", "b's 200 201, then a's 102 103 104");
	ASSERT_EQ(w->py.nsame, 0, "whole");
	/* another thread's stack does not disturb this one's */
	ASSERT_TRUE(ct_last_stack_whole(&ls, c, whole) == c, "thread 11");
	/* from b as made whole: 400, then b's 201 102 103 104 and 200 */
	w = ct_last_stack_whole(&ls, d, whole);
	codes(w, s);
	ASSERT_STREQ(s, "001234", "d's 400, then the whole of b");
	ASSERT_EQ(w->py.frames[1].code, 200, "b's innermost");
	/* a thread with no last stack here: lost, said so */
	ASSERT_TRUE(ct_last_stack_whole(&ls, e, whole) == NULL, "no last stack for thread 12");
	/* more shared than the last one has: lost, and the thread's last is forgotten */
	ASSERT_TRUE(ct_last_stack_whole(&ls, f, whole) == NULL, "7 of 6");
	ASSERT_TRUE(ct_last_stack_whole(&ls, b, whole) == NULL, "nothing left to share from");
	ct_last_stacks_free(ls);
	free(whole);
	free(a), free(b), free(c), free(d), free(e), free(f);
}

TEST(laststack_bounded_threads)
{
	struct ct_last_stacks *ls = NULL;
	struct ct_call_event *whole = calloc(1, sizeof(*whole)), *ev;

	/* CT_LAST_STACKS + 1 threads: the least recently used, thread 0, is forgotten */
	for (uint32_t t = 0; t <= CT_LAST_STACKS; t++) {
		ev = call(t, 3, 0, 10 * t);
		ct_last_stack_whole(&ls, ev, whole);
		free(ev);
	}
	ev = call(0, 1, 1, 0);
	ASSERT_TRUE(ct_last_stack_whole(&ls, ev, whole) == NULL, "thread 0 forgotten");
	free(ev);
	ev = call(CT_LAST_STACKS, 1, 2, 0);
	ASSERT_TRUE(ct_last_stack_whole(&ls, ev, whole) == whole, "the newest kept");
	ASSERT_EQ(whole->py.nframes, 3, "1 + 2");
	free(ev);
	ct_last_stacks_free(ls);
	free(whole);
}
