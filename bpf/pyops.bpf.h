/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * --ops: entries and exits of the Python functions the framework profiles name (module
 * calls, op dispatch, redistribution), seen at the interpreter's frame evaluation
 * entry. _PyEval_EvalFrameDefault(tstate, frame, throwflag) runs every frame that C
 * code enters (3.11+: calls of Python functions from Python are inlined and not seen;
 * 3.10: every frame). Filtering is here: a code object that user space marked SKIP
 * costs one map lookup and sends nothing. Exits pair with kept entries by the stack
 * pointer (struct ct_op_thread). Where the kernel has uprobe sessions, entry and return
 * are one program (ct_py_session) whose return runs for kept calls only; else a probe
 * and a return probe see every frame (ct_py_enter, ct_py_exit). A code object marked WRAP (a
 * functools.wraps wrapper C enters in place of what it wraps: torch 2.x's _disable_dynamo around
 * DTensor.__torch_dispatch__) is judged by the frame's function object instead, the
 * wrapped function's locals being the items of the wrapper's args tuple.
 *
 * On torch 2.x the frames are not probed (every frame C enters cost a breakpoint, about
 * 30 of them per op): ops are seen where libtorch_python calls a tensor subclass's
 * __torch_dispatch__ (ct_dispatch, ct_dispatch_session: one hit per op, sending the op,
 * its arguments and the Python stack, from which user space places it under its modules)
 * and the backward of a Python autograd Function where it begins (ct_gradfn). Their
 * returns pair as the frames' do.
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

/* What an entry sends besides its code: the frame's first two locals (a wrapper's: its args
 * tuple's first two items) and how the code was judged. */
struct op_entry {
	__u64 self, arg1, func;
	__u8 unclassified, wrapped, late;
};

static __always_inline void fill_op(struct ct_op_event *ev, __u8 type, __u64 pid_tgid, __u64 code,
				    const struct op_entry *e, __u8 has_vals, __u64 ts)
{
	fill_hdr(&ev->hdr, type, 0, pid_tgid, 0, ts);
	ev->code = code;
	ev->self = e->self;
	ev->arg1 = e->arg1;
	ev->func = e->func;
	ev->unclassified = e->unclassified;
	ev->has_vals = has_vals;
	ev->wrapped = e->wrapped;
	ev->late = e->late;
	__builtin_memset(ev->pad, 0, sizeof(ev->pad));
}

static __always_inline int emit_op(__u8 type, __u64 pid_tgid, __u64 code, const struct op_entry *e)
{
	struct ct_op_event *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);

	if (!ev) {
		count_drop(CT_DROP_OPS);
		return 0;
	}
	fill_op(ev, type, pid_tgid, code, e, 0, bpf_ktime_get_ns());
	bpf_ringbuf_submit(ev, wakeup_flag());
	return 0;
}

/* The items of a tuple (at entry the args tuple; at exit a returned tuple), else obj. */
static __always_inline void describe_vals(const struct ct_pyproc_bpf *pp, __u64 obj, bool tuple,
					  struct ct_op_vals *vs)
{
	__u64 items = obj + pp->vals.tuple_items;
	__u32 n = 1;

	if (tuple) {
		n = (__u32)rd64(obj + pp->vals.var_size);
		vs->tuple = 1;
	} else if (!obj) {
		n = 0; /* an exception */
	}
	vs->total = n;
	for (int i = 0; i < CT_OP_VALS; i++) {
		if (i >= n)
			break;
		describe_val(pp, tuple ? rd64(items + 8 * i) : obj, &vs->v[i]);
		vs->n = i + 1;
	}
}

static __always_inline int emit_op_vals(const struct ct_pyproc_bpf *pp, __u8 type, __u64 pid_tgid,
					__u64 code, const struct op_entry *e, __u64 obj, bool tuple)
{
	struct ct_op_vals_event *ev;
	__u64 ts = bpf_ktime_get_ns();

	/* its DTensors' placements as they are now, in a record before this one */
	capture_vals(pid_tgid, ts, obj, tuple);
	ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		count_drop(CT_DROP_OPS);
		return 0;
	}
	fill_op(&ev->op, type, pid_tgid, code, e, 1, ts);
	__builtin_memset(&ev->vals, 0, sizeof(ev->vals));
	describe_vals(pp, obj, tuple, &ev->vals);
	bpf_ringbuf_submit(ev, wakeup_flag());
	return 0;
}

