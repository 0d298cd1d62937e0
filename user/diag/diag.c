// SPDX-License-Identifier: MIT
/*
 * Cross-rank diagnosis (diag.h, README "Diagnosis").
 *
 * Communicator identity: a handle is an address in one process. Across processes, a
 * communicator is (layer library, group size, ordinal), the ordinal being the order in
 * which the process first used a handle of that library and size: ranks that create
 * and use their groups in the same order (SPMD programs do) agree on it. Two processes
 * claiming the same rank in one identity make it ambiguous: it is not matched.
 *
 * Sequence number: the n-th collective on that communicator in that process, since
 * attach. One layer per process: c10d over Gloo is matched at the c10d layer (the
 * caller's thread, with the Python stack); the gloo:: call that executes it on a worker
 * thread is linked to it (oldest c10d call of the same kind still waiting) and gives its
 * completion. Calls nested in another traced call (NCCL under c10d) are not matched.
 */
#include <stdlib.h>
#include <string.h>
#include "catalog/catalog.h"
#include "diag/diag.h"

struct rec {
	uint64_t seq; /* 0: empty slot */
	uint64_t ts, end;
	uint64_t count, bytes;
	const char *function, *dtype;
	uint32_t tid;
	uint8_t kind;
	bool has_count, returned, exec_wait, exec_started, exec_done, aborted, alerted;
	bool matched, helper;
	uint8_t nstack;
	int32_t logi; /* its diag_log entry, -1: none */
	int8_t site;  /* index in stack of the call site, -1: none */
	struct ct_stack_line stack[CT_DIAG_STACK];
};

struct member {
	int16_t comm, proc;
	int32_t comm_rank;
	uint64_t issued; /* sequence number of the last collective */
	uint64_t wait_ns, matched;
	uint64_t late, late_max, late_seq, late_ts;
	const char *late_fn;
	char late_site[256];
	struct rec w[CT_DIAG_WINDOW];
};

struct comm {
	uint8_t lib;
	int32_t size;
	uint32_t ordinal;
	int16_t members[CT_DIAG_FRANKS * 4];
	int nmembers;
	bool ambiguous;
	uint64_t matched, mismatches, collectives;
	bool has_mismatch;
	struct ct_diag_finding mismatch;
};

struct sigent {
	uint32_t sig;
	uint8_t kind;
	bool helper;
	uint64_t bytes;
	const char *function;
	struct ct_stack_line site;
	bool has_site;
};

struct run {
	uint32_t p;
	uint64_t start, end, steps;
	uint64_t first_vol, last_vol, base_vol;
	uint32_t growth;
};

struct steps {
	struct sigent e[CT_DIAG_SIGS];
	uint64_t n;
	struct run cur, best;
};

struct newcomm {
	uint64_t index; /* position in the process' collective sequence */
	const char *function;
	bool creation; /* a creation call (else: first use of a new handle) */
	bool has_site;
	struct ct_stack_line site;
	char comm[48];
};

struct pair {
	struct ct_stack_line a, b;
	bool has_a, has_b;
	int16_t ca, cb;
	const char *fa, *fb;
	uint64_t count, max_gap, ts;
	uint32_t tid;
};

struct dproc {
	uint32_t pid;
	int rank;
	bool c10d_gloo, exited;
	struct {
		uint64_t handle, last;
		uint8_t lib;
		int32_t size;
		int16_t member;
	} h[CT_DIAG_HANDLES];
	int nh;
	uint64_t clock;
	struct {
		uint8_t lib;
		int32_t size;
		uint32_t next;
	} ord[16];
	int nord;
	struct {
		int16_t member;
		uint64_t seq;
	} pend[CT_DIAG_PENDING];
	int npend;
	struct {
		uint32_t tid;
		int16_t member;
		uint64_t seq;
		bool exec;
	} fl[CT_DIAG_INFLIGHT];
	struct {
		uint32_t tid;
		int16_t member;
		uint64_t seq;
	} last[CT_DIAG_INFLIGHT];
	struct pair pairs[CT_DIAG_PAIRS];
	int npairs;
	struct newcomm nc[CT_DIAG_NEWCOMMS];
	uint64_t nnc;	       /* added; the ring keeps the last CT_DIAG_NEWCOMMS */
	uint64_t nc_confirmed; /* evicted ones that were inside a step run */
	uint64_t wait_ns, matched;
	struct steps st;
	/* diag_log (merge): the first CT_DIAG_LOG collectives, stacks deduplicated */
	struct ct_diag_logrec *log;
	uint32_t nlog, caplog;
	struct logstack {
		uint32_t hash;
		uint8_t n;
		struct ct_stack_line l[CT_DIAG_STACK];
	} * stacks;
	int nstacks;
};

struct ct_diag {
	struct ct_diag_opts o;
	struct dproc *procs[CT_DIAG_PROCS];
	int nprocs;
	struct comm *comms[CT_DIAG_COMMS];
	int ncomms;
	struct member *members[CT_DIAG_MEMBERS];
	int nmembers;
	uint64_t matched;
	struct ct_diag_top top[CT_DIAG_TOP];
	int ntop;
	struct ct_diag_finding hangs[CT_DIAG_HANGS];
	int nhangs;
	struct ct_diag_finding *f;
	int nf;
	struct ct_diag_drops drops;
	uint64_t kind_hw[CT_DIAG_KINDS + 1]; /* findings per kind, high-water (--metrics) */
	uint64_t skew_max, skew_last;
	bool last_late;
	uint64_t nlog; /* logged collectives, all processes */
	struct {       /* what the latest ct_diag_call gave its call (ct_diag_call_id) */
		uint32_t pid, tid;
		uint64_t ts, seq;
		int16_t member; /* -1: no identity */
	} last;
};

/* ---- small helpers ---------------------------------------------------------------------- */

static bool matchable(uint8_t kind)
{
	switch (kind) {
	case CT_K_ALLREDUCE:
	case CT_K_REDUCE:
	case CT_K_BROADCAST:
	case CT_K_ALLGATHER:
	case CT_K_GATHER:
	case CT_K_SCATTER:
	case CT_K_ALLTOALL:
	case CT_K_REDUCE_SCATTER:
	case CT_K_BARRIER:
		return true;
	}
	return false;
}

static bool is_reduction(uint8_t kind)
{
	return kind == CT_K_ALLREDUCE || kind == CT_K_REDUCE || kind == CT_K_REDUCE_SCATTER;
}

/* Counts every rank must pass alike: not the vector forms, not a scatter's (root only). */
static bool count_comparable(uint8_t kind, const char *fn)
{
	size_t n = strlen(fn);

	if (n && fn[n - 1] == 'v')
		return false;
	return kind != CT_K_SCATTER && kind != CT_K_BARRIER;
}

static bool dtype_comparable(uint8_t kind, const char *a, const char *b)
{
	return kind != CT_K_SCATTER && a && b && strcmp(a, "derived") && strcmp(b, "derived");
}

/* Frames of the framework itself are not the call site the user wants. */
static bool library_file(const char *f)
{
	return !f || strstr(f, "/torch/") || strstr(f, "-packages/") || strstr(f, "<frozen");
}

static int site_index(const struct ct_stack_line *s, int n)
{
	for (int i = 0; i < n; i++)
		if (!library_file(s[i].file))
			return i;
	return n ? 0 : -1;
}

static bool helper_frame(const struct ct_stack_line *s, int n)
{
	for (int i = 0; i < n; i++)
		if (s[i].qualname &&
		    (strstr(s[i].qualname, "full_tensor") || strstr(s[i].qualname, "unshard")))
			return true;
	return false;
}

static void fmt_line(char *buf, size_t len, const struct ct_stack_line *l)
{
	snprintf(buf, len, "%s (%s:%d)", l->qualname ? l->qualname : "?", l->file ? l->file : "?",
		 l->line);
}

static void fmt_stack(char *buf, size_t len, const struct rec *r)
{
	size_t off = 0;

	buf[0] = 0;
	for (int i = 0; i < r->nstack && off + 1 < len; i++) {
		int w = snprintf(buf + off, len - off, "%s%s (%s:%d)", i ? " <- " : "",
				 r->stack[i].qualname ? r->stack[i].qualname : "?",
				 r->stack[i].file ? r->stack[i].file : "?", r->stack[i].line);

		if (w < 0)
			break;
		off += (size_t)w;
	}
}

