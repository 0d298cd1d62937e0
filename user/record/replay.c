// SPDX-License-Identifier: MIT
/*
 * `commtrace-bpf replay FILE`: a --record file fed through calls.c and the exporters, as if
 * traced now, with no BPF and no target: the processes come from the recording, each
 * call's Python side from the CT_REC_PYCALL frame the tracer wrote after it.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "calls.h"
#include "cli.h"
#include "commtrace/record.h"
#include "export/chrome.h"
#include "export/export.h"
#include "record/record.h"
#include "record/replay.h"
#include "records.h"
#include "target/proc.h"
#include "targets.h"
#include "util/clock.h"
#include "util/intern.h"
#include "util/utf8.h"

/* A process of the recording: created without looking at any live process of that pid. */
static struct ct_proc *replay_proc(struct ct_session *s, pid_t pid)
{
	struct ct_proc *p = ct_proc_find(s, pid);

	if (p || pid <= 0)
		return p;
	p = ct_proc_add(s, pid);
	if (p) {
		p->rank = -1;
		p->world = 0;
		memset(p->comm, 0, sizeof(p->comm));
		p->attached = true;
	}
	return p;
}

/* 1: a frame (its payload in buf, or skipped when buf is NULL), 0: end, -1: cut short. */
static int next_frame(FILE *f, struct ct_rec_frame *fr, void *buf, size_t cap)
{
	if (fread(fr, sizeof(*fr), 1, f) != 1)
		return feof(f) && !ferror(f) ? 0 : -1;
	if (fr->len > CT_REC_MAX_EVENT)
		return -1;
	if (buf && fr->len <= cap)
		return fr->len == 0 || fread(buf, fr->len, 1, f) == 1 ? 1 : -1;
	return fseek(f, fr->len, SEEK_CUR) == 0 ? 1 : -1;
}

/* A replayed call's Python side (CT_REC_PYCALL), in the form ct_calls_on_call takes it. */
struct replay_py {
	struct ct_tree_call c;
	struct ct_tree_frame path[CT_REC_PY_MAX_PATH];
	struct ct_stack_line stack[CT_REC_PY_MAX_STACK];
};

/* A string of the frame (interned, sanitized), NULL for CT_REC_NOSTR; *bad if invalid. */
static const char *get_str(const char *strs, size_t len, __u32 off, bool *bad)
{
	if (off == CT_REC_NOSTR)
		return NULL;
	if (off >= len || !memchr(strs + off, 0, len - off)) {
		*bad = true;
		return NULL;
	}
	return ct_intern(strs + off);
}

/* Untrusted: every count, offset, type and string is checked. false: not for ev. */
static bool parse_pycall(const char *buf, size_t len, const struct ct_call_event *ev,
			 struct replay_py *rp)
{
	struct ct_rec_pycall h;
	const char *strs;
	size_t head;
	bool bad = false;

	if (len < sizeof(h))
		return false;
	memcpy(&h, buf, sizeof(h));
	head = sizeof(h) + (size_t)h.npath * sizeof(struct ct_rec_pynode) +
	       (size_t)h.nstack * sizeof(struct ct_rec_pyline);
	if (h.pid != ev->hdr.pid || h.tid != ev->hdr.tid || h.ts != ev->hdr.ts ||
	    h.npath > CT_REC_PY_MAX_PATH || h.nstack > CT_REC_PY_MAX_STACK || head > len ||
	    h.phase > CT_PHASE_BACKWARD)
		return false;
	strs = buf + head;
	memset(rp, 0, sizeof(*rp));
	rp->c.helper = get_str(strs, len - head, h.helper, &bad);
	rp->c.op = get_str(strs, len - head, h.op, &bad);
	rp->c.in_ndim = h.in_ndim >= CT_SHAPE_UNREADABLE && h.in_ndim <= CT_VALUE_DIMS
			    ? h.in_ndim
			    : CT_SHAPE_NONE;
	memcpy(rp->c.in_shape, h.in_shape, sizeof(rp->c.in_shape));
	rp->c.root_class = get_str(strs, len - head, h.root_class, &bad);
	rp->c.phase = h.phase;
	rp->c.truncated = h.truncated != 0;
	rp->c.path = rp->path;
	rp->c.npath = h.npath;
	rp->c.stack = rp->stack;
	rp->c.nstack = h.nstack;
	for (size_t i = 0; i < h.npath; i++) {
		struct ct_rec_pynode n;

		memcpy(&n, buf + sizeof(h) + i * sizeof(n), sizeof(n));
		if (n.type < CT_NODE_MODULE || n.type > CT_NODE_GRAPH ||
		    n.type == CT_NODE_COLLECTIVE)
			return false;
		rp->path[i] =
		    (struct ct_tree_frame){.type = n.type,
					   .code = n.code,
					   .self = n.self,
					   .instr = n.instr,
					   .name = get_str(strs, len - head, n.name, &bad),
					   .src = get_str(strs, len - head, n.src, &bad),
					   .dst = get_str(strs, len - head, n.dst, &bad)};
		if (!rp->path[i].name)
			rp->path[i].name = "?";
	}
	for (size_t i = 0; i < h.nstack; i++) {
		struct ct_rec_pyline l;

		memcpy(&l, buf + sizeof(h) + h.npath * sizeof(struct ct_rec_pynode) + i * sizeof(l),
		       sizeof(l));
		rp->stack[i] =
		    (struct ct_stack_line){.qualname = get_str(strs, len - head, l.qualname, &bad),
					   .file = get_str(strs, len - head, l.file, &bad),
					   .line = l.line};
		if (!rp->stack[i].qualname)
			rp->stack[i].qualname = "?";
	}
	return !bad;
}

