// SPDX-License-Identifier: MIT
/*
 * --record FILE: the ring buffer's records, framed, as they arrive, and what each call's
 * Python stack was resolved to; replay.c reads them back. The format is in
 * include/commtrace/record.h, the limits in docs/record.md.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cli.h"
#include "commtrace/record.h"
#include "export/chrome.h"
#include "export/export.h"
#include "record/record.h"
#include "target/proc.h"
#include "targets.h"
#include "util/clock.h"
#include "util/intern.h"
#include "util/utf8.h"

_Static_assert(CT_DROP_MAX <= CT_REC_MAX_DROPS, "ct_rec_end holds every drop counter");
_Static_assert(sizeof(struct ct_call_event) <= CT_REC_MAX_EVENT, "CT_REC_MAX_EVENT");
_Static_assert(sizeof(struct ct_rec_header) == 32, "ct_rec_header layout");
_Static_assert(sizeof(struct ct_rec_proc) == 40, "ct_rec_proc layout");
_Static_assert(sizeof(struct ct_rec_end) == 48 + 8 * CT_REC_MAX_DROPS, "ct_rec_end layout");
_Static_assert(sizeof(struct ct_rec_pycall) == 88, "ct_rec_pycall layout");
_Static_assert(CT_VALUE_DIMS == 6, "ct_rec_pycall.in_shape holds a tree call's shape");

struct ct_record {
	FILE *f;
	char *buf;
	char *py; /* one CT_REC_PYCALL frame, CT_REC_MAX_EVENT bytes */
	int err;  /* the first write error, -errno */
};

/* Where p's rank came from, for the recording (CT_REC_RANK_*). */
static __s32 rank_source(const struct ct_proc *p)
{
	const char *v;

	if (p->rank < 0)
		return CT_REC_RANK_UNKNOWN;
	if (p->comm_world)
		return CT_REC_RANK_COMM;
	for (int i = 0; p->rank_var && (v = ct_proc_rank_var(i)); i++)
		if (!strcmp(v, p->rank_var))
			return CT_REC_RANK_ENV + i;
	return CT_REC_RANK_UNKNOWN;
}

uint32_t ct_catalog_hash(void)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < ct_n_libs; i++) {
		const struct ct_libdesc *d = ct_libs[i];

		for (size_t k = 0; k <= d->n_funcs; k++) {
			const char *name = k ? d->funcs[k - 1].name : d->name;

			/* the terminating NUL too: "ab","c" differs from "a","bc" */
			do {
				h ^= (unsigned char)*name;
				h *= 16777619u;
			} while (*name++);
		}
	}
	return h;
}

static void put(struct ct_record *r, uint32_t type, const void *data, size_t len)
{
	struct ct_rec_frame fr = {.type = type, .len = (uint32_t)len};

	if (r->err)
		return;
	if (fwrite(&fr, sizeof(fr), 1, r->f) != 1 || (len && fwrite(data, len, 1, r->f) != 1))
		r->err = errno ? -errno : -EIO;
}

struct ct_rec_header ct_record_header(void)
{
	struct ct_rec_header h = {
	    .version = CT_REC_VERSION,
	    .header_size = sizeof(h),
	    .catalog_hash = ct_catalog_hash(),
	    .n_probes = (uint32_t)ct_catalog_size(),
	    .call_event_size = sizeof(struct ct_call_event),
	    .py_max_frames = CT_PY_MAX_FRAMES,
	};

	memcpy(h.magic, CT_REC_MAGIC, sizeof(h.magic));
	return h;
}

int ct_record_open(struct ct_session *s, const char *path)
{
	struct ct_rec_header h = ct_record_header();
	struct ct_record *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return -ENOMEM;
	r->f = fopen(path, "we");
	r->buf = malloc(1 << 20);
	r->py = malloc(CT_REC_MAX_EVENT);
	if (!r->f || !r->buf || !r->py) {
		err = r->f ? -ENOMEM : -errno;
		if (r->f)
			fclose(r->f);
		free(r->buf);
		free(r->py);
		free(r);
		return err;
	}
	setvbuf(r->f, r->buf, _IOFBF, 1 << 20);
	if (fwrite(&h, sizeof(h), 1, r->f) != 1)
		r->err = -EIO;
	s->rec = r;
	return 0;
}

