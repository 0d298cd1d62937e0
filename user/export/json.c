// SPDX-License-Identifier: MIT
/* The --json document; its schema is in docs/json.md. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "diag/diag.h"
#include "drops.h"
#include "export/export.h"
#include "pystacks.h"
#include "python/params.h"
#include "util/clock.h"
#include "util/output.h"
#include "ct_version.h"

static cJSON *num(double v)
{
	return cJSON_CreateNumber(v);
}

/* Integers past 2^53 (wall-clock ns) would lose digits as doubles: written raw. */
static cJSON *u64(uint64_t v)
{
	char buf[24];

	if (v <= (1ULL << 53))
		return num((double)v);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	return cJSON_CreateRaw(buf);
}

static void add_str_or_null(cJSON *o, const char *key, const char *v)
{
	if (v)
		cJSON_AddStringToObject(o, key, v);
	else
		cJSON_AddNullToObject(o, key);
}

static void add_count(cJSON *counts, const char *name, uint64_t n)
{
	cJSON *c = cJSON_GetObjectItemCaseSensitive(counts, name);

	if (c)
		cJSON_SetNumberValue(c, c->valuedouble + (double)n);
	else
		cJSON_AddItemToObject(counts, name, num((double)n));
}

/* {"p50","max"} of a bandwidth histogram (bytes/s), in GB/s as nccl-tests prints it. */
static cJSON *gbs_obj(const struct ct_hist *h)
{
	cJSON *t = cJSON_CreateObject();

	cJSON_AddItemToObject(t, "p50", num((double)ct_hist_quantile(h, 0.5) / 1e9));
	cJSON_AddItemToObject(t, "max", num((double)h->max / 1e9));
	return t;
}

/*
 * A function's bandwidth (user/bandwidth.h): algbw_gbs and busbw_gbs of the calls that
 * have one, else null with busbw_reason; calls without one, by reason.
 */
static void add_bandwidth(cJSON *c, const struct ct_fstats *st)
{
	cJSON *none = cJSON_CreateObject();
	int top = -1;

	for (int r = 1; r < CT_BW_REASONS; r++) {
		if (!st->bw_none[r])
			continue;
		cJSON_AddItemToObject(none, ct_bw_reason_name(r), u64(st->bw_none[r]));
		if (top < 0 || st->bw_none[r] > st->bw_none[top])
			top = r;
	}
	if (st->busbw.n) {
		cJSON_AddItemToObject(c, "algbw_gbs", gbs_obj(&st->algbw));
		cJSON_AddItemToObject(c, "busbw_gbs", gbs_obj(&st->busbw));
	} else {
		cJSON_AddNullToObject(c, "algbw_gbs");
		cJSON_AddNullToObject(c, "busbw_gbs");
		if (top > 0)
			cJSON_AddStringToObject(c, "busbw_reason", ct_bw_reason_name(top));
		else
			cJSON_AddStringToObject(c, "busbw_reason", "no_duration");
	}
	cJSON_AddItemToObject(c, "bandwidth_calls", u64(st->busbw.n));
	cJSON_AddItemToObject(c, "bandwidth_missing", none);
}

static cJSON *time_obj(const struct ct_hist *h)
{
	cJSON *t = cJSON_CreateObject();

	cJSON_AddItemToObject(t, "min", u64(h->min));
	cJSON_AddItemToObject(t, "p50", u64(ct_hist_quantile(h, 0.5)));
	cJSON_AddItemToObject(t, "p99", u64(ct_hist_quantile(h, 0.99)));
	cJSON_AddItemToObject(t, "max", u64(h->max));
	cJSON_AddItemToObject(t, "total", u64(h->total));
	return t;
}

