// SPDX-License-Identifier: MIT
/*
 * commtrace-bpf fuse (docs/chrome.md, "Fusion"). The first commtrace trace sets the time
 * axis: its CLOCK_MONOTONIC microseconds. Every other input is moved onto it through
 * wall-clock time: ours by their mono_to_wall_ns, Kineto traces by baseTimeNanoseconds
 * (or epoch microseconds), torch 1.13's legacy traces (relative to the profiler's start,
 * no clock at all) only by an anchor the user gives. Every event of every input is
 * written once; pids and tids of profiler events are rewritten so that host events join
 * the traced process they belong to without sharing its tracks.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cJSON.h>
#include "devprof/devprof.h"
#include "export/export.h"
#include "fuse/fuse.h"
#include "util/output.h"

#define FUSE_MAX_INPUTS 64
#define FUSE_PID_BASE	0x2000000  /* profiler processes not matched: above pid_max */
#define FUSE_TID_BASE	0x30000000 /* profiler threads: never a real tid, never 0 */
#define FUSE_MAX_TIDS	4096	   /* distinct (input, pid, tid) remapped */
/*
 * A profiler trace must overlap the traced window of the process it joins, give or take
 * the error of the two clock conversions: 1 s, plus 500 ppm of the window (the fastest
 * an NTP daemon may slew CLOCK_REALTIME, adjtimex' MAXFREQ, while mono_to_wall_ns was
 * read once at attach). Anchors err by microseconds, far below.
 */
#define FUSE_SLACK_NS	1000000000LL
#define FUSE_SLACK_PPM	500

enum in_kind { IN_OURS = 1, IN_KINETO, IN_LEGACY };

struct input {
	const char *path;
	enum in_kind kind;
	cJSON *root, *events; /* events: the traceEvents array (root itself for legacy) */
	/* profiler options */
	long long pid; /* --pid, or -1 */
	int rank;      /* --rank, or -1 */
	const char *anchor_name;
	long long anchor_ns, wall0_ns;
	bool have_anchor, have_wall0;
	/* alignment: wall ns = ts µs * 1000 + offset_ns */
	long long offset_ns;
	const char *align;
	long long target_pid;	  /* the traced process its host events join, or -1 */
	long long win_lo, win_hi; /* ours: the traced window, wall-clock ns */
	double host_pid;	  /* the profiler's pid of that process (Kineto) */
	bool host_pid_any;	  /* legacy: every event is the one process' */
	int nevents;
};

struct fuse_err {
	int code;
	char msg[1024];
};

