// SPDX-License-Identifier: MIT
/* --sharding's pure parts: TensorImpl headers, torch versions, placement tuples. */
#include <errno.h>
#include <string.h>

#include "harness.h"
#include "python/params.h"
#include "python/profiles.h"
#include "tree.h"
#include "util/intern.h"

/* A TensorImpl header as torch 1.13 lays it out (params.c), filled in by hand. */
static void fake_impl(const struct ct_torch_layout *l, uint8_t *ti, size_t len, uint64_t dim,
		      const int64_t *sizes, int64_t numel, uint16_t dtype)
{
	memset(ti, 0xa5, len);
	memcpy(ti + l->ti_dim, &dim, 8);
	if (dim <= l->inline_max && l->ti_sizes + 8 * dim <= len) {
		memcpy(ti + l->ti_sizes, sizes, 8 * dim);
	} else {
		uint64_t heap = 0x7f0000001000ULL;

		memcpy(ti + l->ti_sizes, &heap, 8);
	}
	memcpy(ti + l->ti_numel, &numel, 8);
	memcpy(ti + l->ti_dtype, &dtype, 2);
}

TEST(params_tensor_decode)
{
	const struct ct_torch_layout *l = ct_torch_layout_for("1.13.0a0");
	static const int64_t s2[] = {32, 16}, s6[] = {1, 2, 1, 2, 1, 3};
	int64_t shape[CT_PARAM_DIMS_MAX];
	uint8_t ti[256];
	uint64_t heap = 0;
	uint16_t dtype;
	int ndim;

	if (!ASSERT_NOT_NULL(l, "1.13 layout"))
		return;
	fake_impl(l, ti, sizeof(ti), 2, s2, 512, 6);
	ASSERT_OK(ct_tensor_decode(l, ti, sizeof(ti), NULL, 0, &dtype, &ndim, shape, &heap),
		  "inline sizes");
	ASSERT_EQ(ndim, 2, "ndim");
	ASSERT_EQ(shape[0], 32, "dim 0");
	ASSERT_EQ(shape[1], 16, "dim 1");
	ASSERT_EQ(dtype, 6, "dtype");
	/* A 0-d tensor: no sizes, numel 1. */
	fake_impl(l, ti, sizeof(ti), 0, s2, 1, 7);
	ASSERT_OK(ct_tensor_decode(l, ti, sizeof(ti), NULL, 0, &dtype, &ndim, shape, &heap), "0-d");
	ASSERT_EQ(ndim, 0, "0-d ndim");
	/* numel that is not the product: not a TensorImpl of this layout. */
	fake_impl(l, ti, sizeof(ti), 2, s2, 513, 6);
	ASSERT_EQ(ct_tensor_decode(l, ti, sizeof(ti), NULL, 0, &dtype, &ndim, shape, &heap),
		  -EINVAL, "numel mismatch");
	/* Six dims: the sizes are on the heap, read by the caller. */
	fake_impl(l, ti, sizeof(ti), 6, s6, 12, 6);
	ASSERT_EQ(ct_tensor_decode(l, ti, sizeof(ti), NULL, 0, &dtype, &ndim, shape, &heap),
		  -EAGAIN, "heap sizes");
	ASSERT_EQ(ndim, 6, "heap ndim");
	ASSERT_EQ(heap, 0x7f0000001000ULL, "heap address");
	ASSERT_OK(ct_tensor_decode(l, ti, sizeof(ti), s6, 6, &dtype, &ndim, shape, &heap),
		  "heap sizes given");
	ASSERT_EQ(shape[5], 3, "heap dim 5");
	ASSERT_EQ(ct_tensor_decode(l, ti, sizeof(ti), s6, 5, &dtype, &ndim, shape, &heap), -EINVAL,
		  "too few heap sizes");
	/* Garbage: dims past torch's 64, negative sizes, a short header. */
	fake_impl(l, ti, sizeof(ti), 65, s2, 1, 6);
	ASSERT_EQ(ct_tensor_decode(l, ti, sizeof(ti), NULL, 0, &dtype, &ndim, shape, &heap),
		  -EINVAL, "65 dims");
	fake_impl(l, ti, sizeof(ti), 40, s2, 1, 6);
	ASSERT_EQ(ct_tensor_decode(l, ti, sizeof(ti), NULL, 0, &dtype, &ndim, shape, &heap), -E2BIG,
		  "more dims than kept");
	{
		static const int64_t neg[] = {-2, -3};

		fake_impl(l, ti, sizeof(ti), 2, neg, 6, 6);
		ASSERT_EQ(ct_tensor_decode(l, ti, sizeof(ti), NULL, 0, &dtype, &ndim, shape, &heap),
			  -EINVAL, "negative sizes");
	}
	ASSERT_EQ(ct_tensor_decode(l, ti, 100, NULL, 0, &dtype, &ndim, shape, &heap), -EINVAL,
		  "short header");
}

