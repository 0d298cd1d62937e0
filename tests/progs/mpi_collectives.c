// SPDX-License-Identifier: MIT
/*
 * A real Open MPI workload for the integration tests: every rank issues a known, varied
 * mix of collectives and point-to-point calls and keeps its own ledger of what it passed
 * to the library (calls, bytes sent, bytes received, datatype and reduce op per function;
 * per call, in "args", the op and the root or peer of the functions that take one),
 * counted by the tracer's rules (docs: tests/integration/test_collectives.py header). The
 * tests compare the tracer's JSON and Chrome trace with this ledger, number for number.
 *
 *   mpi_collectives [--iters N] [--wait-file PATH] [--expect FILE] [--progress FILE]
 *                   [--pause-after K --pause-file PATH]
 *
 * --wait-file: after MPI_Init, write our pid to PATH.pid.RANK, then poll until PATH
 *   exists before the first ledgered call, so a tracer can attach first.
 * --expect:    write the final ledger to FILE.RANK (JSON).
 * --progress:  rewrite the ledger to FILE.RANK (atomically) after every iteration, so a
 *   test that stops the tracer or kills a rank knows exactly what was done until then.
 * --pause-after/--pause-file: after iteration K, poll until the pause file exists; no
 *   MPI call is made while paused (a quiet point for SIGINT / SIGKILL).
 *
 * Calls made outside the ledger window (MPI_Init, MPI_Comm_rank, MPI_Comm_size before
 * the wait; MPI_Finalize after the ledger is written) are listed under "setup".
 */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum fn {
	F_ALLREDUCE,
	F_REDUCE,
	F_BCAST,
	F_ALLGATHER,
	F_ALLGATHERV,
	F_GATHER,
	F_GATHERV,
	F_SCATTER,
	F_SCATTERV,
	F_ALLTOALL,
	F_ALLTOALLV,
	F_REDUCE_SCATTER,
	F_REDUCE_SCATTER_BLOCK,
	F_BARRIER,
	F_SEND,
	F_RECV,
	F_ISEND,
	F_IRECV,
	F_WAIT,
	F_WAITALL,
	F_IALLREDUCE,
	F_MAX,
};

static const char *const fn_name[F_MAX] = {
    [F_ALLREDUCE] = "MPI_Allreduce",
    [F_REDUCE] = "MPI_Reduce",
    [F_BCAST] = "MPI_Bcast",
    [F_ALLGATHER] = "MPI_Allgather",
    [F_ALLGATHERV] = "MPI_Allgatherv",
    [F_GATHER] = "MPI_Gather",
    [F_GATHERV] = "MPI_Gatherv",
    [F_SCATTER] = "MPI_Scatter",
    [F_SCATTERV] = "MPI_Scatterv",
    [F_ALLTOALL] = "MPI_Alltoall",
    [F_ALLTOALLV] = "MPI_Alltoallv",
    [F_REDUCE_SCATTER] = "MPI_Reduce_scatter",
    [F_REDUCE_SCATTER_BLOCK] = "MPI_Reduce_scatter_block",
    [F_BARRIER] = "MPI_Barrier",
    [F_SEND] = "MPI_Send",
    [F_RECV] = "MPI_Recv",
    [F_ISEND] = "MPI_Isend",
    [F_IRECV] = "MPI_Irecv",
    [F_WAIT] = "MPI_Wait",
    [F_WAITALL] = "MPI_Waitall",
    [F_IALLREDUCE] = "MPI_Iallreduce",
};

struct entry {
	unsigned long long calls, sent, recv;
	const char *dtype; /* NULL: none passed; "mixed" once two differ */
	const char *op;	   /* the reduce op passed, as the tracer names it; "mixed" */
	char *args;	   /* per call, JSON: {"op": ..., "root"/"peer": ...} */
	size_t args_len;
};

static struct entry ledger[F_MAX];
static int rank, size, iters_done;

