// SPDX-License-Identifier: MIT
/*
 * The CPython symbolizer against real interpreters: each one runs a small script that
 * prints what Python itself knows (id() of code objects, f_lasti and f_lineno of live
 * frames, a blocked thread's stack), and the test reads the same facts back from the
 * child with process_vm_readv: version detection, _PyRuntime, the generated offsets (by
 * walking the thread list and frames the way the BPF walker will), names and lines.
 * No root needed: a parent may read its child. An absent interpreter is skipped loudly.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "commtrace/pyoffsets.h"
#include "python/pyproc.h"
#include "python/linetable.h"
#include "laststack.h"
#include "python/symbolize.h"

/* Line numbers below are asserted: keep them in step with the script. */
static const char pysym_script[] =
    "import sys, threading\n"	/* 1 */
    "class Outer:\n"		/* 2 */
    "    def method(self):\n"	/* 3 */
    "        return 1\n"	/* 4 */
    "    class Inner:\n"	/* 5 */
    "        def deep(self):\n" /* 6 */
    "            return 2\n"	/* 7 */
    "def gen():\n"		/* 8 */
    "    x = 1\n"		/* 9 */
    "    yield x\n"		/* 10 */
    "    return 2\n"		/* 11 */
    "def blocker(ev, st):\n"	/* 12 */
    "    st.set()\n"		/* 13 */
    "    ev.wait()\n"		/* 14 */
    "def caf\xc3\xa9():\n"	/* 15: Latin-1 name (kind 1 str) */
    "    pass\n"		/* 16 */
    "def \xce\xa9mega():\n"	/* 17: UCS-2 name (kind 2 str) */
    "    pass\n"		/* 18 */
    "def celled(a):\n"		/* 19: its argument a cell */
    "    return lambda: a\n"	/* 20: its first local a free variable */
    "for f in (Outer.method, Outer.Inner.deep, gen, blocker, caf\xc3\xa9, \xce\xa9mega, celled,\n"
    "          celled(0)):\n"
    "    c = f.__code__\n"
    "    print('code', id(c), c.co_firstlineno)\n"
    "g = gen()\n"
    "next(g)\n"
    "fr = g.gi_frame\n"
    "print('gen', id(fr.f_code), fr.f_lasti, fr.f_lineno)\n"
    "ev, st = threading.Event(), threading.Event()\n"
    "t = threading.Thread(target=blocker, args=(ev, st), daemon=True)\n"
    "t.start()\n"
    "st.wait()\n"
    "f = sys._current_frames()[t.ident]\n"
    "n = 0\n"
    "while f is not None and n < 32:\n"
    "    print('tframe', id(f.f_code), f.f_lasti, f.f_lineno)\n"
    "    f, n = f.f_back, n + 1\n"
    "print('tid', getattr(t, 'native_id', 0))\n"
    "o, s = Outer(), 'caf\xc3\xa9 ' + str(len(sys.argv))\n"
    "print('obj', id(o), id(s))\n"
    "print('ready', flush=True)\n"
    "sys.stdin.read()\n";

#define PYSYM_NCODES	  8
#define PYSYM_MAX_TFRAMES 32
#define PYSYM_OUT_MAX	  16384

static const char *const pysym_qualnames[PYSYM_NCODES] = {
    "Outer.method", "Outer.Inner.deep",		"gen", "blocker", "caf\xc3\xa9", "?mega",
    "celled",	    "celled.<locals>.<lambda>",
};
static const char *const pysym_names310[PYSYM_NCODES] = {
    "method", "deep", "gen", "blocker", "caf\xc3\xa9", "?mega", "celled", "<lambda>",
};
static const int pysym_firstlines[PYSYM_NCODES] = {3, 6, 8, 12, 15, 17, 19, 20};
/* 3.11+: a first local that is neither a cell nor a free variable (none without a local) */
static const bool pysym_plain_first[PYSYM_NCODES] = {true,  true,  true,  true,
						     false, false, false, false};

struct pyfacts {
	pid_t pid;
	int in_fd, out_fd;
	uint64_t code[PYSYM_NCODES];
	int firstline[PYSYM_NCODES];
	uint64_t gen_code;
	long gen_lasti, gen_line;
	int ntf;
	uint64_t tf_code[PYSYM_MAX_TFRAMES];
	long tf_lasti[PYSYM_MAX_TFRAMES], tf_line[PYSYM_MAX_TFRAMES];
	unsigned long tid;
	uint64_t obj, str;
};

