/* SPDX-License-Identifier: MIT */
/*
 * commtrace-bpf merge: the --json reports and --chrome traces of several tracers of one
 * job (one per node) as one report and one timeline, processes keyed by rank, clocks
 * aligned through each input's recorded wall-clock offset (docs/merge.md).
 */
#ifndef CT_MERGE_H
#define CT_MERGE_H

int merge_cli_main(int argc, char **argv);

#endif
