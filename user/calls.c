// SPDX-License-Identifier: MIT
/*
 * Calls, from their records to everything that consumes them: a call is counted (with its
 * bytes) at its entry, so that a call that never returns (a hang, a killed rank) is still
 * counted, and its duration is added at its return. Here entries pair with returns, the
 * per-function statistics and a process' rank from its communicators are kept, the Python
 * stack becomes a tree node (and a recording frame), and the diagnosis and the Chrome
 * export get one description of the call each.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "calls.h"
#include "diag/diag.h"
#include "export/chrome.h"
#include "laststack.h"
#include "pystacks.h"
#include "record/record.h"
#include "session.h"
#include "util/log.h"

/*
 * A process whose environment names no rank takes its rank (and world size) in the
 * largest communicator seen: the world, once it has been used.
 */
static void comm_rank(struct ct_proc *p, const struct ct_func *fn, const __u64 *val)
{
	int32_t size = (int32_t)val[CT_V_COMM_SIZE], rank = (int32_t)val[CT_V_COMM_RANK];

	if ((p->rank >= 0 && !p->comm_world) || !ct_func_reads(fn, CT_V_COMM_SIZE) ||
	    !ct_func_reads(fn, CT_V_COMM_RANK))
		return;
	if (size <= p->comm_world || size > CT_MAX_COMM_SIZE || rank < 0 || rank >= size)
		return;
	p->rank = rank;
	p->world = size;
	p->comm_world = size;
}

static struct ct_fstats *fstats(struct ct_proc *p, uint32_t id)
{
	if (!p->stats[id])
		p->stats[id] = calloc(1, sizeof(struct ct_fstats));
	return p->stats[id];
}

static int pending_slot(struct ct_proc *p, pid_t tid, bool add)
{
	int free_slot = -1;

	for (int i = 0; i < CT_PENDING_THREADS; i++) {
		if (p->pending[i].tid == tid)
			return i;
		if (!p->pending[i].tid && free_slot < 0)
			free_slot = i;
	}
	if (!add)
		return -1;
	/* More threads in collectives at once than slots: one duration goes unrecorded. */
	return free_slot >= 0 ? free_slot : (int)(tid % CT_PENDING_THREADS);
}

/* A call's entry: its thread's slot remembers what the return needs. */
static void pend_call(struct ct_proc *p, const struct ct_call *k)
{
	const struct ct_call_event *ev = k->ev;
	int slot = pending_slot(p, ev->hdr.tid, true), depth = ev->hdr.depth;

	if (p->pending[slot].tid != (pid_t)ev->hdr.tid ||
	    depth == 0) { /* a new thread, a new call */
		memset(&p->pending[slot], 0, sizeof(p->pending[slot]));
		p->pending[slot].node = -1;
	}
	p->pending[slot].tid = ev->hdr.tid;
	if (depth == 0)
		p->pending[slot].node = k->node;
	if (depth < CT_MAX_DEPTH) {
		p->pending[slot].at[depth].probe1 = ev->hdr.probe_id + 1;
		p->pending[slot].at[depth].group = (int32_t)ev->val[CT_V_COMM_SIZE];
		p->pending[slot].at[depth].sent = k->sent;
		p->pending[slot].at[depth].recv = k->recv;
	}
}

/* A call's return: its bandwidth (bandwidth.h) and its tree node's duration. */
static void pend_ret(struct ct_proc *p, const struct ct_libdesc *d, const struct ct_func *fn,
		     struct ct_fstats *st, const struct ct_ret_event *ev)
{
	int slot = pending_slot(p, ev->hdr.tid, false), depth = ev->hdr.depth;
	enum ct_bw_reason why = CT_BW_NO_DURATION; /* its entry was not seen */
	struct ct_bw bw;

	if (slot < 0)
		goto out;
	if (depth < CT_MAX_DEPTH &&
	    p->pending[slot].at[depth].probe1 == (uint32_t)ev->hdr.probe_id + 1) {
		struct ct_pending_call *a = &p->pending[slot].at[depth];

		why = ct_bandwidth(d, fn, a->sent, a->recv, a->group, ev->duration, &bw);
		a->probe1 = 0;
	}
	if (depth == 0) {
		if (p->pending[slot].node >= 0)
			ct_tree_set_duration(&p->tree, p->pending[slot].node, ev->duration);
		p->pending[slot].tid = 0;
	}
out:
	if (why == CT_BW_OK) {
		ct_hist_add(&st->algbw, (uint64_t)bw.algbw);
		ct_hist_add(&st->busbw, (uint64_t)bw.busbw);
		st->bwb[ct_bw_bucket((uint64_t)bw.busbw)]++; /* --metrics' histogram */
	} else {
		st->bw_none[why]++;
	}
}