/* --ops: an op's inputs or outputs, [{"kind","shape","dtype","placements"}...]. */
static void add_values(cJSON *o, const char *key, const struct ct_values *vs)
{
	char more[32];
	cJSON *a;

	if (!vs) {
		cJSON_AddNullToObject(o, key); /* not read: the op's first call, or a drop */
		return;
	}
	a = cJSON_AddArrayToObject(o, key);
	for (int i = 0; i < vs->n; i++) {
		const struct ct_value *v = &vs->v[i];
		cJSON *e = cJSON_CreateObject(), *shape;

		cJSON_AddStringToObject(e, "kind", v->kind ? v->kind : "?");
		if (v->ndim >= 0) {
			shape = cJSON_AddArrayToObject(e, "shape");
			for (int d = 0; d < v->ndim; d++)
				cJSON_AddItemToArray(shape, num((double)v->shape[d]));
		} else {
			cJSON_AddNullToObject(e, "shape");
		}
		if (v->dtype)
			cJSON_AddStringToObject(e, "dtype", v->dtype);
		else
			cJSON_AddNullToObject(e, "dtype");
		if (v->placements)
			cJSON_AddStringToObject(e, "placements", v->placements);
		if (v->mesh)
			cJSON_AddStringToObject(e, "mesh", v->mesh);
		if (v->freed)
			cJSON_AddTrueToObject(e, "freed");
		if (v->no_layout)
			cJSON_AddStringToObject(e, "shape_unknown", "no_layout");
		cJSON_AddItemToArray(a, e);
	}
	if (vs->total > vs->n) {
		snprintf(more, sizeof(more), "%s_more", key);
		cJSON_AddItemToObject(o, more, num(vs->total - vs->n));
	}
}

static cJSON *record(const struct ct_tree *t, const struct ct_node *n, int depth)
{
	cJSON *o = cJSON_CreateObject(), *kids = cJSON_CreateArray();

	if (n->type != CT_NODE_COLLECTIVE && n->ts) { /* --ops: seen entering and leaving */
		cJSON_AddItemToObject(o, "ts_ns", u64(n->ts));
		cJSON_AddItemToObject(o, "duration_ns", u64(n->duration));
		cJSON_AddItemToObject(o, "tid", num(n->tid));
	}
	switch (n->type) {
	case CT_NODE_MODULE:
		cJSON_AddStringToObject(o, "type", "module");
		cJSON_AddStringToObject(o, "module_fqn", n->name);
		cJSON_AddStringToObject(o, "phase",
					n->phase == CT_PHASE_BACKWARD ? "backward" : "forward");
		break;
	case CT_NODE_OP:
		cJSON_AddStringToObject(o, "type", "op");
		cJSON_AddStringToObject(o, "op_name", n->name);
		if (n->ts) { /* --ops */
			cJSON_AddStringToObject(
			    o, "phase", n->phase == CT_PHASE_BACKWARD ? "backward" : "forward");
			add_str_or_null(o, "dispatched_by", n->dispatcher);
			add_values(o, "inputs", n->inputs);
			add_values(o, "outputs", n->outputs);
		}
		break;
	case CT_NODE_GRAPH: /* torch.compile: named after the file of its generated code */
		cJSON_AddStringToObject(o, "type", "graph");
		cJSON_AddStringToObject(o, "name", n->name);
		cJSON_AddStringToObject(o, "phase",
					n->phase == CT_PHASE_BACKWARD ? "backward" : "forward");
		break;
	case CT_NODE_REDISTRIBUTE:
		cJSON_AddStringToObject(o, "type", "redistribute");
		cJSON_AddStringToObject(o, "name", n->name);
		/* placements before and after (torch 2.x), null where not read */
		add_str_or_null(o, "src_placements", n->src);
		add_str_or_null(o, "dst_placements", n->dst);
		break;
	default: {
		cJSON *st = cJSON_CreateArray();

		cJSON_AddStringToObject(o, "type", "collective");
		cJSON_AddStringToObject(o, "collective_type", n->name);
		cJSON_AddItemToObject(o, "group_size",
				      n->group_size > 0 ? num(n->group_size) : cJSON_CreateNull());
		cJSON_AddStringToObject(o, "phase",
					n->phase == CT_PHASE_BACKWARD ? "backward" : "forward");
		cJSON_AddStringToObject(o, "function", n->function);
		if (n->op)
			cJSON_AddStringToObject(o, "op", n->op);
		if (n->in_ndim >= 0) {
			cJSON *sh = cJSON_CreateArray();

			for (int d = 0; d < n->in_ndim; d++)
				cJSON_AddItemToArray(sh, u64((uint64_t)n->in_shape[d]));
			cJSON_AddItemToObject(o, "input_shape", sh);
			if (ct_kind_keeps_shape(n->kind))
				cJSON_AddItemToObject(o, "output_shape", cJSON_Duplicate(sh, 1));
		} else if (ct_shape_unknown_why(n->in_ndim)) {
			cJSON_AddStringToObject(o, "input_shape_unknown",
						ct_shape_unknown_why(n->in_ndim));
		}
		cJSON_AddStringToObject(o, "kind", n->kind);
		cJSON_AddItemToObject(o, "bytes", u64(n->bytes));
		add_str_or_null(o, "dtype", n->dtype);
		cJSON_AddItemToObject(o, "duration_ns", u64(n->duration));
		cJSON_AddItemToObject(o, "ts_ns", u64(n->ts));
		cJSON_AddItemToObject(o, "tid", num(n->tid));
		cJSON_AddBoolToObject(o, "stack_truncated", n->truncated);
		for (int i = 0; i < n->nstack; i++) {
			cJSON *f = cJSON_CreateObject();

			cJSON_AddStringToObject(f, "qualname", n->stack[i].qualname);
			cJSON_AddStringToObject(f, "file", n->stack[i].file);
			cJSON_AddItemToObject(f, "line", num(n->stack[i].line));
			cJSON_AddItemToArray(st, f);
		}
		cJSON_AddItemToObject(o, "stack", st);
	}
	}
	/* The tree's own depth cap bounds this recursion. */
	for (int32_t c = n->first_child; c >= 0 && depth < CT_TREE_MAX_DEPTH; c = t->nodes[c].next)
		cJSON_AddItemToArray(kids, record(t, &t->nodes[c], depth + 1));
	cJSON_AddItemToObject(o, "children", kids);
	return o;
}

