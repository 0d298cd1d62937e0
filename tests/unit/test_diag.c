// SPDX-License-Identifier: MIT
/* The diagnosis' pure logic (user/diag/diag.c) on synthetic call sequences. */
#include <errno.h>
#include <stdlib.h>
#include <cJSON.h>
#include "commtrace/abi.h"
#include "diag/diag.h"
#include "harness.h"

#define MS 1000000ULL

static const struct ct_stack_line site_grad[] = {
    {"all_reduce", "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", 1},
    {"step", "/job/train.py", 42},
};
static const struct ct_stack_line site_loss[] = {{"step", "/job/train.py", 50}};
static const struct ct_stack_line site_group[] = {{"step", "/job/train.py", 30}};
static const struct ct_stack_line site_ag[] = {{"full_tensor", "/job/dtensor.py", 7},
					       {"step", "/job/train.py", 31}};
static const struct ct_stack_line site_ag_plain[] = {{"gather_stats", "/job/train.py", 33}};
static const struct ct_stack_line site_a[] = {{"reduce_partial", "/job/redist.py", 10}};
static const struct ct_stack_line site_b[] = {{"reduce_partial", "/job/redist.py", 11}};

struct world {
	struct ct_diag *d;
	uint64_t t;
};

static struct ct_diag *mk(uint64_t hang_ms, uint64_t late_ms)
{
	struct ct_diag_opts o = {
	    .hang_ns = hang_ms * MS,
	    .late_ns = late_ms * MS,
	    .serial_gap_ns = 5 * MS,
	    .min_repeats = 3,
	};

	return ct_diag_new(&o);
}

/* One collective on rank r (pid 100 + r), handle 0x1000 + comm in that process. */
static struct ct_diag_call call(int r, uint8_t kind, const char *fn, uint64_t comm, int size,
				uint64_t count, const char *dtype, uint64_t ts)
{
	struct ct_diag_call c = {
	    .pid = 100 + r,
	    .tid = 100 + r,
	    .rank = r,
	    .lib = CT_LIB_MPI,
	    .kind = kind,
	    .function = fn,
	    .comm = 0x1000 + comm + 0x100 * r, /* handles differ between processes */
	    .comm_size = size,
	    .comm_rank = r,
	    .has_count = true,
	    .count = count,
	    .dtype = dtype,
	    .bytes = count * 4,
	    .ts = ts,
	};
	return c;
}

static void with_stack(struct ct_diag_call *c, const struct ct_stack_line *s, int n)
{
	c->stack = s;
	c->nstack = n;
}

/* Both ranks do an all-reduce; rank `late` arrives `delay` later; both return at the end. */
static void allreduce2(struct ct_diag *d, uint64_t *t, int late, uint64_t delay, uint64_t count0,
		       uint64_t count1, const char *dt1)
{
	for (int r = 0; r < 2; r++) {
		struct ct_diag_call c =
		    call(r, CT_K_ALLREDUCE, "MPI_Allreduce", 0, 2, r ? count1 : count0,
			 r ? dt1 : "MPI_FLOAT", *t + (r == late ? delay : 0));

		with_stack(&c, site_grad, 2);
		ct_diag_call(d, &c);
	}
	*t += delay + MS;
	for (int r = 0; r < 2; r++)
		ct_diag_ret(d, 100 + r, 100 + r, 0, *t);
	*t += MS;
}

static const struct ct_diag_finding *only(struct ct_diag *d, uint8_t kind, int *n)
{
	const struct ct_diag_finding *f;
	int k = ct_diag_findings(d, &f);

	*n = k;
	for (int i = 0; i < k; i++)
		if (f[i].kind == kind)
			return &f[i];
	return NULL;
}

TEST(diag_skew_late_rank)
{
	struct ct_diag *d = mk(0, 100);
	const struct ct_diag_finding *f;
	uint32_t pid;
	int n, rank;
	uint64_t t = 1000 * MS, wait, matched;

	for (int i = 0; i < 10; i++)
		allreduce2(d, &t, 1, i == 4 ? 500 * MS : 2 * MS, 16, 16, "MPI_FLOAT");
	ASSERT_EQ(ct_diag_matched(d), 10, "matched");
	f = only(d, CT_DF_LATE_RANK, &n);
	if (!ASSERT_NOT_NULL(f, "late finding"))
		goto out;
	ASSERT_EQ(n, 1, "findings");
	ASSERT_EQ(f->nranks, 1, "ranks");
	ASSERT_EQ(f->ranks[0], 1, "late rank");
	ASSERT_EQ(f->seq, 5, "seq of the worst");
	ASSERT_EQ(f->value_ns, 500 * MS, "skew");
	ASSERT_EQ(f->count, 1, "collectives late");
	ASSERT_STREQ(f->site, "step (/job/train.py:42)", "site skips torch frames");
	ASSERT_STREQ(f->comm, "mpi#0/2", "identity");
	ASSERT_TRUE(ct_diag_proc_wait(d, 0, &pid, &rank, &wait, &matched), "proc 0");
	ASSERT_EQ(wait, 500 * MS + 9 * 2 * MS, "rank 0 waited");
	ASSERT_EQ(matched, 10, "rank 0 matched");
	ASSERT_TRUE(ct_diag_proc_wait(d, 1, &pid, &rank, &wait, &matched), "proc 1");
	ASSERT_EQ(wait, 0, "rank 1 never waited");
	{
		const struct ct_diag_top *top;

		ASSERT_EQ(ct_diag_top(d, &top), CT_DIAG_TOP, "top entries");
		ASSERT_EQ(top[0].seq, 5, "worst first");
		ASSERT_EQ(top[0].last_rank, 1, "last rank");
		ASSERT_EQ(top[1].skew_ns, 2 * MS, "then the others");
	}
out:
	ct_diag_free(d);
}

