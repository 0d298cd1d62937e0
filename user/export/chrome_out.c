// SPDX-License-Identifier: MIT
/*
 * The --chrome document's output: events under the size cap and the window, a process per
 * rank and a track per thread, flow arrows.
 */
#include <errno.h>
#include <stdlib.h>
#include "diag/diag.h"
#include "export/chrome_impl.h"
#include "targets.h"
#include "ct_version.h"

struct ct_chrome *ch_chrome_of(struct ct_session *s)
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
bool ch_emit(struct ct_chrome *c, uint64_t ts_ns)
{
	return emit_n(c, ts_ns, 1);
}

bool ch_in_window(struct ct_chrome *c, struct ct_session *s, uint64_t ts)
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

struct cproc *ch_cproc_get(struct ct_chrome *c, struct ct_proc *p)
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

void ch_name_process(struct ct_chrome *c, struct ct_proc *p, struct cproc *cp)
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
	ch_emit(c, 0);
	ct_sbuf_reset(&c->b);
	/* Ranks in order; processes without a rank after them, by pid. */
	ct_sbuf_printf(&c->b,
		       "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,"
		       "\"tid\":%d,\"args\":{\"sort_index\":%lld}}",
		       p->pid, p->pid, p->rank >= 0 ? (long long)p->rank : 1000000LL + p->pid);
	ch_emit(c, 0);
}

struct cthread *ch_thread_get(struct ct_chrome *c, struct ct_proc *p, struct cproc *cp,
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
		ch_emit(c, 0);
		ct_sbuf_reset(&c->b);
		ct_sbuf_printf(&c->b,
			       "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,"
			       "\"tid\":%u,\"args\":{\"sort_index\":%d}}",
			       p->pid, tid, tid == (uint32_t)p->pid ? 0 : ++cp->threads);
		ch_emit(c, 0);
		return t;
	}
	c->threads_over++;
	return NULL;
}

void ch_node_end_set(struct cproc *cp, int32_t node, uint64_t end)
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
bool ch_emit_flow(struct ct_chrome *c, const char *name, const struct ct_xhalf *a,
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
bool ch_fn_is_collective(const struct ct_func *fn)
{
	return fn->kind >= CT_K_ALLREDUCE && fn->kind <= CT_K_BARRIER;
}

const char *ch_phase_name(uint8_t phase)
{
	return phase == CT_PHASE_BACKWARD ? "backward" : "forward";
}

/* The name of a communicator identity ("c10d#0/2"); false: none. *ambiguous: see diag.c. */
bool ch_comm_ident(const struct ct_chrome *c, int32_t id, char *name, size_t len, bool *ambiguous)
{
	uint64_t colls;
	int members;

	return id >= 0 && c->diag &&
	       ct_diag_comm_info(c->diag, id, name, len, &members, &colls, ambiguous);
}