static void fmt_site(char *buf, size_t len, const struct rec *r)
{
	if (r->site >= 0)
		fmt_line(buf, len, &r->stack[r->site]);
	else
		buf[0] = 0;
}

static void who(char *buf, size_t len, const struct dproc *p)
{
	if (p->rank >= 0)
		snprintf(buf, len, "rank %d (pid %u)", p->rank, p->pid);
	else
		snprintf(buf, len, "pid %u", p->pid);
}

static void comm_name(const struct comm *c, char *buf, size_t len)
{
	snprintf(buf, len, "%s#%u/%d", ct_lib_name(c->lib), c->ordinal, c->size);
}

static void fmt_secs(char *buf, size_t len, uint64_t ns)
{
	snprintf(buf, len, "%.3f s", (double)ns / 1e9);
}

/* ---- construction ----------------------------------------------------------------------- */

struct ct_diag *ct_diag_new(const struct ct_diag_opts *o)
{
	struct ct_diag *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->o = *o;
	d->last.member = -1;
	if (!d->o.min_repeats)
		d->o.min_repeats = 3;
	d->f = calloc(CT_DIAG_FINDINGS, sizeof(*d->f));
	if (!d->f) {
		free(d);
		return NULL;
	}
	return d;
}

void ct_diag_free(struct ct_diag *d)
{
	if (!d)
		return;
	for (int i = 0; i < d->nprocs; i++) {
		free(d->procs[i]->log);
		free(d->procs[i]->stacks);
		free(d->procs[i]);
	}
	for (int i = 0; i < d->ncomms; i++)
		free(d->comms[i]);
	for (int i = 0; i < d->nmembers; i++)
		free(d->members[i]);
	free(d->f);
	free(d);
}

static struct dproc *proc_find(struct ct_diag *d, uint32_t pid)
{
	for (int i = 0; i < d->nprocs; i++)
		if (d->procs[i]->pid == pid)
			return d->procs[i];
	return NULL;
}

static struct dproc *proc_get(struct ct_diag *d, uint32_t pid, int rank)
{
	struct dproc *p = proc_find(d, pid);

	if (p) {
		if (rank >= 0)
			p->rank = rank;
		return p;
	}
	if (d->nprocs == CT_DIAG_PROCS)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->rank = rank;
	d->procs[d->nprocs++] = p;
	return p;
}

static struct rec *rec_of(struct ct_diag *d, int16_t member, uint64_t seq)
{
	struct rec *r;

	if (member < 0 || member >= d->nmembers || !seq)
		return NULL;
	r = &d->members[member]->w[(seq - 1) % CT_DIAG_WINDOW];
	return r->seq == seq ? r : NULL;
}

static int proc_index(const struct ct_diag *d, const struct dproc *p)
{
	for (int i = 0; i < d->nprocs; i++)
		if (d->procs[i] == p)
			return i;
	return -1;
}

/* ---- steps -------------------------------------------------------------------------------- */

static uint32_t find_period(uint32_t (*get)(const void *, uint64_t), const void *ctx, uint64_t n,
			    uint64_t floor, uint32_t max_p, uint64_t *len)
{
	uint64_t avail = n - floor;

	for (uint32_t p = 1; p <= max_p && 3ULL * p <= avail; p++) {
		uint64_t j = n - 1, l = p;

		while (j >= floor + p && get(ctx, j) == get(ctx, j - p)) {
			l++;
			j--;
		}
		if (l >= 3ULL * p) {
			*len = l;
			return p;
		}
	}
	return 0;
}

static uint32_t get_linear(const void *ctx, uint64_t i)
{
	return ((const uint32_t *)ctx)[i];
}

uint32_t ct_diag_period(const uint32_t *sig, uint64_t n, uint32_t max_p, uint64_t *len)
{
	*len = 0;
	return find_period(get_linear, sig, n, 0, max_p, len);
}

static uint32_t get_ring(const void *ctx, uint64_t i)
{
	return ((const struct steps *)ctx)->e[i % CT_DIAG_SIGS].sig;
}

static void run_step(const struct steps *st, struct run *r, uint64_t last)
{
	uint64_t vol = 0;

	for (uint64_t k = last + 1 - r->p; k <= last; k++)
		vol += st->e[k % CT_DIAG_SIGS].bytes;
	if (!r->steps) {
		r->first_vol = r->base_vol = vol;
		r->growth = 0;
	} else if (vol > r->last_vol) {
		r->growth++;
	} else {
		r->growth = 0;
		r->base_vol = vol;
	}
	r->last_vol = vol;
	r->steps++;
}

static uint32_t sig_hash(const struct ct_diag_call *c, const struct ct_stack_line *site)
{
	uint64_t v[6] = {c->lib,
			 c->kind,
			 (uint64_t)(uintptr_t)c->function,
			 (uint64_t)c->comm_size,
			 site ? (uint64_t)(uintptr_t)site->qualname : 0,
			 site ? (uint64_t)site->line : 0};
	uint32_t h = 2166136261u;

	for (int i = 0; i < 6; i++)
		for (int b = 0; b < 8; b++) {
			h ^= (uint8_t)(v[i] >> (8 * b));
			h *= 16777619u;
		}
	return h;
}

/* Collectives covered by whole steps of a run. */
static uint64_t coverage(const struct run *r)
{
	return r->steps * r->p;
}

static const struct run *best_run(const struct steps *st)
{
	return coverage(&st->cur) > coverage(&st->best) ? &st->cur : &st->best;
}

/*
 * The training steps: the periodic run that covers the most collectives, with at least
 * min_repeats steps and at least half of the process' collectives (a loop of a few
 * calls from one line, inside a step, is not the step). NULL: none.
 */
static const struct run *steady_run(const struct ct_diag *d, const struct steps *st)
{
	const struct run *b = best_run(st);

	if (!b->p || b->steps < d->o.min_repeats || coverage(b) * 2 < st->n)
		return NULL;
	return b;
}

static void steps_add(struct steps *st, const struct ct_diag_call *c,
		      const struct ct_stack_line *site, bool helper)
{
	uint64_t i = st->n++, floor, len;
	struct sigent *e = &st->e[i % CT_DIAG_SIGS];
	uint32_t p;

	memset(e, 0, sizeof(*e));
	e->sig = sig_hash(c, site);
	e->kind = c->kind;
	e->helper = helper;
	e->bytes = c->bytes;
	e->function = c->function;
	if (site) {
		e->site = *site;
		e->has_site = true;
	}
	if (st->cur.p) {
		p = st->cur.p;
		if (st->e[(i - p) % CT_DIAG_SIGS].sig == e->sig) {
			st->cur.end = i;
			if ((i - st->cur.start + 1) % p == 0)
				run_step(st, &st->cur, i);
			return;
		}
		if (coverage(&st->cur) > coverage(&st->best))
			st->best = st->cur;
		memset(&st->cur, 0, sizeof(st->cur));
	}
	floor = st->n > CT_DIAG_SIGS ? st->n - CT_DIAG_SIGS : 0;
	p = find_period(get_ring, st, st->n, floor, CT_DIAG_MAX_PERIOD, &len);
	if (!p)
		return;
	st->cur.p = p;
	st->cur.start = st->n - len;
	st->cur.end = i;
	for (uint64_t k = st->cur.start + p - 1; k <= i; k += p)
		run_step(st, &st->cur, k);
}

static bool in_run(const struct run *r, uint64_t index)
{
	return r->p && r->steps >= 2 && index >= r->start + r->p && index <= r->end;
}

static void newcomm_add(struct ct_diag *d, struct dproc *p, const char *fn, bool creation,
			const struct ct_stack_line *site, const char *comm)
{
	struct newcomm *n = &p->nc[p->nnc % CT_DIAG_NEWCOMMS];

	if (p->nnc >= CT_DIAG_NEWCOMMS) {
		/* Judged now, with the runs known now. */
		if (in_run(&p->st.cur, n->index) || in_run(&p->st.best, n->index))
			p->nc_confirmed++;
		d->drops.newcomm_evicted++;
	}
	memset(n, 0, sizeof(*n));
	n->index = p->st.n;
	n->function = fn;
	n->creation = creation;
	if (site) {
		n->site = *site;
		n->has_site = true;
	}
	snprintf(n->comm, sizeof(n->comm), "%s", comm ? comm : "");
	p->nnc++;
}

