// SPDX-License-Identifier: MIT
/* Detecting a CPython in a target process: interpreter file, version, _PyRuntime, offsets. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "commtrace/abi.h"
#include "commtrace/pyoffsets.h"
#include "elf/elfsym.h"
#include "python/pyproc.h"
#include "target/proc.h"

#define PY_MAX_MAPS	   32	    /* mappings of one interpreter file (5-8 seen) */
#define PY_DEBUG_MAX	   4096	    /* _Py_DebugOffsets is 584 bytes in 3.13 */
#define PY_DEBUG_FIELD_MAX 0x100000 /* no CPython struct is anywhere near 1 MiB */

int ct_py_read_fresh(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = {.iov_base = buf, .iov_len = len};
	struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
	ssize_t n;

	if (!len)
		return 0;
	if (!addr)
		return -EFAULT;
	n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

/* Remote iovecs per call: the kernel's UIO_MAXIOV. */
#define READ_MANY_IOV 1024

static int read_many_fresh(pid_t pid, const uint64_t *addrs, size_t n, size_t len, void *buf,
			   bool *ok)
{
	struct iovec remote[READ_MANY_IOV];
	size_t i = 0;

	if (!len) {
		for (size_t j = 0; j < n; j++)
			ok[j] = true;
		return 0;
	}
	while (i < n) {
		size_t k = n - i < READ_MANY_IOV ? n - i : READ_MANY_IOV, done;
		struct iovec local = {.iov_base = (char *)buf + i * len, .iov_len = k * len};
		ssize_t got;

		for (size_t j = 0; j < k; j++)
			remote[j] = (struct iovec){.iov_base = (void *)(uintptr_t)addrs[i + j],
						   .iov_len = len};
		got = process_vm_readv(pid, &local, 1, remote, k, 0);
		if (got < 0 && errno != EFAULT)
			return -errno;
		/* Whole regions only: the kernel stops at the first one it cannot read. */
		done = got > 0 ? (size_t)got / len : 0;
		for (size_t j = 0; j < done; j++)
			ok[i + j] = true;
		if (done < k)
			ok[i + done++] = false; /* unreadable: go on after it */
		i += done;
	}
	return 0;
}

/*
 * The snapshot (ct_py_snapshot_begin): aligned lines of the target read whole, direct-mapped.
 * A line never straddles a page, so it reads whenever any byte of it the caller wanted does.
 */
#define SNAP_LINE  1024
#define SNAP_LINES 64

static _Thread_local struct {
	pid_t pid;		   /* 0: no snapshot */
	uint64_t line[SNAP_LINES]; /* address + 1 of the line held, 0 for none */
	uint8_t data[SNAP_LINES][SNAP_LINE];
	struct ct_py_snapshot_stats stats;
} snap;

void ct_py_snapshot_begin(pid_t pid)
{
	snap.pid = pid;
	memset(snap.line, 0, sizeof(snap.line));
}

void ct_py_snapshot_end(void)
{
	snap.pid = 0;
}

struct ct_py_snapshot_stats ct_py_snapshot_stats(void)
{
	return snap.stats;
}

/* Where the region of len bytes at addr lies in one line: that line's address, else 0. */
static uint64_t line_of(uint64_t addr, size_t len)
{
	uint64_t base = addr & ~(uint64_t)(SNAP_LINE - 1);

	return addr && len <= SNAP_LINE - (addr - base) ? base : 0;
}

static size_t slot_of(uint64_t base)
{
	return (base / SNAP_LINE) % SNAP_LINES;
}

static const uint8_t *line_held(uint64_t base)
{
	return snap.line[slot_of(base)] == base + 1 ? snap.data[slot_of(base)] : NULL;
}

static void line_keep(uint64_t base, const uint8_t *data)
{
	memcpy(snap.data[slot_of(base)], data, SNAP_LINE);
	snap.line[slot_of(base)] = base + 1;
	snap.stats.lines_read++;
}

/* The len bytes at addr, in the line base: from the snapshot, or read into it. */
static int snap_read(uint64_t base, uint64_t addr, void *buf, size_t len)
{
	const uint8_t *held = line_held(base);
	uint8_t data[SNAP_LINE];

	if (held) {
		snap.stats.hits++;
	} else {
		int err = ct_py_read_fresh(snap.pid, base, data, SNAP_LINE);

		if (err)
			return err;
		line_keep(base, data);
		held = data;
	}
	memcpy(buf, held + (addr - base), len);
	return 0;
}

static _Thread_local struct {
	pid_t pid; /* 0: none */
	const struct ct_capture_event *ev;
} cap;

void ct_py_captured_begin(pid_t pid, const struct ct_capture_event *ev)
{
	cap.pid = ev && ev->n ? pid : 0;
	cap.ev = ev;
}

void ct_py_captured_end(void)
{
	cap.pid = 0;
}

/* The len bytes at addr from a region copied at the call; false where none holds them all. */
static bool captured(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	if (!cap.pid || pid != cap.pid)
		return false;
	for (uint32_t i = 0; i < cap.ev->n && i < CT_CAP_REGIONS; i++) {
		uint64_t at = cap.ev->r[i].addr;

		if (addr >= at && len <= CT_CAP_BYTES && addr - at <= CT_CAP_BYTES - len) {
			memcpy(buf, cap.ev->r[i].data + (addr - at), len);
			return true;
		}
	}
	return false;
}

int ct_py_read_mem(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	uint64_t base = line_of(addr, len);
	size_t first;
	int err;

	if (captured(pid, addr, buf, len))
		return 0;
	if (!snap.pid || pid != snap.pid || !addr || !len || len > SNAP_LINE || addr + len < addr)
		return ct_py_read_fresh(pid, addr, buf, len);
	if (base)
		return snap_read(base, addr, buf, len);
	/* Across two lines: where the second cannot be read, the read is short, as it would be. */
	first = SNAP_LINE - (size_t)(addr & (SNAP_LINE - 1));
	err = snap_read(line_of(addr, first), addr, buf, first);
	return err ? err
		   : snap_read(addr + first, addr + first, (uint8_t *)buf + first, len - first);
}

/*
 * Inside a snapshot: the regions in lines held are copied, the lines missing are read in one
 * batch and kept, a region across two lines is read as ct_py_read_mem() reads it.
 */
int ct_py_read_many(pid_t pid, const uint64_t *addrs, size_t n, size_t len, void *buf, bool *ok)
{
	uint64_t *lines;
	size_t *idx, m = 0;
	uint8_t *data;
	bool *lok;
	int err;

	if (cap.pid && pid == cap.pid) {
		/* rare (a dict's keys of a captured object's type): one at a time */
		for (size_t i = 0; i < n; i++)
			ok[i] = !ct_py_read_mem(pid, addrs[i], (uint8_t *)buf + i * len, len);
		return 0;
	}
	if (!snap.pid || pid != snap.pid || !len || len > SNAP_LINE || !n)
		return read_many_fresh(pid, addrs, n, len, buf, ok);
	lines = malloc(n * sizeof(*lines));
	idx = malloc(n * sizeof(*idx));
	data = malloc(n * SNAP_LINE);
	lok = malloc(n * sizeof(*lok));
	err = !lines || !idx || !data || !lok ? -ENOMEM : 0;
	for (size_t i = 0; !err && i < n; i++) {
		uint64_t base = line_of(addrs[i], len);
		uint8_t *dst = (uint8_t *)buf + i * len;
		const uint8_t *held = base ? line_held(base) : NULL;

		idx[i] = SIZE_MAX;
		if (!base) {
			ok[i] = !ct_py_read_mem(pid, addrs[i], dst, len);
		} else if (held) {
			memcpy(dst, held + (addrs[i] - base), len);
			ok[i] = true;
			snap.stats.hits++;
		} else {
			size_t j = m;

			/* Keys made together lie together: a line wanted just before is read once.
			 */
			while (j > 0 && m - j < 8 && lines[j - 1] != base)
				j--;
			if (j > 0 && lines[j - 1] == base) {
				idx[i] = j - 1;
			} else {
				idx[i] = m;
				lines[m++] = base;
			}
		}
	}
	if (!err && m)
		err = read_many_fresh(pid, lines, m, SNAP_LINE, data, lok);
	/* Copied out before any is kept: two of them may take the same slot. */
	for (size_t i = 0; !err && i < n; i++) {
		if (idx[i] == SIZE_MAX)
			continue;
		ok[i] = lok[idx[i]];
		if (ok[i])
			memcpy((uint8_t *)buf + i * len,
			       data + idx[i] * SNAP_LINE + (addrs[i] - lines[idx[i]]), len);
	}
	for (size_t j = 0; !err && j < m; j++)
		if (lok[j])
			line_keep(lines[j], data + j * SNAP_LINE);
	free(lines);
	free(idx);
	free(data);
	free(lok);
	return err;
}

static int parse_minor(const char **pp, int *major, int *minor)
{
	const char *p = *pp;
	char *end;
	long v;

	if (p[0] != '3' || p[1] != '.' || p[2] < '0' || p[2] > '9')
		return -EINVAL;
	v = strtol(p + 2, &end, 10);
	if (v < 0 || v > 99)
		return -EINVAL;
	*major = 3;
	*minor = (int)v;
	*pp = end;
	return 0;
}

int ct_py_parse_name(const char *base, int *major, int *minor, bool *is_lib, char *abiflags,
		     size_t flagslen)
{
	const char *p = base;
	size_t nflags = 0;

	if (!strncmp(p, "libpython", 9)) {
		*is_lib = true;
		p += 9;
	} else if (!strncmp(p, "python", 6)) {
		*is_lib = false;
		p += 6;
	} else {
		return -EINVAL;
	}
	if (parse_minor(&p, major, minor))
		return -EINVAL;
	/* ABI flags of PEP 3149 ("d" debug, "t" free-threaded since 3.13). */
	while (*p >= 'a' && *p <= 'z') {
		if (nflags + 1 < flagslen)
			abiflags[nflags++] = *p;
		p++;
	}
	if (flagslen)
		abiflags[nflags < flagslen ? nflags : flagslen - 1] = '\0';
	if (*is_lib)
		return !strncmp(p, ".so", 3) && (p[3] == '\0' || p[3] == '.') ? 0 : -EINVAL;
	return *p ? -EINVAL : 0;
}

struct py_cand {
	bool found;
	int major, minor;
	char flags[8];
	char path[PATH_MAX];
	struct ct_map first; /* its first mapping: how the file is opened (ct_map_open_path) */
	int nmaps;
	uint64_t start[PY_MAX_MAPS], offset[PY_MAX_MAPS];
};

struct scan_ctx {
	struct py_cand lib, exe;
};

static int scan_map(const struct ct_map *m, void *arg)
{
	struct scan_ctx *ctx = arg;
	const char *base = strrchr(m->path, '/');
	struct py_cand *c;
	int major, minor;
	char flags[8];
	bool is_lib;

	if (!base || m->deleted)
		return 0;
	if (ct_py_parse_name(base + 1, &major, &minor, &is_lib, flags, sizeof(flags)))
		return 0;
	c = is_lib ? &ctx->lib : &ctx->exe;
	if (c->found && strcmp(c->path, m->path))
		return 0; /* a second interpreter file (embedding two is not supported) */
	if (!c->found) {
		c->found = true;
		c->major = major;
		c->minor = minor;
		snprintf(c->flags, sizeof(c->flags), "%s", flags);
		snprintf(c->path, sizeof(c->path), "%s", m->path);
		c->first = *m;
	}
	if (c->nmaps < PY_MAX_MAPS) {
		c->start[c->nmaps] = m->start;
		c->offset[c->nmaps] = m->offset;
		c->nmaps++;
	}
	return 0;
}

/*
 * Run-time address of a file offset: the mapping with the highest file offset not above
 * it belongs to the same PT_LOAD segment (offsets grow with addresses), and the .bss tail
 * of that segment continues its addresses in an anonymous mapping.
 */
static int file_off_to_addr(const struct py_cand *c, uint64_t off, uint64_t *addr)
{
	int best = -1;

	for (int i = 0; i < c->nmaps; i++)
		if (c->offset[i] <= off && (best < 0 || c->offset[i] >= c->offset[best]))
			best = i;
	if (best < 0)
		return -ENOENT;
	*addr = c->start[best] + (off - c->offset[best]);
	return 0;
}

/* "CPython 3.9 in /usr/bin/python3.9 is ...: no Python stacks", for the user, one line. */
__attribute__((format(printf, 2, 3))) static void notice(struct ct_pyproc *out, const char *fmt,
							 ...)
{
	char why[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	snprintf(out->notice, sizeof(out->notice), "CPython %d.%d in %.*s %s: no Python stacks",
		 out->major, out->minor, 200, out->path, why);
}

static uint64_t rd64(const unsigned char *buf, size_t at)
{
	uint64_t v;

	memcpy(&v, buf + at, sizeof(v));
	return v;
}

/*
 * Apply the _Py_DebugOffsets found at the start of _PyRuntime. For a version with a
 * generated table, each carried field is compared and the process's own value wins (it
 * describes the code actually running). For a newer version the generated table of the
 * newest version is the base and the carried fields replace it; what the debug offsets
 * do not carry is set to what is safe: no C-stack owner value (its numbering changed in
 * 3.14), and compact non-ASCII strings at asciiobject_size + 16 (PyCompactUnicodeObject
 * since PEP 623 removed wstr_length in 3.12).
 */
static int apply_debug(const struct ct_py_debug_layout *l, const unsigned char *buf, bool known,
		       struct ct_pyproc *out)
{
	struct ct_py_offsets *o = &out->offsets;

	if (!known) {
		const struct ct_py_debug_layout *newest = ct_py_debug_layout_for(3, 99);

		*o = *ct_py_offsets_for(newest->major, newest->minor);
	}
	uint64_t ver = rd64(buf, l->version);
	int mism = 0;

	if (memcmp(buf, "xdebugpy", 8))
		return -ENODATA;
	if ((int)(ver >> 24 & 0xff) != out->major || (int)(ver >> 16 & 0xff) != out->minor)
		return -EPROTO;
	if (rd64(buf, l->free_threaded)) {
		notice(out, "is a free-threaded build, whose object layout is not supported");
		return -ENOTSUP;
	}
	out->version_hex = ver;

	/* Each field: the section's size bounds its offsets; a layout misread fails here. */
	struct {
		__u16 at, size_at;
		__u16 *dst;
	} f[] = {
	    {l->runtime_interp_head, l->runtime_size, &o->runtime_interp_head},
	    {l->interp_threads_head, l->interp_size, &o->interp_threads_head},
	    {l->tstate_next, l->tstate_size, &o->tstate_next},
	    {l->tstate_native_tid, l->tstate_size, &o->tstate_native_tid},
	    {l->tstate_frame, l->tstate_size, &o->tstate_frame},
	    {l->frame_previous, l->frame_size, &o->frame_previous},
	    {l->frame_code, l->frame_size, &o->frame_code},
	    {l->frame_instr, l->frame_size, &o->frame_instr},
	    {l->frame_localsplus, l->frame_size, &o->frame_localsplus},
	    {l->frame_owner, l->frame_size, &o->frame_owner},
	    {l->code_filename, l->code_size, &o->code_filename},
	    {l->code_name, l->code_size, &o->code_name},
	    {l->code_qualname, l->code_size, &o->code_qualname},
	    {l->code_linetable, l->code_size, &o->code_linetable},
	    {l->code_firstlineno, l->code_size, &o->code_firstlineno},
	    {l->code_adaptive, l->code_size, &o->code_adaptive},
	    {l->object_type, l->object_size, &o->object_type},
	    {l->type_name, l->type_size, &o->type_name},
	    {l->bytes_size, l->bytes_obj_size, &o->bytes_size},
	    {l->bytes_data, l->bytes_obj_size, &o->bytes_data},
	    {l->unicode_state, l->unicode_size, &o->unicode_state},
	    {l->unicode_length, l->unicode_size, &o->unicode_length},
	    {l->unicode_ascii_data, l->unicode_size, &o->unicode_ascii_data},
	};
	uint64_t vals[sizeof(f) / sizeof(f[0])];

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		uint64_t size = rd64(buf, f[i].size_at);

		vals[i] = rd64(buf, f[i].at);
		/* asciiobject_size is a size, so it may equal the section size. */
		if (!size || size > PY_DEBUG_FIELD_MAX || vals[i] > size || vals[i] >= CT_PY_NONE)
			return -EPROTO;
	}
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		if (known && *f[i].dst != vals[i])
			mism++;
		*f[i].dst = (__u16)vals[i];
	}
	if (!known) {
		o->major = (__u16)out->major;
		o->minor = (__u16)out->minor;
		o->cframe_current_frame = CT_PY_NONE;
		o->owner_cstack = 0xff;
		o->instr_is_index = 0;
		o->code_code = CT_PY_NONE;
		/* The debug offsets carry native_thread_id; thread_id is not needed then. */
		o->tstate_thread_id = CT_PY_NONE;
		o->frame_func =
		    CT_PY_NONE; /* not in the debug offsets: no looking through wrappers */
		/* Nor these: no code object is ever trusted as known (every stack wakes). */
		o->code_version = o->unicode_hash = CT_PY_NONE;
		/* nor the locals' kinds: a frame's first local is always looked into */
		o->code_localspluskinds = CT_PY_NONE;
		o->fast_cell_kinds = 0;
		o->unicode_compact_data = o->unicode_ascii_data + 16;
	}
	out->debug_mismatches = mism;
	out->from_debug = true;
	return 0;
}

