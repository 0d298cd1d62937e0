// SPDX-License-Identifier: MIT
/*
 * merge's inputs: read (bounded), parsed, classified (report or trace), their clocks, and
 * what every input must agree on (one tracer per rank, one job, one run).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "merge/internal.h"
#include "merge/merge.h"
#include "util/output.h"
#include "ct_version.h"

#define MAX_FILE (1ULL << 31) /* inputs larger than 2 GiB are refused */

static const char *prog = "commtrace-bpf merge";
static char last_error[1024];

int mg_fail(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: %s\n", prog, last_error);
	return code;
}

char *mg_last_error(void)
{
	return last_error[0] ? strdup(last_error) : NULL;
}

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
cJSON *mg_u64_item(uint64_t v)
{
	char buf[24];

	if (v <= (1ULL << 53))
		return cJSON_CreateNumber((double)v);
	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return cJSON_CreateRaw(buf);
}

int mg_load(struct input *in)
{
	const cJSON *clock, *meta, *fmt, *ev;
	const char *err_at;
	char *text = NULL;
	size_t len = 0;
	int rc = read_file(in->path, &text, &len);

	if (rc)
		return mg_fail(CT_EXIT_IO, "cannot read %s: %s", in->path, strerror(-rc));
	in->doc = cJSON_ParseWithLengthOpts(text, len + 1, &err_at, true); /* with the NUL */
	if (!in->doc) {
		rc = mg_fail(CT_MERGE_E_MALFORMED, "%s: not JSON (error at byte %zu)", in->path,
			     err_at ? (size_t)(err_at - text) : (size_t)0);
		free(text);
		return rc;
	}
	free(text);
	if (!cJSON_IsObject(in->doc))
		return mg_fail(CT_MERGE_E_MALFORMED,
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
			return mg_fail(CT_MERGE_E_MALFORMED,
				       "%s: a Chrome trace, but not commtrace-bpf's --chrome "
				       "output (metadata.format is not \"commtrace-chrome/1\")",
				       in->path);
		if (!get_wall(meta, &in->wall, &in->wall_exact))
			return mg_fail(CT_MERGE_E_CLOCK,
				       "%s: metadata has no valid mono_to_wall_ns: cannot align it",
				       in->path);
		if (!get_u64(meta, "start_ns", &in->start) || !get_u64(meta, "end_ns", &in->end))
			return mg_fail(CT_MERGE_E_CLOCK, "%s: metadata has no start_ns/end_ns",
				       in->path);
		if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(meta, "processes")))
			return mg_fail(CT_MERGE_E_MALFORMED, "%s: metadata has no processes list",
				       in->path);
		return 0;
	}
	if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(in->doc, "tool")) ||
	    strcmp(cJSON_GetObjectItemCaseSensitive(in->doc, "tool")->valuestring,
		   "commtrace-bpf") ||
	    !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(in->doc, "processes")))
		return mg_fail(
		    CT_MERGE_E_MALFORMED,
		    "%s: not a commtrace-bpf --json report nor a --chrome trace (no "
		    "\"tool\": \"commtrace-bpf\" with a processes array, no traceEvents)",
		    in->path);
	clock = cJSON_GetObjectItemCaseSensitive(in->doc, "clock");
	if (!cJSON_IsObject(clock) || !get_wall(clock, &in->wall, &in->wall_exact))
		return mg_fail(CT_MERGE_E_CLOCK,
			       "%s: no valid clock.mono_to_wall_ns: cannot align it", in->path);
	if (!get_u64(clock, "start_ns", &in->start) || !get_u64(clock, "end_ns", &in->end))
		return mg_fail(CT_MERGE_E_CLOCK, "%s: clock has no start_ns/end_ns", in->path);
	return 0;
}

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
		return mg_fail(CT_MERGE_E_MALFORMED, "%s: a process entry without a numeric pid",
			       path);
	*pid = id->valuedouble;
	*rank = cJSON_IsNumber(r) ? (int)r->valuedouble : -1;
	*world = cJSON_IsNumber(w) ? (int)w->valuedouble : -1;
	if (cJSON_IsNumber(r) && (r->valuedouble < 0 || r->valuedouble > 1e7))
		return mg_fail(CT_MERGE_E_MALFORMED, "%s: pid %.0f has an invalid rank", path,
			       *pid);
	return 0;
}

/*
 * Ranks across inputs: each rank in one input only; one world size. Inputs whose traced
 * windows do not meet in wall-clock time traced different runs.
 */
int mg_check_conflicts(struct input *ins, const int *idx, int n, const char *list_key)
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
				rc = mg_fail(
				    CT_MERGE_E_CONFLICT,
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
					rc = mg_fail(CT_EXIT_FAIL, "out of memory");
					goto out;
				}
				for (int k = cap; k < nc; k++)
					no[k].input = -1;
				owner = no;
				cap = nc;
			}
			if (owner[rank].input >= 0 && owner[rank].input != idx[a]) {
				rc = mg_fail(
				    CT_MERGE_E_CONFLICT,
				    "rank %d is in %s (pid %.0f) and in %s (pid %.0f): each "
				    "rank must come from one tracer",
				    rank, ins[owner[rank].input].path, owner[rank].pid, in->path,
				    pid);
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
			rc =
			    mg_fail(CT_MERGE_E_CONFLICT,
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
