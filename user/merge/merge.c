// SPDX-License-Identifier: MIT
/*
 * commtrace-bpf merge (docs/merge.md): several tracers of one job, one per node, as one
 * --json report and one --chrome timeline.
 *
 * - Clocks: the first input of each kind is the reference. Every other input's
 *   CLOCK_MONOTONIC timestamps move by (its mono_to_wall_ns - the reference's), computed
 *   in exact integers from the recorded strings, so the merged file is on the
 *   reference's monotonic clock and its mono_to_wall_ns still gives wall-clock time.
 * - Processes are keyed by rank: a rank in two inputs is refused, so is a rank whose
 *   world size disagrees with another input's (two jobs), so are inputs whose traced
 *   windows do not overlap in wall-clock time (two runs).
 * - Timelines: pids that collide across inputs (two hosts) are renumbered, flow ids are
 *   kept apart, and the halves of one collective on different nodes get the rank→rank
 *   arrows a single tracer would have drawn (same matching rule as the --chrome export).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <cJSON.h>
#include "diag/diag.h"
#include "export/chrome.h"
#include "export/export.h"
#include "merge/merge.h"
#include "util/output.h"
#include "ct_version.h"

#define MAX_INPUTS   256
#define MAX_FILE     (1ULL << 31) /* inputs larger than 2 GiB are refused */
#define REMAP_PID0   0x4000000u	  /* renumbered pids: above pid_max and devprof's range */
#define FLOW_ID_STEP 1000000000000ULL

struct input {
	const char *path;
	cJSON *doc;
	bool chrome;
	int64_t wall;	 /* mono_to_wall_ns */
	bool wall_exact; /* from the string; else from a double (rounded to 256 ns) */
	int64_t shift;	 /* ns added to its monotonic timestamps */
	uint64_t start, end;
};

static const char *prog = "commtrace-bpf merge";

static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

static void usage(FILE *out)
{
	fputs(
	    "Usage: commtrace-bpf merge [--json OUT] [--chrome OUT] INPUT...\n"
	    "\n"
	    "Merge the --json reports and/or --chrome traces of several tracers of one job\n"
	    "(one per node, each given some of the ranks) into one report and one timeline:\n"
	    "processes keyed by rank, clocks aligned by each input's recorded wall-clock offset,\n"
	    "rank-to-rank arrows between the halves of a collective on different nodes.\n"
	    "Each INPUT is recognized by its content. The first input of each kind sets the\n"
	    "time axis. docs/merge.md has the rules.\n"
	    "\n"
	    "  --json OUT     the merged report (needs --json inputs)\n"
	    "  --chrome OUT   the merged Chrome trace (needs --chrome inputs)\n"
	    "  -h, --help     this help\n"
	    "\n"
	    "Exit status: 0 merged; 2 usage; 3 a file cannot be read or written; 10 an input\n"
	    "is not a commtrace report or trace; 11 an input has no clock to align it by; 12\n"
	    "inputs conflict (the same rank twice, different jobs).\n"
	    "\n"
	    "Example:\n"
	    "  commtrace-bpf merge --json job.json --chrome job.trace.json \\\n"
	    "      node0.json node1.json node0.trace.json node1.trace.json\n",
	    out);
}

/* ---- reading ------------------------------------------------------------------------- */

static int read_file(const char *path, char **out, size_t *len)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > MAX_FILE) {
		int e = S_ISREG(st.st_mode) ? -EFBIG : -EINVAL;

		close(fd);
		return e;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n <= 0) {
			int e = n < 0 ? -errno : -EIO;

			free(buf);
			close(fd);
			return e;
		}
		got += (size_t)n;
	}
	close(fd);
	buf[got] = 0;
	*out = buf;
	*len = got;
	return 0;
}

static bool get_u64(const cJSON *o, const char *key, uint64_t *v)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsNumber(x) || x->valuedouble < 0)
		return false;
	*v = (uint64_t)x->valuedouble;
	return true;
}

/* mono_to_wall_ns from its exact string, else (older files) the rounded number. */
static bool get_wall(const cJSON *o, int64_t *wall, bool *exact)
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "mono_to_wall_ns_str");
	uint64_t v;
	char *end;

	if (cJSON_IsString(s) && s->valuestring[0]) {
		errno = 0;
		v = strtoull(s->valuestring, &end, 10);
		if (errno || *end || v > INT64_MAX)
			return false;
		*wall = (int64_t)v;
		*exact = true;
		return true;
	}
	if (!get_u64(o, "mono_to_wall_ns", &v) || v > INT64_MAX)
		return false;
	*wall = (int64_t)v;
	*exact = false;
	return true;
}

