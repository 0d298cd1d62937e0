// SPDX-License-Identifier: MIT
/*
 * --chrome FILE (docs/chrome.md). One JSON document, written as a stream into a temporary
 * beside FILE and renamed at the end: `{"traceEvents":[` … events … `],"metadata":{…}}`.
 * A call becomes an X slice when it returns (its duration is known then); what is still
 * open when tracing ends is closed at the end. Module/op slices come from the call tree
 * when tracing ends (chrome_tree.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include "bandwidth.h"
#include "calls.h"
#include "devprof/devprof.h"
#include "diag/diag.h"
#include "drops.h"
#include "export/chrome_impl.h"
#include "targets.h"
#include "util/output.h"
#include "ct_version.h"

#define CH_DEVPROF_PID 0x1000000 /* above pid_max (2^22): device tracks never collide */

/* The X slice of one call. end: when it returned (or was closed, returned=false). */
static bool emit_call(struct ct_chrome *c, struct ct_proc *p, const struct cthread *t,
		      const struct pend *pd, int depth, uint64_t end, bool returned)
{
	const struct ct_func *fn = pd->fn;
	const char *role = ct_peer_role(fn);
	const struct ct_node *n = NULL;
	int32_t gs = pd->val[CT_V_COMM_SIZE] ? (int32_t)pd->val[CT_V_COMM_SIZE] : -1;
	char ident[48];
	bool ambiguous;

	if (pd->node >= 0 && pd->node < p->tree.n)
		n = &p->tree.nodes[pd->node];
	if (end < pd->ts)
		end = pd->ts;
	ct_sbuf_reset(&c->b);
	ct_sbuf_printf(&c->b, "{\"ph\":\"X\",\"cat\":\"comm\",\"name\":");
	ct_sbuf_jstr(&c->b, fn->name);
	ct_sbuf_printf(&c->b, ",\"pid\":%u,\"tid\":%u,\"ts\":", t->pid, t->tid);
	ct_sbuf_us(&c->b, pd->ts);
	ct_sbuf_printf(&c->b, ",\"dur\":");
	ct_sbuf_us(&c->b, end - pd->ts);
	ct_sbuf_printf(&c->b, ",\"args\":{\"function\":");
	ct_sbuf_jstr(&c->b, fn->name);
	ct_sbuf_printf(&c->b,
		       ",\"library\":\"%s\",\"kind\":\"%s\",\"count\":%llu,\"dtype\":", pd->d->name,
		       ct_kind_name(fn->kind), (unsigned long long)pd->val[CT_V_COUNT]);
	ct_sbuf_jstr(&c->b, pd->dtype);
	if (ct_func_reads(fn, CT_V_OP)) { /* the reduce op, where the function takes one */
		ct_sbuf_printf(&c->b, ",\"op\":");
		ct_sbuf_jstr(&c->b, pd->op);
	}
	if (role) /* "root" or "peer": a rank in the communicator */
		ct_sbuf_printf(&c->b, ",\"%s\":%d", role, (int32_t)pd->val[CT_V_PEER]);
	ct_sbuf_printf(&c->b,
		       ",\"bytes_sent\":%llu,\"bytes_received\":%llu,"
		       "\"communicator\":\"0x%llx\",\"group_size\":",
		       (unsigned long long)pd->sent, (unsigned long long)pd->recv,
		       (unsigned long long)pd->val[CT_V_COMM]);
	if (gs > 0)
		ct_sbuf_printf(&c->b, "%d,\"rank\":%lld", gs,
			       (long long)(int32_t)pd->val[CT_V_COMM_RANK]);
	else
		ct_sbuf_printf(&c->b, "null,\"rank\":null");
	ct_sbuf_printf(&c->b, ",\"process_rank\":");
	if (p->rank >= 0)
		ct_sbuf_printf(&c->b, "%d", p->rank);
	else
		ct_sbuf_printf(&c->b, "null");
	ct_sbuf_printf(&c->b, ",\"seq\":%llu,\"depth\":%d,\"returned\":%s",
		       (unsigned long long)pd->seq, depth, returned ? "true" : "false");
	if (fn->kind >= CT_K_ALLREDUCE && fn->kind <= CT_K_SENDRECV) { /* bandwidth.h, or why not */
		struct ct_bw bw;
		enum ct_bw_reason why =
		    returned ? ct_bandwidth(pd->d, fn, pd->sent, pd->recv,
					    (int64_t)pd->val[CT_V_COMM_SIZE], end - pd->ts, &bw)
			     : CT_BW_NO_DURATION;

		if (why == CT_BW_OK)
			ct_sbuf_printf(&c->b, ",\"algbw_gbs\":%.6g,\"busbw_gbs\":%.6g",
				       bw.algbw / 1e9, bw.busbw / 1e9);
		else
			ct_sbuf_printf(&c->b,
				       ",\"algbw_gbs\":null,\"busbw_gbs\":null,"
				       "\"busbw_reason\":\"%s\"",
				       ct_bw_reason_name(why));
	}
	if (ch_comm_ident(c, pd->comm_id, ident, sizeof(ident), &ambiguous)) {
		ct_sbuf_printf(&c->b, ",\"comm_id\":");
		ct_sbuf_jstr(&c->b, ident);
		ct_sbuf_printf(&c->b, ",\"comm_seq\":%llu", (unsigned long long)pd->comm_seq);
		if (pd->sub) /* nested: the n-th collective under the call it took them from */
			ct_sbuf_printf(&c->b, ",\"comm_sub\":%u", pd->sub);
	} else {
		ct_sbuf_printf(&c->b, ",\"comm_id\":null,\"comm_seq\":null");
	}
	if (n) {
		ct_sbuf_printf(&c->b, ",\"phase\":\"%s\",\"collective\":", ch_phase_name(n->phase));
		ct_sbuf_jstr(&c->b, n->name);
		ct_sbuf_printf(&c->b, ",\"tree_node\":%d,\"stack_truncated\":%s,\"stack\":[",
			       pd->node, n->truncated ? "true" : "false");
		for (int i = 0; i < n->nstack; i++) {
			char frame[1024];

			/* one string per frame, innermost first: "qualname (file:line)" */
			snprintf(frame, sizeof(frame), "%s (%s:%d)", n->stack[i].qualname,
				 n->stack[i].file, n->stack[i].line);
			ct_sbuf_printf(&c->b, "%s", i ? "," : "");
			ct_sbuf_jstr(&c->b, frame);
		}
		ct_sbuf_printf(&c->b, "]");
	}
	ct_sbuf_printf(&c->b, "}}");
	return ch_emit(c, pd->ts);
}

