// SPDX-License-Identifier: MIT
/*
 * BPF lifecycle: open → configure (rodata, map sizes) → load → fill the probe
 * specs → attach the tracepoints → attach uprobes as libraries are found →
 * poll → one cleanup path.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "commtrace.skel.h"
#include "session.h"

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

int ct_bpf_open_load(struct ct_session *s)
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
	skel->rodata->ct_filter = s->opts->cmd != NULL;
	/* an eighth of the buffer: at least 7/8 stays free for the 100 ms until the next poll */
	skel->rodata->ct_wakeup_bytes = ((__u64)s->opts->ringbuf_mb << 20) / 8;
	err = bpf_map__set_max_entries(skel->maps.events, s->opts->ringbuf_mb << 20);
	if (err) {
		fprintf(stderr, "commtrace: ring buffer of %u MiB refused: %s\n",
			s->opts->ringbuf_mb, strerror(-err));
		return err;
	}
	/* Attached by hand, per library and process, with a cookie each. */
	bpf_program__set_autoattach(skel->progs.ct_entry, false);
	bpf_program__set_autoattach(skel->progs.ct_exit, false);

	err = commtrace__load(skel);
	if (err) {
		fprintf(stderr, "commtrace: loading the BPF programs failed: %s\n", strerror(-err));
		return err;
	}
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
	s->rb = ring_buffer__new(bpf_map__fd(skel->maps.events), ct_events_handle, s, NULL);
	if (!s->rb) {
		err = -errno;
		fprintf(stderr, "commtrace: ring buffer: %s\n", strerror(-err));
		return err;
	}
	return 0;
}

static int push_link(struct bpf_link ***links, size_t *n, size_t *cap, struct bpf_link *l)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		struct bpf_link **a = realloc(*links, c * sizeof(*a));

		if (!a)
			return -ENOMEM;
		*links = a;
		*cap = c;
	}
	(*links)[(*n)++] = l;
	return 0;
}

static int proc_link(struct ct_proc *p, struct bpf_link *l)
{
	int err = push_link(&p->links, &p->n_links, &p->cap_links, l);

	if (err)
		bpf_link__destroy(l);
	return err;
}

int ct_bpf_attach_func(struct ct_session *s, struct ct_proc *p, struct ct_file *f,
		       uint32_t probe_id, const struct ct_sym_found *sym, pid_t pid)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = probe_id);
	struct bpf_link *l[2];
	int err = 0;

	l[0] = bpf_program__attach_uprobe_opts(s->skel->progs.ct_entry, pid, f->path, sym->file_off,
					       &uo);
	if (!l[0])
		return -errno;
	uo.retprobe = true;
	l[1] = bpf_program__attach_uprobe_opts(s->skel->progs.ct_exit, pid, f->path, sym->file_off,
					       &uo);
	if (!l[1]) {
		err = -errno;
		bpf_link__destroy(l[0]);
		return err;
	}
	for (int i = 0; i < 2; i++) {
		if (pid >= 0) {
			err = proc_link(p, l[i]);
		} else {
			err = push_link(&f->links, &f->n_links, &f->cap_links, l[i]);
			if (err)
				bpf_link__destroy(l[i]);
		}
		if (err)
			return err;
	}
	return 0;
}

int ct_bpf_attach_ldso(struct ct_session *s, const char *path)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = ct_catalog_base(&ct_lib_ldso));
	char err[256];
	struct ct_file *f;
	struct bpf_link *l;
	struct stat st;

	if (stat(path, &st))
		return -errno;
	for (int i = 0; i < s->n_ldso; i++)
		if (s->ldso_files[i].dev == st.st_dev && s->ldso_files[i].ino == st.st_ino)
			return 0;
	if (s->n_ldso == (int)ARRAY_LEN(s->ldso_links))
		return -ENOSPC;
	f = ct_file_get(s, path, &ct_lib_ldso, err, sizeof(err));
	if (!f || !f->funcs[0].found) {
		ct_info("commtrace: no _dl_debug_state in %s: libraries loaded later are found "
			"by polling only\n",
			path);
		return -ENOENT;
	}
	/* File-wide (pid -1), filtered in BPF by the traced set: no race with a new exec. */
	l = bpf_program__attach_uprobe_opts(s->skel->progs.ct_entry, -1, f->path,
					    f->funcs[0].file_off, &uo);
	if (!l)
		return -errno;
	s->ldso_links[s->n_ldso] = l;
	s->ldso_files[s->n_ldso].dev = st.st_dev;
	s->ldso_files[s->n_ldso].ino = st.st_ino;
	s->n_ldso++;
	return 0;
}

int ct_bpf_attach_pyops(struct ct_session *s, struct ct_proc *p, const char *path, uint64_t off)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo);
	struct bpf_link *l;
	int err;

	l = bpf_program__attach_uprobe_opts(s->skel->progs.ct_py_enter, p->pid, path, off, &uo);
	if (!l)
		return -errno;
	err = proc_link(p, l);
	if (err)
		return err;
	uo.retprobe = true;
	l = bpf_program__attach_uprobe_opts(s->skel->progs.ct_py_exit, p->pid, path, off, &uo);
	if (!l)
		return -errno;
	return proc_link(p, l);
}

int ct_bpf_attach_entry(struct ct_session *s, struct ct_proc *p)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = ct_catalog_base(&ct_lib_ldso));
	char exe[64], err[256];
	struct ct_elf *e;
	struct bpf_link *l;
	uint64_t off;
	int rc;

	/* /proc/PID/exe names the inode itself, wherever the target's root is. */
	snprintf(exe, sizeof(exe), "/proc/%d/exe", p->pid);
	e = ct_elf_open(exe, err, sizeof(err));
	if (!e)
		return -ENOENT;
	rc = ct_elf_vaddr_to_off(e, ct_elf_entry(e), &off);
	ct_elf_close(e);
	if (rc)
		return rc;
	l = bpf_program__attach_uprobe_opts(s->skel->progs.ct_entry, p->pid, exe, off, &uo);
	if (!l)
		return -errno;
	return proc_link(p, l);
}

int ct_bpf_trace_pid(struct ct_session *s, pid_t pid)
{
	__u32 key = pid, one = 1;

	if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.traced), &key, &one, BPF_ANY))
		return -errno;
	return 0;
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
	ct_links_destroy(s->ldso_links, (size_t)s->n_ldso);
	s->n_ldso = 0;
	ring_buffer__free(s->rb);
	s->rb = NULL;
	commtrace__destroy(s->skel);
	s->skel = NULL;
}
