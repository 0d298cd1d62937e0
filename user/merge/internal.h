/* SPDX-License-Identifier: MIT */
/*
 * merge's insides, shared by its files: input.c (reading and checking the inputs),
 * report.c (--json), timeline.c (--chrome), merge.c (the command line).
 */
#ifndef CT_MERGE_INTERNAL_H
#define CT_MERGE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cJSON.h>

#define REMAP_PID0 0x4000000u /* renumbered pids: above pid_max and devprof's range */

struct input {
	const char *path;
	cJSON *doc;
	bool chrome;
	/* --keep-going: refused with that exit code and message (doc kept if it parsed) */
	int refused;
	char *why;
	int64_t wall;	 /* mono_to_wall_ns */
	bool wall_exact; /* from the string; else from a double (rounded to 256 ns) */
	int64_t shift;	 /* ns added to its monotonic timestamps */
	uint64_t start, end;
};

/* input.c */
/* Says "commtrace-bpf merge: <message>" on stderr; returns code. */
int mg_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The message of the latest mg_fail, copied (free it), or NULL. */
char *mg_last_error(void);
cJSON *mg_u64_item(uint64_t v);
int mg_load(struct input *in);
int mg_check_conflicts(struct input *ins, const int *idx, int n, const char *list_key);

/* report.c */
int mg_write_doc(cJSON *doc, const char *path);
/* ins[idx[0..n)] merged; refused[0..nref) (--keep-going) are named in merge.refused. */
int mg_merge_json(struct input *ins, const int *idx, int n, const struct input *refused, int nref,
		  const char *out);

/* timeline.c */
int mg_merge_chrome(struct input *ins, const int *idx, int n, const char *out);

#endif
