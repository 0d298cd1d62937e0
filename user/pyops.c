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
static void set_values(struct ct_session *s, struct ct_proc *p, const struct ct_hdr *h,
		       int32_t node, const struct ct_op_vals *vals)
{
	const struct ct_capture_event *cap = ct_pys_take_capture(s->py, p->pid, h);
	struct ct_values v;

	if (node < 0 || !vals)
		return;
	s->py->ops.captured += cap != NULL;
	ct_py_captured_begin(p->pid, cap);
	ct_opvals_describe(s->py->vals, p->pid, &p->py, p->torch_layout, vals, &v);
	ct_py_captured_end();
	for (int i = 0; !cap && !p->spec_layout.dtensor && i < v.n; i++)
		if (v.v[i].placements && !strcmp(v.v[i].kind, "DTensor"))
			ct_pys_measure_dtensor(s, p, vals->v[i].obj, vals->v[i].type);
	ct_tree_set_values(&p->tree, node, h->type == CT_EV_OPEXIT, &v);
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

	*r = rc ? NULL : ct_pys_role_of(st, p->pid, code, f);
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

/* The thread's slot, taken if add and it has none; -1 when there is none to take. */
static int thread_slot(struct ct_pyops *ops, pid_t tid, bool add)
{
	for (int i = 0; i < CT_TREE_MAX_THREADS; i++)
		if (ops->threads[i].tid == tid)
			return i;
	for (int i = 0; add && i < CT_TREE_MAX_THREADS; i++) {
		if (!ops->threads[i].tid) {
			ops->threads[i].tid = tid;
			return i;
		}
	}
	return -1;
}

void ct_py_on_backward(struct ct_proc *p, uint32_t tid, bool begin)
{
	int slot = p->ops ? thread_slot(p->ops, (pid_t)tid, true) : -1;
	struct ops_thread *th;

	if (slot < 0)
		return;
	th = &p->ops->threads[slot];
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
	int slot = -1, n, rc;

	if (!st || !ops)
		return;
	slot = thread_slot(ops, (pid_t)ev->hdr.tid, ev->hdr.type == CT_EV_OP);
	if (slot < 0) {
		st->ops.lost++; /* more threads calling profiled functions than slots */
		return;
	}
	n = ops->threads[slot].n;
	if (ev->hdr.type == CT_EV_OPEXIT) {
		if (!n || ops->threads[slot].at[n - 1].code != ev->code) {
			st->ops.unpaired++;
			return;
		}
		ops->threads[slot].n = --n;
		if (ev->late)
			st->ops.late++;
		set_values(s, p, &ev->hdr, ops->threads[slot].at[n].node, vals_of(ev));
		ct_tree_exit(&p->tree, ev->hdr.tid, ops->threads[slot].at[n].node, ev->hdr.ts);
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
	th = &ops->threads[slot];
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
	if (n >= CT_OPS_MAX_DEPTH) {
		st->ops.lost++;
		return;
	}
	ops->threads[slot].at[n].node = node;
	ops->threads[slot].at[n].code = ev->code;
	ops->threads[slot].n = n + 1;
}

const struct ct_ops_stats *ct_py_ops_stats(const struct ct_session *s)
{
	return s->py ? &s->py->ops : NULL;
}
