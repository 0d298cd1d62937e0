// SPDX-License-Identifier: MIT
/*
 * --chrome FILE (docs/chrome.md). One JSON document, written as a stream into a temporary
 * beside FILE and renamed at the end: `{"traceEvents":[` … events … `],"metadata":{…}}`.
 * A call becomes an X slice when it returns (its duration is known then); what is still
 * open when tracing ends is closed at the end. Module/op slices come from the call tree
 * when tracing ends: the tree is built from stacks taken at collectives, so a node's
 * extent is known only once its last collective is (no entry/exit events of its own).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cJSON.h>
#include "calls.h"
#include "devprof/devprof.h"
#include "diag/diag.h"
#include "drops.h"
#include "export/chrome.h"
#include "export/export.h"
#include "session.h"
#include "targets.h"
#include "util/output.h"
#include "ct_version.h"

/* ---- string buffer ---------------------------------------------------------------------- */

/* ---- nesting check ---------------------------------------------------------------------- */

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

/* ---- matchers --------------------------------------------------------------------------- */

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

/* ---- the exporter ----------------------------------------------------------------------- */

#define CH_THREADS	1024	    /* threads with a track; more are counted, not written */
#define CH_META_RESERVE (64u << 10) /* kept free under the size cap for the closing metadata */
#define CH_DEVPROF_PID	0x1000000   /* above pid_max (2^22): device tracks never collide */

struct pend {
	bool on;
	uint16_t probe_id;
	uint64_t ts;
	const struct ct_func *fn;
	const struct ct_libdesc *d;
	uint64_t sent, recv;
	const char *dtype;
	const char *op; /* reduce op name (ct_op_name), or NULL */
	uint64_t val[CT_NVAL];
	int32_t node; /* tree node, or -1 */
	uint64_t seq;
	int32_t comm_id;   /* the diagnosis' communicator identity (ct_diag_call_id), or -1 */
	uint64_t comm_seq; /* the collective's number on it */
	uint32_t sub;	   /* n-th collective nested in the call whose identity it took */
	uint32_t nested;   /* depth 0: the collectives nested in it so far */
	int hand;	   /* handoff slot, or -1 */
	bool worker;
};

struct cthread {
	uint32_t pid, tid;
	bool used;
	struct pend call[CT_MAX_DEPTH];
};

struct cproc {
	uint32_t pid;
	bool named;
	int nspid;
	int threads;
	struct ct_handoff hand;
	uint64_t *node_end; /* per tree node: the end its slice was written with, 0: none */
	int32_t node_cap;
};

struct ct_chrome {
	struct ct_chrome_opts o;
	FILE *f;
	char tmp[4096];
	char host[256];
	struct ct_sbuf b;
	uint64_t bytes, events, calls_written, calls_unreturned, calls_outside, calls_capped;
	uint64_t calls_lost_entry, threads_over, tree_slices, tree_dropped, flows_handoff;
	uint64_t flows_rank, flow_id, unidentified;
	bool capped, window_said;
	uint64_t capped_at_ns;
	uint64_t events_capped; /* events not written for the size cap */
	struct cthread th[CH_THREADS];
	struct cproc *procs[CT_MAX_TARGETS];
	int nprocs;
	struct ct_xmatch xm;
	const struct ct_diag *diag; /* the session's: communicator identities */
	int err;
};

static struct ct_chrome *chrome_of(struct ct_session *s)
{
	return s->chrome;
}

/*
 * Writes the n events in c->b (separated by ",\n"), all or none, unless the size cap is
 * reached: from then on every event is counted (metadata.capped.events_left_out).
 */
