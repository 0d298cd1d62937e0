// SPDX-License-Identifier: MIT
/*
 * merge --chrome: one timeline from several, colliding pids renumbered, flow ids kept apart,
 * and the rank→rank arrows redrawn over every input.
 */
#include <inttypes.h>
#include <stdlib.h>
#include "export/flows.h"
#include "merge/internal.h"
#include "merge/merge.h"
#include "session.h"
#include "util/sbuf.h"
#include "ct_version.h"

#define FLOW_ID_STEP 1000000000000ULL

/* ts (µs, 3 decimals) + shift (ns), written exactly as the tracer writes it. */
static void shift_us(cJSON *ev, const char *key, int64_t shift_ns)
{
	cJSON *t = cJSON_GetObjectItemCaseSensitive(ev, key);
	struct ct_sbuf b = {0};
	double ns;

	if (!cJSON_IsNumber(t) || !shift_ns)
		return;
	ns = t->valuedouble * 1000.0;
	ns = ns < 0 ? ns - 0.5 : ns + 0.5;
	ns += (double)shift_ns;
	if (ns < 0)
		ns = 0;
	ct_sbuf_us(&b, (uint64_t)ns);
	if (b.buf)
		cJSON_ReplaceItemInObjectCaseSensitive(ev, key, cJSON_CreateRaw(b.buf));
	ct_sbuf_free(&b);
}

struct pidmap {
	uint32_t from, to;
};

/* The pids of earlier inputs, to renumber a collision. */
struct pidset {
	uint32_t *v;
	int *input; /* the input each pid is in (pids are unique once renumbered) */
	size_t n, cap;
};

static bool pidset_has(const struct pidset *s, uint32_t pid)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] == pid)
			return true;
	return false;
}

static bool pidset_add(struct pidset *s, uint32_t pid, int input)
{
	if (s->n == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 64;
		uint32_t *nv = realloc(s->v, nc * sizeof(*nv));
		int *ni;

		if (!nv)
			return false;
		s->v = nv;
		ni = realloc(s->input, nc * sizeof(*ni));
		if (!ni)
			return false;
		s->input = ni;
		s->cap = nc;
	}
	s->input[s->n] = input;
	s->v[s->n++] = pid;
	return true;
}

/* Interned strings for ct_xmatch: function names (compared by address), identities. */
struct names {
	char **v;
	size_t n, cap;
};

/* The index of s in t, added if new; -1: no memory. */
static int32_t intern_index(struct names *t, const char *s)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->v[i], s))
			return (int32_t)i;
	if (t->n == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 64;
		char **nv = realloc(t->v, nc * sizeof(*nv));

		if (!nv)
			return -1;
		t->v = nv;
		t->cap = nc;
	}
	t->v[t->n] = strdup(s);
	return t->v[t->n] ? (int32_t)t->n++ : -1;
}

static const char *intern(struct names *t, const char *s)
{
	int32_t i = intern_index(t, s);

	return i < 0 ? NULL : t->v[i];
}

static double num_of(const cJSON *o, const char *k, double dflt)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsNumber(x) ? x->valuedouble : dflt;
}

static const char *const xkinds[] = {
    "all_reduce", "reduce",	"broadcast",	  "all_gather", "gather",
    "scatter",	  "all_to_all", "reduce_scatter", "barrier",
};

static bool collective_kind(const char *k)
{
	for (size_t i = 0; i < sizeof(xkinds) / sizeof(xkinds[0]); i++)
		if (!strcmp(k, xkinds[i]))
			return true;
	return false;
}

