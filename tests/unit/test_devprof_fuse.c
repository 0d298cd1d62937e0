// SPDX-License-Identifier: MIT
/*
 * Fusion with PyTorch profiler traces (FR-13, FR-14) and the combined-export append.
 * Inputs: tests/golden/devprof/kineto_gpu.json (a constructed Kineto trace with device
 * kernels: no GPU here), torch113_cpu.json (recorded here by torch 1.13, CPU only) and
 * Kineto traces built here with enough kernels for alignment by invocation_seq.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "devprof/devprof.h"

static cJSON *load_json(const char *path)
{
	struct devprof_err err = {0};
	uint8_t *d = NULL;
	size_t n = 0;
	cJSON *j;

	if (!ASSERT_OK(devprof_read_file(path, 64 << 20, &d, &n, &err), err.msg))
		return NULL;
	j = devprof_parse_json(d, n, DEVPROF_E_TRACE, path, &err);
	free(d);
	ASSERT_NOT_NULL(j, path);
	return j;
}

static cJSON *device_doc(const char *scenario)
{
	struct devprof_err err = {0};
	uint8_t *buf = NULL;
	size_t len = 0;
	cJSON *doc = NULL;

	if (ASSERT_OK(devprof_gen(scenario, DEVPROF_CORRUPT_NONE, &buf, &len, &err), err.msg))
		doc = devprof_build_trace(buf, len, NULL, &err);
	free(buf);
	ASSERT_NOT_NULL(doc, err.msg);
	return doc;
}

static const cJSON *dp(const cJSON *doc)
{
	return cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "metadata"), "commtrace_devprof");
}

static int count_tracks(const cJSON *out, double *first_ts, int *bad)
{
	const cJSON *e;
	int n = 0;

	*first_ts = -1;
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(out, "traceEvents"))
	{
		const cJSON *tid = cJSON_GetObjectItem(e, "tid");

		if (!cJSON_IsNumber(tid) || tid->valuedouble < DEVPROF_FUSE_TID_BASE)
			continue;
		if (!strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "X")) {
			if (*first_ts < 0)
				*first_ts = cJSON_GetObjectItem(e, "ts")->valuedouble;
			if (cJSON_GetObjectItem(e, "dur")->valuedouble < 0)
				(*bad)++;
			n++;
		}
	}
	return n;
}

TEST(devprof_fuse_gpu)
{
	struct devprof_fuse_opts o = {0};
	struct devprof_err err = {0};
	cJSON *dev = device_doc("multi"), *prof = load_json("tests/golden/devprof/kineto_gpu.json");
	cJSON *out;
	const cJSON *d, *inv, *a;
	double first_ts;
	int bad = 0, i = 0;
	static const double kts[] = {1030.5, 1130.5, 1230.5};

	if (!dev || !prof)
		goto done;
	/* The multi calls are 20..22 and the trace has 3 kernels: refused, precisely. */
	out = devprof_fuse(dev, prof, &o, &err);
	ASSERT_TRUE(out == NULL, "invocation_seq 20 past 3 kernels");
	ASSERT_EQ(err.code, DEVPROF_E_SEQ_RANGE, "seq range code");
	ASSERT_TRUE(strstr(err.msg, "invocation 0 (invocation_seq 20) belongs to matching device "
				    "kernel event 20") &&
			strstr(err.msg, "has only 3 outer device kernel event(s)") &&
			strstr(err.msg, "3 of 3 invocation(s)") &&
			strstr(err.msg, "--align-in-order"),
		    err.msg);
	o.align_in_order = 1;
	out = devprof_fuse(dev, prof, &o, &err);
	if (!ASSERT_NOT_NULL(out, err.msg))
		goto done;
	d = dp(out);
	ASSERT_STREQ(cJSON_GetObjectItem(d, "align_by")->valuestring, "in_order", "explicit");
	ASSERT_STREQ(cJSON_GetObjectItem(d, "alignment")->valuestring, "device_kernel", "mode");
	ASSERT_TRUE(cJSON_IsFalse(cJSON_GetObjectItem(d, "host_alignment")), "not host");
	ASSERT_STREQ(cJSON_GetObjectItem(d, "kernel_filter")->valuestring, "megakernel",
		     "filter from device metadata");
	cJSON_ArrayForEach(inv, cJSON_GetObjectItem(d, "invocations"))
	{
		a = cJSON_GetObjectItem(inv, "aligned_to");
		ASSERT_EQ(cJSON_GetObjectItem(a, "pid")->valueint, 0, "device 0");
		ASSERT_EQ(cJSON_GetObjectItem(a, "tid")->valueint, 7, "stream 7");
		ASSERT_TRUE(cJSON_GetObjectItem(a, "ts")->valuedouble == kts[i], "in order");
		ASSERT_EQ(cJSON_GetObjectItem(inv, "lane")->valueint, 0, "one lane");
		i++;
	}
	ASSERT_EQ(i, 3, "3 invocations aligned");
	/* Consecutive sequences: in-order alignment gives no warning. */
	ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(d, "warnings")), 0, "no warning");
	/* 3 x 15 records; invocation 2's kernel (3 us) is shorter than its span (4.44 us). */
	ASSERT_EQ(count_tracks(out, &first_ts, &bad), 45, "fused records");
	ASSERT_EQ(bad, 0, "no negative dur");
	ASSERT_TRUE(first_ts == 1030.5, "first record at kernel start");
	ASSERT_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "out_of_range"), "count")->valueint, 2,
		  "out of range");
	/* Kineto top-level fields survive. */
	ASSERT_NOT_NULL(cJSON_GetObjectItem(out, "deviceProperties"), "deviceProperties");
	ASSERT_NOT_NULL(cJSON_GetObjectItem(out, "distributedInfo"), "distributedInfo");
	cJSON_Delete(out); /* and the profiler tree it consumed */
	prof = load_json("tests/golden/devprof/kineto_gpu.json");
	if (!prof)
		goto done;

	/* Too few kernels: a hard error, not a partial file. */
	o.skip = 1;
	out = devprof_fuse(dev, prof, &o, &err);
	ASSERT_TRUE(out == NULL, "skip 1 leaves 2 kernels");
	ASSERT_EQ(err.code, DEVPROF_E_ALIGN, "align code");
	o.skip = 0;
	o.kernel_name = "no_such_kernel";
	out = devprof_fuse(dev, prof, &o, &err);
	ASSERT_EQ(err.code, DEVPROF_E_HOST_REFUSED, "no match -> refused without the flag");
	ASSERT_TRUE(out == NULL && strstr(err.msg, "none of its 6 device kernel"), err.msg);
	/* Without a filter every outer kernel counts: 6 kernels, 3 aligned, 3 left over. */
	o.kernel_name = "";
	out = devprof_fuse(dev, prof, &o, &err);
	if (ASSERT_NOT_NULL(out, err.msg)) {
		ASSERT_EQ(cJSON_GetObjectItem(dp(out), "unaligned_events")->valueint, 3,
			  "left over");
		ASSERT_TRUE(out == prof, "the profiler tree is reused, not copied");
		cJSON_Delete(out);
		prof = NULL;
	}
