// SPDX-License-Identifier: MIT
/*
 * Python stacks → the call tree. At attach, a process running CPython gets its
 * interpreter layout registered with BPF; at each outermost collective of a
 * Python thread the frames are symbolized (cached), matched against the
 * framework profiles, and the interesting ones (modules, ops, redistributions)
 * become the path to the collective's node. The outermost collective helper
 * on the stack names the collective, as seed 000's comm_counts do.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "commtrace.skel.h"
#include "pystacks.h"
#include "pystate.h"
#include "commtrace/pyoffsets.h"
#include "python/autograd.h"
#include "laststack.h"
#include "python/objects.h"
#include "python/opvals.h"
#include "python/params.h"
#include "python/profiles.h"
#include "python/symbolize.h"
#include "target/proc.h"
#include "targets.h"
#include "util/hash.h"
#include "util/intern.h"
#include "util/log.h"

/* The symbolizer forgot a code object: so does BPF, which would otherwise trust it. */
static void forget_code(void *ctx, pid_t pid, uint64_t code)
{
	struct ct_session *s = ctx;
	struct ct_pycode_key k = {.tgid = (__u32)pid, .code = code};

	if (s->skel) {
		bpf_map_delete_elem(bpf_map__fd(s->skel->maps.pycodes), &k);
		ct_pys_codes_changed(s);
	}
}

int ct_py_init(struct ct_session *s, char *err, size_t errlen)
{
	struct ct_pystate *st = calloc(1, sizeof(*st));
	int rc;

	if (!st)
		return -ENOMEM;
	st->sym = ct_pysym_cache_new(CT_PYSYM_DEFAULT_CAP);
	st->vals = ct_opvals_cache_new();
	st->ctxs = ct_ctxtab_new();
	if (!st->sym || !st->vals || !st->ctxs) {
		ct_pysym_cache_free(st->sym);
		ct_opvals_cache_free(st->vals);
		ct_ctxtab_free(st->ctxs);
		free(st);
		return -ENOMEM;
	}
	ct_pysym_cache_on_forget(st->sym, forget_code, s);
	ct_profiles_init(&st->profiles);
	if (s->opts->profile_path) {
		rc = ct_profiles_load(&st->profiles, s->opts->profile_path, err, errlen);
		if (rc) {
			ct_pysym_cache_free(st->sym);
			ct_opvals_cache_free(st->vals);
			ct_ctxtab_free(st->ctxs);
			free(st);
			return rc;
		}
	}
	s->py = st;
	return 0;
}

void ct_py_free(struct ct_session *s)
{
	if (!s->py)
		return;
	ct_pysym_cache_free(s->py->sym);
	ct_opvals_cache_free(s->py->vals);
	ct_ctxtab_free(s->py->ctxs);
	free(s->py);
	s->py = NULL;
}

/* --ops: probe the frame evaluation entry of p's interpreter. */
/* The first item of a tuple (a function's *args), or 0. */
static uint64_t first_arg(struct ct_proc *p, uint64_t args)
{
	const struct ct_py_objoffsets *oo = ct_py_objoffsets_for(p->py.major, p->py.minor);
	uint64_t item = 0;
	size_t n = 0;

	if (ct_py_tuple_items(p->pid, oo, &p->py.offsets, args, &item, 1, &n) || !n)
		return 0;
	return item;
}

/*
 * Why the helper's argument arg (of type type, when BPF read it at the call) has no shape:
 * none to show when it is not a tensor (a list, a group); else torch's layout not known,
 * freed, or unreadable.
 */
static int8_t shape_unknown(struct ct_session *s, struct ct_proc *p, uint64_t arg, uint64_t type,
			    bool layout)
{
	int tensor = arg ? ct_opvals_is_tensor(s->py->vals, p->pid, &p->py.offsets, arg, type) : 0;

	if (!tensor)
		return CT_SHAPE_NONE;
	if (!layout) /* the first reason, freed or not */
		return CT_SHAPE_NO_LAYOUT;
	return tensor < 0 ? CT_SHAPE_FREED : CT_SHAPE_UNREADABLE;
}

