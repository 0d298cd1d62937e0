// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "tree.h"
#include "util/hash.h"
#include "util/intern.h"

int ct_tree_init(struct ct_tree *t)
{
	memset(t, 0, sizeof(*t));
	t->first_root = t->last_root = -1;
	return 0;
}

/*
 * The node pool is reserved whole at its first node, and takes memory only as its pages are
 * used: it never moves. Grown by doubling, it was copied each time, and the copies (with
 * their page faults) were a fifth of the reader's time while a trace's first 20,000
 * collectives came in.
 */
#define POOL_BYTES ((size_t)CT_TREE_MAX_NODES * sizeof(struct ct_node))
/*
 * Nodes whose pages are made present at once, before the first of them is used: a page's
 * first touch is a fault, which costs about as much as a breakpoint in a VM; one madvise
 * for 1024 nodes costs much less than their 60 faults (where the kernel has no
 * MADV_POPULATE_WRITE, the pages fault in as before).
 */
#define POOL_CHUNK 1024

/*
 * The collectives' stacks, one copy of each (there are at most as many as collective nodes),
 * in STACK_BUCKETS chains. A copy in every node was three fifths of its size. Not
 * util/intern.c's ct_intern_blob: that table hashes byte by byte (up to 384 bytes a stack,
 * at every collective), and its budget is shared with every name, which distinct stacks
 * could use up; this one is bounded by the node cap and freed with the tree.
 */
#define STACK_BUCKETS 1024

struct tree_stack {
	struct tree_stack *next;
	int n;
	struct ct_stack_line lines[];
};

static bool same_lines(const struct ct_stack_line *a, const struct ct_stack_line *b, int n)
{
	for (int i = 0; i < n; i++)
		if (a[i].qualname != b[i].qualname || a[i].file != b[i].file ||
		    a[i].line != b[i].line)
			return false;
	return true;
}

/* The copy of stack s (n lines, names interned) the tree keeps; NULL when out of memory. */
static const struct ct_stack_line *stack_copy(struct ct_tree *t, const struct ct_stack_line *s,
					      int n)
{
	uint64_t h = (uint64_t)n;
	struct tree_stack *e, **b;

	for (int i = 0; i < n; i++)
		h = ct_hash_mix(h ^ (uintptr_t)s[i].qualname,
				(uintptr_t)s[i].file ^ ((uint64_t)(uint32_t)s[i].line << 32));
	if (!t->stacks && !(t->stacks = calloc(STACK_BUCKETS, sizeof(*t->stacks))))
		return NULL;
	b = &t->stacks[h % STACK_BUCKETS];
	for (e = *b; e; e = e->next)
		if (e->n == n && same_lines(e->lines, s, n))
			return e->lines;
	e = malloc(sizeof(*e) + (size_t)n * sizeof(*s));
	if (!e)
		return NULL;
	e->n = n;
	memcpy(e->lines, s, (size_t)n * sizeof(*s));
	e->next = *b;
	*b = e;
	return e->lines;
}

void ct_tree_free(struct ct_tree *t)
{
	if (t->nodes)
		munmap(t->nodes, POOL_BYTES);
	t->nodes = NULL;
	t->n = 0;
	for (int i = 0; t->stacks && i < STACK_BUCKETS; i++)
		while (t->stacks[i]) {
			struct tree_stack *e = t->stacks[i];

			t->stacks[i] = e->next;
			free(e);
		}
	free(t->stacks);
	t->stacks = NULL;
}

/* The pages of nodes [i, i + POOL_CHUNK) made present now, where the kernel can. */
static void populate(struct ct_tree *t, int32_t i)
{
	int32_t end = i + POOL_CHUNK < CT_TREE_MAX_NODES ? i + POOL_CHUNK : CT_TREE_MAX_NODES;
	uintptr_t from = (uintptr_t)&t->nodes[i] & ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1);

	(void)madvise((void *)from, (uintptr_t)&t->nodes[end] - from, MADV_POPULATE_WRITE);
}