static void add_flow(cJSON *events, uint64_t id, const struct ct_xhalf *a, const struct ct_xhalf *b)
{
	const struct ct_xhalf *h[2] = {a, b};

	for (int i = 0; i < 2; i++) {
		cJSON *e = cJSON_CreateObject();
		struct ct_sbuf sb = {0};
		uint64_t t = h[i]->ts + (h[i]->end - h[i]->ts) / 2;

		cJSON_AddStringToObject(e, "ph", i ? "f" : "s");
		if (i)
			cJSON_AddStringToObject(e, "bp", "e");
		cJSON_AddStringToObject(e, "cat", "flow");
		cJSON_AddStringToObject(e, "name", "rank→rank");
		cJSON_AddItemToObject(e, "id", cJSON_CreateNumber((double)id));
		cJSON_AddItemToObject(e, "pid", cJSON_CreateNumber(h[i]->pid));
		cJSON_AddItemToObject(e, "tid", cJSON_CreateNumber(h[i]->tid));
		ct_sbuf_us(&sb, t);
		cJSON_AddItemToObject(e, "ts", cJSON_CreateRaw(sb.buf ? sb.buf : "0"));
		ct_sbuf_free(&sb);
		cJSON_AddItemToArray(events, e);
	}
}

/*
 * The rank→rank arrows between the halves of one collective, drawn again over the slices
 * of every input with the --chrome export's matching rule (function, communicator
 * identity "LIB#ORDINAL/SIZE", sequence number on it: args comm_id, comm_seq, comm_sub),
 * in order of completion: the arrows one tracer that saw every rank would have drawn,
 * across node boundaries too. The identity is the same in every tracer: each process
 * numbers its communicators of a size in the order it first uses them.
 */
struct half {
	const char *fn;
	int32_t comm; /* index of the interned comm_id */
	uint32_t sub;
	uint64_t seq;
	int input;
	struct ct_xhalf h;
};

static int half_order(const void *a, const void *b)
{
	const struct half *x = a, *y = b;

	if (x->h.end != y->h.end)
		return x->h.end < y->h.end ? -1 : 1;
	return x->input - y->input;
}

static uint64_t rank_flows(cJSON *events, struct half *hs, size_t n, uint64_t id0,
			   uint64_t *evicted)
{
	struct ct_xmatch *m = calloc(1, sizeof(*m));
	uint64_t flows = 0;

	if (!m)
		return 0;
	/* The first half to complete is the origin, as in the tracer. */
	qsort(hs, n, sizeof(*hs), half_order);
	for (size_t i = 0; i < n; i++) {
		struct ct_xkey k = {
		    .function = hs[i].fn, .comm = hs[i].comm, .sub = hs[i].sub, .seq = hs[i].seq};
		struct ct_xhalf first;

		if (ct_xmatch_add(m, &k, &hs[i].h, &first))
			add_flow(events, id0 + ++flows, &first, &hs[i].h);
	}
	*evicted = m->evicted;
	free(m);
	return flows;
}

