/* SPDX-License-Identifier: MIT */
/*
 * libcommtrace-devprof.so: the host runtime of device profile buffers as a shared
 * library with a plain C ABI, for the Python package commtrace.devprof
 * (python/commtrace/devprof.py, loaded with ctypes) and any other host runtime that
 * cannot compile the header-only parts. Everything here calls the one implementation:
 * the session and schedule of commtrace/devprof.h, the planner, the decoder and the
 * fusion of `commtrace-bpf devprof` (docs/devprof.md).
 *
 * Errors: functions that can fail return 0 or a DEVPROF error class (the exit codes of
 * `commtrace-bpf devprof`, docs/devprof.md "Errors and exit codes") and fill *err, which
 * may be NULL. Only the ctdp_ symbols are exported.
 */
#ifndef COMMTRACE_DEVPROF_API_H
#define COMMTRACE_DEVPROF_API_H

#include <stddef.h>
#include <stdint.h>
#include "commtrace/devprof.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CTDP_ABI_VERSION 1 /* bumped on any change to a struct or signature below */

struct ctdp_error {
	int32_t code; /* 0, or the DEVPROF error class */
	char message[512];
};

/* The capacity planner's answer (devprof plan). */
struct ctdp_plan {
	uint32_t aic_cores, aiv_cores;
	uint32_t aic_max_tasks, aiv_max_tasks;
	uint32_t aic_capacity, aiv_capacity;
	uint64_t aic_expected_drops, aiv_expected_drops;
	uint64_t bytes; /* one invocation's buffer without metadata */
};

/* What a validated buffer file holds. */
struct ctdp_summary {
	uint64_t invocations, records, dropped;
};

/* A decode or fuse job on files, as the CLI's options name them. */
struct ctdp_job {
	const char *device;	 /* buffer file; for fuse also a decoded JSON */
	const char *profiler;	 /* fuse: the torch.profiler trace */
	const char *out;	 /* written only on success */
	const char *meta;	 /* display metadata JSON file, or NULL */
	const char *kernel_name; /* fuse: kernel event filter, or NULL (the metadata's) */
	uint32_t display;	 /* 0: stage names, 1: owner/stage[index] */
	uint32_t pid_base;	 /* decode: pid of invocation 0 (0: 1) */
	uint32_t skip;		 /* fuse: matching events before the session's call 0 */
	uint32_t align_in_order; /* fuse: invocation k to event skip + k */
	uint32_t allow_host_align;
	uint32_t reserved;
};

uint32_t ctdp_abi_version(void);
/* sizeof of a struct by name ("session", "schedule", "runtime_config", "header", "error",
 * "plan", "summary", "job"), so a binding can check its layouts; 0 for an unknown name. */
size_t ctdp_sizeof(const char *type);

/* The schedule: the same rules as torch.profiler.schedule (active >= 1). */
int ctdp_schedule_check(const struct ct_devprof_schedule *s, struct ctdp_error *err);
int ctdp_schedule_action(const struct ct_devprof_schedule *s, uint64_t step);

/* A sampling session of one kernel whose first call comes in step first_step. */
void ctdp_session_init(struct ct_devprof_session *s, const struct ct_devprof_schedule *sched,
		       uint32_t max_per_step, uint64_t first_step);
void ctdp_session_step(struct ct_devprof_session *s);
int ctdp_session_configure(struct ct_devprof_session *s, struct ct_devprof_runtime_config *cfg,
			   uint64_t device_buffer);

int ctdp_plan(const uint32_t *aic_tasks, uint32_t naic, const uint32_t *aiv_tasks, uint32_t naiv,
	      uint32_t records_per_task, struct ctdp_plan *p, struct ctdp_error *err);
uint64_t ctdp_buffer_size(uint32_t aic_cores, uint32_t aiv_cores, uint32_t aic_cap,
			  uint32_t aiv_cap, uint32_t meta_size);
/* Metadata JSON (kernel, stage_names, owner_labels) as the decoder will read it. */
int ctdp_meta_check(const char *json, size_t len, struct ctdp_error *err);
int ctdp_buffer_init(void *buf, size_t len, uint64_t clock_hz, uint32_t flags, uint32_t aic_cores,
		     uint32_t aiv_cores, uint32_t aic_cap, uint32_t aiv_cap, const char *meta,
		     uint32_t meta_size, struct ctdp_error *err);
/* Validates one invocation copied back from the device and stamps its step and call. */
int ctdp_buffer_collect(void *buf, size_t len, const struct ct_devprof_runtime_config *cfg,
			struct ctdp_summary *sum, struct ctdp_error *err);
int ctdp_validate(const void *buf, size_t len, struct ctdp_summary *sum, struct ctdp_error *err);

int ctdp_decode_files(const struct ctdp_job *j, struct ctdp_error *err);
int ctdp_fuse_files(const struct ctdp_job *j, struct ctdp_error *err);

#ifdef __cplusplus
}
#endif

#endif /* COMMTRACE_DEVPROF_API_H */
