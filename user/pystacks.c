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
#include "commtrace/pyoffsets.h"
#include "python/autograd.h"
#include "python/objects.h"
#include "python/opvals.h"
#include "python/params.h"
#include "python/profiles.h"
#include "python/symbolize.h"
#include "target/proc.h"
#include "targets.h"
#include "util/intern.h"
#include "util/log.h"

/* Which rule a code object matched: looked up once per code object, not per event. */
#define ROLE_CACHE 4096

struct role_slot {
	pid_t pid;
	uint64_t code;
	const struct ct_rule *rule; /* NULL: no role */
	const char *op;		    /* the op a torch collective API dispatches, or NULL */
	int valid;
};

/* Names of objects (modules in their parent, ops), by (pid, parent, object). */
#define NAME_CACHE 1024

struct name_slot {
	pid_t pid;
	uint64_t parent, obj;
	const char *name;
	unsigned int fallback; /* module_label: lookups that fell back to the class name */
};

/* --ops: the function a functools.wraps wrapper wraps, as its code object, by (pid, wrapper
 * function). A wrapper made per function lives as long as it; a stale slot only costs a
 * misjudged wrapper until its verdict is evicted, and the symbolizer checks the code. */
#define WRAP_CACHE 256

struct wrap_slot {
	pid_t pid;
	uint64_t func, code;
};

struct ct_pystate {
	struct ct_pysym_cache *sym;
	struct ct_profiles profiles;
	struct role_slot roles[ROLE_CACHE];
	struct name_slot names[NAME_CACHE];
	struct wrap_slot wraps[WRAP_CACHE];
	struct ct_py_counts counts;
	struct ct_ops_stats ops;
	struct ct_opvals_cache *vals;			/* --ops: op argument and result types */
	struct ct_pyframe frames_buf[CT_PY_MAX_FRAMES]; /* one stack, symbolized */
	int frames_rc[CT_PY_MAX_FRAMES];
	struct ct_ctxtab *ctxs; /* autograd contexts' forward module paths */
};

/*
 * --ops: per process, the calls in flight on each thread as BPF sent them; and, once the
 * thread ran an autograd Function's backward (BackwardCFunction.apply), the forward module
 * path of its ctx, under which the backward's ops go until the next module entry.
 */
struct ops_thread {
	pid_t tid;
	int n;
	struct {
		int32_t node; /* its tree node, or -1 (not kept, or merged) */
		uint64_t code;
	} at[CT_OPS_MAX_DEPTH];
	bool backward;
	struct ct_ctx_path bwd;
};

struct ct_pyops {
	struct ops_thread threads[CT_TREE_MAX_THREADS];
};

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
static int attach_ops(struct ct_session *s, struct ct_proc *p)
{
	struct ct_sym_want want = {.name = "_PyEval_EvalFrameDefault"};
	struct ct_sym_found found = {0};
	char fpath[PATH_MAX + 32], err[256];
	struct ct_elf *e;
	int rc;

	snprintf(fpath, sizeof(fpath), "%s", p->py.open_path);
	e = ct_elf_open(fpath, err, sizeof(err));
	if (!e)
		return -ENOENT;
	ct_elf_resolve(e, &want, 1, &found);
	if (found.found)
		found.file_off += ct_elf_endbr_len(e, found.addr);
	ct_elf_close(e);
	if (!found.found) {
		fprintf(stderr,
			"commtrace-bpf: pid %d: no _PyEval_EvalFrameDefault in %s: --ops "
			"sees no calls there\n",
			p->pid, p->py.path);
		return 0;
	}
	p->ops = calloc(1, sizeof(*p->ops));
	if (!p->ops)
		return -ENOMEM;
	rc = ct_bpf_attach_pyops(s, p->pid, fpath, found.file_off, &p->links);
	if (rc) {
		free(p->ops);
		p->ops = NULL;
	}
	return rc;
}

/* What BPF needs to describe op arguments and results; torch's part once it is loaded. */
static void fill_vals(const struct ct_proc *p, const struct ct_torch_layout *tl,
		      struct ct_pyvals_bpf *v)
{
	const struct ct_py_objoffsets *oo = ct_py_objoffsets_for(p->py.major, p->py.minor);