/* Datatypes and their sizes as C sees them (no MPI_Type_size call inside the window). */
struct dt {
	MPI_Datatype t;
	const char *name;
	size_t size;
};
#define DT_DOUBLE ((struct dt){MPI_DOUBLE, "MPI_DOUBLE", sizeof(double)})
#define DT_INT	  ((struct dt){MPI_INT, "MPI_INT", sizeof(int)})
#define DT_FLOAT  ((struct dt){MPI_FLOAT, "MPI_FLOAT", sizeof(float)})
#define DT_CHAR	  ((struct dt){MPI_CHAR, "MPI_CHAR", sizeof(char)})
#define DT_LL	  ((struct dt){MPI_LONG_LONG, "MPI_LONG_LONG", sizeof(long long)})

static void led(enum fn f, unsigned long long sent, unsigned long long recv, const char *dtype)
{
	struct entry *e = &ledger[f];

	e->calls++;
	e->sent += sent;
	e->recv += recv;
	if (!dtype)
		return;
	if (!e->dtype)
		e->dtype = dtype;
	else if (strcmp(e->dtype, dtype) != 0)
		e->dtype = "mixed";
}

/* The reduce op (named as the tracer names MPI_SUM: "sum") of the last call of f. */
static void led_op(enum fn f, const char *op)
{
	struct entry *e = &ledger[f];

	if (!e->op)
		e->op = op;
	else if (strcmp(e->op, op) != 0)
		e->op = "mixed";
}

/* What the last call of f passed: its op (or NULL) and its root or peer (role NULL: none). */
static void led_args(enum fn f, const char *op, const char *role, int rank_arg)
{
	struct entry *e = &ledger[f];
	char one[96];
	int n;

	if (op)
		led_op(f, op);
	n = snprintf(one, sizeof(one), "%s{", e->args_len ? ", " : "");
	if (op)
		n += snprintf(one + n, sizeof(one) - n, "\"op\": \"%s\"%s", op, role ? ", " : "");
	if (role)
		n += snprintf(one + n, sizeof(one) - n, "\"%s\": %d", role, rank_arg);
	n += snprintf(one + n, sizeof(one) - n, "}");
	e->args = realloc(e->args, e->args_len + n + 1);
	if (!e->args) {
		fprintf(stderr, "mpi_collectives: out of memory\n");
		exit(2);
	}
	memcpy(e->args + e->args_len, one, n + 1);
	e->args_len += n;
}

static void check(int rc, const char *what)
{
	if (rc != MPI_SUCCESS) {
		fprintf(stderr, "mpi_collectives: rank %d: %s failed (%d)\n", rank, what, rc);
		MPI_Abort(MPI_COMM_WORLD, 3);
	}
}

static unsigned long long sum(const int *v, int n)
{
	unsigned long long s = 0;

	for (int i = 0; i < n; i++)
		s += (unsigned long long)v[i];
	return s;
}

static void prefix(const int *counts, int *displs, int n)
{
	int d = 0;

	for (int i = 0; i < n; i++) {
		displs[i] = d;
		d += counts[i];
	}
}

#define BUF_BYTES (1 << 20)
static char *sbuf, *rbuf;
static int *c1, *c2, *d1, *d2;