/* Closes the calls at depth >= from on a thread (entries whose return was not seen). */
static void close_from(struct ct_chrome *c, struct ct_session *s, struct ct_proc *p,
		       struct cthread *t, int from, uint64_t end)
{
	struct cproc *cp = ch_cproc_get(c, p);

	for (int d = CT_MAX_DEPTH - 1; d >= from; d--) {
		struct pend *pd = &t->call[d];

		if (!pd->on)
			continue;
		pd->on = false;
		if (!ch_in_window(c, s, pd->ts))
			continue;
		if (emit_call(c, p, t, pd, d, end, false)) {
			c->calls_written++;
			c->calls_unreturned++;
			if (cp && pd->node >= 0)
				ch_node_end_set(cp, pd->node, end > pd->ts ? end : pd->ts);
		} else {
			c->calls_capped++;
		}
	}
}

void ct_chrome_call(struct ct_session *s, const struct ct_call *k)
{
	const struct ct_call_event *ev = k->ev;
	const struct ct_func *fn = k->fn;
	const struct ct_libdesc *d = k->lib;
	struct ct_proc *p = k->p;
	struct ct_chrome *c = ch_chrome_of(s);
	struct ct_xhalf h = {.pid = ev->hdr.pid, .tid = ev->hdr.tid, .ts = ev->hdr.ts};
	struct cproc *cp;
	struct cthread *t;
	struct pend *pd;
	int depth = ev->hdr.depth;

	if (!c || depth >= CT_MAX_DEPTH)
		return;
	cp = ch_cproc_get(c, p);
	if (!cp)
		return;
	if (!cp->named)
		ch_name_process(c, p, cp);
	t = ch_thread_get(c, p, cp, ev->hdr.tid, ev->comm, true);
	if (!t)
		return;
	/* A call at this depth means the one recorded there returned unseen (a lost record). */
	close_from(c, s, p, t, depth, ev->hdr.ts);
	pd = &t->call[depth];
	memset(pd, 0, sizeof(*pd));
	pd->on = true;
	pd->probe_id = ev->hdr.probe_id;
	pd->ts = ev->hdr.ts;
	pd->fn = fn;
	pd->d = d;
	pd->sent = k->sent;
	pd->recv = k->recv;
	pd->dtype = k->dtype;
	pd->op = k->op; /* named at the call: the library handles go with the process */
	memcpy(pd->val, ev->val, sizeof(pd->val));
	pd->node = k->node;
	/* ct_fstats.calls was counted for this call just before: the per-function sequence. */
	pd->seq = p->stats[ev->hdr.probe_id] ? p->stats[ev->hdr.probe_id]->calls : 0;
	/*
	 * The cross-rank identity: the diagnosis just saw this call (calls.c calls it
	 * first). A collective nested in a call that has one (NCCL or MPI under c10d) takes
	 * that call's, with its own position under it.
	 */
	c->diag = s->diag;
	pd->comm_id = -1;
	if (depth == 0) {
		int id;

		if (ct_diag_call_id(s->diag, ev->hdr.pid, ev->hdr.tid, ev->hdr.ts, &id,
				    &pd->comm_seq))
			pd->comm_id = id;
	} else if (t->call[0].on && t->call[0].comm_id >= 0 && ch_fn_is_collective(fn)) {
		pd->comm_id = t->call[0].comm_id;
		pd->comm_seq = t->call[0].comm_seq;
		pd->sub = ++t->call[0].nested;
	}
	pd->hand = -1;
	if (d->lib == CT_LIB_C10D && !strncmp(fn->name, "ProcessGroupGloo::", 18)) {
		pd->hand = ct_handoff_caller(&cp->hand, fn->kind, &h);
	} else if (d->lib == CT_LIB_GLOO) {
		pd->hand = ct_handoff_worker(&cp->hand, fn->kind, &h);
		pd->worker = true;
	}
}