static int ferr(struct fuse_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int ferr(struct fuse_err *e, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	e->code = code;
	return code;
}

static const char usage[] =
    "Usage: commtrace-bpf fuse -o OUT TRACE.json... [--profiler FILE [--pid PID | --rank R]\n"
    "                          [--anchor NAME@WALL_NS | --wall0 WALL_NS]]...\n"
    "\n"
    "Merge commtrace-bpf --chrome traces and PyTorch profiler Chrome traces of the same\n"
    "ranks into one Chrome Trace on one time axis (the first TRACE's CLOCK_MONOTONIC µs),\n"
    "aligned through wall-clock time. Options after --profiler apply to that file:\n"
    "  --pid PID            the traced process (host pid, or its pid in its container)\n"
    "  --rank R             the traced process of this rank\n"
    "  --anchor NAME@NS     the first event named NAME began at this CLOCK_REALTIME ns\n"
    "  --wall0 NS           ts 0 of this file is this CLOCK_REALTIME ns\n"
    "Kineto traces carry their clock (baseTimeNanoseconds) and rank (distributedInfo);\n"
    "torch 1.13's legacy traces carry neither: give --anchor or --wall0, and --pid or --rank.\n"
    "\n"
    "Exit status: 0 written, 2 usage, 3 I/O, 10 not a trace, 11 cannot be aligned,\n"
    "12 the process a profiler trace belongs to is unknown or ambiguous, 13 a profiler\n"
    "trace outside the traced window (another run).\n"
    "\n"
    "Example:\n"
    "  commtrace-bpf fuse -o fused.json comm.trace.json \\\n"
    "      --profiler prof.0.json --rank 0 --anchor commtrace_anchor@1718000000123456789\n";

static bool parse_ll(const char *s, long long *out)
{
	char *end;

	errno = 0;
	*out = strtoll(s, &end, 10);
	return !errno && end != s && !*end;
}

static const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int load(struct input *in, struct fuse_err *e)
{
	struct devprof_err de = {0};
	uint8_t *buf = NULL;
	size_t len = 0;
	const char *tool;
	cJSON *ev, *meta;
	int i = 0;

	if (devprof_read_file(in->path, DEVPROF_MAX_TRACE, &buf, &len, &de))
		return ferr(e, CT_FUSE_E_IO, "%s", de.msg);
	in->root = cJSON_ParseWithLength((const char *)buf, len);
	if (!in->root) {
		const char *at = cJSON_GetErrorPtr();
		long off = at && at >= (const char *)buf && at <= (const char *)buf + len
			       ? (long)(at - (const char *)buf)
			       : -1;

		free(buf);
		return ferr(e, CT_FUSE_E_NOT_TRACE,
			    "%s: not a trace: not valid JSON (error at byte %ld)", in->path, off);
	}
	free(buf);
	if (cJSON_IsArray(in->root)) {
		in->events = in->root;
	} else if (cJSON_IsObject(in->root) &&
		   cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(in->root, "traceEvents"))) {
		in->events = cJSON_GetObjectItemCaseSensitive(in->root, "traceEvents");
	} else {
		return ferr(
		    e, CT_FUSE_E_NOT_TRACE,
		    "%s: not a trace: neither an object with a traceEvents array nor an array "
		    "of events",
		    in->path);
	}
	cJSON_ArrayForEach(ev, in->events)
	{
		const cJSON *ts = cJSON_GetObjectItemCaseSensitive(ev, "ts");

		if (!cJSON_IsObject(ev) || !jstr(ev, "ph"))
			return ferr(e, CT_FUSE_E_NOT_TRACE,
				    "%s: not a trace: event %d is not an object with a \"ph\"",
				    in->path, i);
		if (ts && !cJSON_IsNumber(ts))
			return ferr(e, CT_FUSE_E_NOT_TRACE, "%s: event %d: \"ts\" is not a number",
				    in->path, i);
		i++;
	}
	in->nevents = i;
	if (!i)
		return ferr(e, CT_FUSE_E_NOT_TRACE, "%s: the trace has no events: nothing to fuse",
			    in->path);
	meta = cJSON_GetObjectItemCaseSensitive(in->root, "metadata");
	tool = cJSON_IsObject(meta) ? jstr(meta, "tool") : NULL;
	if (in->kind == IN_OURS) {
		const char *m2w = meta ? jstr(meta, "mono_to_wall_ns_str") : NULL;

		if (!tool || strcmp(tool, "commtrace-bpf"))
			return ferr(e, CT_FUSE_E_NOT_TRACE,
				    "%s: not a commtrace-bpf --chrome trace (no metadata.tool "
				    "\"commtrace-bpf\"); give profiler traces with --profiler",
				    in->path);
		if (!m2w || !parse_ll(m2w, &in->offset_ns))
			return ferr(
			    e, CT_FUSE_E_ALIGN,
			    "%s: cannot be aligned: metadata.mono_to_wall_ns_str is missing",
			    in->path);
		in->align = "metadata.mono_to_wall_ns (CLOCK_MONOTONIC to CLOCK_REALTIME)";
		return 0;
	}
	if (tool && !strcmp(tool, "commtrace-bpf"))
		return ferr(e, CT_FUSE_E_USAGE,
			    "%s: a commtrace-bpf trace given as --profiler: give it as TRACE",
			    in->path);
	in->kind = in->events == in->root ? IN_LEGACY : IN_KINETO;
	return 0;
}

