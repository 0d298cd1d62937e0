/* SPDX-License-Identifier: MIT */
/*
 * CPython layout knowledge shared by the BPF frame walker and user space.
 * One struct ct_py_offsets per interpreter version, generated from each
 * interpreter's own headers by scripts/gen-pyoffsets.sh into
 * include/commtrace/pyoffsets.h (3.10 - 3.13), and for 3.13+ cross-checked
 * against (or filled from) the _Py_DebugOffsets at the start of _PyRuntime.
 * CT_PY_NONE marks a field the version does not have.
 */
#ifndef COMMTRACE_PYABI_H
#define COMMTRACE_PYABI_H

#ifndef __BPF__
#include <linux/types.h>
#endif

#define CT_PY_NONE	  0xffff
#define CT_PY_MAX_FRAMES  512 /* frames sent per stack (a power of 2); deeper: marked truncated */
#define CT_PY_MAX_THREADS 64  /* thread states scanned to find the calling thread's */

struct ct_py_offsets {
	__u16 major, minor; /* 3, 11 */

	/* Finding the calling thread's PyThreadState without the GIL: the thread list. */
	__u16 runtime_interp_head; /* _PyRuntime.interpreters.head */
	__u16 interp_threads_head; /* PyInterpreterState.threads.head */
	__u16 tstate_next;	   /* PyThreadState.next */
	__u16 tstate_native_tid;   /* PyThreadState.native_thread_id (unsigned long) */

	/* From the thread state to the innermost frame. */
	__u16 tstate_frame;	    /* 3.10 frame; 3.11/3.12 cframe; 3.13 current_frame */
	__u16 cframe_current_frame; /* 3.11/3.12: _PyCFrame.current_frame, else CT_PY_NONE */

	/* Frames: PyFrameObject (3.10) or _PyInterpreterFrame (3.11+). */
	__u16 frame_code;     /* f_code / f_executable */
	__u16 frame_previous; /* f_back / previous */
	__u16 frame_instr; /* 3.10 f_lasti (int, instruction index); 3.11+ prev_instr/instr_ptr */
	__u16 frame_owner; /* owner (char), CT_PY_NONE before 3.12 */
	__u16 frame_localsplus; /* first local (self of a method) */
	__u8 owner_cstack;	/* owner value of a C-stack shim frame to skip (3.12+), else 0xff */
	__u8 instr_is_index;	/* frame_instr holds an int index (3.10), not a pointer */

	/* Code objects and strings (user space only: names are resolved there). */
	__u16 code_filename;
	__u16 code_name;
	__u16 code_qualname;
	__u16 code_linetable;	    /* co_linetable (3.10: co_linetable in the 3.10 format) */
	__u16 code_firstlineno;	    /* int */
	__u16 code_adaptive;	    /* co_code_adaptive (3.11+): bytecode start, else CT_PY_NONE */
	__u16 code_code;	    /* co_code (bytes object, 3.10), else CT_PY_NONE */
	__u16 bytes_data;	    /* PyBytesObject.ob_sval */
	__u16 bytes_size;	    /* PyVarObject.ob_size of bytes */
	__u16 unicode_state;	    /* PyASCIIObject.state (bit field word) */
	__u16 unicode_length;	    /* PyASCIIObject.length */
	__u16 unicode_ascii_data;   /* data of a compact ASCII string: sizeof(PyASCIIObject) */
	__u16 unicode_compact_data; /* data of a compact non-ASCII string:
				       sizeof(PyCompactUnicodeObject) */
	__u16 type_name;	    /* PyTypeObject.tp_name (const char *) */
	__u16 object_type;	    /* PyObject.ob_type */
	__u16 tstate_thread_id;	    /* PyThreadState.thread_id (pthread_t = the TCB = fs base) */
	__u16 frame_func; /* 3.11 f_func, 3.12+ f_funcobj: the frame's function, else CT_PY_NONE */
	__u16
	    code_version; /* co_version (uint32, 3.12+): unique per code object, else CT_PY_NONE */
	__u16 unicode_hash; /* PyASCIIObject.hash (Py_hash_t, -1 until computed) */
	/* co_localspluskinds (3.11+: bytes, a CO_FAST_* kind per local), else CT_PY_NONE; and
	 * the kinds whose local holds a cell (CO_FAST_CELL | CO_FAST_FREE) */
	__u16 code_localspluskinds;
	__u16 fast_cell_kinds;
};