static void py_stop(struct pyfacts *f)
{
	if (f->in_fd >= 0)
		close(f->in_fd);
	if (f->out_fd >= 0)
		close(f->out_fd);
	if (f->pid > 0) {
		kill(f->pid, SIGKILL);
		waitpid(f->pid, NULL, 0);
	}
	f->pid = 0;
	f->in_fd = f->out_fd = -1;
}

/* Start python on the script; read its facts up to "ready" (10 s at most). */
static int py_start(const char *python, const char *script, struct pyfacts *f)
{
	static char out[PYSYM_OUT_MAX];
	int in[2], op[2], ncode = 0;
	size_t len = 0;
	char *line, *save;

	memset(f, 0, sizeof(*f));
	f->in_fd = f->out_fd = -1;
	if (pipe(in) || pipe(op))
		return -errno;
	f->pid = fork();
	if (f->pid < 0)
		return -errno;
	if (f->pid == 0) {
		char *argv[] = {(char *)python, "-I", (char *)script, NULL};

		dup2(in[0], 0);
		dup2(op[1], 1);
		close(in[1]);
		close(op[0]);
		execv(python, argv);
		_exit(127);
	}
	close(in[0]);
	close(op[1]);
	f->in_fd = in[1];
	f->out_fd = op[0];
	while (!strstr(out, "ready\n")) {
		struct pollfd p = {.fd = f->out_fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, 10000) <= 0 || len + 1 >= sizeof(out))
			return -ETIMEDOUT;
		n = read(f->out_fd, out + len, sizeof(out) - 1 - len);
		if (n <= 0)
			return -EIO;
		len += (size_t)n;
		out[len] = '\0';
	}
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long a, b;
		long x, y;

		if (sscanf(line, "code %llu %ld", &a, &x) == 2 && ncode < PYSYM_NCODES) {
			f->code[ncode] = a;
			f->firstline[ncode++] = (int)x;
		} else if (sscanf(line, "gen %llu %ld %ld", &a, &x, &y) == 3) {
			f->gen_code = a;
			f->gen_lasti = x;
			f->gen_line = y;
		} else if (sscanf(line, "tframe %llu %ld %ld", &a, &x, &y) == 3 &&
			   f->ntf < PYSYM_MAX_TFRAMES) {
			f->tf_code[f->ntf] = a;
			f->tf_lasti[f->ntf] = x;
			f->tf_line[f->ntf++] = y;
		} else if (sscanf(line, "tid %llu", &a) == 1) {
			f->tid = (unsigned long)a;
		} else if (sscanf(line, "obj %llu %llu", &a, &b) == 2) {
			f->obj = a;
			f->str = b;
		}
	}
	return ncode == PYSYM_NCODES && f->ntf > 0 ? 0 : -EPROTO;
}

/* The raw instruction value a frame walker reads, from Python's f_lasti (bytes). */
static uint64_t raw_instr(const struct ct_py_offsets *o, uint64_t code, long f_lasti)
{
	if (o->instr_is_index)
		return (uint64_t)(uint32_t)(int32_t)(f_lasti < 0 ? -1 : f_lasti / 2);
	return code + o->code_adaptive + (uint64_t)f_lasti; /* f_lasti -1: start - 1 */
}

static uint64_t rd(pid_t pid, uint64_t addr)
{
	uint64_t v = 0;

	ct_py_read_mem(pid, addr, &v, sizeof(v));
	return v;
}

/*
 * What the BPF walker will do: _PyRuntime -> interpreter -> thread list -> frame chain.
 * Fills code/instr of the thread whose innermost code object is want (or whose native
 * thread id is tid, where the version has one); returns the frame count or -1.
 */