static void one_iteration(void)
{
	const int allreduce_double[] = {1, 16, 1000};
	const int allreduce_int[] = {7, 256};
	const int partner = rank ^ 1;
	const int has_partner = partner < size;
	struct dt t;

	/* MPI_Allreduce: sent = recv = count. Two dtypes: "mixed". */
	for (size_t i = 0; i < sizeof(allreduce_double) / sizeof(int); i++) {
		t = DT_DOUBLE;
		check(MPI_Allreduce(sbuf, rbuf, allreduce_double[i], t.t, MPI_SUM, MPI_COMM_WORLD),
		      "MPI_Allreduce");
		led(F_ALLREDUCE, allreduce_double[i] * t.size, allreduce_double[i] * t.size,
		    t.name);
		led_args(F_ALLREDUCE, "sum", NULL, 0);
	}
	for (size_t i = 0; i < sizeof(allreduce_int) / sizeof(int); i++) {
		t = DT_INT;
		check(MPI_Allreduce(sbuf, rbuf, allreduce_int[i], t.t, MPI_MAX, MPI_COMM_WORLD),
		      "MPI_Allreduce");
		led(F_ALLREDUCE, allreduce_int[i] * t.size, allreduce_int[i] * t.size, t.name);
		led_args(F_ALLREDUCE, "max", NULL, 0);
	}

	/* MPI_Reduce: sent = count; recv = count at the root only. Roots 0 and size-1. */
	t = DT_FLOAT;
	check(MPI_Reduce(sbuf, rbuf, 100, t.t, MPI_SUM, 0, MPI_COMM_WORLD), "MPI_Reduce");
	led(F_REDUCE, 100 * t.size, rank == 0 ? 100 * t.size : 0, t.name);
	led_args(F_REDUCE, "sum", "root", 0);
	t = DT_LL;
	check(MPI_Reduce(sbuf, rbuf, 10, t.t, MPI_SUM, size - 1, MPI_COMM_WORLD), "MPI_Reduce");
	led(F_REDUCE, 10 * t.size, rank == size - 1 ? 10 * t.size : 0, t.name);
	led_args(F_REDUCE, "sum", "root", size - 1);

	/* MPI_Bcast: sent = recv = count on every rank. */
	t = DT_CHAR;
	check(MPI_Bcast(rbuf, 33, t.t, 0, MPI_COMM_WORLD), "MPI_Bcast");
	led(F_BCAST, 33 * t.size, 33 * t.size, t.name);
	led_args(F_BCAST, NULL, "root", 0);
	t = DT_DOUBLE;
	check(MPI_Bcast(rbuf, 50, t.t, 1 % size, MPI_COMM_WORLD), "MPI_Bcast");
	led(F_BCAST, 50 * t.size, 50 * t.size, t.name);
	led_args(F_BCAST, NULL, "root", 1 % size);

	/* MPI_Allgather: sent = sendcount; recv = recvcount * size. */
	t = DT_INT;
	check(MPI_Allgather(sbuf, 5, t.t, rbuf, 5, t.t, MPI_COMM_WORLD), "MPI_Allgather");
	led(F_ALLGATHER, 5 * t.size, 5ULL * size * t.size, t.name);

	/* MPI_Allgatherv: sent = sendcount (rank+1); recv = sum(recvcounts). */
	t = DT_DOUBLE;
	for (int i = 0; i < size; i++)
		c1[i] = i + 1;
	prefix(c1, d1, size);
	check(MPI_Allgatherv(sbuf, rank + 1, t.t, rbuf, c1, d1, t.t, MPI_COMM_WORLD),
	      "MPI_Allgatherv");
	led(F_ALLGATHERV, (rank + 1) * t.size, sum(c1, size) * t.size, t.name);

	/* MPI_Gather: sent = sendcount; recv = recvcount * size at the root, 0 elsewhere. */
	t = DT_FLOAT;
	check(MPI_Gather(sbuf, 3, t.t, rbuf, 3, t.t, 0, MPI_COMM_WORLD), "MPI_Gather");
	led(F_GATHER, 3 * t.size, rank == 0 ? 3ULL * size * t.size : 0, t.name);
	led_args(F_GATHER, NULL, "root", 0);

	/*
	 * MPI_Gatherv: recvcounts are significant at the root only; the other ranks pass
	 * NULL, as real programs do (a tracer must not read them there).
	 */
	t = DT_INT;
	for (int i = 0; i < size; i++)
		c1[i] = i + 2;
	prefix(c1, d1, size);
	check(MPI_Gatherv(sbuf, rank + 2, t.t, rank == 0 ? rbuf : NULL, rank == 0 ? c1 : NULL,
			  rank == 0 ? d1 : NULL, t.t, 0, MPI_COMM_WORLD),
	      "MPI_Gatherv");
	led(F_GATHERV, (rank + 2) * t.size, rank == 0 ? sum(c1, size) * t.size : 0, t.name);
	led_args(F_GATHERV, NULL, "root", 0);

	/* MPI_Scatter: sent = sendcount * size at the root, 0 elsewhere; recv = recvcount. */
	t = DT_DOUBLE;
	check(MPI_Scatter(rank == 0 ? sbuf : NULL, 4, t.t, rbuf, 4, t.t, 0, MPI_COMM_WORLD),
	      "MPI_Scatter");
	led(F_SCATTER, rank == 0 ? 4ULL * size * t.size : 0, 4 * t.size, t.name);
	led_args(F_SCATTER, NULL, "root", 0);

	/* MPI_Scatterv: sent = sum(sendcounts) at the root (NULL elsewhere); recv = recvcount. */
	t = DT_CHAR;
	for (int i = 0; i < size; i++)
		c1[i] = 10 + i;
	prefix(c1, d1, size);
	check(MPI_Scatterv(rank == 0 ? sbuf : NULL, rank == 0 ? c1 : NULL, rank == 0 ? d1 : NULL,
			   t.t, rbuf, 10 + rank, t.t, 0, MPI_COMM_WORLD),
	      "MPI_Scatterv");
	led(F_SCATTERV, rank == 0 ? sum(c1, size) * t.size : 0, (10 + rank) * t.size, t.name);
	led_args(F_SCATTERV, NULL, "root", 0);

	/* MPI_Alltoall: sent = sendcount * size; recv = recvcount * size. */
	t = DT_INT;
	check(MPI_Alltoall(sbuf, 6, t.t, rbuf, 6, t.t, MPI_COMM_WORLD), "MPI_Alltoall");
	led(F_ALLTOALL, 6ULL * size * t.size, 6ULL * size * t.size, t.name);

	/* MPI_Alltoallv: rank r sends i+r+1 to rank i, so it also receives i+r+1 from i. */
	t = DT_DOUBLE;
	for (int i = 0; i < size; i++)
		c1[i] = c2[i] = i + rank + 1;
	prefix(c1, d1, size);
	prefix(c2, d2, size);
	check(MPI_Alltoallv(sbuf, c1, d1, t.t, rbuf, c2, d2, t.t, MPI_COMM_WORLD), "MPI_Alltoallv");
	led(F_ALLTOALLV, sum(c1, size) * t.size, sum(c2, size) * t.size, t.name);

	/* MPI_Reduce_scatter: sent = sum(recvcounts); recv = recvcounts[rank]. */
	t = DT_FLOAT;
	for (int i = 0; i < size; i++)
		c1[i] = i + 1;
	check(MPI_Reduce_scatter(sbuf, rbuf, c1, t.t, MPI_SUM, MPI_COMM_WORLD),
	      "MPI_Reduce_scatter");
	led(F_REDUCE_SCATTER, sum(c1, size) * t.size, c1[rank] * t.size, t.name);
	led_args(F_REDUCE_SCATTER, "sum", NULL, 0);

	/* MPI_Reduce_scatter_block: sent = recvcount * size; recv = recvcount. */
	t = DT_LL;
	check(MPI_Reduce_scatter_block(sbuf, rbuf, 3, t.t, MPI_SUM, MPI_COMM_WORLD),
	      "MPI_Reduce_scatter_block");
	led(F_REDUCE_SCATTER_BLOCK, 3ULL * size * t.size, 3 * t.size, t.name);
	led_args(F_REDUCE_SCATTER_BLOCK, "sum", NULL, 0);

	check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
	led(F_BARRIER, 0, 0, NULL);

	if (has_partner) {
		MPI_Request req[2];

		/* Recv counts the capacity passed (128), not the 64 elements that arrive. */
		t = DT_DOUBLE;
		if (rank % 2 == 0) {
			check(MPI_Send(sbuf, 64, t.t, partner, 11, MPI_COMM_WORLD), "MPI_Send");
			led(F_SEND, 64 * t.size, 0, t.name);
			led_args(F_SEND, NULL, "peer", partner);
			check(MPI_Recv(rbuf, 128, t.t, partner, 12, MPI_COMM_WORLD,
				       MPI_STATUS_IGNORE),
			      "MPI_Recv");
			led(F_RECV, 0, 128 * t.size, t.name);
			led_args(F_RECV, NULL, "peer", partner);
		} else {
			check(MPI_Recv(rbuf, 128, t.t, partner, 11, MPI_COMM_WORLD,
				       MPI_STATUS_IGNORE),
			      "MPI_Recv");
			led(F_RECV, 0, 128 * t.size, t.name);
			led_args(F_RECV, NULL, "peer", partner);
			check(MPI_Send(sbuf, 64, t.t, partner, 12, MPI_COMM_WORLD), "MPI_Send");
			led(F_SEND, 64 * t.size, 0, t.name);
			led_args(F_SEND, NULL, "peer", partner);
		}

		/* Isend/Irecv of MPI_INT completed by one MPI_Waitall. */
		t = DT_INT;
		check(MPI_Irecv(rbuf, 20, t.t, partner, 13, MPI_COMM_WORLD, &req[0]), "MPI_Irecv");
		led(F_IRECV, 0, 20 * t.size, t.name);
		led_args(F_IRECV, NULL, "peer", partner);
		check(MPI_Isend(sbuf, 20, t.t, partner, 13, MPI_COMM_WORLD, &req[1]), "MPI_Isend");
		led(F_ISEND, 20 * t.size, 0, t.name);
		led_args(F_ISEND, NULL, "peer", partner);
		check(MPI_Waitall(2, req, MPI_STATUSES_IGNORE), "MPI_Waitall");
		led(F_WAITALL, 0, 0, NULL);

		/* Isend/Irecv of MPI_FLOAT completed by two MPI_Wait. */
		t = DT_FLOAT;
		check(MPI_Irecv(rbuf + 4096, 40, t.t, partner, 14, MPI_COMM_WORLD, &req[0]),
		      "MPI_Irecv");
		led(F_IRECV, 0, 40 * t.size, t.name);
		led_args(F_IRECV, NULL, "peer", partner);
		check(MPI_Isend(sbuf, 40, t.t, partner, 14, MPI_COMM_WORLD, &req[1]), "MPI_Isend");
		led(F_ISEND, 40 * t.size, 0, t.name);
		led_args(F_ISEND, NULL, "peer", partner);
		check(MPI_Wait(&req[0], MPI_STATUS_IGNORE), "MPI_Wait");
		led(F_WAIT, 0, 0, NULL);
		check(MPI_Wait(&req[1], MPI_STATUS_IGNORE), "MPI_Wait");
		led(F_WAIT, 0, 0, NULL);
	}

	/* MPI_Iallreduce counts like MPI_Allreduce; one more MPI_Wait. */
	{
		MPI_Request req;

		t = DT_DOUBLE;
		check(MPI_Iallreduce(sbuf, rbuf, 32, t.t, MPI_SUM, MPI_COMM_WORLD, &req),
		      "MPI_Iallreduce");
		led(F_IALLREDUCE, 32 * t.size, 32 * t.size, t.name);
		led_args(F_IALLREDUCE, "sum", NULL, 0);
		check(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait");
		led(F_WAIT, 0, 0, NULL);
	}
}

/* Write the ledger to PATH.RANK through a temporary file and rename (readers never see
 * half a file). */
static int write_ledger(const char *path, int final)
{
	char file[PATH_MAX], tmp[PATH_MAX + 8];
	FILE *f;

	if (snprintf(file, sizeof(file), "%s.%d", path, rank) >= (int)sizeof(file))
		return -ENAMETOOLONG;
	snprintf(tmp, sizeof(tmp), "%s.tmp", file);
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f,
		"{\n  \"program\": \"mpi_collectives\",\n  \"pid\": %d,\n  \"rank\": %d,\n"
		"  \"size\": %d,\n  \"iterations\": %d,\n  \"final\": %s,\n",
		(int)getpid(), rank, size, iters_done, final ? "true" : "false");
	fprintf(f, "  \"setup\": {\"MPI_Init\": 1, \"MPI_Comm_rank\": 1, \"MPI_Comm_size\": 1, "
		   "\"MPI_Finalize\": 1},\n");
	fprintf(f, "  \"functions\": {");
	for (int i = 0, n = 0; i < F_MAX; i++) {
		const struct entry *e = &ledger[i];

		if (!e->calls)
			continue;
		fprintf(f,
			"%s\n    \"%s\": {\"library\": \"mpi\", \"calls\": %llu, "
			"\"bytes_sent\": %llu, \"bytes_received\": %llu, \"dtype\": ",
			n++ ? "," : "", fn_name[i], e->calls, e->sent, e->recv);
		if (e->dtype)
			fprintf(f, "\"%s\"", e->dtype);
		else
			fprintf(f, "null");
		if (e->op)
			fprintf(f, ", \"op\": \"%s\"", e->op);
		if (e->args)
			fprintf(f, ", \"args\": [%s]", e->args);
		fprintf(f, "}");
	}
	fprintf(f, "\n  }\n}\n");
	if (fclose(f) != 0)
		return -errno;
	if (rename(tmp, file) != 0)
		return -errno;
	return 0;
}