/* Why a process has no parameter_info. */
static const char *params_missing(const struct ct_proc *p)
{
	if (p->params && p->params->err == -ESRCH)
		return "the process exited before its parameters were read";
	if (p->params)
		return "the root module could not be read";
	if (!p->has_python)
		return "no Python stacks in this process";
	if (!p->root_module)
		return "no nn.Module was seen on a collective's stack";
	return "out of memory";
}

/* --sharding: seed 000's get_parameter_info() / get_sharding_info(), read from outside. */
static void add_params(cJSON *o, const struct ct_proc *p)
{
	const struct ct_params *ps = p->params;
	cJSON *info, *sharding;

	if (!ps || ps->err) {
		cJSON_AddNullToObject(o, "parameter_info");
		cJSON_AddNullToObject(o, "sharding_info");
		cJSON_AddStringToObject(o, "parameter_info_error", params_missing(p));
		return;
	}
	info = cJSON_CreateObject();
	sharding = cJSON_CreateObject();
	for (uint32_t i = 0; i < ps->n; i++) {
		const struct ct_param *pa = &ps->v[i];
		cJSON *e = cJSON_CreateObject(), *shape;

		cJSON_AddStringToObject(e, "type", pa->type);
		if (pa->dtype)
			cJSON_AddStringToObject(e, "dtype", pa->dtype);
		else
			cJSON_AddNullToObject(e, "dtype");
		if (pa->ndim >= 0) {
			shape = cJSON_CreateArray();
			for (int d = 0; d < pa->ndim; d++)
				cJSON_AddItemToArray(shape, u64((uint64_t)pa->shape[d]));
			cJSON_AddItemToObject(e, "shape", shape);
		} else {
			cJSON_AddNullToObject(e, "shape");
		}
		if (pa->local_ndim >= 0) {
			shape = cJSON_CreateArray();
			for (int d = 0; d < pa->local_ndim; d++)
				cJSON_AddItemToArray(shape, u64((uint64_t)pa->local_shape[d]));
			cJSON_AddItemToObject(e, "local_shape", shape);
		}
		cJSON_AddItemToObject(info, pa->fqn, e);
		if (pa->placements[0])
			cJSON_AddStringToObject(sharding, pa->fqn, pa->placements);
	}
	cJSON_AddItemToObject(o, "parameter_info", info);
	cJSON_AddItemToObject(o, "sharding_info", sharding);
	if (ps->torch_version[0])
		cJSON_AddStringToObject(o, "torch_version", ps->torch_version);
	else
		cJSON_AddNullToObject(o, "torch_version");
	cJSON_AddBoolToObject(o, "tensor_layout_known", ps->layout_known);
	cJSON_AddItemToObject(o, "parameters_dropped", num(ps->dropped));
	cJSON_AddItemToObject(o, "parameters_unreadable", num(ps->unreadable + ps->mismatched));
}