static int walk_threads(pid_t pid, const struct ct_pyproc *p, unsigned long tid, uint64_t want,
			uint64_t *code, uint64_t *instr, int max)
{
	const struct ct_py_offsets *o = &p->offsets;
	uint64_t interp = rd(pid, p->runtime_addr + o->runtime_interp_head);
	uint64_t ts = rd(pid, interp + o->interp_threads_head);

	for (int t = 0; ts && t < CT_PY_MAX_THREADS; t++, ts = rd(pid, ts + o->tstate_next)) {
		uint64_t fr = rd(pid, ts + o->tstate_frame);
		int n = 0;

		if (o->tstate_native_tid != CT_PY_NONE && rd(pid, ts + o->tstate_native_tid) != tid)
			continue;
		if (o->cframe_current_frame != CT_PY_NONE)
			fr = rd(pid, fr + o->cframe_current_frame);
		for (int i = 0; fr && i < CT_PY_MAX_FRAMES && n < max; i++) {
			uint8_t owner = 0;

			if (o->frame_owner != CT_PY_NONE)
				ct_py_read_mem(pid, fr + o->frame_owner, &owner, 1);
			if (o->owner_cstack == 0xff || owner != o->owner_cstack) {
				code[n] = rd(pid, fr + o->frame_code);
				instr[n] = rd(pid, fr + o->frame_instr);
				if (o->instr_is_index)
					instr[n] = (uint32_t)instr[n];
				n++;
			}
			fr = rd(pid, fr + o->frame_previous);
		}
		if (n && code[0] == want)
			return n;
	}
	return -1;
}