/* ---- communicators ------------------------------------------------------------------------ */

static int16_t comm_get(struct ct_diag *d, uint8_t lib, int32_t size, uint32_t ordinal)
{
	struct comm *c;

	for (int i = 0; i < d->ncomms; i++) {
		c = d->comms[i];
		if (c->lib == lib && c->size == size && c->ordinal == ordinal)
			return (int16_t)i;
	}
	if (d->ncomms == CT_DIAG_COMMS)
		return -1;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -1;
	c->lib = lib;
	c->size = size;
	c->ordinal = ordinal;
	d->comms[d->ncomms] = c;
	return (int16_t)d->ncomms++;
}

static int16_t member_get(struct ct_diag *d, int16_t ci, struct dproc *p, int32_t comm_rank)
{
	struct comm *c = d->comms[ci];
	int pi = proc_index(d, p);
	struct member *m;

	for (int i = 0; i < c->nmembers; i++) {
		m = d->members[c->members[i]];
		if (m->proc == pi)
			return c->members[i];
		if (m->comm_rank == comm_rank)
			c->ambiguous = true; /* two processes, one rank: not one group */
	}
	if (d->nmembers == CT_DIAG_MEMBERS || c->nmembers == (int)ARRAY_LEN(c->members))
		return -1;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -1;
	m->comm = ci;
	m->proc = (int16_t)pi;
	m->comm_rank = comm_rank;
	d->members[d->nmembers] = m;
	c->members[c->nmembers++] = (int16_t)d->nmembers;
	if (c->nmembers > c->size)
		c->ambiguous = true;
	return (int16_t)d->nmembers++;
}

/* The member (process' half of a communicator identity) of a handle; -1: none. */
static int16_t handle_member(struct ct_diag *d, struct dproc *p, const struct ct_diag_call *c,
			     const struct ct_stack_line *site)
{
	int slot = -1, k;
	uint32_t ordinal;
	int16_t ci, mi;
	char name[48];

	p->clock++;
	for (int i = 0; i < p->nh; i++)
		if (p->h[i].handle == c->comm && p->h[i].lib == c->lib &&
		    p->h[i].size == c->comm_size) {
			p->h[i].last = p->clock;
			return p->h[i].member;
		}
	if (c->comm_size <= 0)
		return -1;
	for (k = 0; k < p->nord; k++)
		if (p->ord[k].lib == c->lib && p->ord[k].size == c->comm_size)
			break;
	if (k == p->nord) {
		if (p->nord == (int)ARRAY_LEN(p->ord))
			return -1;
		p->ord[k].lib = c->lib;
		p->ord[k].size = c->comm_size;
		p->ord[k].next = 0;
		p->nord++;
	}
	ordinal = p->ord[k].next++;
	ci = comm_get(d, c->lib, c->comm_size, ordinal);
	mi = ci >= 0 ? member_get(d, ci, p, c->comm_rank) : -1;
	if (ci < 0)
		d->drops.comms_over_limit++;
	else if (mi < 0)
		d->drops.members_over_limit++;
	if (p->st.n) { /* not the first collective of the process: a communicator made since */
		if (ci >= 0)
			comm_name(d->comms[ci], name, sizeof(name));
		else
			snprintf(name, sizeof(name), "%s#%u/%d", ct_lib_name(c->lib), ordinal,
				 c->comm_size);
		newcomm_add(d, p, c->function, false, site, name);
	}
	if (p->nh < CT_DIAG_HANDLES) {
		slot = p->nh++;
	} else {
		slot = 0;
		for (int i = 1; i < p->nh; i++)
			if (p->h[i].last < p->h[slot].last)
				slot = i;
		d->drops.handles_evicted++;
	}
	p->h[slot].handle = c->comm;
	p->h[slot].lib = c->lib;
	p->h[slot].size = c->comm_size;
	p->h[slot].member = mi;
	p->h[slot].last = p->clock;
	return mi;
}

/* ---- diag_log ------------------------------------------------------------------------------ */

/* The frames kept for a collective: the innermost CT_DIAG_STACK, the call site last if deeper. */
static uint8_t keep_frames(struct ct_stack_line *out, const struct ct_stack_line *in, int n, int si)
{
	uint8_t k = (uint8_t)(n < CT_DIAG_STACK ? (n > 0 ? n : 0) : CT_DIAG_STACK);

	if (k)
		memcpy(out, in, k * sizeof(*out));
	if (si >= CT_DIAG_STACK)
		out[CT_DIAG_STACK - 1] = in[si];
	return k;
}

static int16_t log_stack(struct ct_diag *d, struct dproc *p, const struct ct_stack_line *l,
			 uint8_t n)
{
	uint32_t h = 2166136261u;
	struct logstack *e;

	if (!n)
		return -1;
	for (int i = 0; i < n; i++)
		h = (h ^ (uint32_t)(uintptr_t)l[i].qualname ^ (uint32_t)l[i].line) * 16777619u;
	for (int i = 0; i < p->nstacks; i++) {
		e = &p->stacks[i];
		if (e->hash == h && e->n == n && !memcmp(e->l, l, n * sizeof(*l)))
			return (int16_t)i;
	}
	if (!p->stacks)
		p->stacks = calloc(CT_DIAG_LOG_STACKS, sizeof(*p->stacks));
	if (!p->stacks || p->nstacks == CT_DIAG_LOG_STACKS) {
		d->drops.log_stacks_dropped++;
		return -1;
	}
	e = &p->stacks[p->nstacks];
	e->hash = h;
	e->n = n;
	memcpy(e->l, l, n * sizeof(*l));
	return (int16_t)p->nstacks++;
}

/* Appends a collective (or creation) to the process' diag_log; its index, or -1. */
static int32_t log_add(struct ct_diag *d, struct dproc *p, const struct ct_diag_call *c,
		       int16_t comm, int si, bool helper, bool creation)
{
	struct ct_stack_line fr[CT_DIAG_STACK];
	struct ct_diag_logrec *e;

	if (d->o.no_log)
		return -1;
	if (p->nlog == CT_DIAG_LOG || d->nlog >= CT_DIAG_LOG_TOTAL) {
		d->drops.log_dropped++;
		return -1;
	}
	if (p->nlog == p->caplog) {
		uint32_t cap = p->caplog ? p->caplog * 2 : 64;
		struct ct_diag_logrec *n = realloc(p->log, cap * sizeof(*n));

		if (!n) {
			d->drops.log_dropped++;
			return -1;
		}
		p->log = n;
		p->caplog = cap;
	}
	e = &p->log[p->nlog];
	memset(e, 0, sizeof(*e));
	e->ts = c->ts;
	e->count = c->count;
	e->has_count = c->has_count;
	e->bytes = c->bytes;
	e->function = c->function;
	e->dtype = c->dtype;
	e->tid = c->tid;
	e->comm_size = c->comm_size;
	e->comm_rank = c->comm_rank;
	e->comm = comm;
	e->helper = helper;
	e->creation = creation;
	e->stack =
	    c->nstack > 0 ? log_stack(d, p, fr, keep_frames(fr, c->stack, c->nstack, si)) : -1;
	d->nlog++;
	return (int32_t)p->nlog++;
}

static void log_end(struct dproc *p, const struct rec *r, uint64_t ts)
{
	if (r->logi >= 0 && (uint32_t)r->logi < p->nlog)
		p->log[r->logi].end = ts;
}

/* ---- matching ------------------------------------------------------------------------------ */

static void top_add(struct ct_diag *d, const struct ct_diag_top *t)
{
	int i = d->ntop < CT_DIAG_TOP ? d->ntop++ : CT_DIAG_TOP - 1;

	if (i == CT_DIAG_TOP - 1 && d->ntop == CT_DIAG_TOP && d->top[i].skew_ns >= t->skew_ns &&
	    d->top[i].function)
		return;
	d->top[i] = *t;
	for (; i > 0 && d->top[i - 1].skew_ns < d->top[i].skew_ns; i--) {
		struct ct_diag_top x = d->top[i - 1];

		d->top[i - 1] = d->top[i];
		d->top[i] = x;
	}
}

