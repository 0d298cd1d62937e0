// SPDX-License-Identifier: MIT
/* --ops: the entries and exits BPF sends, judged by the profiles, into the call tree. */
#include <errno.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "commtrace.skel.h"
#include "pystate.h"
#include "commtrace/pyoffsets.h"
#include "python/objects.h"
#include "python/opvals.h"
#include "util/hash.h"
#include "util/log.h"

/* --ops: tell BPF whether to keep sending this code object's calls, and for an op with
 * args=N, to describe its arguments and result. */
static void set_verdict(struct ct_session *s, struct ct_proc *p, uint64_t code,
			const struct ct_rule *r)
{
	struct ct_op_key key = {.tgid = (__u32)p->pid, .code = code};
	__u8 v = !r ? CT_OPV_SKIP : r->role == CT_ROLE_WRAPPER ? CT_OPV_WRAP : CT_OPV_KEEP;

	if (!s->skel)
		return;
	if (r && r->role == CT_ROLE_OP && r->args != CT_RULE_NO_ARGS) {
		ct_pys_torch_layout_to_bpf(s, p);
		v |= CT_OPV_ARGS(r->args);
	}
	if (!bpf_map_update_elem(bpf_map__fd(s->skel->maps.op_codes), &key, &v, BPF_ANY))
		s->py->ops.verdicts++;
}

/*
 * The values vals of the op record h onto node: its DTensors read from the copies BPF took
 * at the call where it did, else live (and the first DTensor read live says where the
 * process keeps a DTensor's placements, for BPF to copy them from then on).
 */
static void put_values(struct ct_session *s, struct ct_proc *p, const struct ct_capture_event *cap,
		       int32_t node, bool outputs, const struct ct_op_vals *vals)
{
	struct ct_values v;

	if (node < 0 || !vals)
		return;
	s->py->ops.captured += cap != NULL;
	ct_py_captured_begin(p->pid, cap);
	ct_opvals_describe(s->py->vals, p->pid, &p->py, p->torch_layout, &p->spec_layout, vals, &v);
	ct_py_captured_end();
	for (int i = 0; !cap && !p->spec_layout.dtensor && i < v.n; i++)
		if (v.v[i].placements && !strcmp(v.v[i].kind, "DTensor"))
			ct_pys_measure_dtensor(s, p, vals->v[i].obj, vals->v[i].type);
	ct_tree_set_values(&p->tree, node, outputs, &v);
}

static void set_values(struct ct_session *s, struct ct_proc *p, const struct ct_hdr *h,
		       int32_t node, const struct ct_op_vals *vals)
{
	put_values(s, p, ct_pys_take_capture(s->py, p->pid, h), node, h->type == CT_EV_OPEXIT,
		   vals);
}

static const struct ct_op_vals *vals_of(const struct ct_op_event *ev)
{
	return ev->has_vals ? &((const struct ct_op_vals_event *)ev)->vals : NULL;
}

/* The code object of what the wrapper function func wraps (its __wrapped__). */
static int wrapped_code(struct ct_pystate *st, struct ct_proc *p, uint64_t func, uint64_t *code)
{
	const struct ct_py_objoffsets *oo = ct_py_objoffsets_for(p->py.major, p->py.minor);
	struct wrap_slot *w = &st->wraps[ct_hash_mix(func, (uint64_t)p->pid) % WRAP_CACHE];
	uint64_t fn;
	int rc;

	if (w->code && w->pid == p->pid && w->func == func) {
		*code = w->code;
		return 0;
	}
	if (!oo)
		return -ENOTSUP;
	rc = ct_py_getattr(p->pid, oo, &p->py.offsets, func, "__wrapped__", &fn);
	if (!rc)
		rc = ct_py_read_mem(p->pid, fn + oo->func_code, code, sizeof(*code));
	if (rc)
		return rc;
	*w = (struct wrap_slot){.pid = p->pid, .func = func, .code = *code};
	return 0;
}