done:
	cJSON_Delete(dev);
	cJSON_Delete(prof);
}

TEST(devprof_fuse_cpu_trace)
{
	struct devprof_fuse_opts o = {0};
	struct devprof_err err = {0};
	cJSON *dev = device_doc("multi"),
	      *prof = load_json("tests/golden/devprof/torch113_cpu.json");
	cJSON *out;
	const cJSON *d, *a, *w;
	double first_ts;
	int bad = 0;

	if (!dev || !prof)
		goto done;
	ASSERT_TRUE(cJSON_IsArray(prof), "torch 1.13 writes a bare event array");
	out = devprof_fuse(dev, prof, &o, &err);
	ASSERT_TRUE(out == NULL, "refused by default");
	ASSERT_EQ(err.code, DEVPROF_E_HOST_REFUSED, "code");
	ASSERT_TRUE(strstr(err.msg, "no device kernel event") != NULL, err.msg);

	o.allow_host_align = 1;
	out = devprof_fuse(dev, prof, &o, &err);
	ASSERT_TRUE(out == NULL && err.code == DEVPROF_E_SEQ_RANGE, "calls 20.. past 3 events");
	ASSERT_TRUE(strstr(err.msg, "matching host event 20") != NULL, err.msg);
	o.align_in_order = 1;
	out = devprof_fuse(dev, prof, &o, &err);
	if (!ASSERT_NOT_NULL(out, err.msg))
		goto done;
	d = dp(out);
	ASSERT_STREQ(cJSON_GetObjectItem(d, "alignment")->valuestring, "host_event", "mode");
	ASSERT_TRUE(cJSON_IsTrue(cJSON_GetObjectItem(d, "host_alignment")), "host flag");
	w = cJSON_GetObjectItem(d, "warnings");
	ASSERT_TRUE(cJSON_GetArraySize(w) == 1 &&
			strstr(cJSON_GetArrayItem(w, 0)->valuestring, "host events"),
		    "host warning");
	a = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(d, "invocations"), 0),
				"aligned_to");
	ASSERT_STREQ(cJSON_GetObjectItem(a, "name")->valuestring, "megakernel", "record_function");
	ASSERT_STREQ(cJSON_GetObjectItem(a, "pid")->valuestring, "CPU functions", "legacy pid");
	ASSERT_TRUE(cJSON_IsTrue(cJSON_GetObjectItem(a, "host")), "host");
	ASSERT_EQ(count_tracks(out, &first_ts, &bad), 45, "fused records");
	ASSERT_TRUE(first_ts == 429, "first record at the first megakernel event");
	ASSERT_TRUE(cJSON_GetObjectItem(out, "traceEvents") == prof, "array wrapped, not copied");
	cJSON_Delete(out);
	prof = NULL;