/*
 * The CT_REC_PYCALL frame after the call record ev, parsed into rp. false without one:
 * the file is left where it was when the next frame is something else.
 */
static bool next_pycall(FILE *f, char *raw, const struct ct_call_event *ev, struct replay_py *rp,
			struct ct_replay_stats *st)
{
	struct ct_rec_frame fr;
	long at = ftell(f);

	if (at < 0)
		return false;
	if (next_frame(f, &fr, raw, CT_REC_MAX_EVENT) == 1 && fr.type == CT_REC_PYCALL) {
		if (parse_pycall(raw, fr.len, ev, rp))
			return true;
		st->bad++;
		return false;
	}
	clearerr(f);
	fseek(f, at, SEEK_SET);
	return false;
}

/* The processes in the order the live session listed them (its CT_REC_PROC frames),
 * before those only seen in records: the reports list them in that order. */
static void listed_first(struct ct_session *s, struct ct_proc *p, int *listed)
{
	for (int i = *listed; p && i < s->n_procs; i++)
		if (s->procs[i] == p) {
			memmove(&s->procs[*listed + 1], &s->procs[*listed],
				(size_t)(i - *listed) * sizeof(p));
			s->procs[(*listed)++] = p;
			return;
		}
}

static void replay_proc_event(struct ct_session *s, const struct ct_proc_event *ev)
{
	struct ct_proc *p = ct_proc_find(s, ev->hdr.pid);

	/* No attaching, no /proc: the processes of a recording are long gone. */
	switch (ev->hdr.type) {
	case CT_EV_FORK:
		replay_proc(s, ev->child);
		break;
	case CT_EV_EXEC:
		if (p) {
			memcpy(p->comm, ev->comm, sizeof(p->comm) - 1);
			ct_str_sanitize(p->comm);
		}
		break;
	case CT_EV_EXIT:
		if (p && !p->exited) {
			p->exited = true;
			p->exit_code = ev->exit_code;
		}
		break;
	}
}

