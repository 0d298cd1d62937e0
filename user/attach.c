// SPDX-License-Identifier: MIT
/*
 * BPF lifecycle: open → configure (rodata, map sizes) → load → fill the probe
 * specs → attach the tracepoints → attach uprobes as libraries are found →
 * poll → one cleanup path.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "commtrace.skel.h"
#include "catalog/catalog.h"
#include "session.h"
#include "util/log.h"

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	/* Warnings always (the verifier log arrives as one); debug only with -vv. */
	if (level == LIBBPF_DEBUG && ct_verbose < 2)
		return 0;
	if (level == LIBBPF_INFO && ct_verbose < 1)
		return 0;
	return vfprintf(stderr, fmt, args);
}

static bool has_cap(int cap)
{
	char line[256];
	unsigned long long eff = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return cap < 64 && (eff >> cap) & 1;
}

const char *ct_bpf_unavailable_reason(void)
{
	/* capability numbers from linux/capability.h */
	const int cap_sys_admin = 21, cap_perfmon = 38, cap_bpf = 39, cap_sys_ptrace = 19;

	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
		return "the kernel has no BTF (/sys/kernel/btf/vmlinux): CONFIG_DEBUG_INFO_BTF=y "
		       "is "
		       "needed";
	if (!has_cap(cap_bpf) && !has_cap(cap_sys_admin))
		return "missing CAP_BPF (or CAP_SYS_ADMIN): run as root, or grant "
		       "cap_bpf,cap_perfmon,cap_sys_ptrace";
	if (!has_cap(cap_perfmon) && !has_cap(cap_sys_admin))
		return "missing CAP_PERFMON (or CAP_SYS_ADMIN), needed to attach uprobes: run as "
		       "root, or grant cap_bpf,cap_perfmon,cap_sys_ptrace";
	if (!has_cap(cap_sys_ptrace))
		return "missing CAP_SYS_PTRACE, needed to read the target's mappings and memory: "
		       "run as root, or grant cap_bpf,cap_perfmon,cap_sys_ptrace";
	return NULL;
}

/*
 * uprobe_multi links (Linux 6.6+), created with the bpf syscall: this libbpf (1.1)
 * predates them. The fields are union bpf_attr's link_create as of Linux 6.6.
 */
#define CT_TRACE_UPROBE_MULTI	 48 /* enum bpf_attach_type: BPF_TRACE_UPROBE_MULTI */
#define CT_TRACE_UPROBE_SESSION	 57 /* BPF_TRACE_UPROBE_SESSION (Linux 6.13) */
#define CT_F_UPROBE_MULTI_RETURN 1U /* BPF_F_UPROBE_MULTI_RETURN */

struct uprobe_multi_attr {
	__u32 prog_fd, target_fd, attach_type, flags;
	__u64 path, offsets, ref_ctr_offsets, cookies;
	__u32 cnt, multi_flags, pid;
};

static int uprobe_multi_link(int prog_fd, __u32 type, const char *path, const uint64_t *offs,
			     const uint64_t *cookies, size_t n, bool ret, __u32 pid)
{
	struct uprobe_multi_attr a;
	long fd;

	memset(&a, 0, sizeof(a));
	a.prog_fd = (__u32)prog_fd;
	a.attach_type = type;
	a.path = (__u64)(uintptr_t)path;
	a.offsets = (__u64)(uintptr_t)offs;
	a.cookies = (__u64)(uintptr_t)cookies;
	a.cnt = (__u32)n;
	a.multi_flags = ret ? CT_F_UPROBE_MULTI_RETURN : 0;
	a.pid = pid;
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));
	return fd < 0 ? -errno : (int)fd;
}

/*
 * Whether the kernel has uprobe_multi links with process-wide PID filtering (as libbpf
 * probes it): a link on a directory is refused with EBADF once its other fields pass,
 * and a negative pid with EINVAL first where the PID filter is the fixed, process-wide
 * one (the first kernels with uprobe_multi filtered by thread).
 */