/*
 * Tracing began while rank 1 was inside an all-reduce that rank 0 entered only later: rank
 * 0's half is seen, rank 1's is not, and its return comes as unseen. Rank 0's half must not
 * be matched with rank 1's next all-reduce (every later pair would be one apart).
 */
TEST(diag_in_flight_at_start)
{
	struct ct_diag *d = mk(0, 100);
	uint64_t t = 1000 * MS;
	struct ct_diag_call c = call(0, CT_K_ALLREDUCE, "MPI_Allreduce", 0, 2, 16, "MPI_FLOAT", t);
	const struct ct_diag_drops *dr;
	int n;

	ct_diag_call(d, &c);
	ct_diag_unseen(d, 101, CT_LIB_MPI, t + MS); /* rank 1's, entered before the start */
	ct_diag_ret(d, 100, 100, 0, t + MS);
	t += 200 * MS; /* the next step; each rank computes 200 ms between all-reduces */
	for (int i = 0; i < 5; i++)
		allreduce2(d, &t, 1, 2 * MS, 16, 16, "MPI_FLOAT");
	ASSERT_EQ(ct_diag_matched(d), 5, "matched");
	ASSERT_TRUE(only(d, CT_DF_LATE_RANK, &n) == NULL, "no late rank: the pairs line up");
	ASSERT_EQ(n, 0, "findings");
	dr = ct_diag_drops(d);
	ASSERT_EQ(dr->unseen_dropped, 1, "rank 0's half dropped");
	ASSERT_EQ(dr->unseen_unaligned, 0, "one communicator it could be on");
	/* a second unseen return (another thread) finds nothing left to drop */
	ct_diag_unseen(d, 101, CT_LIB_MPI, t);
	ASSERT_EQ(dr->unseen_dropped, 1, "nothing more");
	ct_diag_free(d);
}

TEST(diag_no_findings_when_clean)
{
	struct ct_diag *d = mk(1000, 100);
	const struct ct_diag_finding *f;
	uint64_t t = MS;

	for (int i = 0; i < 50; i++)
		allreduce2(d, &t, i % 2, 3 * MS, 16, 16, "MPI_FLOAT");
	ASSERT_EQ(ct_diag_check(d, t + 10000 * MS), 0, "no hang: everything returned");
	ASSERT_EQ(ct_diag_findings(d, &f), 0, "findings");
	ASSERT_EQ(ct_diag_matched(d), 50, "matched");
	ASSERT_EQ(ct_diag_drops(d)->window_evicted, 0, "nothing evicted unmatched");
	ct_diag_free(d);
}

