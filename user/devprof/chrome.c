// SPDX-License-Identifier: MIT
/*
 * Device profile buffer → Chrome Trace events (FR-08…FR-11). One process per invocation,
 * one thread (track) per core, one X event per record. Display names come from the
 * kernel's metadata with generic fallbacks; raw IDs and cycles always stay in args.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "devprof/devprof.h"

/* IDs that fell back to a generic name, listed up to DEVPROF_DIAG_LIST. */
struct idset {
	uint32_t ids[DEVPROF_DIAG_LIST];
	uint32_t n;
	int truncated;
	uint64_t records;
};

static void idset_add(struct idset *s, uint32_t id)
{
	uint32_t i;

	s->records++;
	for (i = 0; i < s->n; i++)
		if (s->ids[i] == id)
			return;
	if (s->n < DEVPROF_DIAG_LIST)
		s->ids[s->n++] = id;
	else
		s->truncated = 1;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static cJSON *idset_json(struct idset *s)
{
	cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "ids");
	uint32_t i;

	qsort(s->ids, s->n, sizeof(s->ids[0]), cmp_u32);
	for (i = 0; i < s->n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(s->ids[i]));
	cJSON_AddBoolToObject(o, "ids_truncated", s->truncated);
	cJSON_AddNumberToObject(o, "records", (double)s->records);
	return o;
}

static const char *lookup(const cJSON *tab, uint32_t id)
{
	const cJSON *e;
	char key[16];

	if (!tab)
		return NULL;
	if (cJSON_IsArray(tab)) {
		e = id < (uint32_t)cJSON_GetArraySize(tab) ? cJSON_GetArrayItem(tab, (int)id)
							   : NULL;
	} else {
		snprintf(key, sizeof(key), "%u", id);
		e = cJSON_GetObjectItemCaseSensitive(tab, key);
	}
	return cJSON_IsString(e) && e->valuestring[0] ? e->valuestring : NULL;
}

/* Cycles are 64-bit; a double would round them above 2^53, so they go out as raw text. */
static void add_u64(cJSON *o, const char *key, uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	cJSON_AddItemToObject(o, key, cJSON_CreateRaw(buf));
}

/* Rounded to the nanosecond, the finest unit Perfetto keeps, so output is stable text. */
static double cycles_to_us(uint64_t delta, uint64_t hz)
{
	double us = (double)(delta / hz) * 1e6 + (double)(delta % hz) * 1e6 / (double)hz;

	return round(us * 1000.0) / 1000.0;
}

void devprof_export_opts_init(struct devprof_export_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->pid_base = 1;
}

static cJSON *meta_event(const char *name, int pid, long long tid, const char *key,
			 const char *sval, double nval)
{
	cJSON *e = cJSON_CreateObject(), *args;

	cJSON_AddStringToObject(e, "name", name);
	cJSON_AddStringToObject(e, "ph", "M");
	cJSON_AddNumberToObject(e, "pid", pid);
	if (tid >= 0)
		cJSON_AddNumberToObject(e, "tid", (double)tid);
	args = cJSON_AddObjectToObject(e, "args");
	if (sval)
		cJSON_AddStringToObject(args, key, sval);
	else
		cJSON_AddNumberToObject(args, key, nval);
	return e;
}

struct export_ctx {
	const struct devprof_export_opts *o;
	uint64_t base_cycle;
	double base_us;
	cJSON *events; /* staged, moved to the caller's array only on success */
};

static int to_us(const struct export_ctx *c, const struct devprof_inv *inv, uint64_t cycle,
		 double *us, struct devprof_err *err)
{
	uint64_t hz = inv->h.clock_hz;

	if (cycle >= c->base_cycle) {
		*us = c->base_us + cycles_to_us(cycle - c->base_cycle, hz);
	} else {
		*us = c->base_us - cycles_to_us(c->base_cycle - cycle, hz);
	}
	if (*us < 0)
		return devprof_errf(
		    err, DEVPROF_E_USAGE,
		    "cycle %llu maps before time 0 with the given sync point (cycle "
		    "%llu at %.3f us)",
		    (unsigned long long)cycle, (unsigned long long)c->base_cycle, c->base_us);
	return 0;
}

static void label(char *buf, size_t n, enum devprof_display d, uint32_t kind, const char *stage,
		  const char *owner, uint32_t idx)
{
	const char *pre = kind == CT_DEVPROF_REC_WAIT	   ? "Wait "
			  : kind == CT_DEVPROF_REC_TRIGGER ? "Trigger "
							   : "";

	if (d == DEVPROF_DISPLAY_FULL)
		snprintf(buf, n, "%s%s/%s[%u]", pre, owner, stage, idx);
	else
		snprintf(buf, n, "%s%s", pre, stage);
}

