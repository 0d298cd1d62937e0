// SPDX-License-Identifier: MIT
/*
 * commtrace-bpf: the subcommands by name, as bpftool's struct cmd table does; anything
 * else is the tracer's own command line (trace.c).
 */
#include <string.h>
#include "devprof/devprof_cli.h"
#include "fuse/fuse.h"
#include "merge/merge.h"
#include "record/replay.h"
#include "trace.h"

struct cmd {
	const char *name;
	int (*run)(int argc, char **argv); /* argv[0] is the subcommand's name */
};

static const struct cmd cmds[] = {
    {"devprof", devprof_cli_main}, /* device profile buffers (docs/devprof.md) */
    {"fuse", fuse_cli_main},	   /* with PyTorch profiler traces (docs/chrome.md) */
    {"merge", merge_cli_main},	   /* several tracers of one job (docs/merge.md) */
    {"replay", ct_replay_main},	   /* a --record file (docs/record.md) */
    {0},
};

int main(int argc, char **argv)
{
	for (const struct cmd *c = cmds; argc > 1 && c->name; c++)
		if (!strcmp(argv[1], c->name))
			return c->run(argc - 1, argv + 1);
	return ct_trace_main(argc, argv);
}