TEST(params_torch_version)
{
	char v[32];

	ASSERT_OK(ct_torch_version_parse("__version__ = '1.13.0a0'\ndebug = False\n", v, sizeof(v)),
		  "1.13 version.py");
	ASSERT_STREQ(v, "1.13.0a0", "1.13");
	ASSERT_OK(ct_torch_version_parse("from typing import Optional\n__all__ = []\n"
					 "__version__: str = \"2.1.0+cu121\"\n",
					 v, sizeof(v)),
		  "2.x version.py");
	ASSERT_STREQ(v, "2.1.0+cu121", "2.1");
	ASSERT_EQ(ct_torch_version_parse("git__version__ = '1'\n", v, sizeof(v)), -ENOENT,
		  "not at a line start");
	ASSERT_EQ(ct_torch_version_parse("__version__ = '1.13", v, sizeof(v)), -ENOENT,
		  "unterminated");
	ASSERT_EQ(ct_torch_version_parse("", v, sizeof(v)), -ENOENT, "empty");
	ASSERT_NOT_NULL(ct_torch_layout_for("1.13.1+cpu"), "1.13.1");
	ASSERT_NOT_NULL(ct_torch_layout_for("1.13"), "1.13");
	ASSERT_TRUE(ct_torch_layout_for("1.130") == NULL, "1.130");
	ASSERT_EQ(ct_torch_layout_for("2.11.0+cu130")->ti_numel, 160, "2.x: measured numel");
	ASSERT_EQ(ct_torch_layout_for("2.1.0")->ti_sizes, 72, "2.x: sizes before numel");
	ASSERT_TRUE(ct_torch_layout_for("20.1") == NULL, "20.1");
	ASSERT_TRUE(ct_torch_layout_for("3.0") == NULL, "3.0 unknown");
	ASSERT_TRUE(ct_torch_layout_for("") == NULL, "unknown");
}

TEST(params_placements_format)
{
	const char *one[] = {"Shard(dim=0)"}, *two[] = {"Shard(dim=1)", "Replicate()"};
	char buf[64], tiny[8];

	ct_placements_format(buf, sizeof(buf), one, 1);
	ASSERT_STREQ(buf, "(Shard(dim=0),)", "one placement");
	ct_placements_format(buf, sizeof(buf), two, 2);
	ASSERT_STREQ(buf, "(Shard(dim=1), Replicate())", "two placements");
	ct_placements_format(buf, sizeof(buf), NULL, 0);
	ASSERT_STREQ(buf, "()", "none");
	ct_placements_format(tiny, sizeof(tiny), two, 2);
	ASSERT_EQ(strlen(tiny), sizeof(tiny) - 1, "cut to the buffer");
}

TEST(params_dtype_names)
{
	ASSERT_STREQ(ct_torch_dtype_name(6), "torch.float32", "ScalarType::Float");
	ASSERT_STREQ(ct_torch_dtype_name(4), "torch.int64", "ScalarType::Long");
	ASSERT_TRUE(ct_torch_dtype_name(999) == NULL, "unknown");
}

