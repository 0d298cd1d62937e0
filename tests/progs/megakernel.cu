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
 *	build/progs/megakernel --cost [calls]   kernel time, sampling off vs on
 *
 * With -DMK_LIBRARY (`make cuda` builds build/progs/libmegakernel.so) there is no main:
 * the C entry points below (mk_open, mk_call, mk_close, mk_run, mk_cost) drive the same
 * session from another program. tests/workloads/megakernel_profiled.py calls them
 * through ctypes under torch.profiler, so that `devprof fuse` meets a real Kineto trace.
 *
 * Built with nvcc only by `make cuda`; run on an H200 by scripts/gpu-check.sh
 * (docs/PERFORMANCE.md).
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commtrace/devprof.h"

#define STAGES		6
#define TASKS_PER_STAGE 24
#define NTASKS		(STAGES * TASKS_PER_STAGE)
#define THREADS		128
#define WIDTH		1024
#define RECS_PER_TASK	3 /* wait, compute, trigger */

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
			ct_devprof_record(&r, CT_DEVPROF_REC_WAIT, stage, task, idx, &d->owner_id,
					  t);
		t = leader ? ct_devprof_start(&r) : 0;
		compute(&c, task, aic_role);
		if (leader)
			ct_devprof_record(&r, CT_DEVPROF_REC_COMPUTE, stage, task, idx,
					  &d->owner_id, t);
		t = leader ? ct_devprof_start(&r) : 0;
		trigger(&c, task);
		if (leader)
			ct_devprof_record(&r, CT_DEVPROF_REC_TRIGGER, stage, task, idx,
					  &d->owner_id, t);
	}
}

static const char meta_json[] =
    "{\"kernel\":\"megakernel\",\"stage_names\":[\"qkv\",\"attn\",\"o_proj\",\"norm\","
    "\"mlp_up\",\"mlp_down\"],\"owner_labels\":[\"layer0\",\"layer1\",\"layer2\"]}";

/* One sampling session of the kernel on device 0: its buffers and the output file. */
struct mk_state {
	struct mk_config c;
	struct ct_devprof_session session;
	uint32_t aic_cap, aiv_cap;
	uint64_t size;
	uint8_t *host; /* the laid-out empty buffer, copied to the device before a sampled call */
	uint8_t *copy; /* a sampled call's buffer, copied back */
	void *dbuf;
	cudaEvent_t ev[2];
	int have_events;
	FILE *out;
	char path[256];
	uint32_t saved;
};

static char mk_err[512];

/* The last error of any mk_* call, also printed to stderr when it happened. */
extern "C" const char *mk_error(void)
{
	return mk_err;
}

static int mk_fail(const char *what, const char *why)
{
	snprintf(mk_err, sizeof(mk_err), "%s: %s", what, why);
	fprintf(stderr, "megakernel: %s\n", mk_err);
	return -1;
}

