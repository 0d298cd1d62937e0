// SPDX-License-Identifier: MIT
/*
 * One node of a 3-D parallel job: the world split into tensor-, pipeline- and
 * data-parallel groups (MPI_Comm_split, Megatron's layout: TP neighbours, then PP stages,
 * then DP replicas), each rank in 4 communicators, for the tracer's matching on one node.
 *
 *   mpirun -np 8 mpi_groups [--tp 2] [--pp 2] [--steps N] [--wait-file PATH]
 *
 * After the splits, a barrier on each group (TP, PP, DP) and on the world; then per step
 * two all-reduces on TP, a broadcast on PP, an all-reduce on DP, 10 ms apart; a world
 * barrier at the end. --wait-file: write the pid to PATH.pid.RANK after MPI_Init and the splits,
 * then wait for PATH to exist. Rank 0 prints "mpi_groups: WORLD ranks, TP x PP x DP, N steps".
 */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int arg_int(const char *s, const char *opt)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > INT_MAX) {
		fprintf(stderr, "mpi_groups: invalid %s '%s'\n", opt, s);
		exit(2);
	}
	return (int)v;
}

static void wait_file(const char *path, int rank)
{
	const struct timespec ts = {0, 10 * 1000 * 1000};
	char file[PATH_MAX], tmp[PATH_MAX + 8];
	FILE *f;

	snprintf(file, sizeof(file), "%s.pid.%d", path, rank);
	snprintf(tmp, sizeof(tmp), "%s.tmp", file);
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 ||
	    rename(tmp, file) != 0) {
		fprintf(stderr, "mpi_groups: cannot write %s: %s\n", file, strerror(errno));
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	while (access(path, F_OK) != 0)
		nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	int tp = 2, pp = 2, steps = 5, rank, world;
	const char *wait = NULL;
	MPI_Comm tpc, ppc, dpc;
	float grad[256] = {0}, act[64] = {0};

	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && !strcmp(argv[i], "--tp"))
			tp = arg_int(argv[++i], "--tp");
		else if (i + 1 < argc && !strcmp(argv[i], "--pp"))
			pp = arg_int(argv[++i], "--pp");
		else if (i + 1 < argc && !strcmp(argv[i], "--steps"))
			steps = arg_int(argv[++i], "--steps");
		else if (i + 1 < argc && !strcmp(argv[i], "--wait-file"))
			wait = argv[++i];
		else {
			fprintf(stderr, "usage: mpi_groups [--tp N] [--pp N] [--steps N] "
					"[--wait-file PATH]\n");
			return 2;
		}
	}
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &world);
	if (world % (tp * pp)) {
		if (!rank)
			fprintf(stderr, "mpi_groups: %d ranks do not divide into TP %d x PP %d\n",
				world, tp, pp);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	/* colour: what the group's members share; key: the world rank (group rank order) */
	MPI_Comm_split(MPI_COMM_WORLD, rank / tp, rank, &tpc);
	MPI_Comm_split(MPI_COMM_WORLD, rank % tp + tp * (rank / (tp * pp)), rank, &ppc);
	MPI_Comm_split(MPI_COMM_WORLD, rank % (tp * pp), rank, &dpc);
	if (wait)
		wait_file(wait, rank);
	MPI_Barrier(tpc);
	MPI_Barrier(ppc);
	MPI_Barrier(dpc);
	MPI_Barrier(MPI_COMM_WORLD);
	/* 10 ms of "compute" between the groups' reductions, as a step has: back to back
	 * they would be serialized reductions, a finding of their own */
	for (int s = 0; s < steps; s++) {
		MPI_Allreduce(MPI_IN_PLACE, act, 64, MPI_FLOAT, MPI_SUM, tpc);
		MPI_Allreduce(MPI_IN_PLACE, act, 64, MPI_FLOAT, MPI_SUM, tpc);
		usleep(10000);
		MPI_Bcast(act, 16, MPI_FLOAT, 0, ppc);
		usleep(10000);
		MPI_Allreduce(MPI_IN_PLACE, grad, 256, MPI_FLOAT, MPI_SUM, dpc);
		usleep(10000);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (!rank)
		printf("mpi_groups: %d ranks, TP %d x PP %d x DP %d, %d steps\n", world, tp, pp,
		       world / (tp * pp), steps);
	MPI_Comm_free(&tpc);
	MPI_Comm_free(&ppc);
	MPI_Comm_free(&dpc);
	MPI_Finalize();
	return 0;
}