static int32_t new_node(struct ct_tree *t, int32_t parent, uint8_t type, const char *name)
{
	struct ct_node *n;
	int32_t i;

	if (!t->nodes) {
		void *m = mmap(NULL, POOL_BYTES, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (m == MAP_FAILED)
			return -1;
		t->nodes = m;
	}
	if (t->n == CT_TREE_MAX_NODES)
		return -1;
	i = t->n++;
	if (i % POOL_CHUNK == 0)
		populate(t, i);
	n = &t->nodes[i];
	memset(n, 0, sizeof(*n));
	n->type = type;
	n->name = name;
	n->parent = parent;
	n->first_child = n->last_child = n->next = -1;
	n->depth = parent >= 0 ? t->nodes[parent].depth + 1 : 0;
	if (parent < 0) {
		if (t->last_root >= 0)
			t->nodes[t->last_root].next = i;
		else
			t->first_root = i;
		t->last_root = i;
	} else {
		struct ct_node *p = &t->nodes[parent];

		if (p->last_child >= 0)
			t->nodes[p->last_child].next = i;
		else
			p->first_child = i;
		p->last_child = i;
	}
	return i;
}

static struct ct_tree_thread *thread_of(struct ct_tree *t, uint32_t tid)
{
	struct ct_tree_thread *lru = &t->threads[0];

	t->clock++;
	for (int i = 0; i < CT_TREE_MAX_THREADS; i++) {
		if (t->threads[i].tid == tid) {
			t->threads[i].used = t->clock;
			return &t->threads[i];
		}
		if (t->threads[i].used < lru->used)
			lru = &t->threads[i];
	}
	/* A thread not seen lately starts a fresh path: it cannot continue an old one. */
	memset(lru, 0, sizeof(*lru));
	lru->tid = tid;
	lru->used = t->clock;
	return lru;
}

static void count(struct ct_tree *t, const char *name)
{
	t->total++;
	for (int i = 0; i < t->ncounts; i++) {
		if (t->counts[i].name == name) {
			t->counts[i].n++;
			return;
		}
	}
	if (t->ncounts < (int)(sizeof(t->counts) / sizeof(t->counts[0]))) {
		t->counts[t->ncounts].name = name;
		t->counts[t->ncounts].n = 1;
		t->ncounts++;
	}
}

static bool same_frame(const struct ct_node *o, const struct ct_tree_frame *f)
{
	return o->code == f->code && o->self == f->self;
}

/* Whether node o already has a child for frame f (a call of it that came before). */
static bool has_child(const struct ct_tree *t, const struct ct_node *o,
		      const struct ct_tree_frame *f)
{
	for (int32_t c = o->first_child; c >= 0; c = t->nodes[c].next)
		if (same_frame(&t->nodes[c], f))
			return true;
	return false;
}

/*
 * How much of the thread's open path a call's path continues. A level continues when the
 * same frame (code, self) is there and either went on (a later instruction) or, at the same
 * instruction, calls a frame it has not called yet: the next layer of a loop (`for layer in
 * self.layers: x = layer(x)`), which must be a sibling, not a new tree. A path that goes on
 * nowhere (every level at its old instruction, calling what it called before) is the next
 * invocation: a second forward reaches the same call sites again.
 */
static int continued(const struct ct_tree *t, const struct ct_tree_path *op,
		     const struct ct_tree_frame *path, int npath)
{
	bool went_on = false;
	int keep = 0;

	for (int i = 0; i < npath && i < op->nopen; i++) {
		const struct ct_node *o = &t->nodes[op->open[i]];
		const struct ct_tree_frame *f = &path[i];

		if (!same_frame(o, f) || f->instr < o->last_instr)
			break;
		if (f->instr > o->last_instr) {
			went_on = true;
		} else if (i + 1 < npath &&
			   !(i + 1 < op->nopen &&
			     same_frame(&t->nodes[op->open[i + 1]], &path[i + 1]))) {
			if (has_child(t, o, &path[i + 1]) && !path[i + 1].again)
				break;	/* it calls again what it called before: a new invocation */
			went_on = true; /* a new callee at the same call site: a loop */
		} else if (i + 1 >= npath) {
			break; /* the innermost frame, at the same place: a call of its own */
		}
		keep = i + 1;
	}
	return went_on ? keep : 0;
}

/* A node for the path frame f under parent, or -1 (the pool is full). */
static int32_t frame_node(struct ct_tree *t, int32_t parent, const struct ct_tree_frame *f,
			  uint8_t phase)
{
	int32_t node = new_node(t, parent, f->type, f->name);
	struct ct_node *n;

	if (node < 0)
		return -1;
	n = &t->nodes[node];
	n->code = f->code;
	n->self = f->self;
	n->last_instr = f->instr;
	n->phase = phase;
	n->src = f->src;
	n->dst = f->dst;
	return node;
}

/*
 * --ops: the redistribution and compiled graph a collective is in, from its stack, under
 * the innermost node open (neither is entered by a call --ops sees on 3.11+: a
 * redistribution is entered by Python-to-Python calls, a graph's code is generated). One
 * node for the redistribution's frames past that node's frame, one per graph; the parent
 * for the collective.
 */
static int32_t stack_nodes_below(struct ct_tree *t, int32_t parent, const struct ct_tree_call *c)
{
	int from = 0, npath = c->npath < CT_TREE_MAX_DEPTH - 1 ? c->npath : CT_TREE_MAX_DEPTH - 1;
	bool redistributed = false;

	for (int j = npath - 1; parent >= 0 && j >= 0; j--)
		if (same_frame(&t->nodes[parent], &c->path[j])) {
			from = j + 1;
			break;
		}
	/* an op --ops saw dispatched (torch 2.x): its __torch_dispatch__ frame is the op's */
	for (int j = npath - 1;
	     parent >= 0 && !from && t->nodes[parent].type == CT_NODE_OP && j >= 0; j--)
		if (c->path[j].type == CT_NODE_OP)
			from = j + 1;
	if (parent >= 0 && !from)
		return parent; /* the open node is not on its stack: nothing to line up */
	for (int i = from; i < npath; i++) {
		const struct ct_tree_frame *f = &c->path[i];
		int32_t node;

		if (f->type == CT_NODE_REDISTRIBUTE ? redistributed : f->type != CT_NODE_GRAPH)
			continue;
		redistributed |= f->type == CT_NODE_REDISTRIBUTE; /* its outermost frame */
		node = parent >= 0 ? t->nodes[parent].last_child : t->last_root;
		if (f->type == CT_NODE_GRAPH && node >= 0 && same_frame(&t->nodes[node], f) &&
		    f->instr > t->nodes[node].last_instr) {
			/* the same run of the graph, gone on to a later collective */
			t->nodes[node].last_instr = f->instr;
			parent = node;
			continue;
		}
		node = frame_node(t, parent, f, c->phase);
		if (node < 0)
			break;
		parent = node;
	}
	return parent;
}

/*
 * --ops: open a backward pass's module path beside the thread's open path, reusing its
 * nodes as far as they are the same frames (one node per module and pass: the pass ends
 * at the thread's next module entry, ct_tree_enter). The innermost node, -1 for an empty
 * path, or -2 when a node could not be made.
 */
static int32_t open_beside(struct ct_tree *t, struct ct_tree_thread *th,
			   const struct ct_tree_frame *path, int npath)
{
	struct ct_tree_path *side = &th->side;
	int32_t parent, node;
	int keep = 0;

	if (npath > CT_TREE_MAX_DEPTH - 2)
		npath = CT_TREE_MAX_DEPTH - 2; /* room for the call under it */
	while (keep < npath && keep < side->nopen &&
	       same_frame(&t->nodes[side->open[keep]], &path[keep]))
		keep++;
	side->nopen = keep;
	side->phase = CT_PHASE_BACKWARD;
	th->path.phase = CT_PHASE_BACKWARD; /* the next forward a tree of its own */
	parent = keep ? side->open[keep - 1] : -1;
	for (int i = keep; i < npath; i++) {
		node = frame_node(t, parent, &path[i], CT_PHASE_BACKWARD);
		if (node < 0) {
			t->dropped++;
			return -2;
		}
		side->open[side->nopen++] = node;
		parent = node;
	}
	return parent;
}

/*
 * The thread's open path continued by path (outermost first) as far as it goes on, and new
 * nodes for the rest. The innermost node, -1 for an empty path, or -2 when a node could not
 * be made.
 */
static int32_t open_path(struct ct_tree *t, struct ct_tree_path *op,
			 const struct ct_tree_frame *path, int npath, uint8_t phase)
{
	int32_t parent, node;
	int keep;

	if (npath > CT_TREE_MAX_DEPTH - 1)
		npath = CT_TREE_MAX_DEPTH - 1;
	/* A backward pass after a forward (or the next forward after it) starts a tree of its
	 * own: the modules of the one are not open in the other. */
	if (op->phase != phase)
		op->nopen = 0;
	op->phase = phase;
	keep = continued(t, op, path, npath);
	op->nopen = keep;
	for (int i = 0; i < keep; i++)
		t->nodes[op->open[i]].last_instr = path[i].instr;
	parent = keep ? op->open[keep - 1] : -1;
	for (int i = keep; i < npath; i++) {
		node = frame_node(t, parent, &path[i], phase);
		if (node < 0) {
			t->dropped++;
			return -2;
		}
		op->open[op->nopen++] = node;
		parent = node;
	}
	return parent;
}

int32_t ct_tree_add_call(struct ct_tree *t, const struct ct_tree_call *c)
{
	struct ct_tree_thread *th = thread_of(t, c->tid);
	struct ct_tree_path *op = &th->path;
	int32_t parent = -1, node;
	struct ct_node *n;

	count(t, c->helper ? c->helper : c->function);
	if (c->root_class)
		t->root_class = c->root_class;
	if (c->under_open) { /* --ops: the open path is known from entries and exits */
		parent = op->nopen ? op->open[op->nopen - 1] : -1;
		parent = stack_nodes_below(t, parent, c);
		goto collective;
	}
	if (c->beside) { /* --ops: a backward collective, at its forward's modules */
		parent = open_beside(t, th, c->path, c->npath);
		if (parent == -2)
			return -1;
		goto collective;
	}
	parent = open_path(t, op, c->path, c->npath, c->phase);
	if (parent == -2)
		return -1;
collective:
	node = new_node(t, parent, CT_NODE_COLLECTIVE, c->helper ? c->helper : c->function);
	if (node < 0) {
		t->dropped++;
		return -1;
	}
	n = &t->nodes[node];
	n->phase = c->phase;
	n->truncated = c->truncated;
	n->function = c->function;
	n->op = c->op;
	n->in_ndim = c->in_ndim;
	memcpy(n->in_shape, c->in_shape, sizeof(n->in_shape));
	n->kind = c->kind;
	n->dtype = c->dtype;
	n->tid = c->tid;
	n->group_size = c->group_size;
	n->rank_in_group = c->rank_in_group;
	n->ts = c->ts;
	n->bytes = c->bytes;
	if (c->nstack > 0) { /* a call without a stack may have none to point at */
		n->nstack = c->nstack < CT_TREE_MAX_STACK ? c->nstack : CT_TREE_MAX_STACK;
		n->stack = stack_copy(t, c->stack, n->nstack);
		if (!n->stack) {
			n->nstack = 0;
			t->stacks_lost++;
		}
	}
	return node;
}

static int32_t enter_under(struct ct_tree *t, int32_t parent, uint32_t tid, uint8_t type,
			   const char *name, uint64_t code, uint64_t self, uint64_t ts)
{
	int32_t node = new_node(t, parent, type, name);

	if (node < 0) {
		t->dropped++;
		return -1;
	}
	t->nodes[node].code = code;
	t->nodes[node].self = self;
	t->nodes[node].tid = tid;
	t->nodes[node].ts = ts;
	if (parent >= 0) /* a call inside a backward op is the backward's */
		t->nodes[node].phase = t->nodes[parent].phase;
	return node;
}

int32_t ct_tree_enter(struct ct_tree *t, uint32_t tid, uint8_t type, const char *name,
		      uint64_t code, uint64_t self, uint64_t ts)
{
	struct ct_tree_thread *th = thread_of(t, tid);
	int32_t node;

	if (th->path.nopen >= CT_TREE_MAX_DEPTH - 1) {
		t->dropped++;
		return -1;
	}
	if (type == CT_NODE_MODULE)
		th->side.nopen = 0; /* a forward: the backward pass beside is over */
	node = enter_under(t, th->path.nopen ? th->path.open[th->path.nopen - 1] : -1, tid, type,
			   name, code, self, ts);
	if (node >= 0)
		th->path.open[th->path.nopen++] = node;
	return node;
}

int32_t ct_tree_enter_beside(struct ct_tree *t, uint32_t tid, const struct ct_tree_frame *path,
			     int npath, uint8_t type, const char *name, uint64_t code,
			     uint64_t self, uint64_t ts)
{
	struct ct_tree_thread *th = thread_of(t, tid);
	int32_t parent = open_beside(t, th, path, npath), node;

	if (parent == -2)
		return -1;
	node = enter_under(t, parent, tid, type, name, code, self, ts);
	if (node >= 0)
		t->nodes[node].phase = CT_PHASE_BACKWARD;
	return node;
}

int32_t ct_tree_enter_path(struct ct_tree *t, uint32_t tid, const struct ct_tree_frame *path,
			   int npath, const struct ct_tree_frame *call, uint64_t ts)
{
	struct ct_tree_thread *th = thread_of(t, tid);
	struct ct_tree_frame full[CT_TREE_MAX_DEPTH];
	int32_t node;

	if (npath > CT_TREE_MAX_DEPTH - 2)
		npath = CT_TREE_MAX_DEPTH - 2; /* room for the call */
	memcpy(full, path, (size_t)npath * sizeof(*path));
	full[npath] = *call;
	th->side.nopen = 0; /* a forward: the backward pass beside is over */
	node = open_path(t, &th->path, full, npath + 1, CT_PHASE_FORWARD);
	if (node < 0)
		return -1;
	t->nodes[node].tid = tid;
	t->nodes[node].ts = ts;
	return node;
}

void ct_tree_hold(struct ct_tree *t, uint32_t tid, int32_t node)
{
	struct ct_tree_thread *th = thread_of(t, tid);

	if (node >= 0 && th->path.nopen < CT_TREE_MAX_DEPTH)
		th->path.open[th->path.nopen++] = node;
}

void ct_tree_set_dispatcher(struct ct_tree *t, int32_t node, const char *cls)
{
	if (node >= 0 && node < t->n)
		t->nodes[node].dispatcher = cls;
}

void ct_tree_set_values(struct ct_tree *t, int32_t node, bool outputs, const struct ct_values *v)
{
	const struct ct_values *iv;

	if (node < 0 || node >= t->n)
		return;
	iv = ct_intern_blob(v, sizeof(*v));
	if (!iv)
		t->values_lost++;
	if (outputs)
		t->nodes[node].outputs = iv;
	else
		t->nodes[node].inputs = iv;
}

size_t ct_shape_format(char *buf, size_t len, const int64_t *shape, int ndim)
{
	size_t o = 0;

	if (len)
		buf[0] = '\0';
	for (int d = 0; d < ndim && o < len; d++)
		o += (size_t)snprintf(buf + o, len - o, "%s%lld", d ? ", " : "[",
				      (long long)shape[d]);
	if (ndim >= 0 && o < len)
		o += (size_t)snprintf(buf + o, len - o, "%s", ndim ? "]" : "[]");
	return o < len ? o : len;
}

size_t ct_shape_tuple_format(char *buf, size_t len, const int64_t *shape, int ndim)
{
	size_t off;

	if (!len)
		return 0;
	buf[0] = '\0';
	if (ndim < 0)
		return 0;
	/* "[4, 16]" made Python's tuple repr: "(4, 16)", "(4,)", "()" */
	off = ct_shape_format(buf, len, shape, ndim);
	if (off >= 2) {
		buf[0] = '(';
		buf[off - 1] = ')';
		if (ndim == 1 && off + 1 < len) {
			buf[off - 1] = ',';
			buf[off++] = ')';
			buf[off] = '\0';
		}
	}
	return off;
}

const char *ct_shape_unknown_why(int ndim)
{
	switch (ndim) {
	case CT_SHAPE_FREED:
		return "freed";
	case CT_SHAPE_NO_LAYOUT:
		return "no_layout";
	case CT_SHAPE_UNREADABLE:
		return "unreadable";
	default:
		return NULL;
	}
}

bool ct_kind_keeps_shape(const char *kind)
{
	return kind && (!strcmp(kind, "all_reduce") || !strcmp(kind, "broadcast"));
}

void ct_value_format(const struct ct_value *v, char *buf, size_t len)
{
	size_t o =
	    (size_t)snprintf(buf, len, "%s%s", v->kind ? v->kind : "?", v->no_layout ? "[?]" : "");

	if (o < len)
		ct_shape_format(buf + o, len - o, v->shape, v->ndim);
}

void ct_values_format(const struct ct_values *vs, char *buf, size_t len)
{
	char one[256];
	size_t o = (size_t)snprintf(buf, len, "[");

	for (int i = 0; i < vs->n && o < len; i++) {
		ct_value_format(&vs->v[i], one, sizeof(one));
		o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? ", " : "", one);
	}
	if (vs->total > vs->n && o < len)
		o += (size_t)snprintf(buf + o, len - o, "%s+%u more", vs->n ? ", " : "",
				      vs->total - vs->n);
	if (o < len)
		snprintf(buf + o, len - o, "]");
}