static bool probe_uprobe_multi(void)
{
	const struct bpf_insn insns[] = {
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	LIBBPF_OPTS(bpf_prog_load_opts, po, .expected_attach_type = CT_TRACE_UPROBE_MULTI);
	const char *env = getenv("COMMTRACE_UPROBE_MULTI");
	uint64_t off = 0;
	int prog, fd;
	bool ok;

	if (env && !strcmp(env, "0"))
		return false;
	prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "ct_probe_multi", "GPL", insns, ARRAY_LEN(insns),
			     &po);
	if (prog < 0)
		return false;
	fd = uprobe_multi_link(prog, CT_TRACE_UPROBE_MULTI, "/", &off, NULL, 1, false, 0);
	ok = fd == -EBADF;
	if (ok) {
		fd = uprobe_multi_link(prog, CT_TRACE_UPROBE_MULTI, "/", &off, NULL, 1, false,
				       (__u32)-1);
		ok = fd == -EINVAL;
	}
	if (fd >= 0)
		close(fd);
	close(prog);
	return ok;
}

/*
 * Whether the kernel has uprobe sessions (Linux 6.13+): a program calling
 * bpf_session_is_return loads as one, and a session link on a directory is refused with
 * EBADF once its other fields pass.
 */
static bool probe_uprobe_session(void)
{
	const char *env = getenv("COMMTRACE_UPROBE_SESSION");
	struct btf *vmlinux;
	uint64_t off = 0;
	int id, prog, fd;

	if (env && !strcmp(env, "0"))
		return false;
	vmlinux = btf__load_vmlinux_btf();
	if (!vmlinux)
		return false;
	id = btf__find_by_name_kind(vmlinux, "bpf_session_is_return", BTF_KIND_FUNC);
	btf__free(vmlinux);
	if (id <= 0)
		return false;
	{
		const struct bpf_insn insns[] = {
		    {.code = BPF_JMP | BPF_CALL, .src_reg = BPF_PSEUDO_KFUNC_CALL, .imm = id},
		    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
		    {.code = BPF_JMP | BPF_EXIT},
		};
		LIBBPF_OPTS(bpf_prog_load_opts, po,
			    .expected_attach_type = CT_TRACE_UPROBE_SESSION);

		prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "ct_probe_sess", "GPL", insns,
				     ARRAY_LEN(insns), &po);
	}
	if (prog < 0)
		return false;
	fd = uprobe_multi_link(prog, CT_TRACE_UPROBE_SESSION, "/", &off, NULL, 1, false, 0);
	if (fd >= 0)
		close(fd);
	close(prog);
	return fd == -EBADF;
}

/*
 * Every page of the ring written once before the first probe (ct_prefault), half of it at a
 * time, the reader skipping the discarded records between: the first pass through the ring
 * is then no costlier for the traced processes than the next ones. Best effort: a kernel
 * that refuses it leaves that cost where it was.
 */
static void prefault_ring(struct ct_session *s)
{
	__u32 half = (__u32)(((__u64)s->opts->ringbuf_mb << 20) / CT_RB_PAGE / 2);
	LIBBPF_OPTS(bpf_test_run_opts, run, .ctx_in = &half, .ctx_size_in = sizeof(half));
	int fd = bpf_program__fd(s->skel->progs.ct_prefault);

	for (int i = 0; i < 2; i++) {
		errno = 0;
		if (bpf_prog_test_run_opts(fd, &run) || (__u32)run.retval != half) {
			ct_info("commtrace: ring buffer not written ahead (%s): its first pass may "
				"cost the traced processes more\n",
				errno ? strerror(errno) : "fewer pages than asked");
			return;
		}
		ring_buffer__consume(s->rb);
	}
	ct_info("commtrace: ring buffer: %u pages written ahead of the first probe\n", 2 * half);
}