/* The pyprocs map's value: one traced CPython process. */
/*
 * --ops: where BPF finds what an op was called with and returned (struct ct_op_vals):
 * tuples of the interpreter (from its ct_py_objoffsets) and, once torch is known in the
 * process, the tensor layout of its version (params.h's struct ct_torch_layout); the
 * torch fields stay 0 until then, and only types are read.
 */
struct ct_pyvals_bpf {
	__u16 var_size;	   /* PyVarObject.ob_size */
	__u16 tuple_items; /* PyTupleObject.ob_item */
	__u16 type_flags;  /* PyTypeObject.tp_flags */
	__u16 pad;
	__u32 tuple_flag; /* Py_TPFLAGS_TUPLE_SUBCLASS */
	__u16 thp_borrowed, thp_cdata;
	__u16 ti_dim, ti_sizes, ti_numel, ti_dtype;
	__u16 inline_max, pad2;
};

/*
 * Where a torch 2.x process keeps what a DTensor's placements are read from, for the copies
 * BPF takes at a call (bpf/capture.bpf.h): a DTensorSpec's type and, from such an object,
 * the slot of its placements tuple among its inline values, the values' valid byte, the
 * first value (a placement's one field: Shard.dim, Partial.reduce_op) and, before the
 * object, its managed dict pointer (NULL while no dict took the values over); a DTensor's
 * type and the offset of its _spec slot. 0: not known yet. User space measures them on the
 * first spec and DTensor it reads live (3.13+: inline values).
 */
struct ct_spec_bpf {
	__u64 type;
	__u16 slot, valid, item, dict;
	__u64 dtensor;
	__u16 dtensor_spec, pad[3];
};

struct ct_pyproc_bpf {
	__u64 runtime;	 /* address of _PyRuntime in the process */
	__u64 cell_type; /* address of PyCell_Type, or 0 */
	struct ct_py_offsets off;
	struct ct_pyvals_bpf vals;
	/* The bytes of a code object that hold what struct ct_pycode_val compares: from
	 * code_lo, code_len of them (at most CT_PY_CODE_SPAN); code_len 0: never compared. */
	__u16 code_lo, code_len;
	__u32 ascii_state; /* PyASCIIObject.state bits of a compact ASCII string */
	/* The deallocation of the process's code objects is probed (ct_code_free): the pycodes
	 * entries marked CT_PYC_HELD are deleted when their code object dies, so the walker
	 * trusts them without reading the code object. */
	__u32 code_free;
	/* torch 2.x, --ops: the offset of PyNode::obj (its THPFunction), 0 until learned */
	__u32 pynode_obj;
	struct ct_spec_bpf spec;
};

/*
 * Known code objects: what the walker checks a frame's code object against at capture,
 * so that a stack made only of code objects user space has resolved already is resolved
 * from its cache, later, without waking the reader or reading the process
 * (CT_PYS_KNOWN). The values are what the symbolizer validates a cached entry by: an
 * address reused by another code object has another name, file or line table, or first
 * line. User space adds an entry when it resolves a code object from the live process and
 * deletes it when its cache forgets the code object. Addresses alone would not do: a
 * code object made and freed at run time (exec, compile) often leaves its address, its
 * name's and its line table's to the next one, so the code object's own version counter
 * (3.12+) or its strings' hashes are compared too.
 */
