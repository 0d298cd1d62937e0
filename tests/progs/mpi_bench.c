// SPDX-License-Identifier: MIT
/*
 * MPI collective microbenchmark for `make bench`: N MPI_Allreduce of a given size,
 * timed inside the program (CLOCK_MONOTONIC), so that process start-up and the
 * tracer's attach stay out of the number. Rank 0 prints "ns_per_call N".
 *   mpi_bench CALLS BYTES
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 10000, bytes = argc > 2 ? atol(argv[2]) : 8;
	long n = bytes / (long)sizeof(double) > 0 ? bytes / (long)sizeof(double) : 1;
	double *a = calloc(n, sizeof(double)), *b = calloc(n, sizeof(double));
	struct timespec t0, t1;
	int rank;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (!a || !b)
		MPI_Abort(MPI_COMM_WORLD, 1);
	for (long i = 0; i < 100; i++) /* warm up the connections */
		MPI_Allreduce(a, b, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	MPI_Barrier(MPI_COMM_WORLD);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < calls; i++)
		MPI_Allreduce(a, b, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (rank == 0)
		printf("ns_per_call %.1f\n",
		       ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (double)calls);
	free(a);
	free(b);
	MPI_Finalize();
	return 0;
}
