/* SPDX-License-Identifier: MIT */
/*
 * The call tree of one process, seed 000's `records`: module → op →
 * redistribute → collective (→ compiled graph → collective, under torch.compile), rebuilt from the
 * Python stacks taken at each collective. Bounded: a node pool with a cap and a dropped count, a
 * depth cap.
 *
 * Invocations are told apart without entry/exit events: a node on a thread's
 * open path is reused by the next call if the same frame (same code, same self)
 * went on to a later instruction, or calls, from the same instruction, a frame
 * it had not called yet (the layers of a loop are siblings under one node). A
 * second forward, which reaches the same call sites again, gets new nodes, and
 * so does a backward pass. (Two collectives from one call site in one module
 * invocation become two module nodes.)
 */
#ifndef CT_TREE_H
#define CT_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CT_TREE_MAX_NODES   20000 /* per process */
#define CT_TREE_MAX_DEPTH   32
#define CT_TREE_MAX_THREADS 16
#define CT_TREE_MAX_STACK   16 /* frames kept per collective for the JSON "stack" */

enum ct_node_type {
	CT_NODE_MODULE = 1,
	CT_NODE_OP,
	CT_NODE_REDISTRIBUTE,
	CT_NODE_COLLECTIVE,
	CT_NODE_GRAPH, /* a compiled graph run (torch.compile) */
};

enum ct_phase {
	CT_PHASE_FORWARD = 0,
	CT_PHASE_BACKWARD,
};

struct ct_stack_line {
	const char *qualname; /* interned */
	const char *file;
	int line;
};

/* One interesting frame of a stack, outermost first. */
struct ct_tree_frame {
	uint8_t type;	  /* enum ct_node_type (not COLLECTIVE) */
	const char *name; /* interned display name */
	uint64_t code, self, instr;
	/* a redistribution: its placements before and after ("(Partial(sum),)"), or NULL */
	const char *src, *dst;
	/* a call one instruction may make again in the same invocation of its caller: an op
	 * --ops saw dispatched (F.linear: view, t, addmm, view), not a frame of its own */
	bool again;
};

#define CT_VALUE_DIMS 6 /* dims of a shape shown (op values, a helper's tensor) */

/*
 * A collective's input_shape when it has none (in_ndim below 0), and why: nothing to show
 * (no collective helper on its stack, an argument that is not a tensor, or a tensor without
 * the call's element count: nothing is claimed); the helper's tensor, read after the call,
 * was freed by then; torch's tensor layout is not known for this version; a live tensor
 * whose fields do not check.
 */
#define CT_SHAPE_NONE	    (-1)
#define CT_SHAPE_FREED	    (-2)
#define CT_SHAPE_NO_LAYOUT  (-3)
#define CT_SHAPE_UNREADABLE (-4)

struct ct_tree_call {
	uint32_t tid;
	uint64_t ts;
	uint32_t probe_id;
	const char *helper;	/* outermost collective API on the stack, or NULL */
	const char *op;		/* the op it dispatches, as CommDebugMode names it, or NULL */
	const char *root_class; /* the class of the path's outermost module, or NULL */
	int8_t in_ndim;		/* the helper's tensor argument: its dims, or a CT_SHAPE_* */
	int64_t in_shape[CT_VALUE_DIMS];
	const char *function; /* library function */
	const char *kind;     /* all_reduce, … */
	uint8_t phase;
	bool truncated;	    /* the stack was deeper than the walker's limit, or cut there */
	bool under_open;    /* --ops: under the thread's open node, path ignored */
	bool beside;	    /* --ops: at its path, leaving the thread's open path as it is */
	int32_t group_size; /* -1 when unknown */
	int32_t rank_in_group;
	uint64_t bytes;
	const char *dtype;
	const struct ct_tree_frame *path;
	int npath;
	const struct ct_stack_line *stack; /* innermost first */
	int nstack;
};

