// SPDX-License-Identifier: MIT
/*
 * FR-03 proof for the recorder compiled for the host: with sampling off it reads no
 * clock, runs no barrier, touches no buffer byte and loads no owner metadata. The
 * buffer and the owner table sit on a PROT_NONE guard page, and the clock and barrier
 * are counting stand-ins. Two controls show the test can fail: sampling on against a
 * real buffer does count clock reads and barriers, and sampling on against the guard
 * page dies with SIGSEGV in a child.
 *
 * Prints one summary line; exit 0 when every check holds, 1 otherwise.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

static unsigned long clock_reads, barriers;

static uint64_t counted_clock(void)
{
	return ++clock_reads * 100;
}

static void counted_barrier(void)
{
	barriers++;
}

#define CT_DEVPROF_CLOCK()   counted_clock()
#define CT_DEVPROF_BARRIER() counted_barrier()
#include "commtrace/devprof.h"

#define CORES 8
#define TASKS 100

/* One worker's loop, as a MegaKernel runs it: wait, compute, trigger per task. */
static void run(const struct ct_devprof_runtime_config *cfg, const uint32_t *owners)
{
	uint32_t core, t;

	for (core = 0; core < CORES; core++) {
		uint32_t type = core < CORES / 2 ? CT_DEVPROF_CORE_AIC : CT_DEVPROF_CORE_AIV;
		uint32_t id = core % (CORES / 2);
		struct ct_devprof_recorder r;

		ct_devprof_recorder_init(&r, cfg, type, id);
		ct_devprof_recorder_reset(&r, type, id);
		for (t = 0; t < TASKS; t++) {
			uint64_t s;

			ct_devprof_barrier(&r);
			s = ct_devprof_start(&r);
			ct_devprof_record(&r, CT_DEVPROF_REC_WAIT, t % 4, t, t / 4, &owners[t % 4],
					  s);
			s = ct_devprof_start(&r);
			ct_devprof_record(&r, CT_DEVPROF_REC_COMPUTE, t % 4, t, t / 4,
					  &owners[t % 4], s);
			s = ct_devprof_start(&r);
			ct_devprof_record(&r, CT_DEVPROF_REC_TRIGGER, t % 4, t, t / 4,
					  &owners[t % 4], s);
		}
	}
}

int main(void)
{
	long page = sysconf(_SC_PAGESIZE);
	struct ct_devprof_runtime_config cfg;
	unsigned long on_clock, on_barrier, off_clock, off_barrier;
	uint32_t owners[4] = {0, 1, 2, 3};
	uint64_t size = ct_devprof_buffer_size(CORES / 2, CORES / 2, 256, 256, 0);
	uint8_t *guard, *buf;
	int status, ok = 1;
	pid_t pid;

	guard = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	buf = malloc(size);
	if (guard == MAP_FAILED || !buf) {
		perror("devprof_guard: setup");
		return 1;
	}

	/* Off: the config is zero-initialised except the buffer, which points at the guard. */
	memset(&cfg, 0, sizeof(cfg));
	cfg.profile_buffer = (uint64_t)(uintptr_t)guard;
	run(&cfg, (const uint32_t *)guard);
	off_clock = clock_reads;
	off_barrier = barriers;
	if (off_clock || off_barrier) {
		fprintf(stderr,
			"devprof_guard: sampling off read the clock %lu times and ran %lu "
			"barriers\n",
			clock_reads, barriers);
		ok = 0;
	}

	/* Control 1: on, with a real buffer, every hook is reached. */
	if (ct_devprof_buffer_init(buf, size, 1000000000, 0, CORES / 2, CORES / 2, 256, 256, NULL,
				   0)) {
		fprintf(stderr, "devprof_guard: buffer init failed\n");
		return 1;
	}
	cfg.profile_enable = 1;
	cfg.profile_buffer = (uint64_t)(uintptr_t)buf;
	run(&cfg, owners);
	on_clock = clock_reads;
	on_barrier = barriers;
	if (on_clock - off_clock != 2ul * 3 * CORES * TASKS ||
	    on_barrier - off_barrier != (unsigned long)CORES * TASKS) {
		fprintf(stderr,
			"devprof_guard: sampling on read the clock %lu times (want %d) and "
			"ran %lu barriers (want %d)\n",
			on_clock, 2 * 3 * CORES * TASKS, on_barrier, CORES * TASKS);
		ok = 0;
	}

	/* Control 2: on, against the guard page, the child must fault. */
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		cfg.profile_buffer = (uint64_t)(uintptr_t)guard;
		run(&cfg, owners);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFSIGNALED(status) ||
	    WTERMSIG(status) != SIGSEGV) {
		fprintf(stderr,
			"devprof_guard: sampling on against the guard page did not fault\n");
		ok = 0;
	}

	printf("devprof_guard: off: %lu clock reads, %lu barriers, no fault over %d records; "
	       "on: %lu clock reads, %lu barriers; on against the guard page: %s\n",
	       off_clock, off_barrier, 3 * CORES * TASKS, on_clock - off_clock,
	       on_barrier - off_barrier, ok ? "SIGSEGV" : "see above");
	free(buf);
	munmap(guard, (size_t)page);
	return ok ? 0 : 1;
}
