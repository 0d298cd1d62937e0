/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The CPython frame walker: at a collective, the calling thread's Python
 * frames as (code object, instruction, first local) triples, innermost first.
 * Strings are never read here; user space resolves the pointers once and
 * caches them (user/python/).
 *
 * The thread's PyThreadState is found without the GIL (c10d releases it before
 * the collective, so the runtime's "current" thread state is someone else's):
 * the interpreter's thread list is searched for the entry whose
 * native_thread_id is this thread (3.11+) or whose thread_id, the pthread_t,
 * equals this thread's fs base (3.10: glibc's pthread_self() is the TCB that fs
 * points to). The result is cached per thread and re-validated at each use.
 */
#ifndef CT_PYSTACK_BPF_H
#define CT_PYSTACK_BPF_H

#include "commtrace/pyabi.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tgid */
	__type(value, struct ct_pyproc_bpf);
} pyprocs SEC(".maps");

/* tid → PyThreadState, validated before use. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} tstates SEC(".maps");

static __always_inline __u64 rd64(__u64 addr)
{
	__u64 v = 0;

	if (addr)
		bpf_probe_read_user(&v, sizeof(v), (void *)addr);
	return v;
}

/* Is ts the thread state of the current thread? */
static __always_inline bool tstate_is_mine(const struct ct_py_offsets *o, __u64 ts, __u32 tid,
					   __u64 fsbase)
{
	if (!ts)
		return false;
	if (o->tstate_native_tid != CT_PY_NONE)
		return rd64(ts + o->tstate_native_tid) == tid;
	if (o->tstate_thread_id != CT_PY_NONE)
		return rd64(ts + o->tstate_thread_id) == fsbase;
	return false;
}

struct find_ts {
	const struct ct_py_offsets *o;
	__u64 ts, found, fsbase;
	__u32 tid;
};

static long find_ts_cb(__u64 i, void *data)
{
	struct find_ts *f = data;

	if (!f->ts)
		return 1;
	if (tstate_is_mine(f->o, f->ts, f->tid, f->fsbase)) {
		f->found = f->ts;
		return 1;
	}
	f->ts = rd64(f->ts + f->o->tstate_next);
	return 0;
}

struct walk {
	const struct ct_py_offsets *o;
	struct ct_pystack *st;
	__u64 frame;
	__u64 cell_type;
};

/*
 * One read of the frame's head instead of one per field: 3.11+ keep code,
 * previous, instruction, owner and the first locals within 96 bytes. Fields
 * past it (3.10's f_localsplus at 352) are read on their own.
 */
#define CT_FRAME_HEAD 96
#define CT_HEAD_MASK  127 /* a power of two above the head, for the verifier */

static __always_inline __u64 head_u64(const __u8 *head, __u64 frame, __u16 off)
{
	__u64 v = 0;

	if (off <= CT_FRAME_HEAD - 8) {
		__builtin_memcpy(&v, head + (off & CT_HEAD_MASK), 8);
		return v;
	}
	return rd64(frame + off);
}

static long walk_cb(__u64 i, void *data)
{
	struct walk *w = data;
	const struct ct_py_offsets *o = w->o;
	struct ct_pystack *st = w->st;
	__u64 frame = w->frame;
	__u8 head[CT_HEAD_MASK + 1 + 8];
	__u32 n = st->nframes;
	__u64 self;

	if (!frame)
		return 1;
	if (n >= CT_PY_MAX_FRAMES) {
		st->flags |= CT_PYS_TRUNCATED;
		return 1;
	}
	if (bpf_probe_read_user(head, CT_FRAME_HEAD, (void *)frame)) {
		w->frame = 0;
		return 1;
	}
	w->frame = head_u64(head, frame, o->frame_previous);
	/* 3.12+: a shim frame on the C stack carries no Python code. */
	if (o->frame_owner < CT_FRAME_HEAD &&
	    head[o->frame_owner & CT_HEAD_MASK] == o->owner_cstack)
		return 0;
	n &= CT_PY_MAX_FRAMES - 1;
	st->frames[n].code = head_u64(head, frame, o->frame_code);
	st->frames[n].instr = head_u64(head, frame, o->frame_instr);
	if (o->instr_is_index) /* 3.10: an int */
		st->frames[n].instr = (__u64)(__s64)(__s32)st->frames[n].instr;
	self = head_u64(head, frame, o->frame_localsplus);
	/* Read now: the cell dies with the call (torch 2.x's Module._call_impl has one). */
	if (self && w->cell_type && rd64(self + o->object_type) == w->cell_type)
		self = rd64(self + o->object_type + 8); /* PyCellObject.ob_ref */
	st->frames[n].self = self;
	st->frames[n].arg1 = head_u64(head, frame, o->frame_localsplus + 8);
	st->nframes = n + 1;
	return 0;
}

/* Fills st (nframes 0 and a flag when there is no Python on this thread). */
static __always_inline void walk_python(__u32 tgid, __u32 tid, struct ct_pystack *st)
{
	struct ct_pyproc_bpf *pp = bpf_map_lookup_elem(&pyprocs, &tgid);
	struct task_struct *task;
	struct find_ts f = {};
	struct walk w = {};
	__u64 *cached, ts = 0, frame;

	st->nframes = 0;
	st->flags = 0;
	if (!pp)
		return;
	st->flags |= CT_PYS_PYTHON;
	task = bpf_get_current_task_btf();
	f.fsbase = BPF_CORE_READ(task, thread.fsbase);
	f.o = &pp->off;
	f.tid = tid;
	cached = bpf_map_lookup_elem(&tstates, &tid);
	if (cached && tstate_is_mine(&pp->off, *cached, tid, f.fsbase)) {
		ts = *cached;
	} else {
		f.ts = rd64(rd64(pp->runtime + pp->off.runtime_interp_head) +
			    pp->off.interp_threads_head);
		bpf_loop(CT_PY_MAX_THREADS, find_ts_cb, &f, 0);
		ts = f.found;
		if (ts)
			bpf_map_update_elem(&tstates, &tid, &ts, BPF_ANY);
	}
	if (!ts) {
		st->flags |= CT_PYS_NO_TSTATE; /* a thread that never ran Python */
		return;
	}
	frame = rd64(ts + pp->off.tstate_frame);
	if (pp->off.cframe_current_frame != CT_PY_NONE)
		frame = rd64(frame + pp->off.cframe_current_frame);
	w.o = &pp->off;
	w.cell_type = pp->cell_type;
	w.st = st;
	w.frame = frame;
	bpf_loop(CT_PY_MAX_FRAMES + 1, walk_cb, &w, 0);
	if (w.frame)
		st->flags |= CT_PYS_TRUNCATED;
}

#endif
