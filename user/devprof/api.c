// SPDX-License-Identifier: MIT
/*
 * The C ABI of libcommtrace-devprof.so (include/commtrace/devprof_api.h): thin calls into
 * the header's session and schedule, the planner, the decoder and the decode/fuse jobs,
 * with errors as a code and a message. Built with -fvisibility=hidden: CTDP_EXPORT marks
 * the only symbols the library exports.
 */
#include <stdio.h>
#include <string.h>
#include "commtrace/devprof_api.h"
#include "devprof/devprof.h"

#define CTDP_EXPORT __attribute__((visibility("default")))

static int put_err(struct ctdp_error *out, const struct devprof_err *e, int rc)
{
	if (out) {
		out->code = rc;
		snprintf(out->message, sizeof(out->message), "%s", rc ? e->msg : "");
	}
	return rc;
}

CTDP_EXPORT uint32_t ctdp_abi_version(void)
{
	return CTDP_ABI_VERSION;
}

CTDP_EXPORT size_t ctdp_sizeof(const char *type)
{
	static const struct {
		const char *name;
		size_t size;
	} t[] = {
	    {"session", sizeof(struct ct_devprof_session)},
	    {"schedule", sizeof(struct ct_devprof_schedule)},
	    {"runtime_config", sizeof(struct ct_devprof_runtime_config)},
	    {"header", sizeof(struct ct_devprof_header)},
	    {"error", sizeof(struct ctdp_error)},
	    {"plan", sizeof(struct ctdp_plan)},
	    {"summary", sizeof(struct ctdp_summary)},
	    {"job", sizeof(struct ctdp_job)},
	};

	for (size_t i = 0; type && i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(t[i].name, type))
			return t[i].size;
	return 0;
}

CTDP_EXPORT int ctdp_schedule_check(const struct ct_devprof_schedule *s, struct ctdp_error *err)
{
	struct devprof_err e = {0};
	int rc = 0;

	if (!s->active)
		rc =
		    devprof_errf(&e, DEVPROF_E_USAGE,
				 "a schedule needs active >= 1 (steps sampled and kept per cycle), "
				 "as torch.profiler.schedule does");
	return put_err(err, &e, rc);
}

CTDP_EXPORT int ctdp_schedule_action(const struct ct_devprof_schedule *s, uint64_t step)
{
	return (int)ct_devprof_schedule_action(s, step);
}

CTDP_EXPORT void ctdp_session_init(struct ct_devprof_session *s,
				   const struct ct_devprof_schedule *sched, uint32_t max_per_step,
				   uint64_t first_step)
{
	ct_devprof_session_init(s, sched, max_per_step);
	s->step = first_step;
}

CTDP_EXPORT void ctdp_session_step(struct ct_devprof_session *s)
{
	ct_devprof_session_step(s);
}

CTDP_EXPORT int ctdp_session_configure(struct ct_devprof_session *s,
				       struct ct_devprof_runtime_config *cfg,
				       uint64_t device_buffer)
{
	return (int)ct_devprof_session_configure(s, cfg, device_buffer);
}

CTDP_EXPORT int ctdp_plan(const uint32_t *aic_tasks, uint32_t naic, const uint32_t *aiv_tasks,
			  uint32_t naiv, uint32_t records_per_task, struct ctdp_plan *p,
			  struct ctdp_error *err)
{
	struct devprof_err e = {0};
	struct devprof_plan dp;
	int rc = devprof_plan(aic_tasks, naic, aiv_tasks, naiv, records_per_task, &dp, &e);

	memset(p, 0, sizeof(*p));
	if (!rc) {
		p->aic_cores = dp.aic_cores;
		p->aiv_cores = dp.aiv_cores;
		p->aic_max_tasks = dp.aic_max_tasks;
		p->aiv_max_tasks = dp.aiv_max_tasks;
		p->aic_capacity = dp.aic_capacity;
		p->aiv_capacity = dp.aiv_capacity;
		p->aic_expected_drops = dp.aic_expected_drops;
		p->aiv_expected_drops = dp.aiv_expected_drops;
		p->bytes = dp.bytes;
	}
	return put_err(err, &e, rc);
}

CTDP_EXPORT uint64_t ctdp_buffer_size(uint32_t aic_cores, uint32_t aiv_cores, uint32_t aic_cap,
				      uint32_t aiv_cap, uint32_t meta_size)
{
	return ct_devprof_buffer_size(aic_cores, aiv_cores, aic_cap, aiv_cap, meta_size);
}

CTDP_EXPORT int ctdp_meta_check(const char *json, size_t len, struct ctdp_error *err)
{
	struct devprof_err e = {0};
	cJSON *meta;
	int rc;

	if (len > CT_DEVPROF_MAX_META)
		return put_err(
		    err, &e,
		    devprof_errf(&e, DEVPROF_E_META,
				 "metadata is %zu bytes, more than the %u a buffer holds", len,
				 CT_DEVPROF_MAX_META));
	meta = devprof_parse_json((const uint8_t *)json, len, DEVPROF_E_META, "metadata", &e);
	rc = meta ? devprof_meta_check(meta, "metadata", &e) : e.code;
	cJSON_Delete(meta);
	return put_err(err, &e, rc);
}

