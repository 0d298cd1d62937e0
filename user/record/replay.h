/* SPDX-License-Identifier: MIT */
/* `commtrace-bpf replay FILE`: a --record file through calls.c and the exporters. */
#ifndef CT_REPLAY_H
#define CT_REPLAY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct ct_session;

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
 * record through calls.c. 0, or -EINVAL (not a recording, or of another
 * catalog or ABI: err says which) or -errno.
 */
int ct_replay_file(struct ct_session *s, FILE *f, struct ct_replay_stats *st, char *err,
		   size_t errlen);
/* `commtrace-bpf replay FILE [--json F] [--chrome F] [--table F] [--noise-level N] [-q]` */
int ct_replay_main(int argc, char **argv);

#endif
