// SPDX-License-Identifier: MIT
/*
 * Device profile buffers: goldens for every generated scenario, exact decoding, every
 * FR-12 error class, the planner, the sampling window and the recorder's write path.
 * Goldens live in tests/golden/devprof/ (run from the repository root); regenerate them
 * with DEVPROF_UPDATE_GOLDEN=1 build/unit-tests -a 'devprof*' and review the diff.
 */
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "devprof/devprof.h"

#define GOLDEN "tests/golden/devprof/"

static int update_golden(void)
{
	const char *e = getenv("DEVPROF_UPDATE_GOLDEN");

	return e && *e == '1';
}

/* Compares data with a golden file, or rewrites the golden in update mode. */
static bool golden(const char *name, const void *data, size_t len)
{
	struct devprof_err err = {0};
	char path[256];
	uint8_t *g = NULL;
	size_t glen = 0;
	bool ok;

	snprintf(path, sizeof(path), GOLDEN "%s", name);
	if (update_golden()) {
		if (!ASSERT_OK(devprof_write_file(path, data, len, &err), path))
			return false;
		return true;
	}
	if (!ASSERT_OK(devprof_read_file(path, 64 << 20, &g, &glen, &err), path))
		return false;
	ok = ASSERT_EQ(glen, len, path) && ASSERT_TRUE(memcmp(g, data, len) == 0, path);
	free(g);
	return ok;
}

static cJSON *decode(const uint8_t *buf, size_t len, enum devprof_display d, int *code)
{
	struct devprof_export_opts o;
	struct devprof_err err = {0};
	cJSON *doc;

	devprof_export_opts_init(&o);
	o.display = d;
	doc = devprof_build_trace(buf, len, &o, &err);
	*code = doc ? 0 : err.code;
	return doc;
}

TEST(devprof_golden)
{
	static const char *const full[] = {"basic", NULL};
	size_t i;

	for (i = 0; devprof_scenarios[i]; i++) {
		const char *s = devprof_scenarios[i];
		struct devprof_err err = {0};
		char name[64];
		uint8_t *buf = NULL;
		size_t len = 0;
		cJSON *doc;
		char *txt;
		int code;

		ct_subtest(s);
		if (!ASSERT_OK(devprof_gen(s, DEVPROF_CORRUPT_NONE, &buf, &len, &err), err.msg))
			continue;
		snprintf(name, sizeof(name), "%s.bin", s);
		golden(name, buf, len);
		doc = decode(buf, len, DEVPROF_DISPLAY_STAGE, &code);
		if (ASSERT_NOT_NULL(doc, s)) {
			txt = cJSON_Print(doc);
			snprintf(name, sizeof(name), "%s.json", s);
			golden(name, txt, strlen(txt));
			free(txt);
			cJSON_Delete(doc);
		}
		if (full[0] && !strcmp(full[0], s)) {
			doc = decode(buf, len, DEVPROF_DISPLAY_FULL, &code);
			if (ASSERT_NOT_NULL(doc, "full")) {
				txt = cJSON_Print(doc);
				golden("basic_full.json", txt, strlen(txt));
				free(txt);
				cJSON_Delete(doc);
			}
		}
		free(buf);
	}
}

static const cJSON *dp_meta(const cJSON *doc)
{
	return cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "metadata"), "commtrace_devprof");
}