TEST(profiles_args_column)
{
	struct ct_rule r;
	char err[256];

	ASSERT_EQ(
	    ct_profiles_parse_line("op *.__torch_function__ * arg1 args=3", &r, err, sizeof(err)),
	    1, err);
	ASSERT_EQ(r.args, 3, "args=3");
	ASSERT_EQ(ct_profiles_parse_line("op X.dispatch * arg1", &r, err, sizeof(err)), 1, err);
	ASSERT_EQ(r.args, CT_RULE_NO_ARGS, "no args column");
	ASSERT_EQ(ct_profiles_parse_line("op X * arg1 args=15", &r, err, sizeof(err)), -EINVAL,
		  "past the index the verdict can carry");
	ASSERT_TRUE(strstr(err, "args=N") != NULL, err);
	ASSERT_EQ(ct_profiles_parse_line("op X * arg1 args=2x", &r, err, sizeof(err)), -EINVAL,
		  "trailing junk");
	ASSERT_EQ(ct_profiles_parse_line("op X * arg1 kwargs=2", &r, err, sizeof(err)), -EINVAL,
		  "unknown option");
	ASSERT_EQ(ct_profiles_parse_line("op X * arg1 args=2 more", &r, err, sizeof(err)), -EINVAL,
		  "six fields");
}

TEST(profiles_wrapper_role)
{
	const struct ct_rule *r;
	struct ct_profiles p;
	struct ct_rule one;
	char err[256];

	ASSERT_EQ(ct_profiles_parse_line("wrapper outer.<locals>.inner */w.py none", &one, err,
					 sizeof(err)),
		  1, err);
	ASSERT_EQ(one.role, CT_ROLE_WRAPPER, "role");
	ASSERT_STREQ(ct_role_name(CT_ROLE_WRAPPER), "wrapper", "its name");
	ASSERT_EQ(ct_profiles_parse_line("wrap X * none", &one, err, sizeof(err)), -EINVAL,
		  "unknown role");
	ASSERT_TRUE(strstr(err, "wrapper") != NULL, err);
	/* Built in: torch 2.x's _disable_dynamo wrapper, and what it wraps. */
	ct_profiles_init(&p);
	r = ct_profiles_match(&p, "_disable_dynamo.<locals>.inner",
			      "/usr/lib/python3/dist-packages/torch/_compile.py");
	if (ASSERT_NOT_NULL(r, "the wrapper"))
		ASSERT_EQ(r->role, CT_ROLE_WRAPPER, "a wrapper");
	r = ct_profiles_match(&p, "DTensor.__torch_dispatch__",
			      "/usr/lib/python3/dist-packages/torch/distributed/tensor/_api.py");
	if (ASSERT_NOT_NULL(r, "DTensor's dispatch"))
		ASSERT_TRUE(r->role == CT_ROLE_OP && r->args == 3 && r->name_from == CT_NAME_ARG1,
			    "an op named by its func, args at 3");
}

