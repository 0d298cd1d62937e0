// SPDX-License-Identifier: MIT
/*
 * Offline fusion (FR-13, FR-14): each invocation of a standalone device trace is laid
 * onto one outer device kernel event of a PyTorch profiler trace, the one its
 * invocation_seq numbers (or, with align_in_order, the next one in order), and its cores
 * become new AIC/AIV tracks of that kernel's process. The device clock and the
 * profiler clock are never compared: an invocation's first record starts at its kernel's
 * ts, so only durations cross clocks. Anything approximate is written to
 * metadata.commtrace_devprof for machines to read.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "devprof/devprof.h"

struct dev_inv {
	int pid;
	double start_us, end_us;
	const char *kernel;
	const cJSON *desc;  /* metadata entry */
	const cJSON *cores; /* array of {name, tid, slot} */
	uint32_t ncores;
	uint32_t seq; /* invocation_seq: the kernel's call number in its session */
	int have_seq;
};

struct cand {
	const cJSON *ev;
	const char *name;
	double ts, dur;
	char key[96]; /* pid and tid as text: numbers and strings both occur */
	char pkey[64];
	size_t index;
	int nested;
};

struct fuse_ctx {
	struct dev_inv *inv;
	size_t ninv;
	struct cand *cands;
	size_t ncand;
	cJSON *oor; /* out-of-range entries */
	uint64_t oor_count;
};

/* Perfetto keeps nanoseconds; rounding there hides the float noise of re-basing. */
static double ns_round(double us)
{
	return round(us * 1000.0) / 1000.0;
}

static int num(const cJSON *o, const char *k, double *v)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);

	if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble))
		return -1;
	*v = j->valuedouble;
	return 0;
}

/* Integral and within int range: pids and slots are compared as ints. */
static int is_int(double v)
{
	return v >= -2147483647.0 && v <= 2147483647.0 && v == (double)(int)v;
}

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(j) ? j->valuestring : NULL;
}

static void id_text(const cJSON *j, char *buf, size_t n)
{
	if (cJSON_IsNumber(j))
		snprintf(buf, n, "n%.17g", j->valuedouble);
	else if (cJSON_IsString(j))
		snprintf(buf, n, "s%.60s", j->valuestring);
	else
		snprintf(buf, n, "-");
}

static int load_device(const cJSON *dev, struct fuse_ctx *c, const cJSON **events,
		       struct devprof_err *err)
{
	const cJSON *md, *dp, *invs, *e;
	double v;
	size_t k = 0;

