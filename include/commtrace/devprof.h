/* SPDX-License-Identifier: MIT */
/*
 * Device profile buffers (seed 004, "MegaKernel profiling"): the binary format one
 * fused kernel invocation fills, a header-only recorder for the device side, and the
 * host-side helpers a runtime needs to size, initialise and schedule the buffers.
 *
 * The layout is documented byte by byte in docs/devprof.md; the decoder lives in
 * user/devprof/. Everything here is plain C with fixed-width fields, so the same
 * header compiles as CUDA device code (under __CUDACC__), as host C, and reads as a
 * struct layout for Ascend C. All fields are little-endian (every device we target is).
 *
 * Recorder usage, one worker (CUDA block / Ascend AIC or AIV core):
 *
 *	struct ct_devprof_recorder r;
 *	ct_devprof_recorder_init(&r, &cfg->prof, CT_DEVPROF_CORE_AIC, blockIdx.x); // all threads
 *	...
 *	uint64_t t = ct_devprof_start(&r);              // leader thread only
 *	wait_for_dependencies(task);
 *	ct_devprof_record(&r, CT_DEVPROF_REC_WAIT, desc, task, idx, &desc_tab[desc].owner, t);
 *
 * With cfg->prof.profile_enable == 0 (the zero-initialised default) the recorder never
 * reads the clock, never executes its barrier, never touches the buffer and never
 * dereferences the owner pointer (FR-03); tests/progs/devprof_guard.c proves it.
 */
#ifndef COMMTRACE_DEVPROF_H
#define COMMTRACE_DEVPROF_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
#define CT_DEVPROF_ASSERT(c, m) static_assert(c, m)
#else
#define CT_DEVPROF_ASSERT(c, m) _Static_assert(c, m)
#endif

#define CT_DEVPROF_MAGIC      0x50445443u /* "CTDP" read as little-endian bytes */
#define CT_DEVPROF_VERSION    1
#define CT_DEVPROF_ALIGN_RECS 16	     /* FR-05: capacity is a multiple of 16 records */
#define CT_DEVPROF_MAX_RECS   256	     /* FR-05: at most 256 records per core */
#define CT_DEVPROF_MAX_CORES  1024	     /* per core type; H200 has 132 SMs, Ascend A3 24+48 */
#define CT_DEVPROF_MAX_META   (1u << 20)     /* metadata JSON trailer, bytes */
#define CT_DEVPROF_MIN_HZ     1000000ull     /* 1 MHz: below, µs timestamps lose meaning */
#define CT_DEVPROF_MAX_HZ     10000000000ull /* 10 GHz: no device counter runs faster */

enum ct_devprof_core_type {
	CT_DEVPROF_CORE_AIC = 1, /* Ascend cube core; on NVIDIA the SM workers of a kernel */
	CT_DEVPROF_CORE_AIV = 2, /* Ascend vector core; on NVIDIA a second worker role */
};

enum ct_devprof_rec_kind {
	CT_DEVPROF_REC_WAIT = 1,    /* WaitDependency: waiting on the task's input counters */
	CT_DEVPROF_REC_COMPUTE = 2, /* Compute: the task body */
	CT_DEVPROF_REC_TRIGGER = 3, /* TriggerEvent: signalling the dependants */
};

/* Header flags. */
#define CT_DEVPROF_F_GLOBAL_CLOCK 0x1u /* one counter for all cores (NVIDIA %globaltimer) */

/* 64 bytes at offset 0 of every invocation's buffer. */
struct ct_devprof_header {
	uint32_t magic;		 /* CT_DEVPROF_MAGIC */
	uint16_t version;	 /* CT_DEVPROF_VERSION */
	uint16_t header_size;	 /* sizeof(struct ct_devprof_header) */
	uint16_t slot_size;	 /* sizeof(struct ct_devprof_slot) */
	uint16_t record_size;	 /* sizeof(struct ct_devprof_record) */
	uint32_t flags;		 /* CT_DEVPROF_F_* */
	uint64_t clock_hz;	 /* cycles per second of start_cycle/end_cycle */
	uint32_t aic_cores;	 /* AIC slots, first */
	uint32_t aiv_cores;	 /* AIV slots, after the AIC slots */
	uint32_t aic_capacity;	 /* records per AIC slot */
	uint32_t aiv_capacity;	 /* records per AIV slot */
	uint64_t total_size;	 /* bytes of this invocation, header to padded metadata */
	uint32_t invocation_seq; /* index of this kernel call in the run (schedule) */
	uint32_t step;		 /* training step of this call (schedule) */
	uint32_t meta_size;	 /* bytes of the metadata JSON after the slots, 0 = none */
	uint32_t reserved;	 /* 0 */
};