#define CT_PY_CODE_SPAN 120

/*
 * A name string's ident (3.10/3.11): its hash where Python computed it (an interned
 * identifier's always is); else, for a compact ASCII string of at most 8 characters
 * ("<module>"), its characters and length; else 0.
 */
#define CT_PY_NAME_IDENT(hash, len, chars8)                                                        \
	((hash) != -1		  ? (__u64)(hash)                                                  \
	 : (len) == 8		  ? (chars8) ^ 8                                                   \
	 : (len) > 0 && (len) < 8 ? ((chars8) & ((1ull << (8 * (len))) - 1)) ^ (__u64)(len)        \
				  : 0)

/*
 * struct ct_pyframe_raw.ident of a frame whose code object (or its name) BPF could not read
 * at capture: which object ran is not known, so what is at the address later is not named.
 * No ident takes this value: a hash is never -1, a version fits 32 bits, and an ASCII
 * name's characters leave the top bit of each byte clear.
 */
#define CT_PY_IDENT_UNREAD (~0ull)

struct ct_pycode_key {
	__u32 tgid;
	__u32 pad;
	__u64 code;
};

#define CT_PYC_HELPER  (1u << 0) /* a collective helper: its first local's tensor is described */
#define CT_PYC_LIVE    (1u << 1) /* naming it reads an object that varies by call: never known */
#define CT_PYC_SELF    (1u << 2) /* its first local is used (a module, op, helper, ctx...) */
/* a torch op called from Python (OpOverload.__call__): without a helper on the stack, the
 * innermost one's first argument (its second local, the args tuple) is the tensor described */
#define CT_PYC_OPCALL  (1u << 3)
/*
 * A redistribution's (torch 2.x redistribute_local_tensor: (tensor, source spec, target
 * spec)): its specs are often temporaries, so the walker copies the objects their
 * placements are read from (struct ct_capture_event, as struct ct_spec_bpf says), and user
 * space reads those copies later instead of the live process. Until the process's specs
 * are measured, such a frame is CT_PYC_LIVE.
 */
#define CT_PYC_CAPTURE (1u << 4)
/*
 * Alive as resolved: user space checked, after adding the entry, that the code object at
 * its address was still the one it resolved, and the process's code objects are watched
 * at their deallocation (ct_pyproc_bpf.code_free), which deletes the entry: as long as the
 * entry is there, so is that code object, and the walker need not read it. That check is
 * what the walker's would be: co_version on 3.12+, which tells a code object from any made
 * before it at its address; on 3.10/3.11 co_name's ident and the file name's hash.
 */
#define CT_PYC_HELD    (1u << 5)
/* Its first local is never a cell (co_localspluskinds, 3.11+): the walker takes it as it is,
 * where it reads a first local's type to look inside a cell (torch 2.x's Module._call_impl). */
#define CT_PYC_PLAIN   (1u << 6)

struct ct_pycode_val {
	__u64 name;	 /* co_qualname (3.11+) or co_name */
	__u64 filename;	 /* co_filename */
	__u64 linetable; /* co_linetable */
	/* Which object it is, where pointers could be reused along with it (content, not
	 * address): co_version (3.12+, ident2 0); else co_name's CT_PY_NAME_IDENT and
	 * co_filename's hash, each 0 where there is none (not compared), not both. */
	__u64 ident, ident2;
	__s32 firstlineno;
	__u32 flags; /* CT_PYC_* */
};

/*
 * One value an op was called with or returned (--ops, struct ct_op_vals in abi.h), or a
 * collective helper's tensor (struct ct_pystack), read in BPF while the objects are
 * certainly alive. Per value: its type, and where torch's tensor layout is known for the
 * process (struct ct_pyvals_bpf), the TensorImpl's dim count, sizes, numel and dtype as
 * read; user space checks them (numel = product of sizes) and names the type.
 */