/* Every record once: (invocation, core, task, kind) unique, X count == record count. */
TEST(devprof_decode_exact)
{
	struct devprof_err err = {0};
	struct devprof_file f;
	uint8_t *buf = NULL;
	size_t len = 0, k;
	const cJSON *e;
	cJSON *doc;
	int code, x = 0, dropped_events = 0;
	uint64_t records = 0, dropped = 0;
	static char seen[4][8][64][4];

	if (!ASSERT_OK(devprof_gen("overflow", DEVPROF_CORRUPT_NONE, &buf, &len, &err), err.msg))
		return;
	if (!ASSERT_OK(devprof_parse(buf, len, &f, &err), err.msg))
		goto out;
	for (k = 0; k < f.n; k++) {
		records += f.inv[k].records;
		dropped += f.inv[k].dropped;
	}
	devprof_file_free(&f);
	/* overflow: 7 tasks x 3 records on AIC 0 with 16 slots, 2 tasks on AIV 0. */
	ASSERT_EQ(records, 16 + 6, "records");
	ASSERT_EQ(dropped, 5, "dropped");
	doc = decode(buf, len, DEVPROF_DISPLAY_STAGE, &code);
	if (!ASSERT_NOT_NULL(doc, "decode"))
		goto out;
	memset(seen, 0, sizeof(seen));
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(doc, "traceEvents"))
	{
		const char *ph = cJSON_GetObjectItem(e, "ph")->valuestring;
		const cJSON *a = cJSON_GetObjectItem(e, "args");
		int tid =
		    cJSON_GetObjectItem(e, "tid") ? cJSON_GetObjectItem(e, "tid")->valueint : 0;

		if (!strcmp(ph, "X")) {
			int task = cJSON_GetObjectItem(a, "task_id")->valueint;
			int kind =
			    !strcmp(cJSON_GetObjectItem(e, "cat")->valuestring, "Compute") ? 1
			    : !strcmp(cJSON_GetObjectItem(e, "cat")->valuestring, "TriggerEvent")
				? 2
				: 0;
			int slot = tid - DEVPROF_TID_BASE;

			x++;
			ASSERT_TRUE(slot >= 0 && slot < 2, "slot");
			ASSERT_TRUE(task >= 0 && task < 64, "task");
			ASSERT_EQ(seen[0][slot][task][kind]++, 0, "record seen once");
			ASSERT_GE(cJSON_GetObjectItem(e, "dur")->valuedouble, 0, "dur >= 0");
			ASSERT_NEQ(tid, cJSON_GetObjectItem(e, "pid")->valueint, "tid != pid");
		}
		if (!strcmp(ph, "i")) {
			dropped_events++;
			ASSERT_EQ(cJSON_GetObjectItem(a, "dropped_count")->valueint, 5,
				  "dropped arg");
			ASSERT_EQ(tid, DEVPROF_TID_BASE, "drops on AIC 0");
		}
	}
	ASSERT_EQ(x, 22, "X events");
	ASSERT_EQ(dropped_events, 1, "dropped instants");
	/* AIC 0 kept the first 16 records: tasks 0..4 complete, task 5 wait only. */
	ASSERT_EQ(seen[0][0][5][0], 1, "task 5 wait kept");
	ASSERT_EQ(seen[0][0][5][1], 0, "task 5 compute dropped");
	ASSERT_EQ(seen[0][0][6][0], 0, "task 6 dropped");
	e = cJSON_GetArrayItem(cJSON_GetObjectItem(dp_meta(doc), "invocations"), 0);
	ASSERT_EQ(cJSON_GetObjectItem(e, "dropped")->valueint, 5, "metadata dropped");
	e = cJSON_GetArrayItem(cJSON_GetObjectItem(e, "cores"), 0);
	ASSERT_EQ(cJSON_GetObjectItem(e, "dropped")->valueint, 5, "core dropped");
	ASSERT_EQ(cJSON_GetObjectItem(e, "records")->valueint, 16, "core records");
	cJSON_Delete(doc);
out:
	free(buf);
}