/* One entry as judged: the frame that names it and what it was called with. */
struct op_call {
	uint64_t key; /* what BPF keys its verdict by: the code, or a wrapper's function */
	uint64_t code, self, arg1;
	const struct ct_op_vals *vals;
	struct ct_pyframe f;
	const struct ct_rule *rule; /* a module or op rule, else NULL */
	bool autograd;		    /* an autograd Function's backward, self its ctx */
};

/*
 * The rule of a code object (NULL: none), symbolized into f; 0 or -errno. Where BPF sees
 * the process's code objects die, a code object read before is not read again until one
 * has died.
 */
static int rule_of(struct ct_session *s, struct ct_proc *p, uint64_t code, struct ct_pyframe *f,
		   const struct ct_rule **r)
{
	struct ct_pystate *st = s->py;
	int rc = p->code_free ? ct_py_symbolize_since(st->sym, p->pid, &p->py.offsets, code, 0,
						      ct_pys_code_deaths(s), f)
			      : ct_py_symbolize(st->sym, p->pid, &p->py.offsets, code, 0, f);

	*r = rc ? NULL : ct_pys_role_of(st, f);
	return rc;
}

/*
 * Judge an entry by its frame's rule; a wrapper's call by the rule of the function it wraps,
 * with the wrapper's args as that function's locals. Tells BPF the verdicts it lacked. 0, or
 * -errno when a code object could not be read (the process exited).
 */
static int judge_op(struct ct_session *s, struct ct_proc *p, const struct ct_op_event *ev,
		    struct op_call *c)
{
	struct ct_pystate *st = s->py;
	const struct ct_op_vals *v = vals_of(ev);
	const struct ct_rule *r = NULL;
	bool through = ev->wrapped == CT_OP_WRAPPED; /* judged by what a wrapper wraps */
	int rc = 0;

	*c =
	    (struct op_call){.key = ev->code, .code = ev->code, .self = ev->self, .arg1 = ev->arg1};
	if (ev->wrapped == CT_OP_WRAPPED)
		rc = wrapped_code(st, p, ev->code, &c->code);
	if (!rc)
		rc = rule_of(s, p, c->code, &c->f, &r);
	if (!rc && r && r->role == CT_ROLE_WRAPPER && ev->wrapped == CT_OP_MAYBE_WRAPPER && v) {
		/* Its first call, sent before BPF knew: the args tuple's items came with it. */
		set_verdict(s, p, ev->code, r);
		c->key = ev->func;
		c->self = v->n > 0 ? v->v[0].obj : 0;
		c->arg1 = v->n > 1 ? v->v[1].obj : 0;
		v = NULL; /* the op's own values were not read: not described */
		through = true;
		r = NULL;
		rc = wrapped_code(st, p, ev->func, &c->code);
		if (!rc)
			rc = rule_of(s, p, c->code, &c->f, &r);
	} else if (ev->wrapped == CT_OP_MAYBE_WRAPPER) {
		v = NULL; /* not a wrapper: the items were of its first argument */
	}
	c->vals = v;
	/* Helpers and backward markers name collectives, not calls. Redistributions come from
	 * the collectives' stacks (tree.c): the frames C enters inside one are its internals
	 * (a sorted() key's lambda, an __init__), one node each. A wrapper inside a wrapper is
	 * not looked through. */
	c->autograd = r && r->role == CT_ROLE_AUTOGRAD;
	if (r && r->role != CT_ROLE_MODULE && r->role != CT_ROLE_OP && !c->autograd)
		r = r->role == CT_ROLE_WRAPPER && !through ? r : NULL;
	if (rc == -ESRCH)
		return rc; /* judged again if the process is still there next time */
	if (ev->unclassified || c->key != ev->code)
		set_verdict(s, p, c->key, r);
	else if (!r)
		st->ops.unwanted++;
	c->rule = r && (r->role == CT_ROLE_MODULE || r->role == CT_ROLE_OP) ? r : NULL;
	return rc;
}