TEST(diag_mismatch)
{
	struct ct_diag *d;
	const struct ct_diag_finding *f;
	uint64_t t = MS;
	int n;

	if (ct_subtest("count")) {
		d = mk(0, 100);
		allreduce2(d, &t, 0, MS, 16, 16, "MPI_FLOAT");
		allreduce2(d, &t, 0, MS, 16, 32, "MPI_FLOAT");
		allreduce2(d, &t, 0, MS, 16, 32, "MPI_FLOAT");
		f = only(d, CT_DF_MISMATCH, &n);
		if (ASSERT_NOT_NULL(f, "mismatch")) {
			ASSERT_EQ(f->seq, 2, "first mismatched seq");
			ASSERT_STREQ(f->what, "count 16 vs 32", "what");
			ASSERT_EQ(f->count, 2, "mismatched collectives");
			ASSERT_EQ(f->ranks[0], 0, "rank a");
			ASSERT_EQ(f->ranks[1], 1, "rank b");
			ASSERT_TRUE(strstr(f->stack, "train.py:42") != NULL, "stack a");
			ASSERT_TRUE(strstr(f->stack2, "train.py:42") != NULL, "stack b");
		}
		ct_diag_free(d);
	}
	if (ct_subtest("dtype")) {
		d = mk(0, 100);
		allreduce2(d, &t, 0, MS, 16, 16, "MPI_INT");
		f = only(d, CT_DF_MISMATCH, &n);
		if (ASSERT_NOT_NULL(f, "mismatch"))
			ASSERT_STREQ(f->what, "dtype MPI_FLOAT vs MPI_INT", "what");
		ct_diag_free(d);
	}
	if (ct_subtest("collective")) {
		struct ct_diag_call a = call(0, CT_K_ALLREDUCE, "MPI_Allreduce", 0, 2, 4, NULL, t);
		struct ct_diag_call b = call(1, CT_K_BROADCAST, "MPI_Bcast", 0, 2, 4, NULL, t);

		d = mk(0, 100);
		ct_diag_call(d, &a);
		ct_diag_call(d, &b);
		f = only(d, CT_DF_MISMATCH, &n);
		if (ASSERT_NOT_NULL(f, "mismatch"))
			ASSERT_STREQ(f->what, "collective MPI_Allreduce vs MPI_Bcast", "what");
		ct_diag_free(d);
	}
	if (ct_subtest("vector_counts_may_differ")) {
		struct ct_diag_call a = call(0, CT_K_ALLGATHER, "MPI_Allgatherv", 0, 2, 1, NULL, t);
		struct ct_diag_call b = call(1, CT_K_ALLGATHER, "MPI_Allgatherv", 0, 2, 2, NULL, t);

		d = mk(0, 100);
		ct_diag_call(d, &a);
		ct_diag_call(d, &b);
		ASSERT_EQ(ct_diag_findings(d, &f), 0, "no finding");
		ASSERT_EQ(ct_diag_matched(d), 1, "matched");
		ct_diag_free(d);
	}
}

TEST(diag_hang)
{
	struct ct_diag *d = mk(2000, 100);
	const struct ct_diag_finding *f;
	uint64_t t = MS;
	int n;

	allreduce2(d, &t, 0, MS, 16, 16, "MPI_FLOAT");
	{
		struct ct_diag_call c =
		    call(0, CT_K_ALLREDUCE, "MPI_Allreduce", 0, 2, 16, "MPI_FLOAT", t);

		with_stack(&c, site_grad, 2);
		ct_diag_call(d, &c); /* rank 1 never comes */
	}
	ASSERT_EQ(ct_diag_check(d, t + 1999 * MS), 0, "not yet");
	ASSERT_EQ(ct_diag_check(d, t + 2000 * MS), 1, "alert");
	ASSERT_EQ(ct_diag_check(d, t + 9000 * MS), 0, "once");
	f = only(d, CT_DF_HANG, &n);
	if (ASSERT_NOT_NULL(f, "hang")) {
		ASSERT_EQ(f->seq, 2, "seq");
		ASSERT_EQ(f->nranks, 2, "blocked + missing");
		ASSERT_EQ(f->ranks[0], 0, "blocked rank");
		ASSERT_EQ(f->ranks[1], 1, "missing rank");
		ASSERT_STREQ(f->what, "rank 1 (pid 101) at #1", "missing");
		ASSERT_TRUE(strstr(f->stack, "step (/job/train.py:42)") != NULL, "stack");
	}
	ASSERT_EQ(n, 1, "findings");
	/* The blocked process exits: nothing more to alert about. */
	ct_diag_proc_exit(d, 100);
	ct_diag_free(d);

	/* Both inside one collective, nobody left behind: not this kind of hang. */
	d = mk(2000, 100);
	for (int r = 0; r < 2; r++) {
		struct ct_diag_call c = call(r, CT_K_BARRIER, "MPI_Barrier", 0, 2, 0, NULL, MS);

		ct_diag_call(d, &c);
	}
	ASSERT_EQ(ct_diag_check(d, 5000 * MS), 0, "all arrived");
	ct_diag_free(d);
}

