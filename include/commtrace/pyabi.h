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
#define CT_PY_MAX_FRAMES  128 /* frames sent per stack (a power of 2); deeper: marked truncated */
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

struct ct_pyproc_bpf {
	__u64 runtime;	 /* address of _PyRuntime in the process */
	__u64 cell_type; /* address of PyCell_Type, or 0 */
	struct ct_py_offsets off;
	struct ct_pyvals_bpf vals;
};

/* One Python frame as the walker sends it. */
struct ct_pyframe_raw {
	__u64 code;  /* PyCodeObject * */
	__u64 instr; /* 3.10: f_lasti (an index); 3.11/3.12: prev_instr; 3.13: instr_ptr */
	__u64 self;  /* localsplus[0]: self of a method, the first argument of a function;
		      * a cell's content where a closure captured it (3.11+: MAKE_CELL) */
	__u64 arg1;  /* localsplus[1]: the op of OpDispatcher.dispatch / __torch_function__ */
};

#define CT_PYS_PYTHON	 (1u << 0) /* the process runs CPython */
#define CT_PYS_NO_TSTATE (1u << 1) /* this thread has no Python thread state */
#define CT_PYS_TRUNCATED (1u << 2) /* deeper than CT_PY_MAX_FRAMES: outermost frames cut */

struct ct_pystack {
	__u16 nframes;
	__u16 flags;
	__u32 pad;
	struct ct_pyframe_raw frames[CT_PY_MAX_FRAMES]; /* innermost first; nframes sent */
};

#endif