/* Seed 000's JSON dump, per process. */
/* counts[fqn][phase][op] += 1, creating the objects on the way. */
static void bump(cJSON *counts, const char *fqn, const char *phase, const char *op)
{
	cJSON *m = cJSON_GetObjectItemCaseSensitive(counts, fqn), *ph, *n;

	if (!m) {
		m = cJSON_CreateObject();
		cJSON_AddItemToObject(m, "forward", cJSON_CreateObject());
		cJSON_AddItemToObject(m, "backward", cJSON_CreateObject());
		cJSON_AddItemToObject(counts, fqn, m);
	}
	ph = cJSON_GetObjectItemCaseSensitive(m, phase);
	n = cJSON_GetObjectItemCaseSensitive(ph, op);
	if (n)
		cJSON_SetNumberValue(n, n->valuedouble + 1);
	else
		cJSON_AddNumberToObject(ph, op, 1);
}

/*
 * PyTorch CommDebugMode's comm_module_counts from the tree: every collective whose op it
 * would count (a c10d or functional-collective op), under each module it is in and under
 * "Global", by phase; a module named as CommDebugMode names it, its FQN behind the root
 * module's class ("Transformer.layers.0.attention"). get_comm_counts() beside it.
 */
static void add_comm_module_counts(cJSON *o, const struct ct_tree *t, const struct ct_proc *p)
{
	cJSON *counts = cJSON_CreateObject(), *ops = cJSON_CreateObject();
	const char *root = t->root_class ? t->root_class : "(root)";
	char fqn[512];

	for (int32_t i = 0; i < t->n; i++) {
		const struct ct_node *n = &t->nodes[i];
		const char *phase = n->phase == CT_PHASE_BACKWARD ? "backward" : "forward";
		cJSON *c;

		if (n->type != CT_NODE_COLLECTIVE || !n->op)
			continue;
		c = cJSON_GetObjectItemCaseSensitive(ops, n->op);
		if (c)
			cJSON_SetNumberValue(c, c->valuedouble + 1);
		else
			cJSON_AddNumberToObject(ops, n->op, 1);
		bump(counts, "Global", phase, n->op);
		for (int32_t a = n->parent; a >= 0; a = t->nodes[a].parent) {
			const struct ct_node *m = &t->nodes[a];

			if (m->type != CT_NODE_MODULE)
				continue;
			if (!strcmp(m->name, "(root)"))
				snprintf(fqn, sizeof(fqn), "%s", root);
			else
				snprintf(fqn, sizeof(fqn), "%s.%s", root, m->name);
			bump(counts, fqn, phase, n->op);
		}
	}
	cJSON_AddItemToObject(o, "comm_module_counts", counts);
	cJSON_AddItemToObject(o, "comm_debug_counts", ops);
}

static cJSON *comm_debug(const struct ct_tree *t, const struct ct_proc *p, bool sharding)
{
	cJSON *o = cJSON_CreateObject(), *counts = cJSON_CreateObject();
	cJSON *recs = cJSON_CreateArray();

	for (int i = 0; i < t->ncounts; i++)
		cJSON_AddItemToObject(counts, t->counts[i].name, u64(t->counts[i].n));
	cJSON_AddItemToObject(o, "comm_counts", counts);
	cJSON_AddItemToObject(o, "total_counts", u64(t->total));
	add_comm_module_counts(o, t, p);
	for (int32_t r = t->first_root; r >= 0; r = t->nodes[r].next)
		cJSON_AddItemToArray(recs, record(t, &t->nodes[r], 0));
	cJSON_AddItemToObject(o, "records", recs);
	cJSON_AddItemToObject(o, "records_dropped", u64(t->dropped));
	if (t->values_lost)
		cJSON_AddItemToObject(o, "op_values_lost", u64(t->values_lost));
	if (t->stacks_lost)
		cJSON_AddItemToObject(o, "stacks_lost", u64(t->stacks_lost));
	cJSON_AddItemToObject(o, "records_cap", num(CT_TREE_MAX_NODES));
	if (sharding)
		add_params(o, p);
	return o;
}