/* Integers past 2^53 written exactly (as the tracer does). */
static cJSON *u64_item(uint64_t v)
{
	char buf[24];

	if (v <= (1ULL << 53))
		return cJSON_CreateNumber((double)v);
	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return cJSON_CreateRaw(buf);
}

static int load(struct input *in)
{
	const cJSON *clock, *meta, *fmt, *ev;
	const char *err_at;
	char *text = NULL;
	size_t len = 0;
	int rc = read_file(in->path, &text, &len);

	if (rc)
		return fail(CT_EXIT_IO, "cannot read %s: %s", in->path, strerror(-rc));
	in->doc = cJSON_ParseWithLengthOpts(text, len + 1, &err_at, true); /* with the NUL */
	if (!in->doc) {
		rc = fail(CT_MERGE_E_MALFORMED, "%s: not JSON (error at byte %zu)", in->path,
			  err_at ? (size_t)(err_at - text) : (size_t)0);
		free(text);
		return rc;
	}
	free(text);
	if (!cJSON_IsObject(in->doc))
		return fail(CT_MERGE_E_MALFORMED,
			    "%s: not a commtrace-bpf --json report nor a --chrome trace (not "
			    "a JSON object)",
			    in->path);
	ev = cJSON_GetObjectItemCaseSensitive(in->doc, "traceEvents");
	if (ev) {
		in->chrome = true;
		meta = cJSON_GetObjectItemCaseSensitive(in->doc, "metadata");
		fmt = cJSON_GetObjectItemCaseSensitive(meta, "format");
		if (!cJSON_IsArray(ev) || !cJSON_IsString(fmt) ||
		    strcmp(fmt->valuestring, "commtrace-chrome/1"))
			return fail(CT_MERGE_E_MALFORMED,
				    "%s: a Chrome trace, but not commtrace-bpf's --chrome "
				    "output (metadata.format is not \"commtrace-chrome/1\")",
				    in->path);
		if (!get_wall(meta, &in->wall, &in->wall_exact))
			return fail(CT_MERGE_E_CLOCK,
				    "%s: metadata has no valid mono_to_wall_ns: cannot align it",
				    in->path);
		if (!get_u64(meta, "start_ns", &in->start) || !get_u64(meta, "end_ns", &in->end))
			return fail(CT_MERGE_E_CLOCK, "%s: metadata has no start_ns/end_ns",
				    in->path);
		if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(meta, "processes")))
			return fail(CT_MERGE_E_MALFORMED, "%s: metadata has no processes list",
				    in->path);
		return 0;
	}
	if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(in->doc, "tool")) ||
	    strcmp(cJSON_GetObjectItemCaseSensitive(in->doc, "tool")->valuestring,
		   "commtrace-bpf") ||
	    !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(in->doc, "processes")))
		return fail(CT_MERGE_E_MALFORMED,
			    "%s: not a commtrace-bpf --json report nor a --chrome trace (no "
			    "\"tool\": \"commtrace-bpf\" with a processes array, no traceEvents)",
			    in->path);
	clock = cJSON_GetObjectItemCaseSensitive(in->doc, "clock");
	if (!cJSON_IsObject(clock) || !get_wall(clock, &in->wall, &in->wall_exact))
		return fail(CT_MERGE_E_CLOCK, "%s: no valid clock.mono_to_wall_ns: cannot align it",
			    in->path);
	if (!get_u64(clock, "start_ns", &in->start) || !get_u64(clock, "end_ns", &in->end))
		return fail(CT_MERGE_E_CLOCK, "%s: clock has no start_ns/end_ns", in->path);
	return 0;
}

/* ---- what every input must agree on ---------------------------------------------------- */

struct rank_owner {
	int input;
	double pid;
	int world;
};