done:
	cJSON_Delete(dev);
	cJSON_Delete(prof);
}

TEST(devprof_fuse_bad_inputs)
{
	struct devprof_fuse_opts o = {.align_in_order = 1};
	struct devprof_err err = {0};
	cJSON *dev = device_doc("basic"), *p, *out, *fused, *bogus;
	static const char *const traces[] = {
	    "{\"traceEvents\": 3}",
	    "{\"schemaVersion\": 1}",
	    "17",
	    "[1, 2]",
	    "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"demo_megakernel\","
	    "\"ts\":5,\"dur\":-1,\"pid\":0,\"tid\":7}]}",
	};
	size_t i;

	if (!dev)
		return;
	for (i = 0; i < sizeof(traces) / sizeof(traces[0]); i++) {
		p = cJSON_Parse(traces[i]);
		out = devprof_fuse(dev, p, &o, &err);
		ASSERT_TRUE(out == NULL, traces[i]);
		ASSERT_EQ(err.code, DEVPROF_E_TRACE, traces[i]);
		cJSON_Delete(p);
	}
	p = cJSON_Parse(
	    "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"demo_"
	    "megakernel\",\"ts\":5,\"dur\":10,\"pid\":0,\"tid\":7},{\"ph\":\"X\",\"cat\":"
	    "\"kernel\",\"name\":\"demo_megakernel_inner\",\"ts\":6,\"dur\":2,\"pid\":0,"
	    "\"tid\":7}]}");
	fused = devprof_fuse(dev, p, &o, &err);
	if (ASSERT_NOT_NULL(fused, err.msg)) {
		ASSERT_EQ(cJSON_GetObjectItem(dp(fused), "nested_events_skipped")->valueint, 1,
			  "nested kernel skipped");
		/* Fusing an already fused trace would clash tracks. */
		out = devprof_fuse(dev, fused, &o, &err);
		ASSERT_TRUE(out == NULL && err.code == DEVPROF_E_ALIGN, "fused twice");
		cJSON_Delete(fused);
	} else {
		cJSON_Delete(p);
	}
	p = cJSON_Parse("[]");
	bogus = cJSON_Parse("{\"schema_version\":1,\"traceEvents\":[],\"metadata\":{}}");
	out = devprof_fuse(bogus, p, &o, &err);
	ASSERT_TRUE(out == NULL && err.code == DEVPROF_E_DEVJSON, "device JSON without metadata");
	cJSON_Delete(bogus);
	cJSON_Delete(p);
	cJSON_Delete(dev);
}