/* Progress per (process, communicator): rank 0 inside #3 since t, rank 1 done with #2. */
TEST(diag_progress)
{
	struct ct_diag *d = mk(2000, 100);
	struct ct_diag_progress g[4];
	uint64_t t = MS;
	char buf[1024];
	FILE *f;
	int n;

	allreduce2(d, &t, 0, MS, 16, 16, "MPI_FLOAT");
	allreduce2(d, &t, 1, MS, 16, 16, "MPI_FLOAT");
	{
		struct ct_diag_call c =
		    call(0, CT_K_ALLREDUCE, "MPI_Allreduce", 0, 2, 16, "MPI_FLOAT", t);

		with_stack(&c, site_grad, 2);
		ct_diag_call(d, &c); /* rank 1 never comes */
	}
	n = ct_diag_progress(d, g, 4);
	if (!ASSERT_EQ(n, 2, "one row per (process, communicator)"))
		return;
	ASSERT_EQ(g[0].pid, 100, "rank 0's pid");
	ASSERT_STREQ(g[0].comm, "mpi#0/2", "identity");
	ASSERT_EQ(g[0].entered, 3, "rank 0 entered");
	ASSERT_EQ(g[0].completed, 2, "rank 0 completed");
	ASSERT_TRUE(g[0].inflight && g[0].inflight_seq == 3 && g[0].inflight_ts == t, "in #3");
	ASSERT_STREQ(g[0].inflight_fn, "MPI_Allreduce", "its function");
	ASSERT_STREQ(g[0].site, "step (/job/train.py:42)", "its call site");
	ASSERT_EQ(g[1].rank, 1, "rank 1");
	ASSERT_TRUE(g[1].entered == 2 && g[1].completed == 2 && !g[1].inflight, "rank 1 done");
	f = fmemopen(buf, sizeof(buf), "w");
	if (!ASSERT_NOT_NULL(f, "fmemopen"))
		return;
	ASSERT_EQ(ct_diag_progress_print(d, f, t + 2500 * MS), 2, "rows printed");
	fclose(f);
	ASSERT_TRUE(strstr(buf, "#3 MPI_Allreduce, 2.500 s in it at step (/job/train.py:42)") !=
			NULL,
		    "the table says where rank 0 is, since when");
	ct_diag_proc_exit(d, 100);
	ASSERT_EQ(ct_diag_progress(d, g, 1), 1, "bounded by max");
	ASSERT_TRUE(g[0].exited && g[0].inflight, "cut short by the exit");
	ct_diag_free(d);
}

/* c10d over Gloo: the gloo:: execution completes the c10d call and keeps it in flight. */
TEST(diag_c10d_gloo_handoff)
{
	struct ct_diag *d = mk(2000, 100);
	struct ct_diag_call c =
	    call(0, CT_K_ALLREDUCE, "ProcessGroupGloo::allreduce", 0, 2, 16, "torch.float32", MS);
	struct ct_diag_call g = c;

	c.lib = CT_LIB_C10D;
	ct_diag_call(d, &c);
	ct_diag_ret(d, 100, 100, 0, 2 * MS); /* the enqueue returns */
	g.lib = CT_LIB_GLOO;
	g.function = "gloo::allreduce";
	g.tid = 555;
	g.ts = 3 * MS;
	ct_diag_call(d, &g); /* executes on a worker, blocked */
	{
		int id;
		uint64_t seq;

		ASSERT_TRUE(ct_diag_call_id(d, 100, 555, 3 * MS, &id, &seq),
			    "the execution has its call's identity");
		ASSERT_EQ(id, 0, "the c10d call's");
		ASSERT_EQ(seq, 1, "and number");
	}
	ASSERT_EQ(ct_diag_check(d, 3000 * MS), 1, "blocked in the execution");
	ASSERT_EQ(ct_diag_ncomms(d), 1, "one identity: gloo is not matched apart");
	ASSERT_EQ(ct_diag_drops(d)->executions_unmatched, 0, "linked");
	ct_diag_free(d);

	d = mk(2000, 100);
	ct_diag_call(d, &c);
	ct_diag_ret(d, 100, 100, 0, 2 * MS);
	ct_diag_call(d, &g);
	ct_diag_ret(d, 100, 555, 0, 4 * MS); /* the execution completes */
	ASSERT_EQ(ct_diag_check(d, 3000 * MS), 0, "completed");
	ct_diag_free(d);
}