	if (!cJSON_IsObject(dev) || num(dev, "schema_version", &v) || v != 1)
		return devprof_errf(err, DEVPROF_E_DEVJSON,
				    "device trace: not a devprof schema_version 1 document");
	*events = cJSON_GetObjectItemCaseSensitive(dev, "traceEvents");
	md = cJSON_GetObjectItemCaseSensitive(dev, "metadata");
	dp = cJSON_GetObjectItemCaseSensitive(md, "commtrace_devprof");
	invs = cJSON_GetObjectItemCaseSensitive(dp, "invocations");
	if (!cJSON_IsArray(*events) || !cJSON_IsArray(invs))
		return devprof_errf(err, DEVPROF_E_DEVJSON,
				    "device trace: traceEvents or metadata.commtrace_devprof."
				    "invocations is missing");
	c->ninv = (size_t)cJSON_GetArraySize(invs);
	if (!c->ninv || c->ninv > DEVPROF_MAX_INVOCATIONS)
		return devprof_errf(err, DEVPROF_E_DEVJSON,
				    "device trace: %zu invocations; need 1..%d", c->ninv,
				    DEVPROF_MAX_INVOCATIONS);
	c->inv = calloc(c->ninv, sizeof(*c->inv));
	if (!c->inv)
		return devprof_errf(err, DEVPROF_E_NOMEM, "out of memory");
	cJSON_ArrayForEach(e, invs)
	{
		struct dev_inv *d = &c->inv[k];
		const cJSON *core;
		double pid;

		if (num(e, "pid", &pid) || !is_int(pid) || num(e, "start_us", &d->start_us) ||
		    num(e, "end_us", &d->end_us) || d->end_us < d->start_us ||
		    !cJSON_IsArray(d->cores = cJSON_GetObjectItemCaseSensitive(e, "cores")))
			return devprof_errf(err, DEVPROF_E_DEVJSON,
					    "device trace: invocation %zu lacks a valid pid, "
					    "start_us/end_us or cores",
					    k);
		d->pid = (int)pid;
		if (cJSON_GetObjectItemCaseSensitive(e, "invocation_seq")) {
			double seq;

			if (num(e, "invocation_seq", &seq) || seq < 0 || seq > UINT32_MAX ||
			    seq != floor(seq))
				return devprof_errf(err, DEVPROF_E_DEVJSON,
						    "device trace: invocation %zu has an "
						    "invocation_seq that is not a 32-bit count",
						    k);
			d->seq = (uint32_t)seq;
			d->have_seq = 1;
		}
		d->kernel = str(e, "kernel");
		d->desc = e;
		d->ncores = (uint32_t)cJSON_GetArraySize(d->cores);
		if (d->ncores > 2 * CT_DEVPROF_MAX_CORES)
			return devprof_errf(err, DEVPROF_E_DEVJSON,
					    "device trace: invocation %zu has %u cores", k,
					    d->ncores);
		cJSON_ArrayForEach(core, d->cores)
		{
			double tid, slot;
			const char *name = str(core, "name");

			if (!name || strlen(name) > 64 || num(core, "tid", &tid) ||
			    num(core, "slot", &slot) || !is_int(slot) || slot < 0 ||
			    slot >= d->ncores || tid != DEVPROF_TID_BASE + slot)
				return devprof_errf(
				    err, DEVPROF_E_DEVJSON,
				    "device trace: invocation %zu has a core without "
				    "a valid name, tid or slot",
				    k);
		}
		for (size_t j = 0; j < k; j++)
			if (c->inv[j].pid == d->pid)
				return devprof_errf(
				    err, DEVPROF_E_DEVJSON,
				    "device trace: invocations %zu and %zu share pid "
				    "%d",
				    j, k, d->pid);
		k++;
	}
	return 0;
}

static int cmp_outer(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	int r = strcmp(x->key, y->key);

	if (r)
		return r;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	if (x->dur != y->dur)
		return x->dur > y->dur ? -1 : 1; /* the enclosing one first */
	return x->index < y->index ? -1 : x->index > y->index;
}

