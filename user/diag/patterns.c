// SPDX-License-Identifier: MIT
/* Findings: late ranks and seed 003's anti-patterns (communicators created in steps, repeated full
 * all-gathers, serialized reductions, growing traffic), merged across ranks. */
#include <string.h>
#include "catalog/catalog.h"
#include "diag/internal.h"

const char *ct_diag_kind_name(uint8_t kind)
{
	static const char *const names[] = {
	    [CT_DF_LATE_RANK] = "late_rank",
	    [CT_DF_MISMATCH] = "mismatch",
	    [CT_DF_HANG] = "hang",
	    [CT_DF_COMM_CREATION] = "comm_creation_in_steps",
	    [CT_DF_REPEATED_ALLGATHER] = "repeated_full_allgather",
	    [CT_DF_SERIAL_REDUCTIONS] = "serialized_reductions",
	    [CT_DF_TRAFFIC_GROWTH] = "traffic_growth",
	};

	return kind < ARRAY_LEN(names) && names[kind] ? names[kind] : "unknown";
}

const char *ct_diag_severity_name(uint8_t sev)
{
	return sev == CT_DS_ERROR ? "error" : sev == CT_DS_WARNING ? "warning" : "info";
}

static struct ct_diag_finding *finding_new(struct ct_diag *d, uint8_t kind, uint8_t sev)
{
	struct ct_diag_finding *f;

	if (d->nf == CT_DIAG_FINDINGS) {
		d->drops.findings_over_limit++;
		return NULL;
	}
	f = &d->f[d->nf++];
	memset(f, 0, sizeof(*f));
	f->kind = kind;
	f->severity = sev;
	return f;
}

static void add_rank(struct ct_diag_finding *f, const struct dproc *p)
{
	for (int i = 0; i < f->nranks; i++)
		if (f->pids[i] == p->pid)
			return;
	if (f->nranks < CT_DIAG_FRANKS) {
		f->ranks[f->nranks] = p->rank;
		f->pids[f->nranks++] = p->pid;
	}
}

/* Findings of the same kind and call site on several ranks are one finding. */
static struct ct_diag_finding *merged(struct ct_diag *d, uint8_t kind, uint8_t sev,
				      const char *site, const char *site2)
{
	for (int i = 0; i < d->nf; i++) {
		struct ct_diag_finding *f = &d->f[i];

		if (f->kind == kind && !strcmp(f->site, site) && !strcmp(f->site2, site2))
			return f;
	}
	return finding_new(d, kind, sev);
}

static void late_findings(struct ct_diag *d)
{
	for (int i = 0; i < d->nmembers; i++) {
		struct member *m = d->members[i];
		struct dproc *p = d->procs[m->proc];
		struct ct_diag_finding *f;
		char me[64], dur[32];

		if (!m->late || !(f = finding_new(d, CT_DF_LATE_RANK, CT_DS_WARNING)))
			continue;
		add_rank(f, p);
		f->pid = p->pid;
		f->ts = m->late_ts;
		diag_comm_name(d->comms[m->comm], f->comm, sizeof(f->comm));
		f->function = m->late_fn;
		f->seq = m->late_seq;
		f->count = m->late;
		f->total = d->comms[m->comm]->matched;
		f->value_ns = m->late_max;
		snprintf(f->site, sizeof(f->site), "%s", m->late_site);
		diag_who(me, sizeof(me), p);
		diag_fmt_secs(dur, sizeof(dur), m->late_max);
		snprintf(f->summary, sizeof(f->summary),
			 "%s arrived last, %llu of %llu collectives on %s with skew >= %.3f s; "
			 "worst %s at %s #%llu%s%s",
			 me, (unsigned long long)m->late, (unsigned long long)f->total, f->comm,
			 (double)d->o.late_ns / 1e9, dur, m->late_fn,
			 (unsigned long long)m->late_seq, m->late_site[0] ? " from " : "",
			 m->late_site);
	}
}