static bool emit_n(struct ct_chrome *c, uint64_t ts_ns, uint64_t n)
{
	if (c->b.oom || c->err) {
		c->err = c->err ? c->err : -ENOMEM;
		return false;
	}
	if (c->capped) {
		c->events_capped += n;
		return false;
	}
	if (c->o.max_bytes && c->bytes + c->b.len + 2 + CH_META_RESERVE > c->o.max_bytes) {
		c->capped = true;
		c->capped_at_ns = ts_ns;
		c->events_capped += n;
		fprintf(stderr,
			"commtrace-bpf: --chrome: the file reached its size cap (%llu MiB); later "
			"events are not written (see metadata.capped in %s)\n",
			(unsigned long long)(c->o.max_bytes >> 20), c->o.path);
		return false;
	}
	if (c->events)
		fputc(',', c->f);
	fputc('\n', c->f);
	fwrite(c->b.buf, 1, c->b.len, c->f);
	c->bytes += c->b.len + 2;
	c->events += n;
	return true;
}

/* Writes the event in c->b, unless the size cap is reached. */
static bool emit(struct ct_chrome *c, uint64_t ts_ns)
{
	return emit_n(c, ts_ns, 1);
}

static bool in_window(struct ct_chrome *c, struct ct_session *s, uint64_t ts)
{
	if (!c->o.window_ns || ts < s->start_ns + c->o.window_ns)
		return true;
	if (!c->window_said) {
		c->window_said = true;
		fprintf(
		    stderr,
		    "commtrace-bpf: --chrome: past the time window (%.3f s after attach); later "
		    "calls are not written (see metadata.window in %s)\n",
		    (double)c->o.window_ns / 1e9, c->o.path);
	}
	return false;
}

static int read_nspid(uint32_t pid)
{
	char path[64], line[256];
	int ns = (int)pid;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	f = fopen(path, "re");
	if (!f)
		return ns;
	while (fgets(line, sizeof(line), f)) {
		char *p, *end;

		if (strncmp(line, "NSpid:", 6))
			continue;
		/* The last field is the pid in the process' own (innermost) namespace. */
		for (p = line + 6; *p;) {
			long v = strtol(p, &end, 10);

			if (end == p)
				break;
			ns = (int)v;
			p = end;
		}
		break;
	}
	fclose(f);
	return ns;
}

static struct cproc *cproc_get(struct ct_chrome *c, struct ct_proc *p)
{
	struct cproc *cp;

	for (int i = 0; i < c->nprocs; i++)
		if (c->procs[i]->pid == (uint32_t)p->pid)
			return c->procs[i];
	if (c->nprocs == CT_MAX_TARGETS)
		return NULL;
	cp = calloc(1, sizeof(*cp));
	if (!cp)
		return NULL;
	cp->pid = (uint32_t)p->pid;
	cp->nspid = read_nspid(cp->pid);
	c->procs[c->nprocs++] = cp;
	return cp;
}

static void name_process(struct ct_chrome *c, struct ct_proc *p, struct cproc *cp)
{
	char name[512];

	cp->named = true;
	if (p->rank >= 0)
		snprintf(name, sizeof(name), "rank %d (%s, pid %d)", p->rank, c->host, p->pid);
	else
		snprintf(name, sizeof(name), "%s (%s, pid %d)", p->comm, c->host, p->pid);
	ct_sbuf_reset(&c->b);
	ct_sbuf_printf(&c->b,
		       "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":%d,"
		       "\"args\":{\"name\":",
		       p->pid, p->pid);
	ct_sbuf_jstr(&c->b, name);
	ct_sbuf_printf(&c->b, "}}");
	emit(c, 0);
	ct_sbuf_reset(&c->b);
	/* Ranks in order; processes without a rank after them, by pid. */
	ct_sbuf_printf(&c->b,
		       "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,"
		       "\"tid\":%d,\"args\":{\"sort_index\":%lld}}",
		       p->pid, p->pid, p->rank >= 0 ? (long long)p->rank : 1000000LL + p->pid);
	emit(c, 0);
}

