// SPDX-License-Identifier: MIT
/*
 * The --chrome document's end: module/op/redistribute slices from each process' call tree,
 * and the diagnosis' findings as instant events.
 */
#include <errno.h>
#include <stdlib.h>
#include "devprof/devprof.h"
#include "diag/diag.h"
#include "export/chrome_impl.h"
#include "targets.h"
#include "ct_version.h"

static const char *node_label(uint8_t type)
{
	switch (type) {
	case CT_NODE_MODULE:
		return "module";
	case CT_NODE_OP:
		return "op";
	case CT_NODE_GRAPH:
		return "graph";
	default:
		return "redistribute";
	}
}

static void emit_tree_node(struct ct_chrome *c, const struct ct_tree *tr, int32_t i, uint32_t pid,
			   uint32_t tid, uint64_t start, uint64_t end)
{
	const struct ct_node *n = &tr->nodes[i];
	const char *type = node_label(n->type);
	char name[512];

	snprintf(name, sizeof(name), "%s(%s)",
		 n->type == CT_NODE_MODULE  ? "Module"
		 : n->type == CT_NODE_OP    ? "Op"
		 : n->type == CT_NODE_GRAPH ? "Graph"
					    : "Redistribute",
		 n->name ? n->name : "?");
	ct_sbuf_reset(&c->b);
	ct_sbuf_printf(&c->b, "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", type);
	ct_sbuf_jstr(&c->b, name);
	ct_sbuf_printf(&c->b, ",\"pid\":%u,\"tid\":%u,\"ts\":", pid, tid);
	ct_sbuf_us(&c->b, start);
	ct_sbuf_printf(&c->b, ",\"dur\":");
	ct_sbuf_us(&c->b, end - start);
	ct_sbuf_printf(&c->b, ",\"args\":{\"type\":\"%s\",\"%s\":", type,
		       n->type == CT_NODE_MODULE ? "module_fqn"
		       : n->type == CT_NODE_OP	 ? "op_name"
						 : "name");
	ct_sbuf_jstr(&c->b, n->name);
	if (n->src || n->dst) {
		ct_sbuf_printf(&c->b, ",\"src_placements\":");
		ct_sbuf_jstr(&c->b, n->src ? n->src : "?");
		ct_sbuf_printf(&c->b, ",\"dst_placements\":");
		ct_sbuf_jstr(&c->b, n->dst ? n->dst : "?");
	}
	for (int k = 0; k < 2; k++) {
		const struct ct_values *vs = k ? n->outputs : n->inputs;
		char text[CT_VALUES_TEXT_MAX];

		if (!vs)
			continue;
		ct_values_format(vs, text, sizeof(text));
		ct_sbuf_printf(&c->b, ",\"%s\":", k ? "outputs" : "inputs");
		ct_sbuf_jstr(&c->b, text);
	}
	ct_sbuf_printf(&c->b,
		       ",\"phase\":\"%s\",\"tree_node\":%d,\"parent_node\":%d,\"depth\":%d,"
		       "\"extent\":\"%s\"}}",
		       n->phase == CT_PHASE_BACKWARD ? "backward" : "forward", i, n->parent,
		       n->depth, n->duration ? "entry to exit" : "first to last descendant call");
	if (ch_emit(c, start))
		c->tree_slices++;
	else
		c->tree_dropped++;
}

/*
 * Module/op/redistribute slices of one process: each from its entry to its exit where
 * --ops saw them, else spanning its written descendant collectives and timed calls (on
 * torch 2.x --ops sees ops, not modules, enter). The tree is built per thread, so a node's
 * collectives share one track; the nesting check still runs, and a node that would partially
 * overlap is left out (counted in metadata.tree_slices_dropped) rather than break the track.
 */
