// SPDX-License-Identifier: MIT
/*
 * Traced processes and the library instances they map: discovery in
 * /proc/PID/maps (through /proc/PID/root, so containers work), resolution
 * cached per file (dev, inode) so that the second rank costs nothing, and the
 * attachment of one entry and one return probe per function.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>
#include <bpf/libbpf.h>
#include "diag/diag.h"
#include "laststack.h"
#include "pystacks.h"
#include "python/params.h"
#include "session.h"
#include "target/proc.h"
#include "util/log.h"
#include "util/utf8.h"

struct ct_proc *ct_proc_find(struct ct_session *s, pid_t pid)
{
	for (int i = 0; i < s->n_procs; i++)
		if (s->procs[i]->pid == pid)
			return s->procs[i];
	return NULL;
}

struct ct_proc *ct_proc_add(struct ct_session *s, pid_t pid)
{
	struct ct_proc *p = ct_proc_find(s, pid);

	if (p)
		return p;
	if (s->n_procs == CT_MAX_TARGETS) {
		s->lost_procs++;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->stats = calloc(ct_catalog_size(), sizeof(*p->stats));
	if (!p->stats) {
		free(p);
		return NULL;
	}
	p->pid = pid;
	ct_tree_init(&p->tree);
	ct_proc_env_rank(p);
	if (!ct_proc_comm(pid, pid, p->comm, sizeof(p->comm)))
		ct_str_sanitize(p->comm);
	s->procs[s->n_procs++] = p;
	return p;
}

void ct_proc_env_rank(struct ct_proc *p)
{
	p->rank = ct_proc_rank_env(p->pid, &p->world, &p->rank_var);
	p->comm_world = 0;
}

const char *ct_proc_thread_name(struct ct_proc *p, pid_t tid)
{
	for (int i = 0; i < p->n_threads; i++)
		if (p->threads[i].tid == tid)
			return p->threads[i].name;
	return NULL;
}

void ct_proc_set_thread_name(struct ct_proc *p, pid_t tid, const char *name)
{
	for (int i = 0; i < p->n_threads; i++) {
		if (p->threads[i].tid == tid) {
			snprintf(p->threads[i].name, sizeof(p->threads[i].name), "%s", name);
			ct_str_sanitize(p->threads[i].name);
			return;
		}
	}
	if (p->n_threads == CT_MAX_THREADS)
		return; /* names only label output; the events themselves are all kept */
	p->threads[p->n_threads].tid = tid;
	snprintf(p->threads[p->n_threads].name, sizeof(p->threads[0].name), "%s", name);
	ct_str_sanitize(p->threads[p->n_threads].name);
	p->n_threads++;
}

static void file_free(struct ct_file *f)
{
	if (!f)
		return;
	ct_links_destroy(&f->links, 0);
	free(f->funcs);
	free(f->dtypes);
	free(f->ops);
	free(f);
}

/*
 * A function probed inside (struct ct_point) where its bytes are found: its entry moved
 * there and the same symbol's entry-and-return form dropped; else the point form dropped.
 */
static void place_point(struct ct_elf *e, const struct ct_libdesc *d, size_t i,
			struct ct_sym_found *funcs)
{
	const struct ct_point *pt = d->funcs[i].point;
	const char *env = getenv("COMMTRACE_PROBE_INSIDE");
	uint8_t code[256];
	size_t span = (size_t)pt->within + pt->len;
	int at = -1;

	if ((!env || strcmp(env, "0") != 0) && span <= sizeof(code) &&
	    !ct_elf_read_vaddr(e, funcs[i].addr, code, span))
		for (int k = 0; k <= pt->within && at < 0; k++)
			if (memcmp(code + k, pt->bytes, pt->len) == 0)
				at = k + pt->at;
	if (at < 0) {
		funcs[i].found = false;
		return;
	}
	funcs[i].file_off += (uint64_t)at;
	for (size_t j = 0; j < d->n_funcs; j++)
		if (j != i && !d->funcs[j].point &&
		    strcmp(d->funcs[j].symbol, d->funcs[i].symbol) == 0)
			funcs[j].found = false;
}