static int cmp_time(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

/*
 * Candidates: X events that are device kernels (host == 0) or not (host == 1), whose name
 * contains filter. Nested ones (inside another candidate on the same pid and tid) are
 * dropped, so a kernel that wraps sub-kernels aligns once. Returns the number dropped.
 */
static int collect(const cJSON *events, int host, const char *filter, struct fuse_ctx *c,
		   size_t *nested, size_t *device_kernels, struct devprof_err *err)
{
	const cJSON *e;
	size_t i = 0, n = 0, cap = 0, out = 0;
	double end = 0;
	char last[96] = "";

	*nested = 0;
	*device_kernels = 0;
	cJSON_ArrayForEach(e, events)
	{
		const char *ph, *cat, *name;
		struct cand cd;
		int is_kernel;

		if (!cJSON_IsObject(e))
			return devprof_errf(err, DEVPROF_E_TRACE,
					    "profiler trace: traceEvents[%zu] is not an object", i);
		ph = str(e, "ph");
		cat = str(e, "cat");
		name = str(e, "name");
		i++;
		if (!ph || strcmp(ph, "X"))
			continue;
		is_kernel = cat && strcasecmp(cat, "kernel") == 0;
		if (is_kernel)
			(*device_kernels)++;
		if (is_kernel == host || !name || (filter && !strstr(name, filter)))
			continue;
		memset(&cd, 0, sizeof(cd));
		if (num(e, "ts", &cd.ts) || num(e, "dur", &cd.dur) || cd.dur < 0)
			return devprof_errf(err, DEVPROF_E_TRACE,
					    "profiler trace: traceEvents[%zu] (\"%.80s\") has no "
					    "numeric ts or a missing/negative dur",
					    i - 1, name);
		cd.ev = e;
		cd.name = name;
		cd.index = i - 1;
		id_text(cJSON_GetObjectItemCaseSensitive(e, "pid"), cd.pkey, sizeof(cd.pkey));
		snprintf(cd.key, sizeof(cd.key), "%s|", cd.pkey);
		id_text(cJSON_GetObjectItemCaseSensitive(e, "tid"), cd.key + strlen(cd.key),
			sizeof(cd.key) - strlen(cd.key));
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct cand *p = realloc(c->cands, nc * sizeof(*p));

			if (!p)
				return devprof_errf(err, DEVPROF_E_NOMEM, "out of memory");
			c->cands = p;
			cap = nc;
		}
		c->cands[n++] = cd;
	}
	if (n)
		qsort(c->cands, n, sizeof(*c->cands), cmp_outer);
	for (i = 0; i < n; i++) {
		struct cand *cd = &c->cands[i];

		if (strcmp(cd->key, last)) {
			snprintf(last, sizeof(last), "%s", cd->key);
			end = -INFINITY;
		}
		if (cd->ts + cd->dur <= end) {
			(*nested)++;
			continue;
		}
		if (cd->ts + cd->dur > end)
			end = cd->ts + cd->dur;
		c->cands[out++] = *cd;
	}
	c->ncand = out;
	if (out)
		qsort(c->cands, out, sizeof(*c->cands), cmp_time);
	return 0;
}

/*
 * The matching event (index into c->cands) each invocation aligns to: skip +
 * invocation_seq, since the sequence counts the kernel's calls from its session start,
 * the launches a profiler recording from the start sees; with align_in_order, skip + k.
 */
static int assign(const struct fuse_ctx *c, const struct devprof_fuse_opts *o, int host,
		  const char *filter, size_t *ev, struct devprof_err *err)
{
	const char *what = host ? "host" : "device kernel";
	size_t k, j, past = 0, first = 0;

	if (o->align_in_order) {
		if (c->ncand < o->skip || c->ncand - o->skip < c->ninv)
			return devprof_errf(
			    err, DEVPROF_E_ALIGN,
			    "the device trace has %zu invocation(s) but the profiler trace has "
			    "%zu outer %s event(s) matching \"%.80s\" (after skipping %u)",
			    c->ninv, c->ncand, what, filter ? filter : "", o->skip);
		for (k = 0; k < c->ninv; k++)
			ev[k] = o->skip + k;
		return 0;
	}
	for (k = 0; k < c->ninv; k++) {
		if (!c->inv[k].have_seq)
			return devprof_errf(err, DEVPROF_E_DEVJSON,
					    "device trace: invocation %zu has no invocation_seq to "
					    "align by; --align-in-order aligns in file order",
					    k);
		for (j = 0; j < k; j++)
			if (c->inv[j].seq == c->inv[k].seq)
				return devprof_errf(
				    err, DEVPROF_E_ALIGN,
				    "invocations %zu and %zu both have invocation_seq %u: one "
				    "kernel call has one buffer (several sessions in one file?); "
				    "--align-in-order aligns in file order",
				    j, k, c->inv[k].seq);
		ev[k] = (size_t)o->skip + c->inv[k].seq;
		if (ev[k] >= c->ncand && !past++)
			first = k;
	}
	if (past)
		return devprof_errf(
		    err, DEVPROF_E_SEQ_RANGE,
		    "invocation %zu (invocation_seq %u) belongs to matching %s event %zu (skip "
		    "%u + invocation_seq), but the profiler trace has only %zu outer %s event(s) "
		    "matching \"%.80s\"; %zu of %zu invocation(s) lie past them. invocation_seq "
		    "counts the kernel's calls from its session start: if the profiler did not "
		    "record from there, --align-in-order aligns invocation k to event skip + k",
		    first, c->inv[first].seq, what, ev[first], o->skip, c->ncand, what,
		    filter ? filter : "", past, c->ninv);
	return 0;
}