void ct_chrome_ret(struct ct_session *s, struct ct_proc *p, const struct ct_ret_event *ev)
{
	struct ct_chrome *c = ch_chrome_of(s);
	struct ct_xhalf src, dst, first;
	struct cproc *cp;
	struct cthread *t;
	struct pend *pd;
	int depth = ev->hdr.depth;
	uint64_t end;

	if (!c || depth >= CT_MAX_DEPTH)
		return;
	cp = ch_cproc_get(c, p);
	t = cp ? ch_thread_get(c, p, cp, ev->hdr.tid, "", false) : NULL;
	if (!t)
		return;
	pd = &t->call[depth];
	if (!pd->on || pd->probe_id != ev->hdr.probe_id) {
		c->calls_lost_entry++;
		return;
	}
	end = pd->ts + ev->duration;
	close_from(c, s, p, t, depth + 1, end);
	pd->on = false;
	if (!ch_in_window(c, s, pd->ts)) {
		c->calls_outside++;
		return;
	}
	if (!emit_call(c, p, t, pd, depth, end, true)) {
		c->calls_capped++;
		return;
	}
	c->calls_written++;
	if (pd->node >= 0)
		ch_node_end_set(cp, pd->node, end);
	if (pd->hand >= 0 && ct_handoff_end(&cp->hand, pd->hand, pd->worker, end, &src, &dst)) {
		if (ch_emit_flow(c, "c10d→gloo", &src, &dst))
			c->flows_handoff++;
	}
	if (pd->val[CT_V_COMM_SIZE] > 1 && ch_fn_is_collective(pd->fn)) {
		struct ct_xkey k = {.function = pd->fn->name,
				    .comm = pd->comm_id,
				    .sub = pd->sub,
				    .seq = pd->comm_seq};
		struct ct_xhalf h = {.pid = t->pid, .tid = t->tid, .ts = pd->ts, .end = end};
		char ident[48];
		bool ambiguous;

		/* Without a communicator identity no half is known to be its peer's. */
		if (!ch_comm_ident(c, pd->comm_id, ident, sizeof(ident), &ambiguous) || ambiguous) {
			c->unidentified++;
		} else if (ct_xmatch_add(&c->xm, &k, &h, &first) &&
			   ch_emit_flow(c, "rank→rank", &first, &h)) {
			c->flows_rank++;
		}
	}
}

