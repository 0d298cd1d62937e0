/* SPDX-License-Identifier: MIT */
/* Exporters: they read the session's aggregates, never the BPF side. */
#ifndef CT_EXPORT_H
#define CT_EXPORT_H

#include <stdio.h>
#include "session.h"

struct ct_node;

/*
 * The final reports of a session, live or replayed: the summary and the diagnosis on stderr
 * (unless -q), then --table and --json. 0, or -1 when one could not be written (said).
 */
int ct_export_final(struct ct_session *s);
/* The --json document (docs/json.md). Returns 0 or -errno; the file is replaced atomically. */
int ct_export_json(struct ct_session *s, const char *path);
/* The human summary: per process and function, calls, bytes, latency, and drops. */
void ct_export_summary(struct ct_session *s, FILE *out, bool final);
/* Seed 000's tracing table for every process with a call tree (noise level 0, 1, 2). */
void ct_export_table(struct ct_session *s, FILE *out, int noise);
void ct_format_detail(const struct ct_node *n, char *buf, size_t len);
/* The table to a file ("-": stdout), replaced atomically. */
int ct_write_table(struct ct_session *s, const char *path, int noise);

#endif