static void check_interpreter(const char *label, const char *python, int minor,
			      const char *file_base)
{
	char script[512], sym[128];
	struct ct_pysym_stats st;
	struct ct_pysym_cache *c, *since = NULL;
	struct ct_pyframe fr;
	struct ct_pyproc *p;
	struct pyfacts f;
	const char *base;
	pid_t pid;
	int err, n;

	if (access(python, X_OK)) {
		fprintf(stderr, "  SKIP %s: %s is not installed\n", label, python);
		return;
	}
	ct_subtest(label);
	snprintf(script, sizeof(script), "%s/pysym_target.py", ct_test_tmpdir());
	{
		FILE *fp = fopen(script, "w");

		if (!fp) {
			ASSERT_OK(-errno, "write script");
			return;
		}
		fputs(pysym_script, fp);
		fclose(fp);
	}
	err = py_start(python, script, &f);
	if (!ASSERT_OK(err, "start interpreter")) {
		py_stop(&f);
		return;
	}
	p = calloc(1, sizeof(*p));
	c = ct_pysym_cache_new(0);
	if (!ASSERT_NOT_NULL(p, "alloc") || !ASSERT_NOT_NULL(c, "cache"))
		goto out;

	err = ct_py_detect(f.pid, p);
	if (err == -EPERM) {
		fprintf(stderr, "  SKIP %s: process_vm_readv on a child refused (ptrace_scope?)\n",
			label);
		goto out;
	}
	if (!ASSERT_OK(err, "ct_py_detect"))
		goto out;
	ASSERT_EQ(p->major, 3, "major");
	ASSERT_EQ(p->minor, minor, "minor");
	base = strrchr(p->path, '/');
	ASSERT_STREQ(base ? base + 1 : p->path, file_base, "interpreter file");
	ASSERT_EQ(p->offsets.minor, minor, "offsets table");
	if (minor >= 11)
		ASSERT_EQ(p->version_hex >> 16, 0x0300 | (uint64_t)minor, "Py_Version");
	if (minor >= 13) {
		ASSERT_TRUE(p->from_debug, "_Py_DebugOffsets read");
		ASSERT_EQ(p->debug_mismatches, 0, "generated offsets == _Py_DebugOffsets");
	}
	if (minor >= 13) {
		/* As if this were a newer, unknown version: the offsets from the block alone. */
		const struct ct_py_debug_layout *l = ct_py_debug_layout_for(3, minor);
		unsigned char dbg[1024];
		struct ct_pyproc *u = calloc(1, sizeof(*u));

		if (ASSERT_NOT_NULL(u, "alloc") && ASSERT_LE(l->size, sizeof(dbg), "layout") &&
		    ASSERT_OK(ct_py_read_mem(f.pid, p->runtime_addr, dbg, l->size), "read")) {
			u->major = 3;
			u->minor = minor;
			ASSERT_OK(ct_py_apply_debug_offsets(dbg, l->size, false, u), "apply");
			u->offsets.owner_cstack = p->offsets.owner_cstack; /* not carried */
			/* not carried either, and not needed with native_thread_id */
			if (!ASSERT_EQ(u->offsets.tstate_thread_id, CT_PY_NONE, "thread_id unset"))
				return;
			u->offsets.tstate_thread_id = p->offsets.tstate_thread_id;
			/* nor the frame's function: no looking through wrappers (--ops) */
			if (!ASSERT_EQ(u->offsets.frame_func, CT_PY_NONE, "frame_func unset"))
				return;
			u->offsets.frame_func = p->offsets.frame_func;
			/* nor what tells a code object from a reuse: no stack is trusted as known
			 */
			if (!ASSERT_EQ(u->offsets.code_version, CT_PY_NONE, "code_version unset") ||
			    !ASSERT_EQ(u->offsets.unicode_hash, CT_PY_NONE, "unicode_hash unset"))
				return;
			u->offsets.code_version = p->offsets.code_version;
			u->offsets.unicode_hash = p->offsets.unicode_hash;
			/* nor the locals' kinds: every first local is looked into */
			if (!ASSERT_EQ(u->offsets.code_localspluskinds, CT_PY_NONE, "kinds unset"))
				return;
			u->offsets.code_localspluskinds = p->offsets.code_localspluskinds;
			u->offsets.fast_cell_kinds = p->offsets.fast_cell_kinds;
			ASSERT_OK(memcmp(&u->offsets, &p->offsets, sizeof(u->offsets)),
				  "offsets from _Py_DebugOffsets == generated");
			dbg[0] = 'X';
			ASSERT_EQ(ct_py_apply_debug_offsets(dbg, l->size, false, u), -ENODATA,
				  "bad cookie");
			dbg[0] = 'x';
			memset(dbg + l->tstate_size, 0, 8);
			ASSERT_EQ(ct_py_apply_debug_offsets(dbg, l->size, false, u), -EPROTO,
				  "a section size of 0");
		}
		free(u);
	}
	/* _PyRuntime.interpreters.head is the main interpreter: its threads exist. */
	ASSERT_NEQ(rd(f.pid, p->runtime_addr + p->offsets.runtime_interp_head), 0, "interp head");

	for (int i = 0; i < PYSYM_NCODES; i++) {
		err = ct_py_symbolize(c, f.pid, &p->offsets, f.code[i], 0, &fr);
		if (!ASSERT_OK(err, "symbolize code"))
			continue;
		ASSERT_STREQ(fr.qualname, minor == 10 ? pysym_names310[i] : pysym_qualnames[i],
			     "qualname");
		ASSERT_STREQ(fr.filename, script, "filename");
		ASSERT_EQ(fr.firstlineno, pysym_firstlines[i], "co_firstlineno");
		ASSERT_EQ(f.firstline[i], pysym_firstlines[i], "script's own firstlineno");
		ASSERT_EQ(fr.plain_first, minor >= 11 && pysym_plain_first[i], "plain first local");
	}

	/* A generator suspended at its yield on line 10: Python's f_lasti and f_lineno. */
	ASSERT_EQ(f.gen_line, 10, "python's generator line");
	err = ct_py_symbolize(c, f.pid, &p->offsets, f.gen_code,
			      raw_instr(&p->offsets, f.gen_code, f.gen_lasti), &fr);
	if (ASSERT_OK(err, "symbolize generator")) {
		ASSERT_STREQ(fr.qualname, "gen", "generator name");
		ASSERT_EQ(fr.line, 10, "generator line");
	}
	/* Before the first instruction: the first line. */
	err = ct_py_symbolize(c, f.pid, &p->offsets, f.code[2],
			      raw_instr(&p->offsets, f.code[2], -1), &fr);
	if (ASSERT_OK(err, "symbolize unstarted"))
		ASSERT_EQ(fr.line, 8, "line before the first instruction");

	/* The blocked thread's stack as the frame walker will see it. */
	{
		uint64_t code[PYSYM_MAX_TFRAMES], instr[PYSYM_MAX_TFRAMES];

		n = walk_threads(f.pid, p, f.tid, f.tf_code[0], code, instr, PYSYM_MAX_TFRAMES);
		if (ASSERT_EQ(n, f.ntf, "frames walked == python's frames")) {
			for (int i = 0; i < n; i++) {
				ASSERT_EQ(code[i], f.tf_code[i], "frame code");
				ASSERT_EQ(instr[i], raw_instr(&p->offsets, code[i], f.tf_lasti[i]),
					  "frame instruction");
				err =
				    ct_py_symbolize(c, f.pid, &p->offsets, code[i], instr[i], &fr);
				if (ASSERT_OK(err, "symbolize frame"))
					ASSERT_EQ(fr.line, f.tf_line[i], "frame line");
			}
			/* Innermost: threading's wait; then blocker() at its ev.wait() call. */
			err = ct_py_symbolize(c, f.pid, &p->offsets, code[n > 2 ? 2 : 0],
					      instr[n > 2 ? 2 : 0], &fr);
			if (ASSERT_OK(err, "blocker frame")) {
				ASSERT_STREQ(fr.qualname, "blocker", "third frame");
				ASSERT_EQ(fr.line, 14, "blocker line");
			}
		}
	}

	/* Cache: everything above again, only hits; no evictions at this size. */
	{
		struct ct_pysym_stats before;

		ct_pysym_cache_stats(c, &before);
		for (int i = 0; i < PYSYM_NCODES; i++)
			ct_py_symbolize(c, f.pid, &p->offsets, f.code[i], 0, &fr);
		ct_pysym_cache_stats(c, &st);
		ASSERT_EQ(st.hits - before.hits, PYSYM_NCODES, "hits");
		ASSERT_EQ(st.misses, before.misses, "no new misses");
		ASSERT_EQ(st.evictions, 0, "evictions");
		ASSERT_EQ(st.stale, 0, "stale");
		ASSERT_EQ(st.errors, 0, "errors");
		ASSERT_EQ(st.entries, st.misses, "one entry per miss");
		ASSERT_GT(st.line_bytes, 0, "line tables cached");
	}

	err = ct_py_read_type_name(f.pid, &p->offsets, f.obj, sym, sizeof(sym));
	if (ASSERT_OK(err, "type name"))
		ASSERT_STREQ(sym, "Outer", "tp_name of an instance");
	err = ct_py_read_str(f.pid, &p->offsets, f.str, sym, sizeof(sym));
	if (ASSERT_OK(err, "read str"))
		ASSERT_STREQ(sym, "caf\xc3\xa9 1", "latin-1 str as UTF-8");
	err = ct_py_read_str(f.pid, &p->offsets, f.str, sym, 5);
	if (ASSERT_OK(err, "read str truncated"))
		ASSERT_STREQ(sym, "caf", "truncated on a character boundary");
	ASSERT_EQ(ct_py_read_str(f.pid, &p->offsets, f.obj, sym, sizeof(sym)), -EINVAL,
		  "a non-str object");
	ASSERT_EQ(ct_py_symbolize(c, f.pid, &p->offsets, f.obj, 0, &fr), -EINVAL,
		  "a non-code object");

	/* A small cache evicts (clock): 6 distinct code objects through 2 slots. */
	{
		struct ct_pysym_cache *small = ct_pysym_cache_new(2);

		if (ASSERT_NOT_NULL(small, "small cache")) {
			for (int i = 0; i < PYSYM_NCODES; i++)
				ct_py_symbolize(small, f.pid, &p->offsets, f.code[i], 0, &fr);
			ct_pysym_cache_stats(small, &st);
			ASSERT_EQ(st.misses, PYSYM_NCODES, "small: misses");
			ASSERT_EQ(st.evictions, PYSYM_NCODES - 2, "small: evictions");
			ASSERT_EQ(st.entries, 2, "small: entries");
			ct_pysym_cache_forget_pid(small, f.pid);
			ct_pysym_cache_stats(small, &st);
			ASSERT_EQ(st.entries, 0, "small: forgotten");
			ASSERT_EQ(st.line_bytes, 0, "small: line tables freed");
			ct_pysym_cache_free(small);
		}
	}
	/*
	 * Frames as BPF sends them, each with which object it ran (its ident): the object at
	 * the address now is named only where it is that one; another object's ident, or one
	 * BPF could not read at the call (CT_PY_IDENT_UNREAD), leaves the frame unnamed,
	 * counted.
	 */
	{
		struct ct_pysym_cache *rc_cache = ct_pysym_cache_new(16);
		struct ct_pyframe_raw raw[4] = {{.code = f.code[0]}, {.code = f.code[1]}};
		struct ct_pyframe outs[4];
		int rcs[4];

		if (ASSERT_NOT_NULL(rc_cache, "ident cache") &&
		    ASSERT_OK(ct_py_symbolize(rc_cache, f.pid, &p->offsets, f.code[0], 0, &fr),
			      "ident: first read")) {
			raw[0].ident = fr.known.ident;
			raw[1].ident = CT_PY_IDENT_UNREAD;
			raw[2] = raw[0];
			raw[2].ident = fr.known.ident ^ 1; /* another object's */
			raw[3] = raw[0];
			raw[3].ident = 0; /* nothing to check by: named */
			ct_py_symbolize_many(rc_cache, f.pid, &p->offsets, raw, 4, false, outs,
					     rcs);
			ASSERT_NEQ(fr.known.ident, 0, "the code object has an ident");
			ASSERT_OK(rcs[0], "ident: its own");
			ASSERT_STREQ(outs[0].qualname,
				     minor == 10 ? pysym_names310[0] : pysym_qualnames[0],
				     "ident: named");
			ASSERT_EQ(rcs[1], -ESTALE, "ident: unreadable at the call");
			ASSERT_EQ(rcs[2], -ESTALE, "ident: another object's");
			ASSERT_OK(rcs[3], "ident: none");
			ct_pysym_cache_stats(rc_cache, &st);
			ASSERT_EQ(st.unread, 1, "unread counted");
			ASSERT_EQ(st.reused, 1, "reused counted");
		}
		ct_pysym_cache_free(rc_cache);
	}
	/*
	 * A thread's stacks named in turn (laststack.h): in a stack checked in BPF, the
	 * outermost frames that are, word for word, the thread's last stack's keep its names;
	 * the others, and every frame of a stack not checked, are named by the symbolizer.
	 */
	{
		struct ct_pysym_cache *nc = ct_pysym_cache_new(16);
		struct ct_last_stacks *ns = NULL;
		struct ct_pyframe_raw raw[3];
		const struct ct_pyframe *named;
		const int *rcs;

#define NAMED(tid, from, n, checked)                                                               \
	ct_last_stack_named(&ns, nc, f.pid, tid, &p->offsets, raw + (from), n, checked, &named,    \
			    &rcs)
#define NAME_OF(i) (minor == 10 ? pysym_names310[i] : pysym_qualnames[i])
		for (int i = 0; i < 3; i++) /* innermost first */
			raw[i] = (struct ct_pyframe_raw){.code = f.code[i]};
		if (ASSERT_NOT_NULL(nc, "named: cache")) {
			ASSERT_EQ(NAMED(1, 0, 3, true), 0, "named: a thread's first stack");
			ASSERT_EQ(named[0].fresh, 1, "named: BPF is to be told of it");
			ASSERT_EQ(NAMED(1, 0, 3, true), 3, "named: the same stack again");
			for (int i = 0; i < 3; i++) {
				ASSERT_OK(rcs[i], "named: repeated");
				ASSERT_STREQ(named[i].qualname, NAME_OF(i), "named: its own name");
				ASSERT_EQ(named[i].fresh, 0, "named: BPF was told of it before");
			}
			ASSERT_EQ(NAMED(2, 0, 3, true), 0, "named: another thread's first stack");
			ASSERT_EQ(NAMED(1, 0, 3, false), 0, "named: a stack not checked in BPF");
			raw[0].instr = 8; /* the innermost frame elsewhere */
			ASSERT_EQ(NAMED(1, 0, 3, true), 2, "named: the innermost frame moved");
			ASSERT_STREQ(named[0].qualname, NAME_OF(0), "named: the innermost, again");
			ASSERT_EQ(NAMED(1, 1, 2, true), 2,
				  "named: a shorter stack, the same outside");
			ASSERT_STREQ(named[0].qualname, NAME_OF(1), "named: moved in");
			ASSERT_STREQ(named[1].qualname, NAME_OF(2), "named: the outermost");
			ASSERT_EQ(NAMED(1, 0, 3, true), 2, "named: deeper again");
			for (int i = 0; i < 3; i++)
				ASSERT_STREQ(named[i].qualname, NAME_OF(i), "named: moved out");
			raw[1].ident = CT_PY_IDENT_UNREAD;
			NAMED(1, 0, 3, true);
			ASSERT_EQ(
			    NAMED(1, 0, 3, true), 1,
			    "named: a frame left unnamed is not repeated, nor what is inside it");
			ASSERT_EQ(rcs[1], -ESTALE, "named: still unnamed");
		}
#undef NAME_OF
#undef NAMED
		ct_last_stacks_free(ns);
		ct_pysym_cache_free(nc);
	}
	/*
	 * ct_py_symbolize_since: while the deaths count is the one of its last read, a code
	 * object is named from the cache without reading the process (here: gone by then).
	 */
	since = ct_pysym_cache_new(16);
	if (ASSERT_NOT_NULL(since, "since cache") &&
	    ASSERT_OK(ct_py_symbolize_since(since, f.pid, &p->offsets, f.code[0], 0, 7, &fr),
		      "since: first read"))
		ASSERT_STREQ(fr.qualname, minor == 10 ? pysym_names310[0] : pysym_qualnames[0],
			     "since: qualname");
out:
	ct_pysym_cache_free(c);
	pid = f.pid;
	py_stop(&f);
	if (since && pid > 0) {
		memset(&fr, 0, sizeof(fr));
		if (ASSERT_OK(ct_py_symbolize_since(since, pid, &p->offsets, f.code[0], 0, 7, &fr),
			      "since: same count, the process gone"))
			ASSERT_STREQ(fr.qualname,
				     minor == 10 ? pysym_names310[0] : pysym_qualnames[0],
				     "since: named from the cache");
		ASSERT_NEQ(ct_py_symbolize_since(since, pid, &p->offsets, f.code[0], 0, 8, &fr), 0,
			   "since: a code object died since: read again, and the process is gone");
		ASSERT_NEQ(ct_py_symbolize(since, pid, &p->offsets, f.code[0], 0, &fr), 0,
			   "ct_py_symbolize reads every time");
	}
	ct_pysym_cache_free(since);
	free(p);
}