/* wall = ts µs × 1000 + offset_ns, from what the file or the user says. */
static int align_profiler(struct input *in, struct fuse_err *e)
{
	const cJSON *base = cJSON_GetObjectItemCaseSensitive(in->root, "baseTimeNanoseconds");
	const cJSON *ev;
	double min_ts = 0;
	bool any = false;

	if (in->have_anchor) {
		cJSON_ArrayForEach(ev, in->events)
		{
			const cJSON *ts = cJSON_GetObjectItemCaseSensitive(ev, "ts");
			const char *name = jstr(ev, "name");

			if (name && !strcmp(name, in->anchor_name) && cJSON_IsNumber(ts)) {
				in->offset_ns =
				    in->anchor_ns - (long long)(ts->valuedouble * 1000.0);
				in->align = "--anchor";
				return 0;
			}
		}
		return ferr(e, CT_FUSE_E_ALIGN,
			    "%s: cannot be aligned: no event named \"%s\" (the --anchor) in it",
			    in->path, in->anchor_name);
	}
	if (in->have_wall0) {
		in->offset_ns = in->wall0_ns;
		in->align = "--wall0";
		return 0;
	}
	if (in->kind == IN_KINETO && cJSON_IsNumber(base) && base->valuedouble > 0) {
		in->offset_ns = (long long)base->valuedouble;
		in->align = "baseTimeNanoseconds";
		return 0;
	}
	cJSON_ArrayForEach(ev, in->events)
	{
		const cJSON *ts = cJSON_GetObjectItemCaseSensitive(ev, "ts");

		if (cJSON_IsNumber(ts) && (!any || ts->valuedouble < min_ts)) {
			min_ts = ts->valuedouble;
			any = true;
		}
	}
	/* Older Kineto: microseconds since the epoch (anything past 2001-09-09). */
	if (in->kind == IN_KINETO && any && min_ts > 1e15) {
		in->offset_ns = 0;
		in->align = "ts in epoch microseconds";
		return 0;
	}
	return ferr(e, CT_FUSE_E_ALIGN,
		    "%s: cannot be aligned: its timestamps are relative to the profiler's start "
		    "and it has no clock (%s); record one and give --anchor NAME@WALL_NS or "
		    "--wall0 WALL_NS",
		    in->path,
		    in->kind == IN_LEGACY ? "torch's legacy autograd-profiler format"
					  : "no baseTimeNanoseconds");
}

struct ourproc {
	long long pid, nspid;
	int rank;
	int input;
};

static int find_target(struct input *in, const struct ourproc *op, int nop, struct fuse_err *e)
{
	const cJSON *di = cJSON_GetObjectItemCaseSensitive(in->root, "distributedInfo");
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(di, "rank");
	const cJSON *ev;
	int rank = in->rank, hits = 0;

	in->target_pid = -1;
	if (in->kind == IN_LEGACY) {
		in->host_pid_any = true;
	} else {
		/* The profiled process: the pid of its CPU-side events. */
		cJSON_ArrayForEach(ev, in->events)
		{
			const cJSON *pid = cJSON_GetObjectItemCaseSensitive(ev, "pid");
			const char *cat = jstr(ev, "cat");

			if (cJSON_IsNumber(pid) && cat &&
			    (!strcmp(cat, "cpu_op") || !strcmp(cat, "user_annotation") ||
			     !strcmp(cat, "python_function") || !strcmp(cat, "cuda_runtime"))) {
				in->host_pid = pid->valuedouble;
				hits = 1;
				break;
			}
		}
		if (!hits)
			in->host_pid = -1;
	}
	if (in->pid >= 0) {
		for (int i = 0; i < nop; i++)
			if (op[i].pid == in->pid || op[i].nspid == in->pid) {
				in->target_pid = op[i].pid;
				return 0;
			}
		return ferr(e, CT_FUSE_E_MATCH,
			    "%s: --pid %lld is not a process of the traces given", in->path,
			    in->pid);
	}
	if (rank < 0 && cJSON_IsNumber(r))
		rank = (int)r->valuedouble;
	if (rank >= 0) {
		hits = 0;
		for (int i = 0; i < nop; i++)
			if (op[i].rank == rank) {
				in->target_pid = op[i].pid;
				hits++;
			}
		if (hits == 1)
			return 0;
		if (hits > 1)
			return ferr(
			    e, CT_FUSE_E_MATCH,
			    "%s: rank %d is ambiguous: %d traced processes have it; give --pid",
			    in->path, rank, hits);
		if (in->rank >= 0)
			return ferr(e, CT_FUSE_E_MATCH,
				    "%s: --rank %d is not a rank of the traces given", in->path,
				    rank);
	}
	if (in->host_pid >= 0 && !in->host_pid_any) {
		for (int i = 0; i < nop; i++)
			if (op[i].pid == (long long)in->host_pid ||
			    op[i].nspid == (long long)in->host_pid) {
				in->target_pid = op[i].pid;
				return 0;
			}
	}
	if (in->kind == IN_LEGACY)
		return ferr(e, CT_FUSE_E_MATCH,
			    "%s: torch's legacy profiler format names no process (pid \"CPU "
			    "functions\"): give --pid PID or --rank R",
			    in->path);
	fprintf(stderr,
		"commtrace-bpf fuse: %s: matches no traced process (by rank or pid); its "
		"processes are kept on their own\n",
		in->path);
	return 0;
}

