// SPDX-License-Identifier: MIT
/*
 * A MegaKernel that runs on the host, for the tests of the Python API (commtrace.devprof,
 * tests/workloads/devprof_api.py): the real recorder of commtrace/devprof.h over a static
 * schedule, its runtime config handed over as a kernel launch hands it. Core i of a type
 * runs tasks[i] tasks, each one WaitDependency, Compute and TriggerEvent record; task ids
 * run over all cores, AIC first; a task's stage is its id modulo stages, its owner its id
 * modulo owners, its index in the stage its id divided by stages.
 *
 * mkh_run returns the records it wrote plus those it dropped: 0 when the config does not
 * sample, since the recorder then touches nothing.
 */
#include <stdint.h>
#include "commtrace/devprof.h"

static uint64_t run_core(const struct ct_devprof_runtime_config *cfg, uint32_t type, uint32_t id,
			 uint32_t ntasks, uint32_t *task, uint32_t stages, uint32_t owners)
{
	struct ct_devprof_recorder r;
	uint32_t k, owner;

	ct_devprof_recorder_init(&r, cfg, type, id);
	ct_devprof_recorder_reset(&r, type, id);
	for (k = 0; k < ntasks; k++, (*task)++) {
		uint32_t stage = *task % stages, index = *task / stages;
		uint64_t t = ct_devprof_start(&r);

		owner = *task % owners;
		ct_devprof_record(&r, CT_DEVPROF_REC_WAIT, stage, *task, index, &owner, t);
		t = ct_devprof_start(&r);
		ct_devprof_record(&r, CT_DEVPROF_REC_COMPUTE, stage, *task, index, &owner, t);
		t = ct_devprof_start(&r);
		ct_devprof_record(&r, CT_DEVPROF_REC_TRIGGER, stage, *task, index, &owner, t);
	}
	return (uint64_t)r.n + r.dropped;
}

int64_t mkh_run(const struct ct_devprof_runtime_config *cfg, uint32_t naic, const uint32_t *aic,
		uint32_t naiv, const uint32_t *aiv, uint32_t stages, uint32_t owners)
{
	uint64_t n = 0;
	uint32_t i, task = 0;

	if (!stages || !owners)
		return -1;
	for (i = 0; i < naic; i++)
		n += run_core(cfg, CT_DEVPROF_CORE_AIC, i, aic[i], &task, stages, owners);
	for (i = 0; i < naiv; i++)
		n += run_core(cfg, CT_DEVPROF_CORE_AIV, i, aiv[i], &task, stages, owners);
	return (int64_t)n;
}
