// SPDX-License-Identifier: MIT
/*
 * `replay` of a recording's Python side (CT_REC_PYCALL, docs/record.md): a recorded
 * call with its resolved stack rebuilds the call tree exactly; a frame that does not
 * belong to the call before it, or that is malformed, is counted and left out.
 */
#include <stdlib.h>
#include "harness.h"
#include "commtrace/record.h"
#include "record/record.h"
#include "record/replay.h"
#include "targets.h"

#define PID 4242
#define TS  1000000

struct rec {
	char buf[4 * CT_REC_MAX_EVENT];
	size_t len;
};

static void frame(struct rec *r, __u32 type, const void *data, size_t len)
{
	struct ct_rec_frame fr = {.type = type, .len = (__u32)len};

	memcpy(r->buf + r->len, &fr, sizeof(fr));
	memcpy(r->buf + r->len + sizeof(fr), data, len);
	r->len += sizeof(fr) + len;
}

static void header(struct rec *r)
{
	struct ct_rec_header h = ct_record_header();

	memcpy(r->buf, &h, sizeof(h));
	r->len = sizeof(h);
}

/* MPI_Allreduce from a one-frame Python stack. */
static void call(struct rec *r)
{
	static struct ct_call_event ev;
	uint32_t id = ct_catalog_base(&ct_lib_mpi);

	while (strcmp(ct_lib_mpi.funcs[id - ct_catalog_base(&ct_lib_mpi)].name, "MPI_Allreduce"))
		id++;
	memset(&ev, 0, sizeof(ev));
	ev.hdr.type = CT_EV_CALL;
	ev.hdr.probe_id = (__u16)id;
	ev.hdr.pid = ev.hdr.tid = PID;
	ev.hdr.ts = TS;
	ev.py.nframes = 1;
	frame(r, CT_REC_EVENT, &ev, CT_CALL_EVENT_SIZE(1));
}

/* The tracer's view of that stack: (root) → fc2, under differentiable_all_reduce. */
static void pycall(struct rec *r, __u64 ts, __u16 npath, __u32 bad_name)
{
	static const char strs[] = "differentiable_all_reduce\0(root)\0fc2\0Block.forward\0mlp.py";
	char buf[512];
	struct ct_rec_pycall h = {
	    .pid = PID, .tid = PID, .ts = ts, .helper = 0, .npath = npath, .nstack = 1};
	struct ct_rec_pynode n[2] = {{.code = 1,
				      .self = 10,
				      .instr = 4,
				      .name = 26,
				      .src = CT_REC_NOSTR,
				      .dst = CT_REC_NOSTR,
				      .type = 1},
				     {.code = 2,
				      .self = 20,
				      .instr = 8,
				      .name = 33,
				      .src = CT_REC_NOSTR,
				      .dst = CT_REC_NOSTR,
				      .type = 1}};
	struct ct_rec_pyline l = {.qualname = 37, .file = 51, .line = 12};
	size_t at = sizeof(h) + 2 * sizeof(n[0]);

	if (bad_name)
		n[1].name = bad_name;
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), n, sizeof(n));
	memcpy(buf + at, &l, sizeof(l));
	memcpy(buf + at + sizeof(l), strs, sizeof(strs));
	frame(r, CT_REC_PYCALL, buf, at + sizeof(l) + sizeof(strs));
}

static int replay(struct rec *r, struct ct_session *s, struct ct_replay_stats *st)
{
	FILE *f = fmemopen(r->buf, r->len, "r");
	char err[256];
	int rc;

	if (!f)
		return -1;
	rc = ct_replay_file(s, f, st, err, sizeof(err));
	fclose(f);
	return rc;
}

TEST(replay_pycall)
{
	static struct rec r;
	struct ct_opts o = {0};
	struct ct_replay_stats st;

	if (ct_subtest("rebuilds_the_tree")) {
		struct ct_session s = {.opts = &o};
		const struct ct_node *nd;

		header(&r);
		call(&r);
		pycall(&r, TS, 2, 0);
		if (ASSERT_EQ(replay(&r, &s, &st), 0, "replay") &&
		    ASSERT_EQ(st.stacks_replayed, 1, "replayed") &&
		    ASSERT_EQ(st.stacks_skipped, 0, "skipped") && ASSERT_EQ(st.bad, 0, "bad") &&
		    ASSERT_EQ(s.n_procs, 1, "procs") && ASSERT_EQ(s.procs[0]->tree.n, 3, "nodes")) {
			nd = s.procs[0]->tree.nodes;
			ASSERT_STREQ(nd[0].name, "(root)", "root");
			ASSERT_STREQ(nd[1].name, "fc2", "module");
			ASSERT_EQ(nd[1].parent, 0, "fc2 under (root)");
			ASSERT_EQ(nd[2].type, CT_NODE_COLLECTIVE, "collective");
			ASSERT_STREQ(nd[2].name, "differentiable_all_reduce",
				     "named by the helper");
			ASSERT_STREQ(nd[2].function, "MPI_Allreduce", "function");
			ASSERT_EQ(nd[2].parent, 1, "under fc2");
			ASSERT_EQ(nd[2].nstack, 1, "stack lines");
			ASSERT_STREQ(nd[2].stack[0].qualname, "Block.forward", "qualname");
			ASSERT_STREQ(nd[2].stack[0].file, "mlp.py", "file");
			ASSERT_EQ(nd[2].stack[0].line, 12, "line");
		}
		ct_session_free(&s);
	}
	/* Each: the call replays without its stack (no tree node), the frame counted bad. */
	static const struct {
		const char *name;
		__u64 ts;
		__u16 npath;
		__u32 bad_name;
	} bad[] = {
	    {"another_call", TS + 1, 2, 0},
	    {"path_too_deep", TS, CT_REC_PY_MAX_PATH + 1, 0},
	    {"string_out_of_range", TS, 2, 100000},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ct_session s = {.opts = &o};

		if (!ct_subtest(bad[i].name))
			continue;
		header(&r);
		call(&r);
		pycall(&r, bad[i].ts, bad[i].npath, bad[i].bad_name);
		if (ASSERT_EQ(replay(&r, &s, &st), 0, "replay")) {
			ASSERT_EQ(st.stacks_replayed, 0, "replayed");
			ASSERT_EQ(st.stacks_skipped, 1, "skipped");
			ASSERT_EQ(st.bad, 1, "bad");
			ASSERT_EQ(s.procs[0]->tree.n, 0, "no tree node");
			ASSERT_EQ(s.procs[0]->calls, 1, "the call is counted");
		}
		ct_session_free(&s);
	}
	if (ct_subtest("orphan_and_old_recordings")) {
		struct ct_session s = {.opts = &o};

		header(&r);
		pycall(&r, TS, 2, 0); /* no call before it */
		call(&r);	      /* a call without one, as in older recordings */
		if (ASSERT_EQ(replay(&r, &s, &st), 0, "replay")) {
			ASSERT_EQ(st.bad, 1, "orphan");
			ASSERT_EQ(st.stacks_skipped, 1, "skipped");
			ASSERT_EQ(s.procs[0]->calls, 1, "counted");
		}
		ct_session_free(&s);
	}
}