int ct_replay_file(struct ct_session *s, FILE *f, struct ct_replay_stats *st, char *err,
		   size_t errlen)
{
	struct {
		union {
			struct ct_call_event call;
			struct ct_ret_event ret;
			struct ct_op_vals_event
			    op_vals; /* ct_op_event, and its values when it has them */
			struct ct_op_event op;
			struct ct_proc_event proc;
			char raw[CT_REC_MAX_EVENT];
		};
		char next[CT_REC_MAX_EVENT]; /* the frame after a call record */
		struct replay_py py;
	} * buf;
	struct ct_rec_header h;
	struct ct_rec_frame fr;
	struct ct_rec_end end = {0};
	bool have_end = false;
	int listed = 0;
	long start;
	int rc;

	memset(st, 0, sizeof(*st));
	if (fread(&h, sizeof(h), 1, f) != 1 || memcmp(h.magic, CT_REC_MAGIC, sizeof(h.magic))) {
		snprintf(err, errlen, "not a commtrace recording");
		return -EINVAL;
	}
	if (h.version != CT_REC_VERSION || h.header_size != sizeof(h)) {
		snprintf(err, errlen, "recording format version %u, this build reads %d", h.version,
			 CT_REC_VERSION);
		return -EINVAL;
	}
	if (h.catalog_hash != ct_catalog_hash() || h.n_probes != ct_catalog_size() ||
	    h.call_event_size != sizeof(struct ct_call_event) ||
	    h.py_max_frames != CT_PY_MAX_FRAMES) {
		snprintf(err, errlen,
			 "recorded by a build with another function catalog or record layout "
			 "(%u functions, hash %08x; this build: %zu, %08x)",
			 h.n_probes, h.catalog_hash, ct_catalog_size(), ct_catalog_hash());
		return -EINVAL;
	}
	buf = malloc(sizeof(*buf));
	if (!buf)
		return -ENOMEM;
	start = ftell(f);

	/* Pass 1: the processes (listed at the end, seen in records) and the clock. */
	while ((rc = next_frame(f, &fr, NULL, 0)) == 1) {
		if (fr.type == CT_REC_EVENT) {
			struct ct_hdr hdr;

			if (fr.len < sizeof(hdr))
				continue;
			if (fseek(f, -(long)fr.len, SEEK_CUR) ||
			    fread(&hdr, sizeof(hdr), 1, f) != 1 ||
			    fseek(f, (long)(fr.len - sizeof(hdr)), SEEK_CUR)) {
				rc = -1;
				break;
			}
			replay_proc(s, hdr.pid);
		} else if (fr.type == CT_REC_PROC || fr.type == CT_REC_END) {
			size_t need =
			    fr.type == CT_REC_PROC ? sizeof(struct ct_rec_proc) : sizeof(end);

			if (fr.len != need || fseek(f, -(long)fr.len, SEEK_CUR) ||
			    fread(buf->raw, need, 1, f) != 1) {
				rc = -1;
				break;
			}
			if (fr.type == CT_REC_END) {
				memcpy(&end, buf->raw, sizeof(end));
				have_end = true;
			} else {
				struct ct_rec_proc rp;
				struct ct_proc *p;

				memcpy(&rp, buf->raw, sizeof(rp));
				p = replay_proc(s, rp.pid);
				listed_first(s, p, &listed);
				if (p) {
					p->rank = rp.rank;
					p->world = rp.world;
					/* as live: the records do not change a recorded rank */
					p->comm_world =
					    rp.rank >= 0 && rp.rank_source == CT_REC_RANK_COMM
						? (rp.world > 0 ? rp.world : 1)
						: 0;
					p->rank_var =
					    rp.rank >= 0 && rp.rank_source >= CT_REC_RANK_ENV
						? ct_proc_rank_var(rp.rank_source - CT_REC_RANK_ENV)
						: NULL;
					memcpy(p->comm, rp.comm, sizeof(p->comm) - 1);
					p->comm[sizeof(p->comm) - 1] = 0;
					ct_str_sanitize(p->comm);
				}
			}
		}
	}
	st->truncated = rc < 0;
	if (have_end) {
		s->mono_to_wall_ns = end.mono_to_wall_ns;
		s->start_ns = end.start_ns;
		s->end_ns = end.end_ns;
		s->lost_procs = end.lost_procs;
		s->dropped_user = end.dropped_user;
		for (uint32_t k = 0; k < end.n_drops && k < CT_DROP_MAX; k++)
			s->drops[k] = end.drops[k];
	}

	/* Pass 2: the records, in order, through the live path. */
	if (fseek(f, start, SEEK_SET)) {
		free(buf);
		return -errno;
	}
	while ((rc = next_frame(f, &fr, buf->raw, sizeof(buf->raw))) == 1) {
		const struct ct_hdr *hdr = (const struct ct_hdr *)buf->raw;

		if (fr.type != CT_REC_EVENT) {
			st->bad += fr.type != CT_REC_PROC && fr.type != CT_REC_END;
			continue;
		}
		st->records++;
		st->bytes += fr.len;
		if (fr.len < sizeof(*hdr)) {
			s->events++;
			continue;
		}
		s->events++;
		switch (hdr->type) {
		case CT_EV_CALL: {
			const struct ct_call_event *call;
			const struct ct_func *fn;
			bool py = false;

			if (!ct_rec_call_ok(&buf->call, fr.len) ||
			    !(call = ct_calls_whole(s, &buf->call)))
				break;
			if (call != &buf->call)
				memcpy(&buf->call, call, CT_CALL_EVENT_SIZE(call->py.nframes));
			/*
			 * A stack is resolved by reading the live process: what the tracer made
			 * of it follows the record (CT_REC_PYCALL), or the call is replayed
			 * without it.
			 */
			fn = ct_catalog_func(buf->call.hdr.probe_id, NULL);
			/* an autograd ctx's stack was resolved into its module, not recorded */
			if (buf->call.py.nframes && fn && fn->kind != CT_K_AUTOGRAD_CTX) {
				py = next_pycall(f, buf->next, &buf->call, &buf->py, st);
				if (py) {
					st->stacks_replayed++;
				} else {
					st->stacks_skipped++;
					buf->call.py.nframes = 0;
					buf->call.py.flags = 0;
				}
			}
			ct_calls_on_call(s, &buf->call, py ? &buf->py.c : NULL);
			break;
		}
		case CT_EV_RET:
			if (ct_rec_ret_ok(fr.len))
				ct_calls_on_ret(s, &buf->ret);
			break;
		case CT_EV_OP:
		case CT_EV_OPEXIT:
			if (ct_rec_op_ok(&buf->op, fr.len))
				ct_calls_on_op(s, &buf->op);
			break;
		case CT_EV_BACKWARD:
		case CT_EV_BACKWARD_END:
			if (fr.len >= sizeof(struct ct_hdr))
				ct_calls_on_backward(s, &buf->op.hdr);
			break;
		case CT_EV_EXEC:
		case CT_EV_FORK:
		case CT_EV_EXIT:
		case CT_EV_DLOPEN:
			if (ct_rec_proc_ok(fr.len))
				replay_proc_event(s, &buf->proc);
			break;
		}
	}
	/* fseek() past the end succeeds: pass 2, which reads, finds a cut. */
	st->truncated |= rc < 0;
	free(buf);
	return 0;
}