static cJSON *proc_obj(struct ct_proc *p, bool sharding, cJSON *all_counts, uint64_t *total)
{
	cJSON *o = cJSON_CreateObject(), *counts = cJSON_CreateObject();
	cJSON *colls = cJSON_CreateArray(), *threads = cJSON_CreateArray();

	cJSON_AddItemToObject(o, "pid", num(p->pid));
	cJSON_AddItemToObject(o, "rank", p->rank >= 0 ? num(p->rank) : cJSON_CreateNull());
	cJSON_AddItemToObject(o, "world_size", p->world >= 0 ? num(p->world) : cJSON_CreateNull());
	if (p->rank >= 0 && p->comm_world) {
		cJSON_AddStringToObject(o, "rank_source", "communicator");
	} else if (p->rank >= 0 && p->rank_var) {
		char src[64];

		snprintf(src, sizeof(src), "env:%s", p->rank_var);
		cJSON_AddStringToObject(o, "rank_source", src);
	} else {
		cJSON_AddNullToObject(o, "rank_source");
	}
	cJSON_AddStringToObject(o, "comm", p->comm);
	cJSON_AddBoolToObject(o, "exited", p->exited);
	/* task->exit_code is a wait status: the low 7 bits a signal, else the code above. */
	if (p->exited && (p->exit_code & 0x7f))
		cJSON_AddItemToObject(o, "exit_signal", num(p->exit_code & 0x7f));
	else if (p->exited)
		cJSON_AddItemToObject(o, "exit_code", num((p->exit_code >> 8) & 0xff));
	for (uint32_t id = 0; id < ct_catalog_size(); id++) {
		const struct ct_fstats *st = p->stats[id];
		const struct ct_libdesc *d;
		const struct ct_func *fn;
		cJSON *c;

		if (!st || !st->calls)
			continue;
		fn = ct_catalog_func(id, &d);
		c = cJSON_CreateObject();
		cJSON_AddStringToObject(c, "library", d->name);
		cJSON_AddStringToObject(c, "function", fn->name);
		cJSON_AddStringToObject(c, "kind", ct_kind_name(fn->kind));
		cJSON_AddItemToObject(c, "calls", num((double)st->calls));
		cJSON_AddItemToObject(c, "completed", num((double)st->returned));
		cJSON_AddItemToObject(c, "bytes_sent", num((double)st->bytes_sent));
		cJSON_AddItemToObject(c, "bytes_received", num((double)st->bytes_recv));
		if (st->dtype_mixed)
			cJSON_AddStringToObject(c, "dtype", "mixed");
		else if (st->dtype)
			cJSON_AddStringToObject(c, "dtype", st->dtype);
		else
			cJSON_AddNullToObject(c, "dtype");
		if (ct_func_reads(fn, CT_V_OP)) /* functions that take a reduce op */
			cJSON_AddItemToObject(c, "op",
					      st->op_mixed ? cJSON_CreateString("mixed")
					      : st->op	   ? cJSON_CreateString(st->op)
							   : cJSON_CreateNull());
		cJSON_AddItemToObject(c, "time_ns", time_obj(&st->lat));
		add_bandwidth(c, st);
		cJSON_AddItemToArray(colls, c);
		add_count(counts, fn->name, st->calls);
		add_count(all_counts, fn->name, st->calls);
		*total += st->calls;
	}
	for (int i = 0; i < p->n_threads; i++) {
		cJSON *t = cJSON_CreateObject();

		cJSON_AddItemToObject(t, "tid", num(p->threads[i].tid));
		cJSON_AddStringToObject(t, "name", p->threads[i].name);
		cJSON_AddItemToArray(threads, t);
	}
	cJSON_AddItemToObject(o, "comm_counts", counts);
	cJSON_AddItemToObject(o, "collectives", colls);
	cJSON_AddItemToObject(o, "threads", threads);
	if (p->tree.total)
		cJSON_AddItemToObject(o, "comm_debug", comm_debug(&p->tree, p, sharding));
	return o;
}

