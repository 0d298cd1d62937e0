// SPDX-License-Identifier: MIT
/*
 * merge's cross-node diagnosis (docs/merge.md): the diag_log of every process of several
 * --json reports, clocks already aligned, replayed in time order through the same logic
 * as the live tracer (diag.c): each logged call at its entry, its completion at its end,
 * the hang check every 250 ms of the replayed time, and the end of each process' traced
 * window as its exit (what it still had in flight was never seen to complete).
 *
 * Per process, calls keep the order in which the tracer saw them (sequence numbers and
 * communicator identities are per-process orders); across processes, entry time decides.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "catalog/catalog.h"
#include "diag/diag.h"
#include "util/intern.h"

#define CHECK_NS 250000000ULL /* the live tracer's hang check period */

enum { EV_CALL, EV_END, EV_EXIT };

struct ev {
	uint64_t t;
	uint8_t type;
	int proc;
	uint32_t idx;
};

struct rproc {
	const cJSON *recs;
	int rank;
	int nstacks;
	struct ct_stack_line (*stacks)[CT_DIAG_STACK];
	uint8_t *nframes;
	struct {
		int32_t member;
		uint64_t seq;
	} * done;
	const cJSON **items; /* records by index */
};

static int ev_order(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	if (x->proc != y->proc)
		return x->proc < y->proc ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static bool num_of(const cJSON *o, const char *k, double *v)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, k);

	if (!cJSON_IsNumber(c))
		return false;
	*v = c->valuedouble;
	return true;
}

static const char *str_of(const cJSON *o, const char *k)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(c) ? c->valuestring : NULL;
}

/* The catalog's function of that name (its static name, library and kind), or NULL. */
static const struct ct_func *catalog_fn(const char *name, uint8_t *lib)
{
	static const struct ct_func *last;
	static uint8_t last_lib;
	const struct ct_libdesc *d;

	if (last && !strcmp(last->name, name)) {
		*lib = last_lib;
		return last;
	}
	for (uint32_t id = 0; id < ct_catalog_size(); id++) {
		const struct ct_func *fn = ct_catalog_func(id, &d);

		if (fn && !strcmp(fn->name, name)) {
			last = fn;
			last_lib = d->lib;
			*lib = d->lib;
			return fn;
		}
	}
	return NULL;
}

static uint64_t handle_of(const char *ident)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *ident; ident++)
		h = (h ^ (uint8_t)*ident) * 1099511628211ULL;
	return h | 1; /* never 0 */
}

/* The identity's leader ("mpi#1/2@4": world rank 4 is the group's rank 0), where it has one. */
static void leader_of(const char *ident, struct ct_diag_call *c)
{
	const char *at = ident ? strchr(ident, '@') : NULL;
	char *end;
	long v;

	if (!at)
		return;
	errno = 0;
	v = strtol(at + 1, &end, 10);
	if (!errno && !*end && v >= 0 && v <= INT32_MAX) {
		c->has_leader = true;
		c->leader = (int32_t)v;
	}
}

static int load_proc(struct rproc *rp, const cJSON *proc, int pi, char *err, size_t errlen)
{
	const cJSON *log = cJSON_GetObjectItemCaseSensitive(proc, "diag_log");
	const cJSON *st, *s, *r;
	double v;
	int n, i = 0;

	rp->rank = num_of(proc, "rank", &v) ? (int)v : -1;
	if (!cJSON_IsObject(log))
		return 0; /* no collectives logged */
	st = cJSON_GetObjectItemCaseSensitive(log, "stacks");
	rp->recs = cJSON_GetObjectItemCaseSensitive(log, "records");
	if (!cJSON_IsArray(st) || !cJSON_IsArray(rp->recs)) {
		snprintf(err, errlen, "process %d: diag_log without stacks and records arrays", pi);
		return -EINVAL;
	}
	n = cJSON_GetArraySize(st);
	rp->stacks = calloc((size_t)n + 1, sizeof(*rp->stacks));
	rp->nframes = calloc((size_t)n + 1, 1);
	if (!rp->stacks || !rp->nframes)
		return -ENOMEM;
	rp->nstacks = n;
	cJSON_ArrayForEach(s, st)
	{
		int k = 0;

		cJSON_ArrayForEach(r, s)
		{
			if (k == CT_DIAG_STACK)
				break;
			rp->stacks[i][k].qualname = ct_intern(str_of(r, "qualname"));
			rp->stacks[i][k].file = ct_intern(str_of(r, "file"));
			rp->stacks[i][k].line = num_of(r, "line", &v) ? (int)v : 0;
			k++;
		}
		rp->nframes[i++] = (uint8_t)k;
	}
	n = cJSON_GetArraySize(rp->recs);
	rp->done = calloc((size_t)n + 1, sizeof(*rp->done));
	rp->items = calloc((size_t)n + 1, sizeof(*rp->items));
	if (!rp->done || !rp->items)
		return -ENOMEM;
	i = 0;
	cJSON_ArrayForEach(r, rp->recs) rp->items[i++] = r;
	return 0;
}

/* The call of record idx of process pi; false with a message if it is malformed. */
static bool rec_call(const struct rproc *rp, const cJSON *r, int pi, uint32_t idx,
		     struct ct_diag_call *c, char *err, size_t errlen)
{
	const cJSON *cnt = cJSON_GetObjectItemCaseSensitive(r, "count");
	const char *fname = str_of(r, "function"), *ident = str_of(r, "comm");
	const struct ct_func *fn;
	double ts, v;