/* Close the kept calls on top of t entered at sp <= bound: their frames have returned,
 * their exits unseen (the kernel's uretprobe nesting limit). */
static __always_inline void close_late(struct ct_op_thread *t, __u64 pid_tgid, __u64 bound)
{
	struct op_entry e = {.late = CT_OP_LATE};

	for (int i = 0; i < CT_OPS_MAX_DEPTH; i++) {
		__u32 n = t->n;

		if (!n || n > CT_OPS_MAX_DEPTH ||
		    t->at[(n - 1) & (CT_OPS_MAX_DEPTH - 1)].sp > bound)
			return;
		t->n = n - 1;
		emit_op(CT_EV_OPEXIT, pid_tgid, t->at[(n - 1) & (CT_OPS_MAX_DEPTH - 1)].code, &e);
	}
}

/*
 * A kept call entered at sp, with code, pushed on the thread's kept calls (its exit, pushed
 * the same sp, describes its return value if vals); false when there is no room (counted).
 */
static __always_inline bool push_kept(__u64 pid_tgid, __u64 sp, __u64 code, bool vals)
{
	__u32 tid = (__u32)pid_tgid, n;
	struct ct_op_thread *t = bpf_map_lookup_elem(&op_threads, &tid);

	if (!t) {
		bpf_map_update_elem(&op_threads, &tid, &zero_op_thread, BPF_NOEXIST);
		t = bpf_map_lookup_elem(&op_threads, &tid);
		if (!t)
			return false;
	}
	close_late(t, pid_tgid, sp); /* a kept call at or above this frame has returned */
	n = t->n;
	if (n >= CT_OPS_MAX_DEPTH) {
		count_drop(CT_DROP_OPS_DEPTH);
		return false;
	}
	t->at[n & (CT_OPS_MAX_DEPTH - 1)].sp = sp;
	t->at[n & (CT_OPS_MAX_DEPTH - 1)].vals = vals;
	t->at[n & (CT_OPS_MAX_DEPTH - 1)].code = code;
	t->n = n + 1;
	return true;
}

/* A frame entered: true when its call is kept, and its exit wanted. */
static __always_inline bool py_enter(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), frame = PT_REGS_PARM2(ctx), args = 0,
	      nargs = 0, sp = PT_REGS_SP(ctx);
	__u64 locals;
	struct ct_op_key key = {.tgid = pid_tgid >> 32};
	struct ct_pyproc_bpf *pp = bpf_map_lookup_elem(&pyprocs, &key.tgid);
	struct op_entry e = {};
	__u8 *verdict, argidx;

	if (!ct_gate)
		return false;
	if (!pp)
		return false;
	locals = frame + pp->off.frame_localsplus;
	key.code = rd64(frame + pp->off.frame_code);
	verdict = bpf_map_lookup_elem(&op_codes, &key);
	if (verdict && (*verdict & CT_OPV_WRAP)) {
		/* def inner(*args, **kwargs): judged by its function, read through its args */
		if (pp->off.frame_func == CT_PY_NONE)
			return false;
		key.code = rd64(frame + pp->off.frame_func);
		args = rd64(locals);
		if (!key.code || !is_tuple(pp, args))
			return false;
		nargs = rd64(args + pp->vals.var_size);
		e.wrapped = CT_OP_WRAPPED;
		verdict = bpf_map_lookup_elem(&op_codes, &key);
	}
	if (verdict && *verdict == CT_OPV_SKIP)
		return false;
	argidx = verdict ? *verdict >> 4 : 0;
	if (!push_kept(pid_tgid, sp, key.code, argidx != 0))
		return false;
	e.unclassified = !verdict;
	if (e.wrapped) {
		e.self = tuple_item(pp, args, nargs, 0);
		e.arg1 = tuple_item(pp, args, nargs, 1);
	} else {
		e.self = uncell(rd64(locals), pp->off.object_type, pp->cell_type);
		e.arg1 = rd64(locals + 8);
	}
	if (!verdict && !e.wrapped && pp->off.frame_func != CT_PY_NONE) {
		/* Not judged yet: in case it is a wrapper's, send its args' items and function. */
		args = rd64(locals);
		if (is_tuple(pp, args)) {
			e.func = rd64(frame + pp->off.frame_func);
			e.wrapped = CT_OP_MAYBE_WRAPPER;
			emit_op_vals(pp, CT_EV_OP, pid_tgid, key.code, &e, args, true);
			return true;
		}
	}
	if (argidx) {
		__u64 vals = e.wrapped ? tuple_item(pp, args, nargs, (argidx - 1) & 15)
				       : rd64(locals + 8 * ((argidx - 1) & 15));

		emit_op_vals(pp, CT_EV_OP, pid_tgid, key.code, &e, vals, is_tuple(pp, vals));
		return true;
	}
	emit_op(CT_EV_OP, pid_tgid, key.code, &e);
	return true;
}