/* 16 bytes at the start of every per-core slot, followed by capacity records. */
struct ct_devprof_slot {
	uint8_t core_type; /* enum ct_devprof_core_type */
	uint8_t reserved0;
	uint16_t reserved1;
	uint32_t core_id;	/* index within its core type */
	uint32_t record_count;	/* records written, <= capacity */
	uint32_t dropped_count; /* records not written because the slot was full (FR-06) */
};

/* 40 bytes; only the fields common to every MegaKernel (FR-07). */
struct ct_devprof_record {
	uint16_t kind; /* enum ct_devprof_rec_kind; the type tag comes first */
	uint16_t reserved0;
	uint32_t desc_id;	   /* task descriptor: selects the stage name */
	uint32_t task_id;	   /* task within the invocation */
	uint32_t stage_task_index; /* index of the task within its stage */
	uint32_t owner_id;	   /* owner (layer, expert, …): selects the owner label */
	uint32_t reserved1;
	uint64_t start_cycle;
	uint64_t end_cycle;
};

CT_DEVPROF_ASSERT(sizeof(struct ct_devprof_header) == 64, "devprof header is 64 bytes");
CT_DEVPROF_ASSERT(sizeof(struct ct_devprof_slot) == 16, "devprof slot header is 16 bytes");
CT_DEVPROF_ASSERT(sizeof(struct ct_devprof_record) == 40, "devprof record is 40 bytes");

/*
 * The profiling part of a kernel's runtime config (RuntimeConfigC in seed 004). A
 * MegaKernel embeds it in its own config; zero-initialised means "do not sample", so
 * one compiled kernel serves both sampled and unsampled calls (FR-01, FR-02).
 */
struct ct_devprof_runtime_config {
	uint32_t profile_enable; /* 0: off (default) */
	uint32_t step;		 /* set by the session, stamped into the header on save */
	uint64_t profile_buffer; /* device address of the struct ct_devprof_header */
	uint32_t invocation_seq;
	uint32_t reserved;
};
CT_DEVPROF_ASSERT(sizeof(struct ct_devprof_runtime_config) == 24, "devprof config is 24 bytes");

/* ---- Device side ------------------------------------------------------------------ */

#if defined(__CUDACC__)
#define CT_DEVPROF_DEV static __device__ __forceinline__
#define CT_DEVPROF_HD  static __host__ __device__ inline
#else
#define CT_DEVPROF_DEV static inline
#define CT_DEVPROF_HD  static inline
#endif

/*
 * The clock and the barrier. On CUDA %globaltimer is one nanosecond counter for the
 * whole GPU (clock64 is per SM and not synchronised, so its cycles could not be laid
 * on one timeline); the barrier orders the block's threads before the leader reads it.
 * On the host both can be replaced (the guard-page test counts calls to them).
 */
#ifndef CT_DEVPROF_CLOCK
#if defined(__CUDA_ARCH__)
CT_DEVPROF_DEV uint64_t ct_devprof_clock_(void)
{
	uint64_t t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}
