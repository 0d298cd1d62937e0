// SPDX-License-Identifier: MIT
/*
 * Ring buffer records → per-process statistics. A call is counted (with its
 * bytes) at its entry, so that a call that never returns (a hang, a killed
 * rank) is still counted; its duration is added at its return.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "diag/diag.h"
#include "export/chrome.h"
#include "pystacks.h"
#include "record/record.h"
#include "session.h"
#include "target/proc.h"
#include "util/log.h"

_Static_assert(sizeof(struct ct_hdr) == 24, "ct_hdr layout");
_Static_assert(sizeof(struct ct_loc) == 8, "ct_loc layout");
_Static_assert(sizeof(struct ct_probe_spec) == 8 + 8 * CT_NVAL + 16, "ct_probe_spec layout");
_Static_assert(sizeof(struct ct_call_event) == 24 + 16 + 8 * CT_NVAL + 8 + 32 * CT_PY_MAX_FRAMES,
	       "ct_call_event layout");
_Static_assert(sizeof(struct ct_pyframe_raw) == 32, "ct_pyframe_raw layout");
_Static_assert(sizeof(struct ct_ret_event) == 48, "ct_ret_event layout");
_Static_assert(sizeof(struct ct_op_event) == 56, "ct_op_event layout");
_Static_assert(sizeof(struct ct_proc_event) == 48, "ct_proc_event layout");
_Static_assert(sizeof(struct ct_frame) == 40, "ct_frame layout");

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

	for (int i = 0; i < CT_TREE_MAX_THREADS; i++) {
		if (p->pending[i].tid == tid)
			return i;
		if (!p->pending[i].tid && free_slot < 0)
			free_slot = i;
	}
	if (!add)
		return -1;
	/* More threads in collectives at once than slots: one duration goes unrecorded. */
	return free_slot >= 0 ? free_slot : (int)(tid % CT_TREE_MAX_THREADS);
}

/* The diagnosis' view of a call (user/diag/diag.h); node: its tree node (stack), or NULL. */
static void diag_call(struct ct_session *s, const struct ct_proc *p, const struct ct_call_event *ev,
		      const struct ct_func *fn, const struct ct_libdesc *d, uint64_t bytes,
		      const char *dtype, const struct ct_node *node)
{
	struct ct_diag_call c = {
	    .pid = ev->hdr.pid,
	    .tid = ev->hdr.tid,
	    .rank = p->rank,
	    .lib = d->lib,
	    .kind = fn->kind,
	    .depth = ev->hdr.depth,
	    .function = fn->name,
	    .comm = ev->val[CT_V_COMM],
	    .comm_size = (int32_t)ev->val[CT_V_COMM_SIZE],
	    .comm_rank = (int32_t)ev->val[CT_V_COMM_RANK],
	    .has_count = fn->sent.on && fn->sent.count == CT_V_COUNT,
	    .count = ev->val[CT_V_COUNT],
	    .dtype = dtype,
	    .bytes = bytes,
	    .ts = ev->hdr.ts,
	};

	if (node) {
		c.stack = node->stack;
		c.nstack = node->nstack;
	}
	ct_diag_call(s->diag, &c);
}

