/* SPDX-License-Identifier: MIT */
/*
 * --chrome FILE: the session as a Chrome Trace / Perfetto JSON document (docs/chrome.md),
 * streamed: each call is written when it returns, module/op slices when tracing ends
 * (the tree has no entry/exit events of its own), metadata last. Memory is bounded by
 * fixed tables; the file by --chrome-max-mb and --chrome-window.
 *
 * The pure parts (the nesting check, the two matchers behind the flow arrows) are in
 * flows.h, for the unit tests and merge.
 */
#ifndef CT_EXPORT_CHROME_H
#define CT_EXPORT_CHROME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "util/sbuf.h"

struct ct_session;
struct ct_call;
struct ct_proc;
struct ct_call_event;
struct ct_ret_event;
struct ct_proc_event;
struct ct_func;
struct ct_libdesc;

#include "export/flows.h"

/* ---- the exporter ----------------------------------------------------------------------- */

struct ct_chrome_opts {
	const char *path;
	uint64_t max_bytes;	   /* 0: no cap */
	uint64_t window_ns;	   /* 0: no window; else calls starting later are not written */
	const char *device_buffer; /* devprof buffer file for the combined export, or NULL */
	/* --device-sync: device cycle device_sync_cycle was at CLOCK_MONOTONIC device_sync_ns */
	bool device_sync;
	uint64_t device_sync_cycle, device_sync_ns;
};

/* Opens the temporary output; 0 or -errno. */
int ct_chrome_open(struct ct_session *s, const struct ct_chrome_opts *o);
/* One-line hooks from calls.c: a call entered, a call returned. */
void ct_chrome_call(struct ct_session *s, const struct ct_call *k);
void ct_chrome_ret(struct ct_session *s, struct ct_proc *p, const struct ct_ret_event *ev);
/*
 * Writes what is still open (calls in flight, the call tree's module/op slices, the
 * device buffer) and the metadata, and renames the file into place. 0 or -errno;
 * CT_CHROME_DEVICE_FAILED when the file is in place but the device buffer could not be
 * added (said on stderr and in metadata.device_buffer_error): the run failed.
 */
#define CT_CHROME_DEVICE_FAILED 1
int ct_chrome_close(struct ct_session *s);

#endif
