// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * commtrace's kernel side: one entry and one return program serve every
 * uprobe; the attach cookie indexes the probe spec that user space wrote
 * before load, which says what the function is and how to read its arguments
 * (bpf/args.bpf.h). Process lifecycle comes from BTF tracepoints, library loads
 * from a uprobe on the dynamic linker's _dl_debug_state.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "commtrace/abi.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Follow fork(): children of traced processes become traced in the kernel, at once. */
const volatile __u8 ct_follow = 0;
/* Probes attached to files for every process (launch mode): keep the traced ones only. */
const volatile __u8 ct_filter = 0;
/*
 * Nothing is traced until user space opens the gate: by pid (-p), once every process named
 * is attached, so that all of them start at one instant and see the same collectives
 * (a collective in flight then leaves CT_EV_UNSEEN records for the diagnosis).
 */
volatile __u8 ct_gate = 0;
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CT_MAX_PROBES);
	__type(key, __u32);
	__type(value, struct ct_probe_spec);
} probe_specs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* resized by user space (--ringbuf) */
} events SEC(".maps");

/*
 * Call records do not wake the reader one by one: a wakeup per event costs the
 * traced job a context switch on a busy machine (measured: most of the added
 * cost per call). The reader polls every 100 ms; a wakeup is forced only when
 * this much is waiting, long before the buffer could fill. Process events and
 * calls with a Python stack wake the reader as usual.
 */
const volatile __u64 ct_wakeup_bytes = 1 << 20;

static __always_inline __u64 wakeup_flag(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= ct_wakeup_bytes
		   ? BPF_RB_FORCE_WAKEUP
		   : BPF_RB_NO_WAKEUP;
}

/*
 * Writes once to every page of the ring buffer before the first probe: run by user space
 * (BPF_PROG_TEST_RUN) as it loads, ctx the number of pages. Each record reserved is one
 * page (its 8-byte header included) and is discarded: the reader skips it. Where the
 * kernel's first write to a page of its mapping costs a fault in the hypervisor (a guest
 * whose page tables are shadowed), that fault was otherwise paid by the traced job inside
 * its probes over the first pass through the ring: on the torch 2.6 TP job, an entry
 * program took about twice as long for the first seconds of an 8 MiB ring.
 */
static long prefault_cb(__u64 i, void *ctx)
{
	void *r = bpf_ringbuf_reserve(&events, CT_RB_PAGE - BPF_RINGBUF_HDR_SZ, 0);

	if (!r)
		return 1;
	bpf_ringbuf_discard(r, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("syscall")
int ct_prefault(__u32 *pages)
{
	return bpf_loop(*pages, prefault_cb, NULL, 0);
}

/* Threads inside a traced call; LRU so that threads killed mid-call cannot fill it. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct ct_thread);
} threads SEC(".maps");

/* Traced processes (tgid → 1). Filters the file-wide probes and the tracepoints. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} traced SEC(".maps");

static __always_inline bool is_traced(__u64 pid_tgid)
{
	__u32 tgid = pid_tgid >> 32;

	return bpf_map_lookup_elem(&traced, &tgid) != NULL;
}

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct ct_comm_key);
	__type(value, struct ct_comm_info);
} comm_info SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CT_DROP_MAX);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

/*
 * A traced process's CPU time when its last thread exits (ns: its exited threads' and the
 * last one's), for --cost (user/cost.c): /proc/PID is gone by the time the tracer looks.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} exit_cpu SEC(".maps");

/* Scratch for summing counts[] arrays: too big for the 512-byte stack with the rest. */
struct ct_scratch {
	__u64 buf[64];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ct_scratch);
} scratch SEC(".maps");

static __always_inline void count_drop(__u32 reason)
{
	__u64 *c = bpf_map_lookup_elem(&drops, &reason);

	/* Atomic: on a preemptible kernel two threads may share this CPU's slot. */
	if (c)
		__sync_fetch_and_add(c, 1);
}

#include "args.bpf.h"
#include "pystack.bpf.h"

static __always_inline void fill_hdr(struct ct_hdr *h, __u8 type, __u32 probe_id, __u64 pid_tgid,
				     __u32 depth, __u64 ts)
{
	h->type = type;
	h->depth = depth;
	h->probe_id = probe_id;
	h->pid = pid_tgid >> 32;
	h->tid = (__u32)pid_tgid;
	h->cpu = bpf_get_smp_processor_id();
	h->ts = ts;
}

#include "capture.bpf.h"

static __always_inline int emit_dlopen(__u64 pid_tgid, __u32 probe_id)
{
	__u32 tgid = pid_tgid >> 32;
	struct ct_proc_event *ev;

	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		count_drop(CT_DROP_RINGBUF_PROC);
		return 0;
	}
	__builtin_memset(ev, 0, sizeof(*ev));
	fill_hdr(&ev->hdr, CT_EV_DLOPEN, probe_id, pid_tgid, 0, bpf_ktime_get_ns());
	bpf_get_current_comm(ev->comm, sizeof(ev->comm));
	/* New libraries are attached at once: the sooner, the fewer calls missed. */
	bpf_ringbuf_submit(ev, BPF_RB_FORCE_WAKEUP);
	return 0;
}