static void on_call(struct ct_session *s, const struct ct_call_event *ev)
{
	const struct ct_libdesc *d;
	const struct ct_func *fn = ct_catalog_func(ev->hdr.probe_id, &d);
	struct ct_proc *p = ct_proc_find(s, ev->hdr.pid);
	uint64_t sent, recv;
	const char *dtype = NULL, *op = NULL;
	const struct ct_node *diag_node = NULL;
	struct ct_fstats *st;

	if (!fn || !p)
		return;
	comm_rank(p, fn, ev->val);
	st = fstats(p, ev->hdr.probe_id);
	if (!st) {
		s->dropped_user++;
		return;
	}
	st->calls++;
	p->calls++;
	sent = ct_bytes(d, &fn->sent, ev->val);
	recv = ct_bytes(d, &fn->recv, ev->val);
	st->bytes_sent += sent;
	st->bytes_recv += recv;
	/* Bytes that scale with the group size, on a communicator created before we attached. */
	if (((fn->sent.on && fn->sent.by_comm) || (fn->recv.on && fn->recv.by_comm)) &&
	    !ev->val[CT_V_COMM_SIZE])
		s->group_size_unknown++;
	if (fn->sent.on || fn->recv.on) {
		dtype = ct_dtype_name(
		    p, d, ev->val[CT_V_DTYPE] ? ev->val[CT_V_DTYPE] : ev->val[CT_V_RDTYPE]);
		ct_fstats_dtype(st, dtype);
	}
	if (ct_func_reads(fn, CT_V_OP)) {
		op = ct_op_name(p, d, ev->val[CT_V_OP]);
		ct_fstats_op(st, op);
	}
	if (ev->hdr.depth == 0 && ev->py.nframes) {
		int32_t node = ct_py_on_call(s, p, ev, fn, dtype, sent > recv ? sent : recv);

		if (s->diag && node >= 0 && node < p->tree.n)
			diag_node = &p->tree.nodes[node];
		int slot = pending_slot(p, ev->hdr.tid, node >= 0);

		if (slot >= 0) {
			p->pending[slot].tid = node >= 0 ? ev->hdr.tid : 0;
			p->pending[slot].node = node;
		}
	}
	if (!ct_proc_thread_name(p, ev->hdr.tid)) {
		char name[CT_TASK_COMM_LEN + 1];

		memcpy(name, ev->comm, CT_TASK_COMM_LEN);
		name[CT_TASK_COMM_LEN] = 0;
		ct_proc_set_thread_name(p, ev->hdr.tid, name);
	}
	if (s->diag)
		diag_call(s, p, ev, fn, d, sent > recv ? sent : recv, dtype, diag_node);
	if (s->chrome) /* --chrome: after the tree, whose node the slice names */
		ct_chrome_call(s, p, ev, fn, d, sent, recv, dtype, op);
	if (ct_verbose >= 2) {
		/* op and root/peer: only where the function takes one */
		const char *role = ct_peer_role(fn);

		fprintf(stderr,
			"call pid=%u tid=%u %s count=%llu dtype=%llx comm=%llx size=%llu "
			"rank=%llu",
			ev->hdr.pid, ev->hdr.tid, fn->name, (unsigned long long)ev->val[CT_V_COUNT],
			(unsigned long long)ev->val[CT_V_DTYPE],
			(unsigned long long)ev->val[CT_V_COMM],
			(unsigned long long)ev->val[CT_V_COMM_SIZE],
			(unsigned long long)ev->val[CT_V_COMM_RANK]);
		if (ct_func_reads(fn, CT_V_OP))
			fprintf(stderr, " op=%s", op ? op : "?");
		if (role)
			fprintf(stderr, " %s=%d", role, (int32_t)ev->val[CT_V_PEER]);
		fprintf(stderr, " depth=%u pyframes=%u pyflags=%x\n", ev->hdr.depth, ev->py.nframes,
			ev->py.flags);
	}
}

static void on_ret(struct ct_session *s, const struct ct_ret_event *ev)
{
	struct ct_proc *p = ct_proc_find(s, ev->hdr.pid);
	struct ct_fstats *st;

	if (!p || ev->hdr.probe_id >= ct_catalog_size())
		return;
	st = p->stats[ev->hdr.probe_id];
	if (!st)
		return;
	st->returned++;
	ct_hist_add(&st->lat, ev->duration);
	st->dur[ct_dur_bucket(ev->duration)]++; /* --metrics' histogram */
	if (ev->hdr.depth == 0) {
		int slot = pending_slot(p, ev->hdr.tid, false);

		if (slot >= 0) {
			ct_tree_set_duration(&p->tree, p->pending[slot].node, ev->duration);
			p->pending[slot].tid = 0;
		}
	}
	ct_diag_ret(s->diag, ev->hdr.pid, ev->hdr.tid, ev->hdr.depth, ev->hdr.ts);
	if (s->chrome)
		ct_chrome_ret(s, p, ev);
}