static int proc_rank(const cJSON *p, int *rank, int *world, double *pid, const char *path)
{
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(p, "rank");
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(p, "world_size");
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(p, "pid");

	if (!cJSON_IsObject(p) || !cJSON_IsNumber(id))
		return fail(CT_MERGE_E_MALFORMED, "%s: a process entry without a numeric pid",
			    path);
	*pid = id->valuedouble;
	*rank = cJSON_IsNumber(r) ? (int)r->valuedouble : -1;
	*world = cJSON_IsNumber(w) ? (int)w->valuedouble : -1;
	if (cJSON_IsNumber(r) && (r->valuedouble < 0 || r->valuedouble > 1e7))
		return fail(CT_MERGE_E_MALFORMED, "%s: pid %.0f has an invalid rank", path, *pid);
	return 0;
}

/*
 * Ranks across inputs: each rank in one input only; one world size. Inputs whose traced
 * windows do not meet in wall-clock time traced different runs.
 */
static int check_conflicts(struct input *ins, const int *idx, int n, const char *list_key)
{
	struct rank_owner *owner = NULL;
	int cap = 0, world = -1, world_in = -1, rc = 0;
	double world_pid = 0;

	for (int a = 0; a < n; a++) {
		struct input *in = &ins[idx[a]];
		const cJSON *procs =
		    in->chrome
			? cJSON_GetObjectItemCaseSensitive(
			      cJSON_GetObjectItemCaseSensitive(in->doc, "metadata"), list_key)
			: cJSON_GetObjectItemCaseSensitive(in->doc, list_key);
		const cJSON *p;

		cJSON_ArrayForEach(p, procs)
		{
			int rank = -1, w = -1;
			double pid = 0;

			rc = proc_rank(p, &rank, &w, &pid, in->path);
			if (rc)
				goto out;
			if (w >= 0 && world >= 0 && w != world) {
				rc = fail(CT_MERGE_E_CONFLICT,
					  "%s: pid %.0f says world size %d, %s (pid %.0f) says %d: "
					  "not the same job",
					  in->path, pid, w, ins[world_in].path, world_pid, world);
				goto out;
			}
			if (w >= 0 && world < 0) {
				world = w;
				world_in = idx[a];
				world_pid = pid;
			}
			if (rank < 0)
				continue;
			if (rank >= cap) {
				int nc = rank + 64;
				struct rank_owner *no = realloc(owner, sizeof(*no) * (size_t)nc);

				if (!no) {
					rc = fail(CT_EXIT_FAIL, "out of memory");
					goto out;
				}
				for (int k = cap; k < nc; k++)
					no[k].input = -1;
				owner = no;
				cap = nc;
			}
			if (owner[rank].input >= 0 && owner[rank].input != idx[a]) {
				rc = fail(CT_MERGE_E_CONFLICT,
					  "rank %d is in %s (pid %.0f) and in %s (pid %.0f): each "
					  "rank must come from one tracer",
					  rank, ins[owner[rank].input].path, owner[rank].pid,
					  in->path, pid);
				goto out;
			}
			owner[rank].input = idx[a];
			owner[rank].pid = pid;
		}
	}
	for (int a = 1; a < n; a++) {
		struct input *r = &ins[idx[0]], *in = &ins[idx[a]];
		int64_t s0 = (int64_t)r->start + r->wall, e0 = (int64_t)r->end + r->wall;
		int64_t s1 = (int64_t)in->start + in->wall, e1 = (int64_t)in->end + in->wall;

		if (s1 > e0 || s0 > e1) {
			rc = fail(CT_MERGE_E_CONFLICT,
				  "%s and %s traced disjoint wall-clock windows (%.3f s apart): "
				  "not the same run of a job",
				  r->path, in->path, (double)(s1 > e0 ? s1 - e0 : s0 - e1) / 1e9);
			goto out;
		}
	}
out:
	free(owner);
	return rc;
}

/* ---- --json ---------------------------------------------------------------------------- */

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
			    o, "ts_ns", u64_item((uint64_t)((int64_t)c->valuedouble + shift)));
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

static int write_doc(cJSON *doc, const char *path)
{
	char tmp[PATH_MAX + 32], *text = cJSON_Print(doc);
	FILE *f;
	int err;

	if (!text)
		return fail(CT_EXIT_FAIL, "out of memory");
	f = ct_open_output(path, tmp, sizeof(tmp));
	if (!f) {
		err = errno;
		free(text);
		return fail(CT_EXIT_IO, "cannot write %s: %s", path, strerror(err));
	}
	fputs(text, f);
	fputc('\n', f);
	free(text);
	err = ct_commit_output(f, tmp, path);
	if (err)
		return fail(CT_EXIT_IO, "cannot write %s: %s", path, strerror(-err));
	return 0;
}