/* --cost (cost.h, docs/json.md "cost") */
static cJSON *cost_obj(const struct ct_cost *c)
{
	cJSON *o = cJSON_CreateObject(), *progs = cJSON_CreateObject();

	cJSON_AddBoolToObject(o, "counted", !c->why);
	if (c->why)
		cJSON_AddStringToObject(o, "why", c->why);
	cJSON_AddItemToObject(o, "probe_hits", u64(c->hits));
	cJSON_AddItemToObject(o, "bpf_ns", u64(c->bpf_ns));
	cJSON_AddItemToObject(o, "return_hits", u64(c->ret_hits));
	cJSON_AddItemToObject(o, "hit_ns", num(c->hit_ns));
	cJSON_AddItemToObject(o, "return_hit_ns", num(c->ret_ns));
	cJSON_AddItemToObject(o, "targets_added_ns", num(ct_cost_targets_added_ns(c)));
	cJSON_AddItemToObject(o, "targets_cpu_ns",
			      c->targets_cpu_ns < 0 ? cJSON_CreateNull()
						    : u64((uint64_t)c->targets_cpu_ns));
	cJSON_AddItemToObject(o, "tracer_cpu_ns", u64(c->tracer_cpu_ns));
	for (int i = 0; i < c->n_prog; i++) {
		cJSON *p = cJSON_CreateObject();

		cJSON_AddItemToObject(p, "runs", u64(c->prog[i].runs));
		cJSON_AddItemToObject(p, "ns", u64(c->prog[i].ns));
		cJSON_AddItemToObject(progs, c->prog[i].name, p);
	}
	cJSON_AddItemToObject(o, "programs", progs);
	return o;
}