/* How many of py->helper are BPF's guesses (a stack not known at the call). */
static unsigned int guesses(const struct ct_pystack *py)
{
	if (py->flags & CT_PYS_KNOWN)
		return 0;
	return py->nguess < CT_PYS_GUESSES ? py->nguess : CT_PYS_GUESSES;
}

/* What BPF read of the helper's argument arg at the call: described as the helper's, or a
 * guess at a stack not known then that turned out to be arg; NULL: nothing. */
static const struct ct_op_val *described(const struct ct_pystack *py, uint64_t arg)
{
	if (py->flags & CT_PYS_HELPER)
		return &py->helper[0];
	for (unsigned int i = 0; arg && i < guesses(py); i++)
		if (py->helper[i].obj == arg)
			return &py->helper[i];
	return NULL;
}

/* The first argument of the op called from Python at frame i with its *args at args: as BPF
 * read it at the call where it guessed so, else read now. */
static uint64_t opcall_first(struct ct_proc *p, const struct ct_pystack *py, int i, uint64_t args)
{
	for (unsigned int k = 0; i < CT_PYS_GUESS_FRAMES && k < guesses(py); k++)
		if (py->helper[k].guess == CT_GUESS_FROM(i, 1))
			return py->helper[k].obj;
	return first_arg(p, args);
}

/*
 * Seed 000's input_shape: of the helper's tensor argument, read now, after the call (its
 * tensor may have been freed since; calls.c checks the element count against the call's).
 * type: its type as BPF read it at the call, or 0. Without torch's layout, that is what
 * tells a tensor from the rest: read now, its memory may hold another object.
 */
static void helper_shape(struct ct_session *s, struct ct_proc *p, uint64_t arg, uint64_t type,
			 struct ct_tree_call *c)
{
	const struct ct_torch_layout *tl = ct_pys_tensor_layout(p);
	int64_t shape[CT_PARAM_DIMS_MAX];
	uint16_t dtype;
	int ndim;

	if (tl && arg && !ct_tensor_read(p->pid, tl, arg, &dtype, &ndim, shape) && ndim >= 0 &&
	    ndim <= CT_VALUE_DIMS) {
		c->in_ndim = (int8_t)ndim;
		memcpy(c->in_shape, shape, (size_t)ndim * sizeof(shape[0]));
		return;
	}
	c->in_ndim = shape_unknown(s, p, arg, tl ? 0 : type, tl != NULL);
}

int ct_py_attach_proc(struct ct_session *s, struct ct_proc *p)
{
	int rc;

	if (p->py_checked || !s->skel || s->opts->no_stacks)
		return 0;
	p->py_checked = true;
	rc = ct_py_detect(p->pid, &p->py);
	if (rc == -ENOTSUP) {
		fprintf(stderr,
			"commtrace-bpf: pid %d: %s; collectives are traced without Python "
			"stacks\n",
			p->pid, p->py.notice);
		return 0;
	}
	if (rc)
		return 0; /* not a Python process */
	rc = ct_pys_update_pyproc(s, p, NULL);
	if (rc)
		return rc;
	p->has_python = true;
	rc = ct_pys_watch_code_frees(s, p);
	if (rc)
		return rc;
	ct_pys_torch_layout_to_bpf(s, p); /* the first collective's tensor described too */
	ct_info("commtrace: pid %d: CPython %d.%d, _PyRuntime at 0x%llx%s\n", p->pid, p->py.major,
		p->py.minor, (unsigned long long)p->py.runtime_addr,
		p->py.from_debug ? " (offsets from _Py_DebugOffsets)" : "");
	if (s->opts->ops)
		return ct_pys_attach_ops(s, p);
	return 0;
}