static double opt_num(const cJSON *o, const char *k)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsNumber(c) ? c->valuedouble : 0;
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
		return fail(CT_EXIT_FAIL, "out of memory");
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
		rc = fail(CT_EXIT_FAIL, "out of memory");
		goto out;
	}
	rc = ct_diag_replay(d, rp, nprocs, err, sizeof(err));
	if (rc) {
		rc = fail(CT_MERGE_E_MALFORMED, "diag_log: %s (in the merged process order)", err);
		goto out;
	}
	ct_diag_json(d, root);
	{
		cJSON *dr = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(root, "diagnosis"), "drops");

		/* what the tracers could not log is missing from the replay too */
		cJSON_ReplaceItemInObjectCaseSensitive(dr, "log_dropped",
						       cJSON_CreateNumber(log_dropped));
	}
	cJSON_AddStringToObject(minfo, "diagnosis", "recomputed over every input's diag_log");
out:
	ct_diag_free(d);
	free(rp);
	return rc;
}

static int merge_json(struct input *ins, const int *idx, int n, const char *out)
{
	struct input *ref = &ins[idx[0]];
	cJSON *root = cJSON_CreateObject(), *counts = cJSON_CreateObject();
	cJSON *drops = cJSON_CreateObject(), *procs = cJSON_CreateArray(), *clock, *minfo, *arr;
	cJSON **sorted = NULL;
	uint64_t start = 0, end = 0;
	double total = 0, dropped = 0, events = 0, stacks = 0;
	int nprocs = 0, rc;
	char w[24];

	rc = check_conflicts(ins, idx, n, "processes");
	if (rc)
		goto out;
	minfo = cJSON_CreateObject();
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
		rc = fail(CT_EXIT_FAIL, "out of memory");
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
	cJSON_AddItemToObject(clock, "mono_to_wall_ns", u64_item((uint64_t)ref->wall));
	snprintf(w, sizeof(w), "%" PRId64, ref->wall);
	cJSON_AddStringToObject(clock, "mono_to_wall_ns_str", w);
	cJSON_AddItemToObject(clock, "start_ns", u64_item(start));
	cJSON_AddItemToObject(clock, "end_ns", u64_item(end));
	cJSON_AddItemToObject(root, "events", cJSON_CreateNumber(events));
	rc = merge_diag(ins, idx, n, sorted, nprocs, root, minfo);
	cJSON_AddItemToObject(root, "processes", procs);
	procs = NULL;
	cJSON_AddItemToObject(root, "merge", minfo);
	if (!rc)
		rc = write_doc(root, out);
out:
	free(sorted);
	cJSON_Delete(counts);
	cJSON_Delete(drops);
	cJSON_Delete(procs);
	cJSON_Delete(root);
	return rc;
}

/* ---- --chrome -------------------------------------------------------------------------- */

/* ts (µs, 3 decimals) + shift (ns), written exactly as the tracer writes it. */
static void shift_us(cJSON *ev, const char *key, int64_t shift_ns)
{
	cJSON *t = cJSON_GetObjectItemCaseSensitive(ev, key);
	struct ct_sbuf b = {0};
	double ns;

	if (!cJSON_IsNumber(t) || !shift_ns)
		return;
	ns = t->valuedouble * 1000.0;
	ns = ns < 0 ? ns - 0.5 : ns + 0.5;
	ns += (double)shift_ns;
	if (ns < 0)
		ns = 0;
	ct_sbuf_us(&b, (uint64_t)ns);
	if (b.buf)
		cJSON_ReplaceItemInObjectCaseSensitive(ev, key, cJSON_CreateRaw(b.buf));
	ct_sbuf_free(&b);
}

struct pidmap {
	uint32_t from, to;
};

/* The pids of earlier inputs, to renumber a collision. */
struct pidset {
	uint32_t *v;
	int *input; /* the input each pid is in (pids are unique once renumbered) */
	size_t n, cap;
};

static bool pidset_has(const struct pidset *s, uint32_t pid)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] == pid)
			return true;
	return false;
}

