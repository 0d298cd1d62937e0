// SPDX-License-Identifier: MIT
/*
 * Seed 000's tracing table, line for line: a "Type" column indented two spaces
 * per depth and padded to 21 characters, then the detail. Noise level 0 shows
 * collectives, 1 adds ops, redistributions and compiled graphs, 2 adds module boundaries. Never
 * any ANSI escape. What the in-process tools cannot show (bytes, dtype,
 * duration, phase, the library call) follows their fields.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "export/export.h"
#include "python/params.h"
#include "targets.h"
#include "util/output.h"

static bool visible(const struct ct_node *n, int noise)
{
	switch (n->type) {
	case CT_NODE_COLLECTIVE:
		return true;
	case CT_NODE_OP:
	case CT_NODE_REDISTRIBUTE:
	case CT_NODE_GRAPH:
		return noise >= 1;
	case CT_NODE_MODULE:
		return noise >= 2;
	}
	return false;
}

/* Seed 000 indents a collective under its op even at level 0, where the op is hidden. */
static int depth_of(const struct ct_tree *t, const struct ct_node *n, int noise)
{
	int d = 0;

	for (int32_t p = n->parent; p >= 0; p = t->nodes[p].parent) {
		const struct ct_node *a = &t->nodes[p];

		if (visible(a, noise) || a->type == CT_NODE_OP)
			d++;
	}
	return d;
}

static const char *type_word(uint8_t type)
{
	switch (type) {
	case CT_NODE_MODULE:
		return "Module";
	case CT_NODE_OP:
		return "Op";
	case CT_NODE_REDISTRIBUTE:
		return "Redistribute";
	case CT_NODE_GRAPH:
		return "Graph";
	default:
		return "Collective";
	}
}

void ct_format_detail(const struct ct_node *n, char *buf, size_t len)
{
	switch (n->type) {
	case CT_NODE_MODULE:
		snprintf(buf, len, "Module(%s) [%s]", n->name,
			 n->phase == CT_PHASE_BACKWARD ? "backward" : "enter");
		break;
	case CT_NODE_OP: {
		char in[CT_VALUES_TEXT_MAX] = "", out[CT_VALUES_TEXT_MAX] = "";

		if (n->inputs) {
			strcpy(in, " inputs=");
			ct_values_format(n->inputs, in + 8, sizeof(in) - 8);
		}
		if (n->outputs) {
			strcpy(out, " outputs=");
			ct_values_format(n->outputs, out + 9, sizeof(out) - 9);
		}
		snprintf(buf, len, "Op(%s)%s%s", n->name, in, out);
		break;
	}
	case CT_NODE_GRAPH:
		snprintf(buf, len, "Graph(%s) [%s]", n->name,
			 n->phase == CT_PHASE_BACKWARD ? "backward" : "forward");
		break;
	case CT_NODE_REDISTRIBUTE:
		if (n->src || n->dst)
			snprintf(buf, len, "Redistribute(%s) %s -> %s", n->name,
				 n->src ? n->src : "?", n->dst ? n->dst : "?");
		else
			snprintf(buf, len, "Redistribute(%s)", n->name);
		break;
	default: {
		char group[32] = "?", dur[32] = "-", shape[128], shapes[300] = "";

		if (n->group_size > 0)
			snprintf(group, sizeof(group), "%d", n->group_size);
		if (n->duration)
			snprintf(dur, sizeof(dur), "%.1fus", n->duration / 1e3);
		/* seed 000's spelling: the helper's tensor, and what it returns */
		if (n->in_ndim >= 0) {
			ct_shape_tuple_format(shape, sizeof(shape), n->in_shape, n->in_ndim);
			snprintf(shapes, sizeof(shapes), " input_shape=%s%s%s", shape,
				 ct_kind_keeps_shape(n->kind) ? " output_shape=" : "",
				 ct_kind_keeps_shape(n->kind) ? shape : "");
		} else if (ct_shape_unknown_why(n->in_ndim)) {
			snprintf(shapes, sizeof(shapes), " input_shape=?(%s)",
				 ct_shape_unknown_why(n->in_ndim));
		}
		snprintf(buf, len,
			 "Collective(%s) group_size=%s%s bytes=%llu dtype=%s duration=%s phase=%s "
			 "function=%s%s",
			 n->name, group, shapes, (unsigned long long)n->bytes,
			 n->dtype ? n->dtype : "?", dur,
			 n->phase == CT_PHASE_BACKWARD ? "backward" : "forward", n->function,
			 n->truncated ? " stack=truncated" : "");
	}
	}
}