	memset(v, 0, sizeof(*v));
	if (!oo)
		return;
	v->var_size = oo->var_size;
	v->tuple_items = oo->tuple_items;
	v->type_flags = oo->type_flags;
	v->tuple_flag = oo->tpflags_tuple_subclass;
	if (tl) {
		v->thp_borrowed = tl->thp_borrowed;
		v->thp_cdata = tl->thp_cdata;
		v->ti_dim = tl->ti_dim;
		v->ti_sizes = tl->ti_sizes;
		v->ti_numel = tl->ti_numel;
		v->ti_dtype = tl->ti_dtype;
		v->inline_max = tl->inline_max;
	}
	v->spec_slot = p->spec_slot;
}

static int update_pyproc(struct ct_session *s, struct ct_proc *p, const struct ct_torch_layout *tl)
{
	struct ct_pyproc_bpf v = {0};
	__u32 key = p->pid;

	v.runtime = p->py.runtime_addr;
	v.cell_type = p->py.cell_type_addr;
	v.off = p->py.offsets;
	fill_vals(p, tl, &v.vals);
	return bpf_map_update_elem(bpf_map__fd(s->skel->maps.pyprocs), &key, &v, BPF_ANY) ? -errno
											  : 0;
}

/* torch's tensor layout in p, for user-space reads, looked up until torch is loaded. */
static const struct ct_torch_layout *tensor_layout(struct ct_proc *p)
{
	char version[32];

	if (p->tensor_layout || p->tensor_layout_tries >= 8)
		return p->tensor_layout;
	p->tensor_layout_tries++;
	ct_torch_version(p->pid, version, sizeof(version));
	p->tensor_layout = ct_torch_layout_for(version);
	return p->tensor_layout;
}

/* Seed 000's input_shape: of the helper's tensor argument, read now (it is alive: the
 * collective that uses it is running or just ran). */
static void helper_shape(struct ct_proc *p, uint64_t arg, struct ct_tree_call *c)
{
	int64_t shape[CT_PARAM_DIMS_MAX];
	uint16_t dtype;
	int ndim;

	c->in_ndim = -1;
	if (!arg || ct_tensor_read(p->pid, tensor_layout(p), arg, &dtype, &ndim, shape) ||
	    ndim < 0 || ndim > CT_VALUE_DIMS)
		return;
	c->in_ndim = (int8_t)ndim;
	memcpy(c->in_shape, shape, (size_t)ndim * sizeof(shape[0]));
}

/*
 * --ops: before BPF describes an op's arguments, tell it torch's tensor layout if torch is
 * loaded now (looked up until it is: ops of a framework without torch get types only).
 */
static void torch_layout_to_bpf(struct ct_session *s, struct ct_proc *p)
{
	char version[32];
	const struct ct_torch_layout *tl;

	if (p->torch_layout)
		return;
	ct_torch_version(p->pid, version, sizeof(version));
	tl = ct_torch_layout_for(version);
	if (!tl)
		return;
	if (!update_pyproc(s, p, tl))
		p->torch_layout = tl;
	ct_info("commtrace: pid %d: torch %s: op arguments with dtypes and shapes\n", p->pid,
		version);
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
	rc = update_pyproc(s, p, NULL);
	if (rc)
		return rc;
	p->has_python = true;
	ct_info("commtrace: pid %d: CPython %d.%d, _PyRuntime at 0x%llx%s\n", p->pid, p->py.major,
		p->py.minor, (unsigned long long)p->py.runtime_addr,
		p->py.from_debug ? " (offsets from _Py_DebugOffsets)" : "");
	if (s->opts->ops)
		return attach_ops(s, p);
	return 0;
}

static const struct role_slot *role_slot_of(struct ct_pystate *st, pid_t pid, uint64_t code,
					    const struct ct_pyframe *f)
{
	struct role_slot *r = &st->roles[(code >> 4 ^ (uint64_t)pid) % ROLE_CACHE];
	const char *dot;

	/* The symbolizer validated the code object; a stale slot is just recomputed. */
	if (r->valid && r->pid == pid && r->code == code)
		return r;
	r->pid = pid;
	r->code = code;
	r->rule = ct_profiles_match(&st->profiles, f->qualname, f->filename);
	dot = strrchr(f->qualname, '.');
	r->op = ct_profiles_op_name(dot ? dot + 1 : f->qualname, f->filename);
	r->valid = 1;
	return r;
}

static const struct ct_rule *role_of(struct ct_pystate *st, pid_t pid, uint64_t code,
				     const struct ct_pyframe *f)
{
	return role_slot_of(st, pid, code, f)->rule;
}

