/* SPDX-License-Identifier: MIT */
/*
 * Host side of device profile buffers (include/commtrace/devprof.h, docs/devprof.md):
 * validation and decoding, Chrome Trace export, fusion into a PyTorch profiler trace,
 * the capacity planner and a generator of buffers with known content.
 */
#ifndef CT_DEVPROF_HOST_H
#define CT_DEVPROF_HOST_H

#include <stddef.h>
#include <stdint.h>
#include <cJSON.h>
#include "commtrace/devprof.h"
#include "exit.h"

/* Exit codes, one per error class (docs/devprof.md, "Errors"). */
enum devprof_status {
	DEVPROF_OK = 0,
	DEVPROF_E_USAGE = CT_EXIT_USAGE,
	DEVPROF_E_IO = CT_EXIT_IO,
	DEVPROF_E_NOMEM = CT_EXIT_FAIL,
	DEVPROF_E_MAGIC = CT_EXIT_INPUT,
	DEVPROF_E_VERSION = 11,
	DEVPROF_E_TRUNCATED = 12,
	DEVPROF_E_LAYOUT = 13,
	DEVPROF_E_OVER_CAPACITY = 14,
	DEVPROF_E_FREQ = 15,
	DEVPROF_E_END_BEFORE_START = 16,
	DEVPROF_E_KIND = 17,
	DEVPROF_E_SLOT = 18,
	DEVPROF_E_EMPTY = 19,
	DEVPROF_E_META = 20,
	DEVPROF_E_TRACE = 21,
	DEVPROF_E_HOST_REFUSED = 22,
	DEVPROF_E_ALIGN = 23,
	DEVPROF_E_PLAN = 24,
	DEVPROF_E_DEVJSON = 25,
	DEVPROF_E_DROPS = 26,	  /* drops in a slot that is not full: a corrupt slot */
	DEVPROF_E_SEQ_RANGE = 27, /* an invocation_seq past the profiler's kernel events */
};

struct devprof_err {
	int code;
	char msg[512];
};

