/* SPDX-License-Identifier: MIT */
/*
 * commtrace-bpf merge: the --json reports and --chrome traces of several tracers of one
 * job (one per node) as one report and one timeline, processes keyed by rank, clocks
 * aligned through each input's recorded wall-clock offset (docs/merge.md).
 */
#ifndef CT_MERGE_H
#define CT_MERGE_H

#include "exit.h"

/* Exit codes (exit.h, docs/merge.md): one per reason an input is refused. */
enum ct_merge_status {
	CT_MERGE_E_MALFORMED = CT_EXIT_INPUT, /* not a report or trace of ours, a bad field */
	CT_MERGE_E_CLOCK,		      /* no clock to align it by */
	CT_MERGE_E_CONFLICT, /* inputs that cannot be one job: a rank twice, disjoint windows */
};

int merge_cli_main(int argc, char **argv);

#endif