/* The identity and number each call gets: the Chrome export's rank→rank key. */
TEST(diag_call_id)
{
	struct ct_diag *d = mk(0, 1000);
	/* ids[r][k]: rank r's k-th call; the numbers follow the communicator, not the function */
	int ids[2][4], members;
	uint64_t seq, colls, want_seq[2][4] = {{1, 1, 2, 2}, {1, 1, 2, 2}};
	/* both ranks first use A (0) then B (0x40); then rank 0 calls A, B and rank 1 B, A */
	uint64_t comm[2][4] = {{0, 0x40, 0, 0x40}, {0, 0x40, 0x40, 0}};
	char name[48];
	bool amb;

	for (int k = 0; k < 4; k++)
		for (int r = 0; r < 2; r++) {
			struct ct_diag_call c = call(r, CT_K_ALLREDUCE, "MPI_Allreduce", comm[r][k],
						     2, 8, "MPI_FLOAT", (uint64_t)(1 + k) * MS);

			ct_diag_call(d, &c);
			ASSERT_TRUE(ct_diag_call_id(d, c.pid, c.tid, c.ts, &ids[r][k], &seq),
				    "identified");
			ASSERT_EQ(seq, want_seq[r][k], "its number on the communicator");
			ct_diag_ret(d, c.pid, c.tid, 0, c.ts + MS / 2);
		}
	ASSERT_EQ(ct_diag_ncomms(d), 2, "two identities of one size");
	ASSERT_NEQ(ids[0][0], ids[0][1], "A and B apart");
	ASSERT_EQ(ids[0][0], ids[1][0], "A in both ranks");
	ASSERT_EQ(ids[0][2], ids[1][3], "A's second collective in both ranks");
	ASSERT_EQ(ids[0][3], ids[1][2], "B's second collective in both ranks");
	ASSERT_TRUE(ct_diag_comm_info(d, ids[0][1], name, sizeof(name), &members, &colls, &amb),
		    "B's name");
	ASSERT_STREQ(name, "mpi#1/2", "named by library, first use and size");
	ASSERT_FALSE(amb, "not ambiguous");
	ASSERT_FALSE(ct_diag_call_id(d, 100, 100, MS, &ids[0][0], &seq), "another call came since");
	{
		struct ct_diag_call c =
		    call(0, CT_K_ALLREDUCE, "MPI_Allreduce", 0, 2, 8, "MPI_FLOAT", 9 * MS);

		c.depth = 1;
		ct_diag_call(d, &c);
		ASSERT_FALSE(ct_diag_call_id(d, c.pid, c.tid, c.ts, &ids[0][0], &seq),
			     "a nested call has none of its own");
	}
	ct_diag_free(d);
}

TEST(diag_period)
{
	/* setup X Y, then [A A A B] x 5, then Z */
	uint32_t s[32];
	uint64_t n = 0, len;

	s[n++] = 90;
	s[n++] = 91;
	for (int i = 0; i < 5; i++) {
		s[n++] = 1;
		s[n++] = 1;
		s[n++] = 1;
		s[n++] = 2;
	}
	ASSERT_EQ(ct_diag_period(s, n, 64, &len), 4, "period");
	ASSERT_EQ(len, 20, "run");
	ASSERT_EQ(ct_diag_period(s, 5, 64, &len), 1, "A A A alone looks periodic");
	ASSERT_EQ(ct_diag_period(s, 10, 64, &len), 0, "two steps are not enough");
}

/* Steps from the per-process sequence, and the anti-patterns that need them. */
static void job(struct ct_diag *d, int steps, bool new_group, bool full_tensor, bool grow)
{
	uint64_t t = MS;

	for (int r = 0; r < 2; r++) { /* setup: one broadcast */
		struct ct_diag_call c =
		    call(r, CT_K_BROADCAST, "MPI_Bcast", 0, 2, 64, "MPI_FLOAT", t);

		ct_diag_call(d, &c);
		ct_diag_ret(d, 100 + r, 100 + r, 0, t + MS);
	}
	for (int k = 0; k < steps; k++) {
		for (int r = 0; r < 2; r++) {
			struct ct_diag_call c;

			t += 10 * MS;
			if (new_group) {
				c = call(r, CT_K_ALLREDUCE, "MPI_Allreduce", 0x10 * (k + 1), 2, 4,
					 "MPI_FLOAT", t);
				with_stack(&c, site_group, 1);
				ct_diag_call(d, &c);
				ct_diag_ret(d, 100 + r, 100 + r, 0, t + MS);
			}
			if (full_tensor) {
				c = call(r, CT_K_ALLGATHER, "MPI_Allgather", 0, 2, 256, "MPI_FLOAT",
					 t);
				with_stack(&c, site_ag, 2);
				ct_diag_call(d, &c);
				ct_diag_ret(d, 100 + r, 100 + r, 0, t + MS);
			}
			c = call(r, CT_K_ALLREDUCE, "MPI_Allreduce", 0, 2,
				 grow ? 1000 * (k + 1) : 1000, "MPI_FLOAT", t + 2 * MS);
			with_stack(&c, site_grad, 2);
			ct_diag_call(d, &c);
			ct_diag_ret(d, 100 + r, 100 + r, 0, t + 3 * MS);
			c = call(r, CT_K_ALLREDUCE, "MPI_Allreduce", 0, 2, 1, "MPI_FLOAT",
				 t + 4 * MS);
			with_stack(&c, site_loss, 1);
			ct_diag_call(d, &c);
			ct_diag_ret(d, 100 + r, 100 + r, 0, t + 5 * MS);
		}
	}
}