/* A kept frame returned, or (a return probe on every frame) any frame. */
static __always_inline void py_exit(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), sp = PT_REGS_SP(ctx) - 8; /* the entry's */
	__u32 tid = (__u32)pid_tgid, n, tgid = pid_tgid >> 32;
	struct ct_op_thread *t = bpf_map_lookup_elem(&op_threads, &tid);
	struct op_entry e = {};
	struct ct_pyproc_bpf *pp;
	__u64 code, ret;

	if (!ct_gate)
		return;
	if (!t || !t->n)
		return; /* no kept call in flight */
	close_late(t, pid_tgid, sp - 1);
	n = t->n;
	if (!n || n > CT_OPS_MAX_DEPTH || t->at[(n - 1) & (CT_OPS_MAX_DEPTH - 1)].sp != sp)
		return; /* a frame not kept, or entered before the attach */
	code = t->at[(n - 1) & (CT_OPS_MAX_DEPTH - 1)].code;
	t->n = n - 1;
	pp = t->at[(n - 1) & (CT_OPS_MAX_DEPTH - 1)].vals ? bpf_map_lookup_elem(&pyprocs, &tgid)
							  : NULL;
	if (pp) {
		ret = PT_REGS_RC(ctx); /* the PyObject * returned, NULL on an exception */
		emit_op_vals(pp, CT_EV_OPEXIT, pid_tgid, code, &e, ret, is_tuple(pp, ret));
		return;
	}
	emit_op(CT_EV_OPEXIT, pid_tgid, code, &e);
}

/* torch 2.x: an op record with its stack is built here, then copied to the ring. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ct_dispatch_event);
} dispbuf SEC(".maps");

/* Whether the walk just made found a redistribution whose specs capture() would copy. */
static __always_inline bool walk_wants_capture(void)
{
	__u32 zero = 0;
	struct walk_state *ws = bpf_map_lookup_elem(&walkbuf, &zero);

	return ws && ws->cap_spec[0];
}

/*
 * torch 2.x: handle_torch_function_no_python_arg_parser entered (abi.h, struct
 * ct_dispatch_event): the op, its arguments and the Python stack, sent; true when its
 * return is wanted. Its return is a kept call's (py_exit), paired by the stack pointer.
 */