/* The diagnosis' view of a call (user/diag/diag.h), with its stack from its tree node. */
static void diag_call(struct ct_session *s, const struct ct_call *k)
{
	const struct ct_call_event *ev = k->ev;
	const struct ct_func *fn = k->fn;
	struct ct_diag_call c = {
	    .pid = ev->hdr.pid,
	    .tid = ev->hdr.tid,
	    .rank = k->p->rank,
	    .lib = k->lib->lib,
	    .kind = fn->kind,
	    .depth = ev->hdr.depth,
	    .function = fn->name,
	    .comm = ev->val[CT_V_COMM],
	    .comm_size = (int32_t)ev->val[CT_V_COMM_SIZE],
	    .comm_rank = (int32_t)ev->val[CT_V_COMM_RANK],
	    .has_leader = (ev->val[CT_V_GROUP] >> 32) == 1,
	    .leader = (int32_t)(uint32_t)ev->val[CT_V_GROUP],
	    .has_count = fn->sent.on && fn->sent.count == CT_V_COUNT,
	    .count = ev->val[CT_V_COUNT],
	    .dtype = k->dtype,
	    .bytes = k->sent > k->recv ? k->sent : k->recv,
	    .ts = ev->hdr.ts,
	    .c10d = k->lib->lib == CT_LIB_GLOO && ct_proc_has_lib(k->p, CT_LIB_C10D),
	};

	if (k->node >= 0 && k->node < k->p->tree.n) {
		c.stack = k->p->tree.nodes[k->node].stack;
		c.nstack = k->p->tree.nodes[k->node].nstack;
	}
	ct_diag_call(s->diag, &c);
}

/*
 * The helper's tensor is read from user space, a few ms after the call: it may have been
 * freed since (a redistribution's temporary). Its shape is kept only if it has the element
 * count the library call itself was given.
 */
static bool shape_is_arg(const struct ct_tree_call *c, const struct ct_call *k)
{
	uint64_t numel = 1;

	if (!k->fn->sent.on || k->fn->sent.count != CT_V_COUNT)
		return false;
	for (int d = 0; d < c->in_ndim; d++)
		numel *= (uint64_t)c->in_shape[d];
	return numel == k->ev->val[CT_V_COUNT];
}

/*
 * An outermost call with a Python stack into the process' tree (and the recording): the
 * stack as the tracer resolves it now, or as it was recorded (replay). Its node, or -1.
 */
static int32_t tree_call(struct ct_session *s, const struct ct_call *k,
			 const struct ct_tree_call *recorded)
{
	const struct ct_call_event *ev = k->ev;
	struct ct_py_resolved r;
	struct ct_tree_call c;
	bool attributed = false;

	if (recorded) {
		c = *recorded;
	} else if (ct_py_resolve(s, k->p, ev, &r)) {
		return -1;
	} else {
		c = r.call;
		attributed = r.attributed;
	}
	c.tid = ev->hdr.tid;
	c.ts = ev->hdr.ts;
	c.probe_id = ev->hdr.probe_id;
	c.function = k->fn->name;
	c.kind = ct_kind_name(k->fn->kind);
	c.group_size = ev->val[CT_V_COMM_SIZE] ? (int32_t)ev->val[CT_V_COMM_SIZE] : -1;
	c.rank_in_group = (int32_t)ev->val[CT_V_COMM_RANK];
	c.bytes = k->sent > k->recv ? k->sent : k->recv;
	c.dtype = k->dtype;
	/* Not the call's tensor: another one at its address by now, or a helper whose first
	 * argument is not what the call sends (a reduce-scatter's input): nothing claimed. */
	if (!recorded && c.in_ndim >= 0 && !shape_is_arg(&c, k))
		c.in_ndim = CT_SHAPE_NONE;
	/* --ops: under the call open on the thread; a backward collective under the module
	 * path of its forward instead (no module is open in the backward). Where ops are seen
	 * at their dispatch (torch 2.x), modules have no entries: outside an op, a collective
	 * is placed by its stack, as without --ops. */
	c.under_open = k->p->ops != NULL && !attributed &&
		       (!ct_py_ops_by_dispatch(k->p) || ct_py_op_open(k->p, ev->hdr.tid));
	c.beside = k->p->ops != NULL && attributed;
	if (s->rec) /* replay reads it back: it has no process to resolve the stack in */
		ct_record_pycall(s->rec, k->p->pid, &c);
	return ct_tree_add_call(&k->p->tree, &c);
}