int mg_merge_chrome(struct input *ins, const int *idx, int n, const char *out)
{
	struct input *ref = &ins[idx[0]];
	cJSON *root = cJSON_CreateObject(), *events = cJSON_CreateArray(), *meta, *minfo, *arr;
	cJSON *mprocs = cJSON_CreateArray();
	struct pidset seen = {0};
	struct names names = {0}, comms = {0};
	struct half *hs = NULL;
	size_t nh = 0, caph = 0;
	uint32_t next_pid = REMAP_PID0;
	uint64_t start = 0, end = 0, flows, evicted = 0;
	double dropped = 0;
	int rc;
	char w[24];

	rc = mg_check_conflicts(ins, idx, n, "processes");
	if (rc)
		goto out;
	meta = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(ref->doc, "metadata"), true);
	minfo = cJSON_CreateObject();
	arr = cJSON_AddArrayToObject(minfo, "inputs");
	for (int a = 0; a < n; a++) {
		struct input *in = &ins[idx[a]];
		cJSON *md = cJSON_GetObjectItemCaseSensitive(in->doc, "metadata");
		cJSON *list = cJSON_GetObjectItemCaseSensitive(in->doc, "traceEvents");
		cJSON *e = cJSON_CreateObject(), *map = cJSON_CreateObject(), *p, *ev;
		struct pidmap pm[CT_MAX_TARGETS];
		int npm = 0, nev = 0;
		struct pidset mine = {0};

		in->shift = in->wall - ref->wall;
		/* Pids of this input that an earlier input has too (another host): renumbered. */
		cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(md, "processes"))
		{
			uint32_t pid = (uint32_t)num_of(p, "pid", 0);
			cJSON *c;

			if (pidset_has(&seen, pid) && npm < CT_MAX_TARGETS) {
				char k[16];

				pm[npm].from = pid;
				pm[npm].to = next_pid++;
				snprintf(k, sizeof(k), "%u", pid);
				cJSON_AddItemToObject(map, k, cJSON_CreateNumber(pm[npm].to));
				pid = pm[npm++].to;
			}
			pidset_add(&mine, pid, a);
			c = cJSON_Duplicate(p, true);
			cJSON_ReplaceItemInObjectCaseSensitive(c, "pid", cJSON_CreateNumber(pid));
			cJSON_AddStringToObject(c, "merge_file", in->path);
			cJSON_AddItemToArray(mprocs, c);
		}
		cJSON_ArrayForEach(ev, list)
		{
			cJSON *pid = cJSON_GetObjectItemCaseSensitive(ev, "pid");
			cJSON *id = cJSON_GetObjectItemCaseSensitive(ev, "id");
			cJSON *args = cJSON_GetObjectItemCaseSensitive(ev, "args");
			const cJSON *ph = cJSON_GetObjectItemCaseSensitive(ev, "ph");

			if (!cJSON_IsObject(ev) || !cJSON_IsString(ph)) {
				rc = mg_fail(CT_MERGE_E_MALFORMED,
					     "%s: traceEvents[%d] is not an event (an object with "
					     "ph)",
					     in->path, nev);
				cJSON_Delete(e);
				cJSON_Delete(map);
				free(mine.v);
				free(mine.input);
				cJSON_Delete(meta);
				cJSON_Delete(minfo);
				goto out;
			}
			nev++;
			if (cJSON_IsNumber(pid)) {
				for (int k = 0; k < npm; k++)
					if ((uint32_t)pid->valuedouble == pm[k].from) {
						cJSON_SetNumberValue(pid, pm[k].to);
						break;
					}
			}
			if (cJSON_IsNumber(id) && a > 0) /* flow ids of each input kept apart */
				cJSON_SetNumberValue(id,
						     id->valuedouble + (double)a * FLOW_ID_STEP);
			if (ph->valuestring[0] != 'M')
				shift_us(ev, "ts", in->shift);
			/* a collective's half, for the arrows across inputs */
			if (ph->valuestring[0] == 'X' && cJSON_IsObject(args) &&
			    cJSON_IsString(cJSON_GetObjectItemCaseSensitive(args, "kind")) &&
			    collective_kind(
				cJSON_GetObjectItemCaseSensitive(args, "kind")->valuestring) &&
			    cJSON_IsString(cJSON_GetObjectItemCaseSensitive(args, "function")) &&
			    cJSON_IsString(cJSON_GetObjectItemCaseSensitive(args, "comm_id")) &&
			    num_of(args, "comm_seq", 0) > 0 && num_of(args, "group_size", 0) > 1) {
				double ts = num_of(ev, "ts", 0), dur = num_of(ev, "dur", 0);

				if (nh == caph) {
					size_t nc = caph ? caph * 2 : 4096;
					struct half *nv = realloc(hs, nc * sizeof(*nv));

					if (!nv)
						continue;
					hs = nv;
					caph = nc;
				}
				hs[nh].fn = intern(
				    &names, cJSON_GetObjectItemCaseSensitive(args, "function")
						->valuestring);
				if (!hs[nh].fn)
					continue;
				hs[nh].comm = intern_index(
				    &comms,
				    cJSON_GetObjectItemCaseSensitive(args, "comm_id")->valuestring);
				if (hs[nh].comm < 0)
					continue;
				hs[nh].sub = (uint32_t)num_of(args, "comm_sub", 0);
				hs[nh].seq = (uint64_t)num_of(args, "comm_seq", 0);
				hs[nh].input = a;
				hs[nh].h.pid = (uint32_t)num_of(ev, "pid", 0);
				hs[nh].h.tid = (uint32_t)num_of(ev, "tid", 0);
				hs[nh].h.ts = (uint64_t)(ts * 1000.0 + 0.5);
				hs[nh].h.end = hs[nh].h.ts + (uint64_t)(dur * 1000.0 + 0.5);
				nh++;
			}
		}
		for (size_t k = 0; k < mine.n; k++)
			pidset_add(&seen, mine.v[k], a);
		free(mine.v);
		free(mine.input);
		cJSON_AddStringToObject(e, "file", in->path);
		p = cJSON_GetObjectItemCaseSensitive(md, "host");
		if (cJSON_IsString(p))
			cJSON_AddStringToObject(e, "host", p->valuestring);
		snprintf(w, sizeof(w), "%" PRId64, in->wall);
		cJSON_AddStringToObject(e, "mono_to_wall_ns_str", w);
		cJSON_AddItemToObject(e, "shift_ns", cJSON_CreateNumber((double)in->shift));
		cJSON_AddBoolToObject(e, "clock_exact", in->wall_exact);
		cJSON_AddItemToObject(e, "events", cJSON_CreateNumber(nev));
		cJSON_AddItemToObject(e, "pid_map", map);
		cJSON_AddItemToObject(e, "metadata", cJSON_Duplicate(md, true));
		cJSON_AddItemToArray(arr, e);
		dropped += num_of(md, "dropped_events", 0);
		if (a == 0 || (int64_t)in->start + in->shift < (int64_t)start)
			start = (uint64_t)((int64_t)in->start + in->shift);
		if (a == 0 || (int64_t)in->end + in->shift > (int64_t)end)
			end = (uint64_t)((int64_t)in->end + in->shift);
		/* Move the events over; rank→rank arrows are drawn again over all inputs. */
		while (list && list->child) {
			cJSON *x = cJSON_DetachItemViaPointer(list, list->child);
			const cJSON *cat = cJSON_GetObjectItemCaseSensitive(x, "cat");
			const cJSON *nm = cJSON_GetObjectItemCaseSensitive(x, "name");

			if (cJSON_IsString(cat) && !strcmp(cat->valuestring, "flow") &&
			    cJSON_IsString(nm) && !strcmp(nm->valuestring, "rank→rank"))
				cJSON_Delete(x);
			else
				cJSON_AddItemToArray(events, x);
		}
	}
	flows = rank_flows(events, hs, nh, (uint64_t)(n + 1) * FLOW_ID_STEP, &evicted);
	cJSON_AddItemToObject(minfo, "rank_flows", cJSON_CreateNumber((double)flows));
	cJSON_AddItemToObject(minfo, "flow_candidates_forgotten",
			      cJSON_CreateNumber((double)evicted));
	cJSON_ReplaceItemInObjectCaseSensitive(meta, "processes", mprocs);
	mprocs = NULL;
	cJSON_ReplaceItemInObjectCaseSensitive(meta, "start_ns", mg_u64_item(start));
	cJSON_ReplaceItemInObjectCaseSensitive(meta, "end_ns", mg_u64_item(end));
	cJSON_ReplaceItemInObjectCaseSensitive(meta, "dropped_events", cJSON_CreateNumber(dropped));
	cJSON_AddItemToObject(meta, "merge", minfo);
	cJSON_AddItemToObject(root, "traceEvents", events);
	events = NULL;
	cJSON_AddItemToObject(root, "metadata", meta);
	rc = mg_write_doc(root, out);
out:
	for (size_t i = 0; i < names.n; i++)
		free(names.v[i]);
	free(names.v);
	for (size_t i = 0; i < comms.n; i++)
		free(comms.v[i]);
	free(comms.v);
	free(hs);
	free(seen.v);
	free(seen.input);
	cJSON_Delete(mprocs);
	cJSON_Delete(events);
	cJSON_Delete(root);
	return rc;
}