static const char *pyenv_python(char *buf, size_t len, const char *ver, const char *exe)
{
	const char *root = getenv("PYENV_ROOT");

	snprintf(buf, len, "%s/versions/%s/bin/%s", root ? root : "/root/.pyenv", ver, exe);
	return buf;
}

TEST(pysym_cpython_3_10)
{
	char b[512];

	check_interpreter("pyenv 3.10", pyenv_python(b, sizeof(b), "3.10.13", "python3.10"), 10,
			  "libpython3.10.so.1.0");
}

TEST(pysym_cpython_3_11)
{
	char b[512];

	check_interpreter("pyenv 3.11", pyenv_python(b, sizeof(b), "3.11.7", "python3.11"), 11,
			  "libpython3.11.so.1.0");
}

TEST(pysym_cpython_3_11_debian)
{
	/* Non-PIE, libpython linked in: _PyRuntime in the executable's .dynsym. */
	check_interpreter("debian 3.11", "/usr/bin/python3.11", 11, "python3.11");
}

TEST(pysym_cpython_3_12)
{
	char b[512];

	check_interpreter("pyenv 3.12", pyenv_python(b, sizeof(b), "3.12.1", "python3.12"), 12,
			  "libpython3.12.so.1.0");
}

TEST(pysym_cpython_3_13)
{
	char b[512];

	check_interpreter("pyenv 3.13", pyenv_python(b, sizeof(b), "3.13.0", "python3.13"), 13,
			  "libpython3.13.so.1.0");
}