TEST(diag_steps_and_antipatterns)
{
	struct ct_diag *d;
	struct ct_diag_steps_info si;
	const struct ct_diag_finding *f;
	int n;

	if (ct_subtest("steps_exact_no_findings")) {
		d = mk(0, 100);
		job(d, 7, false, false, false);
		ASSERT_TRUE(ct_diag_proc_steps(d, 0, &si), "steps");
		ASSERT_EQ(si.steps, 7, "steps");
		ASSERT_EQ(si.period, 2, "collectives per step");
		ASSERT_EQ(si.first_step_bytes, 4004, "bytes per step");
		ASSERT_EQ(ct_diag_findings(d, &f), 0, "findings");
		ct_diag_free(d);
	}
	if (ct_subtest("new_group_every_step")) {
		d = mk(0, 100);
		job(d, 6, true, false, false);
		f = only(d, CT_DF_COMM_CREATION, &n);
		ASSERT_EQ(n, 1, "findings");
		if (ASSERT_NOT_NULL(f, "comm creation")) {
			ASSERT_EQ(f->count, 5, "communicators after the first step");
			ASSERT_EQ(f->total, 6, "steps");
			ASSERT_EQ(f->nranks, 2, "both ranks");
			ASSERT_STREQ(f->site, "step (/job/train.py:30)", "site");
		}
		ct_diag_free(d);
	}
	if (ct_subtest("full_tensor_every_step")) {
		d = mk(0, 100);
		job(d, 5, false, true, false);
		f = only(d, CT_DF_REPEATED_ALLGATHER, &n);
		ASSERT_EQ(n, 1, "findings");
		if (ASSERT_NOT_NULL(f, "allgather")) {
			ASSERT_EQ(f->count, 5, "steps");
			ASSERT_EQ(f->bytes, 1024, "bytes");
			ASSERT_STREQ(f->site, "full_tensor (/job/dtensor.py:7)", "site");
		}
		ct_diag_free(d);
	}
	if (ct_subtest("traffic_growth")) {
		d = mk(0, 100);
		job(d, 6, false, false, true);
		f = only(d, CT_DF_TRAFFIC_GROWTH, &n);
		ASSERT_EQ(n, 1, "findings");
		if (ASSERT_NOT_NULL(f, "growth")) {
			ASSERT_EQ(f->count, 5, "steps growing");
			ASSERT_EQ(f->bytes2, 6000 * 4 + 4, "last step bytes");
		}
		ct_diag_free(d);
	}
}

TEST(diag_plain_allgather_is_not_flagged)
{
	struct ct_diag *d = mk(0, 100);
	const struct ct_diag_finding *f;
	uint64_t t = MS;

	for (int k = 0; k < 6; k++)
		for (int r = 0; r < 2; r++) {
			struct ct_diag_call c =
			    call(r, CT_K_ALLGATHER, "MPI_Allgather", 0, 2, 8, "MPI_FLOAT", t += MS);

			with_stack(&c, site_ag_plain, 1);
			ct_diag_call(d, &c);
			ct_diag_ret(d, 100 + r, 100 + r, 0, t + 1);
		}
	ASSERT_EQ(ct_diag_findings(d, &f), 0, "no full_tensor/unshard on the stack");
	ct_diag_free(d);
}

TEST(diag_serialized_reductions)
{
	struct ct_diag *d = mk(0, 1000);
	const struct ct_diag_finding *f;
	uint64_t t = MS;
	int n;

	for (int k = 0; k < 4; k++)
		for (int r = 0; r < 2; r++) {
			struct ct_diag_call a =
			    call(r, CT_K_ALLREDUCE, "MPI_Allreduce", 0, 2, 8, "MPI_FLOAT", t);
			struct ct_diag_call b = call(r, CT_K_REDUCE_SCATTER, "MPI_Reduce_scatter",
						     0x40, 2, 8, "MPI_FLOAT", t + 2 * MS);

			with_stack(&a, site_a, 1);
			with_stack(&b, site_b, 1);
			ct_diag_call(d, &a);
			ct_diag_ret(d, 100 + r, 100 + r, 0, t + MS);
			ct_diag_call(d, &b); /* 1 ms after the first completed, other comm */
			ct_diag_ret(d, 100 + r, 100 + r, 0, t + 3 * MS);
			t += 10 * MS;
		}
	f = only(d, CT_DF_SERIAL_REDUCTIONS, &n);
	if (ASSERT_NOT_NULL(f, "serialized")) {
		ASSERT_EQ(f->count, 4, "occurrences");
		ASSERT_EQ(f->nranks, 2, "both ranks");
		ASSERT_EQ(f->value_ns, MS, "gap");
		ASSERT_STREQ(f->site, "reduce_partial (/job/redist.py:10)", "first site");
		ASSERT_STREQ(f->site2, "reduce_partial (/job/redist.py:11)", "second site");
	}
	ct_diag_free(d);
}