static int export_inv(struct export_ctx *c, const struct devprof_inv *inv, size_t k,
		      cJSON *inv_desc, struct devprof_err *err)
{
	const struct devprof_export_opts *o = c->o;
	const struct ct_devprof_header *h = &inv->h;
	const cJSON *meta = o->meta, *stages, *owners, *kj;
	cJSON *embedded = NULL, *cores, *fb;
	struct idset stage_fb = {0}, owner_fb = {0};
	const char *meta_src = o->meta ? "file" : "absent";
	const char *kernel = NULL;
	uint32_t nslots = h->aic_cores + h->aiv_cores, idx, i;
	int pid = o->pid_base + (int)k, rc = 0;
	char pname[384], buf[640];
	double start_us, end_us;

	if (!meta && inv->meta) {
		/* Validated by devprof_parse(). */
		embedded = cJSON_ParseWithLength(inv->meta, inv->h.meta_size);
		meta = embedded;
		meta_src = "embedded";
	}
	stages = meta ? cJSON_GetObjectItemCaseSensitive(meta, "stage_names") : NULL;
	owners = meta ? cJSON_GetObjectItemCaseSensitive(meta, "owner_labels") : NULL;
	kj = meta ? cJSON_GetObjectItemCaseSensitive(meta, "kernel") : NULL;
	if (cJSON_IsString(kj) && kj->valuestring[0])
		kernel = kj->valuestring;

	if (pid >= DEVPROF_TID_BASE && pid < DEVPROF_TID_BASE + 2 * CT_DEVPROF_MAX_CORES) {
		rc = devprof_errf(err, DEVPROF_E_USAGE,
				  "pid %d would equal a core track's tid (0x%x + slot); choose "
				  "another pid base",
				  pid, DEVPROF_TID_BASE);
		goto out;
	}
	rc = to_us(c, inv, inv->min_cycle, &start_us, err);
	if (!rc)
		rc = to_us(c, inv, inv->max_cycle, &end_us, err);
	if (rc)
		goto out;

	snprintf(pname, sizeof(pname), "%s #%zu (step %u, call %u)", kernel ? kernel : "MegaKernel",
		 k, h->step, h->invocation_seq);
	cJSON_AddItemToArray(c->events, meta_event("process_name", pid, -1, "name", pname, 0));
	cJSON_AddItemToArray(c->events,
			     meta_event("process_sort_index", pid, -1, "sort_index", NULL, pid));

	cJSON_AddNumberToObject(inv_desc, "index", (double)k);
	cJSON_AddNumberToObject(inv_desc, "pid", pid);
	cJSON_AddStringToObject(inv_desc, "process", pname);
	if (kernel)
		cJSON_AddStringToObject(inv_desc, "kernel", kernel);
	else
		cJSON_AddNullToObject(inv_desc, "kernel");
	cJSON_AddNumberToObject(inv_desc, "invocation_seq", h->invocation_seq);
	cJSON_AddNumberToObject(inv_desc, "step", h->step);
	add_u64(inv_desc, "clock_hz", h->clock_hz);
	cJSON_AddBoolToObject(inv_desc, "global_clock", h->flags & CT_DEVPROF_F_GLOBAL_CLOCK);
	cJSON_AddNumberToObject(inv_desc, "start_us", start_us);
	cJSON_AddNumberToObject(inv_desc, "end_us", end_us);
	add_u64(inv_desc, "start_cycle", inv->min_cycle);
	add_u64(inv_desc, "end_cycle", inv->max_cycle);
	cJSON_AddNumberToObject(inv_desc, "records", (double)inv->records);
	cJSON_AddNumberToObject(inv_desc, "dropped", (double)inv->dropped);
	cores = cJSON_AddArrayToObject(inv_desc, "cores");

	for (idx = 0; idx < nslots; idx++) {
		struct ct_devprof_slot s;
		const char *tn = idx < h->aic_cores ? "AIC" : "AIV";
		uint32_t cap = idx < h->aic_cores ? h->aic_capacity : h->aiv_capacity;
		long long tid = DEVPROF_TID_BASE + idx;
		char core[32];
		double last_us = start_us;
		cJSON *cd;

		devprof_slot_at(inv, idx, &s);
		snprintf(core, sizeof(core), "%s %u", tn, s.core_id);
		cJSON_AddItemToArray(c->events,
				     meta_event("thread_name", pid, tid, "name", core, 0));
		cJSON_AddItemToArray(
		    c->events, meta_event("thread_sort_index", pid, tid, "sort_index", NULL, idx));
		cd = cJSON_CreateObject();
		cJSON_AddStringToObject(cd, "name", core);
		cJSON_AddNumberToObject(cd, "tid", (double)tid);
		cJSON_AddStringToObject(cd, "type", tn);
		cJSON_AddNumberToObject(cd, "id", s.core_id);
		cJSON_AddNumberToObject(cd, "slot", idx);
		cJSON_AddNumberToObject(cd, "capacity", cap);
		cJSON_AddNumberToObject(cd, "records", s.record_count);
		cJSON_AddNumberToObject(cd, "dropped", s.dropped_count);
		cJSON_AddItemToArray(cores, cd);

		for (i = 0; i < s.record_count; i++) {
			struct ct_devprof_record r;
			const char *stage, *owner;
			char sbuf[32], obuf[32];
			double ts, dur;
			cJSON *e, *a;

			devprof_record_at(inv, idx, i, &r);
			stage = lookup(stages, r.desc_id);
			if (!stage) {
				snprintf(sbuf, sizeof(sbuf), "stage_%u", r.desc_id);
				stage = sbuf;
				idset_add(&stage_fb, r.desc_id);
			}
			owner = lookup(owners, r.owner_id);
			if (!owner) {
				snprintf(obuf, sizeof(obuf), "owner_%u", r.owner_id);
				owner = obuf;
				idset_add(&owner_fb, r.owner_id);
			}
			rc = to_us(c, inv, r.start_cycle, &ts, err);
			if (rc)
				goto out;
			dur = cycles_to_us(r.end_cycle - r.start_cycle, h->clock_hz);
			if (ts + dur > last_us)
				last_us = ts + dur;
			label(buf, sizeof(buf), o->display, r.kind, stage, owner,
			      r.stage_task_index);
			e = cJSON_CreateObject();
			cJSON_AddStringToObject(e, "name", buf);
			cJSON_AddStringToObject(e, "cat", devprof_kind_name(r.kind));
			cJSON_AddStringToObject(e, "ph", "X");
			cJSON_AddNumberToObject(e, "ts", ts);
			cJSON_AddNumberToObject(e, "dur", dur);
			cJSON_AddNumberToObject(e, "pid", pid);
			cJSON_AddNumberToObject(e, "tid", (double)tid);
			a = cJSON_AddObjectToObject(e, "args");
			cJSON_AddStringToObject(a, "kind", devprof_kind_name(r.kind));
			cJSON_AddStringToObject(a, "core", core);
			cJSON_AddNumberToObject(a, "invocation", (double)k);
			cJSON_AddNumberToObject(a, "task_id", r.task_id);
			cJSON_AddNumberToObject(a, "desc_id", r.desc_id);
			cJSON_AddNumberToObject(a, "owner_id", r.owner_id);
			cJSON_AddNumberToObject(a, "stage_task_index", r.stage_task_index);
			cJSON_AddStringToObject(a, "stage", stage);
			cJSON_AddStringToObject(a, "owner", owner);
			add_u64(a, "start_cycle", r.start_cycle);
			add_u64(a, "end_cycle", r.end_cycle);
			cJSON_AddItemToArray(c->events, e);
		}
		if (s.dropped_count) {
			cJSON *e = cJSON_CreateObject(), *a;

			snprintf(buf, sizeof(buf), "dropped %u records", s.dropped_count);
			cJSON_AddStringToObject(e, "name", buf);
			cJSON_AddStringToObject(e, "cat", "devprof.dropped");
			cJSON_AddStringToObject(e, "ph", "i");
			cJSON_AddStringToObject(e, "s", "t");
			cJSON_AddNumberToObject(e, "ts", last_us);
			cJSON_AddNumberToObject(e, "pid", pid);
			cJSON_AddNumberToObject(e, "tid", (double)tid);
			a = cJSON_AddObjectToObject(e, "args");
			cJSON_AddStringToObject(a, "core", core);
			cJSON_AddNumberToObject(a, "dropped_count", s.dropped_count);
			cJSON_AddNumberToObject(a, "capacity", cap);
			cJSON_AddItemToArray(c->events, e);
		}
	}
	fb = cJSON_AddObjectToObject(inv_desc, "name_fallbacks");
	cJSON_AddStringToObject(fb, "metadata", meta_src);
	if (o->meta && o->meta_source)
		cJSON_AddStringToObject(fb, "metadata_source", o->meta_source);
	cJSON_AddItemToObject(fb, "stage_desc_ids", idset_json(&stage_fb));
	cJSON_AddItemToObject(fb, "owner_ids", idset_json(&owner_fb));
	cJSON_AddBoolToObject(fb, "kernel_name", kernel == NULL);
out:
	cJSON_Delete(embedded);
	return rc;
}