/* Whether two kernel events overlap in time, whichever began first. */
static int overlaps(const struct cand *a, const struct cand *b)
{
	if (a->ts > b->ts || (a->ts == b->ts && a->index > b->index)) {
		const struct cand *t = a;

		a = b;
		b = t;
	}
	return a->ts + a->dur > b->ts;
}

static void note_oor(struct fuse_ctx *c, size_t k, const char *name, double ts, double end,
		     const struct cand *kc)
{
	cJSON *o;

	if (c->oor_count++ >= DEVPROF_DIAG_LIST)
		return;
	o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "invocation", (double)k);
	cJSON_AddStringToObject(o, "name", name ? name : "");
	cJSON_AddNumberToObject(o, "ts", ts);
	cJSON_AddNumberToObject(o, "end", end);
	cJSON_AddNumberToObject(o, "kernel_start", kc->ts);
	cJSON_AddNumberToObject(o, "kernel_end", kc->ts + kc->dur);
	cJSON_AddItemToArray(c->oor, o);
}

static cJSON *thread_meta(const char *name, const cJSON *pid, double tid, const char *key,
			  const char *sval, double nval)
{
	cJSON *e = cJSON_CreateObject(), *a;

	cJSON_AddStringToObject(e, "name", name);
	cJSON_AddStringToObject(e, "ph", "M");
	cJSON_AddItemToObject(e, "pid", cJSON_Duplicate(pid, 1));
	cJSON_AddNumberToObject(e, "tid", tid);
	a = cJSON_AddObjectToObject(e, "args");
	if (sval)
		cJSON_AddStringToObject(a, key, sval);
	else
		cJSON_AddNumberToObject(a, key, nval);
	return e;
}

static int tid_clash(const cJSON *events, struct devprof_err *err)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, events)
	{
		double tid;

		if (!num(e, "tid", &tid) && tid >= DEVPROF_FUSE_TID_BASE &&
		    tid < DEVPROF_FUSE_TID_BASE + (double)DEVPROF_FUSE_MAX_LANES * 0x1000)
			return devprof_errf(
			    err, DEVPROF_E_ALIGN,
			    "profiler trace already uses tid %.0f, inside the range "
			    "reserved for fused device tracks",
			    tid);
	}
	return 0;
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

cJSON *devprof_fuse(const cJSON *device, cJSON *profiler, const struct devprof_fuse_opts *o,
		    struct devprof_err *err)
{
	struct fuse_ctx c;
	const cJSON *dev_events = NULL, *prof_events, *e;
	cJSON *out, *events = NULL, *md, *dp = NULL, *diag_invs, *fbs, *warn, *oor;
	const char *filter = o->kernel_name;
	size_t nested = 0, kernels = 0, k, *ev = NULL;
	int *lane = NULL, host = 0, rc;

