// SPDX-License-Identifier: MIT
/*
 * The tracer itself (commtrace-bpf without a subcommand): attach to running processes (or
 * launch a command and follow its children), trace their collectives until told to stop,
 * report.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include <bpf/libbpf.h>
#include "cli.h"
#include "diag/diag.h"
#include "events.h"
#include "drops.h"
#include "export/chrome.h"
#include "export/export.h"
#include "trace.h"
#include "metrics/metrics.h"
#include "pystacks.h"
#include "record/record.h"
#include "target/proc.h"
#include "targets.h"
#include "util/clock.h"
#include "util/intern.h"
#include "util/log.h"

static volatile sig_atomic_t stop_signal;
/* Tracing began (the `attached:` line): only then is there a report to give. */
static bool tracing_started;

static void on_signal(int sig)
{
	stop_signal = sig;
}

/* SIGUSR1: print each communicator's progress now, and trace on. */
static volatile sig_atomic_t progress_wanted;

static void on_usr1(int sig)
{
	(void)sig;
	progress_wanted = 1;
}

static void print_progress(struct ct_session *s, uint64_t now, const char *why)
{
	fprintf(stderr, "commtrace: progress per communicator (%s):\n", why);
	if (!ct_diag_progress_print(s->diag, stderr, now))
		fprintf(stderr, "  no collective on a known communicator yet\n");
	fflush(stderr);
}

static void print_probe(const struct ct_libdesc *d, const struct ct_file *f, const char *shown)
{
	for (size_t i = 0; i < d->n_funcs; i++) {
		const struct ct_sym_found *s = &f->funcs[i];
		/* at its entry and return, or once inside it (struct ct_point) */
		const char *at = d->funcs[i].point ? "inside" : "entry";

		if (!s->found)
			continue;
		printf("probe lib=%s function=%s symbol=%s addr=0x%llx offset=0x%llx aliases=%d "
		       "at=%s file=%s\n",
		       d->name, d->funcs[i].name, s->symbol, (unsigned long long)s->addr,
		       (unsigned long long)s->file_off, s->n_aliases, at, shown);
	}
}

/* Which library a file is: by name, else the one whose functions it has most of. */
static struct ct_file *resolve_any(struct ct_session *s, const char *path, char *err, size_t errlen)
{
	const struct ct_libdesc *d = ct_catalog_match_file(path);
	struct ct_file *best = NULL, *f;

	if (d)
		return ct_file_get(s, path, d, err, errlen);
	for (size_t i = 0; i < ct_n_libs; i++) {
		if (ct_libs[i] == &ct_lib_ldso)
			continue;
		f = ct_file_get(s, path, ct_libs[i], err, errlen);
		if (!f)
			return NULL;
		if (f->n_found && (!best || f->n_found > best->n_found))
			best = f;
	}
	if (!best)
		snprintf(err, errlen, "%s has none of the functions of %s", path,
			 ct_catalog_file_list());
	return best;
}

struct dry_ctx {
	struct ct_session *s;
	pid_t pid;
	int n;
};

static int dry_map(const struct ct_map *m, void *arg)
{
	struct dry_ctx *c = arg;
	const struct ct_libdesc *d = ct_catalog_match_file(m->path);
	char host[PATH_MAX], err[512];
	struct ct_file *f;

	if (!d || d == &ct_lib_ldso || !strchr(m->perms, 'x'))
		return 0;
	if (ct_map_open_path(c->pid, m, host, sizeof(host)))
		return 0;
	f = ct_file_get(c->s, host, d, err, sizeof(err));
	if (!f) {
		fprintf(stderr, "commtrace-bpf: %s\n", err);
		return 0;
	}
	print_probe(d, f, m->path);
	c->n++;
	return 0;
}

static int run_dry(struct ct_session *s)
{
	struct ct_opts *o = s->opts;
	char err[512];
	int rc = CT_EXIT_OK;

	if (o->lib_path) {
		struct ct_file *f = resolve_any(s, o->lib_path, err, sizeof(err));

		if (!f) {
			fprintf(stderr, "commtrace-bpf: %s\n", err);
			return CT_EXIT_NOLIB;
		}
		print_probe(f->desc, f, o->lib_path);
	}
	for (int i = 0; i < o->n_pids; i++) {
		struct dry_ctx c = {.s = s, .pid = o->pids[i]};
		int r = ct_maps_foreach(o->pids[i], dry_map, &c);

		if (r == -ESRCH || r == -ENOENT) {
			fprintf(stderr, "commtrace-bpf: no such process: %d\n", o->pids[i]);
			return CT_EXIT_NOPROC;
		}
		if (r < 0) {
			fprintf(stderr, "commtrace-bpf: reading the mappings of pid %d: %s\n",
				o->pids[i], strerror(-r));
			return CT_EXIT_FAIL;
		}
		if (!c.n && !o->wait_libs) {
			fprintf(stderr,
				"commtrace-bpf: no collective library found in pid %d's mappings; "
				"looked for %s\n",
				o->pids[i], ct_catalog_file_list());
			rc = CT_EXIT_NOLIB;
		}
	}
	return rc;
}

