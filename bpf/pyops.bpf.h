/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * --ops: entries and exits of the Python functions the framework profiles name (module
 * calls, op dispatch, redistribution), seen at the interpreter's frame evaluation
 * entry. _PyEval_EvalFrameDefault(tstate, frame, throwflag) runs every frame that C
 * code enters (3.11+: calls of Python functions from Python are inlined and not seen;
 * 3.10: every frame). Filtering is here: a code object that user space marked SKIP
 * costs one map lookup and sends nothing. Exits pair with entries by the number of
 * activations on the thread.
 */
#ifndef CT_PYOPS_BPF_H
#define CT_PYOPS_BPF_H

/* (tgid, code object) → CT_OPV_*; LRU: code objects made at run time cannot fill it. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct ct_op_key);
	__type(value, __u8);
} op_codes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct ct_op_thread);
} op_threads SEC(".maps");

static struct ct_op_thread zero_op_thread;

static __always_inline int emit_op(__u8 type, __u64 pid_tgid, __u64 code, __u64 self, __u64 arg1,
				   __u8 unclassified)
{
	struct ct_op_event *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);

	if (!ev) {
		count_drop(CT_DROP_OPS);
		return 0;
	}
	fill_hdr(&ev->hdr, type, 0, pid_tgid, 0, bpf_ktime_get_ns());
	ev->code = code;
	ev->self = self;
	ev->arg1 = arg1;
	ev->unclassified = unclassified;
	__builtin_memset(ev->pad, 0, sizeof(ev->pad));
	bpf_ringbuf_submit(ev, wakeup_flag());
	return 0;
}

SEC("uprobe")
int ct_py_enter(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), frame = PT_REGS_PARM2(ctx), self, arg1;
	__u32 tid = (__u32)pid_tgid, n;
	struct ct_op_key key = {.tgid = pid_tgid >> 32};
	struct ct_pyproc_bpf *pp = bpf_map_lookup_elem(&pyprocs, &key.tgid);
	struct ct_op_thread *t;
	__u8 *verdict;

	if (!pp)
		return 0;
	t = bpf_map_lookup_elem(&op_threads, &tid);
	if (!t) {
		bpf_map_update_elem(&op_threads, &tid, &zero_op_thread, BPF_NOEXIST);
		t = bpf_map_lookup_elem(&op_threads, &tid);
		if (!t)
			return 0;
	}
	t->depth++;
	key.code = rd64(frame + pp->off.frame_code);
	verdict = bpf_map_lookup_elem(&op_codes, &key);
	if (verdict && *verdict == CT_OPV_SKIP)
		return 0;
	n = t->n;
	if (n >= CT_OPS_MAX_DEPTH) {
		count_drop(CT_DROP_OPS_DEPTH);
		return 0;
	}
	t->at[n & (CT_OPS_MAX_DEPTH - 1)].depth = t->depth;
	t->at[n & (CT_OPS_MAX_DEPTH - 1)].code = key.code;
	t->n = n + 1;
	self = rd64(frame + pp->off.frame_localsplus);
	if (self && pp->cell_type && rd64(self + pp->off.object_type) == pp->cell_type)
		self = rd64(self + pp->off.object_type + 8); /* PyCellObject.ob_ref */
	arg1 = rd64(frame + pp->off.frame_localsplus + 8);
	return emit_op(CT_EV_OP, pid_tgid, key.code, self, arg1, !verdict);
}

SEC("uretprobe")
int ct_py_exit(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid, n;
	struct ct_op_thread *t = bpf_map_lookup_elem(&op_threads, &tid);
	__u64 code;

	if (!t || !t->depth)
		return 0; /* a frame entered before the attach */
	n = t->n;
	if (n && n <= CT_OPS_MAX_DEPTH &&
	    t->at[(n - 1) & (CT_OPS_MAX_DEPTH - 1)].depth == t->depth) {
		code = t->at[(n - 1) & (CT_OPS_MAX_DEPTH - 1)].code;
		t->n = n - 1;
		t->depth--;
		return emit_op(CT_EV_OPEXIT, pid_tgid, code, 0, 0, 0);
	}
	t->depth--;
	return 0;
}

#endif