static void mismatch_what(char *buf, size_t len, const struct rec *a, const struct rec *b)
{
	buf[0] = 0;
	if (a->kind != b->kind || strcmp(a->function, b->function))
		snprintf(buf, len, "collective %s vs %s", a->function, b->function);
	else if (a->has_count && b->has_count && count_comparable(a->kind, a->function) &&
		 a->count != b->count)
		snprintf(buf, len, "count %llu vs %llu", (unsigned long long)a->count,
			 (unsigned long long)b->count);
	else if (dtype_comparable(a->kind, a->dtype, b->dtype) && strcmp(a->dtype, b->dtype))
		snprintf(buf, len, "dtype %s vs %s", a->dtype, b->dtype);
}

static void match_try(struct ct_diag *d, int16_t ci, uint64_t seq)
{
	struct comm *c = d->comms[ci];
	struct rec *recs[CT_DIAG_FRANKS * 4], *ref = NULL;
	struct member *ms[CT_DIAG_FRANKS * 4], *last = NULL, *refm = NULL;
	uint64_t lo = UINT64_MAX, hi = 0;
	char what[160];

	if (c->ambiguous || c->nmembers != c->size)
		return;
	for (int i = 0; i < c->nmembers; i++) {
		ms[i] = d->members[c->members[i]];
		recs[i] = rec_of(d, c->members[i], seq);
		if (!recs[i] || recs[i]->matched)
			return;
	}
	for (int i = 0; i < c->nmembers; i++) {
		recs[i]->matched = true;
		if (recs[i]->ts < lo)
			lo = recs[i]->ts;
		if (recs[i]->ts >= hi) {
			hi = recs[i]->ts;
			last = ms[i];
		}
		if (!refm || ms[i]->comm_rank < refm->comm_rank) {
			refm = ms[i];
			ref = recs[i];
		}
	}
	c->matched++;
	d->matched++;
	d->skew_last = hi - lo;
	if (hi - lo > d->skew_max)
		d->skew_max = hi - lo;
	d->last_late = hi - lo >= d->o.late_ns;
	for (int i = 0; i < c->nmembers; i++) {
		struct dproc *p = d->procs[ms[i]->proc];

		ms[i]->wait_ns += hi - recs[i]->ts;
		ms[i]->matched++;
		p->wait_ns += hi - recs[i]->ts;
		p->matched++;
	}
	{
		struct ct_diag_top t = {.function = ref->function, .seq = seq, .skew_ns = hi - lo};
		struct dproc *lp = d->procs[last->proc];

		comm_name(c, t.comm, sizeof(t.comm));
		t.last_rank = lp->rank;
		t.last_pid = lp->pid;
		t.ts = lo;
		top_add(d, &t);
	}
	if (hi - lo >= d->o.late_ns) {
		int li = 0;

		for (int i = 0; i < c->nmembers; i++)
			if (ms[i] == last)
				li = i;
		last->late++;
		if (hi - lo > last->late_max) {
			last->late_max = hi - lo;
			last->late_seq = seq;
			last->late_fn = recs[li]->function;
			last->late_ts = lo;
			fmt_site(last->late_site, sizeof(last->late_site), recs[li]);
		}
	}
	for (int i = 0; i < c->nmembers; i++) {
		struct ct_diag_finding *f = &c->mismatch;
		struct dproc *pa, *pb;
		char wa[64], wb[64];

		if (recs[i] == ref)
			continue;
		mismatch_what(what, sizeof(what), ref, recs[i]);
		if (!what[0])
			continue;
		c->mismatches++;
		if (c->has_mismatch)
			break;
		c->has_mismatch = true;
		pa = d->procs[refm->proc];
		pb = d->procs[ms[i]->proc];
		memset(f, 0, sizeof(*f));
		f->kind = CT_DF_MISMATCH;
		f->severity = CT_DS_ERROR;
		f->nranks = 2;
		f->ranks[0] = pa->rank;
		f->pids[0] = pa->pid;
		f->ranks[1] = pb->rank;
		f->pids[1] = pb->pid;
		f->pid = pb->pid;
		f->tid = recs[i]->tid;
		f->ts = recs[i]->ts;
		comm_name(c, f->comm, sizeof(f->comm));
		f->function = ref->function;
		f->function2 = recs[i]->function;
		f->seq = seq;
		f->count = ref->count;
		f->bytes = ref->bytes;
		f->bytes2 = recs[i]->bytes;
		snprintf(f->what, sizeof(f->what), "%s", what);
		fmt_site(f->site, sizeof(f->site), ref);
		fmt_site(f->site2, sizeof(f->site2), recs[i]);
		fmt_stack(f->stack, sizeof(f->stack), ref);
		fmt_stack(f->stack2, sizeof(f->stack2), recs[i]);
		who(wa, sizeof(wa), pa);
		who(wb, sizeof(wb), pb);
		snprintf(f->summary, sizeof(f->summary),
			 "%s at #%llu of %s: %s has %s, %s has %s (%s)", "mismatched collective",
			 (unsigned long long)seq, f->comm, wa, ref->function, wb, recs[i]->function,
			 what);
		if (d->o.alerts)
			fprintf(d->o.alerts, "commtrace: MISMATCH: %s\n  %s: %s\n  %s: %s\n",
				f->summary, wa, f->stack[0] ? f->stack : "(no Python stack)", wb,
				f->stack2[0] ? f->stack2 : "(no Python stack)");
		break;
	}
}

/* ---- events -------------------------------------------------------------------------------- */

static void inflight_set(struct dproc *p, uint32_t tid, int16_t member, uint64_t seq, bool exec)
{
	int slot = -1;

	for (int i = 0; i < CT_DIAG_INFLIGHT; i++) {
		if (p->fl[i].tid == tid) {
			slot = i;
			break;
		}
		if (!p->fl[i].tid && slot < 0)
			slot = i;
	}
	if (slot < 0)
		slot = (int)(tid % CT_DIAG_INFLIGHT);
	p->fl[slot].tid = tid;
	p->fl[slot].member = member;
	p->fl[slot].seq = seq;
	p->fl[slot].exec = exec;
}

static void exec_start(struct ct_diag *d, struct dproc *p, const struct ct_diag_call *c)
{
	for (int i = 0; i < p->npend; i++) {
		struct rec *r = rec_of(d, p->pend[i].member, p->pend[i].seq);

		if (!r) { /* evicted from the window meanwhile */
			memmove(&p->pend[i], &p->pend[i + 1],
				(p->npend - i - 1) * sizeof(p->pend[0]));
			p->npend--;
			i--;
			d->drops.pending_evicted++;
			continue;
		}
		if (r->kind != c->kind || r->ts > c->ts)
			continue;
		r->exec_started = true;
		d->last.member = p->pend[i].member; /* the execution carries its call's identity */
		d->last.seq = p->pend[i].seq;
		inflight_set(p, c->tid, p->pend[i].member, p->pend[i].seq, true);
		memmove(&p->pend[i], &p->pend[i + 1], (p->npend - i - 1) * sizeof(p->pend[0]));
		p->npend--;
		return;
	}
	d->drops.executions_unmatched++;
}

static void pair_add(struct dproc *p, const struct rec *a, const struct rec *b, int16_t ca,
		     int16_t cb, uint64_t gap)
{
	struct pair *x = NULL;

	for (int i = 0; i < p->npairs; i++) {
		struct pair *y = &p->pairs[i];

		if (y->ca == ca && y->cb == cb && y->fa == a->function && y->fb == b->function &&
		    (a->site < 0 || (y->a.qualname == a->stack[a->site].qualname &&
				     y->a.line == a->stack[a->site].line)) &&
		    (b->site < 0 || (y->b.qualname == b->stack[b->site].qualname &&
				     y->b.line == b->stack[b->site].line))) {
			x = y;
			break;
		}
	}
	if (!x) {
		if (p->npairs == CT_DIAG_PAIRS)
			return;
		x = &p->pairs[p->npairs++];
		memset(x, 0, sizeof(*x));
		x->ca = ca;
		x->cb = cb;
		x->fa = a->function;
		x->fb = b->function;
		if (a->site >= 0) {
			x->a = a->stack[a->site];
			x->has_a = true;
		}
		if (b->site >= 0) {
			x->b = b->stack[b->site];
			x->has_b = true;
		}
		x->ts = b->ts;
		x->tid = b->tid;
	}
	x->count++;
	if (gap > x->max_gap)
		x->max_gap = gap;
}