static void walk(const struct ct_tree *t, int32_t i, int noise, FILE *out)
{
	char type[64], detail[512 + 2 * CT_VALUES_TEXT_MAX];

	for (; i >= 0; i = t->nodes[i].next) {
		const struct ct_node *n = &t->nodes[i];

		if (visible(n, noise)) {
			int d = depth_of(t, n, noise);

			snprintf(type, sizeof(type), "%*s%s", 2 * d, "", type_word(n->type));
			ct_format_detail(n, detail, sizeof(detail));
			fprintf(out, "%-21s%s\n", type, detail);
		}
		walk(t, n->first_child, noise, out);
	}
}

/*
 * --sharding: "# parameter fc1.weight Parameter torch.float32 [16, 16] (Shard(dim=0),)"; a
 * torch 2.x DTensor adds its local shard's shape: "DTensor torch.float32 [32, 16] local
 * [16, 16] (Shard(dim=0),)".
 */
static void params_lines(const struct ct_proc *p, FILE *out)
{
	const struct ct_params *ps = p->params;

	if (!ps || ps->err) {
		fprintf(out, "# parameters: none read (%s)\n",
			ps && ps->err == -ESRCH ? "the process exited first"
			: ps			? "the root module could not be read"
						: "no nn.Module seen on a collective's stack");
		return;
	}
	for (uint32_t i = 0; i < ps->n; i++) {
		const struct ct_param *pa = &ps->v[i];

		char shape[CT_PARAM_DIMS_MAX * 24], local[CT_PARAM_DIMS_MAX * 24 + 8] = "";

		ct_shape_format(shape, sizeof(shape), pa->shape, pa->ndim);
		if (pa->local_ndim >= 0) {
			strcpy(local, " local ");
			ct_shape_format(local + 7, sizeof(local) - 7, pa->local_shape,
					pa->local_ndim);
		}
		fprintf(out, "# parameter %s %s %s %s%s%s%s\n", pa->fqn, pa->type,
			pa->dtype ? pa->dtype : "?", pa->ndim < 0 ? "?" : shape, local,
			pa->placements[0] ? " " : "", pa->placements);
	}
	if (ps->dropped)
		fprintf(out, "# parameters: %u more not listed (cap %d)\n", ps->dropped,
			CT_PARAMS_MAX);
}

void ct_export_table(struct ct_session *s, FILE *out, int noise)
{
	for (int i = 0; i < s->n_procs; i++) {
		struct ct_proc *p = s->procs[i];
		char rank[16] = "-";

		if (!p->tree.total)
			continue;
		if (p->rank >= 0)
			snprintf(rank, sizeof(rank), "%d", p->rank);
		fprintf(out, "# pid %d rank %s (%s): %llu collectives", p->pid, rank, p->comm,
			(unsigned long long)p->tree.total);
		if (p->tree.dropped)
			fprintf(out, ", %llu records dropped (cap %d)",
				(unsigned long long)p->tree.dropped, CT_TREE_MAX_NODES);
		fputc('\n', out);
		if (s->opts->sharding)
			params_lines(p, out);
		fprintf(out, "%-21s%s\n%s\n", "Type", "Detail",
			"--------------------------------------------------------------------------"
			"------");
		walk(&p->tree, p->tree.first_root, noise, out);
		fputc('\n', out);
	}
}

int ct_write_table(struct ct_session *s, const char *path, int noise)
{
	char tmp[4096];
	FILE *f;

	if (strcmp(path, "-") == 0) {
		ct_export_table(s, stdout, noise);
		return fflush(stdout) ? -errno : 0;
	}
	f = ct_open_output(path, tmp, sizeof(tmp));
	if (!f)
		return -errno;
	ct_export_table(s, f, noise);
	return ct_commit_output(f, tmp, path);
}