static bool pidset_add(struct pidset *s, uint32_t pid, int input)
{
	if (s->n == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 64;
		uint32_t *nv = realloc(s->v, nc * sizeof(*nv));
		int *ni;

		if (!nv)
			return false;
		s->v = nv;
		ni = realloc(s->input, nc * sizeof(*ni));
		if (!ni)
			return false;
		s->input = ni;
		s->cap = nc;
	}
	s->input[s->n] = input;
	s->v[s->n++] = pid;
	return true;
}

/* Interned strings for ct_xmatch: function names (compared by address), identities. */
struct names {
	char **v;
	size_t n, cap;
};

/* The index of s in t, added if new; -1: no memory. */
static int32_t intern_index(struct names *t, const char *s)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->v[i], s))
			return (int32_t)i;
	if (t->n == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 64;
		char **nv = realloc(t->v, nc * sizeof(*nv));

		if (!nv)
			return -1;
		t->v = nv;
		t->cap = nc;
	}
	t->v[t->n] = strdup(s);
	return t->v[t->n] ? (int32_t)t->n++ : -1;
}

static const char *intern(struct names *t, const char *s)
{
	int32_t i = intern_index(t, s);

	return i < 0 ? NULL : t->v[i];
}

static double num_of(const cJSON *o, const char *k, double dflt)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsNumber(x) ? x->valuedouble : dflt;
}

static const char *const xkinds[] = {
    "all_reduce", "reduce",	"broadcast",	  "all_gather", "gather",
    "scatter",	  "all_to_all", "reduce_scatter", "barrier",
};

static bool collective_kind(const char *k)
{
	for (size_t i = 0; i < sizeof(xkinds) / sizeof(xkinds[0]); i++)
		if (!strcmp(k, xkinds[i]))
			return true;
	return false;
}

static void add_flow(cJSON *events, uint64_t id, const struct ct_xhalf *a, const struct ct_xhalf *b)
{
	const struct ct_xhalf *h[2] = {a, b};

	for (int i = 0; i < 2; i++) {
		cJSON *e = cJSON_CreateObject();
		struct ct_sbuf sb = {0};
		uint64_t t = h[i]->ts + (h[i]->end - h[i]->ts) / 2;

		cJSON_AddStringToObject(e, "ph", i ? "f" : "s");
		if (i)
			cJSON_AddStringToObject(e, "bp", "e");
		cJSON_AddStringToObject(e, "cat", "flow");
		cJSON_AddStringToObject(e, "name", "rank→rank");
		cJSON_AddItemToObject(e, "id", cJSON_CreateNumber((double)id));
		cJSON_AddItemToObject(e, "pid", cJSON_CreateNumber(h[i]->pid));
		cJSON_AddItemToObject(e, "tid", cJSON_CreateNumber(h[i]->tid));
		ct_sbuf_us(&sb, t);
		cJSON_AddItemToObject(e, "ts", cJSON_CreateRaw(sb.buf ? sb.buf : "0"));
		ct_sbuf_free(&sb);
		cJSON_AddItemToArray(events, e);
	}
}

/*
 * The rank→rank arrows between the halves of one collective, drawn again over the slices
 * of every input with the --chrome export's matching rule (function, communicator
 * identity "LIB#ORDINAL/SIZE", sequence number on it: args comm_id, comm_seq, comm_sub),
 * in order of completion: the arrows one tracer that saw every rank would have drawn,
 * across node boundaries too. The identity is the same in every tracer: each process
 * numbers its communicators of a size in the order it first uses them.
 */
struct half {
	const char *fn;
	int32_t comm; /* index of the interned comm_id */
	uint32_t sub;
	uint64_t seq;
	int input;
	struct ct_xhalf h;
};

static int half_order(const void *a, const void *b)
{
	const struct half *x = a, *y = b;

	if (x->h.end != y->h.end)
		return x->h.end < y->h.end ? -1 : 1;
	return x->input - y->input;
}

static uint64_t rank_flows(cJSON *events, struct half *hs, size_t n, uint64_t id0,
			   uint64_t *evicted)
{
	struct ct_xmatch *m = calloc(1, sizeof(*m));
	uint64_t flows = 0;

	if (!m)
		return 0;
	/* The first half to complete is the origin, as in the tracer. */
	qsort(hs, n, sizeof(*hs), half_order);
	for (size_t i = 0; i < n; i++) {
		struct ct_xkey k = {
		    .function = hs[i].fn, .comm = hs[i].comm, .sub = hs[i].sub, .seq = hs[i].seq};
		struct ct_xhalf first;

		if (ct_xmatch_add(m, &k, &hs[i].h, &first))
			add_flow(events, id0 + ++flows, &first, &hs[i].h);
	}
	*evicted = m->evicted;
	free(m);
	return flows;
}

