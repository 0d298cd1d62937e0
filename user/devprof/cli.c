// SPDX-License-Identifier: MIT
#include <stdio.h>
#include "devprof/devprof_cli.h"

int devprof_cli_main(int argc, char **argv)
{
	fprintf(stderr, "devprof: not built yet\n");
	return 2;
}