/* (input, pid, tid) → new ids, bounded. */
struct idmap {
	int input;
	char pid[64], tid[64];
	long long npid, ntid;
};

struct fuse {
	struct input in[FUSE_MAX_INPUTS];
	int n;
	struct idmap *ids;
	int nids;
	long long next_pid, next_tid;
	long long base_ns; /* mono_to_wall_ns of the first commtrace trace */
	cJSON *pidmaps;	   /* per input: [{from, to}] */
};

static void key_of(const cJSON *v, char *buf, size_t len)
{
	if (cJSON_IsNumber(v))
		snprintf(buf, len, "%.0f", v->valuedouble);
	else if (cJSON_IsString(v))
		snprintf(buf, len, "s:%s", v->valuestring);
	else
		snprintf(buf, len, "none");
}

static struct idmap *remap(struct fuse *f, int input, const cJSON *pid, const cJSON *tid,
			   struct fuse_err *e)
{
	struct input *in = &f->in[input];
	char pk[64], tk[64];
	struct idmap *m;
	bool host;

	key_of(pid, pk, sizeof(pk));
	key_of(tid, tk, sizeof(tk));
	for (int i = 0; i < f->nids; i++) {
		m = &f->ids[i];
		if (m->input == input && !strcmp(m->pid, pk) && !strcmp(m->tid, tk))
			return m;
	}
	if (f->nids == FUSE_MAX_TIDS) {
		ferr(e, CT_FUSE_E_NOT_TRACE, "%s: more than %d distinct threads", in->path,
		     FUSE_MAX_TIDS);
		return NULL;
	}
	m = &f->ids[f->nids++];
	m->input = input;
	snprintf(m->pid, sizeof(m->pid), "%s", pk);
	snprintf(m->tid, sizeof(m->tid), "%s", tk);
	host = in->target_pid >= 0 &&
	       (in->host_pid_any || (cJSON_IsNumber(pid) && pid->valuedouble == in->host_pid));
	/* The pid is shared by all threads of one profiler process: look it up first. */
	m->npid = -1;
	for (int i = 0; i < f->nids - 1; i++)
		if (f->ids[i].input == input && !strcmp(f->ids[i].pid, pk))
			m->npid = f->ids[i].npid;
	if (m->npid < 0) {
		cJSON *pm = cJSON_CreateObject();

		m->npid = host ? in->target_pid : f->next_pid++;
		cJSON_AddStringToObject(pm, "from", pk);
		cJSON_AddNumberToObject(pm, "to", (double)m->npid);
		cJSON_AddItemToArray(cJSON_GetArrayItem(f->pidmaps, input), pm);
	}
	m->ntid = f->next_tid++;
	return m;
}

static void set_num(cJSON *o, const char *k, double v)
{
	cJSON *old = cJSON_GetObjectItemCaseSensitive(o, k);

	if (cJSON_IsNumber(old))
		cJSON_SetNumberValue(old, v);
	else if (old)
		cJSON_ReplaceItemInObjectCaseSensitive(o, k, cJSON_CreateNumber(v));
	else
		cJSON_AddNumberToObject(o, k, v);
}