/*
 * A bare header: a backward pass (CT_K_BACKWARD_RUN) began or ended on the thread, outside
 * the nesting of traced calls, so that the collectives inside stay outermost; or a return
 * whose entry came before the gate (CT_EV_UNSEEN).
 */
static __always_inline int emit_bare(__u64 pid_tgid, __u32 probe_id, __u8 type)
{
	struct ct_hdr *h = bpf_ringbuf_reserve(&events, sizeof(*h), 0);

	if (!h) {
		count_drop(CT_DROP_RINGBUF);
		return 0;
	}
	fill_hdr(h, type, probe_id, pid_tgid, 0, bpf_ktime_get_ns());
	bpf_ringbuf_submit(h, wakeup_flag());
	return 0;
}

static struct ct_thread zero_thread;

static __always_inline struct ct_thread *thread_state(__u32 tid)
{
	struct ct_thread *t = bpf_map_lookup_elem(&threads, &tid);

	if (t)
		return t;
	bpf_map_update_elem(&threads, &tid, &zero_thread, BPF_NOEXIST);
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t)
		count_drop(CT_DROP_THREADS);
	return t;
}

struct pop_ctx {
	struct ct_thread *t;
	__u64 sp;
};

static long pop_cb(__u64 i, void *data)
{
	struct pop_ctx *c = data;
	__u32 depth = c->t->depth;

	if (depth == 0 || depth > CT_MAX_DEPTH)
		return 1;
	if (c->t->frames[(depth - 1) & (CT_MAX_DEPTH - 1)].sp > c->sp)
		return 1;
	c->t->depth = depth - 1;
	count_drop(CT_DROP_UNPAIRED);
	return 0;
}

/*
 * Frames whose stack pointer lies at or below the current one were left by an
 * unwind (C++ exception, longjmp) that skipped their return probe: the kernel
 * drops those return instances, so the frames would never be popped. Popped in
 * t->depth by a bpf_loop: a loop here, each exit with its own depth, had the verifier
 * go through all that follows once per depth.
 */
static __always_inline __u32 pop_stale(struct ct_thread *t, __u64 sp)
{
	struct pop_ctx c = {.t = t, .sp = sp};

	bpf_loop(CT_MAX_DEPTH, pop_cb, &c, 0);
	return t->depth;
}

/*
 * A record of full bytes whose last member is py, sent with the frames it holds. A Python
 * stack with a code object user space has not resolved yet is resolved by reading the live
 * process: that record must not wait for the next poll, by which time the process may be
 * gone. Forced: the default wakes the reader only if nothing unread is before this record,
 * and batched returns usually are. A stack of known code objects (checked at capture) waits
 * like any other record.
 */
static __always_inline long output_with_stack(void *ev, __u64 full, const struct ct_pystack *py)
{
	__u64 n = py->nframes, size;

	if (n > CT_PY_MAX_FRAMES)
		n = CT_PY_MAX_FRAMES;
	size = full - sizeof(struct ct_pyframe_raw) * (CT_PY_MAX_FRAMES - n);
	asm volatile("" : "+r"(size));
	if (size > full)
		size = full;
	return bpf_ringbuf_output(&events, ev, size,
				  n && !(py->flags & CT_PYS_KNOWN) ? BPF_RB_FORCE_WAKEUP
								   : wakeup_flag());
}

#include "stackshare.bpf.h"