TEST(devprof_fallback_names)
{
	struct devprof_err err = {0};
	uint8_t *buf = NULL;
	size_t len = 0;
	const cJSON *inv, *fb;
	cJSON *doc;
	int code;

	if (!ASSERT_OK(devprof_gen("nometa", DEVPROF_CORRUPT_NONE, &buf, &len, &err), err.msg))
		return;
	doc = decode(buf, len, DEVPROF_DISPLAY_FULL, &code);
	if (!ASSERT_NOT_NULL(doc, "decode"))
		goto out;
	inv = cJSON_GetArrayItem(cJSON_GetObjectItem(dp_meta(doc), "invocations"), 0);
	fb = cJSON_GetObjectItem(inv, "name_fallbacks");
	ASSERT_STREQ(cJSON_GetObjectItem(fb, "metadata")->valuestring, "absent", "metadata");
	ASSERT_EQ(cJSON_GetArraySize(
		      cJSON_GetObjectItem(cJSON_GetObjectItem(fb, "stage_desc_ids"), "ids")),
		  4, "4 stages fell back");
	ASSERT_EQ(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(fb, "stage_desc_ids"), "records")->valueint, 18,
	    "every record fell back");
	ASSERT_TRUE(cJSON_IsNull(cJSON_GetObjectItem(inv, "kernel")), "kernel null");
	/* Generic names, raw IDs kept beside them. */
	cJSON_ArrayForEach(inv, cJSON_GetObjectItem(doc, "traceEvents"))
	{
		if (strcmp(cJSON_GetObjectItem(inv, "ph")->valuestring, "X"))
			continue;
		ASSERT_STREQ(cJSON_GetObjectItem(inv, "name")->valuestring,
			     "Wait owner_0/stage_0[0]", "first record name");
		ASSERT_EQ(
		    cJSON_GetObjectItem(cJSON_GetObjectItem(inv, "args"), "desc_id")->valueint, 0,
		    "desc_id kept");
		break;
	}
	cJSON_Delete(doc);

	/* A metadata file overrides: no fallback left. */
	{
		struct devprof_export_opts o;
		cJSON *meta =
		    cJSON_Parse("{\"kernel\":\"k\",\"stage_names\":[\"a\",\"b\",\"c\",\"d\"],"
				"\"owner_labels\":[\"x\",\"y\",\"z\"]}");

		devprof_export_opts_init(&o);
		o.meta = meta;
		o.meta_source = "test";
		doc = devprof_build_trace(buf, len, &o, &err);
		if (ASSERT_NOT_NULL(doc, err.msg)) {
			inv =
			    cJSON_GetArrayItem(cJSON_GetObjectItem(dp_meta(doc), "invocations"), 0);
			fb = cJSON_GetObjectItem(inv, "name_fallbacks");
			ASSERT_STREQ(cJSON_GetObjectItem(fb, "metadata")->valuestring, "file",
				     "src");
			ASSERT_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(fb, "stage_desc_ids"),
						      "records")
				      ->valueint,
				  0, "no stage fallback");
			ASSERT_EQ(
			    cJSON_GetObjectItem(cJSON_GetObjectItem(fb, "owner_ids"), "records")
				->valueint,
			    0, "no owner fallback");
			cJSON_Delete(doc);
		}
		cJSON_Delete(meta);
		meta = cJSON_Parse("{\"stage_names\":{\"x1\":\"a\"}}");
		o.meta = meta;
		doc = devprof_build_trace(buf, len, &o, &err);
		ASSERT_TRUE(doc == NULL, "bad meta refused");
		ASSERT_EQ(err.code, DEVPROF_E_META, "meta code");
		cJSON_Delete(doc);
		cJSON_Delete(meta);
	}
out:
	free(buf);
}

static void put_hdr(uint8_t *buf, void (*fn)(struct ct_devprof_header *))
{
	struct ct_devprof_header h;

	memcpy(&h, buf, sizeof(h));
	fn(&h);
	memcpy(buf, &h, sizeof(h));
}

static void h_cap(struct ct_devprof_header *h)
{
	h->aic_capacity = 24;
}
static void h_size(struct ct_devprof_header *h)
{
	h->total_size += 8;
}
static void h_swap(struct ct_devprof_header *h)
{
	h->magic = __builtin_bswap32(CT_DEVPROF_MAGIC);
}
static void h_meta(struct ct_devprof_header *h)
{
	h->meta_size -= 1; /* the JSON loses its closing brace */
}