/* --ops' backward ops: at their Function's forward modules, one node per module and pass. */
TEST(tree_backward_beside)
{
	struct ct_tree t;
	const struct ct_tree_frame path[2] = {
	    {.type = CT_NODE_MODULE, .name = "(root)", .code = 1, .self = 10},
	    {.type = CT_NODE_MODULE, .name = "fc2", .code = 1, .self = 20},
	};
	const struct ct_tree_frame other = {
	    .type = CT_NODE_MODULE, .name = "fc1", .code = 1, .self = 30};
	const struct ct_tree_frame path2[2] = {path[0], other};
	int32_t a, b, c, d, e;

	if (!ASSERT_OK(ct_tree_init(&t), "init"))
		return;
	a = ct_tree_enter_beside(&t, 7, path, 2, CT_NODE_OP, "aten.mm.default", 5, 0, 100);
	b = ct_tree_enter_beside(&t, 7, path, 2, CT_NODE_OP, "aten.mm.default", 5, 0, 200);
	c = ct_tree_enter_beside(&t, 7, path2, 2, CT_NODE_OP, "aten.add_.Tensor", 5, 0, 300);
	ct_tree_exit(&t, 7, c, 350);
	if (ASSERT_TRUE(a >= 0 && b >= 0 && c >= 0, "made")) {
		ASSERT_EQ(t.nodes[a].parent, t.nodes[b].parent, "one fc2 for both");
		ASSERT_EQ(t.nodes[t.nodes[a].parent].parent, t.nodes[t.nodes[c].parent].parent,
			  "fc1 beside fc2, under one root");
		ASSERT_STREQ(t.nodes[t.nodes[c].parent].name, "fc1", "fc1");
		ASSERT_EQ(t.nodes[a].phase, CT_PHASE_BACKWARD, "a backward op");
		ASSERT_EQ(t.nodes[t.nodes[a].parent].phase, CT_PHASE_BACKWARD, "a backward module");
		ASSERT_EQ(t.nodes[c].duration, 50, "closed by its exit");
	}
	/* A forward module entry ends the pass: the next backward has a root of its own. */
	d = ct_tree_enter(&t, 7, CT_NODE_MODULE, "(root)", 1, 10, 400);
	ct_tree_exit(&t, 7, d, 500);
	e = ct_tree_enter_beside(&t, 7, path, 2, CT_NODE_OP, "aten.mm.default", 5, 0, 600);
	if (ASSERT_TRUE(d >= 0 && e >= 0, "made")) {
		ASSERT_TRUE(t.nodes[t.nodes[e].parent].parent != t.nodes[t.nodes[a].parent].parent,
			    "a new backward root");
		ASSERT_EQ(t.nodes[d].phase, CT_PHASE_FORWARD, "the forward between");
	}
	ct_tree_free(&t);
}

/*
 * --ops on torch 2.x: ops placed by their stacks' module paths. F.linear dispatches view, t,
 * addmm and view from one instruction of fc1's forward: one fc1. The layers of a loop are
 * siblings; the next forward, after a backward, is a tree of its own.
 */