/* Reductions on different communicators, the next issued only once the last completed. */
static void serial_check(struct ct_diag *d, struct dproc *p, int16_t mi, const struct rec *r)
{
	int slot = -1;

	for (int i = 0; i < CT_DIAG_INFLIGHT; i++) {
		if (p->last[i].tid == r->tid) {
			slot = i;
			break;
		}
		if (!p->last[i].tid && slot < 0)
			slot = i;
	}
	if (slot < 0)
		slot = (int)(r->tid % CT_DIAG_INFLIGHT);
	if (p->last[slot].tid == r->tid) {
		const struct rec *prev = rec_of(d, p->last[slot].member, p->last[slot].seq);
		int16_t pc = prev ? d->members[p->last[slot].member]->comm : -1;
		int16_t rc = d->members[mi]->comm;

		if (prev && is_reduction(prev->kind) && is_reduction(r->kind) && pc != rc &&
		    prev->end && r->ts >= prev->end && r->ts - prev->end <= d->o.serial_gap_ns)
			pair_add(p, prev, r, pc, rc, r->ts - prev->end);
	}
	p->last[slot].tid = r->tid;
	p->last[slot].member = mi;
	p->last[slot].seq = r->seq;
}

/* The call's record: *mi_out and the returned sequence number (0: none). */
static uint64_t diag_call(struct ct_diag *d, const struct ct_diag_call *c, int16_t *mi_out)
{
	const struct ct_stack_line *site = NULL;
	struct dproc *p;
	struct member *m;
	struct rec *r;
	int16_t mi;
	int si;
	bool helper;

	*mi_out = -1;
	if (!d)
		return 0;
	d->last.pid = c->pid;
	d->last.tid = c->tid;
	d->last.ts = c->ts;
	d->last.member = -1;
	if (c->depth != 0)
		return 0;
	if (c->kind != CT_K_COMM_INIT && c->kind != CT_K_COMM_SPLIT && !matchable(c->kind))
		return 0;
	p = proc_get(d, c->pid, c->rank);
	if (!p) {
		d->drops.procs_over_limit++;
		return 0;
	}
	si = c->nstack > 0 ? site_index(c->stack, c->nstack) : -1;
	if (si >= 0)
		site = &c->stack[si];
	if (c->kind == CT_K_COMM_INIT || c->kind == CT_K_COMM_SPLIT) {
		newcomm_add(d, p, c->function, true, site, NULL);
		log_add(d, p, c, -1, si, false, true);
		return 0;
	}
	if (c->lib == CT_LIB_GLOO && p->c10d_gloo && !c->replayed) {
		exec_start(d, p, c);
		return 0;
	}
	helper = c->replayed ? c->helper : helper_frame(c->stack, c->nstack);
	mi = handle_member(d, p, c, site);
	steps_add(&p->st, c, site, helper);
	if (mi < 0) {
		log_add(d, p, c, -1, si, helper, false);
		return 0;
	}
	m = d->members[mi];
	d->comms[m->comm]->collectives++;
	if (d->comms[m->comm]->ambiguous)
		d->drops.ambiguous++;
	m->issued++;
	r = &m->w[(m->issued - 1) % CT_DIAG_WINDOW];
	if (r->seq && !r->matched && !d->comms[m->comm]->ambiguous &&
	    d->comms[m->comm]->nmembers == d->comms[m->comm]->size)
		d->drops.window_evicted++;
	memset(r, 0, sizeof(*r));
	r->seq = m->issued;
	r->ts = c->ts;
	r->count = c->count;
	r->has_count = c->has_count;
	r->bytes = c->bytes;
	r->function = c->function;
	r->dtype = c->dtype;
	r->tid = c->tid;
	r->kind = c->kind;
	r->helper = helper;
	r->site = (int8_t)(si < CT_DIAG_STACK ? si : -1);
	r->nstack = (uint8_t)(c->nstack < CT_DIAG_STACK ? c->nstack : CT_DIAG_STACK);
	if (c->nstack > 0)
		memcpy(r->stack, c->stack, r->nstack * sizeof(r->stack[0]));
	if (si >= CT_DIAG_STACK) { /* keep the site as the last frame shown */
		r->stack[CT_DIAG_STACK - 1] = c->stack[si];
		r->site = CT_DIAG_STACK - 1;
	}
	r->logi = log_add(d, p, c, m->comm, si, helper, false);
	*mi_out = mi;
	d->last.member = mi;
	d->last.seq = r->seq;
	if (c->replayed) { /* its completion comes from ct_diag_replay's end event */
		serial_check(d, p, mi, r);
		match_try(d, m->comm, r->seq);
		return r->seq;
	}
	if (c->lib == CT_LIB_C10D && !strncmp(c->function, "ProcessGroupGloo::", 18)) {
		p->c10d_gloo = true;
		r->exec_wait = true;
		if (p->npend == CT_DIAG_PENDING) {
			memmove(&p->pend[0], &p->pend[1], (p->npend - 1) * sizeof(p->pend[0]));
			p->npend--;
			d->drops.pending_evicted++;
		}
		p->pend[p->npend].member = mi;
		p->pend[p->npend].seq = r->seq;
		p->npend++;
	}
	inflight_set(p, c->tid, mi, r->seq, false);
	serial_check(d, p, mi, r);
	match_try(d, m->comm, r->seq);
	return r->seq;
}

void ct_diag_call(struct ct_diag *d, const struct ct_diag_call *c)
{
	int16_t mi;

	diag_call(d, c, &mi);
}

void ct_diag_ret(struct ct_diag *d, uint32_t pid, uint32_t tid, uint8_t depth, uint64_t ts)
{
	struct dproc *p;
	struct rec *r;

	if (!d || depth != 0 || !(p = proc_find(d, pid)))
		return;
	for (int i = 0; i < CT_DIAG_INFLIGHT; i++) {
		if (p->fl[i].tid != tid)
			continue;
		r = rec_of(d, p->fl[i].member, p->fl[i].seq);
		if (r && p->fl[i].exec) {
			r->exec_done = true;
			r->end = ts;
			log_end(p, r, ts);
		} else if (r) {
			r->returned = true;
			if (!r->exec_wait) {
				r->end = ts;
				log_end(p, r, ts);
			}
		}
		p->fl[i].tid = 0;
		return;
	}
}

uint64_t ct_diag_replay_call(struct ct_diag *d, const struct ct_diag_call *c, int16_t *member)
{
	return diag_call(d, c, member);
}

void ct_diag_replay_end(struct ct_diag *d, uint32_t pid, int16_t member, uint64_t seq, uint64_t ts)
{
	struct dproc *p = proc_find(d, pid);
	struct rec *r = rec_of(d, member, seq);

	if (!p || !r)
		return;
	r->returned = true;
	r->end = ts;
	log_end(p, r, ts);
}

void ct_diag_proc_exit(struct ct_diag *d, uint32_t pid)
{
	struct dproc *p = d ? proc_find(d, pid) : NULL;
	int pi;

	if (!p || p->exited)
		return;
	p->exited = true;
	pi = proc_index(d, p);
	for (int i = 0; i < d->nmembers; i++) {
		struct member *m = d->members[i];

		if (m->proc != pi)
			continue;
		for (int k = 0; k < CT_DIAG_WINDOW; k++)
			if (m->w[k].seq && !m->w[k].end)
				m->w[k].aborted = true;
	}
}

/* ---- hangs -------------------------------------------------------------------------------- */

static bool blocked(const struct rec *r)
{
	if (!r->seq || r->aborted)
		return false;
	return !r->returned || (r->exec_wait && r->exec_started && !r->exec_done);
}