/* The combined export: device tracks appended to a host trace on the host's clock. */
TEST(devprof_append_combined)
{
	struct devprof_export_opts o;
	struct devprof_err err = {0};
	cJSON *events = cJSON_CreateArray(), *md = cJSON_CreateObject(), *e;
	uint8_t *buf = NULL, *bad = NULL;
	size_t len = 0, blen = 0;
	int n0, n1, n2;

	cJSON_AddItemToArray(events,
			     cJSON_Parse("{\"ph\":\"X\",\"name\":\"host\",\"ts\":1,\"dur\":1,"
					 "\"pid\":7,\"tid\":8}"));
	if (!ASSERT_OK(devprof_gen("basic", DEVPROF_CORRUPT_NONE, &buf, &len, &err), err.msg))
		goto out;
	devprof_export_opts_init(&o);
	o.pid_base = 1000;
	o.have_sync = 1;
	o.sync_cycle = 5000000000000ull; /* the generator's first cycle */
	o.sync_us = 250.0;
	ASSERT_OK(devprof_append_chrome(events, md, buf, len, &o, &err), err.msg);
	n1 = cJSON_GetArraySize(events);
	ASSERT_EQ(n1, 1 + 2 + 5 * 2 + 24, "host + process + 5 tracks + 24 records");
	e = cJSON_GetArrayItem(events, 5); /* the first record of AIC 0 */
	ASSERT_STREQ(cJSON_GetObjectItem(e, "ph")->valuestring, "X", "X");
	ASSERT_TRUE(cJSON_GetObjectItem(e, "ts")->valuedouble == 250.0, "on the host clock");
	ASSERT_EQ(cJSON_GetObjectItem(e, "pid")->valueint, 1000, "pid base");
	/* A second buffer lands beside the first; its metadata is merged. */
	o.pid_base = 2000;
	ASSERT_OK(devprof_append_chrome(events, md, buf, len, &o, &err), err.msg);
	ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(
		      cJSON_GetObjectItem(md, "commtrace_devprof"), "invocations")),
		  2, "two invocations described");
	n2 = cJSON_GetArraySize(events);
	/* Errors append nothing. */
	devprof_gen("basic", DEVPROF_CORRUPT_KIND, &bad, &blen, &err);
	ASSERT_EQ(devprof_append_chrome(events, md, bad, blen, &o, &err), DEVPROF_E_KIND, "kind");
	o.sync_cycle = 6000000000000ull; /* after every record: ts would be negative */
	o.sync_us = 0;
	ASSERT_EQ(devprof_append_chrome(events, md, buf, len, &o, &err), DEVPROF_E_USAGE, "neg ts");
	n0 = cJSON_GetArraySize(events);
	ASSERT_EQ(n0, n2, "nothing appended on error");
	ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(
		      cJSON_GetObjectItem(md, "commtrace_devprof"), "invocations")),
		  2, "metadata untouched on error");
out:
	free(buf);
	free(bad);
	cJSON_Delete(events);
	cJSON_Delete(md);
}