static struct cthread *thread_get(struct ct_chrome *c, struct ct_proc *p, struct cproc *cp,
				  uint32_t tid, const char *comm, bool add)
{
	uint32_t h = (tid * 2654435761u) % CH_THREADS;
	char name[CT_TASK_COMM_LEN + 1];

	for (uint32_t i = 0; i < CH_THREADS; i++) {
		struct cthread *t = &c->th[(h + i) % CH_THREADS];

		if (t->used && t->tid == tid && t->pid == (uint32_t)p->pid)
			return t;
		if (t->used)
			continue;
		if (!add)
			return NULL;
		t->used = true;
		t->pid = (uint32_t)p->pid;
		t->tid = tid;
		memcpy(name, comm, CT_TASK_COMM_LEN);
		name[CT_TASK_COMM_LEN] = 0;
		/* The real tid: only the main thread's equals the pid, and tids are never 0. */
		ct_sbuf_reset(&c->b);
		ct_sbuf_printf(&c->b,
			       "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,"
			       "\"tid\":%u,\"args\":{\"name\":",
			       p->pid, tid);
		ct_sbuf_jstr(&c->b, name);
		ct_sbuf_printf(&c->b, "}}");
		emit(c, 0);
		ct_sbuf_reset(&c->b);
		ct_sbuf_printf(&c->b,
			       "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,"
			       "\"tid\":%u,\"args\":{\"sort_index\":%d}}",
			       p->pid, tid, tid == (uint32_t)p->pid ? 0 : ++cp->threads);
		emit(c, 0);
		return t;
	}
	c->threads_over++;
	return NULL;
}

static void node_end_set(struct cproc *cp, int32_t node, uint64_t end)
{
	if (node < 0 || node >= CT_TREE_MAX_NODES)
		return;
	if (node >= cp->node_cap) {
		int32_t cap = cp->node_cap ? cp->node_cap : 256;
		uint64_t *ne;

		while (cap <= node)
			cap *= 2;
		if (cap > CT_TREE_MAX_NODES)
			cap = CT_TREE_MAX_NODES;
		ne = realloc(cp->node_end, (size_t)cap * sizeof(*ne));
		if (!ne)
			return;
		memset(ne + cp->node_cap, 0, (size_t)(cap - cp->node_cap) * sizeof(*ne));
		cp->node_end = ne;
		cp->node_cap = cap;
	}
	cp->node_end[node] = end;
}

/* Both ends of a flow, or neither (the size cap); true: written. */
static bool emit_flow(struct ct_chrome *c, const char *name, const struct ct_xhalf *a,
		      const struct ct_xhalf *b)
{
	/*
	 * Flow v1 events bind to the slice enclosing their timestamp: the middle of each
	 * slice, never its first instant, where the enclosing one would be ambiguous.
	 */
	uint64_t id = ++c->flow_id;
	uint64_t ta = a->ts + (a->end - a->ts) / 2, tb = b->ts + (b->end - b->ts) / 2;

	ct_sbuf_reset(&c->b);
	ct_sbuf_printf(&c->b,
		       "{\"ph\":\"s\",\"cat\":\"flow\",\"name\":\"%s\",\"id\":%llu,"
		       "\"pid\":%u,\"tid\":%u,\"ts\":",
		       name, (unsigned long long)id, a->pid, a->tid);
	ct_sbuf_us(&c->b, ta);
	ct_sbuf_printf(&c->b, "},\n");
	ct_sbuf_printf(&c->b,
		       "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"flow\",\"name\":\"%s\","
		       "\"id\":%llu,\"pid\":%u,\"tid\":%u,\"ts\":",
		       name, (unsigned long long)id, b->pid, b->tid);
	ct_sbuf_us(&c->b, tb);
	ct_sbuf_printf(&c->b, "}");
	return emit_n(c, ta, 2);
}

/* Kinds whose halves in different ranks form one operation (not point-to-point, not setup). */
static bool fn_is_collective(const struct ct_func *fn)
{
	return fn->kind >= CT_K_ALLREDUCE && fn->kind <= CT_K_BARRIER;
}

static const char *phase_name(uint8_t phase)
{
	return phase == CT_PHASE_BACKWARD ? "backward" : "forward";
}