/* --ops: one value an op was called with or returned (ct_values). */
#define CT_VALUES_MAX	   4
#define CT_VALUES_TEXT_MAX 512 /* ct_values_format() of any ct_values fits */

struct ct_value {
	const char *kind;	/* interned type name: "DTensor", "Parameter", "float", "None" */
	const char *dtype;	/* "torch.float32"; NULL: not a tensor, or not read */
	const char *placements; /* interned "(Shard(dim=0),)"; NULL: none */
	const char *mesh;	/* interned "DeviceMesh(cpu, shape=[2], dims=(tp))"; NULL: none */
	int32_t ndim;		/* -1: no shape (not a tensor, unknown layout, too many dims) */
	uint8_t freed;		/* a tensor freed before its placements and mesh were read */
	uint8_t no_layout;	/* a tensor whose shape and dtype torch's unknown layout hides */
	uint8_t pad[2];
	int64_t shape[CT_VALUE_DIMS];
};

/* Interned: zero every byte (padding too) before ct_tree_set_values(). */
struct ct_values {
	uint32_t total; /* values in the call's args / the returned tuple; 1: one value */
	uint8_t n;	/* described in v[] */
	bool tuple;	/* outputs: a tuple was returned */
	uint8_t pad[2];
	struct ct_value v[CT_VALUES_MAX];
};

struct ct_node {
	uint8_t type;
	uint8_t phase;
	uint8_t depth;
	bool truncated;
	const char *name;
	int32_t parent, first_child, last_child, next;
	/* identity of module/op nodes */
	uint64_t code, self, last_instr;
	/* collective nodes */
	const char *function, *kind, *dtype;
	const char *op; /* CommDebugMode's name of the op (c10d_functional.all_reduce), or NULL */
	int8_t in_ndim; /* the helper's tensor argument's dims (seed 000's input_shape), or a
			 * CT_SHAPE_* */
	int64_t in_shape[CT_VALUE_DIMS];
	uint32_t tid;
	int32_t group_size, rank_in_group;
	uint64_t ts, duration, bytes;
	/* op nodes (--ops): what it was called with and returned; NULL when not read */
	const struct ct_values *inputs, *outputs;
	const char *dispatcher; /* op nodes: the class whose __torch_dispatch__ ran, or NULL */
	const char *src, *dst;	/* redistribute nodes: placements before and after, or NULL */
	uint8_t nstack;
	/* its nstack lines, as every node of that stack has them: one copy of each stack (most
	 * collectives of a run are called from a few) */
	const struct ct_stack_line *stack;
};

/* The nodes open on a thread, outermost first. */
struct ct_tree_path {
	int32_t open[CT_TREE_MAX_DEPTH];
	int nopen;
	uint8_t phase; /* a path of the other phase does not continue it */
};

struct ct_tree_thread {
	uint32_t tid;
	struct ct_tree_path path; /* from the stacks, or (--ops) from entries and exits */
	/* --ops: backward collectives under their forward's modules, beside the open path */
	struct ct_tree_path side;
	uint64_t used;
};

struct ct_tree {
	struct ct_node *nodes;
	int32_t n;		    /* of CT_TREE_MAX_NODES, reserved at the first (tree.c) */
	struct tree_stack **stacks; /* the nodes' stacks, one copy of each, hashed; or NULL */
	int32_t first_root, last_root;
	uint64_t dropped;     /* nodes not recorded: pool full or too deep */
	uint64_t values_lost; /* op inputs/outputs not kept: the intern table was full */
	uint64_t stacks_lost; /* collectives' stacks not kept: out of memory */
	uint64_t clock;
	struct ct_tree_thread threads[CT_TREE_MAX_THREADS];
	/* seed 000's comm_counts: by the outermost collective API */
	struct {
		const char *name;
		uint64_t n;
	} counts[64];
	int ncounts;
	uint64_t total;
	const char *root_class; /* of the latest call's outermost module, or NULL */
};