void ct_record_event(struct ct_record *r, const void *data, size_t len)
{
	if (len <= CT_REC_MAX_EVENT)
		put(r, CT_REC_EVENT, data, len);
}

/* The strings of a CT_REC_PYCALL frame. */
struct strings {
	char *base;
	size_t used, cap;
};

/* s appended: its offset, or CT_REC_NOSTR (none, or no room left). */
static __u32 put_str(struct strings *b, const char *s)
{
	size_t n = s ? strlen(s) + 1 : 0;

	if (!s || n > b->cap - b->used)
		return CT_REC_NOSTR;
	memcpy(b->base + b->used, s, n);
	b->used += n;
	return (__u32)(b->used - n);
}

void ct_record_pycall(struct ct_record *r, pid_t pid, const struct ct_tree_call *c)
{
	size_t npath = c->npath < CT_REC_PY_MAX_PATH ? (size_t)c->npath : CT_REC_PY_MAX_PATH;
	size_t nstack = c->nstack < CT_REC_PY_MAX_STACK ? (size_t)c->nstack : CT_REC_PY_MAX_STACK;
	size_t head = sizeof(struct ct_rec_pycall) + npath * sizeof(struct ct_rec_pynode) +
		      nstack * sizeof(struct ct_rec_pyline);
	struct strings b = {.base = r->py + head, .cap = CT_REC_MAX_EVENT - head};
	struct ct_rec_pycall h = {.pid = (__u32)pid,
				  .tid = c->tid,
				  .ts = c->ts,
				  .phase = c->phase,
				  .truncated = c->truncated,
				  .npath = (__u16)npath,
				  .nstack = (__u16)nstack};
	char *at = r->py + sizeof(h);

	h.helper = put_str(&b, c->helper);
	h.in_ndim = c->in_ndim;
	memcpy(h.in_shape, c->in_shape, sizeof(h.in_shape));
	h.op = put_str(&b, c->op);
	h.root_class = put_str(&b, c->root_class);
	memcpy(r->py, &h, sizeof(h));
	for (size_t i = 0; i < npath; i++, at += sizeof(struct ct_rec_pynode)) {
		const struct ct_tree_frame *t = &c->path[i];
		struct ct_rec_pynode n = {.code = t->code,
					  .self = t->self,
					  .instr = t->instr,
					  .name = put_str(&b, t->name),
					  .src = put_str(&b, t->src),
					  .dst = put_str(&b, t->dst),
					  .type = t->type};

		memcpy(at, &n, sizeof(n));
	}
	for (size_t i = 0; i < nstack; i++, at += sizeof(struct ct_rec_pyline)) {
		struct ct_rec_pyline l = {.qualname = put_str(&b, c->stack[i].qualname),
					  .file = put_str(&b, c->stack[i].file),
					  .line = c->stack[i].line};

		memcpy(at, &l, sizeof(l));
	}
	put(r, CT_REC_PYCALL, r->py, head + b.used);
}

int ct_record_close(struct ct_session *s)
{
	struct ct_record *r = s->rec;
	struct ct_rec_end end = {
	    .mono_to_wall_ns = s->mono_to_wall_ns,
	    .start_ns = s->start_ns,
	    .end_ns = s->end_ns,
	    .lost_procs = s->lost_procs,
	    .dropped_user = s->dropped_user,
	    .n_drops = CT_DROP_MAX,
	};
	int err;

	if (!r)
		return 0;
	for (int i = 0; i < s->n_procs; i++) {
		const struct ct_proc *p = s->procs[i];
		struct ct_rec_proc rp = {.pid = p->pid,
					 .rank = p->rank,
					 .world = p->world,
					 .exited = p->exited,
					 .exit_code = p->exit_code,
					 .rank_source = rank_source(p)};

		memcpy(rp.comm, p->comm, sizeof(rp.comm));
		put(r, CT_REC_PROC, &rp, sizeof(rp));
	}
	memcpy(end.drops, s->drops, sizeof(s->drops));
	put(r, CT_REC_END, &end, sizeof(end));
	err = r->err;
	if (fclose(r->f) && !err)
		err = -errno;
	free(r->buf);
	free(r->py);
	free(r);
	s->rec = NULL;
	return err;
}
