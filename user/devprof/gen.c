// SPDX-License-Identifier: MIT
/*
 * Buffers with known content, written through the real recorder against a simulated
 * clock, so the generator also exercises the device-side write path (including the
 * full-slot drop counting). Every number is deterministic: goldens depend on it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t gen_now;
static uint64_t gen_clock(void)
{
	return gen_now;
}
#define CT_DEVPROF_CLOCK() gen_clock()
#include "devprof/devprof.h"

const char *const devprof_scenarios[] = {"basic", "overflow", "nometa", "multi", NULL};
const char *const devprof_corruptions[] = {
    "none",	 "magic",	"version", "truncate",	       "count", "end-before-start",
    "freq-zero", "freq-absurd", "kind",	   "dropped-not-full", NULL,
};

struct scenario {
	const char *name;
	uint32_t aic, aiv;
	const uint32_t *tasks; /* per slot: AIC slots, then AIV slots */
	int force_cap;	       /* 0: from the planner; else this capacity for both types */
	const char *meta;
	uint32_t invocations;
};

static const uint32_t basic_tasks[] = {2, 1, 2, 2, 1};
static const uint32_t overflow_tasks[] = {7, 2};
static const uint32_t nometa_tasks[] = {2, 1, 1, 2};
static const uint32_t multi_tasks[] = {2, 1, 2};

/* desc 3 has no stage name and owner 2 no label: fallbacks even with metadata. */
static const char basic_meta[] =
    "{\"kernel\":\"demo_megakernel\",\"stage_names\":{\"0\":\"attn_qkv\",\"1\":\"attn_out\","
    "\"2\":\"mlp_up\"},\"owner_labels\":[\"layer0\",\"layer1\"]}";
static const char multi_meta[] =
    "{\"kernel\":\"megakernel\",\"stage_names\":[\"attn\",\"mlp\",\"norm\",\"allreduce\"],"
    "\"owner_labels\":{\"0\":\"layer0\",\"1\":\"layer1\",\"2\":\"layer2\"}}";

static const struct scenario scenarios[] = {
    {"basic", 2, 3, basic_tasks, 0, basic_meta, 1},
    {"overflow", 1, 1, overflow_tasks, 16, basic_meta, 1},
    {"nometa", 2, 2, nometa_tasks, 0, NULL, 1},
    {"multi", 1, 2, multi_tasks, 0, multi_meta, 3},
};

#define GEN_BASE_CYCLE 5000000000000ull /* a device that has been up for ~83 minutes */

static void run_core(struct ct_devprof_recorder *r, uint32_t type, uint32_t id, uint32_t ntasks,
		     uint32_t *task_id, uint32_t stage_idx[4], uint64_t t0)
{
	uint32_t k;

	gen_now = t0;
	for (k = 0; k < ntasks; k++) {
		uint32_t task = (*task_id)++, desc = task % 4, owner = task / 3 % 3;
		uint32_t idx = stage_idx[desc]++;
		uint64_t s;

		s = ct_devprof_start(r);
		gen_now += 100 + 10 * id;
		ct_devprof_record(r, CT_DEVPROF_REC_WAIT, desc, task, idx, &owner, s);
		s = ct_devprof_start(r);
		gen_now += type == CT_DEVPROF_CORE_AIC ? 2000 + 100 * k : 700 + 50 * k;
		ct_devprof_record(r, CT_DEVPROF_REC_COMPUTE, desc, task, idx, &owner, s);
		s = ct_devprof_start(r);
		gen_now += 40;
		ct_devprof_record(r, CT_DEVPROF_REC_TRIGGER, desc, task, idx, &owner, s);
		gen_now += 60;
	}
}

static int gen_invocation(const struct scenario *sc, uint32_t inv, uint8_t **buf, size_t *len,
			  struct devprof_err *err)
{
	uint32_t meta_size = sc->meta ? (uint32_t)strlen(sc->meta) : 0;
	uint32_t stage_idx[4] = {0}, task_id = 0, i;
	struct ct_devprof_runtime_config cfg;
	struct devprof_plan plan;
	uint32_t aic_cap, aiv_cap;
	uint64_t size;
	uint8_t *p;
	int rc;