void ct_tree_exit(struct ct_tree *t, uint32_t tid, int32_t node, uint64_t ts)
{
	struct ct_tree_thread *th = thread_of(t, tid);

	if (node < 0 || node >= t->n)
		return;
	for (int i = th->path.nopen - 1; i >= 0; i--) {
		if (th->path.open[i] == node) {
			th->path.nopen = i; /* and whatever an exit skipped above it */
			break;
		}
	}
	if (ts > t->nodes[node].ts)
		t->nodes[node].duration = ts - t->nodes[node].ts;
}

void ct_tree_rebind_open(struct ct_tree *t, uint32_t tid, uint64_t self)
{
	struct ct_tree_thread *th = thread_of(t, tid);

	if (th->path.nopen)
		t->nodes[th->path.open[th->path.nopen - 1]].self = self;
}

const struct ct_node *ct_tree_open_node(struct ct_tree *t, uint32_t tid, uint8_t type)
{
	struct ct_tree_thread *th = thread_of(t, tid);

	for (int i = th->path.nopen - 1; i >= 0; i--)
		if (!type || t->nodes[th->path.open[i]].type == type)
			return &t->nodes[th->path.open[i]];
	return NULL;
}

void ct_tree_set_duration(struct ct_tree *t, int32_t node, uint64_t duration)
{
	if (node >= 0 && node < t->n)
		t->nodes[node].duration = duration;
}
