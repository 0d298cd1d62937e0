// SPDX-License-Identifier: MIT
/* --metrics: the address parser, the fixed duration buckets, the exposition text. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "diag/diag.h"
#include "export/chrome.h"
#include "metrics/metrics.h"
#include "session.h"
#include "stats.h"
#include "targets.h"

static bool parses(const char *spec, int family, const char *ip, unsigned int port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char err[256], got[64] = "";
	unsigned int p = 0;

	if (!ASSERT_EQ(ct_metrics_parse_addr(spec, &ss, &len, err, sizeof(err)), 0, spec))
		return false;
	if (!ASSERT_EQ(ss.ss_family, family, spec))
		return false;
	if (family == AF_INET) {
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, got, sizeof(got));
		p = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	} else {
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, got, sizeof(got));
		p = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	return ASSERT_STREQ(got, ip, spec) && ASSERT_EQ(p, port, spec);
}

static bool refused(const char *spec)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char err[256] = "";

	return ASSERT_EQ(ct_metrics_parse_addr(spec, &ss, &len, err, sizeof(err)), -EINVAL, spec) &&
	       ASSERT_TRUE(strstr(err, "invalid --metrics") != NULL, err);
}

TEST(metrics_parse_addr)
{
	if (ct_subtest("accepted")) {
		parses("9464", AF_INET, "127.0.0.1", 9464); /* loopback by default */
		parses("0", AF_INET, "127.0.0.1", 0);
		parses("0.0.0.0:9464", AF_INET, "0.0.0.0", 9464);
		parses("10.1.2.3:65535", AF_INET, "10.1.2.3", 65535);
		parses("localhost:80", AF_INET, "127.0.0.1", 80);
		parses("[::1]:9464", AF_INET6, "::1", 9464);
		parses("[::]:1", AF_INET6, "::", 1);
	}
	if (ct_subtest("refused")) {
		const char *bad[] = {"",	   "abc",
				     "65536",	   "-1",
				     "80x",	   ":80",
				     "1.2.3:80",   "1.2.3.4:",
				     "1.2.3.4:+5", "[::1]80",
				     "[::1]:",	   "[zz]:80",
				     "::1:80",	   "host.example:80"};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			refused(bad[i]);
	}
}

TEST(metrics_duration_buckets)
{
	ASSERT_EQ(ct_dur_bucket(0), 0, "0 ns");
	ASSERT_EQ(ct_dur_bucket(1000), 0, "1 us: le is inclusive");
	ASSERT_EQ(ct_dur_bucket(1001), 1, "just above 1 us");
	ASSERT_EQ(ct_dur_bucket(5000), 1, "5 us");
	ASSERT_EQ(ct_dur_bucket(1000000000ULL), 12, "1 s");
	ASSERT_EQ(ct_dur_bucket(60000000000ULL), 15, "60 s");
	ASSERT_EQ(ct_dur_bucket(60000000001ULL), CT_DUR_BUCKETS, "past 60 s: +Inf");
	for (unsigned int i = 1; i < CT_DUR_BUCKETS; i++)
		ASSERT_TRUE(ct_dur_bounds_ns[i] > ct_dur_bounds_ns[i - 1], "bounds ascend");
}

static uint32_t probe_id(const char *name)
{
	const struct ct_libdesc *d;

	for (uint32_t id = 0; id < ct_catalog_size(); id++)
		if (!strcmp(ct_catalog_func(id, &d)->name, name))
			return id;
	return UINT32_MAX;
}

static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
	ct_test_fail(__FILE__, __LINE__, "no line '%s' in:\n%s", line, text);
	return false;
}

