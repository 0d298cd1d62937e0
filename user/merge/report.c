// SPDX-License-Identifier: MIT
/*
 * merge --json: one report from several, processes by rank, timestamps on the first
 * input's clock, the diagnosis recomputed from every process' diag_log.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "diag/diag.h"
#include "merge/internal.h"
#include "merge/merge.h"
#include "util/output.h"
#include "ct_version.h"

static void add_number(cJSON *obj, const char *key, double v)
{
	cJSON *c = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (cJSON_IsNumber(c))
		cJSON_SetNumberValue(c, c->valuedouble + v);
	else if (!c)
		cJSON_AddItemToObject(obj, key, cJSON_CreateNumber(v));
}

/* Every "ts_ns" under o moves to the reference clock. */
static void shift_ts(cJSON *o, int64_t shift)
{
	cJSON *c = o->child, *next;

	for (; c; c = next) {
		next = c->next; /* c may be replaced below */
		if (c->string && !strcmp(c->string, "ts_ns") && cJSON_IsNumber(c) &&
		    c->valuedouble > 0)
			cJSON_ReplaceItemInObjectCaseSensitive(
			    o, "ts_ns", mg_u64_item((uint64_t)((int64_t)c->valuedouble + shift)));
		else if (cJSON_IsObject(c) || cJSON_IsArray(c))
			shift_ts(c, shift);
	}
}

static int proc_order(const void *a, const void *b)
{
	const cJSON *pa = *(cJSON *const *)a, *pb = *(cJSON *const *)b;
	const cJSON *ra = cJSON_GetObjectItemCaseSensitive(pa, "rank");
	const cJSON *rb = cJSON_GetObjectItemCaseSensitive(pb, "rank");
	double x = cJSON_IsNumber(ra) ? ra->valuedouble : 1e18;
	double y = cJSON_IsNumber(rb) ? rb->valuedouble : 1e18;

	if (x != y)
		return x < y ? -1 : 1;
	x = cJSON_GetObjectItemCaseSensitive(pa, "merge_input")->valuedouble;
	y = cJSON_GetObjectItemCaseSensitive(pb, "merge_input")->valuedouble;
	if (x != y)
		return x < y ? -1 : 1;
	x = cJSON_GetObjectItemCaseSensitive(pa, "pid")->valuedouble;
	y = cJSON_GetObjectItemCaseSensitive(pb, "pid")->valuedouble;
	return x < y ? -1 : x > y;
}

static const char *const known_top[] = {
    "tool",  "version", "comm_counts", "total_counts", "dropped_events",
    "drops", "clock",	"events",      "processes",    "python_stacks",
};

static bool is_known_top(const char *k)
{
	for (size_t i = 0; i < sizeof(known_top) / sizeof(known_top[0]); i++)
		if (!strcmp(k, known_top[i]))
			return true;
	return false;
}

int mg_write_doc(cJSON *doc, const char *path)
{
	char tmp[PATH_MAX + 32], *text = cJSON_Print(doc);
	FILE *f;
	int err;

	if (!text)
		return mg_fail(CT_EXIT_FAIL, "out of memory");
	f = ct_open_output(path, tmp, sizeof(tmp));
	if (!f) {
		err = errno;
		free(text);
		return mg_fail(CT_EXIT_IO, "cannot write %s: %s", path, strerror(err));
	}
	fputs(text, f);
	fputc('\n', f);
	free(text);
	err = ct_commit_output(f, tmp, path);
	if (err)
		return mg_fail(CT_EXIT_IO, "cannot write %s: %s", path, strerror(-err));
	return 0;
}

static double opt_num(const cJSON *o, const char *k)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsNumber(c) ? c->valuedouble : 0;
}

/*
 * merge.incomplete_communicators: the identities fewer ranks were traced in than the
 * group has (nodes not merged, or not traced): their collectives cannot be matched.
 */
static void incomplete_json(const struct ct_diag *d, cJSON *minfo)
{
	cJSON *list = cJSON_AddArrayToObject(minfo, "incomplete_communicators");
	int n = 0;

	for (int i = 0; i < ct_diag_ncomms(d); i++) {
		char name[48];
		const char *slash;
		int members, size;
		uint64_t colls;
		bool amb;
		cJSON *e;

		if (!ct_diag_comm_info(d, i, name, sizeof(name), &members, &colls, &amb) ||
		    !(slash = strchr(name, '/')) || (size = atoi(slash + 1)) <= members)
			continue;
		e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "communicator", name);
		cJSON_AddNumberToObject(e, "traced_ranks", members);
		cJSON_AddNumberToObject(e, "size", size);
		cJSON_AddItemToArray(list, e);
		if (n++ < 4)
			fprintf(stderr, "%s%s (%d of %d ranks)",
				n == 1 ? "merge: incomplete: " : ", ", name, members, size);
	}
	if (n)
		fprintf(stderr, "%s; %d communicator%s in all (merge.incomplete_communicators)\n",
			n > 4 ? ", ..." : "", n, n == 1 ? "" : "s");
}

