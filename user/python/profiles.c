// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>
#include "commtrace/abi.h"
#include "python/profiles.h"

/*
 * The defaults. Order matters only among rules that match the same frame: the
 * last one wins, so a user's file can override any of these.
 */
static const char builtin[] =
    "# role        qualname                         file                                  name\n"
    "module        Module._call_impl                */torch/nn/modules/module.py          self\n"
    "module        Module._wrapped_call_impl        */torch/nn/modules/module.py          self\n"
    "module        Cell.__call__                    */mindspore/nn/cell.py                self\n"
    "module        Cell._run_construct              */mindspore/nn/cell.py                self\n"
    "op            OpDispatcher.dispatch            *                                     arg1 "
    "args=2\n"
    "op            *.__torch_function__             *                                     arg1 "
    "args=3\n"
    "op            *.__torch_dispatch__             *                                     arg1 "
    "args=3\n"
    "redistribute  *redistribute                    *                                     func\n"
    "redistribute  TensorRedistribution.*           *                                     func\n"
    "redistribute  Redistribute.forward             *                                     func\n"
    /* torch 2.x: every redistribution, explicit or the op dispatcher's, runs this with
     * (local_tensor, current_spec, target_spec) */
    "reshard       redistribute_local_tensor        */torch/distributed/tensor/_redistribute.py "
    "none\n"
    "helper        *differentiable_*                *                                     func\n"
    /* public (lower-case, module-level) functions only: not _AllReduce.forward */
    "helper        [a-z]*                           */torch/distributed/distributed_c10d.py func\n"
    "helper        [a-z]*                           */torch/distributed/nn/functional.py  func\n"
    "helper        [a-z]*                           */torch/distributed/_functional_collectives.py "
    "func\n"
    "helper        [a-z]*                           */mindspore/communication/comm_func.py func\n"
    "helper        *                                */mpi4py/*                            func\n"
    "backward      Tensor.backward                  */torch/_tensor.py                    none\n"
    "backward      backward                         */torch/autograd/__init__.py          none\n"
    "backward      *.backward                       *                                     none\n"
    /* the engine calls the ctx's bound apply: self is the ctx THPFunction_new made */
    "autograd      BackwardCFunction.apply          */torch/autograd/function.py          none\n"
    /* torch 2.x wraps DTensor.__torch_dispatch__ (and more) in torch._disable_dynamo: C
     * enters this wrapper, the function it wraps runs inlined (3.11+) */
    "wrapper       _disable_dynamo.<locals>.inner   */torch/_compile.py                   none\n"
    /* torch.compile: generated code calls its collectives as ops, not through an API */
    "opcall        OpOverload.__call__              */torch/_ops.py                       self\n"
    "opcall        OpOverloadPacket.__call__        */torch/_ops.py                       self\n"
    /* Inductor's compiled graph (output_code.py in 2.6, codecache.py before) */
    "graph         CompiledFxGraph.__call__         */torch/_inductor/*.py                none\n";

static const char *const roles[] = {
    [CT_ROLE_NONE] = "none",
    [CT_ROLE_MODULE] = "module",
    [CT_ROLE_OP] = "op",
    [CT_ROLE_REDISTRIBUTE] = "redistribute",
    [CT_ROLE_HELPER] = "helper",
    [CT_ROLE_BACKWARD] = "backward",
    [CT_ROLE_AUTOGRAD] = "autograd",
    [CT_ROLE_WRAPPER] = "wrapper",
    [CT_ROLE_RESHARD] = "reshard",
    [CT_ROLE_OPCALL] = "opcall",
    [CT_ROLE_GRAPH] = "graph",
};

static const char *const names[] = {
    [CT_NAME_FUNC] = "func", [CT_NAME_QUALNAME] = "qualname", [CT_NAME_SELF] = "self",
    [CT_NAME_ARG1] = "arg1", [CT_NAME_NONE] = "none",
};

/*
 * The op a collective API dispatches, named as PyTorch's CommDebugMode names it (its
 * comm_counts keys; native functional collectives under their legacy names, as it
 * translates them): by the API's file and function.
 */