static void hang_alert(struct ct_diag *d, struct member *m, struct rec *r, uint64_t now)
{
	struct comm *c = d->comms[m->comm];
	struct dproc *p = d->procs[m->proc];
	struct ct_diag_finding *f;
	char me[64], buf[64], dur[32], miss[160], comm[48];
	size_t off = 0;
	int missing = 0, moved = 0;
	char moved_s[160] = "";
	size_t moff = 0;

	r->alerted = true;
	if (d->nhangs == CT_DIAG_HANGS) {
		d->drops.hangs_over_limit++;
		return;
	}
	f = &d->hangs[d->nhangs];
	memset(f, 0, sizeof(*f));
	f->kind = CT_DF_HANG;
	f->severity = CT_DS_ERROR;
	f->pid = p->pid;
	f->tid = r->tid;
	f->ts = r->ts;
	f->ranks[0] = p->rank;
	f->pids[0] = p->pid;
	f->nranks = 1;
	comm_name(c, f->comm, sizeof(f->comm));
	f->function = r->function;
	f->seq = r->seq;
	f->value_ns = now - r->ts;
	fmt_site(f->site, sizeof(f->site), r);
	fmt_stack(f->stack, sizeof(f->stack), r);
	for (int i = 0; i < c->nmembers; i++) {
		struct member *o = d->members[c->members[i]];
		struct dproc *op = d->procs[o->proc];
		const struct rec *orr = rec_of(d, c->members[i], r->seq);
		int w;

		if (o == m)
			continue;
		who(buf, sizeof(buf), op);
		if (o->issued < r->seq) {
			w = snprintf(f->what + off, sizeof(f->what) - off, "%s%s at #%llu%s",
				     missing ? ", " : "", buf, (unsigned long long)o->issued,
				     op->exited ? " exited" : "");
			if (w > 0 && (size_t)w < sizeof(f->what) - off)
				off += (size_t)w;
			missing++;
			if (f->nranks < CT_DIAG_FRANKS) {
				f->ranks[f->nranks] = op->rank;
				f->pids[f->nranks++] = op->pid;
			}
		} else if (o->issued > r->seq || (orr && orr->end)) {
			w = snprintf(moved_s + moff, sizeof(moved_s) - moff, "%s%s at #%llu",
				     moved ? ", " : "", buf, (unsigned long long)o->issued);
			if (w > 0 && (size_t)w < sizeof(moved_s) - moff)
				moff += (size_t)w;
			moved++;
		}
	}
	if (c->nmembers < c->size) {
		int w = snprintf(f->what + off, sizeof(f->what) - off, "%s%d rank%s not traced",
				 missing ? ", " : "", c->size - c->nmembers,
				 c->size - c->nmembers == 1 ? "" : "s");

		if (w > 0 && (size_t)w < sizeof(f->what) - off)
			off += (size_t)w;
	}
	if (!missing && !moved && c->nmembers == c->size) {
		/* Every rank is inside it: a stuck collective, not a rank left behind. */
		r->alerted = false;
		return;
	}
	d->nhangs++;
	snprintf(miss, sizeof(miss), "%s", f->what[0] ? f->what : "none");
	snprintf(comm, sizeof(comm), "%s", f->comm);
	who(me, sizeof(me), p);
	fmt_secs(dur, sizeof(dur), f->value_ns);
	snprintf(f->summary, sizeof(f->summary), "%s blocked %s in %s #%llu on %s; missing: %s%s%s",
		 me, dur, r->function, (unsigned long long)r->seq, comm, miss,
		 moved ? "; moved on: " : "", moved ? moved_s : "");
	if (d->o.alerts) {
		fprintf(d->o.alerts, "commtrace: HANG: %s\n  stack: %s\n", f->summary,
			f->stack[0] ? f->stack : "(no Python stack)");
		fflush(d->o.alerts);
	}
}

int ct_diag_check(struct ct_diag *d, uint64_t now)
{
	int before;

	if (!d || !d->o.hang_ns)
		return 0;
	before = d->nhangs;
	for (int i = 0; i < d->nmembers; i++) {
		struct member *m = d->members[i];

		if (d->comms[m->comm]->ambiguous)
			continue;
		for (int k = 0; k < CT_DIAG_WINDOW; k++) {
			struct rec *r = &m->w[k];

			if (blocked(r) && !r->alerted && now > r->ts && now - r->ts >= d->o.hang_ns)
				hang_alert(d, m, r, now);
		}
	}
	return d->nhangs - before;
}

/* ---- findings ------------------------------------------------------------------------------ */

const char *ct_diag_kind_name(uint8_t kind)
{
	static const char *const names[] = {
	    [CT_DF_LATE_RANK] = "late_rank",
	    [CT_DF_MISMATCH] = "mismatch",
	    [CT_DF_HANG] = "hang",
	    [CT_DF_COMM_CREATION] = "comm_creation_in_steps",
	    [CT_DF_REPEATED_ALLGATHER] = "repeated_full_allgather",
	    [CT_DF_SERIAL_REDUCTIONS] = "serialized_reductions",
	    [CT_DF_TRAFFIC_GROWTH] = "traffic_growth",
	};

	return kind < ARRAY_LEN(names) && names[kind] ? names[kind] : "unknown";
}

const char *ct_diag_severity_name(uint8_t sev)
{
	return sev == CT_DS_ERROR ? "error" : sev == CT_DS_WARNING ? "warning" : "info";
}

static struct ct_diag_finding *finding_new(struct ct_diag *d, uint8_t kind, uint8_t sev)
{
	struct ct_diag_finding *f;

	if (d->nf == CT_DIAG_FINDINGS) {
		d->drops.findings_over_limit++;
		return NULL;
	}
	f = &d->f[d->nf++];
	memset(f, 0, sizeof(*f));
	f->kind = kind;
	f->severity = sev;
	return f;
}

static void add_rank(struct ct_diag_finding *f, const struct dproc *p)
{
	for (int i = 0; i < f->nranks; i++)
		if (f->pids[i] == p->pid)
			return;
	if (f->nranks < CT_DIAG_FRANKS) {
		f->ranks[f->nranks] = p->rank;
		f->pids[f->nranks++] = p->pid;
	}
}

/* Findings of the same kind and call site on several ranks are one finding. */
static struct ct_diag_finding *merged(struct ct_diag *d, uint8_t kind, uint8_t sev,
				      const char *site, const char *site2)
{
	for (int i = 0; i < d->nf; i++) {
		struct ct_diag_finding *f = &d->f[i];

		if (f->kind == kind && !strcmp(f->site, site) && !strcmp(f->site2, site2))
			return f;
	}
	return finding_new(d, kind, sev);
}

static void late_findings(struct ct_diag *d)
{
	for (int i = 0; i < d->nmembers; i++) {
		struct member *m = d->members[i];
		struct dproc *p = d->procs[m->proc];
		struct ct_diag_finding *f;
		char me[64], dur[32];

		if (!m->late || !(f = finding_new(d, CT_DF_LATE_RANK, CT_DS_WARNING)))
			continue;
		add_rank(f, p);
		f->pid = p->pid;
		f->ts = m->late_ts;
		comm_name(d->comms[m->comm], f->comm, sizeof(f->comm));
		f->function = m->late_fn;
		f->seq = m->late_seq;
		f->count = m->late;
		f->total = d->comms[m->comm]->matched;
		f->value_ns = m->late_max;
		snprintf(f->site, sizeof(f->site), "%s", m->late_site);
		who(me, sizeof(me), p);
		fmt_secs(dur, sizeof(dur), m->late_max);
		snprintf(f->summary, sizeof(f->summary),
			 "%s arrived last, %llu of %llu collectives on %s with skew >= %.3f s; "
			 "worst %s at %s #%llu%s%s",
			 me, (unsigned long long)m->late, (unsigned long long)f->total, f->comm,
			 (double)d->o.late_ns / 1e9, dur, m->late_fn,
			 (unsigned long long)m->late_seq, m->late_site[0] ? " from " : "",
			 m->late_site);
	}
}

static void newcomm_findings(struct ct_diag *d, struct dproc *p)
{
	const struct run *b = steady_run(d, &p->st);
	uint64_t n = p->nnc < CT_DIAG_NEWCOMMS ? p->nnc : CT_DIAG_NEWCOMMS, count = 0;
	const struct newcomm *first = NULL;
	struct ct_diag_finding *f;
	char site[256] = "";

	if (!b)
		return;
	for (uint64_t k = p->nnc - n; k < p->nnc; k++) {
		const struct newcomm *c = &p->nc[k % CT_DIAG_NEWCOMMS];

		if (!in_run(b, c->index))
			continue;
		count++;
		if (!first)
			first = c;
	}
	count += p->nc_confirmed;
	if (!count || !first)
		return;
	if (first->has_site)
		fmt_line(site, sizeof(site), &first->site);
	f = merged(d, CT_DF_COMM_CREATION, CT_DS_WARNING, site, "");
	if (!f)
		return;
	add_rank(f, p);
	if (count > f->count)
		f->count = count;
	f->total = b->steps;
	f->pid = p->pid;
	f->function = first->function;
	snprintf(f->site, sizeof(f->site), "%s", site);
	snprintf(f->comm, sizeof(f->comm), "%s", first->comm);
	snprintf(f->summary, sizeof(f->summary),
		 "%llu communicator%s %s inside the training steps (%llu steps of %u "
		 "collectives), first %s%s%s",
		 (unsigned long long)f->count, f->count == 1 ? "" : "s",
		 first->creation ? "created" : "first used", (unsigned long long)b->steps, b->p,
		 first->creation ? "by " : "used by ", first->function, site[0] ? " from " : "");
	if (site[0])
		strncat(f->summary, site, sizeof(f->summary) - strlen(f->summary) - 1);
}