/* Launch mode: the child waits on a pipe until the tracer is ready, then execs. */
static int launch(struct ct_session *s, int *gate)
{
	int fds[2];
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		char c;

		close(fds[1]);
		if (read(fds[0], &c, 1) != 1)
			_exit(127); /* the tracer failed before the go */
		execvp(s->opts->cmd[0], s->opts->cmd);
		fprintf(stderr, "commtrace-bpf: cannot run %s: %s\n", s->opts->cmd[0],
			strerror(errno));
		_exit(127);
	}
	close(fds[0]);
	*gate = fds[1];
	s->child = pid;
	return 0;
}

static int find_ldso(const struct ct_map *m, void *ctx)
{
	if (ct_catalog_match_file(m->path) != &ct_lib_ldso)
		return 0;
	snprintf(ctx, PATH_MAX, "%s", m->path);
	return 1;
}

/*
 * The launched command starts with the same dynamic linker as we do; a binary
 * with another interpreter is found by the scan at its exec.
 */
static int attach_ldso_self(struct ct_session *s)
{
	char path[PATH_MAX];

	if (ct_maps_foreach(getpid(), find_ldso, path) != 1)
		return -ENOENT;
	return ct_attach_ldso(s, path);
}

static int count_probes(struct ct_session *s, char *libs, size_t len)
{
	int n = (int)ct_links_probes(&s->ldso_links), off = 0;
	int per_lib[CT_LIB_MAX] = {0};

	for (int i = 0; i < s->n_files; i++)
		n += (int)ct_links_probes(&s->files[i]->links);

	for (int i = 0; i < s->n_procs; i++) {
		n += (int)ct_links_probes(&s->procs[i]->links);
		for (int k = 0; k < s->procs[i]->n_libs; k++)
			per_lib[s->procs[i]->libs[k].file->desc->lib]++;
	}
	libs[0] = 0;
	for (int l = 0; l < CT_LIB_MAX; l++) {
		int w;

		if (!per_lib[l])
			continue;
		w = snprintf(libs + off, len - off, "%s%s x%d", off ? ", " : "", ct_lib_name(l),
			     per_lib[l]);
		if (w < 0 || (size_t)w >= len - off)
			break;
		off += w;
	}
	if (!off)
		snprintf(libs, len, "none yet");
	return n;
}

static void check_liveness(struct ct_session *s)
{
	int status;

	if (s->child && !s->child_reaped && waitpid(s->child, &status, WNOHANG) == s->child) {
		s->child_reaped = true;
		s->child_status = status;
	}
	for (int i = 0; i < s->n_procs; i++) {
		struct ct_proc *p = s->procs[i];

		/* The exit tracepoint says so first; this catches an event lost to a full ring. */
		if (!p->exited && !ct_proc_alive(p->pid))
			ct_proc_exited(s, p, 0);
	}
}

/*
 * Without -i or --metrics, nothing would say while tracing that records are being lost:
 * one line at the first drop, then at most one every CT_DROP_NOTICE_NS while it goes on.
 * final: tracing has ended; with the summary on stderr (no -q), it says the rest.
 */
#define CT_DROP_NOTICE_NS 5000000000ULL

static void drop_notice(struct ct_session *s, uint64_t now, bool final)
{
	static uint64_t reported, last_ns;
	const struct ct_opts *o = s->opts;
	uint64_t n, ring;

	if (o->interval > 0 || o->metrics_addr)
		return;
	if (!final && last_ns && now - last_ns < CT_DROP_NOTICE_NS)
		return;
	ct_bpf_read_drops(s);
	n = ct_session_drops(s);
	if (n <= reported || (final && !o->quiet))
		return;
	ring = s->drops[CT_DROP_RINGBUF] + s->drops[CT_DROP_RINGBUF_RET] +
	       s->drops[CT_DROP_RINGBUF_PROC] + s->drops[CT_DROP_OPS];
	if (ring)
		fprintf(stderr,
			"commtrace-bpf: dropped %llu events so far (ring buffer full); see "
			"--ringbuf (now %u MiB)\n",
			(unsigned long long)n, o->ringbuf_mb);
	else
		fprintf(stderr,
			"commtrace-bpf: dropped %llu events so far (thread table full or out of "
			"memory)\n",
			(unsigned long long)n);
	reported = n;
	last_ns = now;
}