CTDP_EXPORT int ctdp_buffer_init(void *buf, size_t len, uint64_t clock_hz, uint32_t flags,
				 uint32_t aic_cores, uint32_t aiv_cores, uint32_t aic_cap,
				 uint32_t aiv_cap, const char *meta, uint32_t meta_size,
				 struct ctdp_error *err)
{
	struct devprof_err e = {0};
	uint64_t need = ct_devprof_buffer_size(aic_cores, aiv_cores, aic_cap, aiv_cap, meta_size);
	int rc = 0;

	if (need > len)
		rc = devprof_errf(&e, DEVPROF_E_TRUNCATED,
				  "the buffer is %zu bytes; %u AIC + %u AIV cores of %u/%u records "
				  "and %u bytes of metadata need %llu",
				  len, aic_cores, aiv_cores, aic_cap, aiv_cap, meta_size,
				  (unsigned long long)need);
	else if (clock_hz < CT_DEVPROF_MIN_HZ || clock_hz > CT_DEVPROF_MAX_HZ)
		rc = devprof_errf(
		    &e, DEVPROF_E_FREQ, "clock frequency %llu Hz is outside %llu..%llu",
		    (unsigned long long)clock_hz, CT_DEVPROF_MIN_HZ, CT_DEVPROF_MAX_HZ);
	else if (ct_devprof_buffer_init(buf, len, clock_hz, flags, aic_cores, aiv_cores, aic_cap,
					aiv_cap, meta, meta_size))
		rc = devprof_errf(&e, DEVPROF_E_LAYOUT,
				  "%u AIC + %u AIV cores of %u/%u records: capacities must be "
				  "multiples of %d up to %d, at most %d cores a type",
				  aic_cores, aiv_cores, aic_cap, aiv_cap, CT_DEVPROF_ALIGN_RECS,
				  CT_DEVPROF_MAX_RECS, CT_DEVPROF_MAX_CORES);
	return put_err(err, &e, rc);
}

static int summarize(const void *buf, size_t len, struct ctdp_summary *sum, struct devprof_err *e)
{
	struct devprof_file f;
	int rc = devprof_parse(buf, len, &f, e);

	memset(sum, 0, sizeof(*sum));
	if (rc)
		return rc;
	sum->invocations = f.n;
	for (size_t k = 0; k < f.n; k++) {
		sum->records += f.inv[k].records;
		sum->dropped += f.inv[k].dropped;
	}
	devprof_file_free(&f);
	return 0;
}

CTDP_EXPORT int ctdp_buffer_collect(void *buf, size_t len,
				    const struct ct_devprof_runtime_config *cfg,
				    struct ctdp_summary *sum, struct ctdp_error *err)
{
	struct devprof_err e = {0};
	int rc = summarize(buf, len, sum, &e);

	if (!rc && sum->invocations != 1)
		rc = devprof_errf(&e, DEVPROF_E_LAYOUT,
				  "%zu bytes copied back hold %llu invocations, not one", len,
				  (unsigned long long)sum->invocations);
	if (!rc)
		ct_devprof_buffer_stamp(buf, cfg);
	return put_err(err, &e, rc);
}

CTDP_EXPORT int ctdp_validate(const void *buf, size_t len, struct ctdp_summary *sum,
			      struct ctdp_error *err)
{
	struct devprof_err e = {0};

	return put_err(err, &e, summarize(buf, len, sum, &e));
}

static void job_of(const struct ctdp_job *in, struct devprof_job *j)
{
	devprof_job_init(j);
	j->device = in->device;
	j->profiler = in->profiler;
	j->out = in->out;
	j->meta = in->meta;
	j->display = in->display ? DEVPROF_DISPLAY_FULL : DEVPROF_DISPLAY_STAGE;
	if (in->pid_base)
		j->pid_base = (int)in->pid_base;
	j->fuse.kernel_name = in->kernel_name;
	j->fuse.skip = in->skip;
	j->fuse.align_in_order = !!in->align_in_order;
	j->fuse.allow_host_align = !!in->allow_host_align;
}

static int job_usage(const struct ctdp_job *in, int fuse, struct devprof_err *e)
{
	if (!in->device || !in->out || (fuse && !in->profiler))
		return devprof_errf(e, DEVPROF_E_USAGE, "a %s job needs %s",
				    fuse ? "fuse" : "decode",
				    fuse ? "a device buffer, a profiler trace and an output"
					 : "a buffer and an output");
	if (in->pid_base > (1u << 30))
		return devprof_errf(e, DEVPROF_E_USAGE, "pid_base %u is over 2^30", in->pid_base);
	return 0;
}

static int run_job(const struct ctdp_job *in, int fuse, struct ctdp_error *err)
{
	struct devprof_err e = {0};
	struct devprof_job j;
	int rc = job_usage(in, fuse, &e);

	job_of(in, &j);
	if (!rc)
		rc = fuse ? devprof_fuse_files(&j, &e) : devprof_decode_files(&j, &e);
	return put_err(err, &e, rc);
}

CTDP_EXPORT int ctdp_decode_files(const struct ctdp_job *in, struct ctdp_error *err)
{
	return run_job(in, 0, err);
}

CTDP_EXPORT int ctdp_fuse_files(const struct ctdp_job *in, struct ctdp_error *err)
{
	return run_job(in, 1, err);
}