/* A library must not exit() its host process: a CUDA error fails the call instead. */
#define CHECK(x)                                                                                   \
	do {                                                                                       \
		cudaError_t e_ = (x);                                                              \
		if (e_ != cudaSuccess)                                                             \
			return mk_fail(#x, cudaGetErrorString(e_));                                \
	} while (0)

static void mk_free(struct mk_state *s)
{
	if (s->have_events) {
		cudaEventDestroy(s->ev[0]);
		cudaEventDestroy(s->ev[1]);
	}
	cudaFree(s->dbuf);
	cudaFree((void *)s->c.descs);
	cudaFree(s->c.deps);
	cudaFree(s->c.data);
	free(s->host);
	free(s->copy);
	free(s);
}

static int mk_setup(struct mk_state *s, const char *out, const struct ct_devprof_schedule *sched)
{
	struct task_desc descs[NTASKS];
	uint32_t tasks[2 * CT_DEVPROF_MAX_CORES] = {0}, aic, aiv, w, t, max_aic = 0, max_aiv = 0;
	int sms, dev = 0;

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
	s->aic_cap = ct_devprof_capacity(max_aic, RECS_PER_TASK);
	s->aiv_cap = ct_devprof_capacity(max_aiv, RECS_PER_TASK);
	s->size = ct_devprof_buffer_size(aic, aiv, s->aic_cap, s->aiv_cap, sizeof(meta_json) - 1);
	s->host = (uint8_t *)malloc(s->size);
	s->copy = (uint8_t *)malloc(s->size);
	if (!s->host || !s->copy ||
	    ct_devprof_buffer_init(s->host, s->size, CT_DEVPROF_CLOCK_HZ, CT_DEVPROF_F_GLOBAL_CLOCK,
				   aic, aiv, s->aic_cap, s->aiv_cap, meta_json,
				   sizeof(meta_json) - 1))
		return mk_fail("buffer", "cannot lay out the profile buffer");
	for (t = 0; t < NTASKS; t++) {
		descs[t].stage = t / TASKS_PER_STAGE;
		descs[t].owner_id = t / TASKS_PER_STAGE / 2;
	}
	s->c.aic = aic;
	s->c.aiv = aiv;
	CHECK(cudaMalloc(&s->dbuf, s->size));
	CHECK(cudaMalloc((void **)&s->c.descs, sizeof(descs)));
	CHECK(cudaMemcpy((void *)s->c.descs, descs, sizeof(descs), cudaMemcpyHostToDevice));
	CHECK(cudaMalloc((void **)&s->c.deps, NTASKS * sizeof(unsigned int)));
	CHECK(cudaMalloc((void **)&s->c.data, (size_t)NTASKS * WIDTH * sizeof(float)));
	CHECK(cudaMemset(s->c.data, 0, (size_t)NTASKS * WIDTH * sizeof(float)));
	CHECK(cudaEventCreate(&s->ev[0]));
	if (cudaEventCreate(&s->ev[1]) != cudaSuccess) {
		cudaEventDestroy(s->ev[0]);
		return mk_fail("cudaEventCreate", "second event");
	}
	s->have_events = 1;
	if (out) {
		snprintf(s->path, sizeof(s->path), "%s", out);
		s->out = fopen(out, "wb");
		if (!s->out)
			return mk_fail(out, strerror(errno));
	}
	ct_devprof_session_init(&s->session, sched, 0);
	return 0;
}

/*
 * Lays the buffer out for device 0 and starts a sampling session with the five numbers
 * of torch.profiler.schedule(). out: the file sampled buffers are appended to (NULL:
 * none are kept). NULL on error; mk_error() says why.
 */
extern "C" struct mk_state *mk_open(const char *out, uint32_t skip_first, uint32_t wait,
				    uint32_t warmup, uint32_t active, uint32_t repeat)
{
	struct ct_devprof_schedule sched = {skip_first, wait, warmup, active, repeat};
	struct mk_state *s = (struct mk_state *)calloc(1, sizeof(*s));

	if (!s) {
		mk_fail("mk_open", "out of memory");
		return NULL;
	}
	if (mk_setup(s, out, &sched)) {
		if (s->out)
			fclose(s->out);
		mk_free(s);
		return NULL;
	}
	return s;
}

/*
 * info[0..4]: AIC workers, AIV workers, records one sampled call writes (no drops:
 * the capacities come from the planner), AIC and AIV capacity; info[5]: buffer bytes;
 * info[6]: calls so far (the next call's invocation_seq); info[7]: buffers saved.
 */
extern "C" void mk_info(const struct mk_state *s, uint64_t info[8])
{
	info[0] = s->c.aic;
	info[1] = s->c.aiv;
	info[2] = (uint64_t)NTASKS * RECS_PER_TASK;
	info[3] = s->aic_cap;
	info[4] = s->aiv_cap;
	info[5] = s->size;
	info[6] = s->session.invocation_seq;
	info[7] = s->saved;
}

/*
 * One kernel call, then profiler.step() (one call per step): returns the call's enum
 * ct_devprof_action, or -1 on error. Synchronous: the kernel has finished on return.
 */
extern "C" int mk_call(struct mk_state *s)
{
	enum ct_devprof_action a;

	a = ct_devprof_session_configure(&s->session, &s->c.prof, (uint64_t)(uintptr_t)s->dbuf);
	if (a != CT_DEVPROF_NONE)
		CHECK(cudaMemcpy(s->dbuf, s->host, s->size, cudaMemcpyHostToDevice));
	CHECK(cudaMemset(s->c.deps, 0, NTASKS * sizeof(unsigned int)));
	megakernel<<<s->c.aic + s->c.aiv, THREADS>>>(s->c);
	CHECK(cudaGetLastError());
	CHECK(cudaDeviceSynchronize());
	if (a == CT_DEVPROF_RECORD || a == CT_DEVPROF_RECORD_AND_SAVE) {
		CHECK(cudaMemcpy(s->copy, s->dbuf, s->size, cudaMemcpyDeviceToHost));
		ct_devprof_buffer_stamp(s->copy, &s->c.prof);
		if (s->out && fwrite(s->copy, 1, s->size, s->out) != s->size)
			return mk_fail(s->path, strerror(errno));
		s->saved++;
	}
	ct_devprof_session_step(&s->session);
	return (int)a;
}

/*
 * The cost of sampling: the kernel's time (cudaEvent pairs around the launch alone) over
 * calls unsampled and calls sampled, alternating, the order swapped every other pair so
 * neither side always runs second; 16 pairs of warm-up first. off_ns[i] and on_ns[i],
 * i < calls, receive the times. The session is not advanced. 0, or -1 on error.
 */
extern "C" int mk_cost(struct mk_state *s, int calls, double *off_ns, double *on_ns)
{
	struct mk_config off = s->c, on = s->c;
	int i, k;

	memset(&off.prof, 0, sizeof(off.prof));
	memset(&on.prof, 0, sizeof(on.prof));
	on.prof.profile_enable = 1;
	on.prof.profile_buffer = (uint64_t)(uintptr_t)s->dbuf;
	CHECK(cudaMemcpy(s->dbuf, s->host, s->size, cudaMemcpyHostToDevice));
	for (i = -16; i < calls; i++)
		for (k = 0; k < 2; k++) {
			int sampled = k ^ (i & 1);
			float ms;

			CHECK(cudaMemset(s->c.deps, 0, NTASKS * sizeof(unsigned int)));
			CHECK(cudaEventRecord(s->ev[0]));
			megakernel<<<s->c.aic + s->c.aiv, THREADS>>>(sampled ? on : off);
			CHECK(cudaGetLastError());
			CHECK(cudaEventRecord(s->ev[1]));
			CHECK(cudaEventSynchronize(s->ev[1]));
			CHECK(cudaEventElapsedTime(&ms, s->ev[0], s->ev[1]));
			if (i >= 0)
				(sampled ? on_ns : off_ns)[i] = ms * 1e6;
		}
	return 0;
}

/* Closes the output file and frees everything: 0, or -1 if the file could not be written. */
extern "C" int mk_close(struct mk_state *s)
{
	int rc = 0;

	if (s->out && fclose(s->out))
		rc = mk_fail(s->path, strerror(errno));
	mk_free(s);
	return rc;
}

/*
 * A whole session: mk_open(), calls x mk_call(), mk_close(); with verbose, a line per
 * call on stdout. Returns the number of buffers saved to out, or -1 on error.
 */
extern "C" int mk_run(const char *out, int calls, uint32_t skip_first, uint32_t wait,
		      uint32_t warmup, uint32_t active, uint32_t repeat, int verbose)
{
	struct mk_state *s = mk_open(out, skip_first, wait, warmup, active, repeat);
	uint64_t info[8];
	int step, a, saved;

	if (!s)
		return -1;
	for (step = 0; step < calls; step++) {
		a = mk_call(s);
		if (a < 0) {
			mk_close(s);
			return -1;
		}
		if (verbose)
			printf("step %d: %s\n", step,
			       a == CT_DEVPROF_NONE	? "not sampled"
			       : a == CT_DEVPROF_WARMUP ? "warmup (sampled, discarded)"
							: "sampled, saved");
	}
	mk_info(s, info);
	saved = (int)s->saved;
	if (mk_close(s))
		return -1;
	if (verbose)
		printf("%s: %u AIC + %u AIV workers, capacity %u/%u records\n", out ? out : "-",
		       (unsigned)info[0], (unsigned)info[1], (unsigned)info[3], (unsigned)info[4]);
	return saved;
}

#ifndef MK_LIBRARY
static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Sorts v; the value at fraction q (0.5: the median). */
static double quantile(double *v, int n, double q)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[(int)(q * (n - 1) + 0.5)];
}

