// SPDX-License-Identifier: MIT
/*
 * An Open MPI "training" job with faults injected on demand, for the diagnosis tests
 * (tests/integration/test_diag.py): the MPI twin of tests/workloads/diag_faults.py.
 *
 *   mpi_faults [--steps N] [--wait-file PATH] [--sleep-rank R --sleep-step K
 *              [--sleep-ms MS]] [--mismatch-rank R --mismatch-step K]
 *              [--hang-rank R --hang-step K]
 *
 * Collectives on MPI_COMM_WORLD, in this order (its sequence numbers, 1-based):
 *   setup: one MPI_Bcast of 64 doubles (#1);
 *   step k (0-based), --steps times: MPI_Allreduce of the gradient (#2k+2, 1000 floats),
 *     MPI_Allreduce of the loss (#2k+3, 1 MPI_DOUBLE);
 *   teardown: one MPI_Barrier.
 * --sleep-rank R --sleep-step K: rank R sleeps MS ms (default 1000) before step K's
 *   gradient all-reduce (a late rank).
 * --mismatch-rank R --mismatch-step K: rank R all-reduces step K's loss as 2 MPI_FLOAT
 *   (the others: 1 MPI_DOUBLE; same bytes, so Open MPI does not notice): counts differ.
 * --hang-rank R --hang-step K: rank R stops before step K's gradient all-reduce, forever
 *   (a hang; kill it).
 * --wait-file: after MPI_Init, write our pid to PATH.pid.RANK, then poll until PATH
 *   exists before the first collective, so a tracer can attach first.
 */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank;

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
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
		fprintf(stderr, "mpi_faults: cannot write %s: %s\n", file, strerror(errno));
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
}

static int parse_int(const char *s, const char *opt)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > INT_MAX) {
		fprintf(stderr, "mpi_faults: invalid %s '%s'\n", opt, s);
		exit(2);
	}
	return (int)v;
}

int main(int argc, char **argv)
{
	int steps = 7, sleep_rank = -1, sleep_step = -1, sleep_ms_v = 1000;
	int mismatch_rank = -1, mismatch_step = -1, hang_rank = -1, hang_step = -1;
	const char *wait_file = NULL;
	static float grad[1000], grad_out[1000];
	double params[64] = {0}, loss, loss_out;
	float loss2[2], loss2_out[2];

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (i + 1 >= argc) {
			fprintf(stderr, "mpi_faults: %s needs a value\n", a);
			return 2;
		}
		if (!strcmp(a, "--steps"))
			steps = parse_int(argv[++i], a);
		else if (!strcmp(a, "--wait-file"))
			wait_file = argv[++i];
		else if (!strcmp(a, "--sleep-rank"))
			sleep_rank = parse_int(argv[++i], a);
		else if (!strcmp(a, "--sleep-step"))
			sleep_step = parse_int(argv[++i], a);
		else if (!strcmp(a, "--sleep-ms"))
			sleep_ms_v = parse_int(argv[++i], a);
		else if (!strcmp(a, "--mismatch-rank"))
			mismatch_rank = parse_int(argv[++i], a);
		else if (!strcmp(a, "--mismatch-step"))
			mismatch_step = parse_int(argv[++i], a);
		else if (!strcmp(a, "--hang-rank"))
			hang_rank = parse_int(argv[++i], a);
		else if (!strcmp(a, "--hang-step"))
			hang_step = parse_int(argv[++i], a);
		else {
			fprintf(stderr, "mpi_faults: unknown option %s\n", a);
			return 2;
		}
	}
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (wait_file) {
		write_pid(wait_file);
		while (access(wait_file, F_OK) != 0)
			sleep_ms(10);
	}
	MPI_Bcast(params, 64, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	for (int k = 0; k < steps; k++) {
		for (int i = 0; i < 1000; i++)
			grad[i] = (float)(rank + 1);
		if (rank == sleep_rank && k == sleep_step)
			sleep_ms(sleep_ms_v);
		if (rank == hang_rank && k == hang_step)
			for (;;)
				sleep_ms(1000);
		MPI_Allreduce(grad, grad_out, 1000, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		if (rank == mismatch_rank && k == mismatch_step) {
			loss2[0] = loss2[1] = (float)k;
			MPI_Allreduce(loss2, loss2_out, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		} else {
			loss = k;
			MPI_Allreduce(&loss, &loss_out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		}
	}
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Finalize();
	return 0;
}
