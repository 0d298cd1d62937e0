// SPDX-License-Identifier: MIT
/*
 * A persistent "MegaKernel" using the devprof recorder: one block per worker, every
 * worker loops over its statically assigned tasks, waits on the task's dependency
 * counter, computes, and triggers its dependants. Blocks [0, aic) play the AIC role
 * (a small matmul-like loop), the others the AIV role (an elementwise loop).
 *
 * The same compiled kernel runs sampled and unsampled calls (FR-01, FR-02): a session
 * (ct_devprof_session_*) decides per call. Sampled buffers are copied back, stamped and
 * appended to OUT, which `commtrace-bpf devprof decode OUT -o trace.json` reads.
 *
 *	make cuda && build/progs/megakernel [OUT.bin] [steps]
 *
 * Built with nvcc only by `make cuda`; run on an H200 by scripts/gpu-check.sh
 * (docs/PERFORMANCE.md).
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commtrace/devprof.h"

#define STAGES 6
#define TASKS_PER_STAGE 24
#define NTASKS (STAGES * TASKS_PER_STAGE)
#define THREADS 128
#define WIDTH 1024

struct task_desc {
	uint32_t owner_id; /* layer: loaded by the recorder only when sampling (FR-03) */
	uint32_t stage;
};

struct mk_config {
	struct ct_devprof_runtime_config prof; /* the profiling_buffer entry of seed 004 */
	const struct task_desc *descs;
	unsigned int *deps; /* per task: finished predecessors */
	float *data;	    /* NTASKS x WIDTH */
	uint32_t aic, aiv;
};

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		cudaError_t e_ = (x);                                                              \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "megakernel: %s: %s\n", #x, cudaGetErrorString(e_));       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

__device__ static void wait_deps(const struct mk_config *c, uint32_t task)
{
	uint32_t stage = task / TASKS_PER_STAGE;
	unsigned int need = stage ? TASKS_PER_STAGE : 0;

	if (threadIdx.x == 0)
		while (atomicAdd(&c->deps[task], 0) < need)
			__nanosleep(100);
	__syncthreads();
}

__device__ static void compute(const struct mk_config *c, uint32_t task, int aic_role)
{
	float *row = c->data + (size_t)task * WIDTH;
	int i, k;

	for (i = threadIdx.x; i < WIDTH; i += blockDim.x) {
		float acc = row[i];

		if (aic_role)
			for (k = 0; k < 64; k++)
				acc = fmaf(acc, 0.999f, 0.001f * k);
		else
			acc = acc > 0.f ? acc : 0.f;
		row[i] = acc;
	}
	__syncthreads();
}

__device__ static void trigger(const struct mk_config *c, uint32_t task)
{
	uint32_t stage = task / TASKS_PER_STAGE, j;

	/* Make this task's writes visible before its dependants see the counter move. */
	__threadfence();
	if (threadIdx.x == 0 && stage + 1 < STAGES)
		for (j = 0; j < TASKS_PER_STAGE; j++)
			atomicAdd(&c->deps[(stage + 1) * TASKS_PER_STAGE + j], 1u);
	__syncthreads();
}

__global__ void megakernel(struct mk_config c)
{
	uint32_t worker = blockIdx.x, nworkers = gridDim.x, task;
	int aic_role = worker < c.aic;
	uint32_t core_type = aic_role ? CT_DEVPROF_CORE_AIC : CT_DEVPROF_CORE_AIV;
	uint32_t core_id = aic_role ? worker : worker - c.aic;
	struct ct_devprof_recorder r;
	int leader = threadIdx.x == 0;

	ct_devprof_recorder_init(&r, &c.prof, core_type, core_id);
	if (leader)
		ct_devprof_recorder_reset(&r, core_type, core_id);
	/* Tasks in stage order per worker: all blocks are resident, so no worker deadlocks. */
	for (task = worker; task < NTASKS; task += nworkers) {
		const struct task_desc *d = &c.descs[task];
		uint32_t stage = task / TASKS_PER_STAGE, idx = task % TASKS_PER_STAGE;
		uint64_t t;

		ct_devprof_barrier(&r);
		t = leader ? ct_devprof_start(&r) : 0;
		wait_deps(&c, task);
		if (leader)
			ct_devprof_record(&r, CT_DEVPROF_REC_WAIT, stage, task, idx, &d->owner_id, t);
		t = leader ? ct_devprof_start(&r) : 0;
		compute(&c, task, aic_role);
		if (leader)
			ct_devprof_record(&r, CT_DEVPROF_REC_COMPUTE, stage, task, idx, &d->owner_id,
					  t);
		t = leader ? ct_devprof_start(&r) : 0;
		trigger(&c, task);
		if (leader)
			ct_devprof_record(&r, CT_DEVPROF_REC_TRIGGER, stage, task, idx, &d->owner_id,
					  t);
	}
}

static const char meta_json[] =
	"{\"kernel\":\"megakernel\",\"stage_names\":[\"qkv\",\"attn\",\"o_proj\",\"norm\","
	"\"mlp_up\",\"mlp_down\"],\"owner_labels\":[\"layer0\",\"layer1\",\"layer2\"]}";