TEST(diag_bounds)
{
	struct ct_diag_opts o = {.late_ns = 100 * MS, .max_comms = 64};
	struct ct_diag *d = ct_diag_new(&o);
	uint64_t t = MS;

	/* Rank 0 runs 100 collectives ahead: the window forgets the oldest, and says so. */
	for (int i = 0; i < 100; i++) {
		struct ct_diag_call c = call(0, CT_K_BARRIER, "MPI_Barrier", 0, 2, 0, NULL, t++);

		ct_diag_call(d, &c);
		ct_diag_ret(d, 100, 100, 0, t++);
	}
	{
		struct ct_diag_call c = call(1, CT_K_BARRIER, "MPI_Barrier", 0, 2, 0, NULL, t++);

		ct_diag_call(d, &c);
	}
	ASSERT_EQ(ct_diag_drops(d)->window_evicted, 0, "one member: nothing to match yet");
	for (int i = 0; i < 40; i++) {
		struct ct_diag_call c = call(0, CT_K_BARRIER, "MPI_Barrier", 0, 2, 0, NULL, t++);

		ct_diag_call(d, &c);
	}
	ASSERT_EQ(ct_diag_drops(d)->window_evicted, 40, "evicted before rank 1 came");
	/* More handles than the table: the oldest forgotten, counted. */
	for (int i = 0; i < CT_DIAG_HANDLES + 3; i++) {
		struct ct_diag_call c =
		    call(1, CT_K_BARRIER, "MPI_Barrier", 0x10000 * (i + 1), 3, 0, NULL, t++);

		ct_diag_call(d, &c);
	}
	ASSERT_EQ(ct_diag_drops(d)->handles_evicted, 4, "1 + 67 handles in 64 slots");
	ASSERT_EQ(ct_diag_ncomms(d), 64, "identities capped");
	ASSERT_GT(ct_diag_drops(d)->comms_over_limit, 0, "and counted");
	ct_diag_free(d);
}

/*
 * The tables grow with the job: 4096 ranks on one world and 2048 pairs of them, every
 * collective matched, nothing dropped; a cap set lower stops them there and counts it.
 */
TEST(diag_tables_grow)
{
	struct ct_diag_opts o = {.late_ns = 100 * MS};
	struct ct_diag *d = ct_diag_new(&o);
	uint64_t t = MS;
	const int n = 4096;

	for (int r = 0; r < n; r++) {
		struct ct_diag_call w = call(r, CT_K_BARRIER, "MPI_Barrier", 0, n, 0, NULL, t);
		struct ct_diag_call p =
		    call(r, CT_K_ALLREDUCE, "MPI_Allreduce", 1, 2, 4, "MPI_INT", t + MS);

		w.has_leader = p.has_leader = true;
		w.leader = 0;
		p.leader = r & ~1; /* pairs {0, 1}, {2, 3}, ...: one size, one order */
		p.comm_rank = r & 1;
		ct_diag_call(d, &w);
		ct_diag_call(d, &p);
	}
	ASSERT_EQ(ct_diag_nprocs(d), n, "every process");
	ASSERT_EQ(ct_diag_ncomms(d), 1 + n / 2, "the world and each pair");
	ASSERT_EQ(ct_diag_nmembers(d), 2 * n, "two members a rank");
	ASSERT_EQ(ct_diag_matched(d), 1 + n / 2, "the barrier and every pair's all-reduce");
	ASSERT_EQ(ct_diag_drops(d)->members_over_limit + ct_diag_drops(d)->comms_over_limit +
		      ct_diag_drops(d)->procs_over_limit + ct_diag_drops(d)->ambiguous,
		  0, "nothing dropped");
	{
		char name[48];
		int members;
		uint64_t colls;
		bool amb;

		ASSERT_TRUE(ct_diag_comm_info(d, 2, name, sizeof(name), &members, &colls, &amb),
			    "third identity");
		ASSERT_STREQ(name, "mpi#0/2@2", "named by its leader");
		ASSERT_EQ(members, 2, "its members");
	}
	ct_diag_free(d);
	o.max_procs = 100;
	o.max_members = 150;
	d = ct_diag_new(&o);
	for (int r = 0; r < 200; r++) {
		struct ct_diag_call w = call(r, CT_K_BARRIER, "MPI_Barrier", 0, 200, 0, NULL, t);
		struct ct_diag_call p = call(r, CT_K_BARRIER, "MPI_Barrier", 1, 200, 0, NULL, t);

		ct_diag_call(d, &w);
		ct_diag_call(d, &p);
	}
	ASSERT_EQ(ct_diag_nprocs(d), 100, "processes capped");
	ASSERT_EQ(ct_diag_drops(d)->procs_over_limit, 200, "the others' calls counted");
	ASSERT_EQ(ct_diag_nmembers(d), 150, "members capped");
	ASSERT_EQ(ct_diag_drops(d)->members_over_limit, 50, "the rest counted");
	ct_diag_free(d);
}