	memset(c, 0, sizeof(*c));
	if (!fname || !num_of(r, "ts_ns", &ts)) {
		snprintf(err, errlen, "process %d: diag_log record %u: no function or ts_ns", pi,
			 idx);
		return false;
	}
	fn = catalog_fn(fname, &c->lib);
	if (!fn) {
		snprintf(err, errlen, "process %d: diag_log record %u: unknown function '%s'", pi,
			 idx, fname);
		return false;
	}
	c->function = fn->name;
	c->kind = fn->kind;
	c->rank = rp->rank;
	c->ts = (uint64_t)ts;
	c->tid = num_of(r, "tid", &v) ? (uint32_t)v : 0;
	c->replayed = true;
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "creation"))) {
		if (fn->kind != CT_K_COMM_INIT && fn->kind != CT_K_COMM_SPLIT)
			c->kind = CT_K_COMM_INIT;
	} else {
		c->comm = ident ? handle_of(ident) : 0;
		c->comm_size = num_of(r, "group_size", &v) ? (int32_t)v : 0;
		leader_of(ident, c);
		if (!ident)
			c->comm_size = 0; /* no identity then: steps only, no matching */
		c->comm_rank = num_of(r, "comm_rank", &v) ? (int32_t)v : -1;
		c->has_count = cJSON_IsNumber(cnt);
		c->count = c->has_count ? (uint64_t)cnt->valuedouble : 0;
		c->dtype = ct_intern(str_of(r, "dtype"));
		c->bytes = num_of(r, "bytes", &v) ? (uint64_t)v : 0;
		c->helper = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "helper"));
	}
	if (num_of(r, "stack", &v) && v >= 0 && v < rp->nstacks) {
		c->stack = rp->stacks[(int)v];
		c->nstack = rp->nframes[(int)v];
	}
	return true;
}

int ct_diag_replay(struct ct_diag *d, const struct ct_diag_replay_proc *procs, int n, char *err,
		   size_t errlen)
{
	struct rproc *rp = calloc((size_t)n + 1, sizeof(*rp));
	uint64_t hang = ct_diag_options(d)->hang_ns, next = 0, last = 0;
	size_t nev = 0, cap = 0;
	struct ev *evs = NULL;
	int rc = 0;

	if (!rp)
		return -ENOMEM;
	for (int i = 0; i < n && !rc; i++)
		rc = load_proc(&rp[i], procs[i].proc, i, err, errlen);
	for (int i = 0; i < n && !rc; i++) {
		int nr = rp[i].recs ? cJSON_GetArraySize(rp[i].recs) : 0;
		uint64_t key = 0;

		if (nev + 2 * (size_t)nr + 1 > cap) {
			size_t c2 = (nev + 2 * (size_t)nr + 1) * 2;
			struct ev *x = realloc(evs, c2 * sizeof(*x));

			if (!x) {
				rc = -ENOMEM;
				break;
			}
			evs = x;
			cap = c2;
		}
		for (int k = 0; k < nr; k++) {
			const cJSON *r = rp[i].items[k];
			double ts, dur;

			if (!num_of(r, "ts_ns", &ts)) {
				snprintf(err, errlen, "process %d: diag_log record %d: no ts_ns", i,
					 k);
				rc = -EINVAL;
				break;
			}
			/* the tracer's order per process, even where two threads' clocks cross */
			if ((uint64_t)ts > key)
				key = (uint64_t)ts;
			evs[nev++] = (struct ev){key, EV_CALL, i, (uint32_t)k};
			if (num_of(r, "dur_ns", &dur))
				evs[nev++] = (struct ev){(uint64_t)ts + (uint64_t)dur, EV_END, i,
							 (uint32_t)k};
		}
		evs[nev++] = (struct ev){procs[i].window_end, EV_EXIT, i, 0};
	}
	if (!rc && nev)
		qsort(evs, nev, sizeof(*evs), ev_order);
	for (size_t e = 0; e < nev && !rc; e++) {
		const struct ev *x = &evs[e];
		struct rproc *p = &rp[x->proc];
		struct ct_diag_call c;

		if (hang) { /* as the live tracer: a check every 250 ms */
			if (!next)
				next = x->t + CHECK_NS;
			while (next <= x->t) {
				ct_diag_check(d, next);
				next += CHECK_NS;
				/* no event since last: past last + hang, no new alert can come */
				if (next > last + hang + CHECK_NS && next <= x->t)
					next += (x->t - next) / CHECK_NS * CHECK_NS;
			}
			last = x->t;
		}
		switch (x->type) {
		case EV_CALL:
			if (!rec_call(p, p->items[x->idx], x->proc, x->idx, &c, err, errlen)) {
				rc = -EINVAL;
				break;
			}
			c.pid = procs[x->proc].pid;
			p->done[x->idx].seq = ct_diag_replay_call(d, &c, &p->done[x->idx].member);
			break;
		case EV_END:
			if (p->done[x->idx].seq)
				ct_diag_replay_end(d, procs[x->proc].pid, p->done[x->idx].member,
						   p->done[x->idx].seq, x->t);
			break;
		case EV_EXIT:
			ct_diag_proc_exit(d, procs[x->proc].pid);
			break;
		}
	}
	for (int i = 0; i < n; i++) {
		free(rp[i].stacks);
		free(rp[i].nframes);
		free(rp[i].done);
		free(rp[i].items);
	}
	free(rp);
	free(evs);
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	return rc;
}
