// SPDX-License-Identifier: MIT
/*
 * Validation of device profile buffers. Every field the exporter later trusts is
 * checked here, each failure with its own DEVPROF_E_* class (FR-12): a buffer that
 * fails any check produces no trace at all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "devprof/devprof.h"

_Static_assert(sizeof(struct ct_devprof_header) == 64, "header layout (docs/devprof.md)");
_Static_assert(sizeof(struct ct_devprof_slot) == 16, "slot layout (docs/devprof.md)");
_Static_assert(sizeof(struct ct_devprof_record) == 40, "record layout (docs/devprof.md)");
_Static_assert(offsetof(struct ct_devprof_header, clock_hz) == 16, "header layout");
_Static_assert(offsetof(struct ct_devprof_header, total_size) == 40, "header layout");
_Static_assert(offsetof(struct ct_devprof_record, start_cycle) == 24, "record layout");

const char *devprof_kind_name(uint32_t kind)
{
	switch (kind) {
	case CT_DEVPROF_REC_WAIT:
		return "WaitDependency";
	case CT_DEVPROF_REC_COMPUTE:
		return "Compute";
	case CT_DEVPROF_REC_TRIGGER:
		return "TriggerEvent";
	}
	return NULL;
}

static uint32_t slot_type(const struct ct_devprof_header *h, uint32_t idx)
{
	return idx < h->aic_cores ? CT_DEVPROF_CORE_AIC : CT_DEVPROF_CORE_AIV;
}

static uint32_t slot_id(const struct ct_devprof_header *h, uint32_t idx)
{
	return idx < h->aic_cores ? idx : idx - h->aic_cores;
}

static uint64_t slot_off(const struct ct_devprof_header *h, uint32_t idx)
{
	return ct_devprof_slot_offset(h->aic_cores, h->aic_capacity, h->aiv_capacity,
				      slot_type(h, idx), slot_id(h, idx));
}

void devprof_slot_at(const struct devprof_inv *inv, uint32_t idx, struct ct_devprof_slot *s)
{
	memcpy(s, inv->base + slot_off(&inv->h, idx), sizeof(*s));
}

void devprof_record_at(const struct devprof_inv *inv, uint32_t idx, uint32_t i,
		       struct ct_devprof_record *r)
{
	memcpy(r,
	       inv->base + slot_off(&inv->h, idx) + sizeof(struct ct_devprof_slot) +
		   (uint64_t)i * sizeof(*r),
	       sizeof(*r));
}

static int check_names(const cJSON *v, const char *key, const char *what, struct devprof_err *err)
{
	const cJSON *e;

	if (!v)
		return 0;
	if (!cJSON_IsObject(v) && !cJSON_IsArray(v))
		return devprof_errf(
		    err, DEVPROF_E_META,
		    "%s: \"%s\" must be an object {\"ID\": \"name\"} or an array of "
		    "names",
		    what, key);
	cJSON_ArrayForEach(e, v)
	{
		if (cJSON_IsObject(v)) {
			char *endp;
			unsigned long long id = strtoull(e->string, &endp, 10);

			if (!e->string[0] || *endp || id > UINT32_MAX || e->string[0] == '-' ||
			    e->string[0] == '+' || e->string[0] == ' ')
				return devprof_errf(err, DEVPROF_E_META,
						    "%s: \"%s\" key \"%.64s\" is not a decimal ID",
						    what, key, e->string);
		}
		if (!cJSON_IsString(e) && !cJSON_IsNull(e))
			return devprof_errf(err, DEVPROF_E_META,
					    "%s: \"%s\" entries must be strings", what, key);
		if (cJSON_IsString(e) && strlen(e->valuestring) > 256)
			return devprof_errf(err, DEVPROF_E_META,
					    "%s: a \"%s\" entry is longer than 256 bytes", what,
					    key);
	}
	return 0;
}

int devprof_meta_check(const cJSON *meta, const char *what, struct devprof_err *err)
{
	const cJSON *k;
	int rc;

	if (!cJSON_IsObject(meta))
		return devprof_errf(err, DEVPROF_E_META, "%s: metadata must be a JSON object",
				    what);
	k = cJSON_GetObjectItemCaseSensitive(meta, "kernel");
	if (k && (!cJSON_IsString(k) || strlen(k->valuestring) > 256))
		return devprof_errf(err, DEVPROF_E_META,
				    "%s: \"kernel\" must be a string of at most 256 bytes", what);
	rc = check_names(cJSON_GetObjectItemCaseSensitive(meta, "stage_names"), "stage_names", what,
			 err);
	if (rc)
		return rc;
	return check_names(cJSON_GetObjectItemCaseSensitive(meta, "owner_labels"), "owner_labels",
			   what, err);
}

static const char *core_type_name(uint32_t t)
{
	return t == CT_DEVPROF_CORE_AIC ? "AIC" : "AIV";
}

static int check_header(const struct ct_devprof_header *h, size_t k, size_t off,
			struct devprof_err *err)
{
	uint64_t need;

	if (h->version != CT_DEVPROF_VERSION)
		return devprof_errf(
		    err, DEVPROF_E_VERSION,
		    "invocation %zu (offset %zu): format version %u is not supported "
		    "(this decoder reads version %u)",
		    k, off, h->version, CT_DEVPROF_VERSION);
	if (h->header_size != sizeof(struct ct_devprof_header) ||
	    h->slot_size != sizeof(struct ct_devprof_slot) ||
	    h->record_size != sizeof(struct ct_devprof_record))
		return devprof_errf(
		    err, DEVPROF_E_LAYOUT,
		    "invocation %zu (offset %zu): header/slot/record sizes %u/%u/%u, "
		    "version 1 has 64/16/40",
		    k, off, h->header_size, h->slot_size, h->record_size);
	if (h->clock_hz == 0)
		return devprof_errf(err, DEVPROF_E_FREQ,
				    "invocation %zu (offset %zu): clock frequency is 0 Hz; cycles "
				    "cannot be converted to time",
				    k, off);
	if (h->clock_hz < CT_DEVPROF_MIN_HZ || h->clock_hz > CT_DEVPROF_MAX_HZ)
		return devprof_errf(
		    err, DEVPROF_E_FREQ,
		    "invocation %zu (offset %zu): clock frequency %llu Hz is outside "
		    "the plausible range %llu..%llu Hz",
		    k, off, (unsigned long long)h->clock_hz, (unsigned long long)CT_DEVPROF_MIN_HZ,
		    (unsigned long long)CT_DEVPROF_MAX_HZ);
	if (h->aic_cores + (uint64_t)h->aiv_cores == 0 || h->aic_cores > CT_DEVPROF_MAX_CORES ||
	    h->aiv_cores > CT_DEVPROF_MAX_CORES)
		return devprof_errf(err, DEVPROF_E_LAYOUT,
				    "invocation %zu (offset %zu): %u AIC + %u AIV cores; each type "
				    "has at most %u and there is at least one core",
				    k, off, h->aic_cores, h->aiv_cores, CT_DEVPROF_MAX_CORES);
	if (h->aic_capacity % CT_DEVPROF_ALIGN_RECS || h->aiv_capacity % CT_DEVPROF_ALIGN_RECS ||
	    h->aic_capacity > CT_DEVPROF_MAX_RECS || h->aiv_capacity > CT_DEVPROF_MAX_RECS)
		return devprof_errf(
		    err, DEVPROF_E_LAYOUT,
		    "invocation %zu (offset %zu): capacities AIC %u / AIV %u records; "
		    "each must be a multiple of %u and at most %u",
		    k, off, h->aic_capacity, h->aiv_capacity, CT_DEVPROF_ALIGN_RECS,
		    CT_DEVPROF_MAX_RECS);
	if (h->meta_size > CT_DEVPROF_MAX_META || h->reserved ||
	    (h->flags & ~CT_DEVPROF_F_GLOBAL_CLOCK))
		return devprof_errf(err, DEVPROF_E_LAYOUT,
				    "invocation %zu (offset %zu): metadata size %u (max %u), flags "
				    "0x%x or reserved field 0x%x invalid",
				    k, off, h->meta_size, CT_DEVPROF_MAX_META, h->flags,
				    h->reserved);
	need = ct_devprof_buffer_size(h->aic_cores, h->aiv_cores, h->aic_capacity, h->aiv_capacity,
				      h->meta_size);
	if (h->total_size != need)
		return devprof_errf(err, DEVPROF_E_LAYOUT,
				    "invocation %zu (offset %zu): total_size is %llu bytes but its "
				    "layout takes %llu",
				    k, off, (unsigned long long)h->total_size,
				    (unsigned long long)need);
	return 0;
}

static int check_slots(struct devprof_inv *inv, size_t k, struct devprof_err *err)
{
	const struct ct_devprof_header *h = &inv->h;
	uint32_t n = h->aic_cores + h->aiv_cores, idx, i;

	inv->min_cycle = UINT64_MAX;
	inv->max_cycle = 0;
	for (idx = 0; idx < n; idx++) {
		struct ct_devprof_slot s;
		uint32_t type = slot_type(h, idx), id = slot_id(h, idx);
		uint32_t cap = type == CT_DEVPROF_CORE_AIC ? h->aic_capacity : h->aiv_capacity;

		devprof_slot_at(inv, idx, &s);
		if (s.core_type != type || s.core_id != id || s.reserved0 || s.reserved1)
			return devprof_errf(
			    err, DEVPROF_E_SLOT,
			    "invocation %zu: slot %u should be %s %u but holds core "
			    "type %u id %u",
			    k, idx, core_type_name(type), id, s.core_type, s.core_id);
		if (s.record_count > cap)
			return devprof_errf(
			    err, DEVPROF_E_OVER_CAPACITY,
			    "invocation %zu, %s %u: record count %u exceeds the slot "
			    "capacity %u",
			    k, core_type_name(type), id, s.record_count, cap);
		/* The recorder drops only once the slot is full (FR-06). */
		if (s.dropped_count && s.record_count < cap)
			return devprof_errf(
			    err, DEVPROF_E_DROPS,
			    "invocation %zu, %s %u: dropped count %u but the slot holds only "
			    "%u of its %u records; a recorder drops only when its slot is "
			    "full, so the slot is corrupt",
			    k, core_type_name(type), id, s.dropped_count, s.record_count, cap);
		for (i = 0; i < s.record_count; i++) {
			struct ct_devprof_record r;

			devprof_record_at(inv, idx, i, &r);
			if (!devprof_kind_name(r.kind))
				return devprof_errf(
				    err, DEVPROF_E_KIND,
				    "invocation %zu, %s %u, record %u: unknown record "
				    "kind %u (1 WaitDependency, 2 Compute, 3 "
				    "TriggerEvent)",
				    k, core_type_name(type), id, i, r.kind);
			if (r.reserved0 || r.reserved1)
				return devprof_errf(err, DEVPROF_E_KIND,
						    "invocation %zu, %s %u, record %u: reserved "
						    "fields are not zero",
						    k, core_type_name(type), id, i);
			if (r.end_cycle < r.start_cycle)
				return devprof_errf(
				    err, DEVPROF_E_END_BEFORE_START,
				    "invocation %zu, %s %u, record %u (task %u): end "
				    "cycle %llu is before start cycle %llu",
				    k, core_type_name(type), id, i, r.task_id,
				    (unsigned long long)r.end_cycle,
				    (unsigned long long)r.start_cycle);
			if (r.start_cycle < inv->min_cycle)
				inv->min_cycle = r.start_cycle;
			if (r.end_cycle > inv->max_cycle)
				inv->max_cycle = r.end_cycle;
		}
		inv->records += s.record_count;
		inv->dropped += s.dropped_count;
	}
	return 0;
}