static const struct role_slot *role_slot_of(struct ct_pystate *st, const struct ct_pyframe *f)
{
	size_t set = ct_hash_mix((uintptr_t)f->qualname, (uintptr_t)f->filename) %
		     (ROLE_CACHE / ROLE_WAYS) * ROLE_WAYS;
	struct role_slot *r = &st->roles[set], *victim = r;
	const char *dot;

	for (int i = 0; i < ROLE_WAYS; i++) {
		if (r[i].qualname == f->qualname && r[i].file == f->filename && r[i].qualname) {
			r[i].used = ++st->role_clock;
			return &r[i];
		}
		if (r[i].used < victim->used)
			victim = &r[i];
	}
	victim->qualname = f->qualname;
	victim->file = f->filename;
	victim->rule = ct_profiles_match(&st->profiles, f->qualname, f->filename);
	dot = strrchr(f->qualname, '.');
	victim->op = ct_profiles_op_name(dot ? dot + 1 : f->qualname, f->filename);
	victim->used = ++st->role_clock;
	return victim;
}

const struct ct_rule *ct_pys_role_of(struct ct_pystate *st, const struct ct_pyframe *f)
{
	return role_slot_of(st, f)->rule;
}

static const char *short_func(const char *qualname)
{
	const char *dot = strrchr(qualname, '.');

	return dot ? dot + 1 : qualname;
}

/* A frame named by its code (a helper's, or an op's by rule): interned. */
static const char *frame_name(const struct ct_rule *r, const struct ct_pyframe *f)
{
	return r->name_from == CT_NAME_QUALNAME ? f->qualname : ct_intern(short_func(f->qualname));
}

/*
 * Object names cost several reads of the target: cached. Module objects live as
 * long as the model; a freed op object whose address is reused could show a
 * stale name until evicted, a cost accepted for not reading on every event.
 */
static struct name_slot *name_slot(struct ct_pystate *st, pid_t pid, uint64_t parent, uint64_t obj,
				   bool *hit)
{
	size_t set = ct_hash_mix(obj ^ ((uint64_t)(uint32_t)pid << 48), parent) %
		     (NAME_CACHE / NAME_WAYS) * NAME_WAYS;
	struct name_slot *n = &st->names[set], *victim = n;

	*hit = false;
	for (int i = 0; i < NAME_WAYS; i++) {
		if (n[i].name && n[i].pid == pid && n[i].parent == parent && n[i].obj == obj) {
			*hit = true;
			victim = &n[i];
			break;
		}
		if (n[i].used < victim->used)
			victim = &n[i];
	}
	if (!*hit)
		*victim = (struct name_slot){.pid = pid, .parent = parent, .obj = obj};
	victim->used = ++st->name_clock;
	return victim;
}

const char *ct_pys_object_label(struct ct_pystate *st, struct ct_proc *p, uint64_t obj,
				bool callable)
{
	const struct ct_py_objoffsets *oo = ct_py_objoffsets_for(p->py.major, p->py.minor);
	struct name_slot *n;
	char buf[128];
	bool hit;
	int rc;

	n = name_slot(st, p->pid, callable, obj, &hit);
	if (hit)
		return n->name;
	if (callable && oo)
		rc = ct_py_callable_name(p->pid, oo, &p->py.offsets, obj, buf, sizeof(buf));
	else
		rc = ct_py_read_type_name(p->pid, &p->py.offsets, obj, buf, sizeof(buf));
	n->name = rc ? "?" : ct_intern(buf);
	return n->name;
}

/* Names cached under this parent are classes' (NULL for an object that is not one). */
#define CLASS_NAMES 2

const char *ct_pys_class_label(struct ct_pystate *st, struct ct_proc *p, uint64_t obj)
{
	const struct ct_py_objoffsets *oo = ct_py_objoffsets_for(p->py.major, p->py.minor);
	char buf[128];
	bool hit;
	struct name_slot *n = name_slot(st, p->pid, CLASS_NAMES, obj, &hit);

	if (!hit) {
		if (!ct_py_is_class(p->pid, oo, &p->py.offsets, obj))
			n->name = ""; /* not a class, cached as such */
		else if (ct_py_callable_name(p->pid, oo, &p->py.offsets, obj, buf, sizeof(buf)))
			n->name = "?";
		else
			n->name = ct_intern(buf);
	}
	return n->name[0] ? n->name : NULL;
}