int devprof_errf(struct devprof_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define DEVPROF_MAX_INVOCATIONS 4096	       /* invocations in one buffer file */
#define DEVPROF_MAX_FILE	(1ull << 30)   /* bytes of a buffer file */
#define DEVPROF_MAX_TRACE	(512ull << 20) /* bytes of a profiler trace */
#define DEVPROF_TID_BASE	0x10000	       /* standalone tids: base + slot index */
#define DEVPROF_FUSE_TID_BASE	0x40000000     /* fused tids: base + lane * 0x1000 + slot */
#define DEVPROF_FUSE_MAX_LANES	64
#define DEVPROF_DIAG_LIST	64 /* entries listed per diagnostic kind; the rest counted */

/* One validated invocation inside a buffer file. */
struct devprof_inv {
	struct ct_devprof_header h;
	const uint8_t *base; /* its header inside the caller's buffer */
	size_t offset;	     /* of base in the file */
	uint64_t min_cycle, max_cycle;
	uint64_t records, dropped;
	const char *meta; /* embedded metadata JSON, meta_size bytes, or NULL */
};

struct devprof_file {
	struct devprof_inv *inv;
	size_t n;
};

/*
 * Validates every invocation of a buffer file (concatenated invocation buffers) and
 * every record in it. The file must stay mapped while f is used.
 */
int devprof_parse(const void *buf, size_t len, struct devprof_file *f, struct devprof_err *err);
void devprof_file_free(struct devprof_file *f);
void devprof_slot_at(const struct devprof_inv *inv, uint32_t slot_index, struct ct_devprof_slot *s);
void devprof_record_at(const struct devprof_inv *inv, uint32_t slot_index, uint32_t i,
		       struct ct_devprof_record *r);
const char *devprof_kind_name(uint32_t kind);

/* Display metadata: {"kernel": S, "stage_names": {..}|[..], "owner_labels": {..}|[..]}. */
int devprof_meta_check(const cJSON *meta, const char *what, struct devprof_err *err);

enum devprof_display {
	DEVPROF_DISPLAY_STAGE = 0, /* stage names only */
	DEVPROF_DISPLAY_FULL = 1,  /* owner / stage [in-stage index] */
};

struct devprof_export_opts {
	enum devprof_display display;
	const cJSON *meta;	 /* overrides every invocation's embedded metadata; may be NULL */
	const char *meta_source; /* named in diagnostics, e.g. the --meta path */
	int pid_base;		 /* pid of invocation 0; invocation k gets pid_base + k */
	/*
	 * Time base. Without sync, the earliest record of the file is at ts_base_us. With
	 * sync, device cycle sync_cycle is host time sync_us (µs, the host trace's clock),
	 * e.g. from a host timestamp taken next to a device clock read at launch.
	 */
	double ts_base_us;
	int have_sync;
	uint64_t sync_cycle;
	double sync_us;
};

void devprof_export_opts_init(struct devprof_export_opts *o);

/*
 * The combined export: appends the decoded buffer (len bytes, one or more invocations)
 * to trace_events (a cJSON array of Chrome Trace events) and, when metadata is not NULL,
 * describes it under metadata["commtrace_devprof"] (schema_version, invocations, cores,
 * name fallbacks). On error nothing is appended and a DEVPROF_E_* code is returned.
 */
int devprof_append_chrome(cJSON *trace_events, cJSON *metadata, const void *buf, size_t len,
			  const struct devprof_export_opts *opts, struct devprof_err *err);

/* A standalone schema-v1 Chrome Trace document for a buffer file. */
cJSON *devprof_build_trace(const void *buf, size_t len, const struct devprof_export_opts *opts,
			   struct devprof_err *err);

/* Fusion with a PyTorch profiler (Kineto or legacy autograd) trace. */
struct devprof_fuse_opts {
	int allow_host_align;	 /* FR-14: host-only alignment only when asked for */
	const char *kernel_name; /* substring filter on the outer kernel's name, or NULL */
	uint32_t skip;		 /* matching kernel events to skip before the first */
	/*
	 * 0 (default): the invocation with invocation_seq s goes to matching event skip + s,
	 * since s counts the kernel's calls from its session start; an s past the trace's
	 * events is DEVPROF_E_SEQ_RANGE. 1: invocation k (file order) goes to event skip + k,
	 * for a profiler that recorded only the sampled calls.
	 */
	int align_in_order;
};

/*
 * device: a standalone document (devprof_build_trace() or a decoded JSON file);
 * profiler: the profiler trace (an object with traceEvents, or a bare event array).
 * The profiler tree is reused, not copied, since traces run to hundreds of MB: on
 * success it is consumed (the result is it, or an object wrapping it) and only the
 * result is freed; on error it is left untouched and NULL is returned with err.
 */
cJSON *devprof_fuse(const cJSON *device, cJSON *profiler, const struct devprof_fuse_opts *o,
		    struct devprof_err *err);

/*
 * The decode and fuse commands as jobs on files (devprof decode|fuse, and the shared
 * library): device is the buffer (decode) or a buffer or decoded JSON (fuse), meta an
 * optional --meta file; out is written only on success ("-": stdout).
 */
struct devprof_job {
	const char *device, *profiler, *out, *meta;
	enum devprof_display display;
	int pid_base;
	struct devprof_fuse_opts fuse;
};

void devprof_job_init(struct devprof_job *j); /* zeroes, pid_base 1 */
int devprof_decode_files(const struct devprof_job *j, struct devprof_err *err);
int devprof_fuse_files(const struct devprof_job *j, struct devprof_err *err);

/* Capacity planner (FR-05), from the tasks each core runs, AIC and AIV separately. */
struct devprof_plan {
	uint32_t aic_cores, aiv_cores;
	uint32_t aic_max_tasks, aiv_max_tasks;
	uint32_t aic_capacity, aiv_capacity;
	uint64_t aic_expected_drops, aiv_expected_drops; /* when 256 is not enough */
	uint64_t bytes;
};

int devprof_plan(const uint32_t *aic_tasks, uint32_t naic, const uint32_t *aiv_tasks, uint32_t naiv,
		 uint32_t records_per_task, struct devprof_plan *p, struct devprof_err *err);

/* Generator of buffers with known content (tests, fuzz seeds, demos). */
enum devprof_corrupt {
	DEVPROF_CORRUPT_NONE = 0,
	DEVPROF_CORRUPT_MAGIC,
	DEVPROF_CORRUPT_VERSION,
	DEVPROF_CORRUPT_TRUNCATE,
	DEVPROF_CORRUPT_COUNT,
	DEVPROF_CORRUPT_END_BEFORE_START,
	DEVPROF_CORRUPT_FREQ_ZERO,
	DEVPROF_CORRUPT_FREQ_ABSURD,
	DEVPROF_CORRUPT_KIND,
	DEVPROF_CORRUPT_DROPPED, /* drops counted in a slot that is not full */
};

extern const char *const devprof_scenarios[];	/* NULL-terminated */
extern const char *const devprof_corruptions[]; /* indexed by enum devprof_corrupt */

int devprof_gen(const char *scenario, enum devprof_corrupt corrupt, uint8_t **out, size_t *len,
		struct devprof_err *err);

/* Files: bounded reads, and writes that appear only complete (temp file + rename). */
int devprof_read_file(const char *path, uint64_t max, uint8_t **out, size_t *len,
		      struct devprof_err *err);
int devprof_write_file(const char *path, const void *data, size_t len, struct devprof_err *err);
cJSON *devprof_parse_json(const uint8_t *data, size_t len, int code, const char *what,
			  struct devprof_err *err);

#endif
