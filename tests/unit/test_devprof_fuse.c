// SPDX-License-Identifier: MIT
/*
 * Fusion with PyTorch profiler traces (FR-13, FR-14) and the combined-export append.
 * Inputs: tests/golden/devprof/kineto_gpu.json (a constructed Kineto trace with device
 * kernels: no GPU here) and torch113_cpu.json (recorded here by torch 1.13, CPU only).
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
	out = devprof_fuse(dev, prof, &o, &err);
	if (!ASSERT_NOT_NULL(out, err.msg))
		goto done;
	d = dp(out);
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
	struct devprof_fuse_opts o = {0};
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
