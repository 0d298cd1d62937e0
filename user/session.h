/* SPDX-License-Identifier: MIT */
/*
 * One tracing session: its options, its tables (processes: targets.h) and its sinks.
 * Every table has a fixed capacity and a counter for what did not fit.
 */
#ifndef CT_SESSION_H
#define CT_SESSION_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "attach.h"
#include "cost.h"
#include "commtrace/abi.h"

#define CT_MAX_TARGETS 256 /* traced processes at once (children included) */
#define CT_MAX_FILES   64  /* resolved library files cached per session */

struct ct_opts {
	pid_t pids[CT_MAX_TARGETS];
	int n_pids;
	char **cmd; /* launch mode: the command and its arguments */
	double duration;
	double interval;
	const char *json_path;
	const char *lib_path;	  /* --lib: resolve one file (dry run) */
	const char *table_path;	  /* --table FILE or "-" */
	const char *profile_path; /* --profile FILE: more framework rules */
	int noise_level;
	bool dry_run;
	bool check;
	bool wait_libs;
	bool no_stacks;
	bool cost;	 /* --cost: what tracing cost the targets (cost.h) */
	bool ops;	 /* --ops: entries and exits of profiled Python functions */
	bool ops_frames; /* --ops-frames: by the interpreter's frames, not torch's dispatch */
	bool sharding;	 /* --sharding: parameters and placements of the root module */
	bool quiet;
	int verbose;
	unsigned int ringbuf_mb;
	const char *record_path; /* --record FILE (user/record/), or NULL */
	/* --chrome (user/export/chrome.c) */
	const char *chrome_path;
	unsigned long chrome_max_mb; /* 0: no cap */
	double chrome_window;	     /* seconds after attach; 0: the whole session */
	const char *device_buffer;
	bool device_sync; /* --device-sync CYCLE@NS */
	uint64_t device_sync_cycle, device_sync_ns;
	/* diagnosis (user/diag/diag.c) */
	double hang_after;	  /* seconds blocked in a collective before a hang alert; 0: none */
	double late_after;	  /* arrival skew (seconds) from which the last rank is named */
	const char *metrics_addr; /* --metrics [ADDR:]PORT (user/metrics/), or NULL */
};

struct ct_pystate;
struct ct_proc;
struct ct_file;
struct ct_torch_layout;
struct ct_pyops;
struct ct_chrome;
struct ct_metrics;
struct ct_record;
struct ct_params;

struct ct_diag;
struct ct_session {
	struct ct_opts *opts;
	struct ct_pystate *py;
	struct commtrace *skel;
	bool uprobe_multi;   /* probes attach as uprobe_multi links (ct_bpf_open_load) */
	bool uprobe_session; /* --ops's interpreter probe attaches as a uprobe session */
	struct ring_buffer *rb;
	struct ct_proc *procs[CT_MAX_TARGETS];
	int n_procs;
	struct ct_file *files[CT_MAX_FILES];
	int n_files;
	/* By pid: the library files (their maps' device and inode) that enough of the
	 * processes map to be probed once for every process (ct_procs_find_shared) */
	struct {
		unsigned int major, minor;
		uint64_t ino;
	} shared[CT_MAX_FILES];
	int n_shared;
	struct ct_links ldso_links; /* file-wide _dl_debug_state probes */
	struct {
		dev_t dev;
		ino_t ino;
	} ldso_files[8];
	int n_ldso;
	pid_t child; /* launch mode */
	bool child_reaped;
	int child_status;
	uint64_t events, lost_procs, dropped_user;
	/* records read since the last CT_EVENTS_YIELD */
	uint32_t batch_n;
	uint64_t group_size_unknown; /* calls whose size-scaled bytes were not counted */
	/* Call stacks: frames put back from their thread's last stack (laststack.h), and
	 * stacks lost because that one was not known here (their calls go on without) */
	uint64_t frames_shared, stacks_lost;
	struct ct_call_event *whole; /* where a call record is made whole, or NULL */
	uint64_t drops[CT_DROP_MAX];
	struct ct_cost cost;	  /* --cost */
	uint64_t mono_to_wall_ns; /* add to CLOCK_MONOTONIC ns for wall-clock ns */
	uint64_t start_ns, end_ns;
	bool stop;
	struct ct_chrome *chrome; /* --chrome: the streamed export, or NULL */
	/* --record: every record is written there, or NULL */
	struct ct_record *rec;
	/* replay: the Python side of the call record being replayed, or NULL */
	const struct ct_tree_call *replay_py;
	struct ct_diag *diag;	    /* cross-rank diagnosis (user/diag/diag.h), or NULL */
	struct ct_metrics *metrics; /* --metrics: the Prometheus endpoint, or NULL */
};

#endif