/* Rewrites one profiler event in place: time, pid, tid, flow id. */
static int rewrite(struct fuse *f, int input, cJSON *ev, cJSON *extra, struct fuse_err *e)
{
	struct input *in = &f->in[input];
	cJSON *ts = cJSON_GetObjectItemCaseSensitive(ev, "ts");
	cJSON *id = cJSON_GetObjectItemCaseSensitive(ev, "id");
	const char *ph = jstr(ev, "ph");
	struct idmap *m;
	bool fresh;
	int before = f->nids;

	if (cJSON_IsNumber(ts))
		cJSON_SetNumberValue(ts,
				     ts->valuedouble + (double)(in->offset_ns - f->base_ns) / 1e3);
	m = remap(f, input, cJSON_GetObjectItemCaseSensitive(ev, "pid"),
		  cJSON_GetObjectItemCaseSensitive(ev, "tid"), e);
	if (!m)
		return e->code;
	fresh = f->nids > before;
	set_num(ev, "pid", (double)m->npid);
	set_num(ev, "tid", (double)m->ntid);
	/* Flow ids are per file: keep those of different inputs apart. */
	if (cJSON_IsNumber(id))
		cJSON_SetNumberValue(id, id->valuedouble + (double)(input + 1) * 1e12);
	else if (cJSON_IsString(id)) {
		char buf[256];

		snprintf(buf, sizeof(buf), "in%d:%s", input, id->valuestring);
		cJSON_ReplaceItemInObjectCaseSensitive(ev, "id", cJSON_CreateString(buf));
	}
	if (fresh && ph && strcmp(ph, "M")) {
		/* A thread the profiler did not name: say where it comes from. */
		char name[192];
		cJSON *t = cJSON_CreateObject(), *a = cJSON_CreateObject();

		snprintf(name, sizeof(name), "profiler thread %s (input %d)", m->tid, input);
		cJSON_AddStringToObject(t, "ph", "M");
		cJSON_AddStringToObject(t, "name", "thread_name");
		cJSON_AddNumberToObject(t, "pid", (double)m->npid);
		cJSON_AddNumberToObject(t, "tid", (double)m->ntid);
		cJSON_AddStringToObject(a, "name", name);
		cJSON_AddItemToObject(t, "args", a);
		cJSON_AddItemToArray(extra, t);
	}
	return 0;
}

static int write_out(struct fuse *f, const char *out, cJSON *extra, struct fuse_err *e)
{
	char tmp[4096];
	cJSON *meta = NULL, *fm, *ins, *ev;
	FILE *fp;
	bool first = true;
	int err;

	fp = ct_open_output(out, tmp, sizeof(tmp));
	if (!fp)
		return ferr(e, CT_FUSE_E_IO, "%s: %s", out, strerror(errno));
	fputs("{\"traceEvents\":[", fp);
	for (int i = 0; i < f->n; i++) {
		cJSON_ArrayForEach(ev, f->in[i].events)
		{
			char *txt = cJSON_PrintUnformatted(ev);

			if (!txt)
				goto nomem;
			fprintf(fp, "%s\n%s", first ? "" : ",", txt);
			first = false;
			free(txt);
		}
	}
	cJSON_ArrayForEach(ev, extra)
	{
		char *txt = cJSON_PrintUnformatted(ev);

		if (!txt)
			goto nomem;
		fprintf(fp, ",\n%s", txt);
		free(txt);
	}
	for (int i = 0; i < f->n; i++)
		if (f->in[i].kind == IN_OURS) {
			meta = cJSON_Duplicate(
			    cJSON_GetObjectItemCaseSensitive(f->in[i].root, "metadata"), true);
			break;
		}
	fm = cJSON_AddObjectToObject(meta, "fuse");
	cJSON_AddStringToObject(fm, "time_axis",
				"CLOCK_MONOTONIC µs of the first commtrace trace; wall ns = ts × "
				"1000 + mono_to_wall_ns");
	ins = cJSON_AddArrayToObject(fm, "inputs");
	for (int i = 0; i < f->n; i++) {
		struct input *in = &f->in[i];
		cJSON *o = cJSON_CreateObject(), *top = cJSON_CreateObject(), *it;
		char buf[32];

		cJSON_AddStringToObject(o, "path", in->path);
		cJSON_AddStringToObject(o, "kind",
					in->kind == IN_OURS	? "commtrace"
					: in->kind == IN_KINETO ? "kineto"
								: "legacy-autograd");
		cJSON_AddNumberToObject(o, "events", in->nevents);
		cJSON_AddStringToObject(o, "alignment", in->align);
		snprintf(buf, sizeof(buf), "%lld", in->offset_ns);
		cJSON_AddStringToObject(o, "wall_offset_ns", buf);
		snprintf(buf, sizeof(buf), "%lld", in->offset_ns - f->base_ns);
		cJSON_AddStringToObject(o, "shift_ns", buf);
		if (in->kind != IN_OURS) {
			if (in->target_pid >= 0)
				cJSON_AddNumberToObject(o, "joined_pid", (double)in->target_pid);
			else
				cJSON_AddNullToObject(o, "joined_pid");
			cJSON_AddItemToObject(
			    o, "pid_map", cJSON_Duplicate(cJSON_GetArrayItem(f->pidmaps, i), true));
			/* Nothing lost: the profiler's own top-level fields, as they were. */
			if (cJSON_IsObject(in->root))
				cJSON_ArrayForEach(it,
						   in->root) if (strcmp(it->string, "traceEvents"))
				    cJSON_AddItemToObject(top, it->string,
							  cJSON_Duplicate(it, true));
			cJSON_AddItemToObject(o, "top_level", top);
		} else {
			cJSON_Delete(top);
			if (i > 0)
				cJSON_AddItemToObject(
				    o, "metadata",
				    cJSON_Duplicate(
					cJSON_GetObjectItemCaseSensitive(in->root, "metadata"),
					true));
		}
		cJSON_AddItemToArray(ins, o);
	}
	{
		char *txt = cJSON_PrintUnformatted(meta);

		cJSON_Delete(meta);
		if (!txt)
			goto nomem;
		fprintf(fp, "\n],\"metadata\":%s}\n", txt);
		free(txt);
	}
	err = ct_commit_output(fp, tmp, out);
	if (err)
		return ferr(e, CT_FUSE_E_IO, "%s: %s", out, strerror(-err));
	return 0;
nomem:
	fclose(fp);
	unlink(tmp);
	return ferr(e, CT_FUSE_E_IO, "out of memory");
}