static void allgather_findings(struct ct_diag *d, struct dproc *p)
{
	const struct run *b = steady_run(d, &p->st);
	const struct steps *st = &p->st;
	uint64_t floor = st->n > CT_DIAG_SIGS ? st->n - CT_DIAG_SIGS : 0;

	if (!b)
		return;
	for (uint32_t j = 0; j < b->p; j++) {
		const struct sigent *e0 = NULL;
		uint64_t seen = 0;
		bool same = true;
		struct ct_diag_finding *f;
		char site[256] = "";

		for (uint64_t s = 0; s < b->steps; s++) {
			uint64_t k = b->start + s * b->p + j;
			const struct sigent *e;

			if (k < floor)
				continue;
			e = &st->e[k % CT_DIAG_SIGS];
			if (e->kind != CT_K_ALLGATHER || !e->helper || !e->has_site) {
				same = false;
				break;
			}
			if (!e0)
				e0 = e;
			else if (e->bytes != e0->bytes)
				same = false;
			seen++;
		}
		if (!same || !e0 || seen < d->o.min_repeats)
			continue;
		fmt_line(site, sizeof(site), &e0->site);
		f = merged(d, CT_DF_REPEATED_ALLGATHER, CT_DS_WARNING, site, "");
		if (!f)
			return;
		add_rank(f, p);
		f->pid = p->pid;
		f->function = e0->function;
		f->count = b->steps;
		f->total = b->steps;
		f->bytes = e0->bytes;
		snprintf(f->site, sizeof(f->site), "%s", site);
		snprintf(
		    f->summary, sizeof(f->summary),
		    "the same full-tensor all-gather (%s, %llu bytes, under full_tensor/unshard) "
		    "in every one of %llu steps from %s",
		    e0->function, (unsigned long long)e0->bytes, (unsigned long long)b->steps,
		    site);
	}
}

static void pair_findings(struct ct_diag *d, struct dproc *p)
{
	for (int i = 0; i < p->npairs; i++) {
		const struct pair *x = &p->pairs[i];
		struct ct_diag_finding *f;
		char sa[256] = "", sb[256] = "", ca[48] = "?", cb[48] = "?";

		if (x->count < d->o.min_repeats)
			continue;
		if (x->has_a)
			fmt_line(sa, sizeof(sa), &x->a);
		if (x->has_b)
			fmt_line(sb, sizeof(sb), &x->b);
		f = merged(d, CT_DF_SERIAL_REDUCTIONS, CT_DS_INFO, sa, sb);
		if (!f)
			return;
		if (x->ca >= 0)
			comm_name(d->comms[x->ca], ca, sizeof(ca));
		if (x->cb >= 0)
			comm_name(d->comms[x->cb], cb, sizeof(cb));
		add_rank(f, p);
		f->pid = p->pid;
		f->tid = x->tid;
		f->ts = x->ts;
		f->function = x->fa;
		f->function2 = x->fb;
		if (x->count > f->count)
			f->count = x->count;
		if (x->max_gap > f->value_ns)
			f->value_ns = x->max_gap;
		snprintf(f->site, sizeof(f->site), "%s", sa);
		snprintf(f->site2, sizeof(f->site2), "%s", sb);
		snprintf(f->comm, sizeof(f->comm), "%s", ca);
		snprintf(f->what, sizeof(f->what), "%s then %s", ca, cb);
		snprintf(f->summary, sizeof(f->summary),
			 "%llu times %s on %s, then %s on %s issued only after it completed (gap "
			 "<= %.3f ms, same thread): they could overlap; from %s then %s",
			 (unsigned long long)f->count, x->fa, ca, x->fb, cb,
			 (double)f->value_ns / 1e6, sa[0] ? sa : "?", sb[0] ? sb : "?");
	}
}

static void growth_findings(struct ct_diag *d, struct dproc *p)
{
	const struct run *b = steady_run(d, &p->st);
	struct ct_diag_finding *f;
	char me[64];

	/* Steady increase over min_repeats steps, to at least 1.25x. */
	if (!b || b->growth < d->o.min_repeats || b->last_vol * 4 < b->base_vol * 5)
		return;
	f = merged(d, CT_DF_TRAFFIC_GROWTH, CT_DS_WARNING, "", ""); /* one for all ranks */
	if (!f)
		return;
	add_rank(f, p);
	f->pid = p->pid;
	f->count = b->growth;
	f->total = b->steps;
	f->bytes = b->base_vol;
	f->bytes2 = b->last_vol;
	snprintf(me, sizeof(me), "%d rank%s", f->nranks, f->nranks == 1 ? "" : "s");
	snprintf(f->summary, sizeof(f->summary),
		 "%s: bytes per step grew %u steps in a row, %llu -> %llu (steps of %u "
		 "collectives)",
		 me, b->growth, (unsigned long long)b->base_vol, (unsigned long long)b->last_vol,
		 b->p);
}

int ct_diag_findings(struct ct_diag *d, const struct ct_diag_finding **out)
{
	d->nf = 0;
	for (int i = 0; i < d->nhangs; i++) {
		struct ct_diag_finding *f = finding_new(d, CT_DF_HANG, CT_DS_ERROR);

		if (f)
			*f = d->hangs[i];
	}
	for (int i = 0; i < d->ncomms; i++) {
		struct comm *c = d->comms[i];
		struct ct_diag_finding *f;

		if (!c->has_mismatch || !(f = finding_new(d, CT_DF_MISMATCH, CT_DS_ERROR)))
			continue;
		*f = c->mismatch;
		f->count = c->mismatches;
		f->total = c->matched;
	}
	late_findings(d);
	for (int i = 0; i < d->nprocs; i++) {
		newcomm_findings(d, d->procs[i]);
		allgather_findings(d, d->procs[i]);
		pair_findings(d, d->procs[i]);
		growth_findings(d, d->procs[i]);
	}
	*out = d->f;
	return d->nf;
}

/* ---- --metrics ---------------------------------------------------------------------------- */

void ct_diag_live(struct ct_diag *d, struct ct_diag_live *out)
{
	const struct ct_diag_finding *f;
	uint64_t now[CT_DIAG_KINDS + 1] = {0};
	int n = ct_diag_findings(d, &f);

	memset(out, 0, sizeof(*out));
	/* A counter never goes down: a step-based finding that a later glitch hides stays. */
	for (int i = 0; i < n; i++)
		if (f[i].kind <= CT_DIAG_KINDS)
			now[f[i].kind]++;
	for (int k = 1; k <= CT_DIAG_KINDS; k++) {
		if (now[k] > d->kind_hw[k])
			d->kind_hw[k] = now[k];
		out->by_kind[k] = d->kind_hw[k];
	}
	{
		bool hung[CT_DIAG_PROCS] = {false};

		for (int k = 0; k < d->nmembers; k++) {
			const struct member *m = d->members[k];

			for (int w = 0; w < CT_DIAG_WINDOW && !hung[m->proc]; w++)
				hung[m->proc] = m->w[w].alerted && blocked(&m->w[w]);
		}
		for (int i = 0; i < d->nprocs; i++)
			out->ranks_hung += hung[i];
	}
	out->ranks_late = d->matched && d->last_late ? 1 : 0;
	out->matched = d->matched;
	out->skew_max_ns = d->skew_max;
	out->skew_last_ns = d->skew_last;
}

bool ct_diag_proc_late(const struct ct_diag *d, int i, int *rank, uint64_t *late)
{
	if (i < 0 || i >= d->nprocs)
		return false;
	*rank = d->procs[i]->rank;
	*late = 0;
	for (int k = 0; k < d->nmembers; k++)
		if (d->members[k]->proc == i)
			*late += d->members[k]->late;
	return true;
}

const struct ct_diag_opts *ct_diag_options(const struct ct_diag *d)
{
	return &d->o;
}

