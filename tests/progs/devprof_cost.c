// SPDX-License-Identifier: MIT
/*
 * What the devprof recorder costs a worker, compiled for the host (scripts/bench.py
 * devprof). One worker's task loop as tests/progs/megakernel.cu runs it (barrier; wait,
 * compute, trigger, each closed by a record) is timed three ways over the same tasks:
 * without any recorder call (bare), with the calls and sampling off, with the calls and
 * sampling on. Each invocation is init + reset + 80 tasks (240 records, capacity 256:
 * no drops), as one worker's slot of one kernel call. The host build's clock is the
 * header's default, CLOCK_MONOTONIC through the vDSO, and its barrier a no-op; its
 * cost is measured on its own too. A GPU's %globaltimer and global-memory stores cost
 * something else: this is the host build, not the CUDA kernel (megakernel --cost).
 *
 *	build/progs/devprof_cost [tasks] [rounds]
 *
 * Prints "key value" lines; each time is the median of ROUNDS rounds (the three loops
 * in a rotating order per round). Exit 1 if sampling on did not write every record or
 * sampling off wrote any.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "commtrace/devprof.h"

#define TASKS_PER_CALL 80 /* 240 records, under the 256-record capacity */
#define CAP	       256

static volatile double sink;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The task body: a short dependent chain, so the loop is not empty. */
static inline double work(double acc, uint32_t task)
{
	return acc * 0.999 + (double)(task & 7);
}

/*
 * calls invocations of one worker. with_rec is a constant in each caller below, so the
 * bare loop carries no recorder code at all.
 */
static inline __attribute__((always_inline)) double
loop(const struct ct_devprof_runtime_config *cfg, const uint32_t *owners, uint64_t calls,
     int with_rec)
{
	double acc = 1.0;
	uint64_t c;
	uint32_t t;

	for (c = 0; c < calls; c++) {
		struct ct_devprof_recorder r;

		if (with_rec) {
			ct_devprof_recorder_init(&r, cfg, CT_DEVPROF_CORE_AIC, 0);
			ct_devprof_recorder_reset(&r, CT_DEVPROF_CORE_AIC, 0);
		}
		for (t = 0; t < TASKS_PER_CALL; t++) {
			uint32_t stage = t / 16, idx = t % 16;
			uint64_t s = 0;

			if (with_rec) {
				ct_devprof_barrier(&r);
				s = ct_devprof_start(&r);
			}
			acc = work(acc, t);
			if (with_rec) {
				ct_devprof_record(&r, CT_DEVPROF_REC_WAIT, stage, t, idx,
						  &owners[stage], s);
				s = ct_devprof_start(&r);
			}
			acc = work(acc, t + 1);
			if (with_rec) {
				ct_devprof_record(&r, CT_DEVPROF_REC_COMPUTE, stage, t, idx,
						  &owners[stage], s);
				s = ct_devprof_start(&r);
			}
			acc = work(acc, t + 2);
			if (with_rec)
				ct_devprof_record(&r, CT_DEVPROF_REC_TRIGGER, stage, t, idx,
						  &owners[stage], s);
		}
	}
	return acc;
}

__attribute__((noinline)) static double run_bare(const struct ct_devprof_runtime_config *cfg,
						 const uint32_t *owners, uint64_t calls)
{
	return loop(cfg, owners, calls, 0);
}

__attribute__((noinline)) static double run_rec(const struct ct_devprof_runtime_config *cfg,
						const uint32_t *owners, uint64_t calls)
{
	return loop(cfg, owners, calls, 1);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_u64);
	return v[n / 2];
}

int main(int argc, char **argv)
{
	uint64_t tasks = argc > 1 ? strtoull(argv[1], NULL, 0) : 2000000;
	int rounds = argc > 2 ? atoi(argv[2]) : 7, i, v;
	uint64_t calls = (tasks + TASKS_PER_CALL - 1) / TASKS_PER_CALL, records, *ns[3], t0, sum;
	uint64_t size = ct_devprof_buffer_size(1, 0, CAP, CAP, 0);
	struct ct_devprof_runtime_config off, on;
	uint32_t owners[8] = {0, 0, 1, 1, 2, 2, 3, 3};
	const struct ct_devprof_slot *slot;
	uint8_t *buf = malloc(size);
	double med[3];
	int ok = 1;

	if (!buf || rounds < 1 || !calls ||
	    ct_devprof_buffer_init(buf, size, CT_DEVPROF_CLOCK_HZ, 0, 1, 0, CAP, CAP, NULL, 0)) {
		fprintf(stderr, "devprof_cost: bad arguments or buffer\n");
		return 1;
	}
	tasks = calls * TASKS_PER_CALL;
	records = tasks * 3;
	memset(&off, 0, sizeof(off));
	off.profile_buffer = (uint64_t)(uintptr_t)buf; /* off: present but never touched */
	on = off;
	on.profile_enable = 1;
	for (v = 0; v < 3; v++)
		ns[v] = calloc((size_t)rounds, sizeof(uint64_t));
	if (!ns[0] || !ns[1] || !ns[2])
		return 1;

	run_rec(&on, owners, calls / 10 + 1); /* warm-up: page in the buffer */
	for (i = 0; i < rounds; i++)
		for (v = 0; v < 3; v++) {
			int which = (v + i) % 3; /* 0 bare, 1 off, 2 on */

			t0 = now_ns();
			if (which == 0)
				sink = run_bare(&off, owners, calls);
			else
				sink = run_rec(which == 1 ? &off : &on, owners, calls);
			ns[which][i] = now_ns() - t0;
		}
	for (v = 0; v < 3; v++)
		med[v] = (double)median(ns[v], rounds);

	/* The clock alone: what two reads per record cost at least. */
	t0 = now_ns();
	for (sum = 0, i = 0; i < 1000000; i++)
		sum += CT_DEVPROF_CLOCK();
	sink = (double)sum;
	t0 = now_ns() - t0;

	slot = (const struct ct_devprof_slot *)(buf + ct_devprof_slot_offset(
							  1, CAP, CAP, CT_DEVPROF_CORE_AIC, 0));
	if (slot->record_count != 3 * TASKS_PER_CALL || slot->dropped_count) {
		fprintf(stderr,
			"devprof_cost: sampling on left %u records, %u dropped (want %d, 0)\n",
			slot->record_count, slot->dropped_count, 3 * TASKS_PER_CALL);
		ok = 0;
	}
	/* Off must not have written: zero the slot, run off once, look again. */
	memset((void *)slot, 0,
	       sizeof(*slot) + 3 * TASKS_PER_CALL * sizeof(struct ct_devprof_record));
	run_rec(&off, owners, 1);
	if (slot->record_count || slot->core_type) {
		fprintf(stderr, "devprof_cost: sampling off wrote into the buffer\n");
		ok = 0;
	}

	printf("tasks %llu\n", (unsigned long long)tasks);
	printf("records %llu\n", (unsigned long long)records);
	printf("rounds %d\n", rounds);
	printf("bare_ns_per_task %.3f\n", med[0] / (double)tasks);
	printf("off_ns_per_record %.3f\n", med[1] / (double)records);
	printf("on_ns_per_record %.3f\n", med[2] / (double)records);
	printf("off_added_ns_per_record %.3f\n", (med[1] - med[0]) / (double)records);
	printf("on_added_ns_per_record %.3f\n", (med[2] - med[0]) / (double)records);
	printf("clock_ns_per_read %.3f\n", (double)t0 / 1e6);
	for (v = 0; v < 3; v++)
		free(ns[v]);
	free(buf);
	return ok ? 0 : 1;
}