void ch_emit_tree(struct ct_chrome *c, struct ct_proc *p, struct cproc *cp)
{
	const struct ct_tree *tr = &p->tree;
	int32_t n = tr->n;
	uint64_t *st, *en;
	uint32_t *tid;
	bool *drop;
	struct ct_span *sp;

	if (!n) /* no collective and no --ops call */
		return;
	st = malloc((size_t)n * sizeof(*st));
	en = calloc((size_t)n, sizeof(*en));
	tid = calloc((size_t)n, sizeof(*tid));
	drop = calloc((size_t)n, sizeof(*drop));
	sp = malloc((size_t)n * sizeof(*sp));
	if (!st || !en || !tid || !drop || !sp) {
		c->err = -ENOMEM;
		goto out;
	}
	for (int32_t i = 0; i < n; i++) {
		const struct ct_node *nd = &tr->nodes[i];

		st[i] = UINT64_MAX;
		if (nd->type != CT_NODE_COLLECTIVE && nd->duration) { /* --ops: entry to exit */
			st[i] = nd->ts;
			en[i] = nd->ts + nd->duration;
			tid[i] = nd->tid;
		}
	}
	for (int32_t i = 0; i < n; i++) {
		const struct ct_node *nd = &tr->nodes[i];

		if (nd->type == CT_NODE_COLLECTIVE) {
			if (i >= cp->node_cap || !cp->node_end[i])
				continue;
			st[i] = nd->ts;
			en[i] = cp->node_end[i];
			tid[i] = nd->tid;
		} else if (!nd->duration) {
			continue;
		}
		/* its ancestors span it (those --ops saw no entry of: torch 2.x's modules) */
		for (int32_t a = nd->parent; a >= 0; a = tr->nodes[a].parent) {
			if (nd->ts < st[a])
				st[a] = nd->ts;
			if (en[i] > en[a])
				en[a] = en[i];
			if (!tid[a])
				tid[a] = nd->tid;
		}
	}
	for (int32_t i = 0; i < n; i++) {
		uint32_t track = tid[i];
		bool again = true;

		/* Each track once: at its first node. */
		if (!track || en[i] == 0)
			continue;
		for (int32_t j = 0; j < i; j++)
			if (tid[j] == track && en[j])
				goto next;
		for (int pass = 0; again && pass < 8; pass++) {
			size_t k = 0;

			for (int32_t j = i; j < n; j++)
				if (tid[j] == track && en[j] && !drop[j])
					sp[k++] = (struct ct_span){
					    .start = st[j], .end = en[j], .id = (uint32_t)j};
			again = false;
			if (!ct_span_check(sp, k))
				break;
			for (size_t m = 0; m < k; m++) {
				int32_t j = (int32_t)sp[m].id;

				if (!sp[m].bad)
					continue;
				if (tr->nodes[j].type != CT_NODE_COLLECTIVE) {
					drop[j] = again = true;
					continue;
				}
				/* a written collective stays: the enclosing nodes it straddles go
				 */
				for (size_t q = 0; q < k; q++) {
					int32_t e = (int32_t)sp[q].id;

					if (tr->nodes[e].type != CT_NODE_COLLECTIVE &&
					    st[e] < sp[m].start && en[e] > sp[m].start &&
					    en[e] < sp[m].end)
						drop[e] = again = true;
				}
			}
		}
	next:;
	}
	for (int32_t i = 0; i < n; i++) {
		if (tr->nodes[i].type == CT_NODE_COLLECTIVE || !en[i])
			continue;
		if (drop[i])
			c->tree_dropped++;
		else
			emit_tree_node(c, tr, i, cp->pid, tid[i], st[i], en[i]);
	}
out:
	free(st);
	free(en);
	free(tid);
	free(drop);
	free(sp);
}

/* Diagnosis findings (user/diag/diag.h) as instant events on the rank's track. */
void ch_emit_findings(struct ct_chrome *c, struct ct_session *s)
{
	const struct ct_diag_finding *f;
	int n = s->diag ? ct_diag_findings(s->diag, &f) : 0;

	for (int i = 0; i < n; i++) {
		cJSON *ev = ct_diag_evidence(&f[i]);
		char *args = ev ? cJSON_PrintUnformatted(ev) : NULL;
		uint64_t ts = f[i].ts ? f[i].ts : s->end_ns;

		cJSON_Delete(ev);
		ct_sbuf_reset(&c->b);
		ct_sbuf_printf(&c->b, "{\"ph\":\"i\",\"cat\":\"diagnosis\",\"name\":\"%s\",",
			       ct_diag_kind_name(f[i].kind));
		/* A finding without a thread is drawn across its process. */
		ct_sbuf_printf(&c->b,
			       "\"s\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":", f[i].tid ? "t" : "p",
			       f[i].pid, f[i].tid ? f[i].tid : f[i].pid);
		ct_sbuf_us(&c->b, ts);
		ct_sbuf_printf(&c->b, ",\"args\":{\"severity\":\"%s\",\"summary\":",
			       ct_diag_severity_name(f[i].severity));
		ct_sbuf_jstr(&c->b, f[i].summary);
		ct_sbuf_printf(&c->b, ",\"evidence\":%s}}", args ? args : "{}");
		free(args);
		ch_emit(c, ts);
	}
}