static const char replay_usage[] =
    "Usage: commtrace-bpf replay FILE [--json F] [--chrome F] [--table F] [--noise-level N] "
    "[-q]\n"
    "Feed a --record FILE through the event path and the exporters, as if traced now.\n"
    "Python stacks replay as the tracer resolved them (recordings from this version on);\n"
    "older recordings' stacks are counted and left out.\n"
    "Prints the records per second on stderr.\n";

int ct_replay_main(int argc, char **argv)
{
	enum { OPT_JSON = 256, OPT_CHROME, OPT_TABLE, OPT_NOISE };
	static const struct option longopts[] = {
	    {"json", required_argument, NULL, OPT_JSON},
	    {"chrome", required_argument, NULL, OPT_CHROME},
	    {"table", required_argument, NULL, OPT_TABLE},
	    {"noise-level", required_argument, NULL, OPT_NOISE},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	struct ct_opts o = {0};
	struct ct_session s = {.opts = &o};
	struct ct_replay_stats st;
	char err[512];
	uint64_t t0, t1;
	int c, rc = CT_EXIT_OK, e;
	FILE *f;

	optind = 1;
	while ((c = getopt_long(argc, argv, "qh", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_JSON:
			o.json_path = optarg;
			break;
		case OPT_CHROME:
			o.chrome_path = optarg;
			break;
		case OPT_TABLE:
			o.table_path = optarg;
			break;
		case OPT_NOISE:
			if (ct_parse_noise_level(optarg, &o.noise_level))
				return CT_EXIT_USAGE;
			break;
		case 'q':
			o.quiet = true;
			break;
		case 'h':
			fputs(replay_usage, stdout);
			return 0;
		default:
			fputs(replay_usage, stderr);
			return CT_EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		fputs(replay_usage, stderr);
		return CT_EXIT_USAGE;
	}
	f = fopen(argv[optind], "re");
	if (!f) {
		fprintf(stderr, "commtrace-bpf replay: %s: %s\n", argv[optind], strerror(errno));
		return CT_EXIT_IO;
	}
	if (o.chrome_path) {
		struct ct_chrome_opts co = {.path = o.chrome_path, .max_bytes = 1024ULL << 20};

		e = ct_chrome_open(&s, &co);
		if (e) {
			fprintf(stderr, "commtrace-bpf replay: --chrome %s: %s\n", o.chrome_path,
				strerror(-e));
			fclose(f);
			return CT_EXIT_FAIL;
		}
	}
	t0 = ct_now_ns(CLOCK_MONOTONIC);
	e = ct_replay_file(&s, f, &st, err, sizeof(err));
	fclose(f);
	if (e) {
		fprintf(stderr, "commtrace-bpf replay: %s: %s\n", argv[optind],
			e == -EINVAL ? err : strerror(-e));
		rc = e == -EINVAL ? CT_EXIT_USAGE : CT_EXIT_FAIL;
	}
	t1 = ct_now_ns(CLOCK_MONOTONIC);
	if (s.chrome && ct_chrome_close(&s))
		rc = CT_EXIT_FAIL;
	if (!rc && ct_export_final(&s))
		rc = CT_EXIT_FAIL;
	if (!rc)
		fprintf(stderr,
			"replay: %llu records (%.1f MB) in %.3f s: %.0f records/s, %.1f MB/s "
			"(event path; exporters: %.3f s); python stacks replayed: %llu, not "
			"replayed: %llu%s\n",
			(unsigned long long)st.records, st.bytes / 1e6, (t1 - t0) / 1e9,
			st.records / ((t1 - t0 + 1) / 1e9), st.bytes / 1e6 / ((t1 - t0 + 1) / 1e9),
			(ct_now_ns(CLOCK_MONOTONIC) - t1) / 1e9,
			(unsigned long long)st.stacks_replayed,
			(unsigned long long)st.stacks_skipped,
			st.truncated ? "; the file is cut short" : "");
	ct_session_free(&s);
	ct_intern_free();
	return rc;
}