int main(int argc, char **argv)
{
	const char *out = argc > 1 ? argv[1] : "megakernel.bin";
	int steps = argc > 2 ? atoi(argv[2]) : 6, sms, dev = 0, step;
	struct ct_devprof_schedule sched = {1, 1, 1, 2, 1}; /* skip 1, wait 1, warmup 1, active 2 */
	struct ct_devprof_session session;
	struct task_desc descs[NTASKS];
	uint32_t tasks[2 * CT_DEVPROF_MAX_CORES] = {0}, aic, aiv, w, t, aic_cap, aiv_cap, max_aic = 0,
		 max_aiv = 0;
	struct mk_config c;
	uint64_t size;
	uint8_t *host;
	void *dbuf;
	FILE *f;

	CHECK(cudaSetDevice(dev));
	CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
	aic = (uint32_t)sms / 3;
	aiv = (uint32_t)sms - aic;
	if (aic > CT_DEVPROF_MAX_CORES)
		aic = CT_DEVPROF_MAX_CORES;
	if (aiv > CT_DEVPROF_MAX_CORES)
		aiv = CT_DEVPROF_MAX_CORES;
	/* The planner's rule from the real schedule: tasks per worker, per role. */
	for (t = 0; t < NTASKS; t++)
		tasks[t % (aic + aiv)]++;
	for (w = 0; w < aic + aiv; w++) {
		if (w < aic && tasks[w] > max_aic)
			max_aic = tasks[w];
		if (w >= aic && tasks[w] > max_aiv)
			max_aiv = tasks[w];
	}
	aic_cap = ct_devprof_capacity(max_aic, 3);
	aiv_cap = ct_devprof_capacity(max_aiv, 3);
	size = ct_devprof_buffer_size(aic, aiv, aic_cap, aiv_cap, sizeof(meta_json) - 1);
	host = (uint8_t *)malloc(size);
	if (!host || ct_devprof_buffer_init(host, size, CT_DEVPROF_CLOCK_HZ, CT_DEVPROF_F_GLOBAL_CLOCK,
					    aic, aiv, aic_cap, aiv_cap, meta_json,
					    sizeof(meta_json) - 1)) {
		fprintf(stderr, "megakernel: cannot lay out a %llu-byte buffer\n",
			(unsigned long long)size);
		return 1;
	}
	for (t = 0; t < NTASKS; t++) {
		descs[t].stage = t / TASKS_PER_STAGE;
		descs[t].owner_id = t / TASKS_PER_STAGE / 2;
	}
	memset(&c, 0, sizeof(c));
	c.aic = aic;
	c.aiv = aiv;
	CHECK(cudaMalloc(&dbuf, size));
	CHECK(cudaMalloc((void **)&c.descs, sizeof(descs)));
	CHECK(cudaMemcpy((void *)c.descs, descs, sizeof(descs), cudaMemcpyHostToDevice));
	CHECK(cudaMalloc((void **)&c.deps, NTASKS * sizeof(unsigned int)));
	CHECK(cudaMalloc((void **)&c.data, (size_t)NTASKS * WIDTH * sizeof(float)));
	CHECK(cudaMemset(c.data, 0, (size_t)NTASKS * WIDTH * sizeof(float)));
	f = fopen(out, "wb");
	if (!f) {
		perror(out);
		return 1;
	}
	ct_devprof_session_init(&session, &sched, 0);
	for (step = 0; step < steps; step++) {
		enum ct_devprof_action a;

		a = ct_devprof_session_configure(&session, &c.prof, (uint64_t)(uintptr_t)dbuf);
		if (a != CT_DEVPROF_NONE)
			CHECK(cudaMemcpy(dbuf, host, size, cudaMemcpyHostToDevice));
		CHECK(cudaMemset(c.deps, 0, NTASKS * sizeof(unsigned int)));
		megakernel<<<aic + aiv, THREADS>>>(c);
		CHECK(cudaGetLastError());
		CHECK(cudaDeviceSynchronize());
		if (a == CT_DEVPROF_RECORD || a == CT_DEVPROF_RECORD_AND_SAVE) {
			uint8_t *copy = (uint8_t *)malloc(size);

			CHECK(cudaMemcpy(copy, dbuf, size, cudaMemcpyDeviceToHost));
			ct_devprof_buffer_stamp(copy, &c.prof);
			if (fwrite(copy, 1, size, f) != size) {
				perror(out);
				return 1;
			}
			free(copy);
		}
		printf("step %d: %s\n", step,
		       a == CT_DEVPROF_NONE	 ? "not sampled"
		       : a == CT_DEVPROF_WARMUP ? "warmup (sampled, discarded)"
						: "sampled, saved");
		ct_devprof_session_step(&session);
	}
	if (fclose(f)) {
		perror(out);
		return 1;
	}
	printf("%s: %u AIC + %u AIV workers, capacity %u/%u records\n", out, aic, aiv, aic_cap,
	       aiv_cap);
	return 0;
}