/*
 * The device buffer's tracks (docs/devprof.md, "Combined export"). Returns non-zero when
 * the buffer cannot be added: the host trace is still written, with
 * metadata.device_buffer_error, and the run fails.
 */
static int emit_device(struct ct_chrome *c, struct ct_session *s, cJSON *meta)
{
	struct devprof_export_opts o;
	struct devprof_err err = {0};
	uint8_t *buf = NULL;
	size_t len = 0;
	cJSON *evs, *dm, *e;
	char timeline[160];
	int rc;

	devprof_export_opts_init(&o);
	o.pid_base = CH_DEVPROF_PID;
	if (c->o.device_sync) {
		/* Host ts are CLOCK_MONOTONIC µs: the sync pair maps cycles onto them. */
		o.have_sync = 1;
		o.sync_cycle = c->o.device_sync_cycle;
		o.sync_us = (double)(c->o.device_sync_ns / 1000) +
			    (double)(c->o.device_sync_ns % 1000) / 1e3;
	} else {
		/* No sync point: the earliest device record is placed at the start of tracing. */
		o.ts_base_us = (double)s->start_ns / 1e3;
	}
	evs = cJSON_CreateArray();
	dm = cJSON_CreateObject();
	rc = devprof_read_file(c->o.device_buffer, DEVPROF_MAX_FILE, &buf, &len, &err);
	if (!rc)
		rc = devprof_append_chrome(evs, dm, buf, len, &o, &err);
	free(buf);
	if (rc) {
		fprintf(stderr,
			"commtrace-bpf: --device-buffer %s: %s (devprof error %d); %s is written "
			"without the device tracks (metadata.device_buffer_error)\n",
			c->o.device_buffer, err.msg, rc, c->o.path);
		cJSON_AddStringToObject(meta, "device_buffer_error", err.msg);
		cJSON_AddNumberToObject(meta, "device_buffer_error_code", rc);
	} else {
		cJSON_ArrayForEach(e, evs)
		{
			char *txt = cJSON_PrintUnformatted(e);

			if (!txt) {
				c->err = -ENOMEM;
				break;
			}
			ct_sbuf_reset(&c->b);
			ct_sbuf_printf(&c->b, "%s", txt);
			free(txt);
			ch_emit(c, s->start_ns);
		}
		if (c->o.device_sync) {
			snprintf(timeline, sizeof(timeline),
				 "synchronized: device cycle %llu at CLOCK_MONOTONIC %llu ns "
				 "(--device-sync)",
				 (unsigned long long)c->o.device_sync_cycle,
				 (unsigned long long)c->o.device_sync_ns);
			cJSON_AddStringToObject(meta, "device_timeline", timeline);
		} else {
			cJSON_AddStringToObject(meta, "device_timeline",
						"not synchronized: earliest device record at "
						"start_ns");
		}
		e = cJSON_DetachItemFromObject(dm, "commtrace_devprof");
		if (e)
			cJSON_AddItemToObject(meta, "commtrace_devprof", e);
	}
	cJSON_Delete(evs);
	cJSON_Delete(dm);
	return rc;
}

static cJSON *u64_item(uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	return cJSON_CreateRaw(buf);
}