SEC("uprobe")
int ct_entry(struct pt_regs *ctx)
{
	__u32 probe_id = (__u32)bpf_get_attach_cookie(ctx), zero = 0, depth;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u64 ts = bpf_ktime_get_ns(), sp = PT_REGS_SP(ctx), epoch;
	const struct ct_probe_spec *spec;
	struct stack_memo *memo;
	struct ct_call_event *ev;
	struct ct_vals *v;
	struct ct_frame *f;
	struct ct_thread *t;
	bool emitted;

	if (ct_filter && !is_traced(pid_tgid))
		return 0;
	spec = bpf_map_lookup_elem(&probe_specs, &probe_id);
	if (!spec)
		return 0;
	if (spec->kind == CT_K_DL_STATE)
		return emit_dlopen(pid_tgid, probe_id);
	if (!ct_gate)
		return 0;
	if (spec->kind == CT_K_BACKWARD_RUN)
		return emit_bare(pid_tgid, probe_id, CT_EV_BACKWARD);

	t = thread_state((__u32)pid_tgid);
	ev = bpf_map_lookup_elem(&callbuf, &zero);
	memo = bpf_map_lookup_elem(&stackmemo, &zero);
	if (!t || !ev)
		return 0;
	depth = pop_stale(t, sp);
	epoch = memo ? memo->next : 0;

	fill_hdr(&ev->hdr, CT_EV_CALL, probe_id, pid_tgid, depth, ts);
	bpf_get_current_comm(ev->comm, sizeof(ev->comm));
	decode_args(ctx, probe_id, pid_tgid >> 32, spec->n_order);
	v = bpf_map_lookup_elem(&decoded, &zero);
	if (v)
		__builtin_memcpy(ev->val, v->v, sizeof(ev->val));
	else
		__builtin_memset(ev->val, 0, sizeof(ev->val));
	if (spec->flags & CT_PF_POINT) /* just after a call: its result */
		ev->val[CT_V_OUT] = PT_REGS_RC(ctx);
	/* The stack of the outermost traced call says who asked; nested ones share it. */
	if (depth == 0) {
		__u32 same = walk_python(pid_tgid >> 32, (__u32)pid_tgid, sp, &ev->py,
					 last_frames(memo, t), CT_LC_CALL);

		/* what naming it reads is copied now, or the reader must come at once */
		if ((ev->py.flags & CT_PYS_KNOWN) && !capture(pid_tgid, ts))
			ev->py.flags &= ~CT_PYS_KNOWN;
		share_frames(memo, epoch, same, ev);
	} else {
		ev->py.nframes = ev->py.flags = ev->py.nguess = ev->py.nsame = 0;
	}
	emitted = output_with_stack(ev, sizeof(*ev), &ev->py) == 0;
	if (!emitted)
		count_drop(CT_DROP_RINGBUF);
	if (depth == 0)
		stack_sent(memo, epoch, t, ev, emitted);
	if (spec->flags & CT_PF_POINT)
		return 0; /* no return to wait for */

	if (depth < CT_MAX_DEPTH) {
		__u32 d = depth;

		/* Hide the bound from clang, or it drops the mask the verifier needs. */
		asm volatile("" : "+r"(d));
		f = &t->frames[d & (CT_MAX_DEPTH - 1)];
		f->ts = ts;
		f->sp = sp;
		f->probe_id = probe_id;
		f->out_ptr = ev->val[CT_V_OUT];
		f->size = (__u32)ev->val[CT_V_COMM_SIZE];
		f->rank = (__u32)ev->val[CT_V_COMM_RANK];
		f->emitted = emitted;
	} else {
		count_drop(CT_DROP_DEPTH);
	}
	t->depth = depth + 1;
	return 0;
}

SEC("uretprobe")
int ct_exit(struct pt_regs *ctx)
{
	__u32 probe_id = (__u32)bpf_get_attach_cookie(ctx);
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u64 ts = bpf_ktime_get_ns();
	const struct ct_probe_spec *spec;
	struct ct_ret_event *ev;
	struct ct_frame *f;
	struct ct_thread *t;
	__u32 tid = (__u32)pid_tgid, depth;
	__u64 out = 0;

	if (ct_filter && !is_traced(pid_tgid))
		return 0;
	spec = bpf_map_lookup_elem(&probe_specs, &probe_id);
	if (!spec)
		return 0;
	if (!ct_gate)
		return 0;
	if (spec->kind == CT_K_BACKWARD_RUN)
		return emit_bare(pid_tgid, probe_id, CT_EV_BACKWARD_END);
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t || t->depth == 0) {
		/* Entered before the gate opened: in flight when tracing began. */
		count_drop(CT_DROP_UNPAIRED);
		return emit_bare(pid_tgid, probe_id, CT_EV_UNSEEN);
	}
	/* After `ret` the stack pointer is 8 above its value at entry. */
	depth = pop_stale(t, PT_REGS_SP(ctx) - 16);
	if (depth == 0) {
		t->depth = 0;
		count_drop(CT_DROP_UNPAIRED);
		return 0;
	}
	depth--;
	t->depth = depth;
	if (depth >= CT_MAX_DEPTH)
		return 0;
	f = &t->frames[depth & (CT_MAX_DEPTH - 1)];
	if (f->probe_id != probe_id) {
		count_drop(CT_DROP_UNPAIRED);
		return 0;
	}

	if ((spec->flags & CT_PF_OUT_PTR) && f->out_ptr)
		bpf_probe_read_user(&out, sizeof(out), (void *)f->out_ptr);
	if ((spec->flags & CT_PF_COMM_INIT) && out) {
		struct ct_comm_key key = {.tgid = pid_tgid >> 32, .comm = out};
		struct ct_comm_info info = {.size = f->size, .rank = f->rank};

		bpf_map_update_elem(&comm_info, &key, &info, BPF_ANY);
	}
	if (!f->emitted)
		return 0; /* its entry was dropped and counted; a lone return helps nobody */

	ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		count_drop(CT_DROP_RINGBUF_RET);
		return 0;
	}
	fill_hdr(&ev->hdr, CT_EV_RET, probe_id, pid_tgid, depth, ts);
	ev->duration = ts - f->ts;
	ev->retval = PT_REGS_RC(ctx);
	ev->out = out;
	bpf_ringbuf_submit(ev, wakeup_flag());
	return 0;
}