static void print_call(const struct ct_call *k)
{
	const struct ct_call_event *ev = k->ev;
	const struct ct_func *fn = k->fn;
	/* op and root/peer: only where the function takes one */
	const char *role = ct_peer_role(fn);

	fprintf(stderr,
		"call pid=%u tid=%u %s count=%llu dtype=%llx comm=%llx size=%llu "
		"rank=%llu",
		ev->hdr.pid, ev->hdr.tid, fn->name, (unsigned long long)ev->val[CT_V_COUNT],
		(unsigned long long)ev->val[CT_V_DTYPE], (unsigned long long)ev->val[CT_V_COMM],
		(unsigned long long)ev->val[CT_V_COMM_SIZE],
		(unsigned long long)ev->val[CT_V_COMM_RANK]);
	if (ct_func_reads(fn, CT_V_OP))
		fprintf(stderr, " op=%s", k->op ? k->op : "?");
	if (role)
		fprintf(stderr, " %s=%d", role, (int32_t)ev->val[CT_V_PEER]);
	fprintf(stderr, " depth=%u pyframes=%u pyflags=%x\n", ev->hdr.depth, ev->py.nframes,
		ev->py.flags);
}

const struct ct_call_event *ct_calls_whole(struct ct_session *s, const struct ct_call_event *ev)
{
	struct ct_proc *p = ct_proc_find(s, ev->hdr.pid);
	const struct ct_call_event *w;

	if (!p || (!ev->py.nframes && !ev->py.nsame))
		return ev; /* no process of ours: ct_calls_on_call leaves it */
	if (!s->whole && !(s->whole = malloc(sizeof(*s->whole)))) {
		s->dropped_user++;
		return NULL;
	}
	w = ct_last_stack_whole(&p->last_stacks, ev, s->whole);
	if (w) {
		s->frames_shared += ev->py.nsame;
		return w;
	}
	s->stacks_lost++;
	memcpy(s->whole, ev, CT_CALL_EVENT_SIZE(0));
	s->whole->py.nframes = s->whole->py.nsame = 0;
	s->whole->py.flags &= ~CT_PYS_KNOWN;
	return s->whole;
}

void ct_calls_on_call(struct ct_session *s, const struct ct_call_event *ev,
		      const struct ct_tree_call *recorded)
{
	struct ct_call k = {.ev = ev, .node = -1};
	struct ct_proc *p = ct_proc_find(s, ev->hdr.pid);
	const struct ct_func *fn = ct_catalog_func(ev->hdr.probe_id, &k.lib);
	const struct ct_libdesc *d = k.lib;
	struct ct_fstats *st;

	if (!fn || !p)
		return;
	if (fn->kind == CT_K_AUTOGRAD_CTX) { /* not a collective: no statistics, no report */
		if (ev->hdr.depth == 0 && ev->py.nframes)
			ct_py_ctx_enter(s, p, ev);
		if (fn->flags & CT_PF_POINT) /* probed after the ctx's allocation: it is here */
			ct_py_ctx_created(s, p, ev->hdr.tid, ev->val[CT_V_OUT]);
		return;
	}
	k.p = p;
	k.fn = fn;
	comm_rank(p, fn, ev->val);
	st = fstats(p, ev->hdr.probe_id);
	if (!st) {
		s->dropped_user++;
		return;
	}
	st->calls++;
	p->calls++;
	k.sent = ct_bytes(d, &fn->sent, ev->val);
	k.recv = ct_bytes(d, &fn->recv, ev->val);
	st->bytes_sent += k.sent;
	st->bytes_recv += k.recv;
	/* Bytes that scale with the group size, on a communicator created before we attached. */
	if (((fn->sent.on && fn->sent.by_comm) || (fn->recv.on && fn->recv.by_comm)) &&
	    !ev->val[CT_V_COMM_SIZE])
		s->group_size_unknown++;
	if (fn->sent.on || fn->recv.on) {
		k.dtype = ct_dtype_name(
		    p, d, ev->val[CT_V_DTYPE] ? ev->val[CT_V_DTYPE] : ev->val[CT_V_RDTYPE]);
		ct_fstats_dtype(st, k.dtype);
	}
	if (ct_func_reads(fn, CT_V_OP)) {
		k.op = ct_op_name(p, d, ev->val[CT_V_OP]);
		ct_fstats_op(st, k.op);
	}
	if (ev->hdr.depth == 0 && ev->py.nframes)
		k.node = tree_call(s, &k, recorded);
	pend_call(p, &k);
	if (!ct_proc_thread_name(p, ev->hdr.tid)) {
		char name[CT_TASK_COMM_LEN + 1];

		memcpy(name, ev->comm, CT_TASK_COMM_LEN);
		name[CT_TASK_COMM_LEN] = 0;
		ct_proc_set_thread_name(p, ev->hdr.tid, name);
	}
	if (s->diag)
		diag_call(s, &k);
	if (s->chrome) /* --chrome: after the diagnosis, whose identity the slice names */
		ct_chrome_call(s, &k);
	if (ct_verbose >= 2)
		print_call(&k);
}