static cJSON *build_metadata(struct ct_chrome *c, struct ct_session *s)
{
	const struct ct_opts *o = s->opts;
	cJSON *m = cJSON_CreateObject(), *x, *procs, *pids;
	char buf[32];

	cJSON_AddStringToObject(m, "tool", "commtrace-bpf");
	cJSON_AddStringToObject(m, "version", CT_VERSION);
	cJSON_AddStringToObject(m, "format", "commtrace-chrome/1");
	cJSON_AddStringToObject(m, "clock", "CLOCK_MONOTONIC");
	cJSON_AddStringToObject(m, "ts_unit", "us");
	cJSON_AddItemToObject(m, "mono_to_wall_ns", u64_item(s->mono_to_wall_ns));
	/* The same as a string: JSON readers that hold numbers as doubles lose its last digits. */
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)s->mono_to_wall_ns);
	cJSON_AddStringToObject(m, "mono_to_wall_ns_str", buf);
	cJSON_AddItemToObject(m, "start_ns", u64_item(s->start_ns));
	cJSON_AddItemToObject(m, "end_ns", u64_item(s->end_ns));
	cJSON_AddStringToObject(m, "host", c->host);
	x = cJSON_AddObjectToObject(m, "options");
	pids = cJSON_AddArrayToObject(x, "pids");
	for (int i = 0; i < o->n_pids; i++)
		cJSON_AddItemToArray(pids, cJSON_CreateNumber(o->pids[i]));
	if (o->cmd) {
		cJSON *cmd = cJSON_AddArrayToObject(x, "command");

		for (char **a = o->cmd; *a; a++)
			cJSON_AddItemToArray(cmd, cJSON_CreateString(*a));
	}
	cJSON_AddNumberToObject(x, "duration_s", o->duration);
	cJSON_AddBoolToObject(x, "no_stacks", o->no_stacks);
	cJSON_AddNumberToObject(x, "chrome_max_mb", (double)(c->o.max_bytes >> 20));
	cJSON_AddNumberToObject(x, "chrome_window_s", (double)c->o.window_ns / 1e9);
	if (c->o.device_buffer)
		cJSON_AddStringToObject(x, "device_buffer", c->o.device_buffer);
	if (o->profile_path)
		cJSON_AddStringToObject(x, "profile", o->profile_path);
	cJSON_AddNumberToObject(m, "dropped_events", (double)ct_session_drops(s));
	x = cJSON_AddObjectToObject(m, "drops");
	for (int k = 0; k < CT_DROP_MAX; k++)
		cJSON_AddNumberToObject(x, ct_drop_name(k), (double)s->drops[k]);
	cJSON_AddNumberToObject(x, "user_space", (double)s->dropped_user);
	cJSON_AddNumberToObject(x, "processes_over_limit", (double)s->lost_procs);
	x = cJSON_AddObjectToObject(m, "export");
	cJSON_AddNumberToObject(x, "events_written", (double)c->events);
	cJSON_AddNumberToObject(x, "calls_written", (double)c->calls_written);
	cJSON_AddNumberToObject(x, "calls_unreturned", (double)c->calls_unreturned);
	cJSON_AddNumberToObject(x, "calls_without_entry", (double)c->calls_lost_entry);
	cJSON_AddNumberToObject(x, "calls_outside_window", (double)c->calls_outside);
	cJSON_AddNumberToObject(x, "calls_over_cap", (double)c->calls_capped);
	cJSON_AddNumberToObject(x, "threads_over_limit", (double)c->threads_over);
	cJSON_AddNumberToObject(x, "tree_slices", (double)c->tree_slices);
	cJSON_AddNumberToObject(x, "tree_slices_dropped", (double)c->tree_dropped);
	cJSON_AddNumberToObject(x, "flows_c10d_to_gloo", (double)c->flows_handoff);
	cJSON_AddNumberToObject(x, "flows_between_ranks", (double)c->flows_rank);
	cJSON_AddNumberToObject(x, "collectives_without_identity", (double)c->unidentified);
	cJSON_AddNumberToObject(x, "flow_candidates_forgotten", (double)c->xm.evicted);
	if (c->capped) {
		x = cJSON_AddObjectToObject(m, "capped");
		cJSON_AddNumberToObject(x, "max_bytes", (double)c->o.max_bytes);
		cJSON_AddItemToObject(x, "at_ns", u64_item(c->capped_at_ns));
		cJSON_AddNumberToObject(x, "events_left_out", (double)c->events_capped);
		cJSON_AddNumberToObject(x, "calls_left_out", (double)c->calls_capped);
		cJSON_AddStringToObject(x, "note", "size cap reached: later events not written");
	} else {
		cJSON_AddNullToObject(m, "capped");
	}
	if (c->o.window_ns) {
		x = cJSON_AddObjectToObject(m, "window");
		cJSON_AddItemToObject(x, "start_ns", u64_item(s->start_ns));
		cJSON_AddItemToObject(x, "end_ns", u64_item(s->start_ns + c->o.window_ns));
		cJSON_AddBoolToObject(x, "calls_left_out", c->calls_outside > 0);
	}
	procs = cJSON_AddArrayToObject(m, "processes");
	for (int i = 0; i < c->nprocs; i++) {
		struct ct_proc *p = ct_proc_find(s, (pid_t)c->procs[i]->pid);
		cJSON *e = cJSON_CreateObject();

		cJSON_AddNumberToObject(e, "pid", c->procs[i]->pid);
		cJSON_AddNumberToObject(e, "pid_in_namespace", c->procs[i]->nspid);
		if (p && p->rank >= 0)
			cJSON_AddNumberToObject(e, "rank", p->rank);
		else
			cJSON_AddNullToObject(e, "rank");
		if (p && p->world >= 0)
			cJSON_AddNumberToObject(e, "world_size", p->world);
		cJSON_AddStringToObject(e, "comm", p ? p->comm : "");
		cJSON_AddStringToObject(e, "host", c->host);
		cJSON_AddItemToArray(procs, e);
	}
	return m;
}