struct ct_file *ct_file_get(struct ct_session *s, const char *path, const struct ct_libdesc *d,
			    char *err, size_t errlen)
{
	size_t nf = d->n_funcs, nd = d->n_dtype_objects, no = d->n_op_objects, n = nf + nd + no;
	struct ct_sym_want *wants = NULL;
	struct ct_sym_found *found = NULL;
	struct ct_file *f = NULL;
	struct ct_elf *e = NULL;
	struct stat st;

	if (stat(path, &st)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	for (int i = 0; i < s->n_files; i++)
		if (s->files[i]->dev == st.st_dev && s->files[i]->ino == st.st_ino &&
		    s->files[i]->desc == d)
			return s->files[i];
	if (s->n_files == CT_MAX_FILES) {
		snprintf(err, errlen, "more than %d library files", CT_MAX_FILES);
		return NULL;
	}
	e = ct_elf_open(path, err, errlen);
	if (!e)
		return NULL;
	f = calloc(1, sizeof(*f));
	wants = calloc(n, sizeof(*wants));
	found = calloc(n, sizeof(*found));
	if (!f || !wants || !found)
		goto fail;
	for (size_t i = 0; i < nf; i++) {
		wants[i].name = d->funcs[i].symbol;
		wants[i].cxx = d->funcs[i].cxx;
	}
	for (size_t i = 0; i < nd; i++) {
		wants[nf + i].name = d->dtype_objects[i].symbol;
		wants[nf + i].object = true;
	}
	for (size_t i = 0; i < no; i++) {
		wants[nf + nd + i].name = d->op_objects[i].symbol;
		wants[nf + nd + i].object = true;
	}
	ct_elf_resolve(e, wants, n, found);
	f->funcs = calloc(nf ? nf : 1, sizeof(*f->funcs));
	f->dtypes = calloc(nd ? nd : 1, sizeof(*f->dtypes));
	f->ops = calloc(no ? no : 1, sizeof(*f->ops));
	if (!f->funcs || !f->dtypes || !f->ops)
		goto fail;
	for (size_t i = 0; i < nf; i++)
		if (d->funcs[i].point && found[i].found)
			place_point(e, d, i, found);
	for (size_t i = 0; i < nf; i++) {
		f->funcs[i] = found[i];
		if (!found[i].found)
			continue;
		/*
		 * A uprobe on endbr64 is single-stepped (~20 µs here); the instruction
		 * after it is usually emulated (~0.7 µs). endbr64 changes no register,
		 * so arguments and the return address are the same 4 bytes later.
		 */
		if (!d->funcs[i].point)
			f->funcs[i].file_off += ct_elf_endbr_len(e, found[i].addr);
		f->n_found++;
	}
	memcpy(f->dtypes, found + nf, nd * sizeof(*found));
	memcpy(f->ops, found + nf + nd, no * sizeof(*found));
	f->base_vaddr = ct_elf_base_vaddr(e);
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->desc = d;
	snprintf(f->path, sizeof(f->path), "%s", path);
	s->files[s->n_files++] = f;
	free(wants);
	free(found);
	ct_elf_close(e);
	return f;
fail:
	snprintf(err, errlen, "out of memory");
	free(wants);
	free(found);
	file_free(f);
	ct_elf_close(e);
	return NULL;
}

/* Mappings of known libraries, collected before acting on them. */
struct scan {
	struct ct_map *maps;
	int n, cap;
};

static int scan_push(struct scan *sc, const struct ct_map *m)
{
	if (sc->n == sc->cap) {
		int cap = sc->cap ? sc->cap * 2 : 16;
		struct ct_map *n = realloc(sc->maps, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		sc->maps = n;
		sc->cap = cap;
	}
	sc->maps[sc->n++] = *m;
	return 0;
}

static int collect(const struct ct_map *m, void *ctx)
{
	if (!m->path[0] || m->path[0] != '/' || !ct_catalog_match_file(m->path))
		return 0;
	return scan_push(ctx, m);
}

/* Runtime address of a symbol of this mapping's file (base_vaddr: ct_elf_base_vaddr), or 0. */
static uint64_t runtime_addr(const struct scan *sc, const char *path, uint64_t base_vaddr,
			     uint64_t vaddr)
{
	for (int i = 0; i < sc->n; i++) {
		const struct ct_map *m = &sc->maps[i];

		if (m->offset == 0 && strcmp(m->path, path) == 0)
			return m->start - base_vaddr + vaddr;
	}
	return 0;
}

struct exe_scan {
	char path[PATH_MAX];
	struct scan sc;
};

static int collect_exe(const struct ct_map *m, void *ctx)
{
	struct exe_scan *x = ctx;

	if (strcmp(m->path, x->path) != 0)
		return 0;
	return scan_push(&x->sc, m);
}

/*
 * A non-PIC executable that names a library's data object (MPI_DOUBLE is
 * &ompi_mpi_double) gets a copy relocation: the object then lives in the
 * executable, and that copy's address is the handle the calls pass.
 */
static void exe_copies(struct ct_proc *p, const struct ct_libdesc *d, struct ct_handles *h)
{
	size_t nd = d->n_dtype_objects, no = d->n_op_objects;
	struct ct_sym_want *wants = calloc(nd + no, sizeof(*wants));
	struct ct_sym_found *found = calloc(nd + no, sizeof(*found));
	struct exe_scan x = {{0}};
	char exe[64], err[256];
	struct ct_elf *e = NULL;
	ssize_t n;

	snprintf(exe, sizeof(exe), "/proc/%d/exe", p->pid);
	n = readlink(exe, x.path, sizeof(x.path) - 1);
	if (!wants || !found || n <= 0)
		goto out;
	x.path[n] = 0;
	e = ct_elf_open(exe, err, sizeof(err));
	if (!e)
		goto out;
	for (size_t i = 0; i < nd; i++)
		wants[i] = (struct ct_sym_want){.name = d->dtype_objects[i].symbol, .object = true};
	for (size_t i = 0; i < no; i++)
		wants[nd + i] =
		    (struct ct_sym_want){.name = d->op_objects[i].symbol, .object = true};
	if (ct_elf_resolve(e, wants, nd + no, found) <= 0 ||
	    ct_maps_foreach(p->pid, collect_exe, &x) < 0)
		goto out;
	for (size_t i = 0; i < nd + no; i++)
		if (found[i].found)
			*(i < nd ? &h->exe_dtypes[i] : &h->exe_ops[i - nd]) =
			    runtime_addr(&x.sc, x.path, ct_elf_base_vaddr(e), found[i].addr);
out:
	ct_elf_close(e);
	free(x.sc.maps);
	free(wants);
	free(found);
}

int ct_handles_alloc(struct ct_handles *h, const struct ct_libdesc *d)
{
	size_t nd = d->n_dtype_objects, no = d->n_op_objects;

	h->dtypes = calloc(2 * (nd + no) + 1, sizeof(uint64_t));
	if (!h->dtypes)
		return -ENOMEM;
	h->ops = h->dtypes + nd;
	h->exe_dtypes = h->ops + no;
	h->exe_ops = h->exe_dtypes + nd;
	return 0;
}

void ct_handles_free(struct ct_handles *h)
{
	free(h->dtypes);
	*h = (struct ct_handles){0};
}

static const struct ct_libinst *proc_lib(const struct ct_proc *p, const struct ct_libdesc *d)
{
	for (int i = 0; i < p->n_libs; i++)
		if (p->libs[i].file->desc == d)
			return &p->libs[i];
	return NULL;
}

const char *ct_dtype_name(const struct ct_proc *p, const struct ct_libdesc *d, uint64_t raw)
{
	const struct ct_named_value *v;
	const struct ct_libinst *li;

	if (d->n_dtypes) {
		v = ct_named_find(d->dtypes, d->n_dtypes, raw);
		return v ? v->name : NULL;
	}
	if (!d->n_dtype_objects || !raw)
		return NULL;
	li = proc_lib(p, d);
	if (!li)
		return NULL;
	for (size_t i = 0; i < d->n_dtype_objects; i++) {
		/* the library's object, or the executable's copy of it */
		if (li->handles.dtypes[i] == raw || li->handles.exe_dtypes[i] == raw)
			return d->dtype_objects[i].name;
	}
	return "derived"; /* a user-defined datatype: its size is still exact */
}

const char *ct_op_name(const struct ct_proc *p, const struct ct_libdesc *d, uint64_t raw)
{
	size_t no = d->n_op_objects;
	const struct ct_named_value *v;
	const struct ct_libinst *li;

	if (d->n_ops) {
		v = ct_named_find(d->ops, d->n_ops, raw);
		return v ? v->name : NULL;
	}
	if (!no || !raw)
		return NULL;
	li = proc_lib(p, d);
	if (!li)
		return NULL;
	for (size_t i = 0; i < no; i++)
		if (li->handles.ops[i] == raw || li->handles.exe_ops[i] == raw)
			return d->op_objects[i].name;
	return "user"; /* an MPI_Op_create op */
}

static bool already(const struct ct_proc *p, const char *path)
{
	for (int i = 0; i < p->n_libs; i++)
		if (strcmp(p->libs[i].path, path) == 0)
			return true;
	return false;
}

/*
 * Entry and return probes on every function found in f, opened as path (this process'
 * view of it: another process that shares the file may be gone), for p (NULL: for every
 * process, links kept by the file). The number of functions probed, or -ESRCH/-ENOENT.
 */
static int attach_file(struct ct_session *s, struct ct_proc *p, struct ct_file *f, const char *path)
{
	const struct ct_libdesc *d = f->desc;
	uint64_t *offs = calloc(2 * d->n_funcs + 1, sizeof(*offs)), *cookies;
	int rc = 0, done = 0;

	if (!offs)
		return -ENOMEM;
	cookies = offs + d->n_funcs;
	/* entry and return probes, then the probes inside functions (CT_PF_POINT) */
	for (int point = 0; point < 2 && rc >= 0; point++) {
		size_t n = 0;

		for (size_t i = 0; i < d->n_funcs; i++)
			if (f->funcs[i].found && !d->funcs[i].point == !point) {
				offs[n] = f->funcs[i].file_off;
				cookies[n++] = ct_catalog_base(d) + i;
			}
		rc = ct_bpf_attach_funcs(s, p ? p->pid : -1, path, offs, cookies, n, point,
					 p ? &p->links : &f->links);
		done += rc > 0 ? rc : 0;
	}
	free(offs);
	return rc < 0 ? rc : done;
}

/* A probe on the executable's entry point: all its startup libraries are mapped then. */
static int attach_entry(struct ct_session *s, struct ct_proc *p)
{
	char exe[64], err[256];
	struct ct_elf *e;
	uint64_t off;
	int rc;

	/* /proc/PID/exe names the inode itself, wherever the target's root is. */
	snprintf(exe, sizeof(exe), "/proc/%d/exe", p->pid);
	e = ct_elf_open(exe, err, sizeof(err));
	if (!e)
		return -ENOENT;
	rc = ct_elf_vaddr_to_off(e, ct_elf_entry(e), &off);
	ct_elf_close(e);
	return rc ? rc : ct_bpf_attach_entry(s, p->pid, exe, off, &p->links);
}

struct shared_scan {
	struct {
		unsigned int major, minor;
		uint64_t ino;
		int procs;
		pid_t last;
	} f[CT_MAX_FILES];
	int n;
	pid_t pid;
};

static bool same_file(unsigned int major, unsigned int minor, uint64_t ino, const struct ct_map *m)
{
	return major == m->dev_major && minor == m->dev_minor && ino == m->inode;
}

static int shared_collect(const struct ct_map *m, void *ctx)
{
	struct shared_scan *sc = ctx;
	const struct ct_libdesc *d;

	if (!strchr(m->perms, 'x') || m->path[0] != '/' || !m->inode)
		return 0;
	d = ct_catalog_match_file(m->path);
	if (!d || d == &ct_lib_ldso)
		return 0;
	for (int i = 0; i < sc->n; i++) {
		if (same_file(sc->f[i].major, sc->f[i].minor, sc->f[i].ino, m)) {
			sc->f[i].procs += sc->f[i].last != sc->pid;
			sc->f[i].last = sc->pid;
			return 0;
		}
	}
	if (sc->n < CT_MAX_FILES)
		sc->f[sc->n++] =
		    (typeof(sc->f[0])){m->dev_major, m->dev_minor, m->inode, 1, sc->pid};
	return 0;
}

int ct_procs_find_shared(struct ct_session *s, const pid_t *pids, int n)
{
	const char *env = getenv("COMMTRACE_FILE_WIDE");
	int min = env && *env ? atoi(env) : CT_WIDE_MIN;
	struct shared_scan *sc;

	s->n_shared = 0;
	if (min <= 0 || n < min)
		return 0;
	sc = calloc(1, sizeof(*sc));
	if (!sc)
		return 0; /* per process, as without */
	for (int i = 0; i < n; i++) {
		sc->pid = pids[i];
		ct_maps_foreach(pids[i], shared_collect, sc);
	}
	for (int i = 0; i < sc->n; i++) {
		if (sc->f[i].procs < min)
			continue;
		s->shared[s->n_shared].major = sc->f[i].major;
		s->shared[s->n_shared].minor = sc->f[i].minor;
		s->shared[s->n_shared++].ino = sc->f[i].ino;
	}
	free(sc);
	return s->n_shared;
}

static bool shared_file(const struct ct_session *s, const struct ct_map *m)
{
	for (int i = 0; i < s->n_shared; i++)
		if (same_file(s->shared[i].major, s->shared[i].minor, s->shared[i].ino, m))
			return true;
	return false;
}

/* path: how the tracer opens the file of m (ct_map_open_path). */
static int attach_lib(struct ct_session *s, struct ct_proc *p, const struct scan *sc,
		      const struct ct_map *m, struct ct_file *f, const char *path)
{
	const struct ct_libdesc *d = f->desc;
	struct ct_libinst *li;
	bool wide;
	int n;

	if (p->n_libs == CT_MAX_LIBINST) {
		fprintf(stderr, "commtrace: pid %d maps more than %d known libraries; %s ignored\n",
			p->pid, CT_MAX_LIBINST, m->path);
		return -ENOSPC;
	}
	li = &p->libs[p->n_libs];
	memset(li, 0, sizeof(*li));
	li->file = f;
	snprintf(li->path, sizeof(li->path), "%s", m->path);
	if (ct_handles_alloc(&li->handles, d))
		return -ENOMEM;
	for (size_t i = 0; i < d->n_dtype_objects; i++)
		if (f->dtypes[i].found)
			li->handles.dtypes[i] =
			    runtime_addr(sc, m->path, f->base_vaddr, f->dtypes[i].addr);
	for (size_t i = 0; i < d->n_op_objects; i++)
		if (f->ops[i].found)
			li->handles.ops[i] =
			    runtime_addr(sc, m->path, f->base_vaddr, f->ops[i].addr);
	if (d->n_dtype_objects || d->n_op_objects)
		exe_copies(p, d, &li->handles);
	p->n_libs++;

	/*
	 * Launch mode attaches to the file once, for every process that maps it now
	 * or later (BPF keeps only the traced ones): a rank that maps a library its
	 * launcher already mapped is covered from its first instruction. By pid, so
	 * does a file that many of the processes share (ct_procs_find_shared).
	 */
	wide = s->opts->cmd || (shared_file(s, m) && !f->per_pid);
	if (wide && f->wide)
		return 0;
	n = attach_file(s, wide ? NULL : p, f, path);
	if (n < 0)
		return n; /* the process is gone */
	li->n_probes = n;
	f->wide = wide;
	f->per_pid |= !wide;
	ct_info("commtrace: pid %d: %d probes on %s (%s)\n", p->pid, n, m->path, d->name);
	return n;
}

int ct_proc_scan(struct ct_session *s, struct ct_proc *p)
{
	struct scan sc = {0};
	char host[PATH_MAX], err[512];
	int added = 0, rc;

	rc = ct_maps_foreach(p->pid, collect, &sc);
	if (rc < 0) {
		free(sc.maps);
		return rc;
	}
	if (p->rank < 0)
		ct_proc_env_rank(p);
	p->attached = true;
	for (int i = 0; i < sc.n; i++) {
		const struct ct_map *m = &sc.maps[i];
		const struct ct_libdesc *d = ct_catalog_match_file(m->path);
		struct ct_file *f;

		if (!strchr(m->perms, 'x') || already(p, m->path))
			continue;
		/* without stacks, such a library's probes would be hits for nothing (46 a
		 * step and rank on the torch 2.6 TP job: libtorch_python's autograd contexts) */
		if (d && d->stacks_only && s->opts->no_stacks)
			continue;
		rc = ct_map_open_path(p->pid, m, host, sizeof(host));
		if (rc == -ESRCH) {
			free(sc.maps);
			return rc;
		}
		if (rc) {
			fprintf(stderr,
				"commtrace: pid %d: %s: no path opens the file it maps (%s); not "
				"attached\n",
				p->pid, m->path, strerror(-rc));
			continue;
		}
		if (d == &ct_lib_ldso) {
			rc = ct_attach_ldso(s, host);
			if (rc && rc != -ENOENT)
				ct_info("commtrace: %s: %s\n", host, strerror(-rc));
			continue;
		}
		f = ct_file_get(s, host, d, err, sizeof(err));
		if (!f) {
			fprintf(stderr, "commtrace: pid %d: %s\n", p->pid, err);
			continue;
		}
		if (f->n_found == 0) {
			ct_info("commtrace: pid %d: %s has none of the %s functions\n", p->pid,
				m->path, d->name);
			continue;
		}
		rc = attach_lib(s, p, &sc, m, f, host);
		if (rc == -ESRCH || rc == -ENOENT) {
			free(sc.maps);
			return -ESRCH;
		}
		if (rc > 0)
			added++;
	}
	free(sc.maps);
	/* Stacks only matter where collectives are traced. */
	if (ct_proc_comm_libs(p))
		ct_py_attach_proc(s, p);
	return added;
}

int ct_proc_comm_libs(const struct ct_proc *p)
{
	int n = 0;

	for (int i = 0; i < p->n_libs; i++)
		n += !p->libs[i].file->desc->aux;
	return n;
}

bool ct_proc_has_lib(const struct ct_proc *p, int lib)
{
	for (int i = 0; i < p->n_libs; i++)
		if (p->libs[i].file->desc->lib == lib)
			return true;
	return false;
}

int ct_attach_ldso(struct ct_session *s, const char *path)
{
	char err[256];
	struct ct_file *f;
	struct stat st;
	int rc;

	if (stat(path, &st))
		return -errno;
	for (int i = 0; i < s->n_ldso; i++)
		if (s->ldso_files[i].dev == st.st_dev && s->ldso_files[i].ino == st.st_ino)
			return 0;
	if (s->n_ldso == (int)ARRAY_LEN(s->ldso_files))
		return -ENOSPC;
	f = ct_file_get(s, path, &ct_lib_ldso, err, sizeof(err));
	if (!f || !f->funcs[0].found) {
		ct_info("commtrace: no _dl_debug_state in %s: libraries loaded later are found "
			"by polling only\n",
			path);
		return -ENOENT;
	}
	rc = ct_bpf_attach_ldso(s, f->path, f->funcs[0].file_off);
	if (rc)
		return rc;
	s->ldso_files[s->n_ldso].dev = st.st_dev;
	s->ldso_files[s->n_ldso].ino = st.st_ino;
	s->n_ldso++;
	return 0;
}

void ct_proc_detach(struct ct_session *s, struct ct_proc *p)
{
	ct_links_destroy_async(&p->links);
	for (int i = 0; i < p->n_libs; i++)
		ct_handles_free(&p->libs[i].handles);
	p->n_libs = 0;
}

void ct_proc_exited(struct ct_session *s, struct ct_proc *p, int exit_code)
{
	p->exited = true;
	p->exit_code = exit_code;
	ct_diag_proc_exit(s->diag, p->pid);
	ct_proc_detach(s, p);
	ct_last_stacks_free(p->last_stacks); /* no call of it follows */
	p->last_stacks = NULL;
}

void ct_targets_proc_event(struct ct_session *s, const struct ct_proc_event *ev)
{
	struct ct_proc *p = ct_proc_find(s, ev->hdr.pid), *c;
	int rc;

	switch (ev->hdr.type) {
	case CT_EV_FORK:
		c = ct_proc_add(s, ev->child);
		if (!c) {
			fprintf(stderr, "commtrace: more than %d processes: pid %u not traced\n",
				CT_MAX_TARGETS, ev->child);
			return;
		}
		ct_info("commtrace: pid %u forked %u\n", ev->hdr.pid, ev->child);
		/* A fork without exec keeps the parent's libraries: attach now. */
		ct_proc_scan(s, c);
		break;
	case CT_EV_EXEC:
		if (!p)
			p = ct_proc_add(s, ev->hdr.pid);
		if (!p)
			return;
		/* The old image is gone, and with it what was attached to it. */
		ct_proc_detach(s, p);
		memcpy(p->comm, ev->comm, sizeof(p->comm) - 1);
		ct_proc_env_rank(p);
		ct_info("commtrace: pid %u exec'ed %s (rank %d)\n", p->pid, p->comm, p->rank);
		/*
		 * glibc does not call _dl_debug_state for the libraries loaded at
		 * startup: a probe on the entry point says when they are all there.
		 */
		rc = attach_entry(s, p);
		if (rc)
			ct_info("commtrace: pid %u: no entry-point probe (%s)\n", p->pid,
				strerror(-rc));
		ct_proc_scan(s, p);
		break;
	case CT_EV_DLOPEN:
		if (!p)
			return;
		rc = ct_proc_scan(s, p);
		if (rc > 0)
			ct_info("commtrace: pid %u: %d new libraries\n", p->pid, rc);
		break;
	case CT_EV_EXIT:
		if (!p || p->exited)
			return;
		ct_proc_exited(s, p, ev->exit_code);
		ct_info("commtrace: pid %u exited\n", p->pid);
		break;
	}
}

/* Library directories of the dynamic linker's default search: ld.so.conf and the built-ins. */
static int lib_dirs(char dirs[][PATH_MAX], int max)
{
	static const char *const builtin[] = {"/lib",
					      "/usr/lib",
					      "/lib64",
					      "/usr/lib64",
					      "/lib/x86_64-linux-gnu",
					      "/usr/lib/x86_64-linux-gnu"};
	char line[PATH_MAX];
	int n = 0;
	DIR *d;

	for (size_t i = 0; i < ARRAY_LEN(builtin) && n < max; i++)
		snprintf(dirs[n++], PATH_MAX, "%s", builtin[i]);
	/* Debian's ld.so.conf only includes the files of ld.so.conf.d: read those directly. */
	d = opendir("/etc/ld.so.conf.d");
	while (d && n < max) {
		struct dirent *e = readdir(d);
		char conf[PATH_MAX];
		FILE *f;

		if (!e)
			break;
		if (!strstr(e->d_name, ".conf"))
			continue;
		snprintf(conf, sizeof(conf), "/etc/ld.so.conf.d/%s", e->d_name);
		f = fopen(conf, "re");
		while (f && n < max && fgets(line, sizeof(line), f)) {
			line[strcspn(line, " \t\r\n#")] = 0;
			if (line[0] == '/')
				snprintf(dirs[n++], PATH_MAX, "%s", line);
		}
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return n;
}

int ct_prescan_system_libs(struct ct_session *s)
{
	char(*dirs)[PATH_MAX] = calloc(32, PATH_MAX);
	char path[PATH_MAX], real[PATH_MAX], err[512];
	int ndirs, attached = 0;

	if (!dirs)
		return -ENOMEM;
	ndirs = lib_dirs(dirs, 32);
	for (int i = 0; i < ndirs; i++) {
		DIR *d = opendir(dirs[i]);
		struct dirent *e;

		while (d && (e = readdir(d))) {
			const struct ct_libdesc *desc = ct_catalog_match_file(e->d_name);
			struct ct_file *f;
			int n;

			if (!desc || desc == &ct_lib_ldso || !strstr(e->d_name, ".so"))
				continue;
			snprintf(path, sizeof(path), "%s/%s", dirs[i], e->d_name);
			if (!realpath(path, real))
				continue;
			/* By the file itself: libtorch_cpu.so links to libtorch_cpu.so.1.13, and
			 * the versioned name picks the layout (two names, one description). */
			desc = ct_catalog_match_file(real);
			if (!desc)
				continue;
			f = ct_file_get(s, real, desc, err, sizeof(err));
			if (!f || f->wide || !f->n_found)
				continue;
			n = attach_file(s, NULL, f, f->path);
			attached += n > 0 ? n : 0;
			f->wide = true;
			ct_info("commtrace: pre-attached %s (%s)\n", real, desc->name);
		}
		if (d)
			closedir(d);
	}
	free(dirs);
	return attached;
}

int ct_session_live_procs(struct ct_session *s)
{
	int n = 0;

	for (int i = 0; i < s->n_procs; i++)
		if (!s->procs[i]->exited)
			n++;
	return n;
}

void ct_session_free(struct ct_session *s)
{
	for (int i = 0; i < s->n_procs; i++) {
		struct ct_proc *p = s->procs[i];

		ct_proc_detach(s, p);
		for (size_t k = 0; k < ct_catalog_size(); k++)
			free(p->stats[k]);
		free(p->stats);
		ct_tree_free(&p->tree);
		ct_params_free(p->params);
		ct_last_stacks_free(p->last_stacks);
		free(p->ops);
		free(p);
	}
	s->n_procs = 0;
	free(s->whole);
	s->whole = NULL;
	for (int i = 0; i < s->n_files; i++)
		file_free(s->files[i]);
	s->n_files = 0;
}