static const struct {
	const char *file, *func, *op;
} ops[] = {
    {"*/torch/distributed/_functional_collectives.py", "all_reduce", "c10d_functional.all_reduce"},
    {"*/torch/distributed/_functional_collectives.py", "all_reduce_coalesced",
     "c10d_functional.all_reduce_coalesced"},
    {"*/torch/distributed/_functional_collectives.py", "all_gather_tensor",
     "c10d_functional.all_gather_into_tensor"},
    {"*/torch/distributed/_functional_collectives.py", "all_gather_into_tensor_coalesced",
     "c10d_functional.all_gather_into_tensor_coalesced"},
    {"*/torch/distributed/_functional_collectives.py", "reduce_scatter_tensor",
     "c10d_functional.reduce_scatter_tensor"},
    {"*/torch/distributed/_functional_collectives.py", "reduce_scatter_tensor_coalesced",
     "c10d_functional.reduce_scatter_tensor_coalesced"},
    {"*/torch/distributed/_functional_collectives.py", "all_to_all_single",
     "c10d_functional.all_to_all_single"},
    {"*/torch/distributed/_functional_collectives.py", "broadcast", "c10d_functional.broadcast"},
    {"*/torch/distributed/distributed_c10d.py", "all_reduce", "c10d.allreduce_"},
    {"*/torch/distributed/distributed_c10d.py", "all_gather", "c10d.allgather_"},
    {"*/torch/distributed/distributed_c10d.py", "all_gather_into_tensor", "c10d._allgather_base_"},
    {"*/torch/distributed/distributed_c10d.py", "reduce_scatter", "c10d.reduce_scatter_"},
    {"*/torch/distributed/distributed_c10d.py", "reduce_scatter_tensor",
     "c10d._reduce_scatter_base_"},
    {"*/torch/distributed/distributed_c10d.py", "broadcast", "c10d.broadcast_"},
    {"*/torch/distributed/distributed_c10d.py", "reduce", "c10d.reduce_"},
    {"*/torch/distributed/distributed_c10d.py", "all_to_all", "c10d.alltoall_"},
    {"*/torch/distributed/distributed_c10d.py", "all_to_all_single", "c10d.alltoall_base_"},
    {"*/torch/distributed/distributed_c10d.py", "gather", "c10d.gather_"},
    {"*/torch/distributed/distributed_c10d.py", "scatter", "c10d.scatter_"},
    {"*/torch/distributed/distributed_c10d.py", "barrier", "c10d.barrier"},
    {"*/torch/distributed/distributed_c10d.py", "send", "c10d.send"},
    {"*/torch/distributed/distributed_c10d.py", "recv", "c10d.recv_"},
};

const char *ct_profiles_op_name(const char *func, const char *file)
{
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (!strcmp(func, ops[i].func) && !fnmatch(ops[i].file, file, 0))
			return ops[i].op;
	return NULL;
}

/* The functional collectives (torch.ops._c10d_functional), by their op's name. */
static const struct {
	const char *name, *op;
} funcols[] = {
    {"all_reduce", "c10d_functional.all_reduce"},
    {"all_reduce_coalesced", "c10d_functional.all_reduce_coalesced"},
    {"all_gather_into_tensor", "c10d_functional.all_gather_into_tensor"},
    {"all_gather_into_tensor_coalesced", "c10d_functional.all_gather_into_tensor_coalesced"},
    {"reduce_scatter_tensor", "c10d_functional.reduce_scatter_tensor"},
    {"reduce_scatter_tensor_coalesced", "c10d_functional.reduce_scatter_tensor_coalesced"},
    {"all_to_all_single", "c10d_functional.all_to_all_single"},
    {"broadcast", "c10d_functional.broadcast"},
};

const char *ct_profiles_funcol_op(const char *op_label, const char **helper)
{
	static const char *const spaces[] = {"_c10d_functional.", "c10d_functional.",
					     "_c10d_functional_autograd."};
	const char *name = NULL, *end;
	size_t len;

	for (size_t i = 0; op_label && !name && i < sizeof(spaces) / sizeof(spaces[0]); i++)
		if (!strncmp(op_label, spaces[i], strlen(spaces[i])))
			name = op_label + strlen(spaces[i]);
	if (!name)
		return NULL;
	end = strchr(name, '.');
	len = end ? (size_t)(end - name) : strlen(name);
	if (len && name[len - 1] == '_')
		len--; /* all_reduce_: Inductor's in-place form of all_reduce */
	for (size_t i = 0; i < sizeof(funcols) / sizeof(funcols[0]); i++) {
		if (strlen(funcols[i].name) == len && !strncmp(name, funcols[i].name, len)) {
			*helper = funcols[i].name;
			return funcols[i].op;
		}
	}
	return NULL;
}

const char *ct_role_name(uint8_t role)
{
	return role < sizeof(roles) / sizeof(roles[0]) ? roles[role] : "?";
}