	rc = devprof_plan(sc->tasks, sc->aic, sc->tasks + sc->aic, sc->aiv, 3, &plan, err);
	if (rc)
		return rc;
	aic_cap = sc->force_cap ? (uint32_t)sc->force_cap : plan.aic_capacity;
	aiv_cap = sc->force_cap ? (uint32_t)sc->force_cap : plan.aiv_capacity;
	size = ct_devprof_buffer_size(sc->aic, sc->aiv, aic_cap, aiv_cap, meta_size);
	p = realloc(*buf, *len + size);
	if (!p)
		return devprof_errf(err, DEVPROF_E_NOMEM, "out of memory");
	*buf = p;
	p += *len;
	if (ct_devprof_buffer_init(p, size, 1000000000ull, CT_DEVPROF_F_GLOBAL_CLOCK, sc->aic,
				   sc->aiv, aic_cap, aiv_cap, sc->meta, meta_size))
		return devprof_errf(err, DEVPROF_E_LAYOUT, "scenario %s: bad layout", sc->name);
	memset(&cfg, 0, sizeof(cfg));
	cfg.profile_enable = 1;
	cfg.profile_buffer = (uint64_t)(uintptr_t)p;
	for (i = 0; i < sc->aic + sc->aiv; i++) {
		uint32_t type = i < sc->aic ? CT_DEVPROF_CORE_AIC : CT_DEVPROF_CORE_AIV;
		uint32_t id = i < sc->aic ? i : i - sc->aic;
		struct ct_devprof_recorder r;

		ct_devprof_recorder_init(&r, &cfg, type, id);
		ct_devprof_recorder_reset(&r, type, id);
		run_core(&r, type, id, sc->tasks[i], &task_id, stage_idx,
			 GEN_BASE_CYCLE + inv * 1000000ull + 25 * i);
	}
	cfg.step = 10 + inv;
	cfg.invocation_seq = 20 + inv;
	ct_devprof_buffer_stamp(p, &cfg);
	*len += size;
	return 0;
}

static void corrupt_buf(uint8_t *p, size_t *len, enum devprof_corrupt c)
{
	struct ct_devprof_header h;
	struct ct_devprof_slot s;
	struct ct_devprof_record r;
	size_t s0 = sizeof(h), r0 = s0 + sizeof(s), r1 = r0 + sizeof(r);

	memcpy(&h, p, sizeof(h));
	memcpy(&s, p + s0, sizeof(s));
	switch (c) {
	case DEVPROF_CORRUPT_NONE:
		return;
	case DEVPROF_CORRUPT_MAGIC:
		h.magic = 0x46445025; /* "%PDF" */
		break;
	case DEVPROF_CORRUPT_VERSION:
		h.version = 2;
		break;
	case DEVPROF_CORRUPT_TRUNCATE:
		*len -= 24;
		return;
	case DEVPROF_CORRUPT_COUNT:
		s.record_count = h.aic_capacity + 1;
		memcpy(p + s0, &s, sizeof(s));
		return;
	case DEVPROF_CORRUPT_END_BEFORE_START:
		memcpy(&r, p + r1, sizeof(r));
		r.end_cycle = r.start_cycle - 1;
		memcpy(p + r1, &r, sizeof(r));
		return;
	case DEVPROF_CORRUPT_FREQ_ZERO:
		h.clock_hz = 0;
		break;
	case DEVPROF_CORRUPT_FREQ_ABSURD:
		h.clock_hz = 1000000000000000ull; /* 1 PHz */
		break;
	case DEVPROF_CORRUPT_KIND:
		memcpy(&r, p + r0, sizeof(r));
		r.kind = 9;
		memcpy(p + r0, &r, sizeof(r));
		return;
	case DEVPROF_CORRUPT_DROPPED:
		s.dropped_count = 3; /* AIC 0 holds fewer records than its capacity */
		memcpy(p + s0, &s, sizeof(s));
		return;
	}
	memcpy(p, &h, sizeof(h));
}

int devprof_gen(const char *scenario, enum devprof_corrupt corrupt, uint8_t **out, size_t *len,
		struct devprof_err *err)
{
	const struct scenario *sc = NULL;
	uint8_t *buf = NULL;
	size_t n = 0, i;
	int rc;

	for (i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		if (strcmp(scenarios[i].name, scenario) == 0)
			sc = &scenarios[i];
	if (!sc)
		return devprof_errf(err, DEVPROF_E_USAGE,
				    "unknown scenario '%s' (basic, overflow, nometa, multi)",
				    scenario);
	for (i = 0; i < sc->invocations; i++) {
		rc = gen_invocation(sc, (uint32_t)i, &buf, &n, err);
		if (rc) {
			free(buf);
			return rc;
		}
	}
	corrupt_buf(buf, &n, corrupt);
	*out = buf;
	*len = n;
	return 0;
}