/* The name of a communicator identity ("c10d#0/2"); false: none. *ambiguous: see diag.c. */
static bool comm_ident(const struct ct_chrome *c, int32_t id, char *name, size_t len,
		       bool *ambiguous)
{
	uint64_t colls;
	int members;

	return id >= 0 && c->diag &&
	       ct_diag_comm_info(c->diag, id, name, len, &members, &colls, ambiguous);
}

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
	if (comm_ident(c, pd->comm_id, ident, sizeof(ident), &ambiguous)) {
		ct_sbuf_printf(&c->b, ",\"comm_id\":");
		ct_sbuf_jstr(&c->b, ident);
		ct_sbuf_printf(&c->b, ",\"comm_seq\":%llu", (unsigned long long)pd->comm_seq);
		if (pd->sub) /* nested: the n-th collective under the call it took them from */
			ct_sbuf_printf(&c->b, ",\"comm_sub\":%u", pd->sub);
	} else {
		ct_sbuf_printf(&c->b, ",\"comm_id\":null,\"comm_seq\":null");
	}
	if (n) {
		ct_sbuf_printf(&c->b, ",\"phase\":\"%s\",\"collective\":", phase_name(n->phase));
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
	return emit(c, pd->ts);
}

/* Closes the calls at depth >= from on a thread (entries whose return was not seen). */
static void close_from(struct ct_chrome *c, struct ct_session *s, struct ct_proc *p,
		       struct cthread *t, int from, uint64_t end)
{
	struct cproc *cp = cproc_get(c, p);