#define CT_OP_DIMS 6 /* sizes read per tensor; more dims: no shape */

struct ct_op_val {
	__u64 obj;  /* the PyObject * */
	__u64 type; /* its ob_type */
	__s64 numel;
	__s64 sizes[CT_OP_DIMS];
	__u64 ndim;
	__u16 dtype;
	__u8 impl;  /* the tensor fields above were read */
	__u8 guess; /* struct ct_pystack's guesses: CT_GUESS_FROM */
	__u8 pad[4];
};

/* Where a guess at a helper's tensor was read: the first local of frame i (innermost 0, below
 * CT_PYS_GUESS_FRAMES), or with CT_GUESS_ARGS the first item of its second local (*args of an
 * op called from Python); 0: the first local of a helper frame that was known */
#define CT_GUESS_ARGS	    0x80
#define CT_GUESS_FROM(i, a) ((__u8)(((i) + 1) | ((a) ? CT_GUESS_ARGS : 0)))

/* One Python frame as the walker sends it. */
struct ct_pyframe_raw {
	__u64 code;  /* PyCodeObject * */
	__u64 instr; /* 3.10: f_lasti (an index); 3.11/3.12: prev_instr; 3.13: instr_ptr */
	__u64 self;  /* localsplus[0]: self of a method, the first argument of a function;
		      * a cell's content where a closure captured it (3.11+: MAKE_CELL) */
	__u64 arg1;  /* localsplus[1]: the op of OpDispatcher.dispatch / __torch_function__ */
	__u64 arg2;  /* localsplus[2]: redistribute_local_tensor's target spec */
	__u64 ident; /* which code object: co_version (3.12+), else co_name's ident; 0: none to
		      * check by; CT_PY_IDENT_UNREAD: unreadable at capture */
};

#define CT_PYS_PYTHON	 (1u << 0) /* the process runs CPython */
#define CT_PYS_NO_TSTATE (1u << 1) /* this thread has no Python thread state */
#define CT_PYS_TRUNCATED (1u << 2) /* deeper than CT_PY_MAX_FRAMES: outermost frames cut */
#define CT_PYS_KNOWN	 (1u << 3) /* every code object known and checked (struct ct_pycode_val) */
#define CT_PYS_HELPER	 (1u << 4) /* helper: the outermost helper frame's tensor, described */
#define CT_PYS_CUT	 (1u << 5) /* a frame could not be read: those further out are missing */

/*
 * A stack with a code object not known yet (not CT_PYS_KNOWN) is resolved by user space,
 * which only then learns which frame is the helper's; its tensor may be freed by then. So
 * BPF describes, at the call, the first locals of the innermost CT_PYS_GUESS_FRAMES frames
 * that read as tensors (the product of the sizes is the element count), up to
 * CT_PYS_GUESSES distinct objects, innermost first; user space keeps the one that is the
 * helper's first local, if any. Without torch's layout in BPF: the innermost first locals
 * whatever they are, with their types only (impl 0).
 */
#define CT_PYS_GUESSES	    2 /* a power of 2 */
#define CT_PYS_GUESS_FRAMES 8

struct ct_pystack {
	__u16 nframes;
	__u16 flags;
	__u16 nguess; /* not CT_PYS_KNOWN: helper[0..nguess) are guesses */
	/*
	 * A call's stack (struct ct_call_event) only: its outermost nsame frames, after the
	 * nframes sent, are the outermost nsame of the last call stack this thread sent with
	 * any frame (nframes + nsame > 0), and are not sent again. BPF shares them only where
	 * every frame's six words are the same, in a stack whose code objects are all known.
	 */
	__u16 nsame;
	/* CT_PYS_HELPER: [0] is the first local of the outermost helper frame */
	struct ct_op_val helper[CT_PYS_GUESSES];
	struct ct_pyframe_raw frames[CT_PY_MAX_FRAMES]; /* innermost first; nframes sent */
};

#endif