static int check_meta(struct devprof_inv *inv, size_t k, struct devprof_err *err)
{
	char what[64];
	cJSON *j;
	int rc;

	if (!inv->h.meta_size)
		return 0;
	inv->meta =
	    (const char *)inv->base + inv->h.total_size - ct_devprof_meta_padded(inv->h.meta_size);
	snprintf(what, sizeof(what), "invocation %zu metadata", k);
	j = devprof_parse_json((const uint8_t *)inv->meta, inv->h.meta_size, DEVPROF_E_META, what,
			       err);
	if (!j)
		return DEVPROF_E_META;
	rc = devprof_meta_check(j, what, err);
	cJSON_Delete(j);
	return rc;
}

int devprof_parse(const void *buf, size_t len, struct devprof_file *f, struct devprof_err *err)
{
	const uint8_t *p = buf;
	size_t off = 0, cap = 0;
	uint64_t records = 0, dropped = 0;
	int rc;

	memset(f, 0, sizeof(*f));
	if (!len)
		return devprof_errf(err, DEVPROF_E_TRUNCATED, "the buffer file is empty");
	while (off < len) {
		struct devprof_inv inv;
		uint32_t magic = 0;
		size_t k = f->n;

		memset(&inv, 0, sizeof(inv));
		memcpy(&magic, p + off, len - off < 4 ? len - off : 4);
		if (len - off >= 4 && magic != CT_DEVPROF_MAGIC) {
			rc = devprof_errf(err, DEVPROF_E_MAGIC,
					  "invocation %zu (offset %zu): magic 0x%08x is not 0x%08x "
					  "(\"CTDP\")%s",
					  k, off, magic, CT_DEVPROF_MAGIC,
					  __builtin_bswap32(magic) == CT_DEVPROF_MAGIC
					      ? "; the buffer is byte-swapped"
					      : "; not a devprof buffer");
			goto fail;
		}
		if (len - off < sizeof(inv.h)) {
			rc = devprof_errf(
			    err, DEVPROF_E_TRUNCATED,
			    "invocation %zu (offset %zu): truncated header, %zu of %zu "
			    "bytes",
			    k, off, len - off, sizeof(inv.h));
			goto fail;
		}
		memcpy(&inv.h, p + off, sizeof(inv.h));
		rc = check_header(&inv.h, k, off, err);
		if (rc)
			goto fail;
		if (inv.h.total_size > len - off) {
			rc =
			    devprof_errf(err, DEVPROF_E_TRUNCATED,
					 "invocation %zu (offset %zu): truncated, needs %llu bytes "
					 "but the file has %zu left",
					 k, off, (unsigned long long)inv.h.total_size, len - off);
			goto fail;
		}
		if (k && inv.h.clock_hz != f->inv[0].h.clock_hz) {
			rc = devprof_errf(
			    err, DEVPROF_E_FREQ,
			    "invocation %zu: clock %llu Hz differs from invocation 0's "
			    "%llu Hz; one file holds one device clock",
			    k, (unsigned long long)inv.h.clock_hz,
			    (unsigned long long)f->inv[0].h.clock_hz);
			goto fail;
		}
		if (k >= DEVPROF_MAX_INVOCATIONS) {
			rc = devprof_errf(err, DEVPROF_E_LAYOUT,
					  "more than %d invocations in one file",
					  DEVPROF_MAX_INVOCATIONS);
			goto fail;
		}
		inv.base = p + off;
		inv.offset = off;
		rc = check_slots(&inv, k, err);
		if (!rc)
			rc = check_meta(&inv, k, err);
		if (rc)
			goto fail;
		if (f->n == cap) {
			size_t ncap = cap ? cap * 2 : 4;
			struct devprof_inv *ni = realloc(f->inv, ncap * sizeof(*ni));

			if (!ni) {
				rc = devprof_errf(err, DEVPROF_E_NOMEM, "out of memory");
				goto fail;
			}
			f->inv = ni;
			cap = ncap;
		}
		f->inv[f->n++] = inv;
		records += inv.records;
		dropped += inv.dropped;
		off += (size_t)inv.h.total_size;
	}
	if (!records) {
		rc = devprof_errf(
		    err, DEVPROF_E_EMPTY,
		    "%zu invocation(s) hold no record (%llu dropped): sampling was off "
		    "or the kernel ran no task; refusing to write an empty trace",
		    f->n, (unsigned long long)dropped);
		goto fail;
	}
	return 0;
fail:
	devprof_file_free(f);
	return rc;
}

void devprof_file_free(struct devprof_file *f)
{
	free(f->inv);
	f->inv = NULL;
	f->n = 0;
}