int ct_chrome_open(struct ct_session *s, const struct ct_chrome_opts *o)
{
	struct ct_chrome *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->o = *o;
	if (o->device_buffer && access(o->device_buffer, R_OK)) {
		int err = -errno;

		free(c);
		return err;
	}
	c->f = ct_open_output(o->path, c->tmp, sizeof(c->tmp));
	if (!c->f) {
		int err = -errno;

		free(c);
		return err;
	}
	if (gethostname(c->host, sizeof(c->host) - 1))
		snprintf(c->host, sizeof(c->host), "unknown");
	fputs("{\"traceEvents\":[", c->f);
	c->bytes = 16;
	s->chrome = c;
	return 0;
}

int ct_chrome_close(struct ct_session *s)
{
	struct ct_chrome *c = ch_chrome_of(s);
	cJSON *meta;
	char *txt;
	int err, dev_rc = 0;

	if (!c)
		return 0;
	s->chrome = NULL;
	/* Calls in flight when tracing ended: closed at the end, marked returned=false. */
	for (int i = 0; i < CH_THREADS; i++) {
		struct cthread *t = &c->th[i];
		struct ct_proc *p;

		if (!t->used || !(p = ct_proc_find(s, (pid_t)t->pid)))
			continue;
		close_from(c, s, p, t, 0, s->end_ns);
	}
	for (int i = 0; i < c->nprocs; i++) {
		struct ct_proc *p = ct_proc_find(s, (pid_t)c->procs[i]->pid);

		if (p)
			ch_emit_tree(c, p, c->procs[i]);
	}
	ch_emit_findings(c, s);
	meta = build_metadata(c, s);
	if (c->o.device_buffer)
		dev_rc = emit_device(c, s, meta);
	txt = cJSON_PrintUnformatted(meta);
	cJSON_Delete(meta);
	if (!txt && !c->err)
		c->err = -ENOMEM;
	fprintf(c->f, "\n],\"metadata\":%s}\n", txt ? txt : "{}");
	free(txt);
	if (c->err) {
		fclose(c->f);
		unlink(c->tmp);
		err = c->err;
	} else {
		err = ct_commit_output(c->f, c->tmp, c->o.path);
	}
	if (!err && dev_rc)
		err = CT_CHROME_DEVICE_FAILED;
	for (int i = 0; i < c->nprocs; i++) {
		free(c->procs[i]->node_end);
		free(c->procs[i]);
	}
	ct_sbuf_free(&c->b);
	free(c);
	return err;
}