/* A version without tables nor debug offsets: a notice, not a failure. */
TEST(pysym_detect_unknown_version)
{
	char b[512];
	const char *python = pyenv_python(b, sizeof(b), "3.9.18", "python3.9");
	char *argv[] = {(char *)python, "-I", "-c", "import sys; sys.stdin.read()", NULL};
	struct ct_pyproc *p;
	int in[2], err = -1;
	pid_t pid;

	if (access(python, X_OK)) {
		fprintf(stderr, "  SKIP: %s is not installed\n", python);
		return;
	}
	p = calloc(1, sizeof(*p));
	if (!ASSERT_NOT_NULL(p, "alloc") || !ASSERT_OK(pipe(in), "pipe")) {
		free(p);
		return;
	}
	pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		close(in[1]);
		execv(python, argv);
		_exit(127);
	}
	close(in[0]);
	/* Until libpython3.9 is mapped (bounded: 5 s). */
	for (int i = 0; i < 500; i++) {
		err = ct_py_detect(pid, p);
		if (err != -ENOENT)
			break;
		usleep(10000);
	}
	ASSERT_EQ(err, -ENOTSUP, "unknown version");
	ASSERT_EQ(p->minor, 9, "minor from the file name");
	ASSERT_TRUE(strstr(p->notice, "CPython 3.9 in ") != NULL, "notice names the version");
	ASSERT_TRUE(strstr(p->notice, "no Python stacks") != NULL, "notice says the outcome");
	close(in[1]);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	free(p);
}