TEST(tree_ops_by_path)
{
	struct ct_tree t;
	struct ct_tree_frame path[3] = {
	    {.type = CT_NODE_MODULE, .name = "(root)", .code = 1, .self = 10, .instr = 4},
	    {.type = CT_NODE_MODULE, .name = "layers.0", .code = 2, .self = 20, .instr = 8},
	    {.type = CT_NODE_MODULE, .name = "layers.0.fc1", .code = 3, .self = 30, .instr = 6},
	};
	const uint64_t ops[] = {100, 101, 102, 100}; /* view, t, addmm, view */
	struct ct_tree_frame op = {.type = CT_NODE_OP, .self = 7, .again = true};
	int32_t n[4], m, b, f;

	if (!ASSERT_OK(ct_tree_init(&t), "init"))
		return;
	for (int i = 0; i < 4; i++) {
		op.code = ops[i];
		op.name = i == 2 ? "aten.addmm.default" : "aten.view.default";
		n[i] = ct_tree_enter_path(&t, 9, path, 3, &op, 1000 + i);
		ct_tree_exit(&t, 9, n[i], 1000 + i + 1);
	}
	if (!ASSERT_TRUE(n[0] >= 0 && n[1] >= 0 && n[2] >= 0 && n[3] >= 0, "made"))
		goto out;
	for (int i = 1; i < 4; i++)
		ASSERT_EQ(t.nodes[n[i]].parent, t.nodes[n[0]].parent, "one fc1 for all four");
	ASSERT_EQ(t.nodes[n[3]].duration, 1, "closed by its exit");
	ASSERT_EQ(t.nodes[n[3]].ts, 1003, "entered then");
	/* the next layer of the loop: its module beside layers.0, under the same root */
	path[1].self = 21;
	path[1].name = "layers.1";
	path[2].self = 31;
	op.code = 102;
	m = ct_tree_enter_path(&t, 9, path, 3, &op, 2000);
	ct_tree_exit(&t, 9, m, 2001);
	if (ASSERT_TRUE(m >= 0, "made"))
		ASSERT_EQ(t.nodes[t.nodes[t.nodes[m].parent].parent].parent,
			  t.nodes[t.nodes[t.nodes[n[0]].parent].parent].parent, "one root");
	/* a backward op (and one it dispatches), then the same forward again: a new root */
	b = ct_tree_enter_beside(&t, 9, path, 2, CT_NODE_OP, "aten.mm.default", 5, 0, 3000);
	ct_tree_hold(&t, 9, b);
	m = ct_tree_enter(&t, 9, CT_NODE_OP, "aten.empty_strided.default", 6, 7, 3000);
	ct_tree_exit(&t, 9, m, 3001);
	ct_tree_exit(&t, 9, b, 3001);
	if (ASSERT_TRUE(m >= 0, "made")) {
		ASSERT_EQ(t.nodes[m].parent, b, "an op inside it: under it");
		ASSERT_EQ(t.nodes[m].phase, CT_PHASE_BACKWARD, "and the backward's");
	}
	path[1] = (struct ct_tree_frame){
	    .type = CT_NODE_MODULE, .name = "layers.0", .code = 2, .self = 20, .instr = 8};
	path[2].self = 30;
	op.code = 100;
	f = ct_tree_enter_path(&t, 9, path, 3, &op, 4000);
	if (ASSERT_TRUE(b >= 0 && f >= 0, "made")) {
		ASSERT_EQ(t.nodes[b].phase, CT_PHASE_BACKWARD, "a backward op");
		ASSERT_TRUE(t.nodes[t.nodes[t.nodes[f].parent].parent].parent !=
				t.nodes[t.nodes[t.nodes[n[0]].parent].parent].parent,
			    "the next forward's root");
		ASSERT_EQ(t.nodes[f].phase, CT_PHASE_FORWARD, "a forward op");
	}
out:
	ct_tree_free(&t);
}

TEST(tree_values_format)
{
	struct ct_values vs;
	char buf[CT_VALUES_TEXT_MAX], tiny[12];

	memset(&vs, 0, sizeof(vs));
	vs.total = 5;
	vs.n = 3;
	vs.v[0] = (struct ct_value){.kind = "DTensor", .ndim = 2, .shape = {4, 16}};
	vs.v[1] = (struct ct_value){.kind = "Tensor", .ndim = 0};
	vs.v[2] = (struct ct_value){.kind = "None", .ndim = -1};
	ct_values_format(&vs, buf, sizeof(buf));
	ASSERT_STREQ(buf, "[DTensor[4, 16], Tensor[], None, +2 more]", "list");
	vs.v[1] = (struct ct_value){.kind = "Tensor", .ndim = -1, .no_layout = 1};
	ct_values_format(&vs, buf, sizeof(buf));
	ASSERT_STREQ(buf, "[DTensor[4, 16], Tensor[?], None, +2 more]", "layout unknown: [?]");
	ASSERT_TRUE(ct_shape_unknown_why(CT_SHAPE_NONE) == NULL, "no helper: nothing to say");
	ASSERT_STREQ(ct_shape_unknown_why(CT_SHAPE_FREED), "freed", "freed");
	ASSERT_STREQ(ct_shape_unknown_why(CT_SHAPE_NO_LAYOUT), "no_layout", "no layout");
	ASSERT_STREQ(ct_shape_unknown_why(CT_SHAPE_UNREADABLE), "unreadable", "unreadable");
	ct_values_format(&vs, tiny, sizeof(tiny));
	ASSERT_EQ(strlen(tiny), sizeof(tiny) - 1, "cut to the buffer");
	vs.n = 0;
	vs.total = 0;
	ct_values_format(&vs, buf, sizeof(buf));
	ASSERT_STREQ(buf, "[]", "nothing");
	/* Interned: equal values share one copy. */
	vs.n = 1;
	vs.total = 1;
	ASSERT_TRUE(ct_intern_blob(&vs, sizeof(vs)) == ct_intern_blob(&vs, sizeof(vs)), "shared");
}