/* Two groups of one size made in one order: told apart by their leaders, not without. */
TEST(diag_leader_identity)
{
	for (int known = 0; known < 2; known++) {
		struct ct_diag *d = mk(0, 100);
		uint64_t t = MS;

		for (int r = 0; r < 4; r++) {
			struct ct_diag_call c =
			    call(r, CT_K_ALLREDUCE, "MPI_Allreduce", 1, 2, 4, "MPI_INT", t + r);

			c.comm_rank = r % 2;
			c.has_leader = known;
			c.leader = r < 2 ? 0 : 2;
			ct_diag_call(d, &c);
		}
		ASSERT_EQ(ct_diag_ncomms(d), known ? 2 : 1, "identities");
		/* without: the first pair matched before the clash was seen, then no more */
		ASSERT_EQ(ct_diag_matched(d), known ? 2 : 1, "matched");
		ASSERT_EQ(ct_diag_drops(d)->ambiguous, known ? 0 : 2, "ambiguous without leaders");
		ct_diag_free(d);
	}
}

/*
 * merge's replay (diag_replay.c): each rank's diag_log, as two tracers would write it,
 * replayed together gives the findings of one tracer of both ranks; a hang is found
 * again from the call that never completed.
 */
TEST(diag_log_replay)
{
	struct ct_diag *d = mk(2000, 100), *m = mk(2000, 100);
	struct ct_diag_replay_proc rp[2];
	const struct ct_diag_finding *f, *g;
	cJSON *procs[2];
	uint64_t t = 1000 * MS;
	char err[256] = "";
	int n, k;

	for (int i = 0; i < 6; i++)
		allreduce2(d, &t, 1, i == 3 ? 700 * MS : 2 * MS, 16, i == 4 ? 8 : 16, "MPI_FLOAT");
	{
		struct ct_diag_call c =
		    call(0, CT_K_ALLREDUCE, "MPI_Allreduce", 0, 2, 16, "MPI_FLOAT", t);

		with_stack(&c, site_grad, 2);
		ct_diag_call(d, &c); /* rank 1 never comes */
	}
	for (int r = 0; r < 2; r++) {
		procs[r] = cJSON_CreateObject();
		cJSON_AddNumberToObject(procs[r], "pid", 100 + r);
		cJSON_AddNumberToObject(procs[r], "rank", r);
		cJSON_AddItemToObject(procs[r], "diag_log", ct_diag_log_json(d, 100 + r));
		rp[r] = (struct ct_diag_replay_proc){procs[r], 100 + r, t + 5000 * MS};
	}
	ASSERT_EQ(cJSON_GetArraySize(
		      cJSON_GetObjectItem(cJSON_GetObjectItem(procs[0], "diag_log"), "records")),
		  7, "rank 0 logged");
	if (!ASSERT_EQ(ct_diag_replay(m, rp, 2, err, sizeof(err)), 0, err))
		goto out;
	ASSERT_EQ(ct_diag_matched(m), ct_diag_matched(d), "matched");
	ASSERT_EQ(ct_diag_matched(m), 6, "matched");
	n = ct_diag_findings(d, &f);
	ASSERT_EQ(n, 2, "live: late, mismatch");
	k = ct_diag_findings(m, &g);
	if (!ASSERT_EQ(k, 3, "replay: hang, mismatch, late"))
		goto out;
	ASSERT_EQ(g[0].kind, CT_DF_HANG, "hang first");
	ASSERT_EQ(g[0].seq, 7, "hang seq");
	ASSERT_TRUE(g[0].value_ns >= 2000 * MS && g[0].value_ns < 2250 * MS, "blocked ~2 s");
	ASSERT_STREQ(g[0].what, "rank 1 (pid 101) at #6", "missing");
	for (int i = 0; i < n; i++) {
		const struct ct_diag_finding *x = &g[i + 1];

		ASSERT_EQ(x->kind, f[i].kind, "kind");
		ASSERT_EQ(x->seq, f[i].seq, "seq");
		ASSERT_EQ(x->count, f[i].count, "count");
		ASSERT_EQ(x->value_ns, f[i].value_ns, "skew");
		ASSERT_STREQ(x->site, f[i].site, "site");
		ASSERT_STREQ(x->summary, f[i].summary, "summary");
	}
	/* a malformed log is refused with the reason */
	cJSON_ReplaceItemInObject(
	    cJSON_GetArrayItem(
		cJSON_GetObjectItem(cJSON_GetObjectItem(procs[1], "diag_log"), "records"), 0),
	    "function", cJSON_CreateString("MPI_Nope"));
	ct_diag_free(m);
	m = mk(2000, 100);
	ASSERT_EQ(ct_diag_replay(m, rp, 2, err, sizeof(err)), -EINVAL, "refused");
	ASSERT_STREQ(err, "process 1: diag_log record 0: unknown function 'MPI_Nope'", "reason");
out:
	for (int r = 0; r < 2; r++)
		cJSON_Delete(procs[r]);
	ct_diag_free(m);
	ct_diag_free(d);
}
