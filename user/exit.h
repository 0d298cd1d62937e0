/* SPDX-License-Identifier: MIT */
/*
 * The exit status of commtrace-bpf and of every subcommand (--help, README "Exit status",
 * commtrace-bpf(8)): 0-9 mean the same everywhere; from CT_EXIT_INPUT on, each subcommand
 * numbers the classes of input it refuses (fuse.h, merge.h, devprof.h).
 */
#ifndef CT_EXIT_H
#define CT_EXIT_H

enum ct_exit {
	CT_EXIT_OK = 0,
	CT_EXIT_FAIL = 1,   /* failed: the ring buffer, a report not written, out of memory */
	CT_EXIT_USAGE = 2,  /* bad usage: an unknown option, a malformed value */
	CT_EXIT_NOPRIV = 3, /* BPF unavailable: missing capability, no BTF */
	CT_EXIT_NOPROC = 4, /* no such process */
	CT_EXIT_NOLIB = 5,  /* a process maps none of the known libraries */
	CT_EXIT_IO = 6,	    /* a file could not be read or written (subcommands) */
	CT_EXIT_INPUT = 10, /* the first of a subcommand's classes of refused input */
	CT_EXIT_DONE = 100, /* internal, from a parser: nothing more to do, exit 0 (--help) */
};

#endif
