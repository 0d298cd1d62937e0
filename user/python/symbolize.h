/* SPDX-License-Identifier: MIT */
/*
 * Python frames to names: the BPF walker sends, per frame, a code object pointer and
 * the raw instruction value of the frame (3.10 f_lasti; 3.11/3.12 prev_instr; 3.13
 * instr_ptr). User space reads co_qualname, co_filename, co_firstlineno and the line
 * table with process_vm_readv only, on a cache miss; a hit costs one small read that
 * re-validates the entry (a freed code object's address can be reused), none for a frame
 * BPF already checked against the entry at capture (ct_pyframe.known).
 */
#ifndef CT_PYTHON_SYMBOLIZE_H
#define CT_PYTHON_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "commtrace/pyabi.h"

#define CT_PY_NAME_MAX	     128
#define CT_PY_FILE_MAX	     256
#define CT_PYSYM_DEFAULT_CAP 4096
#define CT_PY_LINETABLE_MAX  (64 * 1024)       /* one code object's table (bigger: no line) */
#define CT_PYSYM_LINE_BYTES  (8 * 1024 * 1024) /* all cached line tables together */

/*
 * A frame named. Its names are interned (ct_intern: they live as long as the tracer), not
 * copied: a stack's frames are named from the cache at every call. NULL where it failed.
 */
struct ct_pyframe {
	const char *qualname;	    /* co_qualname ("Outer.method"); co_name on 3.10 */
	const char *filename;	    /* co_filename */
	int firstlineno;	    /* co_firstlineno */
	int line;		    /* line being executed, -1 if unknown */
	struct ct_pycode_val known; /* what the entry was validated by (flags 0), for BPF */
	uint8_t fresh; /* the first time this entry is handed out: tell BPF it is known */
	/* its first local is neither a cell nor a free variable (3.11+'s kind byte): the object
	 * itself, which BPF then takes as it is, without a read to look inside a cell */
	uint8_t plain_first;
};

struct ct_pysym_stats {
	uint64_t hits, misses, evictions;
	uint64_t stale;	       /* entries found invalid on reuse (address reused) */
	uint64_t line_unknown; /* lines not found (table too big, no location) */
	uint64_t errors;       /* symbolizations that failed (unreadable, not a code object) */
	uint64_t entries, line_bytes;
	uint64_t checked_hits;	 /* frames BPF checked at capture, named from the cache */
	uint64_t checked_misses; /* such frames no longer cached: read from the process */
	uint64_t unverifiable;	 /* code objects with nothing to check them by in BPF */
	uint64_t reused; /* frames whose code object was freed and its address reused since */
	uint64_t unread; /* frames whose code object BPF could not read at capture */
};

struct ct_pysym_cache;

/* capacity 0: CT_PYSYM_DEFAULT_CAP entries. NULL on ENOMEM. */
struct ct_pysym_cache *ct_pysym_cache_new(unsigned int capacity);
void ct_pysym_cache_free(struct ct_pysym_cache *c);
/* Called for each entry once handed out as fresh, when it is dropped. */
typedef void ct_pysym_forget_fn(void *ctx, pid_t pid, uint64_t code);
void ct_pysym_cache_on_forget(struct ct_pysym_cache *c, ct_pysym_forget_fn *fn, void *ctx);
/* Drop everything cached for pid (it exited: its addresses mean nothing now). */
void ct_pysym_cache_forget_pid(struct ct_pysym_cache *c, pid_t pid);
void ct_pysym_cache_stats(const struct ct_pysym_cache *c, struct ct_pysym_stats *st);

/*
 * Symbolize one frame. 0, or -errno: -ESRCH/-EFAULT/-EPERM (unreadable), -EINVAL (not a
 * code object of this interpreter). out->line is -1 when the line cannot be decoded.
 */
int ct_py_symbolize(struct ct_pysym_cache *c, pid_t pid, const struct ct_py_offsets *o,
		    uint64_t code, uint64_t instr, struct ct_pyframe *out);

/*
 * ct_py_symbolize() where deaths counts every code object that died in pid so far (its
 * deallocations probed): an entry read from the process at this same count is used
 * without reading it again.
 */
int ct_py_symbolize_since(struct ct_pysym_cache *c, pid_t pid, const struct ct_py_offsets *o,
			  uint64_t code, uint64_t instr, uint64_t deaths, struct ct_pyframe *out);

/*
 * ct_py_symbolize() for the n frames of one stack (raw, as BPF sent them), the heads of
 * their code objects read with one process_vm_readv: out[i] and rc[i] per frame. checked:
 * BPF compared every code object with its ct_pyframe.known at capture (CT_PYS_KNOWN), so
 * a cached entry is used without reading the process.
 */
void ct_py_symbolize_many(struct ct_pysym_cache *c, pid_t pid, const struct ct_py_offsets *o,
			  const struct ct_pyframe_raw *raw, int n, bool checked,
			  struct ct_pyframe *out, int *rc);

/*
 * Whether the code object at code in pid is, now, the one v was resolved from, alive: a
 * code object (code_type, &PyCode_Type) with a sane reference count, with v's name, file
 * name and line table, first line and co_version (3.12+), else co_name's ident and the file
 * name's hash (v's ident, ident2: what BPF checks at a stack). 1, 0, or -errno. Read from
 * the process, never a cache or a snapshot.
 */
int ct_py_code_is(pid_t pid, const struct ct_py_offsets *o, uint64_t code_type, uint64_t code,
		  const struct ct_pycode_val *v);

/*
 * A NUL-terminated C string at addr (a tp_name, a PyMethodDef.ml_name), truncated to len - 1
 * bytes; reads never cross into a page past the terminator.
 */
int ct_py_read_cstr(pid_t pid, uint64_t addr, char *buf, size_t len);

/* tp_name of the type of the object at obj (e.g. the class of a frame's `self`). */
int ct_py_read_type_name(pid_t pid, const struct ct_py_offsets *o, uint64_t obj, char *buf,
			 size_t len);
/*
 * A str object as UTF-8, truncated to len - 1 bytes on a character boundary. Latin-1
 * strings are converted; UCS-2/UCS-4 characters beyond ASCII become '?'. -EINVAL if the
 * object is not a compact str.
 */
int ct_py_read_str(pid_t pid, const struct ct_py_offsets *o, uint64_t strobj, char *buf,
		   size_t len);

#endif