/*
 * The cross-rank diagnosis over every input: the processes' diag_log replayed through
 * the tracer's own logic (user/diag/diag_replay.c), with the reference's options. Inputs
 * without a diag_log (older tracers) leave the diagnosis per input: minfo says why.
 */
static int merge_diag(struct input *ins, const int *idx, int n, cJSON *const *procs, int nprocs,
		      cJSON *root, cJSON *minfo)
{
	struct ct_diag_replay_proc *rp = calloc((size_t)nprocs + 1, sizeof(*rp));
	const cJSON *opts = NULL;
	struct ct_diag_opts o = {.no_log = true};
	struct ct_diag *d = NULL;
	double log_dropped = 0;
	char err[256];
	int rc = 0;

	if (!rp)
		return mg_fail(CT_EXIT_FAIL, "out of memory");
	for (int a = 0; a < n; a++) {
		const cJSON *dg = cJSON_GetObjectItemCaseSensitive(ins[idx[a]].doc, "diagnosis");
		const cJSON *op = cJSON_GetObjectItemCaseSensitive(dg, "options");

		if (!cJSON_IsObject(op)) {
			snprintf(err, sizeof(err),
				 "not recomputed: %s has no diagnosis.options "
				 "(a tracer without diag_log): each input's findings are under "
				 "merge.inputs[].unmerged",
				 ins[idx[a]].path);
			cJSON_AddStringToObject(minfo, "diagnosis", err);
			goto out;
		}
		if (!opts)
			opts = op;
		log_dropped +=
		    opt_num(cJSON_GetObjectItemCaseSensitive(dg, "drops"), "log_dropped");
	}
	o.hang_ns = (uint64_t)opt_num(opts, "hang_after_ns");
	o.late_ns = (uint64_t)opt_num(opts, "late_after_ns");
	o.serial_gap_ns = (uint64_t)opt_num(opts, "serial_gap_ns");
	o.min_repeats = (uint32_t)opt_num(opts, "min_repeats");
	for (int i = 0; i < nprocs; i++) {
		int a = (int)opt_num(procs[i], "merge_input");
		uint32_t pid = (uint32_t)opt_num(procs[i], "pid");

		for (int k = 0; k < i; k++)
			if (rp[k].pid ==
			    pid) /* the same pid on two hosts: apart in the diagnosis */
				pid = REMAP_PID0 + (uint32_t)i;
		rp[i].proc = procs[i];
		rp[i].pid = pid;
		rp[i].window_end = (uint64_t)((int64_t)ins[idx[a]].end + ins[idx[a]].shift);
	}
	d = ct_diag_new(&o);
	if (!d) {
		rc = mg_fail(CT_EXIT_FAIL, "out of memory");
		goto out;
	}
	rc = ct_diag_replay(d, rp, nprocs, err, sizeof(err));
	if (rc) {
		rc = mg_fail(CT_MERGE_E_MALFORMED, "diag_log: %s (in the merged process order)",
			     err);
		goto out;
	}
	ct_diag_json(d, root);
	ct_diag_progress_json(d, root, 0); /* by communicator identity, across the nodes */
	{
		cJSON *dr = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(root, "diagnosis"), "drops");

		/* what the tracers could not log is missing from the replay too */
		cJSON_ReplaceItemInObjectCaseSensitive(dr, "log_dropped",
						       cJSON_CreateNumber(log_dropped));
	}
	cJSON_AddStringToObject(minfo, "diagnosis", "recomputed over every input's diag_log");
	incomplete_json(d, minfo);
out:
	ct_diag_free(d);
	free(rp);
	return rc;
}

#define REFUSED_LIST 256 /* communicators named per refused input; then "more" */

/*
 * A refused input (--keep-going) in merge.refused: its file, exit code and reason and,
 * where it parsed, the ranks it held and the communicators those ranks were in, which
 * the merged report is missing them from. Said on stderr too.
 */