/* A Kineto trace with n launches of the MegaKernel on stream 7: launch i at 1000 + 100 i. */
static cJSON *kineto_n(int n, double dur)
{
	cJSON *doc = cJSON_CreateObject(), *evs = cJSON_AddArrayToObject(doc, "traceEvents");
	char buf[256];
	int i;

	for (i = 0; i < n; i++) {
		snprintf(
		    buf, sizeof(buf),
		    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"void megakernel_persistent<128>"
		    "(RuntimeConfig)\",\"pid\":0,\"tid\":7,\"ts\":%d,\"dur\":%g}",
		    1000 + 100 * i, dur);
		cJSON_AddItemToArray(evs, cJSON_Parse(buf));
	}
	return doc;
}

/* Fuses dev into a fresh kineto_n(n, 10); the trace is freed when fusion fails. */
static cJSON *fuse_n(const cJSON *dev, int n, const struct devprof_fuse_opts *o,
		     struct devprof_err *err)
{
	cJSON *p = kineto_n(n, 10), *out = devprof_fuse(dev, p, o, err);

	if (!out)
		cJSON_Delete(p);
	return out;
}

static void set_seqs(cJSON *dev, const int *seq)
{
	cJSON *inv;
	int k = 0;

	cJSON_ArrayForEach(inv, cJSON_GetObjectItem(dp(dev), "invocations"))
	{
		cJSON_ReplaceItemInObject(inv, "invocation_seq", cJSON_CreateNumber(seq[k++]));
	}
}

/* Every fused record of invocation k lies inside kernel event ev[k]. */
static void check_inside(const cJSON *out, const int *ev, int n, double dur)
{
	const cJSON *e;
	int seen = 0;

	cJSON_ArrayForEach(e, cJSON_GetObjectItem(out, "traceEvents"))
	{
		const cJSON *tid = cJSON_GetObjectItem(e, "tid"),
			    *a = cJSON_GetObjectItem(e, "args");
		double ts, end, k0;
		int k;

		if (!cJSON_IsNumber(tid) || tid->valuedouble < DEVPROF_FUSE_TID_BASE ||
		    strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "X"))
			continue;
		k = cJSON_GetObjectItem(a, "invocation")->valueint;
		if (!ASSERT_TRUE(k >= 0 && k < n, "invocation index"))
			return;
		ts = cJSON_GetObjectItem(e, "ts")->valuedouble;
		end = ts + cJSON_GetObjectItem(e, "dur")->valuedouble;
		k0 = 1000 + 100 * ev[k];
		if (!ASSERT_TRUE(ts >= k0 && end <= k0 + dur, "record inside its kernel"))
			return;
		seen++;
	}
	ASSERT_EQ(seen, 45, "every record");
}