static int trace(struct ct_session *s)
{
	struct ct_opts *o = s->opts;
	uint64_t t0, next_live, last_check = 0, deadline = 0, consumed;
	const char *why;
	char libs[256];
	int gate = -1, err, rc = CT_EXIT_OK, nprobes;
	bool more = false; /* the last read stopped at a full batch: records are waiting */
	uint64_t last_diag = 0, last_drops = 0;

	for (int i = 0; i < o->n_pids; i++) {
		if (!ct_proc_alive(o->pids[i])) {
			fprintf(stderr, "commtrace-bpf: no such process: %d\n", o->pids[i]);
			return CT_EXIT_NOPROC;
		}
	}
	why = ct_bpf_unavailable_reason();
	if (why) {
		fprintf(stderr, "commtrace-bpf: cannot use BPF: %s\n", why);
		return CT_EXIT_NOPRIV;
	}
	if (!o->cmd && ct_procs_find_shared(s, o->pids, o->n_pids))
		ct_info("commtrace: %d library file%s shared by the processes: probed once "
			"for all of them, filtered in BPF\n",
			s->n_shared, s->n_shared == 1 ? "" : "s");
	err = ct_bpf_open_load(s, ct_events_handle);
	if (err)
		return err == -EPERM || err == -EACCES ? CT_EXIT_NOPRIV : CT_EXIT_FAIL;
	{
		char msg[512];

		err = ct_py_init(s, msg, sizeof(msg));
		if (err) {
			fprintf(stderr, "commtrace-bpf: --profile: %s\n", msg);
			return CT_EXIT_USAGE;
		}
	}
	ct_cost_begin(s); /* before the first probe: every hit is counted */

	s->mono_to_wall_ns = ct_now_ns(CLOCK_REALTIME) - ct_now_ns(CLOCK_MONOTONIC);
	s->start_ns = ct_now_ns(CLOCK_MONOTONIC);

	for (int i = 0; i < o->n_pids; i++) {
		struct ct_proc *p = ct_proc_add(s, o->pids[i]);

		if (!p)
			return CT_EXIT_FAIL;
		err = ct_bpf_trace_pid(s, p->pid);
		if (!err)
			err = ct_proc_scan(s, p);
		if (err == -ESRCH || err == -ENOENT) {
			fprintf(stderr, "commtrace-bpf: no such process: %d\n", p->pid);
			return CT_EXIT_NOPROC;
		}
		if (err < 0) {
			fprintf(stderr, "commtrace-bpf: pid %d: %s\n", p->pid, strerror(-err));
			return CT_EXIT_FAIL;
		}
		if (!ct_proc_comm_libs(p) && !o->wait_libs) {
			fprintf(stderr,
				"commtrace-bpf: no collective library found in pid %d's mappings; "
				"looked for %s (use --wait-libs to wait for one to be loaded)\n",
				p->pid, ct_catalog_file_list());
			return CT_EXIT_NOLIB;
		}
	}
	if (o->cmd) {
		struct ct_proc *p;

		err = launch(s, &gate);
		if (err) {
			fprintf(stderr, "commtrace-bpf: cannot start %s: %s\n", o->cmd[0],
				strerror(-err));
			return CT_EXIT_FAIL;
		}
		p = ct_proc_add(s, s->child);
		if (!p || ct_bpf_trace_pid(s, s->child)) {
			close(gate);
			return CT_EXIT_FAIL;
		}
		if (attach_ldso_self(s))
			fprintf(stderr,
				"commtrace-bpf: warning: no dynamic-linker probe; libraries "
				"loaded later are found by polling every 2 s\n");
		ct_prescan_system_libs(s);
	}
	ct_bpf_open_gate(s);
	nprobes = count_probes(s, libs, sizeof(libs));
	if (o->cmd)
		fprintf(stderr,
			"attached: %d probes, launching '%s' as pid %d and following its children "
			"(libraries: %s)\n",
			nprobes, o->cmd[0], s->child, libs);
	else
		fprintf(stderr, "attached: %d probes on %d process%s (libraries: %s)\n", nprobes,
			s->n_procs, s->n_procs == 1 ? "" : "es", libs);
	tracing_started = true;
	if (gate >= 0) {
		if (write(gate, "g", 1) != 1)
			fprintf(stderr, "commtrace-bpf: the launched command did not start\n");
		close(gate);
	}

	t0 = ct_now_ns(CLOCK_MONOTONIC);
	next_live = o->interval > 0 ? t0 + (uint64_t)(o->interval * 1e9) : 0;
	if (o->duration > 0)
		deadline = t0 + (uint64_t)(o->duration * 1e9);
	while (!stop_signal) {
		uint64_t now;

		/*
		 * Calls do not wake us one by one (bpf/commtrace.bpf.c): the timeout is the
		 * batch period, and what is there is read whether or not a wakeup came.
		 */
		err = ring_buffer__poll(s->rb, more ? 0 : 100);
		consumed = ct_now_ns(CLOCK_MONOTONIC); /* --metrics: what was produced by now */
		if (err >= 0 || err == CT_EVENTS_YIELD)
			err = ring_buffer__consume(s->rb);
		/*
		 * A full batch (ct_events_handle): a producer that never lets the ring run
		 * empty must not keep us from the deadline, the live summary and the checks.
		 */
		more = err == CT_EVENTS_YIELD;
		if (more)
			err = 0;
		if (err < 0 && err != -EINTR) {
			fprintf(stderr, "commtrace-bpf: polling the ring buffer: %s\n",
				strerror(-err));
			rc = CT_EXIT_FAIL;
			break;
		}
		now = ct_now_ns(CLOCK_MONOTONIC);
		ct_metrics_tick(s, consumed, false);
		if (deadline && now >= deadline)
			break;
		if (s->diag && now - last_diag >= 250000000ULL) {
			last_diag = now; /* hang alerts (README "Diagnosis") */
			ct_diag_check(s->diag, now);
		}
		if (now - last_drops >= 1000000000ULL) {
			last_drops = now;
			drop_notice(s, now, false);
			if (s->metrics)
				ct_cost_sample(s); /* --cost: its metrics, once a second */
		}
		if (progress_wanted) {
			progress_wanted = 0;
			print_progress(s, now, "SIGUSR1");
		}
		if (next_live && now >= next_live) {
			ct_bpf_read_drops(s);
			ct_export_summary(s, stderr, false);
			ct_diag_progress_print(s->diag, stderr, now); /* the compact table */
			next_live = now + (uint64_t)(o->interval * 1e9);
		}
		if (now - last_check >= 2000000000ULL) {
			last_check = now;
			check_liveness(s);
			/* Libraries mapped without the dynamic linker's notice (rare). */
			for (int i = 0; i < s->n_procs; i++)
				if (!s->procs[i]->exited)
					ct_proc_scan(s, s->procs[i]);
			if (ct_session_live_procs(s) == 0 && (!s->child || s->child_reaped))
				break;
		}
	}
	/* What the kernel already produced belongs to the report. */
	consumed = ct_now_ns(CLOCK_MONOTONIC);
	while (ring_buffer__consume(s->rb) == CT_EVENTS_YIELD)
		;
	s->end_ns = ct_now_ns(CLOCK_MONOTONIC);
	drop_notice(s, s->end_ns, true);
	ct_bpf_read_drops(s);
	ct_cost_end(s);
	ct_metrics_tick(s, consumed, true); /* the final numbers, until the endpoint stops */
	if (stop_signal)
		fprintf(stderr, "commtrace-bpf: stopped by signal %d, detaching\n",
			(int)stop_signal);
	if (s->child) {
		if (s->child_reaped && WIFEXITED(s->child_status))
			fprintf(stderr, "commtrace-bpf: '%s' exited with status %d\n", o->cmd[0],
				WEXITSTATUS(s->child_status));
		else if (s->child_reaped && WIFSIGNALED(s->child_status))
			fprintf(stderr, "commtrace-bpf: '%s' killed by signal %d\n", o->cmd[0],
				WTERMSIG(s->child_status));
		else
			fprintf(stderr, "commtrace-bpf: '%s' (pid %d) still running, detached\n",
				o->cmd[0], s->child);
	}
	return rc;
}

