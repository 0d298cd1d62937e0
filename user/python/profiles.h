/* SPDX-License-Identifier: MIT */
/*
 * Framework profiles: which Python functions mark a module boundary, an op
 * dispatch, a redistribution, a collective helper or a backward pass, as data.
 * Built in for PyTorch (nn.Module, DTensor, torch.distributed), MindSpore and
 * hyper-parallel; extended with --profile FILE (format: docs/profiles.md).
 */
#ifndef CT_PYTHON_PROFILES_H
#define CT_PYTHON_PROFILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ct_role {
	CT_ROLE_NONE = 0,
	CT_ROLE_MODULE,	      /* a module call: self is the module */
	CT_ROLE_OP,	      /* an op dispatch: the op is named by `name` */
	CT_ROLE_REDISTRIBUTE, /* a layout change that communicates */
	CT_ROLE_HELPER,	      /* a collective API (differentiable_all_reduce, all_reduce) */
	CT_ROLE_BACKWARD,     /* frames that only run during a backward pass */
	CT_ROLE_AUTOGRAD,     /* an autograd Function's backward, entered with its ctx as self */
	CT_ROLE_WRAPPER,      /* a functools.wraps wrapper (*args, **kwargs): judged by what it
				 wraps (its function's __wrapped__), whose locals are its args */
	CT_ROLE_RESHARD,      /* the function a redistribution runs: its second and third
				 locals are the source and target specs (their placements) */
	CT_ROLE_OPCALL,	      /* a torch op called from Python (OpOverload.__call__): self is
				 the op; a functional collective names the collective */
	CT_ROLE_GRAPH,	      /* a compiled graph run (torch.compile): named after the file of
				 the code it runs, its next inner frame */
};

/* Where a frame's display name comes from. */
enum ct_name_from {
	CT_NAME_FUNC = 0, /* the function's name (co_name) */
	CT_NAME_QUALNAME, /* its qualified name */
	CT_NAME_SELF,	  /* the first argument: a module (its name in its parent) */
	CT_NAME_ARG1,	  /* the second argument: an op (its __name__) */
	CT_NAME_NONE,
};

#define CT_PROFILE_MAX_RULES 256

#define CT_RULE_NO_ARGS (-1)

struct ct_rule {
	uint8_t role;	    /* enum ct_role */
	uint8_t name_from;  /* enum ct_name_from */
	int8_t args;	    /* op: local index of its args tuple (args=N), else CT_RULE_NO_ARGS */
	char qualname[128]; /* fnmatch pattern on co_qualname */
	char file[192];	    /* fnmatch pattern on co_filename, "*" for any */
};

struct ct_profiles {
	struct ct_rule rules[CT_PROFILE_MAX_RULES];
	int n;
};

/* The built-in rules. */
void ct_profiles_init(struct ct_profiles *p);
/* Add the rules of a file; 0, or -errno with a message naming the line. Later rules win. */
int ct_profiles_load(struct ct_profiles *p, const char *path, char *err, size_t errlen);
/* Parse one line into a rule: 1 rule, 0 blank/comment, -EINVAL (message in err). */
int ct_profiles_parse_line(const char *line, struct ct_rule *r, char *err, size_t errlen);
/* The rule that matches, or NULL. */
const struct ct_rule *ct_profiles_match(const struct ct_profiles *p, const char *qualname,
					const char *file);
const char *ct_role_name(uint8_t role);
/*
 * The op a collective API of torch (func, in file) dispatches, as PyTorch's CommDebugMode
 * names it ("c10d_functional.all_reduce", "c10d.allreduce_"), or NULL.
 */
const char *ct_profiles_op_name(const char *func, const char *file);
/*
 * A torch op called from Python, by its name as str() gives it
 * ("_c10d_functional.all_reduce_.default"): when it is a functional collective, the op as
 * CommDebugMode names it ("c10d_functional.all_reduce", an in-place variant as the op it
 * computes) and, in *helper, the collective's name ("all_reduce"); else NULL.
 */
const char *ct_profiles_funcol_op(const char *op_label, const char **helper);

#endif