int ct_py_apply_debug_offsets(const void *buf, size_t len, bool known, struct ct_pyproc *out)
{
	const struct ct_py_debug_layout *l = ct_py_debug_layout_for(out->major, out->minor);

	if (!l || len < l->size)
		return -ENODATA;
	return apply_debug(l, buf, known, out);
}

static int read_debug(pid_t pid, struct ct_elf *e, uint64_t runtime_vaddr, bool known,
		      struct ct_pyproc *out)
{
	const struct ct_py_debug_layout *l = ct_py_debug_layout_for(out->major, out->minor);
	unsigned char buf[PY_DEBUG_MAX];
	int err;

	if (!l || l->size > sizeof(buf))
		return -ENODATA;
	err = ct_py_read_mem(pid, out->runtime_addr, buf, l->size);
	/* The table is statically initialized: the file image holds the same bytes. */
	if (err)
		err = ct_elf_read_vaddr(e, runtime_vaddr, buf, l->size);
	if (err)
		return err;
	return ct_py_apply_debug_offsets(buf, l->size, known, out);
}

static int detect(pid_t pid, const struct py_cand *c, struct ct_pyproc *out)
{
	struct ct_sym_want wants[] = {
	    {.name = "_PyRuntime", .object = true},
	    {.name = "Py_Version", .object = true}, /* exported since 3.11 */
	    {.name = "PyCell_Type", .object = true},
	    {.name = "PyCode_Type", .object = true},
	};
	struct ct_sym_found found[4] = {};
	const struct ct_py_offsets *tab;
	char err[256];
	struct ct_elf *e;
	uint64_t ver;
	int ret;

	snprintf(out->path, sizeof(out->path), "%s", c->path);
	out->major = c->major;
	out->minor = c->minor;
	ret = ct_map_open_path(pid, &c->first, out->open_path, sizeof(out->open_path));
	if (ret)
		return ret;
	e = ct_elf_open(out->open_path, err, sizeof(err));
	if (!e)
		return -ENOENT;
	ct_elf_resolve(e, wants, 4, found);
	if (!found[0].found) {
		ret = -ENOENT; /* a python3.X executable linked against libpython: not ours */
		goto out;
	}
	if (found[1].found && !ct_elf_read_vaddr(e, found[1].addr, &ver, sizeof(ver))) {
		out->version_hex = ver;
		out->major = (int)(ver >> 24 & 0xff);
		out->minor = (int)(ver >> 16 & 0xff);
	}
	ret = file_off_to_addr(c, found[0].file_off, &out->runtime_addr);
	if (ret)
		goto out;
	out->load_bias = out->runtime_addr - found[0].addr;
	if (found[2].found && file_off_to_addr(c, found[2].file_off, &out->cell_type_addr))
		out->cell_type_addr = 0;
	if (found[3].found && file_off_to_addr(c, found[3].file_off, &out->code_type_addr))
		out->code_type_addr = 0;

	if (strchr(c->flags, 't')) {
		notice(out, "is a free-threaded build, whose object layout is not supported");
		ret = -ENOTSUP;
		goto out;
	}
	tab = ct_py_offsets_for(out->major, out->minor);
	if (tab)
		out->offsets = *tab;
	if (out->major == 3 && out->minor >= 13) {
		ret = read_debug(pid, e, found[0].addr, tab != NULL, out);
		if (ret == -ENOTSUP || (ret && !tab)) {
			if (ret != -ENOTSUP)
				notice(out,
				       "is a version without generated offsets and "
				       "without usable _Py_DebugOffsets (%s)",
				       strerror(-ret));
			ret = -ENOTSUP;
			goto out;
		}
		ret = 0; /* a known version keeps its generated table */
	} else if (!tab) {
		notice(out, "is a version without generated offsets (3.10-3.13 are known)");
		ret = -ENOTSUP;
	}
out:
	ct_elf_close(e);
	return ret;
}

int ct_py_detect(pid_t pid, struct ct_pyproc *out)
{
	struct scan_ctx *ctx;
	int ret;

	memset(out, 0, sizeof(*out));
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ret = ct_maps_foreach(pid, scan_map, ctx);
	if (ret < 0)
		goto out;
	ret = -ENOENT;
	/* A shared libpython holds the runtime even when python3.X is mapped too (pyenv). */
	if (ctx->lib.found)
		ret = detect(pid, &ctx->lib, out);
	if (ret == -ENOENT && ctx->exe.found) {
		memset(out, 0, sizeof(*out));
		ret = detect(pid, &ctx->exe, out);
	}
out:
	free(ctx);
	return ret;
}