static void refused_json(const struct input *in, cJSON *list)
{
	const cJSON *procs =
	    in->doc ? cJSON_GetObjectItemCaseSensitive(in->doc, "processes") : NULL;
	const char *seen[REFUSED_LIST];
	cJSON *e = cJSON_CreateObject(), *ranks, *comms, *p, *r;
	int ncomms = 0, nranks = 0;
	bool more = false;

	cJSON_AddStringToObject(e, "file", in->path);
	cJSON_AddNumberToObject(e, "exit_code", in->refused);
	cJSON_AddStringToObject(e, "reason", in->why ? in->why : "");
	cJSON_AddItemToArray(list, e);
	if (!cJSON_IsArray(procs)) {
		cJSON_AddNullToObject(e, "ranks");
		fprintf(stderr, "merge: %s refused (exit %d): its ranks are unknown\n", in->path,
			in->refused);
		return;
	}
	ranks = cJSON_AddArrayToObject(e, "ranks");
	comms = cJSON_AddArrayToObject(e, "communicators");
	cJSON_ArrayForEach(p, procs)
	{
		const cJSON *rank = cJSON_GetObjectItemCaseSensitive(p, "rank");
		const cJSON *recs = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(p, "diag_log"), "records");

		if (!cJSON_IsNumber(rank))
			continue;
		cJSON_AddItemToArray(ranks, cJSON_CreateNumber(rank->valuedouble));
		nranks++;
		cJSON_ArrayForEach(r, recs)
		{
			const cJSON *c = cJSON_GetObjectItemCaseSensitive(r, "comm");
			int k = 0;

			if (!cJSON_IsString(c))
				continue;
			while (k < ncomms && strcmp(seen[k], c->valuestring))
				k++;
			if (k < ncomms)
				continue;
			if (ncomms == REFUSED_LIST) {
				more = true;
				continue;
			}
			seen[ncomms++] = c->valuestring;
			cJSON_AddItemToArray(comms, cJSON_CreateString(c->valuestring));
		}
	}
	cJSON_AddBoolToObject(e, "communicators_more", more);
	fprintf(stderr, "merge: %s refused (exit %d): %d rank%s missing from %d%s communicator%s",
		in->path, in->refused, nranks, nranks == 1 ? "" : "s", ncomms, more ? "+" : "",
		ncomms == 1 ? "" : "s");
	for (int k = 0; k < ncomms && k < 8; k++)
		fprintf(stderr, "%s %s", k ? "," : ":", seen[k]);
	fprintf(stderr, "%s\n", ncomms > 8 || more ? ", ..." : "");
}