static void newcomm_findings(struct ct_diag *d, struct dproc *p)
{
	const struct run *b = diag_steady_run(d, &p->st);
	uint64_t n = p->nnc < CT_DIAG_NEWCOMMS ? p->nnc : CT_DIAG_NEWCOMMS, count = 0;
	const struct newcomm *first = NULL;
	struct ct_diag_finding *f;
	char site[256] = "";

	if (!b)
		return;
	for (uint64_t k = p->nnc - n; k < p->nnc; k++) {
		const struct newcomm *c = &p->nc[k % CT_DIAG_NEWCOMMS];

		if (!diag_in_run(b, c->index))
			continue;
		count++;
		if (!first)
			first = c;
	}
	count += p->nc_confirmed;
	if (!count || !first)
		return;
	if (first->has_site)
		diag_fmt_line(site, sizeof(site), &first->site);
	f = merged(d, CT_DF_COMM_CREATION, CT_DS_WARNING, site, "");
	if (!f)
		return;
	add_rank(f, p);
	if (count > f->count)
		f->count = count;
	f->total = b->steps;
	f->pid = p->pid;
	f->function = first->function;
	snprintf(f->site, sizeof(f->site), "%s", site);
	snprintf(f->comm, sizeof(f->comm), "%s", first->comm);
	snprintf(f->summary, sizeof(f->summary),
		 "%llu communicator%s %s inside the training steps (%llu steps of %u "
		 "collectives), first %s%s%s",
		 (unsigned long long)f->count, f->count == 1 ? "" : "s",
		 first->creation ? "created" : "first used", (unsigned long long)b->steps, b->p,
		 first->creation ? "by " : "used by ", first->function, site[0] ? " from " : "");
	if (site[0])
		strncat(f->summary, site, sizeof(f->summary) - strlen(f->summary) - 1);
}

static void allgather_findings(struct ct_diag *d, struct dproc *p)
{
	const struct run *b = diag_steady_run(d, &p->st);
	const struct steps *st = &p->st;
	uint64_t floor = st->n > CT_DIAG_SIGS ? st->n - CT_DIAG_SIGS : 0;

	if (!b)
		return;
	for (uint32_t j = 0; j < b->p; j++) {
		const struct sigent *e0 = NULL;
		uint64_t seen = 0;
		bool same = true;
		struct ct_diag_finding *f;
		char site[256] = "";

		for (uint64_t s = 0; s < b->steps; s++) {
			uint64_t k = b->start + s * b->p + j;
			const struct sigent *e;

			if (k < floor)
				continue;
			e = &st->e[k % CT_DIAG_SIGS];
			if (e->kind != CT_K_ALLGATHER || !e->helper || !e->has_site) {
				same = false;
				break;
			}
			if (!e0)
				e0 = e;
			else if (e->bytes != e0->bytes)
				same = false;
			seen++;
		}
		if (!same || !e0 || seen < d->o.min_repeats)
			continue;
		diag_fmt_line(site, sizeof(site), &e0->site);
		f = merged(d, CT_DF_REPEATED_ALLGATHER, CT_DS_WARNING, site, "");
		if (!f)
			return;
		add_rank(f, p);
		f->pid = p->pid;
		f->function = e0->function;
		f->count = b->steps;
		f->total = b->steps;
		f->bytes = e0->bytes;
		snprintf(f->site, sizeof(f->site), "%s", site);
		snprintf(
		    f->summary, sizeof(f->summary),
		    "the same full-tensor all-gather (%s, %llu bytes, under full_tensor/unshard) "
		    "in every one of %llu steps from %s",
		    e0->function, (unsigned long long)e0->bytes, (unsigned long long)b->steps,
		    site);
	}
}

static void pair_findings(struct ct_diag *d, struct dproc *p)
{
	for (int i = 0; i < p->npairs; i++) {
		const struct pair *x = &p->pairs[i];
		struct ct_diag_finding *f;
		char sa[256] = "", sb[256] = "", ca[48] = "?", cb[48] = "?";

		if (x->count < d->o.min_repeats)
			continue;
		if (x->has_a)
			diag_fmt_line(sa, sizeof(sa), &x->a);
		if (x->has_b)
			diag_fmt_line(sb, sizeof(sb), &x->b);
		f = merged(d, CT_DF_SERIAL_REDUCTIONS, CT_DS_INFO, sa, sb);
		if (!f)
			return;
		if (x->ca >= 0)
			diag_comm_name(d->comms[x->ca], ca, sizeof(ca));
		if (x->cb >= 0)
			diag_comm_name(d->comms[x->cb], cb, sizeof(cb));
		add_rank(f, p);
		f->pid = p->pid;
		f->tid = x->tid;
		f->ts = x->ts;
		f->function = x->fa;
		f->function2 = x->fb;
		if (x->count > f->count)
			f->count = x->count;
		if (x->max_gap > f->value_ns)
			f->value_ns = x->max_gap;
		snprintf(f->site, sizeof(f->site), "%s", sa);
		snprintf(f->site2, sizeof(f->site2), "%s", sb);
		snprintf(f->comm, sizeof(f->comm), "%s", ca);
		snprintf(f->what, sizeof(f->what), "%s then %s", ca, cb);
		snprintf(f->summary, sizeof(f->summary),
			 "%llu times %s on %s, then %s on %s issued only after it completed (gap "
			 "<= %.3f ms, same thread): they could overlap; from %s then %s",
			 (unsigned long long)f->count, x->fa, ca, x->fb, cb,
			 (double)f->value_ns / 1e6, sa[0] ? sa : "?", sb[0] ? sb : "?");
	}
}