TEST(pysym_parse_name)
{
	char flags[8];
	bool lib;
	int ma, mi;

	ASSERT_OK(ct_py_parse_name("libpython3.11.so.1.0", &ma, &mi, &lib, flags, sizeof(flags)),
		  "lib");
	ASSERT_TRUE(lib && ma == 3 && mi == 11 && !flags[0], "lib fields");
	ASSERT_OK(ct_py_parse_name("libpython3.13t.so", &ma, &mi, &lib, flags, sizeof(flags)),
		  "free-threaded lib");
	ASSERT_STREQ(flags, "t", "abi flags");
	ASSERT_OK(ct_py_parse_name("python3.12", &ma, &mi, &lib, flags, sizeof(flags)), "exe");
	ASSERT_TRUE(!lib && mi == 12, "exe fields");
	ASSERT_EQ(ct_py_parse_name("python3.12-config", &ma, &mi, &lib, flags, sizeof(flags)),
		  -EINVAL, "not an interpreter");
	ASSERT_EQ(ct_py_parse_name("libpython3.so", &ma, &mi, &lib, flags, sizeof(flags)), -EINVAL,
		  "stable-ABI stub");
	ASSERT_EQ(ct_py_parse_name("python3", &ma, &mi, &lib, flags, sizeof(flags)), -EINVAL,
		  "no minor");
}