/*
 * A module's name: its attribute in the enclosing module, else its class. A failed
 * lookup is not cached as the class name: it is tried again at the next stack (up to
 * NAME_RETRIES times), so one unlucky read (the target rewriting a dict as it was read)
 * does not name the module by its class for the rest of the session.
 */
#define NAME_RETRIES 8

static const char *module_label(struct ct_pystate *st, struct ct_proc *p, uint64_t parent,
				uint64_t self)
{
	const struct ct_py_objoffsets *oo = ct_py_objoffsets_for(p->py.major, p->py.minor);
	struct name_slot *n;
	unsigned int tries;
	const char *cls;
	char buf[256];
	bool hit;
	int rc = -ENOTSUP;

	if (!parent) {
		if (p->root_module != self || !p->root_class)
			p->root_class = ct_pys_object_label(st, p, self, false);
		return "(root)";
	}
	n = name_slot(st, p->pid, parent, self, &hit);
	if (hit && (!n->fallback || n->fallback > NAME_RETRIES))
		return n->name;
	for (int i = 0; oo && i < 2 && rc; i++)
		rc = ct_py_module_name(p->pid, oo, &p->py.offsets, parent, self, buf, sizeof(buf));
	if (!rc) {
		n->name = ct_intern(buf);
		n->fallback = 0;
		return n->name;
	}
	ct_debug("commtrace: pid %d: module 0x%llx has no name in 0x%llx: %s\n", p->pid,
		 (unsigned long long)self, (unsigned long long)parent, strerror(-rc));
	tries = hit ? n->fallback + 1 : 1;
	cls = ct_pys_object_label(st, p, self, false);

	/* object_label may have taken the same slot: claim it back. */
	n->pid = p->pid;
	n->parent = parent;
	n->obj = self;
	n->name = cls;
	n->fallback = tries;
	st->counts.names_by_class++;
	return cls;
}

uint8_t ct_pys_node_type(const struct ct_rule *r)
{
	return r->role == CT_ROLE_MODULE  ? CT_NODE_MODULE
	       : r->role == CT_ROLE_OP	  ? CT_NODE_OP
	       : r->role == CT_ROLE_GRAPH ? CT_NODE_GRAPH
					  : CT_NODE_REDISTRIBUTE;
}

bool ct_pys_compiled_inner(struct ct_pystate *st, struct ct_proc *p, uint64_t wrapper,
			   uint64_t self)
{
	return wrapper && wrapper != self &&
	       !strcmp(ct_pys_object_label(st, p, wrapper, false), "OptimizedModule") &&
	       !strcmp(module_label(st, p, wrapper, self), "_orig_mod");
}

/*
 * A compiled graph's name: the file of the code it runs (Inductor's output code, its next
 * inner frame), without directory and suffix, as Inductor's logs name it.
 */
static const char *graph_name(const struct ct_pyframe *inner, int rc)
{
	char buf[256];
	const char *base, *dot;

	if (rc || !inner->filename || !inner->filename[0])
		return ct_intern("?");
	base = strrchr(inner->filename, '/');
	base = base ? base + 1 : inner->filename;
	dot = strrchr(base, '.');
	snprintf(buf, sizeof(buf), "%.*s", dot ? (int)(dot - base) : (int)strlen(base), base);
	return ct_intern(buf);
}

/* A module's FQN from the root: "layers.3.mlp" under "layers.3". */
static const char *module_fqn(const char *parent_fqn, const char *name)
{
	char buf[512];

	if (!parent_fqn || !strcmp(parent_fqn, "(root)") || !strcmp(name, "(root)"))
		return name;
	snprintf(buf, sizeof(buf), "%s.%s", parent_fqn, name);
	return ct_intern(buf);
}