int ct_bpf_open_load(struct ct_session *s, ring_buffer_sample_fn on_record)
{
	struct commtrace *skel;
	size_t n = ct_catalog_size();
	int err, fd;

	libbpf_set_print(libbpf_print);
	if (n > CT_MAX_PROBES) {
		fprintf(stderr, "commtrace: catalog has %zu probes, more than %d\n", n,
			CT_MAX_PROBES);
		return -E2BIG;
	}
	skel = commtrace__open();
	if (!skel) {
		err = -errno;
		fprintf(stderr, "commtrace: cannot open the BPF object: %s\n", strerror(-err));
		return err;
	}
	s->skel = skel;
	skel->rodata->ct_follow = s->opts->cmd != NULL;
	/* file-wide probes (launch mode, files the processes share) keep the traced only */
	skel->rodata->ct_filter = s->opts->cmd != NULL || s->n_shared;
	/* an eighth of the buffer: at least 7/8 stays free for the 100 ms until the next poll */
	skel->rodata->ct_wakeup_bytes = ((__u64)s->opts->ringbuf_mb << 20) / 8;
	err = bpf_map__set_max_entries(skel->maps.events, s->opts->ringbuf_mb << 20);
	if (err) {
		fprintf(stderr, "commtrace: ring buffer of %u MiB refused: %s\n",
			s->opts->ringbuf_mb, strerror(-err));
		return err;
	}
	/* Attached by hand, per library and process, with a cookie each. */
	s->uprobe_multi = probe_uprobe_multi();
	{
		struct bpf_program *up[] = {skel->progs.ct_entry,    skel->progs.ct_exit,
					    skel->progs.ct_py_enter, skel->progs.ct_py_exit,
					    skel->progs.ct_calib,    skel->progs.ct_code_free,
					    skel->progs.ct_dispatch, skel->progs.ct_gradfn};

		for (size_t i = 0; i < ARRAY_LEN(up); i++) {
			bpf_program__set_autoattach(up[i], false);
			if (s->uprobe_multi)
				bpf_program__set_expected_attach_type(
				    up[i], (enum bpf_attach_type)CT_TRACE_UPROBE_MULTI);
		}
	}
	/* --ops: entry and return as one session where the kernel has them, else a pair */
	s->uprobe_session = s->uprobe_multi && probe_uprobe_session();
	{
		struct bpf_program *sess[] = {skel->progs.ct_py_session,
					      skel->progs.ct_dispatch_session};

		for (size_t i = 0; i < ARRAY_LEN(sess); i++) {
			bpf_program__set_autoattach(sess[i], false);
			if (s->uprobe_session)
				bpf_program__set_expected_attach_type(
				    sess[i], (enum bpf_attach_type)CT_TRACE_UPROBE_SESSION);
			else
				bpf_program__set_autoload(sess[i], false);
		}
	}
	/* --ops' programs are loaded only where they run (--check: all): verifying them took
	 * the tracer about half a second */
	{
		bool ops = s->opts->ops || s->opts->check,
		     pair = s->opts->check || !s->uprobe_session;
		struct bpf_program *ops_progs[] = {skel->progs.ct_py_session,
						   skel->progs.ct_dispatch_session,
						   skel->progs.ct_gradfn};
		struct bpf_program *pair_progs[] = {skel->progs.ct_py_enter, skel->progs.ct_py_exit,
						    skel->progs.ct_dispatch};

		for (size_t i = 0; i < ARRAY_LEN(ops_progs) && !ops; i++)
			bpf_program__set_autoload(ops_progs[i], false);
		for (size_t i = 0; i < ARRAY_LEN(pair_progs) && !(ops && pair); i++)
			bpf_program__set_autoload(pair_progs[i], false);
	}
	ct_info("commtrace: probes attach as %s%s\n",
		s->uprobe_multi ? "uprobe_multi links" : "one perf-event link each",
		s->uprobe_session ? ", the interpreter's (--ops) as a uprobe session" : "");

	err = commtrace__load(skel);
	if (err) {
		fprintf(stderr, "commtrace: loading the BPF programs failed: %s\n", strerror(-err));
		return err;
	}
	/* Launch mode: the command is gated itself, and what it starts is traced from birth. */
	skel->bss->ct_gate = s->opts->cmd != NULL;
	fd = bpf_map__fd(skel->maps.probe_specs);
	for (uint32_t id = 0; id < n; id++) {
		struct ct_probe_spec spec;

		ct_catalog_spec(id, &spec);
		if (bpf_map_update_elem(fd, &id, &spec, BPF_ANY)) {
			err = -errno;
			fprintf(stderr, "commtrace: writing probe spec %u: %s\n", id,
				strerror(-err));
			return err;
		}
	}
	err = commtrace__attach(skel);
	if (err) {
		fprintf(stderr, "commtrace: attaching the process tracepoints failed: %s\n",
			strerror(-err));
		return err;
	}
	if (!on_record)
		return 0;
	s->rb = ring_buffer__new(bpf_map__fd(skel->maps.events), on_record, s, NULL);
	if (!s->rb) {
		err = -errno;
		fprintf(stderr, "commtrace: ring buffer: %s\n", strerror(-err));
		return err;
	}
	prefault_ring(s);
	return 0;
}

/*
 * Detaching waits: closing a uprobe link waits for the kernel's uprobe grace period
 * (~80 ms measured here). One perf-event link per probe, the ~200 links of two Gloo ranks
 * closed one after the other took 16 s; closed from several threads at once, the waits
 * overlap. A uprobe_multi link waits once for all its probes.
 */