/* Hand-made tables in both formats, including the varint forms of 3.11+. */
TEST(pysym_linetable)
{
	/* 3.10: [0,6) line +0 -> 5, [6,10) line +2 -> 7, [10,12) no line, [12,20) -1 -> 6. */
	static const uint8_t t310[] = {6, 0, 4, 2, 2, (uint8_t)-128, 8, (uint8_t)-1};
	/*
	 * 3.11+: one-line form (code 11: +1) for 2 units; short form (code 0) for 3 units;
	 * no-location (15) for 1 unit; long form (14) of line delta -3 (varint 7) for 1 unit;
	 * line-only (13) of delta +40 from 3 (varint 80 = 0x50: 0x10 | continuation 0x40, then 1).
	 */
	static const uint8_t t311[] = {0x80 | 11 << 3 | 1,
				       5,
				       9,
				       0x80 | 0 << 3 | 2,
				       0x12,
				       0x80 | 15 << 3 | 0,
				       0x80 | 14 << 3 | 0,
				       7,
				       0,
				       1,
				       2,
				       0x80 | 13 << 3 | 0,
				       0x50,
				       1};

	ASSERT_EQ(ct_py_linetable_line(10, t310, sizeof(t310), 5, -1), 5, "310 unstarted");
	ASSERT_EQ(ct_py_linetable_line(10, t310, sizeof(t310), 5, 2), 5, "310 byte 4");
	ASSERT_EQ(ct_py_linetable_line(10, t310, sizeof(t310), 5, 3), 7, "310 byte 6");
	ASSERT_EQ(ct_py_linetable_line(10, t310, sizeof(t310), 5, 5), -1, "310 no line");
	ASSERT_EQ(ct_py_linetable_line(10, t310, sizeof(t310), 5, 9), 6, "310 byte 18");
	ASSERT_EQ(ct_py_linetable_line(10, t310, sizeof(t310), 5, 10), -1, "310 past end");
	ASSERT_EQ(ct_py_linetable_line(11, t311, sizeof(t311), 5, 0), 6, "311 one-line");
	ASSERT_EQ(ct_py_linetable_line(11, t311, sizeof(t311), 5, 1), 6, "311 one-line 2nd");
	ASSERT_EQ(ct_py_linetable_line(11, t311, sizeof(t311), 5, 4), 6, "311 short");
	ASSERT_EQ(ct_py_linetable_line(11, t311, sizeof(t311), 5, 5), -1, "311 none");
	ASSERT_EQ(ct_py_linetable_line(11, t311, sizeof(t311), 5, 6), 3, "311 long");
	ASSERT_EQ(ct_py_linetable_line(11, t311, sizeof(t311), 5, 7), 43, "311 varint");
	ASSERT_EQ(ct_py_linetable_line(11, t311, sizeof(t311), 5, 8), -1, "311 past end");
	ASSERT_EQ(ct_py_linetable_line(11, t311 + 1, sizeof(t311) - 1, 5, 0), -1, "311 no sync");
}
