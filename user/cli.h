/* SPDX-License-Identifier: MIT */
#ifndef CT_CLI_H
#define CT_CLI_H

#include <stdio.h>
#include "session.h"

enum ct_exit {
	CT_EXIT_OK = 0,
	CT_EXIT_FAIL = 1,
	CT_EXIT_USAGE = 2,
	CT_EXIT_NOPRIV = 3, /* BPF unavailable: missing capability, no BTF */
	CT_EXIT_NOPROC = 4, /* no such process */
	CT_EXIT_NOLIB = 5,  /* a process maps none of the known libraries */
	CT_EXIT_DONE = 100, /* from ct_parse_args: nothing more to do, exit 0 (--help) */
};

/* 0: go on; CT_EXIT_DONE: exit 0; otherwise the exit code. */
int ct_parse_args(int argc, char **argv, struct ct_opts *o);
void ct_usage(FILE *out);

#endif
