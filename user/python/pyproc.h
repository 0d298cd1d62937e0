/* SPDX-License-Identifier: MIT */
/*
 * Finding a CPython in a target process: which interpreter (libpython3.X.so or a
 * statically linked python3.X), its version, where _PyRuntime sits at run time, and the
 * struct ct_py_offsets the BPF frame walker and the symbolizer use. For 3.13+ the
 * offsets are cross-checked against (or, for a version newer than the generated
 * tables, filled from) the _Py_DebugOffsets that CPython keeps at the start of
 * _PyRuntime for out-of-process tools.
 */
#ifndef CT_PYTHON_PYPROC_H
#define CT_PYTHON_PYPROC_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "commtrace/pyabi.h"

struct ct_pyproc {
	int major, minor;
	uint64_t version_hex;	 /* PY_VERSION_HEX from Py_Version or the debug offsets, or 0 */
	uint64_t runtime_addr;	 /* &_PyRuntime in the target */
	uint64_t cell_type_addr; /* &PyCell_Type, or 0 */
	uint64_t code_type_addr; /* &PyCode_Type, or 0 */
	uint64_t load_bias;	 /* run-time address - ELF vaddr in the interpreter's file */
	struct ct_py_offsets offsets;
	bool from_debug;	  /* _Py_DebugOffsets were read and applied */
	int debug_mismatches;	  /* generated fields the debug offsets corrected (should be 0) */
	char path[PATH_MAX];	  /* the interpreter's file, as the target sees it */
	char open_path[PATH_MAX]; /* how the tracer opens it (ct_map_open_path: map_files) */
	char notice[512];	  /* why there are no stacks (ct_py_detect() returned -ENOTSUP) */
};

/*
 * Detect the CPython of pid. 0: found, out is complete. -ENOENT: no CPython mapped.
 * -ENOTSUP: a CPython whose layout this build does not know (an unknown version without
 * usable debug offsets, a free-threaded build): out->notice holds a one-line notice for
 * the user, out->major/minor/path are set; trace without Python stacks. Other -errno:
 * the process is gone or its interpreter file cannot be read.
 */
int ct_py_detect(pid_t pid, struct ct_pyproc *out);

/*
 * Copy len bytes at addr of pid with process_vm_readv; 0, or -errno (-EFAULT if short).
 * Inside a snapshot of pid, from the snapshot.
 */
int ct_py_read_mem(pid_t pid, uint64_t addr, void *buf, size_t len);

/* The same, always from the target now, a snapshot or not. */
int ct_py_read_fresh(pid_t pid, uint64_t addr, void *buf, size_t len);

/*
 * A snapshot of pid's memory, for a walk that reads the same objects many times (a type's
 * flags and dict offset for every attribute looked up): until ct_py_snapshot_end(), a
 * ct_py_read_mem() of pid no longer than a line is served from lines of 1 KiB read once,
 * so what it returns is what the memory held when the line was first read. Per thread.
 */
void ct_py_snapshot_begin(pid_t pid);
void ct_py_snapshot_end(void);

/*
 * Copies of pid's memory taken in BPF at a call (struct ct_capture_event, n regions): until
 * ct_py_captured_end(), a read of pid that lies inside one of them is served from it, so
 * what it returns is what the memory held at the call; other reads go on as before. For
 * objects that are gone by the time they are read (a redistribution's specs). Per thread.
 */
struct ct_capture_event;
void ct_py_captured_begin(pid_t pid, const struct ct_capture_event *ev);
void ct_py_captured_end(void);

struct ct_py_snapshot_stats {
	uint64_t lines_read, hits;
};

struct ct_py_snapshot_stats ct_py_snapshot_stats(void);

/*
 * Copy len bytes at each of the n addresses into buf (n * len bytes), in as few
 * process_vm_readv calls as the kernel allows: ok[i] says whether region i was read. 0,
 * or -errno when pid cannot be read at all.
 */
int ct_py_read_many(pid_t pid, const uint64_t *addrs, size_t n, size_t len, void *buf, bool *ok);

/*
 * Apply the _Py_DebugOffsets block copied from the start of _PyRuntime (out->major/minor
 * set). known: out->offsets holds the generated table of that version, to be checked
 * (corrections counted in out->debug_mismatches); otherwise the table is built from the
 * newest generated one and the block. 0, -ENODATA (no "xdebugpy" cookie or no layout
 * for the version), -EPROTO (a block that does not fit the layout), -ENOTSUP (free-threaded).
 */
int ct_py_apply_debug_offsets(const void *buf, size_t len, bool known, struct ct_pyproc *out);

/*
 * Parse an interpreter file's base name: "libpython3.11.so.1.0", "libpython3.13t.so",
 * "python3.11", "python3.12d". *is_lib tells which; *abiflags the flag letters ("t" is
 * a free-threaded build). 0, or -EINVAL for any other name.
 */
int ct_py_parse_name(const char *base, int *major, int *minor, bool *is_lib, char *abiflags,
		     size_t flagslen);

#endif