static void write_pid(const char *wait_file)
{
	char file[PATH_MAX], tmp[PATH_MAX + 8];
	FILE *f;

	snprintf(file, sizeof(file), "%s.pid.%d", wait_file, rank);
	snprintf(tmp, sizeof(tmp), "%s.tmp", file);
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 ||
	    rename(tmp, file) != 0) {
		fprintf(stderr, "mpi_collectives: cannot write %s: %s\n", file, strerror(errno));
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
}

static void wait_for(const char *path)
{
	const struct timespec ts = {0, 10 * 1000 * 1000};

	while (access(path, F_OK) != 0)
		nanosleep(&ts, NULL);
}

static int parse_int(const char *s, const char *opt)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > INT_MAX) {
		fprintf(stderr, "mpi_collectives: invalid %s '%s'\n", opt, s);
		exit(2);
	}
	return (int)v;
}

int main(int argc, char **argv)
{
	const char *wait_file = NULL, *expect = NULL, *progress = NULL, *pause_file = NULL;
	int iters = 1, pause_after = -1;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (i + 1 >= argc) {
			fprintf(stderr, "mpi_collectives: %s needs a value\n", a);
			return 2;
		}
		if (!strcmp(a, "--iters"))
			iters = parse_int(argv[++i], a);
		else if (!strcmp(a, "--wait-file"))
			wait_file = argv[++i];
		else if (!strcmp(a, "--expect"))
			expect = argv[++i];
		else if (!strcmp(a, "--progress"))
			progress = argv[++i];
		else if (!strcmp(a, "--pause-after"))
			pause_after = parse_int(argv[++i], a);
		else if (!strcmp(a, "--pause-file"))
			pause_file = argv[++i];
		else {
			fprintf(stderr, "mpi_collectives: unknown option %s\n", a);
			return 2;
		}
	}
	if ((pause_after >= 0) != (pause_file != NULL)) {
		fprintf(stderr, "mpi_collectives: --pause-after and --pause-file go together\n");
		return 2;
	}

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);

	sbuf = calloc(1, BUF_BYTES);
	rbuf = calloc(1, BUF_BYTES);
	c1 = calloc(size, sizeof(int));
	c2 = calloc(size, sizeof(int));
	d1 = calloc(size, sizeof(int));
	d2 = calloc(size, sizeof(int));
	if (!sbuf || !rbuf || !c1 || !c2 || !d1 || !d2) {
		fprintf(stderr, "mpi_collectives: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	for (int i = 0; i < BUF_BYTES; i++)
		sbuf[i] = (char)(i * 7 + rank);

	if (wait_file) {
		write_pid(wait_file);
		wait_for(wait_file);
	}

	for (int it = 0; it < iters; it++) {
		one_iteration();
		iters_done++;
		if (progress && write_ledger(progress, 0) != 0) {
			fprintf(stderr, "mpi_collectives: cannot write %s.%d\n", progress, rank);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		if (iters_done == pause_after)
			wait_for(pause_file);
	}

	if (expect) {
		int err = write_ledger(expect, 1);

		if (err) {
			fprintf(stderr, "mpi_collectives: cannot write %s.%d: %s\n", expect, rank,
				strerror(-err));
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
	MPI_Finalize();
	return 0;
}