int mg_merge_json(struct input *ins, const int *idx, int n, const struct input *refused, int nref,
		  const char *out)
{
	struct input *ref = &ins[idx[0]];
	cJSON *root = cJSON_CreateObject(), *counts = cJSON_CreateObject();
	cJSON *drops = cJSON_CreateObject(), *procs = cJSON_CreateArray(), *clock, *minfo, *arr;
	cJSON **sorted = NULL;
	uint64_t start = 0, end = 0;
	double total = 0, dropped = 0, events = 0, stacks = 0;
	int nprocs = 0, rc;
	char w[24];

	rc = mg_check_conflicts(ins, idx, n, "processes");
	if (rc)
		goto out;
	minfo = cJSON_CreateObject();
	if (nref) {
		cJSON *list = cJSON_AddArrayToObject(minfo, "refused");

		for (int i = 0; i < nref; i++)
			refused_json(&refused[i], list);
	}
	arr = cJSON_AddArrayToObject(minfo, "inputs");
	for (int a = 0; a < n; a++) {
		struct input *in = &ins[idx[a]];
		cJSON *p, *c, *e = cJSON_CreateObject(), *extra = NULL;
		cJSON *list = cJSON_DetachItemFromObjectCaseSensitive(in->doc, "processes");

		in->shift = in->wall - ref->wall;
		cJSON_AddStringToObject(e, "file", in->path);
		snprintf(w, sizeof(w), "%" PRId64, in->wall);
		cJSON_AddStringToObject(e, "mono_to_wall_ns_str", w);
		cJSON_AddItemToObject(e, "shift_ns", cJSON_CreateNumber((double)in->shift));
		cJSON_AddBoolToObject(e, "clock_exact", in->wall_exact);
		c = cJSON_GetObjectItemCaseSensitive(in->doc, "version");
		if (cJSON_IsString(c))
			cJSON_AddStringToObject(e, "version", c->valuestring);
		cJSON_AddItemToObject(e, "processes", cJSON_CreateNumber(cJSON_GetArraySize(list)));
		cJSON_AddItemToArray(arr, e);

		if (a == 0 || (int64_t)in->start + in->shift < (int64_t)start)
			start = (uint64_t)((int64_t)in->start + in->shift);
		if (a == 0 || (int64_t)in->end + in->shift > (int64_t)end)
			end = (uint64_t)((int64_t)in->end + in->shift);
		c = cJSON_GetObjectItemCaseSensitive(in->doc, "comm_counts");
		cJSON_ArrayForEach(p, c) if (cJSON_IsNumber(p))
		    add_number(counts, p->string, p->valuedouble);
		c = cJSON_GetObjectItemCaseSensitive(in->doc, "drops");
		cJSON_ArrayForEach(p, c) if (cJSON_IsNumber(p))
		    add_number(drops, p->string, p->valuedouble);
		c = cJSON_GetObjectItemCaseSensitive(in->doc, "total_counts");
		total += cJSON_IsNumber(c) ? c->valuedouble : 0;
		c = cJSON_GetObjectItemCaseSensitive(in->doc, "dropped_events");
		dropped += cJSON_IsNumber(c) ? c->valuedouble : 0;
		c = cJSON_GetObjectItemCaseSensitive(in->doc, "events");
		events += cJSON_IsNumber(c) ? c->valuedouble : 0;
		c = cJSON_GetObjectItemCaseSensitive(in->doc, "python_stacks");
		stacks += cJSON_IsNumber(c) ? c->valuedouble : 0;
		/*
		 * Fields merge does not know: numbers (counts) are summed; the rest (per-node
		 * diagnosis, findings) is kept per input, not merged.
		 */
		cJSON_ArrayForEach(c, in->doc)
		{
			if (is_known_top(c->string))
				continue;
			if (cJSON_IsNumber(c)) {
				if (!cJSON_GetObjectItemCaseSensitive(root, c->string))
					cJSON_AddItemToObject(root, c->string,
							      cJSON_CreateNumber(0));
				add_number(root, c->string, c->valuedouble);
				continue;
			}
			if (!extra)
				extra = cJSON_AddObjectToObject(e, "unmerged");
			cJSON_AddItemToObject(extra, c->string, cJSON_Duplicate(c, true));
		}
		while (list && (p = cJSON_DetachItemViaPointer(list, list->child))) {
			shift_ts(p, in->shift);
			cJSON_AddItemToObject(p, "merge_input", cJSON_CreateNumber(a));
			cJSON_AddItemToArray(procs, p);
			nprocs++;
		}
		cJSON_Delete(list);
	}
	/* Keyed by rank: ranked processes in rank order, then the others by input and pid. */
	sorted = calloc((size_t)nprocs + 1, sizeof(*sorted));
	if (!sorted) {
		rc = mg_fail(CT_EXIT_FAIL, "out of memory");
		cJSON_Delete(minfo);
		goto out;
	}
	for (int i = 0; i < nprocs; i++)
		sorted[i] = cJSON_DetachItemViaPointer(procs, procs->child);
	qsort(sorted, (size_t)nprocs, sizeof(*sorted), proc_order);
	for (int i = 0; i < nprocs; i++)
		cJSON_AddItemToArray(procs, sorted[i]);

	cJSON_AddStringToObject(root, "tool", "commtrace-bpf");
	cJSON_AddStringToObject(root, "version", CT_VERSION);
	cJSON_AddItemToObject(root, "comm_counts", counts);
	counts = NULL;
	cJSON_AddItemToObject(root, "total_counts", cJSON_CreateNumber(total));
	cJSON_AddItemToObject(root, "dropped_events", cJSON_CreateNumber(dropped));
	cJSON_AddItemToObject(root, "drops", drops);
	drops = NULL;
	cJSON_AddItemToObject(root, "python_stacks", cJSON_CreateNumber(stacks));
	clock = cJSON_AddObjectToObject(root, "clock");
	cJSON_AddStringToObject(clock, "source", "CLOCK_MONOTONIC");
	cJSON_AddItemToObject(clock, "mono_to_wall_ns", mg_u64_item((uint64_t)ref->wall));
	snprintf(w, sizeof(w), "%" PRId64, ref->wall);
	cJSON_AddStringToObject(clock, "mono_to_wall_ns_str", w);
	cJSON_AddItemToObject(clock, "start_ns", mg_u64_item(start));
	cJSON_AddItemToObject(clock, "end_ns", mg_u64_item(end));
	cJSON_AddItemToObject(root, "events", cJSON_CreateNumber(events));
	rc = merge_diag(ins, idx, n, sorted, nprocs, root, minfo);
	cJSON_AddItemToObject(root, "processes", procs);
	procs = NULL;
	cJSON_AddItemToObject(root, "merge", minfo);
	if (!rc)
		rc = mg_write_doc(root, out);
out:
	free(sorted);
	cJSON_Delete(counts);
	cJSON_Delete(drops);
	cJSON_Delete(procs);
	cJSON_Delete(root);
	return rc;
}