static __always_inline int emit_proc(__u8 type, struct task_struct *task, __u32 child, int code)
{
	struct ct_proc_event *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	__u64 pid_tgid;

	if (!ev) {
		count_drop(CT_DROP_RINGBUF_PROC);
		return 0;
	}
	__builtin_memset(ev, 0, sizeof(*ev));
	pid_tgid = ((__u64)BPF_CORE_READ(task, tgid) << 32) | (__u32)BPF_CORE_READ(task, pid);
	fill_hdr(&ev->hdr, type, 0, pid_tgid, 0, bpf_ktime_get_ns());
	ev->child = child;
	ev->exit_code = code;
	BPF_CORE_READ_STR_INTO(&ev->comm, task, comm);
	bpf_ringbuf_submit(ev, BPF_RB_FORCE_WAKEUP);
	return 0;
}

/* --cost: a probe with nothing to do, on the tracer itself, to measure what one hit costs. */
SEC("uprobe")
int ct_calib(struct pt_regs *ctx)
{
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(ct_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid), ctgid = BPF_CORE_READ(child, tgid), one = 1;

	if (ptgid == ctgid || !bpf_map_lookup_elem(&traced, &ptgid))
		return 0; /* a new thread, or not ours */
	if (!ct_follow)
		return 0;
	bpf_map_update_elem(&traced, &ctgid, &one, BPF_ANY);
	return emit_proc(CT_EV_FORK, parent, ctgid, 0);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(ct_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);

	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	return emit_proc(CT_EV_EXEC, p, 0, 0);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(ct_proc_exit, struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid), tid = BPF_CORE_READ(p, pid);
	int code;

	bpf_map_delete_elem(&threads, &tid);
	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	/* do_exit() decrements signal->live before this tracepoint: 0 means the last thread. */
	if (BPF_CORE_READ(p, signal, live.counter) != 0)
		return 0;
	code = BPF_CORE_READ(p, exit_code);
	bpf_map_delete_elem(&traced, &tgid);
	{
		__u64 cpu = BPF_CORE_READ(p, signal, sum_sched_runtime) +
			    BPF_CORE_READ(p, se.sum_exec_runtime);

		bpf_map_update_elem(&exit_cpu, &tgid, &cpu, BPF_ANY);
	}
	return emit_proc(CT_EV_EXIT, p, 0, code);
}
#include "pyops.bpf.h"

/*
 * A code object of a traced process died (the interpreter's code_dealloc, PyCode_Type's
 * tp_dealloc): what was known about its address is forgotten at once, so that a code object
 * made there next is never taken for it (CT_PYC_HELD). Uprobe programs are not skipped for
 * recursion as kprobe ones can be: no free goes unseen while the probe is attached.
 */
SEC("uprobe")
int ct_code_free(struct pt_regs *ctx)
{
	struct ct_pycode_key k = {.tgid = bpf_get_current_pid_tgid() >> 32,
				  .code = PT_REGS_PARM1(ctx)};
	struct ct_op_key ok = {.tgid = k.tgid, .code = k.code};

	bpf_map_delete_elem(&pycodes, &k);
	bpf_map_delete_elem(&op_codes, &ok);
	/* After the delete: a walk copying the entry before it made its copy at the old count.
	 * Every deallocation: a held entry the LRU evicted has no delete to tell of it. */
	__sync_fetch_and_add(&ct_code_gen, 1);
	return 0;
}