int ct_tree_init(struct ct_tree *t);
void ct_tree_free(struct ct_tree *t);
/* Insert a collective and the path to it; the collective's node index, or -1 if dropped. */
int32_t ct_tree_add_call(struct ct_tree *t, const struct ct_tree_call *c);
void ct_tree_set_duration(struct ct_tree *t, int32_t node, uint64_t duration);
/*
 * --ops: a module/op/redistribute call entered on thread tid, under the node open there:
 * its node (then open), or -1 if dropped. ct_tree_exit closes it and gives its duration.
 */
int32_t ct_tree_enter(struct ct_tree *t, uint32_t tid, uint8_t type, const char *name,
		      uint64_t code, uint64_t self, uint64_t ts);
void ct_tree_exit(struct ct_tree *t, uint32_t tid, int32_t node, uint64_t ts);
/*
 * --ops on torch 2.x: a forward call seen without its modules' entries (an op, where torch
 * dispatches it), at the module path of its stack (outermost first) as collectives are placed
 * by theirs, then call (its type, name and identity: a second call of the same op from the
 * same instruction is the next invocation of the modules around it). Its node, open on the
 * thread until ct_tree_exit, or -1 if dropped.
 */
int32_t ct_tree_enter_path(struct ct_tree *t, uint32_t tid, const struct ct_tree_frame *path,
			   int npath, const struct ct_tree_frame *call, uint64_t ts);
/* Node (ct_tree_enter_beside's) open on thread tid until ct_tree_exit: what it calls goes
 * under it. */
void ct_tree_hold(struct ct_tree *t, uint32_t tid, int32_t node);
/*
 * --ops: an op called in a backward pass, under the modules (path, outermost first) of the
 * forward that made the autograd context it runs in, beside the thread's open path: one
 * node per module and pass, the pass ending at the thread's next module entry. Its node
 * (closed by ct_tree_exit), or -1 if dropped.
 */
int32_t ct_tree_enter_beside(struct ct_tree *t, uint32_t tid, const struct ct_tree_frame *path,
			     int npath, uint8_t type, const char *name, uint64_t code,
			     uint64_t self, uint64_t ts);
/* "[4, 16]" ("[]" for 0 dims, "" for ndim < 0); the length written (cut to len - 1). */
size_t ct_shape_format(char *buf, size_t len, const int64_t *shape, int ndim);
/* The same as Python's tuple repr, as seed 000 prints shapes: "(4, 16)", "(4,)", "()". */
size_t ct_shape_tuple_format(char *buf, size_t len, const int64_t *shape, int ndim);
/* Why a collective has no input_shape (in_ndim below 0): NULL for CT_SHAPE_NONE. */
const char *ct_shape_unknown_why(int ndim);
/* Whether a collective of this kind returns a tensor of its input's shape (all_reduce). */
bool ct_kind_keeps_shape(const char *kind);
/* "DTensor[4, 16]", "float"; and a list: "[DTensor[4, 16], Parameter[16], +1 more]". */
void ct_value_format(const struct ct_value *v, char *buf, size_t len);
void ct_values_format(const struct ct_values *vs, char *buf, size_t len);
/* Name the class that dispatched an op node (interned). */
void ct_tree_set_dispatcher(struct ct_tree *t, int32_t node, const char *cls);
/* Attach an op's inputs (or outputs) to its node; interned, so shared across calls. */
void ct_tree_set_values(struct ct_tree *t, int32_t node, bool outputs, const struct ct_values *v);
/*
 * The innermost node open on thread tid stands for self from now on: torch.compile's
 * `_orig_mod`, one module with the OptimizedModule whose node is open.
 */
void ct_tree_rebind_open(struct ct_tree *t, uint32_t tid, uint64_t self);
/* The innermost node open on thread tid of that type (0: any type), or NULL. */
const struct ct_node *ct_tree_open_node(struct ct_tree *t, uint32_t tid, uint8_t type);

#endif
