/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Frames a call's stack shares with the last one its thread sent are not sent again
 * (struct ct_pystack.nsame): a training loop calls its collectives from the same outer
 * frames step after step, and copying a stack into the ring cost about as much as walking
 * it (40 frames: about 430 ns of the entry program's 2 300, and the return's record, landing
 * on lines that copy had just made cold, 240 ns more).
 *
 * A call's stack is walked into a per-CPU buffer, which still holds the last stack sent
 * from this CPU: the thread's last one when the stamps say so. The walker compares each
 * frame with the one it replaces there (struct walk.last_n); where both stacks have as many
 * frames, the outermost ones found the same, word for word, are sent as a count, in a
 * stack whose code objects were all checked at this walk (CT_PYS_KNOWN): the frames left
 * out hold exactly the values user space would have been sent, and names the frames by.
 */
#ifndef CT_STACKSHARE_BPF_H
#define CT_STACKSHARE_BPF_H

/*
 * Stacks a thread sends in a row that share frames: then one is sent whole, so that a
 * reader that lost the thread's last stack (it keeps CT_LAST_STACKS threads a process) has
 * it again soon.
 */
#define CT_SHARE_RUN 64

/* Call records carry a Python stack of up to 24 KiB: built here, then copied to the ring. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ct_call_event);
} callbuf SEC(".maps");

struct stack_memo {
	__u64 held; /* the stamp of the stack callbuf holds (0: none sure) */
	__u64 next; /* stamps made here: unique, the CPU in the top bits */
	__u32 n;    /* its frames */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_memo);
} stackmemo SEC(".maps");

/*
 * The frames of the thread's last stack, where callbuf holds it and the thread may share
 * from it; else 0.
 */
static __always_inline __u32 last_frames(const struct stack_memo *memo, const struct ct_thread *t)
{
	if (!memo || !memo->held || t->last_stack != memo->held || t->shared_run >= CT_SHARE_RUN)
		return 0;
	return memo->n;
}

/*
 * After the walk into ev (which set nsame to 0): the same outermost frames it found (same)
 * are left out of what is sent (ev->py.nframes, nsame), in a stack of known code objects.
 * epoch: memo->next when the walk began, which a walk on this CPU in between (a
 * preemption) changed.
 */
static __always_inline void share_frames(const struct stack_memo *memo, __u64 epoch, __u32 same,
					 struct ct_call_event *ev)
{
	__u32 n = ev->py.nframes;

	if (!memo || memo->next != epoch || !(ev->py.flags & CT_PYS_KNOWN) || !same || same > n)
		return;
	ev->py.nframes = n - same;
	ev->py.nsame = same;
}

/*
 * The record built in ev was sent (emitted) or not. A stack sent is, from now, the
 * thread's last one, held here until the next walk on this CPU (callbuf keeps all its
 * frames; memo->n counts them). A record without frames changes nothing, on either side.
 * A stack not sent, or a walk on this CPU in between, replaced frames: then callbuf holds
 * no stack for sure.
 */
static __always_inline void stack_sent(struct stack_memo *memo, __u64 epoch, struct ct_thread *t,
				       const struct ct_call_event *ev, bool emitted)
{
	__u32 n = ev->py.nframes + ev->py.nsame, shared = ev->py.nsame;

	if (!memo)
		return;
	if (!emitted || memo->next != epoch) {
		memo->held = 0;
		return;
	}
	if (!n)
		return;
	if (!memo->next)
		memo->next = ((__u64)bpf_get_smp_processor_id() + 1) << 40;
	memo->held = ++memo->next;
	memo->n = n;
	t->last_stack = memo->held;
	t->shared_run = shared ? t->shared_run + 1 : 0;
}

#endif