/* torch.compile: Inductor's code calls functional collectives as ops; its graph is a node. */
TEST(profiles_compiled_graph)
{
	const char *torch = "/usr/lib/python3/dist-packages/torch";
	const struct ct_rule *r;
	struct ct_profiles p;
	const char *helper = NULL;
	char file[256];

	ASSERT_STREQ(ct_profiles_funcol_op("_c10d_functional.all_reduce_.default", &helper),
		     "c10d_functional.all_reduce", "the in-place form, as the op it computes");
	ASSERT_STREQ(helper, "all_reduce", "named as the functional collective");
	ASSERT_STREQ(ct_profiles_funcol_op("_c10d_functional.all_gather_into_tensor", &helper),
		     "c10d_functional.all_gather_into_tensor", "a packet (no overload)");
	ASSERT_STREQ(helper, "all_gather_into_tensor", "its name");
	ASSERT_STREQ(
	    ct_profiles_funcol_op("_c10d_functional_autograd.all_to_all_single.default", &helper),
	    "c10d_functional.all_to_all_single", "the autograd variant");
	ASSERT_TRUE(!ct_profiles_funcol_op("_c10d_functional.wait_tensor.default", &helper),
		    "waiting is not a collective");
	ASSERT_TRUE(!ct_profiles_funcol_op("aten.addmm.default", &helper), "an aten op");
	ASSERT_TRUE(!ct_profiles_funcol_op("_c10d_functional.all_reduce_x.default", &helper),
		    "only whole names");
	ASSERT_TRUE(!ct_profiles_funcol_op(NULL, &helper), "no name");
	ct_profiles_init(&p);
	snprintf(file, sizeof(file), "%s/_ops.py", torch);
	r = ct_profiles_match(&p, "OpOverload.__call__", file);
	if (ASSERT_NOT_NULL(r, "an op called from Python"))
		ASSERT_TRUE(r->role == CT_ROLE_OPCALL && r->name_from == CT_NAME_SELF, "by self");
	snprintf(file, sizeof(file), "%s/_inductor/output_code.py", torch);
	r = ct_profiles_match(&p, "CompiledFxGraph.__call__", file);
	if (ASSERT_NOT_NULL(r, "2.6's compiled graph"))
		ASSERT_EQ(r->role, CT_ROLE_GRAPH, "a graph");
	snprintf(file, sizeof(file), "%s/_inductor/codecache.py", torch);
	ASSERT_NOT_NULL(ct_profiles_match(&p, "CompiledFxGraph.__call__", file), "before 2.6");
	ASSERT_STREQ(ct_role_name(CT_ROLE_GRAPH), "graph", "its name");
}

