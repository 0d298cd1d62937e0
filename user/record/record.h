/* SPDX-License-Identifier: MIT */
/* --record FILE (docs/record.md, include/commtrace/record.h); replay.h reads it back. */
#ifndef CT_RECORD_H
#define CT_RECORD_H

#include <stdint.h>
#include <stdio.h>
#include "commtrace/record.h"
#include "session.h"

struct ct_record;

/* This build's file header (its catalog and record layout). */
struct ct_rec_header ct_record_header(void);
/* Opens FILE and writes the header; 0 or -errno. The session then records every record. */
int ct_record_open(struct ct_session *s, const char *path);
/* One ring-buffer record, as the kernel wrote it (events.c). */
void ct_record_event(struct ct_record *r, const void *data, size_t len);
/* What a call record's Python stack was resolved to in process pid (calls.c). */
void ct_record_pycall(struct ct_record *r, pid_t pid, const struct ct_tree_call *c);
/* The processes, clock and drop counters, then closes; 0 or -errno (a write failed). */
int ct_record_close(struct ct_session *s);

/* FNV-1a over the catalog's library and function names: probe ids mean the same. */
uint32_t ct_catalog_hash(void);

#endif