/* This thread's slot, made when add; NULL (counted in lost when it matters) when every
 * slot is taken: more threads calling profiled functions than slots. */
static struct ops_thread *op_thread(struct ct_pyops *ops, pid_t tid, bool add, uint64_t *lost)
{
	for (int i = 0; i < CT_TREE_MAX_THREADS; i++)
		if (ops->threads[i].tid == tid)
			return &ops->threads[i];
	for (int i = 0; add && i < CT_TREE_MAX_THREADS; i++) {
		if (!ops->threads[i].tid) {
			ops->threads[i].tid = tid;
			return &ops->threads[i];
		}
	}
	if (lost)
		(*lost)++;
	return NULL;
}

/* An op entered on th: its exit pops it. Deeper than CT_OPS_MAX_DEPTH, counted lost. */
static void push_op(struct ct_pystate *st, struct ops_thread *th, int32_t node, uint64_t code)
{
	if (th->n >= CT_OPS_MAX_DEPTH) {
		st->ops.lost++;
		return;
	}
	th->at[th->n].node = node;
	th->at[th->n].code = code;
	th->n++;
}

void ct_py_on_backward(struct ct_proc *p, uint32_t tid, bool begin)
{
	struct ops_thread *th = p->ops ? op_thread(p->ops, (pid_t)tid, true, NULL) : NULL;

	if (!th)
		return;
	if (begin) {
		if (!th->engine++) { /* ops before the first autograd Function: no module */
			th->backward = true;
			th->bwd.n = 0;
		}
	} else if (th->engine && !--th->engine) {
		th->backward = false; /* what follows (an optimizer step) is not the backward's */
	}
}

void ct_py_on_op(struct ct_session *s, struct ct_proc *p, const struct ct_op_event *ev)
{
	struct ct_pystate *st = s->py;
	struct ct_pyops *ops = p->ops;
	const struct ct_rule *r;
	const struct ct_node *top;
	struct op_call c;
	struct ops_thread *th;
	int32_t node = -1;
	int n, rc;

	if (!st || !ops)
		return;
	th = op_thread(ops, (pid_t)ev->hdr.tid, ev->hdr.type == CT_EV_OP, &st->ops.lost);
	if (!th)
		return;
	n = th->n;
	if (ev->hdr.type == CT_EV_OPEXIT) {
		if (!n || th->at[n - 1].code != ev->code) {
			st->ops.unpaired++;
			return;
		}
		th->n = --n;
		if (ev->late)
			st->ops.late++;
		set_values(s, p, &ev->hdr, th->at[n].node, vals_of(ev));
		ct_tree_exit(&p->tree, ev->hdr.tid, th->at[n].node, ev->hdr.ts);
		return;
	}
	st->ops.entries++;
	if (ev->unclassified)
		st->ops.unclassified++;
	rc = judge_op(s, p, ev, &c);
	if (rc) {
		st->ops.unresolved++; /* the process exited before its code object was read */
		ct_debug("commtrace: pid %d: --ops: 0x%llx%s not judged: %s\n", p->pid,
			 (unsigned long long)ev->code, ev->wrapped ? " (a wrapper's)" : "",
			 strerror(-rc));
	}
	r = c.rule;
	if (c.autograd) {
		const struct ct_ctx_path *cp = ct_ctxtab_find(st->ctxs, p->pid, c.self);

		/* An unknown ctx (made before the attach): the backward's ops under no module. */
		th->backward = true;
		th->bwd = cp ? *cp : (struct ct_ctx_path){0};
	}
	if (r) {
		uint8_t type = ct_pys_node_type(r);
		const struct ct_node *mod =
		    ct_tree_open_node(&p->tree, ev->hdr.tid, CT_NODE_MODULE);
		const char *name;

		st->ops.kept++;
		top = ct_tree_open_node(&p->tree, ev->hdr.tid, 0);
		if (type == CT_NODE_MODULE && !th->engine)
			th->backward = false; /* a forward (no engine run seen to bracket it) */
		if (th->backward && !top) {
			/* A backward op: at its autograd Function's forward modules. */
			const struct ct_tree_frame *in =
			    th->bwd.n ? &th->bwd.f[th->bwd.n - 1] : NULL;

			name = ct_pys_node_name(st, p, r, &c.f, type, in ? in->self : 0,
						in ? in->name : NULL, c.self, c.arg1);
			node = ct_tree_enter_beside(&p->tree, ev->hdr.tid, th->bwd.f, th->bwd.n,
						    type, name, c.code, c.self, ev->hdr.ts);
		} else if (type == CT_NODE_MODULE && top && top == mod &&
			   ct_pys_compiled_inner(st, p, mod->self, c.self)) {
			if (p->root_module == mod->self)
				p->root_module = c.self;
			ct_tree_rebind_open(&p->tree, ev->hdr.tid, c.self);
		} else if (!(top && top->type == type && type == CT_NODE_MODULE &&
			     top->self == c.self)) {
			/* One node per module call (_wrapped_call_impl then _call_impl), as for
			 * stacks. */
			name = ct_pys_node_name(st, p, r, &c.f, type, mod ? mod->self : 0,
						mod ? mod->name : NULL, c.self, c.arg1);
			node = ct_tree_enter(&p->tree, ev->hdr.tid, type, name, c.code, c.self,
					     ev->hdr.ts);
		}
		if (type == CT_NODE_MODULE && !mod)
			p->root_module = c.self;
		if (type == CT_NODE_OP && node >= 0)
			ct_tree_set_dispatcher(&p->tree, node, ct_pys_class_label(st, p, c.self));
		set_values(s, p, &ev->hdr, node, c.vals);
	}
	push_op(st, th, node, ev->code);
}

