// SPDX-License-Identifier: MIT
/*
 * Capacity planner (FR-05): the busiest AIC core and the busiest AIV core decide their
 * type's capacity separately, since cube and vector cores run very different task counts
 * in one MegaKernel schedule and one shared capacity would waste the larger type's slots.
 */
#include "devprof/devprof.h"

int devprof_plan(const uint32_t *aic_tasks, uint32_t naic, const uint32_t *aiv_tasks, uint32_t naiv,
		 uint32_t records_per_task, struct devprof_plan *p, struct devprof_err *err)
{
	uint32_t i;

	memset(p, 0, sizeof(*p));
	if (!naic && !naiv)
		return devprof_errf(err, DEVPROF_E_PLAN, "the schedule has no core");
	if (naic > CT_DEVPROF_MAX_CORES || naiv > CT_DEVPROF_MAX_CORES)
		return devprof_errf(err, DEVPROF_E_PLAN,
				    "%u AIC / %u AIV cores; at most %u of each type", naic, naiv,
				    CT_DEVPROF_MAX_CORES);
	if (!records_per_task || records_per_task > 64)
		return devprof_errf(err, DEVPROF_E_PLAN,
				    "records per task must be 1..64 (WaitDependency, Compute and "
				    "TriggerEvent make 3), not %u",
				    records_per_task);
	p->aic_cores = naic;
	p->aiv_cores = naiv;
	for (i = 0; i < naic; i++)
		if (aic_tasks[i] > p->aic_max_tasks)
			p->aic_max_tasks = aic_tasks[i];
	for (i = 0; i < naiv; i++)
		if (aiv_tasks[i] > p->aiv_max_tasks)
			p->aiv_max_tasks = aiv_tasks[i];
	p->aic_capacity = ct_devprof_capacity(p->aic_max_tasks, records_per_task);
	p->aiv_capacity = ct_devprof_capacity(p->aiv_max_tasks, records_per_task);
	for (i = 0; i < naic; i++) {
		uint64_t need = (uint64_t)aic_tasks[i] * records_per_task;

		if (need > p->aic_capacity)
			p->aic_expected_drops += need - p->aic_capacity;
	}
	for (i = 0; i < naiv; i++) {
		uint64_t need = (uint64_t)aiv_tasks[i] * records_per_task;

		if (need > p->aiv_capacity)
			p->aiv_expected_drops += need - p->aiv_capacity;
	}
	p->bytes = ct_devprof_buffer_size(naic, naiv, p->aic_capacity, p->aiv_capacity, 0);
	return 0;
}