TEST(metrics_cost)
{
	struct ct_session s = {0};
	struct ct_opts o = {0};
	struct ct_sbuf b = {0};

	s.opts = &o;
	s.cost.on_at_start = true;
	s.cost.hits = 1000;
	s.cost.ret_hits = 400;
	s.cost.hit_ns = 2500; /* 1.5 ms of entry hits */
	s.cost.ret_ns = 1250; /* 0.5 ms of return hits */
	s.cost.bpf_ns = 1500000;
	s.cost.tracer_cpu_ns = 420000000;
	ct_metrics_render(&s, &b, 1, 0);
	if (!ASSERT_TRUE(b.buf && !b.oom, "rendered"))
		goto out;
	ASSERT_TRUE(!strstr(b.buf, "commtrace_probe_hits_total"), "no cost without --cost");
	o.cost = true;
	ct_metrics_render(&s, &b, 1, 0);
	has_line(b.buf, "# TYPE commtrace_probe_hits_total counter");
	has_line(b.buf, "commtrace_probe_hits_total{probe=\"entry\"} 600");
	has_line(b.buf, "commtrace_probe_hits_total{probe=\"return\"} 400");
	has_line(b.buf, "commtrace_bpf_seconds_total 0.001500000");
	has_line(b.buf, "commtrace_probe_hit_seconds{probe=\"entry\"} 2.5e-06");
	has_line(b.buf, "commtrace_probe_hit_seconds{probe=\"return\"} 1.25e-06");
	has_line(b.buf, "commtrace_targets_added_cpu_seconds_total 0.003500000");
	has_line(b.buf, "commtrace_tracer_cpu_seconds_total 0.420000000");
	s.cost.on_at_start = false; /* statistics off: no figures rather than zeros */
	ct_metrics_render(&s, &b, 1, 0);
	ASSERT_TRUE(!strstr(b.buf, "commtrace_probe_hits_total"), "no cost when not counted");
out:
	ct_sbuf_free(&b);
}

TEST(metrics_render)
{
	uint32_t id = probe_id("MPI_Allreduce");
	struct ct_session s = {0};
	struct ct_proc p = {0};
	struct ct_fstats st = {0};
	struct ct_sbuf b = {0};
	uint64_t durs[] = {800, 1000, 3000, 2000000, 70000000000ULL};

	if (!ASSERT_NEQ(id, UINT32_MAX, "MPI_Allreduce in the catalog"))
		return;
	p.pid = 4242;
	p.rank = 1;
	p.world = 2;
	snprintf(p.comm, sizeof(p.comm), "we\"ird\\");
	p.stats = calloc(ct_catalog_size(), sizeof(*p.stats));
	p.stats[id] = &st;
	st.calls = 6; /* one still in flight */
	st.returned = 5;
	st.bytes_sent = 4096;
	st.bytes_recv = 8192;
	for (size_t i = 0; i < sizeof(durs) / sizeof(durs[0]); i++) {
		ct_hist_add(&st.lat, durs[i]);
		st.dur[ct_dur_bucket(durs[i])]++;
	}
	s.procs[0] = &p;
	s.n_procs = 1;
	s.events = 11;
	s.drops[CT_DROP_RINGBUF] = 3;
	s.dropped_user = 1;

	ct_metrics_render(&s, &b, 1795981032123456789ULL, 0.25);
	if (!ASSERT_TRUE(b.buf && !b.oom, "rendered"))
		goto out;
#define L(x) has_line(b.buf, x)
#define LBL                                                                                        \
	"{pid=\"4242\",rank=\"1\",library=\"mpi\",function=\"MPI_Allreduce\",kind=\"all_reduce\""
	L("# TYPE commtrace_calls_total counter");
	L("commtrace_calls_total" LBL "} 6");
	L("commtrace_calls_completed_total" LBL "} 5");
	L("commtrace_sent_bytes_total" LBL "} 4096");
	L("commtrace_received_bytes_total" LBL "} 8192");
	L("commtrace_in_flight_calls" LBL "} 1");
	L("# TYPE commtrace_call_duration_seconds histogram");
	L("commtrace_call_duration_seconds_bucket" LBL ",le=\"1e-06\"} 2");
	L("commtrace_call_duration_seconds_bucket" LBL ",le=\"5e-06\"} 3");
	L("commtrace_call_duration_seconds_bucket" LBL ",le=\"0.001\"} 3");
	L("commtrace_call_duration_seconds_bucket" LBL ",le=\"0.005\"} 4");
	L("commtrace_call_duration_seconds_bucket" LBL ",le=\"60\"} 4");
	L("commtrace_call_duration_seconds_bucket" LBL ",le=\"+Inf\"} 5");
	L("commtrace_call_duration_seconds_sum" LBL "} 70.002004800");
	L("commtrace_call_duration_seconds_count" LBL "} 5");
	L("commtrace_process_info{pid=\"4242\",rank=\"1\",world_size=\"2\",comm=\"we\\\"ird\\\\\"} "
	  "1");
	L("commtrace_process_exited{pid=\"4242\",rank=\"1\"} 0");
	L("commtrace_traced_processes 1");
	L("commtrace_events_total 11");
	L("commtrace_dropped_events_total 4");
	L("commtrace_drops_total{reason=\"ringbuf_full\"} 3");
	L("commtrace_drops_total{reason=\"user_space\"} 1");
	L("commtrace_snapshot_timestamp_seconds 1795981032.123456789");
	L("commtrace_diagnosis_available 0");

	/* An exited process: nothing in flight any more, its counters stay. */
	p.exited = true;
	p.rank = -1;
	ct_metrics_render(&s, &b, 1, 0);
	L("commtrace_in_flight_calls{pid=\"4242\",rank=\"\",library=\"mpi\",function=\"MPI_"
	  "Allreduce\",kind=\"all_reduce\"} 0");
	L("commtrace_calls_total{pid=\"4242\",rank=\"\",library=\"mpi\",function=\"MPI_"
	  "Allreduce\",kind=\"all_reduce\"} 6");
	L("commtrace_process_exited{pid=\"4242\",rank=\"\"} 1");
#undef L
#undef LBL
out:
	ct_sbuf_free(&b);
	free(p.stats);
}