static int merge_chrome(struct input *ins, const int *idx, int n, const char *out)
{
	struct input *ref = &ins[idx[0]];
	cJSON *root = cJSON_CreateObject(), *events = cJSON_CreateArray(), *meta, *minfo, *arr;
	cJSON *mprocs = cJSON_CreateArray();
	struct pidset seen = {0};
	struct names names = {0}, comms = {0};
	struct half *hs = NULL;
	size_t nh = 0, caph = 0;
	uint32_t next_pid = REMAP_PID0;
	uint64_t start = 0, end = 0, flows, evicted = 0;
	double dropped = 0;
	int rc;
	char w[24];

	rc = check_conflicts(ins, idx, n, "processes");
	if (rc)
		goto out;
	meta = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(ref->doc, "metadata"), true);
	minfo = cJSON_CreateObject();
	arr = cJSON_AddArrayToObject(minfo, "inputs");
	for (int a = 0; a < n; a++) {
		struct input *in = &ins[idx[a]];
		cJSON *md = cJSON_GetObjectItemCaseSensitive(in->doc, "metadata");
		cJSON *list = cJSON_GetObjectItemCaseSensitive(in->doc, "traceEvents");
		cJSON *e = cJSON_CreateObject(), *map = cJSON_CreateObject(), *p, *ev;
		struct pidmap pm[CT_MAX_TARGETS];
		int npm = 0, nev = 0;
		struct pidset mine = {0};

		in->shift = in->wall - ref->wall;
		/* Pids of this input that an earlier input has too (another host): renumbered. */
		cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(md, "processes"))
		{
			uint32_t pid = (uint32_t)num_of(p, "pid", 0);
			cJSON *c;

			if (pidset_has(&seen, pid) && npm < CT_MAX_TARGETS) {
				char k[16];

				pm[npm].from = pid;
				pm[npm].to = next_pid++;
				snprintf(k, sizeof(k), "%u", pid);
				cJSON_AddItemToObject(map, k, cJSON_CreateNumber(pm[npm].to));
				pid = pm[npm++].to;
			}
			pidset_add(&mine, pid, a);
			c = cJSON_Duplicate(p, true);
			cJSON_ReplaceItemInObjectCaseSensitive(c, "pid", cJSON_CreateNumber(pid));
			cJSON_AddStringToObject(c, "merge_file", in->path);
			cJSON_AddItemToArray(mprocs, c);
		}
		cJSON_ArrayForEach(ev, list)
		{
			cJSON *pid = cJSON_GetObjectItemCaseSensitive(ev, "pid");
			cJSON *id = cJSON_GetObjectItemCaseSensitive(ev, "id");
			cJSON *args = cJSON_GetObjectItemCaseSensitive(ev, "args");
			const cJSON *ph = cJSON_GetObjectItemCaseSensitive(ev, "ph");

			if (!cJSON_IsObject(ev) || !cJSON_IsString(ph)) {
				rc = fail(CT_MERGE_E_MALFORMED,
					  "%s: traceEvents[%d] is not an event (an object with "
					  "ph)",
					  in->path, nev);
				cJSON_Delete(e);
				cJSON_Delete(map);
				free(mine.v);
				free(mine.input);
				cJSON_Delete(meta);
				cJSON_Delete(minfo);
				goto out;
			}
			nev++;
			if (cJSON_IsNumber(pid)) {
				for (int k = 0; k < npm; k++)
					if ((uint32_t)pid->valuedouble == pm[k].from) {
						cJSON_SetNumberValue(pid, pm[k].to);
						break;
					}
			}
			if (cJSON_IsNumber(id) && a > 0) /* flow ids of each input kept apart */
				cJSON_SetNumberValue(id,
						     id->valuedouble + (double)a * FLOW_ID_STEP);
			if (ph->valuestring[0] != 'M')
				shift_us(ev, "ts", in->shift);
			/* a collective's half, for the arrows across inputs */
			if (ph->valuestring[0] == 'X' && cJSON_IsObject(args) &&
			    cJSON_IsString(cJSON_GetObjectItemCaseSensitive(args, "kind")) &&
			    collective_kind(
				cJSON_GetObjectItemCaseSensitive(args, "kind")->valuestring) &&
			    cJSON_IsString(cJSON_GetObjectItemCaseSensitive(args, "function")) &&
			    cJSON_IsString(cJSON_GetObjectItemCaseSensitive(args, "comm_id")) &&
			    num_of(args, "comm_seq", 0) > 0 && num_of(args, "group_size", 0) > 1) {
				double ts = num_of(ev, "ts", 0), dur = num_of(ev, "dur", 0);

				if (nh == caph) {
					size_t nc = caph ? caph * 2 : 4096;
					struct half *nv = realloc(hs, nc * sizeof(*nv));

					if (!nv)
						continue;
					hs = nv;
					caph = nc;
				}
				hs[nh].fn = intern(
				    &names, cJSON_GetObjectItemCaseSensitive(args, "function")
						->valuestring);
				if (!hs[nh].fn)
					continue;
				hs[nh].comm = intern_index(
				    &comms,
				    cJSON_GetObjectItemCaseSensitive(args, "comm_id")->valuestring);
				if (hs[nh].comm < 0)
					continue;
				hs[nh].sub = (uint32_t)num_of(args, "comm_sub", 0);
				hs[nh].seq = (uint64_t)num_of(args, "comm_seq", 0);
				hs[nh].input = a;
				hs[nh].h.pid = (uint32_t)num_of(ev, "pid", 0);
				hs[nh].h.tid = (uint32_t)num_of(ev, "tid", 0);
				hs[nh].h.ts = (uint64_t)(ts * 1000.0 + 0.5);
				hs[nh].h.end = hs[nh].h.ts + (uint64_t)(dur * 1000.0 + 0.5);
				nh++;
			}
		}
		for (size_t k = 0; k < mine.n; k++)
			pidset_add(&seen, mine.v[k], a);
		free(mine.v);
		free(mine.input);
		cJSON_AddStringToObject(e, "file", in->path);
		p = cJSON_GetObjectItemCaseSensitive(md, "host");
		if (cJSON_IsString(p))
			cJSON_AddStringToObject(e, "host", p->valuestring);
		snprintf(w, sizeof(w), "%" PRId64, in->wall);
		cJSON_AddStringToObject(e, "mono_to_wall_ns_str", w);
		cJSON_AddItemToObject(e, "shift_ns", cJSON_CreateNumber((double)in->shift));
		cJSON_AddBoolToObject(e, "clock_exact", in->wall_exact);
		cJSON_AddItemToObject(e, "events", cJSON_CreateNumber(nev));
		cJSON_AddItemToObject(e, "pid_map", map);
		cJSON_AddItemToObject(e, "metadata", cJSON_Duplicate(md, true));
		cJSON_AddItemToArray(arr, e);
		dropped += num_of(md, "dropped_events", 0);
		if (a == 0 || (int64_t)in->start + in->shift < (int64_t)start)
			start = (uint64_t)((int64_t)in->start + in->shift);
		if (a == 0 || (int64_t)in->end + in->shift > (int64_t)end)
			end = (uint64_t)((int64_t)in->end + in->shift);
		/* Move the events over; rank→rank arrows are drawn again over all inputs. */
		while (list && list->child) {
			cJSON *x = cJSON_DetachItemViaPointer(list, list->child);
			const cJSON *cat = cJSON_GetObjectItemCaseSensitive(x, "cat");
			const cJSON *nm = cJSON_GetObjectItemCaseSensitive(x, "name");

			if (cJSON_IsString(cat) && !strcmp(cat->valuestring, "flow") &&
			    cJSON_IsString(nm) && !strcmp(nm->valuestring, "rank→rank"))
				cJSON_Delete(x);
			else
				cJSON_AddItemToArray(events, x);
		}
	}
	flows = rank_flows(events, hs, nh, (uint64_t)(n + 1) * FLOW_ID_STEP, &evicted);
	cJSON_AddItemToObject(minfo, "rank_flows", cJSON_CreateNumber((double)flows));
	cJSON_AddItemToObject(minfo, "flow_candidates_forgotten",
			      cJSON_CreateNumber((double)evicted));
	cJSON_ReplaceItemInObjectCaseSensitive(meta, "processes", mprocs);
	mprocs = NULL;
	cJSON_ReplaceItemInObjectCaseSensitive(meta, "start_ns", u64_item(start));
	cJSON_ReplaceItemInObjectCaseSensitive(meta, "end_ns", u64_item(end));
	cJSON_ReplaceItemInObjectCaseSensitive(meta, "dropped_events", cJSON_CreateNumber(dropped));
	cJSON_AddItemToObject(meta, "merge", minfo);
	cJSON_AddItemToObject(root, "traceEvents", events);
	events = NULL;
	cJSON_AddItemToObject(root, "metadata", meta);
	rc = write_doc(root, out);