static void growth_findings(struct ct_diag *d, struct dproc *p)
{
	const struct run *b = diag_steady_run(d, &p->st);
	struct ct_diag_finding *f;
	char me[64];

	/* Steady increase over min_repeats steps, to at least 1.25x. */
	if (!b || b->growth < d->o.min_repeats || b->last_vol * 4 < b->base_vol * 5)
		return;
	f = merged(d, CT_DF_TRAFFIC_GROWTH, CT_DS_WARNING, "", ""); /* one for all ranks */
	if (!f)
		return;
	add_rank(f, p);
	f->pid = p->pid;
	f->count = b->growth;
	f->total = b->steps;
	f->bytes = b->base_vol;
	f->bytes2 = b->last_vol;
	snprintf(me, sizeof(me), "%d rank%s", f->nranks, f->nranks == 1 ? "" : "s");
	snprintf(f->summary, sizeof(f->summary),
		 "%s: bytes per step grew %u steps in a row, %llu -> %llu (steps of %u "
		 "collectives)",
		 me, b->growth, (unsigned long long)b->base_vol, (unsigned long long)b->last_vol,
		 b->p);
}

int ct_diag_findings(struct ct_diag *d, const struct ct_diag_finding **out)
{
	d->nf = 0;
	for (int i = 0; i < d->nhangs; i++) {
		struct ct_diag_finding *f = finding_new(d, CT_DF_HANG, CT_DS_ERROR);

		if (f)
			*f = d->hangs[i];
	}
	for (int i = 0; i < d->ncomms; i++) {
		struct comm *c = d->comms[i];
		struct ct_diag_finding *f;

		if (!c->mismatch || !(f = finding_new(d, CT_DF_MISMATCH, CT_DS_ERROR)))
			continue;
		*f = *c->mismatch;
		f->count = c->mismatches;
		f->total = c->matched;
	}
	late_findings(d);
	for (int i = 0; i < d->nprocs; i++) {
		newcomm_findings(d, d->procs[i]);
		allgather_findings(d, d->procs[i]);
		pair_findings(d, d->procs[i]);
		growth_findings(d, d->procs[i]);
	}
	*out = d->f;
	return d->nf;
}

void ct_diag_live(struct ct_diag *d, struct ct_diag_live *out)
{
	const struct ct_diag_finding *f;
	uint64_t now[CT_DIAG_KINDS + 1] = {0};
	int n = ct_diag_findings(d, &f);

	memset(out, 0, sizeof(*out));
	/* A counter never goes down: a step-based finding that a later glitch hides stays. */
	for (int i = 0; i < n; i++)
		if (f[i].kind <= CT_DIAG_KINDS)
			now[f[i].kind]++;
	for (int k = 1; k <= CT_DIAG_KINDS; k++) {
		if (now[k] > d->kind_hw[k])
			d->kind_hw[k] = now[k];
		out->by_kind[k] = d->kind_hw[k];
	}
	for (int i = 0; i < d->nprocs; i++) {
		const struct dproc *p = d->procs[i];
		bool hung = false;

		for (int k = 0; k < p->nmem && !hung; k++)
			for (int w = 0; w < CT_DIAG_WINDOW && !hung; w++)
				hung = d->members[p->mem[k]]->w[w].alerted &&
				       diag_blocked(&d->members[p->mem[k]]->w[w]);
		out->ranks_hung += hung;
	}
	out->ranks_late = d->matched && d->last_late ? 1 : 0;
	out->matched = d->matched;
	out->skew_max_ns = d->skew_max;
	out->skew_last_ns = d->skew_last;
}