/* FR-12: each error class with its own code and message; never a document. */
TEST(devprof_errors)
{
	static const struct {
		enum devprof_corrupt c;
		int code;
		const char *needle;
	} cases[] = {
	    {DEVPROF_CORRUPT_MAGIC, DEVPROF_E_MAGIC, "magic 0x46445025"},
	    {DEVPROF_CORRUPT_VERSION, DEVPROF_E_VERSION, "format version 2 is not supported"},
	    {DEVPROF_CORRUPT_TRUNCATE, DEVPROF_E_TRUNCATED, "truncated, needs"},
	    {DEVPROF_CORRUPT_COUNT, DEVPROF_E_OVER_CAPACITY, "record count 17 exceeds"},
	    {DEVPROF_CORRUPT_END_BEFORE_START, DEVPROF_E_END_BEFORE_START, "is before start"},
	    {DEVPROF_CORRUPT_FREQ_ZERO, DEVPROF_E_FREQ, "clock frequency is 0 Hz"},
	    {DEVPROF_CORRUPT_FREQ_ABSURD, DEVPROF_E_FREQ, "outside the plausible range"},
	    {DEVPROF_CORRUPT_KIND, DEVPROF_E_KIND, "unknown record kind 9"},
	    {DEVPROF_CORRUPT_DROPPED, DEVPROF_E_DROPS,
	     "AIC 0: dropped count 3 but the slot holds only 6 of its 16 records"},
	};
	struct devprof_err err;
	struct devprof_file f;
	uint8_t *buf = NULL, *two;
	size_t len = 0, i;
	int code;
	cJSON *doc;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ct_subtest(devprof_corruptions[cases[i].c]);
		memset(&err, 0, sizeof(err));
		if (!ASSERT_OK(devprof_gen("basic", cases[i].c, &buf, &len, &err), err.msg))
			continue;
		ASSERT_EQ(devprof_parse(buf, len, &f, &err), cases[i].code, "parse code");
		ASSERT_TRUE(strstr(err.msg, cases[i].needle) != NULL, err.msg);
		doc = decode(buf, len, DEVPROF_DISPLAY_STAGE, &code);
		ASSERT_TRUE(doc == NULL, "no document");
		ASSERT_EQ(code, cases[i].code, "build code");
		cJSON_Delete(doc);
		free(buf);
		buf = NULL;
	}

	ct_subtest("more");
	if (!ASSERT_OK(devprof_gen("basic", DEVPROF_CORRUPT_NONE, &buf, &len, &err), err.msg))
		return;
	ASSERT_EQ(devprof_parse(buf, 0, &f, &err), DEVPROF_E_TRUNCATED, "empty file");
	ASSERT_EQ(devprof_parse(buf, 30, &f, &err), DEVPROF_E_TRUNCATED, "short header");
	ASSERT_TRUE(strstr(err.msg, "truncated header, 30 of 64") != NULL, err.msg);
	ASSERT_EQ(devprof_parse(buf, 2, &f, &err), DEVPROF_E_TRUNCATED, "2 bytes");

	two = malloc(len * 2);
	memcpy(two, buf, len);
	memcpy(two + len, buf, len);
	put_hdr(two + len, h_swap);
	ASSERT_EQ(devprof_parse(two, len * 2, &f, &err), DEVPROF_E_MAGIC, "second invocation");
	ASSERT_TRUE(strstr(err.msg, "invocation 1") && strstr(err.msg, "byte-swapped"), err.msg);
	memcpy(two + len, buf, len);
	{
		struct ct_devprof_header h;

		memcpy(&h, two + len, sizeof(h));
		h.clock_hz = 50000000; /* Ascend A2/A3 counter */
		memcpy(two + len, &h, sizeof(h));
	}
	ASSERT_EQ(devprof_parse(two, len * 2, &f, &err), DEVPROF_E_FREQ, "clock differs");
	memcpy(two + len, buf, len);
	ASSERT_OK(devprof_parse(two, len * 2, &f, &err), "two invocations");
	ASSERT_EQ(f.n, 2, "two");
	devprof_file_free(&f);
	/* Trailing bytes that are not an invocation. */
	ASSERT_EQ(devprof_parse(two, len + 10, &f, &err), DEVPROF_E_TRUNCATED, "tail");
	free(two);

	put_hdr(buf, h_cap);
	ASSERT_EQ(devprof_parse(buf, len, &f, &err), DEVPROF_E_LAYOUT, "capacity 24");
	ASSERT_TRUE(strstr(err.msg, "multiple of 16") != NULL, err.msg);
	free(buf);

	devprof_gen("basic", DEVPROF_CORRUPT_NONE, &buf, &len, &err);
	put_hdr(buf, h_size);
	ASSERT_EQ(devprof_parse(buf, len, &f, &err), DEVPROF_E_LAYOUT, "total_size");
	free(buf);

	devprof_gen("basic", DEVPROF_CORRUPT_NONE, &buf, &len, &err);
	put_hdr(buf, h_meta);
	ASSERT_EQ(devprof_parse(buf, len, &f, &err), DEVPROF_E_META, "metadata JSON");
	free(buf);

	devprof_gen("basic", DEVPROF_CORRUPT_NONE, &buf, &len, &err);
	buf[sizeof(struct ct_devprof_header) + 4] = 7; /* slot 0 claims core 7 */
	ASSERT_EQ(devprof_parse(buf, len, &f, &err), DEVPROF_E_SLOT, "slot id");
	free(buf);

	/* Sampling off everywhere: no record at all is an error, not an empty trace. */
	{
		uint64_t sz = ct_devprof_buffer_size(2, 2, 16, 16, 0);
		uint8_t *empty = malloc(sz);

		ASSERT_OK(ct_devprof_buffer_init(empty, sz, 1000000000, 0, 2, 2, 16, 16, NULL, 0),
			  "init");
		ASSERT_EQ(devprof_parse(empty, sz, &f, &err), DEVPROF_E_EMPTY, "empty");
		ASSERT_TRUE(strstr(err.msg, "hold no record") != NULL, err.msg);
		free(empty);
	}

	/*
	 * Drops are valid only in a full slot: a slot of capacity 0 may drop from its first
	 * record, one with room left may not.
	 */
	{
		uint64_t sz = ct_devprof_buffer_size(1, 1, 16, 0, 0);
		uint64_t aiv = ct_devprof_slot_offset(1, 16, 0, CT_DEVPROF_CORE_AIV, 0);
		uint8_t *p = malloc(sz);
		struct ct_devprof_runtime_config cfg = {.profile_enable = 1};
		struct ct_devprof_recorder r;
		uint32_t owner = 0, drops = 4, i;

		ASSERT_OK(ct_devprof_buffer_init(p, sz, 1000000000, 0, 1, 1, 16, 0, NULL, 0),
			  "init");
		cfg.profile_buffer = (uint64_t)(uintptr_t)p;
		ct_devprof_recorder_init(&r, &cfg, CT_DEVPROF_CORE_AIC, 0);
		for (i = 0; i < 16; i++)
			ct_devprof_record(&r, CT_DEVPROF_REC_COMPUTE, 0, i, i, &owner, 0);
		memcpy(p + aiv + 12, &drops, sizeof(drops)); /* AIV 0: capacity 0, 4 dropped */
		ASSERT_OK(devprof_parse(p, sz, &f, &err), err.msg);
		devprof_file_free(&f);
		drops = 1;
		memcpy(p + sizeof(struct ct_devprof_header) + 12, &drops, sizeof(drops));
		ASSERT_OK(devprof_parse(p, sz, &f, &err), "a full slot with a drop");
		devprof_file_free(&f);
		i = 15;
		memcpy(p + sizeof(struct ct_devprof_header) + 8, &i, sizeof(i));
		ASSERT_EQ(devprof_parse(p, sz, &f, &err), DEVPROF_E_DROPS, "room left, yet a drop");
		ASSERT_TRUE(
		    strstr(err.msg, "dropped count 1 but the slot holds only 15 of its 16") != NULL,
		    err.msg);
		free(p);
	}
}