static __always_inline bool dispatch_enter(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), sp = PT_REGS_SP(ctx), ts;
	__u64 overloaded = PT_REGS_PARM1(ctx), args = PT_REGS_PARM3(ctx), op = ctx->r9;
	__u32 tgid = pid_tgid >> 32, zero = 0, which = 0;
	struct ct_pyproc_bpf *pp = bpf_map_lookup_elem(&pyprocs, &tgid);
	struct ct_dispatch_event *ev = bpf_map_lookup_elem(&dispbuf, &zero);
	struct op_entry e = {};
	bool tuple;

	if (!ct_gate || !pp || !ev)
		return false;
	/* the 8th argument: [sp] is the return address, the 7th at sp + 8 */
	bpf_probe_read_user(&which, sizeof(which), (void *)(sp + 16));
	if (!push_kept(pid_tgid, sp, op, true))
		return false;
	ts = bpf_ktime_get_ns();
	tuple = is_tuple(pp, args);
	/* the class whose __torch_dispatch__ runs: the first overloaded argument's */
	e.self = rd64(rd64(overloaded) + pp->off.object_type);
	e.arg1 = which;
	fill_op(&ev->op.op, CT_EV_DISPATCH, pid_tgid, op, &e, 1, ts);
	capture_vals(pid_tgid, ts, args, tuple); /* its DTensors' placements, sent first */
	__builtin_memset(&ev->op.vals, 0, sizeof(ev->op.vals));
	describe_vals(pp, args, tuple, &ev->op.vals);
	walk_python(tgid, (__u32)pid_tgid, sp, &ev->py, 0, CT_LC_OP);
	/* a redistribution's specs are read live: the capture above has this record's time */
	if (walk_wants_capture())
		ev->py.flags &= ~CT_PYS_KNOWN;
	if (output_with_stack(ev, sizeof(*ev), &ev->py))
		count_drop(CT_DROP_OPS);
	return true;
}

/* An entry probe; its return probe is ct_py_exit. */
SEC("uprobe")
int ct_dispatch(struct pt_regs *ctx)
{
	dispatch_enter(ctx);
	return 0;
}

/*
 * torch 2.x: torch::autograd::PyNode::apply(variable_list &&) entered. It returns a vector:
 * the address to build it at comes first, `this` second.
 */
SEC("uprobe")
int ct_gradfn(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), node = PT_REGS_PARM2(ctx);
	__u32 tgid = pid_tgid >> 32;
	struct ct_pyproc_bpf *pp = bpf_map_lookup_elem(&pyprocs, &tgid);
	struct ct_gradfn_event *ev;
	__u32 off;

	if (!ct_gate || !pp)
		return 0;
	off = pp->pynode_obj;
	if (off) {
		ev = bpf_ringbuf_reserve(&events, CT_GRADFN_EVENT_SHORT, 0);
		if (!ev)
			goto drop;
		ev->ctx = rd64(node + (off & 0xfff8));
	} else {
		ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
		if (!ev)
			goto drop;
		ev->ctx = 0;
		if (bpf_probe_read_user(ev->words, sizeof(ev->words), (void *)node))
			__builtin_memset(ev->words, 0, sizeof(ev->words));
	}
	fill_hdr(&ev->hdr, CT_EV_GRADFN, 0, pid_tgid, 0, bpf_ktime_get_ns());
	ev->node = node;
	bpf_ringbuf_submit(ev, wakeup_flag());
	return 0;
drop:
	count_drop(CT_DROP_OPS);
	return 0;
}

/* The fallback: an entry probe and a return probe on every frame. */
SEC("uprobe")
int ct_py_enter(struct pt_regs *ctx)
{
	py_enter(ctx);
	return 0;
}

SEC("uretprobe")
int ct_py_exit(struct pt_regs *ctx)
{
	py_exit(ctx);
	return 0;
}

extern bool bpf_session_is_return(void) __ksym __weak;

/*
 * Entry and return as one uprobe session (Linux 6.13+, attached with
 * BPF_TRACE_UPROBE_SESSION): the return runs only where the entry returned 0, for a kept
 * call. A frame not kept, nearly every frame, then costs one breakpoint and no return
 * probe (no return instance, no trampoline, no second program).
 */
SEC("uprobe")
int ct_py_session(struct pt_regs *ctx)
{
	if (bpf_session_is_return()) {
		py_exit(ctx);
		return 0;
	}
	return py_enter(ctx) ? 0 : 1;
}

/* torch 2.x: handle_torch_function_no_python_arg_parser as a uprobe session. */
SEC("uprobe")
int ct_dispatch_session(struct pt_regs *ctx)
{
	if (bpf_session_is_return()) {
		py_exit(ctx);
		return 0;
	}
	return dispatch_enter(ctx) ? 0 : 1;
}

#endif