int ct_trace_main(int argc, char **argv)
{
	struct ct_session s = {0};
	struct ct_opts o;
	struct sigaction sa = {.sa_handler = on_signal};
	int rc, err;

	rc = ct_parse_args(argc, argv, &o);
	if (rc)
		return rc == CT_EXIT_DONE ? CT_EXIT_OK : rc;
	ct_verbose = o.verbose;
	s.opts = &o;

	if (o.check) {
		const char *why = ct_bpf_unavailable_reason();

		if (why) {
			fprintf(stderr, "commtrace-bpf: BPF unavailable: %s\n", why);
			return CT_EXIT_NOPRIV;
		}
		/* Refused with every capability and BTF there: a bug to report, not a setup. */
		if (ct_bpf_open_load(&s, NULL)) {
			ct_bpf_close(&s);
			fprintf(stderr,
				"commtrace-bpf: this kernel refused the BPF programs (the "
				"verifier's reason is above); please report it with `uname -r`\n");
			return CT_EXIT_FAIL;
		}
		ct_bpf_print_verified(&s);
		ct_bpf_close(&s);
		fprintf(stderr, "commtrace-bpf: BPF uprobes usable (%s)\n",
			s.uprobe_multi
			    ? "uprobe_multi links: one per library and process"
			    : "one perf-event link per probe: no uprobe_multi links with a "
			      "process-wide PID filter in this kernel, or "
			      "COMMTRACE_UPROBE_MULTI=0");
		return CT_EXIT_OK;
	}
	if (o.dry_run) {
		rc = run_dry(&s);
		ct_session_free(&s);
		return rc;
	}

	/* No SA_RESTART: the poll returns at once on Ctrl-C. */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART; /* not a reason to return early from anything */
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	/*
	 * One cleanup path from here on: whatever was opened (the metrics endpoint, the
	 * Chrome trace's temporary file, the recording) is closed at out, also when a later
	 * step fails. A Chrome trace is always left complete and valid.
	 */
	if (o.metrics_addr) { /* before the BPF work: a port in use fails at once */
		char msg[512];

		err = ct_metrics_start(&s, o.metrics_addr, msg, sizeof(msg));
		if (err) {
			fprintf(stderr, "commtrace-bpf: %s\n", msg);
			rc = err == -EINVAL ? CT_EXIT_USAGE : CT_EXIT_FAIL;
			goto out;
		}
	}
	if (o.chrome_path) {
		struct ct_chrome_opts co = {
		    .path = o.chrome_path,
		    .max_bytes = (uint64_t)o.chrome_max_mb << 20,
		    .window_ns = (uint64_t)(o.chrome_window * 1e9),
		    .device_buffer = o.device_buffer,
		    .device_sync = o.device_sync,
		    .device_sync_cycle = o.device_sync_cycle,
		    .device_sync_ns = o.device_sync_ns,
		};

		err = ct_chrome_open(&s, &co);
		if (err) {
			fprintf(stderr, "commtrace-bpf: --chrome %s%s%s: %s\n", o.chrome_path,
				o.device_buffer ? " --device-buffer " : "",
				o.device_buffer ? o.device_buffer : "", strerror(-err));
			rc = CT_EXIT_FAIL;
			goto out;
		}
	}
	{
		struct ct_diag_opts dopt = {
		    .hang_ns = (uint64_t)(o.hang_after * 1e9),
		    .late_ns = (uint64_t)(o.late_after * 1e9),
		    .serial_gap_ns = 5000000, /* 5 ms: no work between the two reductions */
		    .min_repeats = 3,
		    .alerts = stderr,
		};

		s.diag = ct_diag_new(&dopt); /* NULL (no memory): no diagnosis */
	}
	if (o.record_path) {
		err = ct_record_open(&s, o.record_path);
		if (err) {
			fprintf(stderr, "commtrace-bpf: --record %s: %s\n", o.record_path,
				strerror(-err));
			rc = CT_EXIT_FAIL;
			goto out;
		}
	}
	rc = trace(&s);
out:
	ct_metrics_stop(&s); /* the endpoint stops with the tracer */
	/* After trace(): the processes, the clock and the drops are final. */
	if (s.rec) {
		err = ct_record_close(&s);
		if (err) {
			fprintf(stderr, "commtrace-bpf: writing %s: %s\n", o.record_path,
				strerror(-err));
			rc = CT_EXIT_FAIL;
		}
	}
	if (s.chrome) { /* complete and valid even after Ctrl-C or a failed attach */
		err = ct_chrome_close(&s);
		if (err == CT_CHROME_DEVICE_FAILED) { /* said on stderr; the file is written */
			if (rc == CT_EXIT_OK)
				rc = CT_EXIT_FAIL;
		} else if (err) {
			fprintf(stderr, "commtrace-bpf: writing %s: %s\n", o.chrome_path,
				strerror(-err));
			rc = CT_EXIT_FAIL;
		}
	}
	/* A run that attached nothing (no such process, no library, no BPF) says only why. */
	if (s.skel && tracing_started && ct_export_final(&s) && rc == CT_EXIT_OK)
		rc = CT_EXIT_FAIL;
	ct_session_free(&s);
	ct_diag_free(s.diag);
	s.diag = NULL;
	ct_py_free(&s);
	ct_bpf_close(&s);
	ct_intern_free();
	return rc;
}