#define DETACH_THREADS 16

struct detach_job {
	struct ct_link *links;
	size_t n, first, step;
};

static void link_destroy(struct ct_link *k)
{
	if (k->bl)
		bpf_link__destroy(k->bl);
	else if (k->fd >= 0)
		close(k->fd);
}

static void *detach_worker(void *arg)
{
	const struct detach_job *j = arg;

	for (size_t i = j->first; i < j->n; i += j->step)
		link_destroy(&j->links[i]);
	return NULL;
}

static void links_destroy_all(struct ct_link *links, size_t n)
{
	struct detach_job jobs[DETACH_THREADS];
	pthread_t th[DETACH_THREADS];
	bool started[DETACH_THREADS] = {false};
	size_t nt = n < DETACH_THREADS ? n : DETACH_THREADS;

	for (size_t t = 0; t < nt; t++) {
		jobs[t] = (struct detach_job){.links = links, .n = n, .first = t, .step = nt};
		started[t] = nt > 1 && !pthread_create(&th[t], NULL, detach_worker, &jobs[t]);
		if (!started[t])
			detach_worker(&jobs[t]); /* no thread: here, in turn */
	}
	for (size_t t = 0; t < nt; t++)
		if (started[t])
			pthread_join(th[t], NULL);
}

void ct_links_destroy(struct ct_links *l, size_t from)
{
	if (from < l->n)
		links_destroy_all(l->v + from, l->n - from);
	l->n = from < l->n ? from : l->n;
	if (!from) {
		free(l->v);
		*l = (struct ct_links){0};
	}
}

size_t ct_links_probes(const struct ct_links *l)
{
	size_t n = 0;

	for (size_t i = 0; i < l->n; i++)
		n += l->v[i].probes;
	return n;
}

/*
 * A process that exits mid-trace is detached by a background thread, so that the event
 * loop goes on reading the other processes' records (and sees at once when the last one
 * has exited) while the kernel takes its time. ct_links_wait() waits for it to finish.
 */
struct detach_item {
	struct ct_links links;
	struct detach_item *next;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct detach_item *head;
	bool running, stop;
	pthread_t thread;
} dq = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void *detacher(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&dq.lock);
	for (;;) {
		struct detach_item *it = dq.head;

		if (!it) {
			if (dq.stop)
				break;
			pthread_cond_wait(&dq.cond, &dq.lock);
			continue;
		}
		dq.head = it->next;
		pthread_mutex_unlock(&dq.lock);
		ct_links_destroy(&it->links, 0);
		free(it);
		pthread_mutex_lock(&dq.lock);
	}
	pthread_mutex_unlock(&dq.lock);
	return NULL;
}

void ct_links_destroy_async(struct ct_links *l)
{
	struct detach_item *it = malloc(sizeof(*it));

	pthread_mutex_lock(&dq.lock);
	if (it && !dq.running && !dq.stop)
		dq.running = !pthread_create(&dq.thread, NULL, detacher, NULL);
	if (it && dq.running && !dq.stop) {
		*it = (struct detach_item){.links = *l, .next = dq.head};
		*l = (struct ct_links){0};
		dq.head = it;
		pthread_cond_signal(&dq.cond);
		pthread_mutex_unlock(&dq.lock);
		return;
	}
	pthread_mutex_unlock(&dq.lock);
	free(it);
	ct_links_destroy(l, 0);
}

void ct_links_wait(void)
{
	pthread_mutex_lock(&dq.lock);
	dq.stop = true;
	pthread_cond_signal(&dq.cond);
	pthread_mutex_unlock(&dq.lock);
	if (dq.running)
		pthread_join(dq.thread, NULL);
	dq.running = false;
	dq.stop = false;
}

static int push_link(struct ct_links *l, struct ct_link k)
{
	if (l->n == l->cap) {
		size_t c = l->cap ? l->cap * 2 : 16;
		struct ct_link *a = realloc(l->v, c * sizeof(*a));

		if (!a)
			return -ENOMEM;
		l->v = a;
		l->cap = c;
	}
	l->v[l->n++] = k;
	return 0;
}

/* Attach prog (a return probe when ret) at the n file offsets of path, for pid (-1: every
 * process): one uprobe_multi link, or n libbpf links. All or none are added to out. */