TEST(devprof_plan)
{
	static const uint32_t aic[] = {5, 3, 0}, aiv[] = {11, 2}, big[] = {100, 90};
	struct devprof_err err = {0};
	struct devprof_plan p;

	ASSERT_OK(devprof_plan(aic, 3, aiv, 2, 3, &p, &err), err.msg);
	ASSERT_EQ(p.aic_capacity, 16, "AIC 15 records -> 16");
	ASSERT_EQ(p.aiv_capacity, 48, "AIV 33 records -> 48");
	ASSERT_EQ(p.aic_expected_drops + p.aiv_expected_drops, 0, "no drops");
	ASSERT_EQ(p.bytes, 64 + 3 * (16 + 16 * 40) + 2 * (16 + 48 * 40), "bytes");
	ASSERT_OK(devprof_plan(big, 2, NULL, 0, 3, &p, &err), err.msg);
	ASSERT_EQ(p.aic_capacity, 256, "clamped to 256");
	ASSERT_EQ(p.aiv_capacity, 0, "no AIV");
	ASSERT_EQ(p.aic_expected_drops, (300 - 256) + (270 - 256), "expected drops");
	ASSERT_EQ(ct_devprof_capacity(0, 3), 0, "0 tasks");
	ASSERT_EQ(ct_devprof_capacity(1, 3), 16, "3 -> 16");
	ASSERT_EQ(ct_devprof_capacity(16, 1), 16, "16 -> 16");
	ASSERT_EQ(ct_devprof_capacity(17, 1), 32, "17 -> 32");
	ASSERT_EQ(ct_devprof_capacity(UINT32_MAX, 64), 256, "no overflow");
	ASSERT_EQ(devprof_plan(NULL, 0, NULL, 0, 3, &p, &err), DEVPROF_E_PLAN, "no core");
	ASSERT_EQ(devprof_plan(aic, 3, aiv, 2, 0, &p, &err), DEVPROF_E_PLAN, "0 records/task");
}