static double mean(const double *v, int n)
{
	double sum = 0;
	int i;

	for (i = 0; i < n; i++)
		sum += v[i];
	return sum / n;
}

/* megakernel --cost [calls]: what sampling costs the kernel, in ns per call. */
static int cost(int calls)
{
	struct mk_state *s = mk_open(NULL, 0, 0, 0, 1, 0);
	double *off = (double *)malloc(calls * sizeof(double));
	double *on = (double *)malloc(calls * sizeof(double));
	double off_med, on_med, off_mean, on_mean;
	uint64_t info[8];

	if (!s || !off || !on || mk_cost(s, calls, off, on))
		return 1;
	mk_info(s, info);
	off_mean = mean(off, calls);
	on_mean = mean(on, calls);
	printf("devprof cost: %u AIC + %u AIV workers, %d tasks, %u records per sampled call; "
	       "%d calls each way, alternating, cudaEvent-timed kernel only\n",
	       (unsigned)info[0], (unsigned)info[1], NTASKS, (unsigned)info[2], calls);
	off_med = quantile(off, calls, 0.5);
	printf("devprof cost: sampling off: median %.0f ns per call (p10 %.0f, p90 %.0f, "
	       "mean %.0f)\n",
	       off_med, quantile(off, calls, 0.1), quantile(off, calls, 0.9), off_mean);
	on_med = quantile(on, calls, 0.5);
	printf("devprof cost: sampling on:  median %.0f ns per call (p10 %.0f, p90 %.0f, "
	       "mean %.0f)\n",
	       on_med, quantile(on, calls, 0.1), quantile(on, calls, 0.9), on_mean);
	printf("devprof cost: on/off ratio %.4f (medians), %.4f (means); added %.0f ns per "
	       "call, %.1f ns per record (medians)\n",
	       on_med / off_med, on_mean / off_mean, on_med - off_med,
	       (on_med - off_med) / (double)info[2]);
	free(off);
	free(on);
	return mk_close(s) ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--cost"))
		return cost(argc > 2 ? atoi(argv[2]) : 2000);
	/* skip 1, wait 1, warmup 1, active 2, one cycle: steps 3 and 4 are kept */
	return mk_run(argc > 1 ? argv[1] : "megakernel.bin", argc > 2 ? atoi(argv[2]) : 6, 1, 1, 1,
		      2, 1, 1) < 0;
}
#endif
