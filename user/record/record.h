/* SPDX-License-Identifier: MIT */
/* --record FILE and `commtrace-bpf replay FILE` (docs/record.md, include/commtrace/record.h). */
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
/* One ring-buffer record (from ct_events_handle). */
void ct_record_event(struct ct_record *r, const void *data, size_t len);
/* What a call record's Python stack was resolved to in process pid (ct_py_on_call). */
void ct_record_pycall(struct ct_record *r, pid_t pid, const struct ct_tree_call *c);
/* The processes, clock and drop counters, then closes; 0 or -errno (a write failed). */
int ct_record_close(struct ct_session *s);

struct ct_replay_stats {
	uint64_t records;	  /* ring-buffer records fed to the event path */
	uint64_t bytes;		  /* their bytes */
	uint64_t stacks_replayed; /* Python stacks replayed as recorded (CT_REC_PYCALL) */
	uint64_t stacks_skipped;  /* Python stacks without one (older recordings): left out */
	uint64_t bad;		  /* frames of an unknown type, skipped */
	bool truncated;		  /* the file ended inside a frame */
};

/*
 * Feeds a recording into a fresh session (s->opts set; no BPF): processes, then every
 * record through ct_events_handle. 0, or -EINVAL (not a recording, or of another
 * catalog or ABI: err says which) or -errno.
 */
int ct_replay_file(struct ct_session *s, FILE *f, struct ct_replay_stats *st, char *err,
		   size_t errlen);
/* `commtrace-bpf replay FILE [--json F] [--chrome F] [--table F] [--noise-level N] [-q]` */
int ct_replay_main(int argc, char **argv);
/* FNV-1a over the catalog's library and function names: probe ids mean the same. */
uint32_t ct_catalog_hash(void);

#endif