static const char *short_func(const char *qualname)
{
	const char *dot = strrchr(qualname, '.');

	return dot ? dot + 1 : qualname;
}

/* A frame named by its code (a helper's, or an op's by rule): interned. */
static const char *frame_name(const struct ct_rule *r, const struct ct_pyframe *f)
{
	return r->name_from == CT_NAME_QUALNAME ? f->iqualname : ct_intern(short_func(f->qualname));
}

/*
 * Object names cost several reads of the target: cached. Module objects live as
 * long as the model; a freed op object whose address is reused could show a
 * stale name until evicted, a cost accepted for not reading on every event.
 */
static struct name_slot *name_slot(struct ct_pystate *st, pid_t pid, uint64_t parent, uint64_t obj,
				   bool *hit)
{
	struct name_slot *n = &st->names[((obj >> 4) ^ (parent >> 3) ^ (uint64_t)pid) % NAME_CACHE];

	*hit = n->name && n->pid == pid && n->parent == parent && n->obj == obj;
	if (!*hit)
		n->fallback = 0;
	n->pid = pid;
	n->parent = parent;
	n->obj = obj;
	return n;
}

static const char *object_label(struct ct_pystate *st, struct ct_proc *p, uint64_t obj,
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
			p->root_class = object_label(st, p, self, false);
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
	cls = object_label(st, p, self, false);

	/* object_label may have taken the same slot: claim it back. */
	n->pid = p->pid;
	n->parent = parent;
	n->obj = self;
	n->name = cls;
	n->fallback = tries;
	st->counts.names_by_class++;
	return cls;
}

