// SPDX-License-Identifier: MIT
/* The pure parts of the --chrome exporter: escaping, the nesting check, the flow matchers. */
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "harness.h"
#include "export/chrome.h"
#include "targets.h"
#include "tree.h"
#include "util/intern.h"

static bool jstr_is(const char *in, const char *want)
{
	struct ct_sbuf b = {0};
	bool ok;

	ct_sbuf_jstr(&b, in);
	ok = ASSERT_STREQ(b.buf, want, in ? in : "(null)");
	ct_sbuf_free(&b);
	return ok;
}

TEST(chrome_escape)
{
	if (ct_subtest("plain")) {
		jstr_is("ProcessGroupGloo::allreduce", "\"ProcessGroupGloo::allreduce\"");
		jstr_is("", "\"\"");
		jstr_is(NULL, "null");
	}
	if (ct_subtest("specials")) {
		jstr_is("a\"b\\c", "\"a\\\"b\\\\c\"");
		jstr_is("l1\nl2\r\t", "\"l1\\nl2\\r\\t\"");
		jstr_is("\x01\x1f", "\"\\u0001\\u001f\"");
		jstr_is("/path/x.py", "\"/path/x.py\""); /* '/' needs no escape */
	}
	if (ct_subtest("utf8")) {
		jstr_is("µs → ok", "\"µs → ok\"");
		jstr_is("\xf0\x9f\x98\x80", "\"\xf0\x9f\x98\x80\"");
		/* invalid: lone continuation, overlong, surrogate, truncated sequence */
		jstr_is("a\x80z", "\"a\\ufffdz\"");
		jstr_is("\xc0\xaf", "\"\\ufffd\\ufffd\"");
		jstr_is("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");
		jstr_is("\xe2\x82", "\"\\ufffd\\ufffd\"");
	}
	if (ct_subtest("round_trip")) {
		/* every byte 1..255 in one string: cJSON must parse the result */
		char in[256];
		struct ct_sbuf b = {0};
		cJSON *j;

		for (int i = 1; i < 256; i++)
			in[i - 1] = (char)i;
		in[255] = 0;
		ct_sbuf_jstr(&b, in);
		j = cJSON_Parse(b.buf);
		ASSERT_TRUE(cJSON_IsString(j), "parses as a JSON string");
		if (j)
			ASSERT_EQ(strncmp(j->valuestring, in, 127), 0, "ASCII kept");
		cJSON_Delete(j);
		ct_sbuf_free(&b);
	}
	if (ct_subtest("us")) {
		struct ct_sbuf b = {0};

		ct_sbuf_us(&b, 4081138133109ull);
		ASSERT_STREQ(b.buf, "4081138133.109", "ns as µs");
		ct_sbuf_reset(&b);
		ct_sbuf_us(&b, 5);
		ASSERT_STREQ(b.buf, "0.005", "below 1 µs");
		ct_sbuf_free(&b);
	}
}

static size_t bad_ids(struct ct_span *s, size_t n, uint32_t *ids)
{
	size_t k = 0, bad = ct_span_check(s, n);

	for (size_t i = 0; i < n; i++)
		if (s[i].bad)
			ids[k++] = s[i].id;
	ASSERT_EQ(k, bad, "count returned");
	return k;
}

TEST(chrome_span_check)
{
	uint32_t ids[8];

	if (ct_subtest("nested")) {
		struct ct_span s[] = {{30, 40, 3}, {0, 100, 1}, {10, 50, 2}, {60, 70, 4}};

		ASSERT_EQ(bad_ids(s, 4, ids), 0, "properly nested");
	}
	if (ct_subtest("equal_and_touching")) {
		struct ct_span s[] = {{10, 20, 1}, {10, 20, 2}, {20, 30, 3}, {20, 20, 4}};

		ASSERT_EQ(bad_ids(s, 4, ids), 0, "equal spans nest, touching ones follow");
	}
	if (ct_subtest("partial")) {
		struct ct_span s[] = {{0, 50, 1}, {40, 60, 2}, {45, 48, 3}};

		/* 2 straddles 1's end: 2 goes; 3 nests in 1 then */
		ASSERT_EQ(bad_ids(s, 3, ids), 1, "one partial overlap");
		ASSERT_EQ(ids[0], 2, "the later one is marked");
	}
	if (ct_subtest("deep_then_partial")) {
		struct ct_span s[] = {{0, 100, 1}, {10, 90, 2}, {20, 30, 3}, {80, 95, 4}};

		ASSERT_EQ(bad_ids(s, 4, ids), 1, "straddles the inner parent");
		ASSERT_EQ(ids[0], 4, "marked");
	}
}