static int attach_prog(struct ct_session *s, struct bpf_program *prog, const char *path,
		       const uint64_t *offs, const uint64_t *cookies, size_t n, bool ret, pid_t pid,
		       struct ct_links *out)
{
	size_t mark = out->n;
	int err = 0;

	if (s->uprobe_multi) {
		/* pid 0: every process */
		int fd = uprobe_multi_link(bpf_program__fd(prog),
					   prog == s->skel->progs.ct_py_session ||
						   prog == s->skel->progs.ct_dispatch_session
					       ? CT_TRACE_UPROBE_SESSION
					       : CT_TRACE_UPROBE_MULTI,
					   path, offs, cookies, n, ret, pid < 0 ? 0 : (__u32)pid);

		if (fd < 0)
			return fd;
		err = push_link(out, (struct ct_link){.fd = fd, .probes = (unsigned)n});
		if (err)
			close(fd);
		return err;
	}
	for (size_t i = 0; i < n && !err; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = cookies[i], .retprobe = ret);
		struct bpf_link *bl =
		    bpf_program__attach_uprobe_opts(prog, pid, path, offs[i], &uo);

		err =
		    bl ? push_link(out, (struct ct_link){.bl = bl, .fd = -1, .probes = 1}) : -errno;
		if (bl && err)
			bpf_link__destroy(bl);
	}
	if (err)
		ct_links_destroy(out, mark);
	return err;
}

/* Entry and return probes of one program pair at the same offsets: both or neither. */
static int attach_pair(struct ct_session *s, struct bpf_program *entry, struct bpf_program *exit,
		       const char *path, const uint64_t *offs, const uint64_t *cookies, size_t n,
		       pid_t pid, struct ct_links *out)
{
	size_t mark = out->n;
	int err = attach_prog(s, entry, path, offs, cookies, n, false, pid, out);

	if (!err && (err = attach_prog(s, exit, path, offs, cookies, n, true, pid, out)))
		ct_links_destroy(out, mark);
	return err;
}

/* Entry and return probes, or (points) the entry program alone. */
static int attach_func_set(struct ct_session *s, const char *path, const uint64_t *offs,
			   const uint64_t *cookies, size_t n, bool points, pid_t pid,
			   struct ct_links *out)
{
	struct bpf_program *entry = s->skel->progs.ct_entry, *exit = s->skel->progs.ct_exit;

	return points ? attach_prog(s, entry, path, offs, cookies, n, false, pid, out)
		      : attach_pair(s, entry, exit, path, offs, cookies, n, pid, out);
}

int ct_bpf_attach_funcs(struct ct_session *s, pid_t pid, const char *path, const uint64_t *offs,
			const uint64_t *cookies, size_t n, bool points, struct ct_links *out)
{
	int err = n ? attach_func_set(s, path, offs, cookies, n, points, pid, out) : 0, done = 0;
	char who[32] = "every process";

	if (!err)
		done = (int)n;
	if (pid >= 0)
		snprintf(who, sizeof(who), "pid %d", pid);
	/* One bad function refuses the whole set: find it, keep the others. */
	for (size_t i = 0; err && err != -ESRCH && err != -ENOENT && i < n; i++) {
		int e = attach_func_set(s, path, &offs[i], &cookies[i], 1, points, pid, out);
		const struct ct_func *fn = ct_catalog_func((uint32_t)cookies[i], NULL);

		if (e == -ESRCH || e == -ENOENT) {
			err = e;
			break;
		}
		if (e)
			fprintf(stderr, "commtrace: %s: attaching %s in %s failed: %s\n", who,
				fn ? fn->name : "?", path, strerror(-e));
		else
			done++;
	}
	return err == -ESRCH || err == -ENOENT ? err : done;
}

int ct_bpf_attach_ldso(struct ct_session *s, const char *path, uint64_t off)
{
	uint64_t cookie = ct_catalog_base(&ct_lib_ldso);

	/* File-wide (pid -1), filtered in BPF by the traced set: no race with a new exec. */
	return attach_prog(s, s->skel->progs.ct_entry, path, &off, &cookie, 1, false, -1,
			   &s->ldso_links);
}

int ct_bpf_attach_pyops(struct ct_session *s, pid_t pid, const char *path, uint64_t off,
			struct ct_links *out)
{
	uint64_t cookie = 0;

