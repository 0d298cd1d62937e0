/* SPDX-License-Identifier: MIT */
/* Diagnostics on stderr: -v (info) and -vv (debug). Errors and warnings always print. */
#ifndef CT_UTIL_LOG_H
#define CT_UTIL_LOG_H

#include <stdio.h>

extern int ct_verbose; /* the number of -v given */

#define ct_info(...)                                                                               \
	do {                                                                                       \
		if (ct_verbose >= 1)                                                               \
			fprintf(stderr, __VA_ARGS__);                                              \
	} while (0)
#define ct_debug(...)                                                                              \
	do {                                                                                       \
		if (ct_verbose >= 2)                                                               \
			fprintf(stderr, __VA_ARGS__);                                              \
	} while (0)

#endif