void ct_calls_on_ret(struct ct_session *s, const struct ct_ret_event *ev)
{
	struct ct_proc *p = ct_proc_find(s, ev->hdr.pid);
	const struct ct_libdesc *d;
	const struct ct_func *fn = ct_catalog_func(ev->hdr.probe_id, &d);
	struct ct_fstats *st;

	if (!p || !fn)
		return;
	if (fn->kind == CT_K_AUTOGRAD_CTX) {
		ct_py_ctx_created(s, p, ev->hdr.tid, (uint64_t)ev->retval);
		return;
	}
	st = p->stats[ev->hdr.probe_id];
	if (!st)
		return;
	st->returned++;
	ct_hist_add(&st->lat, ev->duration);
	st->dur[ct_dur_bucket(ev->duration)]++; /* --metrics' histogram */
	pend_ret(p, d, fn, st, ev);
	ct_diag_ret(s->diag, ev->hdr.pid, ev->hdr.tid, ev->hdr.depth, ev->hdr.ts);
	if (s->chrome)
		ct_chrome_ret(s, p, ev);
}

void ct_calls_on_op(struct ct_session *s, const struct ct_op_event *ev)
{
	struct ct_proc *p = ct_proc_find(s, ev->hdr.pid);

	if (p)
		ct_py_on_op(s, p, ev);
}

void ct_calls_on_dispatch(struct ct_session *s, const struct ct_dispatch_event *ev)
{
	struct ct_proc *p = ct_proc_find(s, ev->op.op.hdr.pid);

	if (p)
		ct_py_on_dispatch(s, p, ev);
}

void ct_calls_on_gradfn(struct ct_session *s, const struct ct_gradfn_event *ev, bool words)
{
	struct ct_proc *p = ct_proc_find(s, ev->hdr.pid);

	if (p)
		ct_py_on_gradfn(s, p, ev, words);
}

/*
 * A call in flight when tracing began (it entered before the gate) returned. The ranks that
 * entered that collective after the gate were seen in it: the diagnosis drops their halves,
 * which would otherwise be matched with this rank's next collective.
 */
void ct_calls_on_unseen(struct ct_session *s, const struct ct_hdr *h)
{
	const struct ct_libdesc *d;
	const struct ct_func *fn = ct_catalog_func(h->probe_id, &d);
	struct ct_proc *p = ct_proc_find(s, h->pid);
	uint8_t lib;

	if (!fn || !p || !s->diag)
		return;
	lib = d->lib;
	if (lib == CT_LIB_GLOO && ct_proc_has_lib(p, CT_LIB_C10D))
		lib = CT_LIB_C10D; /* c10d's Gloo execution: the c10d call is the collective */
	ct_diag_unseen(s->diag, h->pid, lib, h->ts);
}

void ct_calls_on_capture(struct ct_session *s, const struct ct_capture_event *ev)
{
	struct ct_proc *p = ct_proc_find(s, ev->hdr.pid);

	if (p)
		ct_py_on_capture(s, p, ev);
}

void ct_calls_on_backward(struct ct_session *s, const struct ct_hdr *h)
{
	struct ct_proc *p = ct_proc_find(s, h->pid);

	if (p)
		ct_py_on_backward(p, h->tid, h->type == CT_EV_BACKWARD);
}
