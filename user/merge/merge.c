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
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include "merge/internal.h"
#include "merge/merge.h"
#include "util/output.h"
#include "ct_version.h"

#define MAX_INPUTS 4096 /* 4096 nodes: a 32k-rank job at 8 ranks a node */

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
	    "  -k, --keep-going  an input that cannot be read, parsed or aligned is refused by\n"
	    "                 name and the rest merged (merge.refused says which ranks and\n"
	    "                 communicators it leaves out); the exit status is still its\n"
	    "                 error, after the outputs are written\n"
	    "  -h, --help     this help\n"
	    "\n"
	    "Exit status: 0 merged; 2 usage; 6 a file cannot be read or written; 10 an input\n"
	    "is not a commtrace report or trace; 11 an input has no clock to align it by; 12\n"
	    "inputs conflict (the same rank twice, different jobs).\n"
	    "\n"
	    "Examples:\n"
	    "  commtrace-bpf merge --json job.json --chrome job.trace.json \\\n"
	    "      node0.json node1.json node0.trace.json node1.trace.json\n"
	    "  commtrace-bpf merge -k --json job.json reports/node*.json\n",
	    out);
}

int merge_cli_main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"json", required_argument, NULL, 'j'},
	    {"chrome", required_argument, NULL, 'c'},
	    {"keep-going", no_argument, NULL, 'k'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	const char *json_out = NULL, *chrome_out = NULL;
	struct input *ins = NULL, *refused = NULL;
	int n = 0, nj = 0, nc = 0, nref = 0, rc = 0, first_refusal = 0, c;
	int *jidx = NULL, *cidx = NULL;
	bool keep_going = false;

	optind = 1;
	while ((c = getopt_long(argc, argv, "hk", longopts, NULL)) != -1) {
		switch (c) {
		case 'k':
			keep_going = true;
			break;
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
		return mg_fail(CT_EXIT_USAGE,
			       "nothing to write: give --json OUT and/or --chrome OUT");
	if (n < 1)
		return mg_fail(CT_EXIT_USAGE,
			       "no inputs: give the --json reports and/or --chrome traces of the "
			       "tracers to merge");
	if (n > MAX_INPUTS)
		return mg_fail(CT_EXIT_USAGE, "more than %d inputs", MAX_INPUTS);
	ins = calloc((size_t)n, sizeof(*ins));
	refused = calloc((size_t)n, sizeof(*refused));
	jidx = calloc((size_t)n, sizeof(int));
	cidx = calloc((size_t)n, sizeof(int));
	if (!ins || !refused || !jidx || !cidx) {
		rc = mg_fail(CT_EXIT_FAIL, "out of memory");
		goto out;
	}
	for (int i = 0; i < n; i++) {
		ins[i].path = argv[optind + i];
		for (int k = 0; k < i; k++)
			if (!strcmp(ins[k].path, ins[i].path)) {
				rc = mg_fail(CT_MERGE_E_CONFLICT, "%s is given twice", ins[i].path);
				goto out;
			}
		rc = mg_load(&ins[i]);
		if (rc && keep_going && rc != CT_EXIT_FAIL) {
			ins[i].refused = rc;
			ins[i].why = mg_last_error();
			refused[nref++] = ins[i];
			if (!first_refusal)
				first_refusal = rc;
			rc = 0;
			continue;
		}
		if (rc)
			goto out;
		if (ins[i].chrome)
			cidx[nc++] = i;
		else
			jidx[nj++] = i;
	}
	if (nj && !json_out) {
		rc = mg_fail(CT_EXIT_USAGE,
			     "%s is a --json report: give --json OUT for the merged report",
			     ins[jidx[0]].path);
		goto out;
	}
	if (nc && !chrome_out) {
		rc = mg_fail(CT_EXIT_USAGE,
			     "%s is a --chrome trace: give --chrome OUT for the merged timeline",
			     ins[cidx[0]].path);
		goto out;
	}
	if (nref && !nj && !nc) {
		rc = mg_fail(first_refusal, "every input was refused: nothing to merge");
		goto out;
	}
	if (json_out && !nj) {
		rc = mg_fail(CT_EXIT_USAGE, "--json %s: none of the inputs is a --json report",
			     json_out);
		goto out;
	}
	if (chrome_out && !nc) {
		rc = mg_fail(CT_EXIT_USAGE, "--chrome %s: none of the inputs is a --chrome trace",
			     chrome_out);
		goto out;
	}
	if (nj)
		rc = mg_merge_json(ins, jidx, nj, refused, nref, json_out);
	if (!rc && nc)
		rc = mg_merge_chrome(ins, cidx, nc, chrome_out);
	if (!rc)
		fprintf(stderr, "merge: %d report%s, %d trace%s%s%s%s%s\n", nj, nj == 1 ? "" : "s",
			nc, nc == 1 ? "" : "s", json_out ? " -> " : "", json_out ? json_out : "",
			chrome_out ? " -> " : "", chrome_out ? chrome_out : "");
	if (!rc && nref) {
		fprintf(stderr, "merge: %d input%s refused and left out (--keep-going)\n", nref,
			nref == 1 ? "" : "s");
		rc = first_refusal;
	}
out:
	for (int i = 0; i < n && ins; i++) {
		cJSON_Delete(ins[i].doc);
		free(ins[i].why);
	}
	free(refused);
	free(ins);
	free(jidx);
	free(cidx);
	return rc;
}