TEST(chrome_xmatch)
{
	static struct ct_xmatch m;
	const char *ar = "gloo::allreduce", *bc = "gloo::broadcast";
	struct ct_xhalf first, h0 = {100, 101, 1000, 2000}, h1 = {200, 201, 1100, 2100};
	struct ct_xkey k = {.function = ar, .comm = 0, .seq = 1};

	memset(&m, 0, sizeof(m));
	ASSERT_FALSE(ct_xmatch_add(&m, &k, &h0, &first), "first half: nothing yet");
	ASSERT_FALSE(ct_xmatch_add(&m, &k, &h0, &first), "same process again: not a match");
	ASSERT_TRUE(ct_xmatch_add(&m, &k, &h1, &first), "other rank, same key");
	ASSERT_EQ(first.pid, 100, "from the first half");
	ASSERT_EQ(first.ts, 1000, "its time");
	k.seq = 2;
	ASSERT_FALSE(ct_xmatch_add(&m, &k, &h1, &first), "another sequence number");
	k = (struct ct_xkey){.function = bc, .comm = 0, .seq = 1};
	ASSERT_FALSE(ct_xmatch_add(&m, &k, &h1, &first), "another function");
	/* the same group size, function and number on another communicator: not a half */
	k = (struct ct_xkey){.function = ar, .comm = 1, .seq = 1};
	ASSERT_FALSE(ct_xmatch_add(&m, &k, &h1, &first), "another communicator");
	k = (struct ct_xkey){.function = ar, .comm = 0, .sub = 1, .seq = 1};
	ASSERT_FALSE(ct_xmatch_add(&m, &k, &h1, &first), "a call nested in it");
	k = (struct ct_xkey){.function = ar, .comm = 1, .seq = 1};
	ASSERT_TRUE(ct_xmatch_add(&m, &k, &h0, &first), "the other communicator's own half");
	ASSERT_EQ(first.pid, 200, "from its first half");
	/* bounded: the oldest are forgotten and counted */
	for (uint64_t i = 0; i < CT_XMATCH_SLOTS; i++) {
		struct ct_xkey x = {.function = bc, .comm = 8, .seq = 100 + i};

		ct_xmatch_add(&m, &x, &h0, &first);
	}
	ASSERT_GT(m.evicted, 0, "evictions counted");
	k = (struct ct_xkey){.function = ar, .comm = 0, .seq = 1};
	ASSERT_FALSE(ct_xmatch_add(&m, &k, &h1, &first), "forgotten");
}

TEST(chrome_handoff)
{
	static struct ct_handoff q;
	struct ct_xhalf c1 = {10, 10, 100, 0}, c2 = {10, 10, 300, 0}, g, src, dst;
	int s1, s2, w;

	memset(&q, 0, sizeof(q));
	s1 = ct_handoff_caller(&q, 1, &c1);
	s2 = ct_handoff_caller(&q, 1, &c2);
	g = (struct ct_xhalf){10, 20, 50, 0};
	ASSERT_EQ(ct_handoff_worker(&q, 1, &g), -1, "a worker call before any caller call");
	g.ts = 150;
	w = ct_handoff_worker(&q, 2, &g);
	ASSERT_EQ(w, -1, "another kind");
	w = ct_handoff_worker(&q, 1, &g);
	ASSERT_EQ(w, s1, "the oldest unmatched caller call before it");
	ASSERT_FALSE(ct_handoff_end(&q, s1, false, 120, &src, &dst), "worker still running");
	ASSERT_TRUE(ct_handoff_end(&q, w, true, 180, &src, &dst), "both ends done");
	ASSERT_EQ(src.ts, 100, "src");
	ASSERT_EQ(src.end, 120, "src end");
	ASSERT_EQ(dst.tid, 20, "dst thread");
	ASSERT_EQ(dst.end, 180, "dst end");
	g.ts = 310;
	w = ct_handoff_worker(&q, 1, &g);
	ASSERT_EQ(w, s2, "the next one");
	g.ts = 320;
	ASSERT_EQ(ct_handoff_worker(&q, 1, &g), -1, "all matched");
}

/* Names read from a target become valid UTF-8 without control characters. */
TEST(intern_sanitizes_names)
{
	ASSERT_STREQ(ct_intern("fc2"), "fc2", "ASCII kept");
	ASSERT_STREQ(ct_intern("caf\xc3\xa9"), "caf\xc3\xa9", "UTF-8 kept");
	ASSERT_STREQ(ct_intern("a\xff"
			       "b\x01"
			       "c"),
		     "a?b?c", "invalid byte, control");
	ASSERT_STREQ(ct_intern("x\xc3"), "x?", "truncated sequence");
	ASSERT_STREQ(ct_intern("\xed\xa0\x80"), "???", "surrogate");
	ASSERT_TRUE(ct_intern("a\xff"
			      "b\x01"
			      "c") == ct_intern("a?b?c"),
		    "one interned copy");
}