/*
 * The display name of a module/op/redistribute frame, by its rule; a module's is its
 * FQN: parent_fqn is that of the enclosing module (NULL at the root).
 */
const char *ct_pys_node_name(struct ct_pystate *st, struct ct_proc *p, const struct ct_rule *r,
			     const struct ct_pyframe *f, uint8_t type, uint64_t parent_module,
			     const char *parent_fqn, uint64_t self, uint64_t arg1)
{
	if (type == CT_NODE_MODULE)
		return module_fqn(parent_fqn, module_label(st, p, parent_module, self));
	if (r->name_from == CT_NAME_ARG1)
		return ct_pys_object_label(st, p, arg1, true);
	if (r->name_from == CT_NAME_SELF)
		return ct_pys_object_label(st, p, self, false);
	return frame_name(r, f);
}

void ct_py_on_capture(struct ct_session *s, struct ct_proc *p, const struct ct_capture_event *ev)
{
	struct ct_pystate *st = s->py;
	unsigned int i;

	if (!st)
		return;
	i = st->ncaps++ % CT_PY_CAPS; /* the oldest goes: its call came long ago, or never */
	st->caps[i].pid = p->pid;
	st->caps[i].ev = *ev;
}

const struct ct_capture_event *ct_pys_take_capture(struct ct_pystate *st, pid_t pid,
						   const struct ct_hdr *h)
{
	for (int i = 0; i < CT_PY_CAPS; i++) {
		if (st->caps[i].pid == pid && st->caps[i].ev.hdr.tid == h->tid &&
		    st->caps[i].ev.hdr.ts == h->ts) {
			st->caps[i].pid = 0; /* once */
			return &st->caps[i].ev;
		}
	}
	return NULL;
}

/*
 * A redistribution's placements, before and after, onto the innermost redistribute node of
 * the path: from the source and target specs of the redistribute_local_tensor running it
 * (f; its frame symbolized as sf, matching r), read from the copies BPF made at the call
 * (cap), or else from the live process a few ms after it (its stacks wake the reader: the
 * target spec is often a temporary); then, once, where this process's specs keep their
 * placements is measured, so that BPF copies them from then on. No such node: an op
 * dispatcher's own redistribution, shown under its op.
 */
static void reshard_placements(struct ct_session *s, struct ct_proc *p,
			       const struct ct_pyframe_raw *f, const struct ct_pyframe *sf,
			       const struct ct_rule *r, const struct ct_capture_event *cap,
			       struct ct_tree_frame *path, int npath)
{
	char buf[256];

	for (int i = npath - 1; i >= 0; i--) {
		if (path[i].type != CT_NODE_REDISTRIBUTE)
			continue;
		s->py->counts.captured += cap != NULL;
		ct_py_captured_begin(p->pid, cap);
		ct_py_snapshot_begin(p->pid); /* two specs of one type: its lines read once */
		ct_tensor_placements(p->pid, &p->py.offsets, f->arg1, buf, sizeof(buf));
		path[i].src = buf[0] ? ct_intern(buf) : NULL;
		ct_tensor_placements(p->pid, &p->py.offsets, f->arg2, buf, sizeof(buf));
		path[i].dst = buf[0] ? ct_intern(buf) : NULL;
		if (!cap && path[i].src && path[i].dst) {
			if (!p->spec_layout.type && p->spec_layout_tries++ < 3 &&
			    !ct_spec_layout(p->pid, &p->py.offsets, f->arg1, &p->spec_layout))
				ct_pys_update_pyproc(s, p, p->torch_layout);
			if (p->spec_layout.type) /* measured now or by --ops: copy from now on */
				ct_pys_tell_known(s, p, f->code, sf, r);
		}
		ct_py_snapshot_end();
		ct_py_captured_end();
		return;
	}
}