/* Moves every item; detaching the head is O(1) where an index walk would be O(n). */
static void move_items(cJSON *dst, cJSON *src)
{
	cJSON *e;

	while ((e = src->child)) {
		cJSON_DetachItemViaPointer(src, e);
		cJSON_AddItemToArray(dst, e);
	}
}

static cJSON *dp_section(cJSON *metadata, enum devprof_display d)
{
	cJSON *s = cJSON_GetObjectItemCaseSensitive(metadata, "commtrace_devprof");

	if (cJSON_IsObject(s))
		return s;
	cJSON_DeleteItemFromObjectCaseSensitive(metadata, "commtrace_devprof");
	s = cJSON_AddObjectToObject(metadata, "commtrace_devprof");
	cJSON_AddNumberToObject(s, "schema_version", 1);
	cJSON_AddStringToObject(s, "display", d == DEVPROF_DISPLAY_FULL ? "full" : "stage");
	cJSON_AddArrayToObject(s, "invocations");
	return s;
}

int devprof_append_chrome(cJSON *trace_events, cJSON *metadata, const void *buf, size_t len,
			  const struct devprof_export_opts *opts, struct devprof_err *err)
{
	struct devprof_export_opts defaults;
	struct devprof_file f;
	struct export_ctx c;
	cJSON *invs;
	size_t k;
	int rc;

	if (!opts) {
		devprof_export_opts_init(&defaults);
		opts = &defaults;
	}
	if (!cJSON_IsArray(trace_events) || (metadata && !cJSON_IsObject(metadata)))
		return devprof_errf(err, DEVPROF_E_USAGE,
				    "trace_events must be a JSON array and metadata an object");
	if (opts->meta) {
		rc = devprof_meta_check(opts->meta,
					opts->meta_source ? opts->meta_source : "metadata", err);
		if (rc)
			return rc;
	}
	rc = devprof_parse(buf, len, &f, err);
	if (rc)
		return rc;
	memset(&c, 0, sizeof(c));
	c.o = opts;
	if (opts->have_sync) {
		c.base_cycle = opts->sync_cycle;
		c.base_us = opts->sync_us;
	} else {
		c.base_cycle = UINT64_MAX;
		for (k = 0; k < f.n; k++)
			if (f.inv[k].records && f.inv[k].min_cycle < c.base_cycle)
				c.base_cycle = f.inv[k].min_cycle;
		c.base_us = opts->ts_base_us;
	}
	c.events = cJSON_CreateArray();
	invs = cJSON_CreateArray();
	for (k = 0; k < f.n; k++) {
		cJSON *d = cJSON_CreateObject();
		struct devprof_inv *inv = &f.inv[k];

		/* An invocation without records still gets its tracks, starting at the base. */
		if (!inv->records)
			inv->min_cycle = inv->max_cycle = c.base_cycle;
		cJSON_AddItemToArray(invs, d);
		rc = export_inv(&c, inv, k, d, err);
		if (rc)
			goto out;
	}
	move_items(trace_events, c.events);
	if (metadata) {
		cJSON *s = dp_section(metadata, opts->display), *dst;

		dst = cJSON_GetObjectItemCaseSensitive(s, "invocations");
		if (!cJSON_IsArray(dst)) {
			cJSON_DeleteItemFromObjectCaseSensitive(s, "invocations");
			dst = cJSON_AddArrayToObject(s, "invocations");
		}
		move_items(dst, invs);
	}
out:
	cJSON_Delete(c.events);
	cJSON_Delete(invs);
	devprof_file_free(&f);
	return rc;
}

cJSON *devprof_build_trace(const void *buf, size_t len, const struct devprof_export_opts *opts,
			   struct devprof_err *err)
{
	cJSON *doc = cJSON_CreateObject(), *ev, *md;

	cJSON_AddNumberToObject(doc, "schema_version", 1);
	ev = cJSON_AddArrayToObject(doc, "traceEvents");
	md = cJSON_AddObjectToObject(doc, "metadata");
	cJSON_AddNumberToObject(md, "schema_version", 1);
	cJSON_AddStringToObject(md, "producer", "commtrace devprof");
	if (devprof_append_chrome(ev, md, buf, len, opts, err)) {
		cJSON_Delete(doc);
		return NULL;
	}
	return doc;
}