/* The diagnosis' findings in the exposition (user/diag/diag_metrics.c): a live hang. */
TEST(metrics_findings)
{
	static const struct ct_stack_line site[] = {{"step", "/job/train.py", 42}};
	struct ct_diag_opts o = {.hang_ns = 2000000000ULL, .late_ns = 100000000ULL};
	struct ct_session s = {0};
	struct ct_sbuf b = {0};
	uint64_t t = 1000000000ULL;

	s.diag = ct_diag_new(&o);
	if (!ASSERT_NOT_NULL(s.diag, "diag"))
		return;
	/* #1: rank 1 arrives 0.5 s late; #2: rank 0 waits for rank 1, which never comes */
	for (int k = 0; k < 2; k++)
		for (int r = 0; r < 2; r++) {
			struct ct_diag_call c = {.pid = 100 + r,
						 .tid = 100 + r,
						 .rank = r,
						 .lib = CT_LIB_MPI,
						 .kind = CT_K_ALLREDUCE,
						 .function = "MPI_Allreduce",
						 .comm = 0x1000 + r,
						 .comm_size = 2,
						 .comm_rank = r,
						 .has_count = true,
						 .count = 4,
						 .dtype = "MPI_FLOAT",
						 .bytes = 16,
						 .ts = t + (r ? 500000000ULL : 0),
						 .stack = site,
						 .nstack = 1};

			if (k == 1 && r == 1)
				break;
			ct_diag_call(s.diag, &c);
			if (k == 0)
				ct_diag_ret(s.diag, 100 + r, 100 + r, 0, t + 600000000ULL);
			if (k == 0 && r == 1)
				t += 1000000000ULL;
		}
	ct_metrics_render(&s, &b, 1, 0);
#define L(x) has_line(b.buf, x)
	L("commtrace_diagnosis_available 1");
	L("commtrace_findings_total{kind=\"hang\"} 0");
	L("commtrace_findings_total{kind=\"late_rank\"} 1");
	L("commtrace_findings_total{kind=\"mismatch\"} 0");
	L("commtrace_hung_ranks 0");
	L("commtrace_late_ranks 1");
	L("commtrace_collectives_matched_total 1");
	L("commtrace_skew_max_seconds 0.500000000");
	L("commtrace_skew_last_seconds 0.500000000");
	L("commtrace_late_collectives_total{rank=\"0\"} 0");
	L("commtrace_late_collectives_total{rank=\"1\"} 1");
	ASSERT_EQ(ct_diag_check(s.diag, t + 2100000000ULL), 1, "hang alert");
	ct_metrics_render(&s, &b, 2, 0);
	L("commtrace_findings_total{kind=\"hang\"} 1");
	L("commtrace_hung_ranks 1");
	/* The blocked rank is killed: no rank hung now, the counter stays. */
	ct_diag_proc_exit(s.diag, 100);
	ct_metrics_render(&s, &b, 3, 0);
	L("commtrace_findings_total{kind=\"hang\"} 1");
	L("commtrace_hung_ranks 0");
#undef L
	ct_sbuf_free(&b);
	ct_diag_free(s.diag);
}