/* A stack resolved; *autograd: 1 under a known autograd ctx, -1 under an unknown one. */
static int resolve(struct ct_session *s, struct ct_proc *p, const struct ct_hdr *h,
		   const struct ct_pystack *py, struct ct_py_resolved *out, int *autograd)
{
	struct ct_tree_frame *path;
	struct ct_stack_line *stack;
	struct ct_pystate *st = s->py;
	struct ct_tree_call *c;
	const char *helper = NULL;
	uint64_t parent_module = 0;
	const char *parent_fqn = NULL;
	int npath = 0, nstack = 0, n = py->nframes;
	bool backward = false, attributed = false, unattributed = false, known;
	const char *op = NULL;
	uint64_t helper_arg = 0, opcall_args = 0;
	const struct ct_op_val *seen;
	int ndim, opcall_frame = 0, repeated;
	const struct ct_pyframe *named;
	const int *named_rc;
	const struct ct_pyframe_raw *reshard = NULL;
	const struct ct_pyframe *reshard_f = NULL;
	const struct ct_rule *reshard_r = NULL;

	memset(out, 0, sizeof(*out));
	path = out->path;
	stack = out->stack;
	c = &out->call;
	if (!st || !p->has_python)
		return -1;
	st->counts.stacks_cut += !!(py->flags & CT_PYS_CUT);
	if (!n)
		return -1;
	st->counts.stacks++;
	known = py->flags & CT_PYS_KNOWN;
	st->counts.stacks_known += known;
	if (!known) /* torch imported since the process was attached */
		ct_pys_torch_layout_to_bpf(s, p);
	repeated = ct_last_stack_named(&p->last_stacks, st->sym, p->pid, h->tid, &p->py.offsets,
				       py->frames, n, known, &named, &named_rc);
	if (repeated < 0) { /* out of memory there: named here, none repeated */
		ct_py_symbolize_many(st->sym, p->pid, &p->py.offsets, py->frames, n, known,
				     st->frames_buf, st->frames_rc);
		named = st->frames_buf;
		named_rc = st->frames_rc;
	} else {
		st->counts.frames_repeated += repeated;
	}
	/* Innermost first from BPF; the tree wants the outermost first. */
	for (int i = n - 1; i >= 0; i--) {
		const struct ct_pyframe_raw *raw = &py->frames[i];
		const struct ct_pyframe *f = &named[i];
		const struct ct_rule *r;
		const struct role_slot *rs;
		int rc = named_rc[i];

		st->counts.frames++;
		if (rc) {
			st->counts.frames_unresolved++;
			ct_debug("commtrace: pid %d: frame %d code 0x%llx: %s\n", p->pid, i,
				 (unsigned long long)raw->code, strerror(-rc));
			continue;
		}
		if (i < CT_TREE_MAX_STACK) {
			stack[i].qualname = f->qualname;
			stack[i].file = f->filename;
			stack[i].line = f->line;
			if (i + 1 > nstack)
				nstack = i + 1;
		}
		rs = role_slot_of(st, f);
		if (f->fresh)
			ct_pys_tell_known(s, p, raw->code, f, rs->rule);
		if (rs->op)
			op = rs->op; /* the innermost: what the stack finally dispatches */
		r = rs->rule;
		if (!r)
			continue;
		switch (r->role) {
		case CT_ROLE_BACKWARD:
			backward = true;
			break;
		case CT_ROLE_AUTOGRAD: {
			/* The backward of a Function: its collectives belong to the module whose
			 * forward created the ctx; what the stack held above (the engine, the
			 * training loop) is replaced by that module's path. */
			const struct ct_ctx_path *cp = ct_ctxtab_find(st->ctxs, p->pid, raw->self);

			backward = true;
			if (!cp) {
				ct_debug(
				    "commtrace: pid %d: backward of unknown autograd ctx 0x%llx\n",
				    p->pid, (unsigned long long)raw->self);
				unattributed = true;
				break;
			}
			unattributed = false;
			npath = cp->n < CT_TREE_MAX_DEPTH - 1 ? cp->n : CT_TREE_MAX_DEPTH - 1;
			memcpy(path, cp->f, (size_t)npath * sizeof(*path));
			parent_module = npath ? path[npath - 1].self : 0;
			parent_fqn = npath ? path[npath - 1].name : NULL;
			attributed = true;
			break;
		}
		case CT_ROLE_RESHARD:
			reshard = raw; /* the innermost: the one that communicates */
			reshard_f = f;
			reshard_r = r;
			break;
		case CT_ROLE_OPCALL: {
			/* torch.compile's generated code calls a functional collective's op */
			const char *h, *fo = ct_profiles_funcol_op(
					   ct_pys_object_label(st, p, raw->self, true), &h);

			if (fo) {
				op = fo;
				helper = helper ? helper : ct_intern(h);
				opcall_args = raw->arg1;
				opcall_frame = i;
			}
			break;
		}
		case CT_ROLE_HELPER:
			if (!helper) {
				helper = frame_name(r, f);
				helper_arg =
				    raw->self; /* its first argument: the tensor, usually */
			}
			break;
		case CT_ROLE_MODULE:
		case CT_ROLE_OP:
		case CT_ROLE_REDISTRIBUTE:
		case CT_ROLE_GRAPH: {
			struct ct_tree_frame *t = &path[npath];
			uint8_t type = ct_pys_node_type(r);
			uint64_t self = raw->self;

			if (type == CT_NODE_MODULE && npath &&
			    path[npath - 1].type == CT_NODE_MODULE &&
			    path[npath - 1].self == parent_module &&
			    ct_pys_compiled_inner(st, p, parent_module, self)) {
				path[npath - 1].self = self;
				if (p->root_module == parent_module) {
					p->root_module = self;
					p->root_class = ct_pys_object_label(st, p, self, false);
				}
				parent_module = self;
				break;
			}

			/* A module's forward may run its own _call_impl twice (hooks), or
			 * _wrapped_call_impl then _call_impl (torch 2.x): one node. So is one
			 * redistribution seen at two levels (torch 2.x: DTensor.redistribute,
			 * then the autograd Redistribute.forward it applies). */
			if (npath && path[npath - 1].type == type &&
			    ((type == CT_NODE_MODULE && path[npath - 1].self == self) ||
			     type == CT_NODE_REDISTRIBUTE))
				break;
			if (npath == CT_TREE_MAX_DEPTH - 1)
				break;
			t->type = type;
			t->code = raw->code;
			t->self = self;
			t->instr = raw->instr;
			if (type == CT_NODE_GRAPH) {
				/* one node per run: its code's instruction tells the runs apart */
				t->instr = i ? py->frames[i - 1].instr : 0;
				t->name =
				    graph_name(i ? &named[i - 1] : NULL, i ? named_rc[i - 1] : -1);
			} else {
				t->name = ct_pys_node_name(st, p, r, f, type, parent_module,
							   parent_fqn, self, raw->arg1);
			}
			if (type == CT_NODE_MODULE) {
				parent_fqn = t->name;
				if (!parent_module)
					p->root_module = self; /* for --sharding */
				parent_module = self;
			}
			npath++;
			break;
		}
		}
	}
	/* Once, while it runs; again (up to 3 times) if part of it could not be read. */
	if (s->opts->sharding && p->root_module &&
	    (!p->params || ((p->params->err || p->params->unreadable) && p->params_tries < 3))) {
		struct ct_params *prm = ct_params_collect(p->pid, &p->py, p->root_module);

		p->params_tries++;
		if (prm && p->params && (prm->err == -ESRCH || prm->n < p->params->n)) {
			ct_params_free(prm); /* gone meanwhile: keep the better read */
		} else if (prm) {
			ct_params_free(p->params);
			p->params = prm;
		}
	}
	if (reshard)
		reshard_placements(s, p, reshard, reshard_f, reshard_r,
				   ct_pys_take_capture(st, p->pid, h), path, npath);
	/* Frames that could not be read leave holes: keep the stack dense. */
	for (int i = 0, j = 0; i < nstack; i++)
		if (stack[i].qualname)
			stack[j++] = stack[i];
	*autograd = attributed ? 1 : unattributed ? -1 : 0;
	out->attributed = attributed;
	c->helper = helper;
	c->op = op;
	if (!helper_arg && opcall_args) /* torch.compile's code: the op's tensor argument */
		helper_arg = opcall_first(p, py, opcall_frame, opcall_args);
	seen = described(py, helper_arg);
	if (!helper) {
		c->in_ndim = CT_SHAPE_NONE;
	} else if (seen && (ndim = ct_opval_shape(seen, c->in_shape)) >= 0) {
		c->in_ndim = (int8_t)ndim; /* read by BPF at the call */
	} else if (py->flags & CT_PYS_HELPER) {
		c->in_ndim = shape_unknown(s, p, py->helper[0].obj, py->helper[0].type, true);
	} else {
		helper_shape(s, p, helper_arg, seen ? seen->type : 0, c);
	}
	c->root_class = npath && path[0].type == CT_NODE_MODULE ? p->root_class : NULL;
	c->phase = backward ? CT_PHASE_BACKWARD : CT_PHASE_FORWARD;
	c->truncated = py->flags & (CT_PYS_TRUNCATED | CT_PYS_CUT);
	c->path = path;
	c->npath = npath;
	c->stack = stack;
	c->nstack = nstack;
	return 0;
}

