// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <string.h>
#include "devprof/devprof_cli.h"

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "devprof") == 0)
		return devprof_cli_main(argc - 1, argv + 1);
	fprintf(stderr, "commtrace-bpf: tracer not built yet\n");
	return 2;
}