static void on_proc(struct ct_session *s, const struct ct_proc_event *ev)
{
	struct ct_proc *p = ct_proc_find(s, ev->hdr.pid), *c;
	int rc;

	switch (ev->hdr.type) {
	case CT_EV_FORK:
		c = ct_proc_add(s, ev->child);
		if (!c) {
			fprintf(stderr, "commtrace: more than %d processes: pid %u not traced\n",
				CT_MAX_TARGETS, ev->child);
			return;
		}
		ct_info("commtrace: pid %u forked %u\n", ev->hdr.pid, ev->child);
		/* A fork without exec keeps the parent's libraries: attach now. */
		ct_proc_scan(s, c);
		break;
	case CT_EV_EXEC:
		if (!p)
			p = ct_proc_add(s, ev->hdr.pid);
		if (!p)
			return;
		/* The old image is gone, and with it what was attached to it. */
		ct_proc_detach(s, p);
		memcpy(p->comm, ev->comm, sizeof(p->comm) - 1);
		ct_proc_env_rank(p);
		ct_info("commtrace: pid %u exec'ed %s (rank %d)\n", p->pid, p->comm, p->rank);
		/*
		 * glibc does not call _dl_debug_state for the libraries loaded at
		 * startup: a probe on the entry point says when they are all there.
		 */
		rc = ct_bpf_attach_entry(s, p);
		if (rc)
			ct_info("commtrace: pid %u: no entry-point probe (%s)\n", p->pid,
				strerror(-rc));
		ct_proc_scan(s, p);
		break;
	case CT_EV_DLOPEN:
		if (!p)
			return;
		rc = ct_proc_scan(s, p);
		if (rc > 0)
			ct_info("commtrace: pid %u: %d new libraries\n", p->pid, rc);
		break;
	case CT_EV_EXIT:
		if (!p || p->exited)
			return;
		p->exited = true;
		p->exit_code = ev->exit_code;
		ct_diag_proc_exit(s->diag, p->pid);
		ct_proc_detach(s, p);
		ct_info("commtrace: pid %u exited\n", p->pid);
		break;
	}
}

int ct_events_handle(void *ctx, void *data, size_t len)
{
	struct ct_session *s = ctx;
	const struct ct_hdr *h = data;

	if (len < sizeof(*h))
		return 0;
	if (s->rec) /* --record: the record as the kernel wrote it */
		ct_record_event(s->rec, data, len);
	s->events++;
	switch (h->type) {
	case CT_EV_CALL: {
		const struct ct_call_event *ev = data;

		if (len >= CT_CALL_EVENT_SIZE(0) && ev->py.nframes <= CT_PY_MAX_FRAMES &&
		    len >= CT_CALL_EVENT_SIZE(ev->py.nframes))
			on_call(s, data);
		break;
	}
	case CT_EV_RET:
		if (len >= sizeof(struct ct_ret_event))
			on_ret(s, data);
		break;
	case CT_EV_OP:
	case CT_EV_OPEXIT: {
		const struct ct_op_event *ev = data;
		struct ct_proc *p = ct_proc_find(s, h->pid);

		if (p && len >= sizeof(*ev) &&
		    (!ev->has_vals || len >= sizeof(struct ct_op_vals_event)))
			ct_py_on_op(s, p, ev);
		break;
	}
	case CT_EV_EXEC:
	case CT_EV_FORK:
	case CT_EV_EXIT:
	case CT_EV_DLOPEN:
		if (len >= sizeof(struct ct_proc_event))
			on_proc(s, data);
		break;
	}
	if (++s->batch_n >= CT_EVENTS_BATCH) {
		s->batch_n = 0;
		return CT_EVENTS_YIELD;
	}
	return 0;
}