int ct_py_resolve(struct ct_session *s, struct ct_proc *p, const struct ct_call_event *ev,
		  struct ct_py_resolved *out)
{
	int autograd = 0, rc = resolve(s, p, &ev->hdr, &ev->py, out, &autograd);

	/* what the collectives' attribution did (a context's own stack is not one) */
	if (!rc && autograd > 0)
		ct_ctxtab_stats(s->py->ctxs)->attributed++;
	else if (!rc && autograd < 0)
		ct_ctxtab_stats(s->py->ctxs)->unattributed++;
	return rc;
}

int ct_py_resolve_stack(struct ct_session *s, struct ct_proc *p, const struct ct_hdr *h,
			const struct ct_pystack *py, struct ct_py_resolved *out)
{
	int autograd;

	return resolve(s, p, h, py, out, &autograd);
}

void ct_py_ctx_enter(struct ct_session *s, struct ct_proc *p, const struct ct_call_event *ev)
{
	struct ct_pystate *st = s->py;
	struct ct_py_resolved *r;
	int autograd;

	if (!st || !p->has_python)
		return;
	r = malloc(sizeof(*r));
	if (r && !resolve(s, p, &ev->hdr, &ev->py, r, &autograd))
		ct_ctxtab_enter(st->ctxs, p->pid, (pid_t)ev->hdr.tid, r->path, r->call.npath);
	free(r);
}

void ct_py_ctx_created(struct ct_session *s, struct ct_proc *p, uint32_t tid, uint64_t ctx)
{
	if (s->py)
		ct_ctxtab_created(s->py->ctxs, p->pid, (pid_t)tid, ctx);
}

const struct ct_autograd_stats *ct_py_autograd_stats(const struct ct_session *s)
{
	return s->py ? ct_ctxtab_stats(s->py->ctxs) : NULL;
}

const struct ct_py_counts *ct_py_counts(const struct ct_session *s)
{
	struct ct_pysym_stats st;

	if (!s->py)
		return NULL;
	ct_pysym_cache_stats(s->py->sym, &st);
	s->py->counts.frames_late = st.checked_misses;
	s->py->counts.unverifiable = st.unverifiable;
	s->py->counts.frames_reused = st.reused;
	s->py->counts.frames_unreadable = st.unread;
	return &s->py->counts;
}