TEST(devprof_schedule)
{
	/* skip 1, then (wait 1, warmup 1, active 2) x 2: like torch.profiler.schedule. */
	static const struct ct_devprof_schedule s = {1, 1, 1, 2, 2};
	static const enum ct_devprof_action want[] = {
	    CT_DEVPROF_NONE,
	    CT_DEVPROF_NONE,
	    CT_DEVPROF_WARMUP,
	    CT_DEVPROF_RECORD,
	    CT_DEVPROF_RECORD_AND_SAVE,
	    CT_DEVPROF_NONE,
	    CT_DEVPROF_WARMUP,
	    CT_DEVPROF_RECORD,
	    CT_DEVPROF_RECORD_AND_SAVE,
	    CT_DEVPROF_NONE,
	    CT_DEVPROF_NONE,
	};
	struct ct_devprof_session ss;
	struct ct_devprof_runtime_config cfg, zero;
	uint64_t i;

	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		ASSERT_EQ(ct_devprof_schedule_action(&s, i), want[i], "action");
	memset(&zero, 0, sizeof(zero));
	ASSERT_EQ(zero.profile_enable, 0, "default off");

	ct_devprof_session_init(&ss, &s, 1);
	for (i = 0; i < 5; i++) {
		enum ct_devprof_action a1 = ct_devprof_session_configure(&ss, &cfg, 0x1000);
		struct ct_devprof_runtime_config c2;
		enum ct_devprof_action a2 = ct_devprof_session_configure(&ss, &c2, 0x1000);

		ASSERT_EQ(a1, want[i], "first call follows the schedule");
		ASSERT_EQ(cfg.profile_enable, want[i] != CT_DEVPROF_NONE, "enable");
		ASSERT_EQ(cfg.profile_buffer, want[i] != CT_DEVPROF_NONE ? 0x1000 : 0, "buffer");
		ASSERT_EQ(cfg.step, i, "step");
		ASSERT_EQ(cfg.invocation_seq, 2 * i, "seq");
		ASSERT_EQ(a2, CT_DEVPROF_NONE, "max 1 per step");
		ASSERT_EQ(c2.profile_enable, 0, "second call off");
		ct_devprof_session_step(&ss);
	}
	/* No buffer: never sampling, whatever the schedule says. */
	ct_devprof_session_init(&ss, &s, 0);
	ss.step = 3;
	ASSERT_EQ(ct_devprof_session_configure(&ss, &cfg, 0), CT_DEVPROF_NONE, "no buffer");
	ASSERT_EQ(cfg.profile_enable, 0, "no buffer off");
}

