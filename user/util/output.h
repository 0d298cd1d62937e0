/* SPDX-License-Identifier: MIT */
/* Output files: written to a temporary beside the target, renamed into place. */
#ifndef CT_UTIL_OUTPUT_H
#define CT_UTIL_OUTPUT_H

#include <stddef.h>
#include <stdio.h>

/*
 * Open a file for writing without following a planted symlink (O_EXCL|O_NOFOLLOW, 0644):
 * a temporary beside path (its name in tmp), or path itself for a device or a FIFO.
 */
FILE *ct_open_output(const char *path, char *tmp, size_t tmplen);
/* Flush, close and rename into place; on an error the temporary is removed. 0 or -errno. */
int ct_commit_output(FILE *f, const char *tmp, const char *path);

#endif