static int lookup(const char *const *table, size_t n, const char *word)
{
	for (size_t i = 0; i < n; i++)
		if (table[i] && strcmp(table[i], word) == 0)
			return (int)i;
	return -1;
}

int ct_profiles_parse_line(const char *line, struct ct_rule *r, char *err, size_t errlen)
{
	char role[32], qual[128], file[192], name[32], opt[32], extra[2];
	int n, ri, ni, args = CT_RULE_NO_ARGS, used = 0;

	while (*line == ' ' || *line == '\t')
		line++;
	if (!*line || *line == '#' || *line == '\n')
		return 0;
	n = sscanf(line, "%31s %127s %191s %31s %31s %1s", role, qual, file, name, opt, extra);
	if (n != 4 && n != 5) {
		snprintf(err, errlen,
			 "expected 4 fields (role qualname file name) and an optional args=N, got "
			 "%d",
			 n);
		return -EINVAL;
	}
	if (n == 5 && (sscanf(opt, "args=%d%n", &args, &used) != 1 || opt[used] || args < 0 ||
		       args > CT_OPS_MAX_ARGIDX)) {
		snprintf(err, errlen,
			 "bad option '%s' (args=N: the args tuple's local index, 0-%d)", opt,
			 CT_OPS_MAX_ARGIDX);
		return -EINVAL;
	}
	ri = lookup(roles, sizeof(roles) / sizeof(roles[0]), role);
	if (ri <= 0) {
		snprintf(err, errlen,
			 "unknown role '%s' (module, op, redistribute, helper, backward, "
			 "autograd, wrapper, reshard, opcall, graph)",
			 role);
		return -EINVAL;
	}
	ni = lookup(names, sizeof(names) / sizeof(names[0]), name);
	if (ni < 0) {
		snprintf(err, errlen, "unknown name source '%s' (func, qualname, self, arg1, none)",
			 name);
		return -EINVAL;
	}
	memset(r, 0, sizeof(*r));
	r->role = (uint8_t)ri;
	r->name_from = (uint8_t)ni;
	r->args = (int8_t)args;
	snprintf(r->qualname, sizeof(r->qualname), "%s", qual);
	snprintf(r->file, sizeof(r->file), "%s", file);
	return 1;
}

static int load_text(struct ct_profiles *p, const char *text, const char *origin, char *err,
		     size_t errlen)
{
	char line[512], msg[256];
	const char *s = text;
	int lineno = 0;

	while (*s) {
		const char *e = strchr(s, '\n');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		struct ct_rule r;
		int rc;

		lineno++;
		if (len >= sizeof(line)) {
			snprintf(err, errlen, "%s:%d: line too long", origin, lineno);
			return -EINVAL;
		}
		memcpy(line, s, len);
		line[len] = 0;
		s = e ? e + 1 : s + len;
		rc = ct_profiles_parse_line(line, &r, msg, sizeof(msg));
		if (rc < 0) {
			snprintf(err, errlen, "%s:%d: %s", origin, lineno, msg);
			return rc;
		}
		if (rc == 0)
			continue;
		if (p->n == CT_PROFILE_MAX_RULES) {
			snprintf(err, errlen, "%s:%d: more than %d rules", origin, lineno,
				 CT_PROFILE_MAX_RULES);
			return -E2BIG;
		}
		p->rules[p->n++] = r;
	}
	return 0;
}

void ct_profiles_init(struct ct_profiles *p)
{
	char err[256];

	p->n = 0;
	load_text(p, builtin, "built-in profile", err, sizeof(err));
}

int ct_profiles_load(struct ct_profiles *p, const char *path, char *err, size_t errlen)
{
	char buf[64 * 1024];
	size_t n;
	FILE *f = fopen(path, "re");
	int rc;

	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	rc = ferror(f) ? -EIO : 0;
	if (!rc && !feof(f))
		rc = -EFBIG;
	fclose(f);
	if (rc) {
		snprintf(err, errlen, "%s: %s", path,
			 rc == -EFBIG ? "larger than 64 KiB" : "read error");
		return rc;
	}
	buf[n] = 0;
	return load_text(p, buf, path, err, errlen);
}

const struct ct_rule *ct_profiles_match(const struct ct_profiles *p, const char *qualname,
					const char *file)
{
	for (int i = p->n - 1; i >= 0; i--) {
		const struct ct_rule *r = &p->rules[i];

		if (fnmatch(r->qualname, qualname, 0) == 0 &&
		    (r->file[0] == '*' && !r->file[1] ? true : fnmatch(r->file, file, 0) == 0))
			return r;
	}
	return NULL;
}