out:
	for (size_t i = 0; i < names.n; i++)
		free(names.v[i]);
	free(names.v);
	for (size_t i = 0; i < comms.n; i++)
		free(comms.v[i]);
	free(comms.v);
	free(hs);
	free(seen.v);
	free(seen.input);
	cJSON_Delete(mprocs);
	cJSON_Delete(events);
	cJSON_Delete(root);
	return rc;
}

/* ---- command line ---------------------------------------------------------------------- */

int merge_cli_main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"json", required_argument, NULL, 'j'},
	    {"chrome", required_argument, NULL, 'c'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	const char *json_out = NULL, *chrome_out = NULL;
	struct input *ins = NULL;
	int n = 0, nj = 0, nc = 0, rc = 0, c;
	int *jidx = NULL, *cidx = NULL;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json_out = optarg;
			break;
		case 'c':
			chrome_out = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "Try 'commtrace-bpf merge --help' for more information.\n");
			return CT_EXIT_USAGE;
		}
	}
	n = argc - optind;
	if (!json_out && !chrome_out)
		return fail(CT_EXIT_USAGE, "nothing to write: give --json OUT and/or --chrome OUT");
	if (n < 1)
		return fail(CT_EXIT_USAGE,
			    "no inputs: give the --json reports and/or --chrome traces of the "
			    "tracers to merge");
	if (n > MAX_INPUTS)
		return fail(CT_EXIT_USAGE, "more than %d inputs", MAX_INPUTS);
	ins = calloc((size_t)n, sizeof(*ins));
	jidx = calloc((size_t)n, sizeof(int));
	cidx = calloc((size_t)n, sizeof(int));
	if (!ins || !jidx || !cidx) {
		rc = fail(CT_EXIT_FAIL, "out of memory");
		goto out;
	}
	for (int i = 0; i < n; i++) {
		ins[i].path = argv[optind + i];
		for (int k = 0; k < i; k++)
			if (!strcmp(ins[k].path, ins[i].path)) {
				rc = fail(CT_MERGE_E_CONFLICT, "%s is given twice", ins[i].path);
				goto out;
			}
		rc = load(&ins[i]);
		if (rc)
			goto out;
		if (ins[i].chrome)
			cidx[nc++] = i;
		else
			jidx[nj++] = i;
	}
	if (nj && !json_out) {
		rc = fail(CT_EXIT_USAGE,
			  "%s is a --json report: give --json OUT for the merged report",
			  ins[jidx[0]].path);
		goto out;
	}
	if (nc && !chrome_out) {
		rc = fail(CT_EXIT_USAGE,
			  "%s is a --chrome trace: give --chrome OUT for the merged timeline",
			  ins[cidx[0]].path);
		goto out;
	}
	if (json_out && !nj) {
		rc = fail(CT_EXIT_USAGE, "--json %s: none of the inputs is a --json report",
			  json_out);
		goto out;
	}
	if (chrome_out && !nc) {
		rc = fail(CT_EXIT_USAGE, "--chrome %s: none of the inputs is a --chrome trace",
			  chrome_out);
		goto out;
	}
	if (nj)
		rc = merge_json(ins, jidx, nj, json_out);
	if (!rc && nc)
		rc = merge_chrome(ins, cidx, nc, chrome_out);
	if (!rc)
		fprintf(stderr, "merge: %d report%s, %d trace%s%s%s%s%s\n", nj, nj == 1 ? "" : "s",
			nc, nc == 1 ? "" : "s", json_out ? " -> " : "", json_out ? json_out : "",
			chrome_out ? " -> " : "", chrome_out ? chrome_out : "");
out:
	for (int i = 0; i < n && ins; i++)
		cJSON_Delete(ins[i].doc);
	free(ins);
	free(jidx);
	free(cidx);
	return rc;
}