bool ct_py_ops_by_dispatch(const struct ct_proc *p)
{
	return p->ops && p->ops->dispatch;
}

bool ct_py_op_open(const struct ct_proc *p, uint32_t tid)
{
	for (int i = 0; p->ops && i < CT_TREE_MAX_THREADS; i++)
		if (p->ops->threads[i].tid == (pid_t)tid)
			return p->ops->threads[i].n > 0;
	return false;
}

/* The module frames a backward path starts with: what the ops after it are put under. */
static void set_bwd(struct ops_thread *th, const struct ct_tree_frame *path, int npath)
{
	int n = 0;

	while (n < npath && n < CT_CTX_MAX_PATH && path[n].type == CT_NODE_MODULE)
		n++;
	memcpy(th->bwd.f, path, (size_t)n * sizeof(*path));
	th->bwd.n = (uint8_t)n;
}

void ct_py_on_dispatch(struct ct_session *s, struct ct_proc *p, const struct ct_dispatch_event *ev)
{
	const struct ct_op_event *op = &ev->op.op;
	struct ct_pystate *st = s->py;
	struct ct_pyops *ops = p->ops;
	const struct ct_capture_event *cap;
	struct ct_py_resolved *r;
	struct ct_tree_frame call;
	struct ops_thread *th;
	int32_t node;
	int n, rc = -1;
	bool backward;

	if (!st || !ops)
		return;
	th = op_thread(ops, (pid_t)op->hdr.tid, true, &st->ops.lost);
	if (!th)
		return;
	n = th->n;
	st->ops.entries++;
	/* the values' copies, taken first: a redistribution on the stack has the same time */
	cap = ct_pys_take_capture(st, p->pid, &op->hdr);
	r = &ops->stack;
	if (!n) /* inside an op, its __torch_dispatch__ dispatching again: under it instead */
		rc = ct_py_resolve_stack(s, p, &op->hdr, &ev->py, r);
	if (rc)
		r->call.npath = 0;
	call = (struct ct_tree_frame){.type = CT_NODE_OP,
				      .name = ct_pys_object_label(st, p, op->code, true),
				      .code = op->code,
				      .self = op->self,
				      .again = true};
	/* In a backward pass on this thread, or under an autograd Function's backward, or with
	 * no Python frame at all: called from C++, an autograd engine's device thread. */
	backward = th->engine || (!rc && r->call.phase == CT_PHASE_BACKWARD) ||
		   (!n && (ev->py.flags & CT_PYS_PYTHON) && !ev->py.nframes);
	if (n) {
		node = ct_tree_enter(&p->tree, op->hdr.tid, CT_NODE_OP, call.name, call.code,
				     call.self, op->hdr.ts);
	} else if (backward) {
		/* Under the modules whose forward made the ctx of the autograd Function this op
		 * is in, or (one of torch's own backward nodes) of the one begun last. */
		if (r->attributed)
			set_bwd(th, r->path, r->call.npath);
		node = ct_tree_enter_beside(&p->tree, op->hdr.tid, th->bwd.f, th->bwd.n, CT_NODE_OP,
					    call.name, call.code, call.self, op->hdr.ts);
		ct_tree_hold(&p->tree, op->hdr.tid, node);
	} else {
		node = ct_tree_enter_path(&p->tree, op->hdr.tid, r->path, r->call.npath, &call,
					  op->hdr.ts);
	}
	if (node >= 0) {
		st->ops.kept++;
		ct_tree_set_dispatcher(&p->tree, node, ct_pys_class_label(st, p, op->self));
		put_values(s, p, cap, node, false, &ev->op.vals);
	}
	push_op(st, th, node, op->code);
}

