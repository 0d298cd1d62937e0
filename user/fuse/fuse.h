/* SPDX-License-Identifier: MIT */
/*
 * commtrace-bpf fuse: our --chrome traces and PyTorch profiler traces of the same ranks
 * in one Chrome Trace, on one time axis (docs/chrome.md, "Fusion").
 */
#ifndef CT_FUSE_H
#define CT_FUSE_H

/* Exit codes: one per reason a fusion is refused. */
enum ct_fuse_status {
	CT_FUSE_OK = 0,
	CT_FUSE_E_USAGE = 2,
	CT_FUSE_E_IO = 3,
	CT_FUSE_E_NOT_TRACE = 10, /* not JSON, or not a Chrome trace, or no events */
	CT_FUSE_E_ALIGN = 11,	  /* no clock to put it on ours */
	CT_FUSE_E_MATCH = 12,	  /* the process it belongs to is unknown or ambiguous */
	CT_FUSE_E_WINDOW = 13,	  /* aligned, it does not overlap the traced window */
};

int fuse_cli_main(int argc, char **argv);

#endif