	memset(&c, 0, sizeof(c));
	rc = load_device(device, &c, &dev_events, err);
	if (rc)
		goto fail;
	if (cJSON_IsArray(profiler)) {
		prof_events = profiler; /* legacy autograd profiler: a bare event array */
	} else if (cJSON_IsObject(profiler)) {
		prof_events = cJSON_GetObjectItemCaseSensitive(profiler, "traceEvents");
		if (!cJSON_IsArray(prof_events)) {
			rc = devprof_errf(err, DEVPROF_E_TRACE,
					  "profiler trace: no \"traceEvents\" array");
			goto fail;
		}
		md = cJSON_GetObjectItemCaseSensitive(profiler, "metadata");
		if (md && (!cJSON_IsObject(md) ||
			   cJSON_GetObjectItemCaseSensitive(md, "commtrace_devprof"))) {
			rc = devprof_errf(err, DEVPROF_E_ALIGN,
					  "profiler trace: its \"metadata\" is not an object or "
					  "already holds fused device tracks");
			goto fail;
		}
	} else {
		rc = devprof_errf(err, DEVPROF_E_TRACE,
				  "profiler trace: neither an object nor an event array");
		goto fail;
	}
	rc = tid_clash(prof_events, err);
	if (rc)
		goto fail;
	if (!filter)
		filter = c.inv[0].kernel;
	rc = collect(prof_events, 0, filter, &c, &nested, &kernels, err);
	if (rc)
		goto fail;
	if (!c.ncand) {
		if (!o->allow_host_align) {
			if (kernels)
				rc =
				    devprof_errf(err, DEVPROF_E_HOST_REFUSED,
						 "profiler trace: none of its %zu device kernel "
						 "events matches \"%s\"; refusing to align to host "
						 "events without --allow-host-align",
						 kernels, filter ? filter : "");
			else
				rc = devprof_errf(
				    err, DEVPROF_E_HOST_REFUSED,
				    "profiler trace has no device kernel event (ph X, "
				    "cat \"kernel\"): a host-only (CPU) trace; refusing "
				    "to align device records to host events without "
				    "--allow-host-align");
			goto fail;
		}
		if (!filter) {
			rc =
			    devprof_errf(err, DEVPROF_E_USAGE,
					 "host alignment needs --kernel-name NAME (the host event "
					 "that launched the kernel), and the device trace names no "
					 "kernel");
			goto fail;
		}
		host = 1;
		rc = collect(prof_events, 1, filter, &c, &nested, &kernels, err);
		if (rc)
			goto fail;
	}
	ev = calloc(c.ninv, sizeof(*ev));
	if (!ev) {
		rc = devprof_errf(err, DEVPROF_E_NOMEM, "out of memory");
		goto fail;
	}
	rc = assign(&c, o, host, filter, ev, err);
	if (rc)
		goto fail;

	/* Staged apart from the profiler tree, which stays untouched until success. */
	events = cJSON_CreateArray();
	dp = cJSON_CreateObject();
	cJSON_AddNumberToObject(dp, "schema_version", 1);
	cJSON_AddStringToObject(dp, "alignment", host ? "host_event" : "device_kernel");
	cJSON_AddBoolToObject(dp, "host_alignment", host);
	if (filter)
		cJSON_AddStringToObject(dp, "kernel_filter", filter);
	else
		cJSON_AddNullToObject(dp, "kernel_filter");
	cJSON_AddNumberToObject(dp, "skip", o->skip);
	cJSON_AddStringToObject(dp, "align_by", o->align_in_order ? "in_order" : "invocation_seq");
	cJSON_AddStringToObject(
	    dp, "align_by_reason",
	    o->align_in_order ? "--align-in-order: invocation k is aligned to matching event "
				"skip + k in file order; invocation_seq is not used"
			      : "invocation_seq counts the kernel's calls from its session "
				"start: the invocation with sequence s is aligned to matching "
				"event skip + s");
	cJSON_AddNumberToObject(dp, "nested_events_skipped", (double)nested);
	cJSON_AddNumberToObject(dp, "unaligned_events", (double)(c.ncand - o->skip - c.ninv));
	diag_invs = cJSON_AddArrayToObject(dp, "invocations");
	fbs = cJSON_AddArrayToObject(dp, "name_fallbacks");
	warn = cJSON_AddArrayToObject(dp, "warnings");
	if (host)
		cJSON_AddItemToArray(
		    warn, cJSON_CreateString("aligned to host events: device tracks start at "
					     "the host event, not at kernel execution"));
	if (!filter)
		cJSON_AddItemToArray(
		    warn, cJSON_CreateString("no kernel name filter: every outer device kernel "
					     "counts as a call of the device kernel"));
	if (o->align_in_order) {
		for (k = 1; k < c.ninv; k++)
			if (!c.inv[k].have_seq || !c.inv[k - 1].have_seq ||
			    c.inv[k].seq != c.inv[k - 1].seq + 1)
				break;
		if (k < c.ninv)
			cJSON_AddItemToArray(
			    warn, cJSON_CreateString("--align-in-order over invocation_seq values "
						     "that are not consecutive: correct only if "
						     "the profiler recorded exactly the sampled "
						     "calls"));
	}
	c.oor = cJSON_CreateArray();

