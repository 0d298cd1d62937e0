/* SPDX-License-Identifier: MIT */
/*
 * commtrace-bpf fuse: our --chrome traces and PyTorch profiler traces of the same ranks
 * in one Chrome Trace, on one time axis (docs/chrome.md, "Fusion").
 */
#ifndef CT_FUSE_H
#define CT_FUSE_H

#include "exit.h"

/* Exit codes (exit.h): one per reason a fusion is refused. */
enum ct_fuse_status {
	CT_FUSE_OK = CT_EXIT_OK,
	CT_FUSE_E_USAGE = CT_EXIT_USAGE,
	CT_FUSE_E_IO = CT_EXIT_IO,
	CT_FUSE_E_NOT_TRACE = CT_EXIT_INPUT, /* not JSON, or not a Chrome trace, or no events */
	CT_FUSE_E_ALIGN,		     /* no clock to put it on ours */
	CT_FUSE_E_MATCH,		     /* the process it belongs to is unknown or ambiguous */
	CT_FUSE_E_WINDOW,		     /* aligned, it does not overlap the traced window */
};

int fuse_cli_main(int argc, char **argv);

#endif
