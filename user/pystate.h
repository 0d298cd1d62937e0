/* SPDX-License-Identifier: MIT */
/*
 * The Python side's state, shared by user/pystacks.c (interpreters, stacks, names),
 * user/pybpf.c (what BPF is told of them) and user/pyops.c (--ops' entries and exits),
 * which use the helpers below; nothing else includes it.
 */
#ifndef CT_PYSTATE_H
#define CT_PYSTATE_H

#include <stdbool.h>
#include <stdint.h>
#include "pystacks.h"
#include "python/autograd.h"
#include "python/profiles.h"
#include "python/symbolize.h"

struct ct_torch_layout;

/*
 * Which rule a frame's names matched and the op they name: matched once per name and file,
 * not per event. Keyed by the interned names themselves, so never stale when a code
 * object's address is reused. Sets of ROLE_WAYS slots, the least recently used replaced.
 */
#define ROLE_CACHE 4096
#define ROLE_WAYS  4

struct role_slot {
	const char *qualname, *file; /* interned (ct_pyframe); NULL: empty */
	const struct ct_rule *rule;  /* NULL: no role */
	const char *op;		     /* the op a torch collective API dispatches, or NULL */
	uint64_t used;
};

/* Names of objects (modules in their parent, ops), by (pid, parent, object): sets of
 * NAME_WAYS slots, the least recently used one replaced. */
#define NAME_CACHE 1024
#define NAME_WAYS  4

struct name_slot {
	pid_t pid;
	uint64_t parent, obj;
	const char *name;
	unsigned int fallback; /* module_label: lookups that fell back to the class name */
	uint64_t used;	       /* ct_pystate.name_clock at its last use */
};

/* --ops: the function a functools.wraps wrapper wraps, as its code object, by (pid, wrapper
 * function). A wrapper made per function lives as long as it; a stale slot only costs a
 * misjudged wrapper until its verdict is evicted, and the symbolizer checks the code. */
#define WRAP_CACHE 256

struct wrap_slot {
	pid_t pid;
	uint64_t func, code;
};

/* Copies BPF took at calls, kept until their calls are resolved: the record comes just
 * before its call's, but other threads' records may come between. */
#define CT_PY_CAPS 8

struct ct_pystate {
	struct ct_pysym_cache *sym;
	struct ct_profiles profiles;
	struct role_slot roles[ROLE_CACHE];
	uint64_t role_clock;
	struct name_slot names[NAME_CACHE];
	uint64_t name_clock;
	struct wrap_slot wraps[WRAP_CACHE];
	struct ct_py_counts counts;
	struct ct_ops_stats ops;
	struct ct_opvals_cache *vals;			/* --ops: op argument and result types */
	struct ct_pyframe frames_buf[CT_PY_MAX_FRAMES]; /* one stack, symbolized */
	int frames_rc[CT_PY_MAX_FRAMES];
	struct ct_ctxtab *ctxs; /* autograd contexts' forward module paths */
	/* copies BPF took at calls (CT_EV_CAPTURE), each until its call is resolved */
	struct {
		pid_t pid;
		struct ct_capture_event ev;
	} caps[CT_PY_CAPS];
	unsigned int ncaps;
};

/*
 * --ops: per process, the calls in flight on each thread as BPF sent them; and whether the
 * thread is in a backward pass (between THPEngine_run_backward's entry and return; where
 * that is not probed, from an autograd Function's backward to the next module entry), with
 * the forward module path of the ctx whose backward (BackwardCFunction.apply) ran last:
 * the backward's ops go under it.
 */
struct ops_thread {
	pid_t tid;
	int n;
	struct {
		int32_t node; /* its tree node, or -1 (not kept, or merged) */
		uint64_t code;
	} at[CT_OPS_MAX_DEPTH];
	bool backward;
	int engine; /* autograd engine runs in flight (THPEngine_run_backward) */
	struct ct_ctx_path bwd;
};

struct ct_pyops {
	struct ops_thread threads[CT_TREE_MAX_THREADS];
	/* torch 2.x: ops seen where torch dispatches them (ct_py_on_dispatch), not by frames */
	bool dispatch;
	uint32_t pynode_obj;	     /* PyNode::obj's offset, 0 until learned (ct_py_on_gradfn) */
	struct ct_py_resolved stack; /* an op's stack, resolved */
};

/* The rule a frame (symbolized as f) matched, or NULL; cached by its names. */
const struct ct_rule *ct_pys_role_of(struct ct_pystate *st, const struct ct_pyframe *f);
uint8_t ct_pys_node_type(const struct ct_rule *r);
/* The display name of a module/op/redistribute frame, by its rule (a module's: its FQN). */
const char *ct_pys_node_name(struct ct_pystate *st, struct ct_proc *p, const struct ct_rule *r,
			     const struct ct_pyframe *f, uint8_t type, uint64_t parent_module,
			     const char *parent_fqn, uint64_t self, uint64_t arg1);
/*
 * torch.compile: whether module self is the `_orig_mod` that OptimizedModule wrapper runs.
 * The two are one module, named as the compiled one: the wrapper's node takes self.
 */
bool ct_pys_compiled_inner(struct ct_pystate *st, struct ct_proc *p, uint64_t wrapper,
			   uint64_t self);
/* A class's or callable's name (callable), or an object's type name; cached, interned. */
const char *ct_pys_object_label(struct ct_pystate *st, struct ct_proc *p, uint64_t obj,
				bool callable);
/* The name of obj if it is a class (an op's dispatching class), else NULL; cached. */
const char *ct_pys_class_label(struct ct_pystate *st, struct ct_proc *p, uint64_t obj);
/* Give BPF the process's interpreter layout and, with tl, torch's tensor layout. */
int ct_pys_update_pyproc(struct ct_session *s, struct ct_proc *p, const struct ct_torch_layout *tl);
/* Tell BPF torch's tensor layout once torch is loaded in the process. */
void ct_pys_torch_layout_to_bpf(struct ct_session *s, struct ct_proc *p);
/* pycodes changed (an entry deleted or replaced): BPF drops its copies of held entries. */
void ct_pys_codes_changed(struct ct_session *s);
/* A count that grows at least at every death of a code object of a process whose code
 * objects BPF sees die (ct_proc.code_free), and at every change of pycodes. */
uint64_t ct_pys_code_deaths(const struct ct_session *s);
/* torch's tensor layout in p for reads from user space, looked up until torch is loaded. */
const struct ct_torch_layout *ct_pys_tensor_layout(struct ct_proc *p);
/* Tell BPF a code object resolved for the first time (symbolized as f, matching r). */
void ct_pys_tell_known(struct ct_session *s, struct ct_proc *p, uint64_t code,
		       const struct ct_pyframe *f, const struct ct_rule *r);
/* Probe the process's code object deallocator (CT_PYC_HELD); 0, or -errno. */
int ct_pys_watch_code_frees(struct ct_session *s, struct ct_proc *p);
/* The copies BPF took at the record h (its thread and time), taken from the kept ones (once);
 * NULL when there are none. */
const struct ct_capture_event *ct_pys_take_capture(struct ct_pystate *st, pid_t pid,
						   const struct ct_hdr *h);
/* --ops: from a DTensor (obj, of type) read live, where the process's DTensors keep their
 * spec and specs their placements, told BPF so that it copies them at the call. */
void ct_pys_measure_dtensor(struct ct_session *s, struct ct_proc *p, uint64_t obj, uint64_t type);
/* --ops: probe the interpreter's frame evaluation in p; 0, or -errno. */
int ct_pys_attach_ops(struct ct_session *s, struct ct_proc *p);

#endif