	if (s->uprobe_session)
		return attach_prog(s, s->skel->progs.ct_py_session, path, &off, &cookie, 1, false,
				   pid, out);
	return attach_pair(s, s->skel->progs.ct_py_enter, s->skel->progs.ct_py_exit, path, &off,
			   &cookie, 1, pid, out);
}

int ct_bpf_attach_dispatch(struct ct_session *s, pid_t pid, const char *path, uint64_t dispatch,
			   uint64_t gradfn, struct ct_links *out)
{
	size_t mark = out->n;
	uint64_t cookie = 0;
	int err;

	if (s->uprobe_session)
		err = attach_prog(s, s->skel->progs.ct_dispatch_session, path, &dispatch, &cookie,
				  1, false, pid, out);
	else
		err = attach_pair(s, s->skel->progs.ct_dispatch, s->skel->progs.ct_py_exit, path,
				  &dispatch, &cookie, 1, pid, out);
	if (!err && gradfn &&
	    (err = attach_prog(s, s->skel->progs.ct_gradfn, path, &gradfn, &cookie, 1, false, pid,
			       out)))
		ct_links_destroy(out, mark);
	return err;
}

int ct_bpf_attach_entry(struct ct_session *s, pid_t pid, const char *path, uint64_t off,
			struct ct_links *out)
{
	uint64_t cookie = ct_catalog_base(&ct_lib_ldso);

	return attach_prog(s, s->skel->progs.ct_entry, path, &off, &cookie, 1, false, pid, out);
}

int ct_bpf_attach_code_free(struct ct_session *s, pid_t pid, const char *path, uint64_t off,
			    struct ct_links *out)
{
	uint64_t cookie = 0;

	return attach_prog(s, s->skel->progs.ct_code_free, path, &off, &cookie, 1, false, pid, out);
}

int ct_bpf_attach_calib(struct ct_session *s, const char *path, uint64_t off, bool ret,
			struct ct_links *out)
{
	struct bpf_program *p = s->skel->progs.ct_calib;
	uint64_t cookie = 0;

	return ret ? attach_pair(s, p, p, path, &off, &cookie, 1, getpid(), out)
		   : attach_prog(s, p, path, &off, &cookie, 1, false, getpid(), out);
}

void ct_bpf_open_gate(struct ct_session *s)
{
	if (s->skel)
		s->skel->bss->ct_gate = 1;
}

int ct_bpf_trace_pid(struct ct_session *s, pid_t pid)
{
	__u32 key = pid, one = 1;

	if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.traced), &key, &one, BPF_ANY))
		return -errno;
	return 0;
}

/*
 * How much of the verifier's budget each loaded program took (bpf_prog_info.verified_insns,
 * Linux 5.16+): a program near the limit on one kernel is refused by the next one's verifier.
 */
void ct_bpf_print_verified(const struct ct_session *s)
{
	struct bpf_program *prog;
	const char *sep = "";

	fprintf(stderr,
		"commtrace-bpf: instructions verified (of the verifier's %d):", CT_VERIFIER_LIMIT);
	bpf_object__for_each_program(prog, s->skel->obj)
	{
		struct bpf_prog_info info;
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(prog);

		memset(&info, 0, sizeof(info));
		if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len) || !info.verified_insns)
			continue;
		fprintf(stderr, "%s %s %u", sep, bpf_program__name(prog), info.verified_insns);
		sep = ",";
	}
	fprintf(stderr, "\n");
}

void ct_bpf_read_drops(struct ct_session *s)
{
	int ncpu = libbpf_num_possible_cpus(), fd;
	__u64 *vals;

	if (!s->skel || ncpu <= 0)
		return;
	vals = calloc(ncpu, sizeof(*vals));
	if (!vals)
		return;
	fd = bpf_map__fd(s->skel->maps.drops);
	for (__u32 k = 0; k < CT_DROP_MAX; k++) {
		__u64 sum = 0;

		if (bpf_map_lookup_elem(fd, &k, vals))
			continue;
		for (int c = 0; c < ncpu; c++)
			sum += vals[c];
		s->drops[k] = sum;
	}
	free(vals);
}

void ct_bpf_close(struct ct_session *s)
{
	ct_links_wait(); /* the exited processes' probes, before the programs go */
	ct_links_destroy(&s->ldso_links, 0);
	s->n_ldso = 0;
	ring_buffer__free(s->rb);
	s->rb = NULL;
	commtrace__destroy(s->skel);
	s->skel = NULL;
}