/* ---- diag_log accessors (diag_json.c) -------------------------------------------------------- */

bool ct_diag_log_get(const struct ct_diag *d, uint32_t pid, const struct ct_diag_logrec **recs,
		     uint32_t *n)
{
	const struct dproc *p = proc_find((struct ct_diag *)d, pid);

	if (!p)
		return false;
	*recs = p->log;
	*n = p->nlog;
	return true;
}

int ct_diag_log_stack(const struct ct_diag *d, uint32_t pid, int i, const struct ct_stack_line **l)
{
	const struct dproc *p = proc_find((struct ct_diag *)d, pid);

	if (!p || i < 0 || i >= p->nstacks)
		return 0;
	*l = p->stacks[i].l;
	return p->stacks[i].n;
}

int ct_diag_log_nstacks(const struct ct_diag *d, uint32_t pid)
{
	const struct dproc *p = proc_find((struct ct_diag *)d, pid);

	return p ? p->nstacks : 0;
}

/* ---- aggregates ---------------------------------------------------------------------------- */

const struct ct_diag_drops *ct_diag_drops(const struct ct_diag *d)
{
	return &d->drops;
}

uint64_t ct_diag_matched(const struct ct_diag *d)
{
	return d->matched;
}

int ct_diag_top(const struct ct_diag *d, const struct ct_diag_top **out)
{
	*out = d->top;
	return d->ntop;
}

int ct_diag_nprocs(const struct ct_diag *d)
{
	return d->nprocs;
}

bool ct_diag_proc_wait(const struct ct_diag *d, int i, uint32_t *pid, int *rank, uint64_t *wait_ns,
		       uint64_t *matched)
{
	if (i < 0 || i >= d->nprocs)
		return false;
	*pid = d->procs[i]->pid;
	*rank = d->procs[i]->rank;
	*wait_ns = d->procs[i]->wait_ns;
	*matched = d->procs[i]->matched;
	return true;
}

bool ct_diag_proc_steps(const struct ct_diag *d, int i, struct ct_diag_steps_info *si)
{
	const struct run *b;

	if (i < 0 || i >= d->nprocs)
		return false;
	b = steady_run(d, &d->procs[i]->st);
	memset(si, 0, sizeof(*si));
	si->pid = d->procs[i]->pid;
	si->rank = d->procs[i]->rank;
	si->signatures = d->procs[i]->st.n;
	if (b) {
		si->period = b->p;
		si->steps = b->steps;
		si->first_step_bytes = b->first_vol;
		si->last_step_bytes = b->last_vol;
		si->growth_steps = b->growth;
	}
	return true;
}

int ct_diag_ncomms(const struct ct_diag *d)
{
	return d->ncomms;
}

bool ct_diag_comm_info(const struct ct_diag *d, int i, char *name, size_t len, int *members,
		       uint64_t *collectives, bool *ambiguous)
{
	if (i < 0 || i >= d->ncomms)
		return false;
	comm_name(d->comms[i], name, len);
	*members = d->comms[i]->nmembers;
	*collectives = d->comms[i]->collectives;
	*ambiguous = d->comms[i]->ambiguous;
	return true;
}

bool ct_diag_call_id(const struct ct_diag *d, uint32_t pid, uint32_t tid, uint64_t ts, int *comm,
		     uint64_t *seq)
{
	if (!d || d->last.member < 0 || d->last.pid != pid || d->last.tid != tid ||
	    d->last.ts != ts)
		return false;
	*comm = d->members[d->last.member]->comm;
	*seq = d->last.seq;
	return true;
}

void ct_diag_print(struct ct_diag *d, FILE *out, bool verbose)
{
	const struct ct_diag_finding *f;
	const struct ct_diag_drops *dr = &d->drops;
	int n = ct_diag_findings(d, &f), ranks = 0;
	bool late = false;
	char a[32];

	for (int i = 0; i < d->nprocs; i++)
		ranks += d->procs[i]->matched > 0;
	for (int i = 0; i < n; i++)
		late |= f[i].kind == CT_DF_LATE_RANK;
	if (n)
		fprintf(out,
			"commtrace: diagnosis: %d finding%s; %llu collectives matched across ranks "
			"on %d communicator%s\n",
			n, n == 1 ? "" : "s", (unsigned long long)d->matched, d->ncomms,
			d->ncomms == 1 ? "" : "s");
	else if (!d->matched)
		fprintf(out,
			"commtrace: diagnosis: no collective to match across ranks (trace "
			"every rank of a communicator with one tracer, or merge the reports)\n");
	else {
		/* A healthy job: one line, with the worst skew as the measure of how healthy. */
		fprintf(out,
			"commtrace: diagnosis: %d ranks agree on %llu collectives over %d "
			"communicator%s: no mismatch, no hang, no late rank",
			ranks, (unsigned long long)d->matched, d->ncomms,
			d->ncomms == 1 ? "" : "s");
		if (d->ntop && d->top[0].skew_ns) {
			fmt_secs(a, sizeof(a), d->top[0].skew_ns);
			fprintf(out, "; worst skew %s (%s #%llu %s, last rank %d)", a,
				d->top[0].comm, (unsigned long long)d->top[0].seq,
				d->top[0].function, d->top[0].last_rank);
		}
		fputc('\n', out);
	}
	for (int i = 0; i < n; i++)
		fprintf(out, "  [%s] %s: %s\n", ct_diag_severity_name(f[i].severity),
			ct_diag_kind_name(f[i].kind), f[i].summary);
	/* The evidence of a late rank, or what -v asks for. */
	for (int i = 0; (verbose || late) && i < d->ntop && d->top[i].skew_ns; i++) {
		fmt_secs(a, sizeof(a), d->top[i].skew_ns);
		fprintf(out, "  skew: %s #%llu %s %s, last rank %d (pid %u)\n", d->top[i].comm,
			(unsigned long long)d->top[i].seq, d->top[i].function, a,
			d->top[i].last_rank, d->top[i].last_pid);
	}
	for (int i = 0; (verbose || late) && i < d->nprocs; i++) {
		const struct dproc *p = d->procs[i];

		if (p->matched) {
			fmt_secs(a, sizeof(a), p->wait_ns);
			fprintf(out,
				"  waiting for other ranks: rank %d (pid %u) %s over %llu "
				"collectives\n",
				p->rank, p->pid, a, (unsigned long long)p->matched);
		}
	}
	for (int i = 0; verbose && i < d->nprocs; i++) {
		const struct dproc *p = d->procs[i];
		struct ct_diag_steps_info si;

		ct_diag_proc_steps(d, i, &si);
		if (si.period)
			fprintf(
			    out,
			    "  steps: rank %d (pid %u) %llu steps of %u collectives, %llu -> %llu "
			    "bytes per step\n",
			    p->rank, p->pid, (unsigned long long)si.steps, si.period,
			    (unsigned long long)si.first_step_bytes,
			    (unsigned long long)si.last_step_bytes);
	}
	if (dr->comms_over_limit || dr->members_over_limit || dr->procs_over_limit ||
	    dr->window_evicted || dr->handles_evicted || dr->pending_evicted ||
	    dr->executions_unmatched || dr->ambiguous || dr->hangs_over_limit ||
	    dr->findings_over_limit || dr->newcomm_evicted || dr->log_dropped ||
	    dr->log_stacks_dropped)
		fprintf(
		    out,
		    "  diagnosis limits: communicators %llu, members %llu, processes %llu, "
		    "window evicted %llu, handles evicted %llu, pending evicted %llu, "
		    "executions unmatched %llu, ambiguous %llu, hangs %llu, findings %llu, "
		    "new communicators evicted %llu, log %llu, log stacks %llu\n",
		    (unsigned long long)dr->comms_over_limit,
		    (unsigned long long)dr->members_over_limit,
		    (unsigned long long)dr->procs_over_limit,
		    (unsigned long long)dr->window_evicted, (unsigned long long)dr->handles_evicted,
		    (unsigned long long)dr->pending_evicted,
		    (unsigned long long)dr->executions_unmatched, (unsigned long long)dr->ambiguous,
		    (unsigned long long)dr->hangs_over_limit,
		    (unsigned long long)dr->findings_over_limit,
		    (unsigned long long)dr->newcomm_evicted, (unsigned long long)dr->log_dropped,
		    (unsigned long long)dr->log_stacks_dropped);
}