static int fuse_run(struct fuse *f, const char *out, struct fuse_err *e)
{
	struct ourproc op[1024];
	int nop = 0, nours = 0, rc;
	long long lo = 0, hi = 0;
	cJSON *extra = cJSON_CreateArray(), *ev;

	f->pidmaps = cJSON_CreateArray();
	f->next_pid = FUSE_PID_BASE;
	f->next_tid = FUSE_TID_BASE;
	f->ids = calloc(FUSE_MAX_TIDS, sizeof(*f->ids));
	if (!f->ids || !extra || !f->pidmaps) {
		rc = ferr(e, CT_FUSE_E_IO, "out of memory");
		goto out;
	}
	for (int i = 0; i < f->n; i++) {
		cJSON_AddItemToArray(f->pidmaps, cJSON_CreateArray());
		rc = load(&f->in[i], e);
		if (rc)
			goto out;
	}
	for (int i = 0; i < f->n; i++) {
		struct input *in = &f->in[i];
		cJSON *procs, *p, *m = cJSON_GetObjectItemCaseSensitive(in->root, "metadata");
		long long s, en;

		if (in->kind != IN_OURS)
			continue;
		if (!nours++)
			f->base_ns = in->offset_ns;
		s = (long long)cJSON_GetNumberValue(
		    cJSON_GetObjectItemCaseSensitive(m, "start_ns"));
		en = (long long)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(m, "end_ns"));
		s += in->offset_ns;
		en += in->offset_ns;
		in->win_lo = s;
		in->win_hi = en;
		if (nours == 1 || s < lo)
			lo = s;
		if (nours == 1 || en > hi)
			hi = en;
		procs = cJSON_GetObjectItemCaseSensitive(m, "processes");
		cJSON_ArrayForEach(p, procs)
		{
			const cJSON *r = cJSON_GetObjectItemCaseSensitive(p, "rank");
			long long pid = (long long)cJSON_GetNumberValue(
			    cJSON_GetObjectItemCaseSensitive(p, "pid"));

			for (int k = 0; k < nop; k++)
				if (op[k].pid == pid) {
					rc = ferr(e, CT_FUSE_E_MATCH,
						  "%s: pid %lld is also in %s: traces of the same "
						  "process twice, or of two hosts with one pid",
						  in->path, pid, f->in[op[k].input].path);
					goto out;
				}
			if (nop == (int)(sizeof(op) / sizeof(op[0])))
				break;
			op[nop].pid = pid;
			op[nop].nspid = (long long)cJSON_GetNumberValue(
			    cJSON_GetObjectItemCaseSensitive(p, "pid_in_namespace"));
			op[nop].rank = cJSON_IsNumber(r) ? (int)r->valuedouble : -1;
			op[nop].input = i;
			nop++;
		}
		/* Later commtrace traces (other hosts, other sessions) move by their offset. */
		if (nours > 1)
			cJSON_ArrayForEach(ev, in->events)
			{
				cJSON *ts = cJSON_GetObjectItemCaseSensitive(ev, "ts");

				if (cJSON_IsNumber(ts))
					cJSON_SetNumberValue(
					    ts, ts->valuedouble +
						    (double)(in->offset_ns - f->base_ns) / 1e3);
			}
	}
	if (!nours) {
		rc = ferr(e, CT_FUSE_E_USAGE,
			  "no commtrace-bpf trace given: it sets the time axis (give TRACE.json)");
		goto out;
	}
	for (int i = 0; i < f->n; i++) {
		struct input *in = &f->in[i];
		const char *wpath = "the traces";
		long long wlo = lo, whi = hi, slack;
		double pmin = 0, pmax = 0;
		bool any = false;

		if (in->kind == IN_OURS)
			continue;
		rc = align_profiler(in, e);
		if (!rc)
			rc = find_target(in, op, nop, e);
		if (rc)
			goto out;
		/* The window of the trace it joins (else of all of ours). */
		for (int k = 0; k < nop; k++)
			if (op[k].pid == in->target_pid) {
				wlo = f->in[op[k].input].win_lo;
				whi = f->in[op[k].input].win_hi;
				wpath = f->in[op[k].input].path;
				break;
			}
		cJSON_ArrayForEach(ev, in->events)
		{
			const cJSON *ts = cJSON_GetObjectItemCaseSensitive(ev, "ts");
			const cJSON *dur = cJSON_GetObjectItemCaseSensitive(ev, "dur");
			const char *ph = jstr(ev, "ph");
			double end;

			if (!cJSON_IsNumber(ts) || (ph && ph[0] == 'M'))
				continue;
			end = ts->valuedouble +
			      (cJSON_IsNumber(dur) && dur->valuedouble > 0 ? dur->valuedouble : 0);
			if (!any || ts->valuedouble < pmin)
				pmin = ts->valuedouble;
			if (!any || end > pmax)
				pmax = end;
			any = true;
		}
		slack = FUSE_SLACK_NS + (whi - wlo) / 1000000 * FUSE_SLACK_PPM;
		if (any && ((long long)(pmax * 1e3) + in->offset_ns < wlo - slack ||
			    (long long)(pmin * 1e3) + in->offset_ns > whi + slack)) {
			long long a = (long long)(pmin * 1e3) + in->offset_ns;
			long long b = (long long)(pmax * 1e3) + in->offset_ns;

			rc = ferr(
			    e, CT_FUSE_E_WINDOW,
			    "%s: outside the traced window: aligned by %s it spans wall-clock "
			    "%lld..%lld ns, %.3f s %s the window of %s (%lld..%lld ns, "
			    "%.3f s of slack): a profile of another run, or a wrong clock "
			    "or anchor",
			    in->path, in->align, a, b, (double)(b < wlo ? wlo - b : a - whi) / 1e9,
			    b < wlo ? "before" : "after", wpath, wlo, whi, (double)slack / 1e9);
			goto out;
		}
		cJSON_ArrayForEach(ev, in->events)
		{
			rc = rewrite(f, i, ev, extra, e);
			if (rc)
				goto out;
		}
	}
	rc = write_out(f, out, extra, e);