	lane = calloc(c.ninv, sizeof(*lane));
	if (!lane) {
		rc = devprof_errf(err, DEVPROF_E_NOMEM, "out of memory");
		goto fail;
	}
	for (k = 0; k < c.ninv; k++) {
		const struct cand *kc = &c.cands[ev[k]];
		const cJSON *kpid = cJSON_GetObjectItemCaseSensitive(kc->ev, "pid");
		const cJSON *fb;
		cJSON *d, *a;
		size_t j;
		int l;

		/* Invocations on one process share tracks unless their kernels overlap. */
		for (l = 0; l < DEVPROF_FUSE_MAX_LANES; l++) {
			for (j = 0; j < k; j++) {
				const struct cand *pc = &c.cands[ev[j]];

				if (lane[j] == l && !strcmp(pc->pkey, kc->pkey) && overlaps(pc, kc))
					break;
			}
			if (j == k)
				break;
		}
		if (l == DEVPROF_FUSE_MAX_LANES) {
			rc = devprof_errf(err, DEVPROF_E_ALIGN,
					  "more than %d overlapping kernel events in one process",
					  DEVPROF_FUSE_MAX_LANES);
			goto fail;
		}
		lane[k] = l;
		for (j = 0; j < k; j++)
			if (lane[j] == l && !strcmp(c.cands[ev[j]].pkey, kc->pkey))
				break;
		if (j == k) {
			const cJSON *core;

			/* First use of this lane of this process: name its tracks. */
			cJSON_ArrayForEach(core, c.inv[k].cores)
			{
				double slot =
				    cJSON_GetObjectItemCaseSensitive(core, "slot")->valuedouble;
				double tid = DEVPROF_FUSE_TID_BASE + l * 0x1000 + slot;
				char tn[96];

				if (l)
					snprintf(tn, sizeof(tn), "%s (lane %d)", str(core, "name"),
						 l);
				else
					snprintf(tn, sizeof(tn), "%s", str(core, "name"));
				cJSON_AddItemToArray(
				    events, thread_meta("thread_name", kpid, tid, "name", tn, 0));
				cJSON_AddItemToArray(events,
						     thread_meta("thread_sort_index", kpid, tid,
								 "sort_index", NULL,
								 1000000 + l * 0x1000 + slot));
			}
		}
		d = cJSON_CreateObject();
		cJSON_AddNumberToObject(d, "invocation", (double)k);
		cJSON_AddNumberToObject(d, "device_pid", c.inv[k].pid);
		if (c.inv[k].have_seq)
			cJSON_AddNumberToObject(d, "invocation_seq", c.inv[k].seq);
		else
			cJSON_AddNullToObject(d, "invocation_seq");
		cJSON_AddNumberToObject(d, "event_number", (double)ev[k]);
		cJSON_AddNumberToObject(d, "lane", l);
		a = cJSON_AddObjectToObject(d, "aligned_to");
		cJSON_AddStringToObject(a, "name", kc->name);
		cJSON_AddStringToObject(a, "cat", str(kc->ev, "cat") ? str(kc->ev, "cat") : "");
		cJSON_AddItemToObject(a, "pid", cJSON_Duplicate(kpid, 1));
		if (cJSON_GetObjectItemCaseSensitive(kc->ev, "tid"))
			cJSON_AddItemToObject(
			    a, "tid",
			    cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(kc->ev, "tid"), 1));
		cJSON_AddNumberToObject(a, "ts", kc->ts);
		cJSON_AddNumberToObject(a, "dur", kc->dur);
		cJSON_AddNumberToObject(a, "event_index", (double)kc->index);
		cJSON_AddBoolToObject(a, "host", host);
		cJSON_AddNumberToObject(d, "device_span_us",
					ns_round(c.inv[k].end_us - c.inv[k].start_us));
		cJSON_AddItemToArray(diag_invs, d);
		fb = cJSON_GetObjectItemCaseSensitive(c.inv[k].desc, "name_fallbacks");
		if (fb) {
			cJSON *f = cJSON_Duplicate(fb, 1);

			cJSON_AddNumberToObject(f, "invocation", (double)k);
			cJSON_AddItemToArray(fbs, f);
		}
	}

	cJSON_ArrayForEach(e, dev_events)
	{
		const char *ph = str(e, "ph");
		double pid, tid, ts, dur = 0, slot;
		const struct cand *kc;
		cJSON *ne;
		const cJSON *it;

		if (!cJSON_IsObject(e) || !ph) {
			rc = devprof_errf(err, DEVPROF_E_DEVJSON,
					  "device trace: an event is not an object with \"ph\"");
			goto fail;
		}
		if (!strcmp(ph, "M"))
			continue; /* replaced by the thread_name events above */
		if (num(e, "pid", &pid) || num(e, "tid", &tid) || num(e, "ts", &ts) ||
		    (!strcmp(ph, "X") && (num(e, "dur", &dur) || dur < 0))) {
			rc = devprof_errf(
			    err, DEVPROF_E_DEVJSON,
			    "device trace: a \"%s\" event lacks numeric pid/tid/ts/dur", ph);
			goto fail;
		}
		k = c.ninv;
		if (is_int(pid))
			for (k = 0; k < c.ninv && c.inv[k].pid != (int)pid; k++)
				;
		slot = tid - DEVPROF_TID_BASE;
		if (k == c.ninv || !is_int(slot) || slot < 0 || slot >= c.inv[k].ncores) {
			rc = devprof_errf(err, DEVPROF_E_DEVJSON,
					  "device trace: event at pid %.0f tid %.0f belongs to no "
					  "invocation core",
					  pid, tid);
			goto fail;
		}
		kc = &c.cands[ev[k]];
		ne = cJSON_CreateObject();
		cJSON_ArrayForEach(it, e)
		{
			if (!strcmp(it->string, "pid"))
				cJSON_AddItemToObject(
				    ne, "pid",
				    cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(kc->ev, "pid"),
						    1));
			else if (!strcmp(it->string, "tid"))
				cJSON_AddNumberToObject(
				    ne, "tid", DEVPROF_FUSE_TID_BASE + lane[k] * 0x1000 + slot);
			else if (!strcmp(it->string, "ts"))
				cJSON_AddNumberToObject(
				    ne, "ts", ns_round(kc->ts + (ts - c.inv[k].start_us)));
			else
				cJSON_AddItemToObject(ne, it->string, cJSON_Duplicate(it, 1));
		}
		ts = ns_round(kc->ts + (ts - c.inv[k].start_us));
		if (ts < kc->ts - 1e-6 || ts + dur > kc->ts + kc->dur + 1e-6)
			note_oor(&c, k, str(e, "name"), ts, ts + dur, kc);
		cJSON_AddItemToArray(events, ne);
	}
	oor = cJSON_AddObjectToObject(dp, "out_of_range");
	cJSON_AddNumberToObject(oor, "count", (double)c.oor_count);
	cJSON_AddBoolToObject(oor, "truncated", c.oor_count > DEVPROF_DIAG_LIST);
	cJSON_AddItemToObject(oor, "events", c.oor);
	c.oor = NULL;

	if (cJSON_IsArray(profiler)) {
		out = cJSON_CreateObject();
		cJSON_AddItemToObject(out, "traceEvents", profiler);
	} else {
		out = profiler;
	}
	md = cJSON_GetObjectItemCaseSensitive(out, "metadata");
	if (!md)
		md = cJSON_AddObjectToObject(out, "metadata");
	cJSON_AddItemToObject(md, "commtrace_devprof", dp);
	move_items(cJSON_GetObjectItemCaseSensitive(out, "traceEvents"), events);
	cJSON_Delete(events);
	free(lane);
	free(ev);
	free(c.inv);
	free(c.cands);
	return out;
fail:
	cJSON_Delete(c.oor);
	cJSON_Delete(events);
	cJSON_Delete(dp);
	free(lane);
	free(ev);
	free(c.inv);
	free(c.cands);
	return NULL;
}