/* One graph node per run of the graph: its code's instruction tells runs apart. */
TEST(tree_graph_runs)
{
	struct ct_tree t;
	struct ct_tree_frame path[2] = {
	    {.type = CT_NODE_MODULE, .name = "(root)", .code = 1, .self = 10, .instr = 100},
	    {.type = CT_NODE_GRAPH, .name = "cmr7", .code = 2, .self = 20, .instr = 500},
	};
	struct ct_tree_call c = {.tid = 7,
				 .function = "f",
				 .kind = "all_reduce",
				 .path = path,
				 .npath = 2,
				 .in_ndim = -1,
				 .group_size = 2};
	int32_t a, b, d, e, f;

	if (!ASSERT_OK(ct_tree_init(&t), "init"))
		return;
	a = ct_tree_add_call(&t, &c);
	path[1].instr = 540; /* the same run, a later collective */
	b = ct_tree_add_call(&t, &c);
	path[1].instr = 500; /* the next run (the next forward) */
	d = ct_tree_add_call(&t, &c);
	if (ASSERT_TRUE(a >= 0 && b >= 0 && d >= 0, "made")) {
		ASSERT_EQ(t.nodes[a].parent, t.nodes[b].parent, "one run, one graph node");
		ASSERT_EQ(t.nodes[t.nodes[a].parent].type, CT_NODE_GRAPH, "under the graph");
		ASSERT_TRUE(t.nodes[d].parent != t.nodes[a].parent, "a second run");
	}
	/* --ops: under the module open, the graph from the stack, reused within a run */
	c.under_open = true;
	ct_tree_enter(&t, 8, CT_NODE_MODULE, "(root)", 1, 10, 1000);
	c.tid = 8;
	path[1].instr = 500;
	e = ct_tree_add_call(&t, &c);
	path[1].instr = 540;
	f = ct_tree_add_call(&t, &c);
	if (ASSERT_TRUE(e >= 0 && f >= 0, "made")) {
		ASSERT_EQ(t.nodes[e].parent, t.nodes[f].parent, "one graph node in one run");
		ASSERT_STREQ(t.nodes[t.nodes[e].parent].name, "cmr7", "named");
		ASSERT_EQ(t.nodes[t.nodes[t.nodes[e].parent].parent].ts, 1000, "under the module");
	}
	ct_tree_free(&t);
}

/*
 * The node pool holds CT_TREE_MAX_NODES nodes, in place; past it, nodes are counted dropped.
 * The nodes of one stack share one copy of it.
 */
TEST(tree_pool_bounded)
{
	struct ct_tree t;
	struct ct_stack_line lines[2][2] = {{{"step", "train.py", 10}, {"main", "train.py", 40}},
					    {{"step", "train.py", 12}, {"main", "train.py", 40}}};
	struct ct_tree_call c = {
	    .tid = 7, .function = "f", .kind = "all_reduce", .in_ndim = -1, .nstack = 2};
	int32_t last = -1, made = 0;
	const struct ct_node *nodes = NULL;

	if (!ASSERT_OK(ct_tree_init(&t), "init"))
		return;
	for (int i = 0; i < CT_TREE_MAX_NODES + 10; i++) {
		c.ts = (uint64_t)i;
		c.stack = lines[i % 2 == 1 || i == 2];
		last = ct_tree_add_call(&t, &c);
		made += last >= 0;
		if (i == 0)
			nodes = t.nodes;
	}
	ASSERT_EQ(t.n, CT_TREE_MAX_NODES, "the pool full");
	ASSERT_EQ(made, CT_TREE_MAX_NODES, "a node a call until then");
	ASSERT_EQ(last, -1, "none past it");
	ASSERT_EQ(t.dropped, 10, "the calls past it counted");
	if (ASSERT_TRUE(nodes && t.nodes == nodes, "never moved")) {
		ASSERT_EQ(t.nodes[0].ts, 0, "the first kept");
		ASSERT_EQ(t.nodes[CT_TREE_MAX_NODES - 1].ts, CT_TREE_MAX_NODES - 1,
			  "the last made");
		ASSERT_EQ(t.nodes[CT_TREE_MAX_NODES - 2].next, CT_TREE_MAX_NODES - 1, "linked");
		ASSERT_EQ(t.nodes[2].nstack, 2, "a stack");
		ASSERT_EQ(t.nodes[2].stack[0].line, 12, "its line");
		ASSERT_STREQ(t.nodes[4].stack[1].qualname, "main", "its outermost frame");
		ASSERT_TRUE(t.nodes[0].stack == t.nodes[4].stack, "one copy of a stack");
		ASSERT_TRUE(t.nodes[1].stack == t.nodes[2].stack, "one copy of the other");
		ASSERT_TRUE(t.nodes[0].stack != t.nodes[1].stack, "two stacks");
		ASSERT_TRUE(t.nodes[0].stack != lines[0], "a copy");
	}
	ASSERT_EQ(t.stacks_lost, 0, "none lost");
	ct_tree_free(&t);
	ASSERT_TRUE(t.nodes == NULL && t.n == 0, "freed");
}