#define CT_DEVPROF_CLOCK()  ct_devprof_clock_()
#define CT_DEVPROF_CLOCK_HZ 1000000000ull
#else
#include <time.h>
static inline uint64_t ct_devprof_clock_(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#define CT_DEVPROF_CLOCK()  ct_devprof_clock_()
#define CT_DEVPROF_CLOCK_HZ 1000000000ull
#endif
#endif

#ifndef CT_DEVPROF_BARRIER
#if defined(__CUDA_ARCH__)
#define CT_DEVPROF_BARRIER() __syncthreads()
#else
#define CT_DEVPROF_BARRIER() ((void)0)
#endif
#endif

struct ct_devprof_recorder {
	struct ct_devprof_slot *slot; /* NULL: not sampling */
	struct ct_devprof_record *rec;
	uint32_t cap;
	uint32_t n;
	uint32_t dropped;
};

/* Byte offset of a slot: AIC slots first, then AIV slots. */
CT_DEVPROF_HD uint64_t ct_devprof_slot_offset(uint32_t aic_cores, uint32_t aic_cap,
					      uint32_t aiv_cap, uint32_t core_type,
					      uint32_t core_id)
{
	uint64_t aic_stride =
	    sizeof(struct ct_devprof_slot) + (uint64_t)aic_cap * sizeof(struct ct_devprof_record);
	uint64_t aiv_stride =
	    sizeof(struct ct_devprof_slot) + (uint64_t)aiv_cap * sizeof(struct ct_devprof_record);

	if (core_type == CT_DEVPROF_CORE_AIC)
		return sizeof(struct ct_devprof_header) + core_id * aic_stride;
	return sizeof(struct ct_devprof_header) + aic_cores * aic_stride + core_id * aiv_stride;
}

/*
 * Called by every thread of a worker (the barrier needs them all). Off: one load of
 * cfg->profile_enable, nothing else. On: locates the worker's slot.
 */
CT_DEVPROF_DEV void ct_devprof_recorder_init(struct ct_devprof_recorder *r,
					     const struct ct_devprof_runtime_config *cfg,
					     uint32_t core_type, uint32_t core_id)
{
	struct ct_devprof_header *h;
	uint32_t ncores, cap;

	r->slot = 0;
	r->rec = 0;
	r->cap = r->n = r->dropped = 0;
	if (!cfg->profile_enable || !cfg->profile_buffer)
		return;
	h = (struct ct_devprof_header *)(uintptr_t)cfg->profile_buffer;
	ncores = core_type == CT_DEVPROF_CORE_AIC ? h->aic_cores : h->aiv_cores;
	cap = core_type == CT_DEVPROF_CORE_AIC ? h->aic_capacity : h->aiv_capacity;
	if (core_id >= ncores ||
	    (core_type != CT_DEVPROF_CORE_AIC && core_type != CT_DEVPROF_CORE_AIV))
		return; /* a worker the host did not plan for records nothing */
	r->slot = (struct ct_devprof_slot *)((char *)h + ct_devprof_slot_offset(
							     h->aic_cores, h->aic_capacity,
							     h->aiv_capacity, core_type, core_id));
	r->rec = (struct ct_devprof_record *)(r->slot + 1);
	r->cap = cap;
}

/*
 * Resets the slot header so a reused buffer never carries stale records; the leader
 * thread calls it once, after init and before its first record.
 */
CT_DEVPROF_DEV void ct_devprof_recorder_reset(struct ct_devprof_recorder *r, uint32_t core_type,
					      uint32_t core_id)
{
	if (!r->slot)
		return;
	r->slot->core_type = (uint8_t)core_type;
	r->slot->core_id = core_id;
	r->slot->record_count = 0;
	r->slot->dropped_count = 0;
}

CT_DEVPROF_DEV int ct_devprof_on(const struct ct_devprof_recorder *r)
{
	return r->slot != 0;
}

/* The profiling barrier; all threads of the worker call it, it is skipped when off. */
CT_DEVPROF_DEV void ct_devprof_barrier(const struct ct_devprof_recorder *r)
{
	if (r->slot)
		CT_DEVPROF_BARRIER();
}

CT_DEVPROF_DEV uint64_t ct_devprof_start(const struct ct_devprof_recorder *r)
{
	return r->slot ? CT_DEVPROF_CLOCK() : 0;
}

/*
 * Closes an interval opened by ct_devprof_start(). owner_id is a pointer so that the
 * owner metadata is loaded only when sampling (FR-03). A full slot counts a drop and
 * writes nothing (FR-06); the counts are stored after each record so a host reading a
 * buffer after a trapped kernel still sees a consistent slot.
 */
CT_DEVPROF_DEV void ct_devprof_record(struct ct_devprof_recorder *r, uint32_t kind,
				      uint32_t desc_id, uint32_t task_id, uint32_t stage_task_index,
				      const uint32_t *owner_id, uint64_t start_cycle)
{
	struct ct_devprof_record *e;
	uint64_t end;

	if (!r->slot)
		return;
	end = CT_DEVPROF_CLOCK();
	if (r->n >= r->cap) {
		r->slot->dropped_count = ++r->dropped;
		return;
	}
	e = &r->rec[r->n];
	e->kind = (uint16_t)kind;
	e->reserved0 = 0;
	e->desc_id = desc_id;
	e->task_id = task_id;
	e->stage_task_index = stage_task_index;
	e->owner_id = owner_id ? *owner_id : 0;
	e->reserved1 = 0;
	e->start_cycle = start_cycle;
	e->end_cycle = end;
	r->slot->record_count = ++r->n;
}

/* ---- Host side: sizing, initialisation, sampling window ----------------------------- */

/* Plain static inline: host-only under nvcc too, and parsed harmlessly by its device pass. */
#include <string.h>

/* FR-05: records for the busiest core, rounded up to 16, at most 256. */
static inline uint32_t ct_devprof_capacity(uint32_t max_tasks, uint32_t records_per_task)
{
	uint64_t n = (uint64_t)max_tasks * records_per_task;

	n = (n + CT_DEVPROF_ALIGN_RECS - 1) / CT_DEVPROF_ALIGN_RECS * CT_DEVPROF_ALIGN_RECS;
	return n > CT_DEVPROF_MAX_RECS ? CT_DEVPROF_MAX_RECS : (uint32_t)n;
}

static inline uint64_t ct_devprof_meta_padded(uint32_t meta_size)
{
	return ((uint64_t)meta_size + 7) & ~7ull;
}

/* Bytes of one invocation's buffer (without metadata: meta_size 0). */
static inline uint64_t ct_devprof_buffer_size(uint32_t aic_cores, uint32_t aiv_cores,
					      uint32_t aic_cap, uint32_t aiv_cap,
					      uint32_t meta_size)
{
	return ct_devprof_slot_offset(aic_cores, aic_cap, aiv_cap, CT_DEVPROF_CORE_AIV, aiv_cores) +
	       ct_devprof_meta_padded(meta_size);
}

/*
 * Writes the header and empty slots into a host buffer of len bytes (then copied to the
 * device). meta/meta_size: optional metadata JSON (stage_names, owner_labels; see
 * docs/devprof.md) placed after the slots. Returns 0, or -1 if len is too small or the
 * layout breaks FR-05.
 */
static inline int ct_devprof_buffer_init(void *buf, size_t len, uint64_t clock_hz, uint32_t flags,
					 uint32_t aic_cores, uint32_t aiv_cores, uint32_t aic_cap,
					 uint32_t aiv_cap, const char *meta, uint32_t meta_size)
{
	struct ct_devprof_header h;
	uint64_t size = ct_devprof_buffer_size(aic_cores, aiv_cores, aic_cap, aiv_cap, meta_size);
	uint32_t i;

	if (aic_cap % CT_DEVPROF_ALIGN_RECS || aiv_cap % CT_DEVPROF_ALIGN_RECS ||
	    aic_cap > CT_DEVPROF_MAX_RECS || aiv_cap > CT_DEVPROF_MAX_RECS ||
	    aic_cores > CT_DEVPROF_MAX_CORES || aiv_cores > CT_DEVPROF_MAX_CORES ||
	    meta_size > CT_DEVPROF_MAX_META || size > len)
		return -1;
	memset(buf, 0, (size_t)size);
	memset(&h, 0, sizeof(h));
	h.magic = CT_DEVPROF_MAGIC;
	h.version = CT_DEVPROF_VERSION;
	h.header_size = sizeof(struct ct_devprof_header);
	h.slot_size = sizeof(struct ct_devprof_slot);
	h.record_size = sizeof(struct ct_devprof_record);
	h.flags = flags;
	h.clock_hz = clock_hz;
	h.aic_cores = aic_cores;
	h.aiv_cores = aiv_cores;
	h.aic_capacity = aic_cap;
	h.aiv_capacity = aiv_cap;
	h.total_size = size;
	h.meta_size = meta_size;
	memcpy(buf, &h, sizeof(h));
	for (i = 0; i < aic_cores + aiv_cores; i++) {
		struct ct_devprof_slot s;
		uint32_t type = i < aic_cores ? CT_DEVPROF_CORE_AIC : CT_DEVPROF_CORE_AIV;
		uint32_t id = i < aic_cores ? i : i - aic_cores;

		memset(&s, 0, sizeof(s));
		s.core_type = (uint8_t)type;
		s.core_id = id;
		memcpy((char *)buf + ct_devprof_slot_offset(aic_cores, aic_cap, aiv_cap, type, id),
		       &s, sizeof(s));
	}
	if (meta_size)
		memcpy((char *)buf + (size - ct_devprof_meta_padded(meta_size)), meta, meta_size);
	return 0;
}

/* Records which step and call a saved buffer belongs to (the device does not know). */
static inline void ct_devprof_buffer_stamp(void *buf, const struct ct_devprof_runtime_config *cfg)
{
	struct ct_devprof_header h;

	memcpy(&h, buf, sizeof(h));
	h.step = cfg->step;
	h.invocation_seq = cfg->invocation_seq;
	memcpy(buf, &h, sizeof(h));
}

/*
 * The sampling window, after torch.profiler.schedule() (seed 004's schedule()): skip
 * skip_first steps, then cycles of wait + warmup + active steps, repeat cycles in all
 * (0: forever); skip_first_wait non-zero leaves out the first cycle's wait (torch 2.6).
 * Warmup calls sample but their buffers are discarded, so the first saved call does
 * not pay first-touch costs.
 */
struct ct_devprof_schedule {
	uint32_t skip_first;
	uint32_t wait;
	uint32_t warmup;
	uint32_t active;
	uint32_t repeat;
	uint32_t skip_first_wait;
};

enum ct_devprof_action {
	CT_DEVPROF_NONE = 0,		/* do not sample */
	CT_DEVPROF_WARMUP = 1,		/* sample, discard the buffer */
	CT_DEVPROF_RECORD = 2,		/* sample, keep the buffer */
	CT_DEVPROF_RECORD_AND_SAVE = 3, /* sample, keep it, last step of a cycle: flush */
};

static inline enum ct_devprof_action ct_devprof_schedule_action(const struct ct_devprof_schedule *s,
								uint64_t step)
{
	uint64_t cycle = (uint64_t)s->wait + s->warmup + s->active, pos;

	if (step < s->skip_first || !s->active)
		return CT_DEVPROF_NONE;
	step -= s->skip_first;
	if (s->skip_first_wait)
		step += s->wait;
	if (s->repeat && step / cycle >= s->repeat)
		return CT_DEVPROF_NONE;
	pos = step % cycle;
	if (pos < s->wait)
		return CT_DEVPROF_NONE;
	if (pos < (uint64_t)s->wait + s->warmup)
		return CT_DEVPROF_WARMUP;
	return pos == cycle - 1 ? CT_DEVPROF_RECORD_AND_SAVE : CT_DEVPROF_RECORD;
}

/*
 * mega_kernel_profile() + step(): the session decides, per kernel call, whether it
 * samples, and fills the runtime config so the user never touches the buffer fields.
 * max_per_step bounds the sampled calls in one step (0: all).
 */
struct ct_devprof_session {
	struct ct_devprof_schedule sched;
	uint64_t step;
	uint32_t invocation_seq; /* calls seen so far */
	uint32_t in_step;	 /* calls seen in this step */
	uint32_t max_per_step;
};

static inline void ct_devprof_session_init(struct ct_devprof_session *s,
					   const struct ct_devprof_schedule *sched,
					   uint32_t max_per_step)
{
	memset(s, 0, sizeof(*s));
	s->sched = *sched;
	s->max_per_step = max_per_step;
}

/* profiler.step(): the training loop finished a step. */
static inline void ct_devprof_session_step(struct ct_devprof_session *s)
{
	s->step++;
	s->in_step = 0;
}

/*
 * Before each kernel call: fills cfg and returns what to do with the buffer after the
 * call (CT_DEVPROF_RECORD*: copy it back, ct_devprof_buffer_stamp() it and save it).
 */
static inline enum ct_devprof_action
ct_devprof_session_configure(struct ct_devprof_session *s, struct ct_devprof_runtime_config *cfg,
			     uint64_t device_buffer)
{
	enum ct_devprof_action a = ct_devprof_schedule_action(&s->sched, s->step);

	if (s->max_per_step && s->in_step >= s->max_per_step)
		a = CT_DEVPROF_NONE;
	memset(cfg, 0, sizeof(*cfg));
	cfg->step = (uint32_t)s->step;
	cfg->invocation_seq = s->invocation_seq++;
	s->in_step++;
	if (a != CT_DEVPROF_NONE && device_buffer) {
		cfg->profile_enable = 1;
		cfg->profile_buffer = device_buffer;
	} else {
		a = CT_DEVPROF_NONE;
	}
	return a;
}

#endif /* COMMTRACE_DEVPROF_H */