TEST(devprof_fuse_by_invocation_seq)
{
	struct devprof_fuse_opts o = {0};
	struct devprof_err err = {0};
	cJSON *dev = device_doc("multi"), *out;
	const cJSON *d, *inv;
	static const int want[] = {20, 21, 22}, gaps[] = {3, 5, 9}, skip2[] = {22, 23, 24};
	static const int dup[] = {3, 5, 5};
	int k;

	if (!dev)
		return;
	ct_subtest("sequence");
	out = fuse_n(dev, 25, &o, &err);
	if (ASSERT_NOT_NULL(out, err.msg)) {
		d = dp(out);
		ASSERT_STREQ(cJSON_GetObjectItem(d, "align_by")->valuestring, "invocation_seq",
			     "by");
		ASSERT_TRUE(strstr(cJSON_GetObjectItem(d, "align_by_reason")->valuestring,
				   "skip + s") != NULL,
			    "reason");
		ASSERT_EQ(cJSON_GetObjectItem(d, "unaligned_events")->valueint, 22, "22 left");
		k = 0;
		cJSON_ArrayForEach(inv, cJSON_GetObjectItem(d, "invocations"))
		{
			const cJSON *a = cJSON_GetObjectItem(inv, "aligned_to");

			ASSERT_EQ(cJSON_GetObjectItem(inv, "invocation_seq")->valueint, want[k],
				  "seq");
			ASSERT_EQ(cJSON_GetObjectItem(inv, "event_number")->valueint, want[k],
				  "ev");
			ASSERT_TRUE(cJSON_GetObjectItem(a, "ts")->valuedouble ==
					1000 + 100 * want[k],
				    "aligned to kernel 20 + k, not k");
			k++;
		}
		ASSERT_EQ(k, 3, "3 invocations");
		ASSERT_EQ(
		    cJSON_GetObjectItem(cJSON_GetObjectItem(d, "out_of_range"), "count")->valueint,
		    0, "inside their kernels");
		check_inside(out, want, 3, 10);
		cJSON_Delete(out);
	}

	ct_subtest("skip");
	o.skip = 2;
	out = fuse_n(dev, 25, &o, &err);
	if (ASSERT_NOT_NULL(out, err.msg)) {
		check_inside(out, skip2, 3, 10);
		cJSON_Delete(out);
	}
	o.skip = 3; /* call 22 would need kernel 25 of 0..24 */
	{
		cJSON *p = kineto_n(25, 10);

		ASSERT_TRUE(devprof_fuse(dev, p, &o, &err) == NULL, "past the end");
		ASSERT_EQ(err.code, DEVPROF_E_SEQ_RANGE, "code");
		ASSERT_TRUE(strstr(err.msg, "invocation 2 (invocation_seq 22) belongs to matching "
					    "device kernel event 25 (skip 3 + invocation_seq), but "
					    "the profiler trace has only 25") &&
				strstr(err.msg, "1 of 3 invocation(s)"),
			    err.msg);
		cJSON_Delete(p);
	}
	o.skip = 0;

	ct_subtest("gaps");
	set_seqs(dev, gaps); /* a window that sampled calls 3, 5 and 9 */
	out = fuse_n(dev, 10, &o, &err);
	if (ASSERT_NOT_NULL(out, err.msg)) {
		check_inside(out, gaps, 3, 10);
		ASSERT_EQ(cJSON_GetObjectItem(dp(out), "unaligned_events")->valueint, 7, "7 left");
		cJSON_Delete(out);
	}
	/* In order over gaps: allowed when asked for, with a warning. */
	o.align_in_order = 1;
	out = fuse_n(dev, 3, &o, &err);
	if (ASSERT_NOT_NULL(out, err.msg)) {
		static const int in_order[] = {0, 1, 2};
		const cJSON *w = cJSON_GetObjectItem(dp(out), "warnings");

		check_inside(out, in_order, 3, 10);
		ASSERT_TRUE(cJSON_GetArraySize(w) == 1 &&
				strstr(cJSON_GetArrayItem(w, 0)->valuestring, "not consecutive"),
			    "gap warning");
		cJSON_Delete(out);
	}
	o.align_in_order = 0;

	ct_subtest("duplicate");
	set_seqs(dev, dup);
	{
		cJSON *p = kineto_n(10, 10);

		ASSERT_TRUE(devprof_fuse(dev, p, &o, &err) == NULL, "duplicate refused");
		ASSERT_EQ(err.code, DEVPROF_E_ALIGN, "code");
		ASSERT_TRUE(strstr(err.msg, "invocations 1 and 2 both have invocation_seq 5") !=
				NULL,
			    err.msg);
		cJSON_Delete(p);
	}

	ct_subtest("missing");
	cJSON_DeleteItemFromObject(
	    cJSON_GetArrayItem(cJSON_GetObjectItem(dp(dev), "invocations"), 1), "invocation_seq");
	{
		cJSON *p = kineto_n(10, 10);

		ASSERT_TRUE(devprof_fuse(dev, p, &o, &err) == NULL, "no sequence");
		ASSERT_EQ(err.code, DEVPROF_E_DEVJSON, "code");
		ASSERT_TRUE(strstr(err.msg, "invocation 1 has no invocation_seq") != NULL, err.msg);
		cJSON_Delete(p);
	}
	cJSON_Delete(dev);
}