out:
	cJSON_Delete(extra);
	cJSON_Delete(f->pidmaps);
	free(f->ids);
	return rc;
}

int fuse_cli_main(int argc, char **argv)
{
	enum { O_PROFILER = 256, O_PID, O_RANK, O_ANCHOR, O_WALL0 };
	static const struct option longopts[] = {
	    {"profiler", required_argument, NULL, O_PROFILER},
	    {"pid", required_argument, NULL, O_PID},
	    {"rank", required_argument, NULL, O_RANK},
	    {"anchor", required_argument, NULL, O_ANCHOR},
	    {"wall0", required_argument, NULL, O_WALL0},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	struct fuse *f = calloc(1, sizeof(*f));
	struct fuse_err e = {0};
	struct input *cur = NULL;
	const char *out = NULL;
	int rc = 0, c, li;
	long long n;

	if (!f)
		return CT_EXIT_FAIL;
	/*
	 * "-": options and inputs in the order given (an input is returned as 1), since
	 * --pid, --rank, --anchor and --wall0 apply to the --profiler FILE before them.
	 */
	optind = 1;
	opterr = 0;
	while (!rc && (li = -1, c = getopt_long(argc, argv, "-:o:h", longopts, &li)) != -1) {
		const char *v = optarg;

		if ((c == O_PID || c == O_RANK || c == O_ANCHOR || c == O_WALL0) && !cur) {
			rc = ferr(&e, CT_FUSE_E_USAGE,
				  "--%s applies to the --profiler FILE before it",
				  longopts[li].name);
			break;
		}
		switch (c) {
		case 'h':
			fputs(usage, stdout);
			free(f);
			return 0;
		case 'o':
			out = v;
			break;
		case 1: /* an input trace of ours */
		case O_PROFILER:
			if (f->n == FUSE_MAX_INPUTS) {
				rc = ferr(&e, CT_FUSE_E_USAGE, "more than %d inputs",
					  FUSE_MAX_INPUTS);
				break;
			}
			cur = &f->in[f->n++];
			cur->path = v;
			cur->kind = c == 1 ? IN_OURS : IN_KINETO;
			cur->pid = -1;
			cur->rank = -1;
			if (c == 1)
				cur = NULL;
			break;
		case O_PID:
		case O_RANK:
			if (!parse_ll(v, &n) || n < 0 || n > INT32_MAX) {
				rc = ferr(&e, CT_FUSE_E_USAGE, "invalid --%s '%s'",
					  longopts[li].name, v);
				break;
			}
			if (c == O_PID)
				cur->pid = n;
			else
				cur->rank = (int)n;
			break;
		case O_WALL0:
			if (!parse_ll(v, &cur->wall0_ns) || cur->wall0_ns <= 0) {
				rc = ferr(&e, CT_FUSE_E_USAGE,
					  "invalid --wall0 '%s': ns since the epoch", v);
				break;
			}
			cur->have_wall0 = true;
			break;
		case O_ANCHOR: {
			const char *at = strrchr(v, '@');

			if (!at || at == v || !parse_ll(at + 1, &cur->anchor_ns) ||
			    cur->anchor_ns <= 0) {
				rc = ferr(&e, CT_FUSE_E_USAGE,
					  "invalid --anchor '%s': NAME@WALL_NS (CLOCK_REALTIME ns)",
					  v);
				break;
			}
			cur->anchor_name = strndup(v, (size_t)(at - v));
			cur->have_anchor = true;
			break;
		}
		case ':':
			rc = ferr(&e, CT_FUSE_E_USAGE, "%s needs a value", argv[optind - 1]);
			break;
		default:
			rc = ferr(&e, CT_FUSE_E_USAGE, "unknown option '%s'", argv[optind - 1]);
			break;
		}
	}
	if (rc)
		goto done;
	if (!out || !f->n) {
		rc = ferr(&e, CT_FUSE_E_USAGE, "%s", !out ? "no -o OUT" : "no input traces");
		goto done;
	}
	rc = fuse_run(f, out, &e);
	if (!rc) {
		int ev = 0;

		for (int i = 0; i < f->n; i++)
			ev += f->in[i].nevents;
		fprintf(stderr, "commtrace-bpf fuse: wrote %s: %d inputs, %d events\n", out, f->n,
			ev);
	}
done:
	if (rc) {
		fprintf(stderr, "commtrace-bpf fuse: %s\n", e.msg);
		if (rc == CT_FUSE_E_USAGE)
			fprintf(stderr, "Try 'commtrace-bpf fuse --help'.\n");
	}
	for (int i = 0; i < f->n; i++) {
		cJSON_Delete(f->in[i].root);
		free((char *)f->in[i].anchor_name);
	}
	free(f);
	return rc;
}