	for (int d = CT_MAX_DEPTH - 1; d >= from; d--) {
		struct pend *pd = &t->call[d];

		if (!pd->on)
			continue;
		pd->on = false;
		if (!in_window(c, s, pd->ts))
			continue;
		if (emit_call(c, p, t, pd, d, end, false)) {
			c->calls_written++;
			c->calls_unreturned++;
			if (cp && pd->node >= 0)
				node_end_set(cp, pd->node, end > pd->ts ? end : pd->ts);
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
	struct ct_chrome *c = chrome_of(s);
	struct ct_xhalf h = {.pid = ev->hdr.pid, .tid = ev->hdr.tid, .ts = ev->hdr.ts};
	struct cproc *cp;
	struct cthread *t;
	struct pend *pd;
	int depth = ev->hdr.depth;

	if (!c || depth >= CT_MAX_DEPTH)
		return;
	cp = cproc_get(c, p);
	if (!cp)
		return;
	if (!cp->named)
		name_process(c, p, cp);
	t = thread_get(c, p, cp, ev->hdr.tid, ev->comm, true);
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
	} else if (t->call[0].on && t->call[0].comm_id >= 0 && fn_is_collective(fn)) {
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
	struct ct_chrome *c = chrome_of(s);
	struct ct_xhalf src, dst, first;
	struct cproc *cp;
	struct cthread *t;
	struct pend *pd;
	int depth = ev->hdr.depth;
	uint64_t end;

	if (!c || depth >= CT_MAX_DEPTH)
		return;
	cp = cproc_get(c, p);
	t = cp ? thread_get(c, p, cp, ev->hdr.tid, "", false) : NULL;
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
	if (!in_window(c, s, pd->ts)) {
		c->calls_outside++;
		return;
	}
	if (!emit_call(c, p, t, pd, depth, end, true)) {
		c->calls_capped++;
		return;
	}
	c->calls_written++;
	if (pd->node >= 0)
		node_end_set(cp, pd->node, end);
	if (pd->hand >= 0 && ct_handoff_end(&cp->hand, pd->hand, pd->worker, end, &src, &dst)) {
		if (emit_flow(c, "c10d→gloo", &src, &dst))
			c->flows_handoff++;
	}
	if (pd->val[CT_V_COMM_SIZE] > 1 && fn_is_collective(pd->fn)) {
		struct ct_xkey k = {.function = pd->fn->name,
				    .comm = pd->comm_id,
				    .sub = pd->sub,
				    .seq = pd->comm_seq};
		struct ct_xhalf h = {.pid = t->pid, .tid = t->tid, .ts = pd->ts, .end = end};
		char ident[48];
		bool ambiguous;

		/* Without a communicator identity no half is known to be its peer's. */
		if (!comm_ident(c, pd->comm_id, ident, sizeof(ident), &ambiguous) || ambiguous) {
			c->unidentified++;
		} else if (ct_xmatch_add(&c->xm, &k, &h, &first) &&
			   emit_flow(c, "rank→rank", &first, &h)) {
			c->flows_rank++;
		}
	}
}

/* ---- end of the session ----------------------------------------------------------------- */

static const char *node_label(uint8_t type)
{
	switch (type) {
	case CT_NODE_MODULE:
		return "module";
	case CT_NODE_OP:
		return "op";
	default:
		return "redistribute";
	}
}

static void emit_tree_node(struct ct_chrome *c, const struct ct_tree *tr, int32_t i, uint32_t pid,
			   uint32_t tid, uint64_t start, uint64_t end)
{
	const struct ct_node *n = &tr->nodes[i];
	const char *type = node_label(n->type);
	char name[512];

	snprintf(name, sizeof(name), "%s(%s)",
		 n->type == CT_NODE_MODULE ? "Module"
		 : n->type == CT_NODE_OP   ? "Op"
					   : "Redistribute",
		 n->name ? n->name : "?");
	ct_sbuf_reset(&c->b);
	ct_sbuf_printf(&c->b, "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", type);
	ct_sbuf_jstr(&c->b, name);
	ct_sbuf_printf(&c->b, ",\"pid\":%u,\"tid\":%u,\"ts\":", pid, tid);
	ct_sbuf_us(&c->b, start);
	ct_sbuf_printf(&c->b, ",\"dur\":");
	ct_sbuf_us(&c->b, end - start);
	ct_sbuf_printf(&c->b, ",\"args\":{\"type\":\"%s\",\"%s\":", type,
		       n->type == CT_NODE_MODULE ? "module_fqn"
		       : n->type == CT_NODE_OP	 ? "op_name"
						 : "name");
	ct_sbuf_jstr(&c->b, n->name);
	for (int k = 0; k < 2; k++) {
		const struct ct_values *vs = k ? n->outputs : n->inputs;
		char text[CT_VALUES_TEXT_MAX];

		if (!vs)
			continue;
		ct_values_format(vs, text, sizeof(text));
		ct_sbuf_printf(&c->b, ",\"%s\":", k ? "outputs" : "inputs");
		ct_sbuf_jstr(&c->b, text);
	}
	ct_sbuf_printf(&c->b,
		       ",\"tree_node\":%d,\"parent_node\":%d,\"depth\":%d,\"extent\":\"%s\"}}", i,
		       n->parent, n->depth,
		       n->duration ? "entry to exit" : "first to last descendant collective");
	if (emit(c, start))
		c->tree_slices++;
	else
		c->tree_dropped++;
}

/*
 * Module/op/redistribute slices of one process: each spans its written descendant
 * collectives. The tree is built per thread, so a node's collectives share one track;
 * the nesting check still runs, and a node that would partially overlap is left out
 * (counted in metadata.tree_slices_dropped) rather than break the track.
 */
static void emit_tree(struct ct_chrome *c, struct ct_proc *p, struct cproc *cp)
{
	const struct ct_tree *tr = &p->tree;
	int32_t n = tr->n;
	uint64_t *st, *en;
	uint32_t *tid;
	bool *drop;
	struct ct_span *sp;

	if (!n) /* no collective and no --ops call */
		return;
	st = malloc((size_t)n * sizeof(*st));
	en = calloc((size_t)n, sizeof(*en));
	tid = calloc((size_t)n, sizeof(*tid));
	drop = calloc((size_t)n, sizeof(*drop));
	sp = malloc((size_t)n * sizeof(*sp));
	if (!st || !en || !tid || !drop || !sp) {
		c->err = -ENOMEM;
		goto out;
	}
	for (int32_t i = 0; i < n; i++) {
		const struct ct_node *nd = &tr->nodes[i];

		st[i] = UINT64_MAX;
		if (nd->type != CT_NODE_COLLECTIVE && nd->duration) { /* --ops: entry to exit */
			st[i] = nd->ts;
			en[i] = nd->ts + nd->duration;
			tid[i] = nd->tid;
		}
	}
	for (int32_t i = 0; i < n && i < cp->node_cap; i++) {
		const struct ct_node *nd = &tr->nodes[i];

		if (nd->type != CT_NODE_COLLECTIVE || !cp->node_end[i])
			continue;
		st[i] = nd->ts;
		en[i] = cp->node_end[i];
		tid[i] = nd->tid;
		for (int32_t a = nd->parent; a >= 0; a = tr->nodes[a].parent) {
			if (nd->ts < st[a])
				st[a] = nd->ts;
			if (en[i] > en[a])
				en[a] = en[i];
			if (!tid[a])
				tid[a] = nd->tid;
		}
	}
	for (int32_t i = 0; i < n; i++) {
		uint32_t track = tid[i];
		bool again = true;

		/* Each track once: at its first node. */
		if (!track || en[i] == 0)
			continue;
		for (int32_t j = 0; j < i; j++)
			if (tid[j] == track && en[j])
				goto next;
		for (int pass = 0; again && pass < 8; pass++) {
			size_t k = 0;

			for (int32_t j = i; j < n; j++)
				if (tid[j] == track && en[j] && !drop[j])
					sp[k++] = (struct ct_span){
					    .start = st[j], .end = en[j], .id = (uint32_t)j};
			again = false;
			if (!ct_span_check(sp, k))
				break;
			for (size_t m = 0; m < k; m++) {
				int32_t j = (int32_t)sp[m].id;

				if (!sp[m].bad)
					continue;
				if (tr->nodes[j].type != CT_NODE_COLLECTIVE) {
					drop[j] = again = true;
					continue;
				}
				/* a written collective stays: the enclosing nodes it straddles go
				 */
				for (size_t q = 0; q < k; q++) {
					int32_t e = (int32_t)sp[q].id;

					if (tr->nodes[e].type != CT_NODE_COLLECTIVE &&
					    st[e] < sp[m].start && en[e] > sp[m].start &&
					    en[e] < sp[m].end)
						drop[e] = again = true;
				}
			}
		}
	next:;
	}
	for (int32_t i = 0; i < n; i++) {
		if (tr->nodes[i].type == CT_NODE_COLLECTIVE || !en[i])
			continue;
		if (drop[i])
			c->tree_dropped++;
		else
			emit_tree_node(c, tr, i, cp->pid, tid[i], st[i], en[i]);
	}
out:
	free(st);
	free(en);
	free(tid);
	free(drop);
	free(sp);
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
			emit(c, s->start_ns);
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

/* Diagnosis findings (user/diag/diag.h) as instant events on the rank's track. */
static void emit_findings(struct ct_chrome *c, struct ct_session *s)
{
	const struct ct_diag_finding *f;
	int n = s->diag ? ct_diag_findings(s->diag, &f) : 0;

	for (int i = 0; i < n; i++) {
		cJSON *ev = ct_diag_evidence(&f[i]);
		char *args = ev ? cJSON_PrintUnformatted(ev) : NULL;
		uint64_t ts = f[i].ts ? f[i].ts : s->end_ns;

		cJSON_Delete(ev);
		ct_sbuf_reset(&c->b);
		ct_sbuf_printf(&c->b, "{\"ph\":\"i\",\"cat\":\"diagnosis\",\"name\":\"%s\",",
			       ct_diag_kind_name(f[i].kind));
		/* A finding without a thread is drawn across its process. */
		ct_sbuf_printf(&c->b,
			       "\"s\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":", f[i].tid ? "t" : "p",
			       f[i].pid, f[i].tid ? f[i].tid : f[i].pid);
		ct_sbuf_us(&c->b, ts);
		ct_sbuf_printf(&c->b, ",\"args\":{\"severity\":\"%s\",\"summary\":",
			       ct_diag_severity_name(f[i].severity));
		ct_sbuf_jstr(&c->b, f[i].summary);
		ct_sbuf_printf(&c->b, ",\"evidence\":%s}}", args ? args : "{}");
		free(args);
		emit(c, ts);
	}
}

int ct_chrome_close(struct ct_session *s)
{
	struct ct_chrome *c = chrome_of(s);
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
			emit_tree(c, p, c->procs[i]);
	}
	emit_findings(c, s);
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