int ct_export_json(struct ct_session *s, const char *path)
{
	cJSON *root = cJSON_CreateObject(), *counts = cJSON_CreateObject();
	cJSON *procs = cJSON_CreateArray(), *drops = cJSON_CreateObject(), *clock;
	char tmp[4096], *text;
	uint64_t total = 0;
	FILE *f;
	int err;

	cJSON_AddStringToObject(root, "tool", "commtrace-bpf");
	cJSON_AddStringToObject(root, "version", CT_VERSION);
	cJSON_AddItemToObject(root, "comm_counts", counts);
	for (int i = 0; i < s->n_procs; i++) {
		cJSON *po = proc_obj(s->procs[i], s->opts->sharding, counts, &total);
		cJSON *lg = ct_diag_log_json(s->diag, (uint32_t)s->procs[i]->pid);

		if (lg) /* the collectives merge replays (docs/json.md, "diag_log") */
			cJSON_AddItemToObject(po, "diag_log", lg);
		cJSON_AddItemToArray(procs, po);
	}
	cJSON_AddItemToObject(root, "total_counts", num((double)total));
	cJSON_AddItemToObject(root, "dropped_events", num((double)ct_session_drops(s)));
	cJSON_AddItemToObject(root, "dropped_calls", u64(ct_session_dropped_calls(s)));
	for (int k = 0; k < CT_DROP_MAX; k++)
		cJSON_AddItemToObject(drops, ct_drop_name(k), num((double)s->drops[k]));
	cJSON_AddItemToObject(drops, "user_space", num((double)s->dropped_user));
	cJSON_AddItemToObject(drops, "processes_over_limit", num((double)s->lost_procs));
	cJSON_AddItemToObject(drops, "group_size_unknown", u64(s->group_size_unknown));
	{
		const struct ct_py_counts *c = ct_py_counts(s);

		/* Frames whose code object could not be read (the process had exited), and
		 * modules named by their class (their parent had freed or never held them). */
		cJSON_AddItemToObject(drops, "python_frames_unresolved",
				      u64(c ? c->frames_unresolved : 0));
		cJSON_AddItemToObject(drops, "python_frames_reused", u64(c ? c->frames_reused : 0));
		cJSON_AddItemToObject(drops, "python_frames_unreadable",
				      u64(c ? c->frames_unreadable : 0));
		/* stacks whose outermost frames were sent as their thread's last ones, which
		 * were not known here: their calls have no stack */
		cJSON_AddItemToObject(drops, "python_stacks_lost", u64(s->stacks_lost));
		cJSON_AddItemToObject(drops, "python_stacks_cut", u64(c ? c->stacks_cut : 0));
		cJSON_AddItemToObject(drops, "module_names_by_class",
				      u64(c ? c->names_by_class : 0));
		cJSON_AddItemToObject(root, "python_stacks", u64(c ? c->stacks : 0));
		cJSON_AddItemToObject(root, "python_frames", u64(c ? c->frames : 0));
		/* of those, the outermost ones BPF did not send again: the same as in the
		 * thread's last stack (bpf/stackshare.bpf.h) */
		cJSON_AddItemToObject(root, "python_frames_shared", u64(s->frames_shared));
		/* Stacks whose every code object BPF checked as already resolved: named
		 * from the cache, later, without a wakeup (docs/json.md). */
		if (c && c->stacks) {
			cJSON *k = cJSON_CreateObject();

			cJSON_AddItemToObject(k, "stacks", u64(c->stacks_known));
			cJSON_AddItemToObject(k, "frames_repeated", u64(c->frames_repeated));
			cJSON_AddItemToObject(k, "captured", u64(c->captured));
			cJSON_AddItemToObject(k, "frames_read_late", u64(c->frames_late));
			cJSON_AddItemToObject(k, "codes_not_told", u64(c->known_failed));
			cJSON_AddItemToObject(k, "codes_held", u64(c->held));
			cJSON_AddItemToObject(k, "codes_unverifiable", u64(c->unverifiable));
			cJSON_AddItemToObject(root, "python_stacks_known", k);
		}
	}
	if (ct_py_autograd_stats(s) && ct_py_autograd_stats(s)->contexts) {
		const struct ct_autograd_stats *a = ct_py_autograd_stats(s);
		cJSON *ag = cJSON_CreateObject();

		cJSON_AddItemToObject(ag, "contexts", u64(a->contexts));
		cJSON_AddItemToObject(ag, "contexts_replaced", u64(a->replaced));
		cJSON_AddItemToObject(ag, "backward_attributed", u64(a->attributed));
		cJSON_AddItemToObject(ag, "backward_unattributed", u64(a->unattributed));
		cJSON_AddItemToObject(root, "autograd", ag);
	}
	if (s->opts->ops && ct_py_ops_stats(s)) {
		const struct ct_ops_stats *o = ct_py_ops_stats(s);
		cJSON *ops = cJSON_CreateObject();

		cJSON_AddItemToObject(ops, "entries", u64(o->entries));
		cJSON_AddItemToObject(ops, "kept", u64(o->kept));
		cJSON_AddItemToObject(ops, "unclassified", u64(o->unclassified));
		cJSON_AddItemToObject(ops, "unwanted", u64(o->unwanted));
		cJSON_AddItemToObject(ops, "unresolved", u64(o->unresolved));
		cJSON_AddItemToObject(ops, "verdicts", u64(o->verdicts));
		cJSON_AddItemToObject(ops, "unpaired_exits", u64(o->unpaired));
		cJSON_AddItemToObject(ops, "late_exits", u64(o->late));
		cJSON_AddItemToObject(ops, "lost", u64(o->lost));
		cJSON_AddItemToObject(ops, "values_captured", u64(o->captured));
		cJSON_AddItemToObject(ops, "backward_functions", u64(o->gradfns));
		cJSON_AddItemToObject(ops, "backward_functions_unknown", u64(o->gradfn_unknown));
		cJSON_AddStringToObject(ops, "probe",
					s->uprobe_session ? "session" : "entry+return");
		cJSON_AddStringToObject(ops, "seen_at", ct_py_ops_seen_at(s));
		cJSON_AddItemToObject(root, "ops", ops);
	}
	cJSON_AddItemToObject(root, "drops", drops);
	if (s->opts->cost)
		cJSON_AddItemToObject(root, "cost", cost_obj(&s->cost));
	clock = cJSON_CreateObject();
	cJSON_AddStringToObject(clock, "source", "CLOCK_MONOTONIC");
	cJSON_AddItemToObject(clock, "mono_to_wall_ns", u64(s->mono_to_wall_ns));
	{ /* the same as a string, exact for readers that hold numbers as doubles (merge) */
		char w[24];

		snprintf(w, sizeof(w), "%llu", (unsigned long long)s->mono_to_wall_ns);
		cJSON_AddStringToObject(clock, "mono_to_wall_ns_str", w);
	}
	cJSON_AddItemToObject(clock, "start_ns", u64(s->start_ns));
	cJSON_AddItemToObject(clock, "end_ns", u64(s->end_ns));
	cJSON_AddItemToObject(root, "clock", clock);
	cJSON_AddItemToObject(root, "events", num((double)s->events));
	cJSON_AddItemToObject(root, "processes", procs);
	ct_diag_json(s->diag, root); /* "findings", "diagnosis" */
	ct_diag_progress_json(s->diag, root, ct_now_ns(CLOCK_MONOTONIC));

	text = cJSON_Print(root);
	cJSON_Delete(root);
	if (!text)
		return -ENOMEM;
	f = ct_open_output(path, tmp, sizeof(tmp));
	if (!f) {
		err = -errno;
		free(text);
		return err;
	}
	fputs(text, f);
	fputc('\n', f);
	free(text);
	return ct_commit_output(f, tmp, path);
}