static uint8_t node_type(const struct ct_rule *r)
{
	return r->role == CT_ROLE_MODULE ? CT_NODE_MODULE
	       : r->role == CT_ROLE_OP	 ? CT_NODE_OP
					 : CT_NODE_REDISTRIBUTE;
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
static const char *node_name(struct ct_pystate *st, struct ct_proc *p, const struct ct_rule *r,
			     const struct ct_pyframe *f, uint8_t type, uint64_t parent_module,
			     const char *parent_fqn, uint64_t self, uint64_t arg1)
{
	if (type == CT_NODE_MODULE)
		return module_fqn(parent_fqn, module_label(st, p, parent_module, self));
	if (r->name_from == CT_NAME_ARG1)
		return object_label(st, p, arg1, true);
	if (r->name_from == CT_NAME_SELF)
		return object_label(st, p, self, false);
	return frame_name(r, f);
}

/* A stack resolved; *autograd: 1 under a known autograd ctx, -1 under an unknown one. */
static int resolve(struct ct_session *s, struct ct_proc *p, const struct ct_call_event *ev,
		   struct ct_py_resolved *out, int *autograd)
{
	struct ct_tree_frame *path;
	struct ct_stack_line *stack;
	struct ct_pystate *st = s->py;
	struct ct_tree_call *c;
	const char *helper = NULL;
	uint64_t parent_module = 0;
	const char *parent_fqn = NULL;
	int npath = 0, nstack = 0, n = ev->py.nframes;
	bool backward = false, attributed = false, unattributed = false;
	const char *op = NULL;
	uint64_t helper_arg = 0;

	memset(out, 0, sizeof(*out));
	path = out->path;
	stack = out->stack;
	c = &out->call;
	if (!st || !p->has_python || !n)
		return -1;
	st->counts.stacks++;
	ct_py_symbolize_many(st->sym, p->pid, &p->py.offsets, ev->py.frames, n, st->frames_buf,
			     st->frames_rc);
	/* Innermost first from BPF; the tree wants the outermost first. */
	for (int i = n - 1; i >= 0; i--) {
		const struct ct_pyframe_raw *raw = &ev->py.frames[i];
		const struct ct_pyframe *f = &st->frames_buf[i];
		const struct ct_rule *r;
		const struct role_slot *rs;
		int rc = st->frames_rc[i];

		st->counts.frames++;
		if (rc) {
			st->counts.frames_unresolved++;
			ct_debug("commtrace: pid %d: frame %d code 0x%llx: %s\n", p->pid, i,
				 (unsigned long long)raw->code, strerror(-rc));
			continue;
		}
		if (i < CT_TREE_MAX_STACK) {
			stack[i].qualname = f->iqualname;
			stack[i].file = f->ifilename;
			stack[i].line = f->line;
			if (i + 1 > nstack)
				nstack = i + 1;
		}
		rs = role_slot_of(st, p->pid, raw->code, f);
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
		case CT_ROLE_HELPER:
			if (!helper) {
				helper = frame_name(r, f);
				helper_arg =
				    raw->self; /* its first argument: the tensor, usually */
			}
			break;
		case CT_ROLE_MODULE:
		case CT_ROLE_OP:
		case CT_ROLE_REDISTRIBUTE: {
			struct ct_tree_frame *t = &path[npath];
			uint8_t type = node_type(r);
			uint64_t self = raw->self;

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
			t->name = node_name(st, p, r, f, type, parent_module, parent_fqn, self,
					    raw->arg1);
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
	/* Frames that could not be read leave holes: keep the stack dense. */
	for (int i = 0, j = 0; i < nstack; i++)
		if (stack[i].qualname)
			stack[j++] = stack[i];
	*autograd = attributed ? 1 : unattributed ? -1 : 0;
	out->attributed = attributed;
	c->helper = helper;
	c->op = op;
	helper_shape(p, helper_arg, c);
	c->root_class = npath && path[0].type == CT_NODE_MODULE ? p->root_class : NULL;
	c->phase = backward ? CT_PHASE_BACKWARD : CT_PHASE_FORWARD;
	c->truncated = ev->py.flags & CT_PYS_TRUNCATED;
	c->path = path;
	c->npath = npath;
	c->stack = stack;
	c->nstack = nstack;
	return 0;
}

int ct_py_resolve(struct ct_session *s, struct ct_proc *p, const struct ct_call_event *ev,
		  struct ct_py_resolved *out)
{
	int autograd = 0, rc = resolve(s, p, ev, out, &autograd);

	/* what the collectives' attribution did (a context's own stack is not one) */
	if (!rc && autograd > 0)
		ct_ctxtab_stats(s->py->ctxs)->attributed++;
	else if (!rc && autograd < 0)
		ct_ctxtab_stats(s->py->ctxs)->unattributed++;
	return rc;
}

void ct_py_ctx_enter(struct ct_session *s, struct ct_proc *p, const struct ct_call_event *ev)
{
	struct ct_pystate *st = s->py;
	struct ct_py_resolved *r;
	int autograd;

	if (!st || !p->has_python)
		return;
	r = malloc(sizeof(*r));
	if (r && !resolve(s, p, ev, r, &autograd))
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
	return s->py ? &s->py->counts : NULL;
}

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
		torch_layout_to_bpf(s, p);
		v |= CT_OPV_ARGS(r->args);
	}
	if (!bpf_map_update_elem(bpf_map__fd(s->skel->maps.op_codes), &key, &v, BPF_ANY))
		s->py->ops.verdicts++;
}

/*
 * A DTensor's placements are read from its _spec, which BPF takes with the op's values once
 * it knows the slot: found here on the first DTensor described (while it is alive: this
 * op's own values, read at its entry).
 */
static void find_spec_slot(struct ct_session *s, struct ct_proc *p, const struct ct_op_vals *vals,
			   const struct ct_values *v)
{
	const struct ct_py_objoffsets *oo = ct_py_objoffsets_for(p->py.major, p->py.minor);
	uint64_t off;

	for (int i = 0; i < v->n && !p->spec_slot; i++) {
		if (!v->v[i].placements || strcmp(v->v[i].kind, "DTensor") ||
		    ct_py_slot_offset(p->pid, oo, &p->py.offsets, vals->v[i].obj, "_spec", &off) ||
		    !off || off >= CT_PY_NONE)
			continue;
		p->spec_slot = (uint16_t)off;
		if (update_pyproc(s, p, p->torch_layout))
			p->spec_slot = 0;
		else
			ct_info("commtrace: pid %d: DTensor placements taken at each op (_spec at "
				"+%llu)\n",
				p->pid, (unsigned long long)off);
	}
}

static void set_values(struct ct_session *s, struct ct_proc *p, int32_t node, bool outputs,
		       const struct ct_op_vals *vals)
{
	struct ct_values v;

	if (node < 0 || !vals)
		return;
	ct_opvals_describe(s->py->vals, p->pid, &p->py, p->torch_layout, vals, &v);
	if (!p->spec_slot && !outputs)
		find_spec_slot(s, p, vals, &v);
	ct_tree_set_values(&p->tree, node, outputs, &v);
}

static const struct ct_op_vals *vals_of(const struct ct_op_event *ev)
{
	return ev->has_vals ? &((const struct ct_op_vals_event *)ev)->vals : NULL;
}

/* The code object of what the wrapper function func wraps (its __wrapped__). */
static int wrapped_code(struct ct_pystate *st, struct ct_proc *p, uint64_t func, uint64_t *code)
{
	const struct ct_py_objoffsets *oo = ct_py_objoffsets_for(p->py.major, p->py.minor);
	struct wrap_slot *w = &st->wraps[(func >> 4 ^ (uint64_t)p->pid) % WRAP_CACHE];
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
		rc = ct_py_symbolize(st->sym, p->pid, &p->py.offsets, c->code, 0, &c->f);
	if (!rc)
		r = role_of(st, p->pid, c->code, &c->f);
	if (!rc && r && r->role == CT_ROLE_WRAPPER && ev->wrapped == CT_OP_MAYBE_WRAPPER && v) {
		/* Its first call, sent before BPF knew: the args tuple's items came with it. */
		set_verdict(s, p, ev->code, r);
		c->key = ev->func;
		c->self = v->n > 0 ? v->v[0].obj : 0;
		c->arg1 = v->n > 1 ? v->v[1].obj : 0;
		v = NULL; /* the op's own values were not read: not described */
		through = true;
		rc = wrapped_code(st, p, ev->func, &c->code);
		if (!rc)
			rc = ct_py_symbolize(st->sym, p->pid, &p->py.offsets, c->code, 0, &c->f);
		r = rc ? NULL : role_of(st, p->pid, c->code, &c->f);
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
	for (int i = 0; i < CT_TREE_MAX_THREADS && slot < 0; i++)
		if (ops->threads[i].tid == (pid_t)ev->hdr.tid)
			slot = i;
	for (int i = 0; i < CT_TREE_MAX_THREADS && slot < 0; i++)
		if (!ops->threads[i].tid && ev->hdr.type == CT_EV_OP)
			slot = i;
	if (slot < 0) {
		st->ops.lost++; /* more threads calling profiled functions than slots */
		return;
	}
	ops->threads[slot].tid = (pid_t)ev->hdr.tid;
	n = ops->threads[slot].n;
	if (ev->hdr.type == CT_EV_OPEXIT) {
		if (!n || ops->threads[slot].at[n - 1].code != ev->code) {
			st->ops.unpaired++;
			return;
		}
		ops->threads[slot].n = --n;
		set_values(s, p, ops->threads[slot].at[n].node, true, vals_of(ev));
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
		uint8_t type = node_type(r);
		const struct ct_node *mod =
		    ct_tree_open_node(&p->tree, ev->hdr.tid, CT_NODE_MODULE);
		const char *name;

		st->ops.kept++;
		top = ct_tree_open_node(&p->tree, ev->hdr.tid, 0);
		if (type == CT_NODE_MODULE)
			th->backward = false; /* a forward */
		if (th->backward && !top) {
			/* A backward op: at its autograd Function's forward modules. */
			const struct ct_tree_frame *in =
			    th->bwd.n ? &th->bwd.f[th->bwd.n - 1] : NULL;

			name = node_name(st, p, r, &c.f, type, in ? in->self : 0,
					 in ? in->name : NULL, c.self, c.arg1);
			node = ct_tree_enter_beside(&p->tree, ev->hdr.tid, th->bwd.f, th->bwd.n,
						    type, name, c.code, c.self, ev->hdr.ts);
		} else if (!(top && top->type == type && type == CT_NODE_MODULE &&
			     top->self == c.self)) {
			/* One node per module call (_wrapped_call_impl then _call_impl), as for
			 * stacks. */
			name = node_name(st, p, r, &c.f, type, mod ? mod->self : 0,
					 mod ? mod->name : NULL, c.self, c.arg1);
			node = ct_tree_enter(&p->tree, ev->hdr.tid, type, name, c.code, c.self,
					     ev->hdr.ts);
		}
		if (type == CT_NODE_MODULE && !mod)
			p->root_module = c.self;
		if (type == CT_NODE_OP && node >= 0 &&
		    ct_py_is_class(p->pid, ct_py_objoffsets_for(p->py.major, p->py.minor),
				   &p->py.offsets, c.self))
			ct_tree_set_dispatcher(&p->tree, node, object_label(st, p, c.self, true));
		set_values(s, p, node, false, c.vals);
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
