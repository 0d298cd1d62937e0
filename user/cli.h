/* SPDX-License-Identifier: MIT */
#ifndef CT_CLI_H
#define CT_CLI_H

#include <stdio.h>
#include "exit.h"
#include "session.h"

/* 0: go on; CT_EXIT_DONE: exit 0; otherwise the exit code. */
int ct_parse_args(int argc, char **argv, struct ct_opts *o);
void ct_usage(FILE *out);
/* --noise-level N (0, 1 or 2), for the tracer and replay; -EINVAL said on stderr. */
int ct_parse_noise_level(const char *s, int *out);

#endif