void ct_py_on_gradfn(struct ct_session *s, struct ct_proc *p, const struct ct_gradfn_event *ev,
		     bool words)
{
	struct ct_pystate *st = s->py;
	struct ct_pyops *ops = p->ops;
	const struct ct_ctx_path *cp = NULL;
	struct ops_thread *th;

	if (!st || !ops)
		return;
	th = op_thread(ops, (pid_t)ev->hdr.tid, true, &st->ops.lost);
	if (!th)
		return;
	st->ops.gradfns++;
	if (ev->ctx) {
		cp = ct_ctxtab_find(st->ctxs, p->pid, ev->ctx);
	} else if (words) {
		/* PyNode::obj is where the node holds a ctx THPFunction_new returned (not word
		 * 0: the vtable) */
		for (int i = 1; i < CT_GRADFN_WORDS && !cp; i++) {
			cp = ev->words[i] ? ct_ctxtab_find(st->ctxs, p->pid, ev->words[i]) : NULL;
			if (cp && !ops->pynode_obj) {
				ops->pynode_obj = (uint32_t)i * 8;
				ct_pys_update_pyproc(s, p, p->torch_layout);
				ct_info("commtrace: pid %d: PyNode::obj at +%u\n", p->pid,
					ops->pynode_obj);
			}
		}
	}
	/* An unknown ctx (made before the attach): the backward's ops under no module. */
	st->ops.gradfn_unknown += !cp;
	th->bwd = cp ? *cp : (struct ct_ctx_path){0};
}

const char *ct_py_ops_seen_at(const struct ct_session *s)
{
	int by_dispatch = 0, by_frames = 0;

	for (int i = 0; i < s->n_procs; i++) {
		by_dispatch += ct_py_ops_by_dispatch(s->procs[i]);
		by_frames += s->procs[i]->ops && !s->procs[i]->ops->dispatch;
	}
	return by_dispatch && by_frames ? "dispatch+frames"
	       : by_dispatch		? "dispatch"
	       : by_frames		? "frames"
					: "none";
}

const struct ct_ops_stats *ct_py_ops_stats(const struct ct_session *s)
{
	return s->py ? &s->py->ops : NULL;
}