/* torch 2.6's skip_first_wait: the first cycle starts with its warmup after skip_first. */
TEST(devprof_schedule_skip_first_wait)
{
	static const struct ct_devprof_schedule s = {.skip_first = 2,
						     .wait = 3,
						     .warmup = 1,
						     .active = 2,
						     .repeat = 2,
						     .skip_first_wait = 1};
	static const enum ct_devprof_action want[] = {
	    CT_DEVPROF_NONE,
	    CT_DEVPROF_NONE,
	    CT_DEVPROF_WARMUP,
	    CT_DEVPROF_RECORD,
	    CT_DEVPROF_RECORD_AND_SAVE,
	    CT_DEVPROF_NONE,
	    CT_DEVPROF_NONE,
	    CT_DEVPROF_NONE,
	    CT_DEVPROF_WARMUP,
	    CT_DEVPROF_RECORD,
	    CT_DEVPROF_RECORD_AND_SAVE,
	    CT_DEVPROF_NONE,
	};

	for (uint64_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		ASSERT_EQ(ct_devprof_schedule_action(&s, i), want[i], "action");
}

/* The recorder's sampling path, compiled for the host (the off path: devprof_guard). */
TEST(devprof_recorder)
{
	uint64_t sz = ct_devprof_buffer_size(1, 2, 16, 16, 0);
	uint8_t *buf = calloc(1, sz);
	struct ct_devprof_runtime_config cfg = {0};
	struct ct_devprof_recorder r;
	struct devprof_err err = {0};
	struct devprof_file f;
	struct ct_devprof_slot s;
	struct ct_devprof_record rec;
	uint32_t owner = 42, i;

	if (!ASSERT_OK(ct_devprof_buffer_init(buf, sz, 1000000000, 0, 1, 2, 16, 16, NULL, 0),
		       "init"))
		return;
	cfg.profile_enable = 1;
	cfg.profile_buffer = (uint64_t)(uintptr_t)buf;
	ct_devprof_recorder_init(&r, &cfg, CT_DEVPROF_CORE_AIV, 1);
	ct_devprof_recorder_reset(&r, CT_DEVPROF_CORE_AIV, 1);
	ASSERT_TRUE(ct_devprof_on(&r), "on");
	for (i = 0; i < 20; i++) {
		uint64_t t = ct_devprof_start(&r);

		ASSERT_GT(t, 0, "clock read");
		ct_devprof_record(&r, 1 + i % 3, 7, i, i / 3, &owner, t);
	}
	/* A core the host did not plan for writes nothing. */
	ct_devprof_recorder_init(&r, &cfg, CT_DEVPROF_CORE_AIV, 2);
	ASSERT_FALSE(ct_devprof_on(&r), "unplanned core off");
	ct_devprof_record(&r, 1, 0, 0, 0, &owner, 0);

	ASSERT_OK(devprof_parse(buf, sz, &f, &err), err.msg);
	f.inv[0].base = buf;
	devprof_slot_at(&f.inv[0], 2, &s);
	ASSERT_EQ(s.core_type, CT_DEVPROF_CORE_AIV, "type");
	ASSERT_EQ(s.core_id, 1, "id");
	ASSERT_EQ(s.record_count, 16, "full slot keeps 16");
	ASSERT_EQ(s.dropped_count, 4, "and counts 4 drops");
	devprof_record_at(&f.inv[0], 2, 15, &rec);
	ASSERT_EQ(rec.task_id, 15, "last kept record");
	ASSERT_EQ(rec.owner_id, 42, "owner loaded when sampling");
	ASSERT_EQ(rec.kind, 1 + 15 % 3, "kind");
	devprof_slot_at(&f.inv[0], 1, &s);
	ASSERT_EQ(s.record_count + s.dropped_count, 0, "AIV 0 untouched");
	devprof_file_free(&f);
	free(buf);
}
