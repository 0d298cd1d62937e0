/* SPDX-License-Identifier: MIT */
/*
 * The channel between the BPF programs and the loader: probe specifications
 * (user space → BPF, one per attach cookie) and event records (BPF → user space,
 * through one ring buffer). Fixed-width fields with explicit padding; every
 * record starts with its type tag. Sizes are checked with _Static_assert in
 * user space (user/events.c).
 */
#ifndef COMMTRACE_ABI_H
#define COMMTRACE_ABI_H

#ifdef __BPF__
/* vmlinux.h provides the __u8…__u64 types on the BPF side. */
#else
#include <linux/types.h>
#endif
#include "commtrace/pyabi.h"

#define CT_MAX_PROBES	 4096 /* probe specs (attach cookies) in one session */
/* ct_prefault writes the ring buffer one page of this size at a time */
#define CT_RB_PAGE	 4096
#define CT_MAX_DEPTH	 8    /* nested traced calls per thread (MPI inside c10d inside …) */
#define CT_MAX_VEC	 4096 /* entries summed from a counts[] array (…v collectives) */
#define CT_NVAL		 13   /* values decoded per call */
#define CT_TASK_COMM_LEN 16

/* Libraries. */
enum ct_lib {
	CT_LIB_NONE = 0,
	CT_LIB_MPI,
	CT_LIB_GLOO,
	CT_LIB_C10D,
	CT_LIB_NCCL,
	CT_LIB_HCCL,
	CT_LIB_LDSO,	     /* the dynamic linker: library load notifications */
	CT_LIB_TORCH_PYTHON, /* PyTorch's Python bindings: autograd contexts (not collectives) */
	CT_LIB_MAX,
};

/* What a call does. */
enum ct_kind {
	CT_K_NONE = 0,
	CT_K_ALLREDUCE,
	CT_K_REDUCE,
	CT_K_BROADCAST,
	CT_K_ALLGATHER,
	CT_K_GATHER,
	CT_K_SCATTER,
	CT_K_ALLTOALL,
	CT_K_REDUCE_SCATTER,
	CT_K_BARRIER,
	CT_K_SEND,
	CT_K_RECV,
	CT_K_SENDRECV,
	CT_K_WAIT,	  /* completion of non-blocking calls */
	CT_K_GROUP_START, /* ncclGroupStart */
	CT_K_GROUP_END,	  /* ncclGroupEnd */
	CT_K_COMM_INIT,	  /* communicator / group creation */
	CT_K_COMM_SPLIT,
	CT_K_COMM_DESTROY, /* destroy / abort / free */
	CT_K_DL_STATE,	   /* _dl_debug_state: the link map changed */
	CT_K_AUTOGRAD_CTX, /* an autograd Function's ctx created (forward); not a collective */
	CT_K_BACKWARD_RUN, /* torch's autograd engine run from Python: a backward pass */
	CT_K_MAX,
};

/*
 * Value slots: each probe fills the slots its spec describes. Raw values only;
 * user space turns handles and enums into names and sizes.
 */
enum ct_val {
	CT_V_COUNT = 0, /* element count (send side) */
	CT_V_DTYPE,	/* datatype handle or enum (send side) */
	CT_V_DTSIZE,	/* element size in bytes, where it is read from memory */
	CT_V_RCOUNT,	/* element count (receive side) */
	CT_V_RDTYPE,	/* datatype (receive side) */
	CT_V_RDTSIZE,	/* element size (receive side) */
	CT_V_OP,	/* reduce op handle or enum */
	CT_V_COMM,	/* communicator / context handle */
	CT_V_PEER,	/* root or peer rank */
	CT_V_COMM_SIZE, /* ranks in the communicator */
	CT_V_COMM_RANK, /* this process' rank in it */
	CT_V_OUT,	/* pointer whose target is read at return (CT_PF_OUT_PTR) */
	/*
	 * The world rank of the communicator's rank 0, with bit 32 set when it was read (0:
	 * unknown): what tells apart communicators of one size made in one order (the TP
	 * groups of a job), since their members share it and no other group of theirs does.
	 */
	CT_V_GROUP,
};

/* How a value slot is read. */
enum ct_loc_op {
	CT_LOC_NONE = 0,
	CT_LOC_ARG,    /* argument `arg` (1-based; 7+ come from the user stack) */
	CT_LOC_DEREF,  /* *(argument + off1), `size` bytes */
	CT_LOC_DEREF2, /* *(*(u64 *)(argument + off1) + off2), `size` bytes */
	CT_LOC_DEREF3, /* *(**(u64 **)(argument + off1) + off2): first element of a pointer array */
	CT_LOC_SUM,    /* sum of `size`-byte counts at argument[0 .. val[aux]) */
	CT_LOC_INDEX,  /* argument[val[aux]], `size`-byte element */
	CT_LOC_CONST,  /* the constant off1 | off2 << 16 */
	CT_LOC_COMMINFO, /* from the comm_info map, keyed by val[CT_V_COMM]: aux 0 size, 1 rank */
	/*
	 * The first process of a communicator's group (Open MPI): p = *(*(*(argument + off1) +
	 * off2)), an array's first element; its u32 at p + aux, or bits 32-63 of p where p is
	 * an Open MPI sentinel (bit 0 set: a process name, not a pointer); with bit 32 set
	 * when read, 0 when not.
	 */
	CT_LOC_GROUP0,
};

struct ct_loc {
	__u8 op;   /* enum ct_loc_op */
	__u8 arg;  /* 1-based argument index */
	__u8 size; /* bytes of the final read: 1, 2, 4 or 8 (counts of SUM: 4 or 8) */
	__u8 aux;  /* SUM / INDEX: value slot holding the length / index */
	__u16 off1;
	__u16 off2;
};

/*
 * Evaluation order of the slots: plain reads first, then what is keyed by the
 * communicator (which a plain read produced), then sums and indexes sized by
 * the communicator. User space lists a probe's slots in this order (order[]).
 */
static inline int ct_loc_phase(__u8 op)
{
	if (op == CT_LOC_COMMINFO)
		return 1;
	if (op == CT_LOC_SUM || op == CT_LOC_INDEX)
		return 2;
	return 0;
}

/* Probe flags. */
#define CT_PF_RETPROBE	  (1u << 0) /* the program instance is the uretprobe */
#define CT_PF_OUT_PTR	  (1u << 1) /* at return, read the u64 at val[CT_V_OUT] into ret.out */
#define CT_PF_COMM_INIT	  (1u << 2) /* at return, remember out → {size, rank} in comm_info */
#define CT_PF_SIGNED_PEER (1u << 3)
/* Probed inside the function, just after a call (struct ct_point): one hit, no return
 * probe; val[CT_V_OUT] is that call's result (rax). */
#define CT_PF_POINT	  (1u << 4)

struct ct_probe_spec {
	__u8 lib;  /* enum ct_lib */
	__u8 kind; /* enum ct_kind */
	__u16 flags;
	__u32 func_id; /* index into the user-space function catalog */
	struct ct_loc val[CT_NVAL];
	/*
	 * The slots to evaluate, in dependency order (plain reads, then what the
	 * communicator gives, then sums and indexes), so BPF visits only those.
	 */
	__u8 n_order;
	__u8 order[CT_NVAL];
	__u8 pad[2];
};

/* Communicators whose size and rank were seen at creation (NCCL, HCCL). */
struct ct_comm_key {
	__u32 tgid;
	__u32 pad;
	__u64 comm;
};

struct ct_comm_info {
	__u32 size;
	__u32 rank;
};

/* Records. */
enum ct_ev_type {
	CT_EV_CALL = 1,	    /* entry of a traced function */
	CT_EV_RET,	    /* its return */
	CT_EV_EXEC,	    /* a traced process exec'ed */
	CT_EV_FORK,	    /* a traced process forked a new process */
	CT_EV_EXIT,	    /* a traced process exited (the last thread) */
	CT_EV_DLOPEN,	    /* the link map of a traced process changed */
	CT_EV_OP,	    /* --ops: entry of a Python function (struct ct_op_event) */
	CT_EV_OPEXIT,	    /* --ops: its return */
	CT_EV_BACKWARD,	    /* a CT_K_BACKWARD_RUN call entered on the thread (a bare ct_hdr) */
	CT_EV_BACKWARD_END, /* and returned */
	CT_EV_UNSEEN,	    /* a traced function returned whose entry came before the gate opened
			     * (a bare ct_hdr): the call was in flight when tracing began */
	CT_EV_CAPTURE,	    /* objects copied at a call, just before its CT_EV_CALL */
	CT_EV_DISPATCH,	    /* --ops on torch 2.x: an op dispatched to a tensor subclass */
	CT_EV_GRADFN,	    /* --ops on torch 2.x: a Python autograd Function's backward began */
};

struct ct_hdr {
	__u8 type;	/* enum ct_ev_type */
	__u8 depth;	/* nesting depth of traced calls on this thread, 0 = outermost */
	__u16 probe_id; /* attach cookie: index of the probe spec */
	__u32 pid;	/* tgid */
	__u32 tid;
	__u32 cpu;
	__u64 ts; /* CLOCK_MONOTONIC ns (bpf_ktime_get_ns) */
};

/*
 * Variable length: the record ends after py.frames[py.nframes - 1]
 * (CT_CALL_EVENT_SIZE). Without Python, py.nframes is 0.
 */
struct ct_call_event {
	struct ct_hdr hdr;
	char comm[CT_TASK_COMM_LEN]; /* thread name */
	__u64 val[CT_NVAL];
	struct ct_pystack py;
};

#define CT_CALL_EVENT_SIZE(n)                                                                      \
	(sizeof(struct ct_call_event) - sizeof(struct ct_pyframe_raw) * (CT_PY_MAX_FRAMES - (n)))

/*
 * Copies of the target's memory taken at a call whose stack holds a CT_PYC_CAPTURE frame
 * (pyabi.h): the objects its names are read from, which may be gone by the time user space
 * reads (a redistribution's temporary specs). Sent just before the call's CT_EV_CALL, with
 * the same hdr.tid and hdr.ts. Each region is CT_CAP_BYTES from CT_CAP_BEFORE bytes before
 * an object (its GC header and managed dict pointer) to past its inline values.
 */
#define CT_CAP_REGIONS 20 /* 2 specs x (the spec, its tuple, 4 placements and their fields) */
#define CT_CAP_ITEMS   4  /* placements per spec (mesh dimensions) */
#define CT_CAP_BYTES   128
#define CT_CAP_BEFORE  32

struct ct_capture_event {
	struct ct_hdr hdr; /* CT_EV_CAPTURE */
	__u32 n;	   /* regions filled */
	__u32 pad;
	struct {
		__u64 addr;
		__u8 data[CT_CAP_BYTES];
	} r[CT_CAP_REGIONS];
};

struct ct_ret_event {
	struct ct_hdr hdr;
	__u64 duration; /* ns since the matching entry */
	__s64 retval;
	__u64 out; /* the value read through CT_PF_OUT_PTR */
};

struct ct_proc_event {
	struct ct_hdr hdr;
	__u32 child;	 /* CT_EV_FORK: the new process */
	__s32 exit_code; /* CT_EV_EXIT */
	char comm[CT_TASK_COMM_LEN];
};

/*
 * --ops: the entry and exit of selected Python functions, from a uprobe and a uretprobe on
 * the interpreter's _PyEval_EvalFrameDefault, which runs every frame entered from C (every
 * frame in 3.10). User space tells BPF which code objects to keep (op_codes); until it
 * has, a code object's calls are sent with `unclassified` set.
 */
#define CT_OPS_MAX_DEPTH 32 /* kept calls in flight per thread */

struct ct_op_key {
	__u32 tgid;
	__u32 pad;
	__u64 code;
};

/*
 * op_codes values: SKIP, or KEEP plus, for an op whose arguments are described, the
 * local index of its args tuple + 1 in bits 4-7 (CT_OPV_ARGS(i)). WRAP marks the code of
 * a functools.wraps wrapper `def inner(*args, **kwargs)` (torch._disable_dynamo's, around
 * DTensor.__torch_dispatch__): its calls are judged by the frame's function object
 * instead, whose own entry (keyed by the function's address) holds the verdict of the
 * wrapped function; that function's locals are the items of the wrapper's args tuple.
 */
#define CT_OPV_SKIP	   1
#define CT_OPV_KEEP	   2
#define CT_OPV_WRAP	   4
#define CT_OPV_ARGS(i)	   (((i) + 1) << 4)
#define CT_OPV_ARGS_IDX(v) (((v) >> 4) - 1) /* when (v) >> 4 */
#define CT_OPS_MAX_ARGIDX  14

/* ct_op_event.wrapped */
#define CT_OP_WRAPPED	    1 /* a CT_OPV_WRAP wrapper's call: code is its function object */
/* An unclassified entry whose localsplus[0] is a tuple: perhaps a wrapper's *args. The vals
 * describe its items (self and arg1 are then the frame's own locals), func is set. */
#define CT_OP_MAYBE_WRAPPER 2
/* ct_op_event.late (CT_EV_OPEXIT): the kernel omitted this call's uretprobe; the exit is
 * sent at the next exit seen of a frame below it, its time an upper bound */
#define CT_OP_LATE	    1

struct ct_op_event {
	struct ct_hdr hdr; /* CT_EV_OP or CT_EV_OPEXIT */
	__u64 code;	   /* the frame's code object; wrapped: the wrapper's function object */
	__u64 self;	   /* localsplus[0], through a cell (CT_EV_OP); wrapped: args[0] */
	__u64 arg1;	   /* localsplus[1] (CT_EV_OP); wrapped: args[1] */
	__u64 func;	   /* CT_OP_MAYBE_WRAPPER: the frame's function object */
	__u8 unclassified; /* CT_EV_OP: op_codes did not know the code object yet */
	__u8 has_vals;	   /* a struct ct_op_vals follows (struct ct_op_vals_event) */
	__u8 wrapped;	   /* CT_OP_WRAPPED, CT_OP_MAYBE_WRAPPER, else 0 */
	__u8 late;	   /* CT_EV_OPEXIT: CT_OP_LATE, else 0 */
	__u8 pad[4];
};

#define CT_OP_VALS 4 /* values described per entry or exit; more are counted */

struct ct_op_vals {
	__u32 total; /* items of the args tuple / the returned tuple; 1: one value; 0: none */
	__u8 n;	     /* described in v[] */
	__u8 tuple;  /* exit: the return value was a tuple */
	__u8 pad[2];
	struct ct_op_val v[CT_OP_VALS];
};

struct ct_op_vals_event {
	struct ct_op_event op; /* has_vals = 1 */
	struct ct_op_vals vals;
};

/*
 * --ops on torch 2.x: torch::handle_torch_function_no_python_arg_parser, the C++ function
 * that calls a tensor subclass's __torch_dispatch__ (DTensor's) or a Python
 * __torch_function__, probed at its entry and return: one entry per op, wherever the Python
 * around it runs, instead of a probe on every frame the interpreter evaluates. Its
 * arguments: overloaded_args (rdi, rsi), args (rdx), kwargs (rcx), func_name (r8),
 * torch_api_function (r9), module_name and the TorchFunctionName enum on the stack.
 * CT_EV_DISPATCH: op.code is the op object (an OpOverload; under __torch_function__ the torch
 * function), op.self the class of the first overloaded argument, op.arg1 the enum, op.vals
 * the args tuple's items; then the Python stack there. Its return: a CT_EV_OPEXIT with the
 * same code. Variable length: CT_DISPATCH_EVENT_SIZE.
 */
#define CT_TORCH_FUNCTION 0 /* torch::TorchFunctionName */
#define CT_TORCH_DISPATCH 1

struct ct_dispatch_event {
	struct ct_op_vals_event op; /* op.op.hdr.type = CT_EV_DISPATCH */
	struct ct_pystack py;
};

#define CT_DISPATCH_EVENT_SIZE(n)                                                                  \
	(sizeof(struct ct_dispatch_event) -                                                        \
	 sizeof(struct ct_pyframe_raw) * (CT_PY_MAX_FRAMES - (n)))

/*
 * --ops on torch 2.x: torch::autograd::PyNode::apply entered, a Python autograd Function's
 * backward beginning (the backward ops of torch's own C++ nodes that follow belong to the
 * same module). ctx: its THPFunction, the ctx its forward made, read at the offset user
 * space learned (struct ct_pyproc_bpf.pynode_obj); until then 0, and words holds the node's
 * first bytes, where user space finds a ctx it knows (CT_GRADFN_EVENT_SHORT: without them).
 */
#define CT_GRADFN_WORDS 96

struct ct_gradfn_event {
	struct ct_hdr hdr;
	__u64 node; /* the PyNode */
	__u64 ctx;
	__u64 words[CT_GRADFN_WORDS];
};

#define CT_GRADFN_EVENT_SHORT (sizeof(struct ct_gradfn_event) - 8 * CT_GRADFN_WORDS)

/*
 * Exits pair with kept entries by the stack pointer: a uretprobe sees the entry's sp + 8.
 * The kernel installs no uretprobe past 64 nested probed activations of a thread (an
 * import chain run from C goes that deep); a kept entry whose exit never came is closed
 * at the next exit of a shallower frame, with CT_OP_LATE set.
 */
struct ct_op_thread {
	__u32 n; /* kept calls in flight */
	__u32 pad;
	struct {
		__u64 sp; /* the user stack pointer at entry */
		__u64 code;
		__u32 vals; /* describe the return value at exit */
		__u32 pad;
	} at[CT_OPS_MAX_DEPTH];
};

/* Per-thread state kept in BPF between entry and return. */
struct ct_frame {
	__u64 ts;
	__u64 sp; /* user stack pointer at entry: detects frames skipped by an unwind */
	__u64 out_ptr;
	__u32 probe_id;
	__u32 emitted; /* the entry event reached the ring buffer */
	__u32 size;    /* for CT_PF_COMM_INIT */
	__u32 rank;
};

struct ct_thread {
	__u32 depth;
	/* the stamp of the last call stack it sent, and how many in a row shared frames with
	 * the one before (bpf/stackshare.bpf.h) */
	__u32 shared_run;
	__u64 last_stack;
	struct ct_frame frames[CT_MAX_DEPTH];
};

/* Drop and anomaly counters (per-CPU array, summed by user space). */
enum ct_drop {
	CT_DROP_RINGBUF = 0, /* ring buffer full at a call: the call is lost */
	CT_DROP_THREADS,     /* thread state map full: the call is lost */
	CT_DROP_DEPTH,	     /* nesting deeper than CT_MAX_DEPTH */
	CT_DROP_UNPAIRED,    /* a return without its entry (attached mid-call) */
	CT_DROP_READ,	     /* an argument could not be read */
	/*
	 * Ring buffer full at a return: the call was counted, its completion and
	 * duration are lost. Apart from CT_DROP_RINGBUF, so that calls made = calls
	 * counted + calls lost holds exactly.
	 */
	CT_DROP_RINGBUF_RET,
	CT_DROP_RINGBUF_PROC, /* ring buffer full at a process or library-load record */
	CT_DROP_OPS,	      /* --ops: ring buffer full at an entry or exit record */
	CT_DROP_OPS_DEPTH,    /* --ops: more than CT_OPS_MAX_DEPTH kept calls nested on a thread */
	CT_DROP_MAX,
};

#endif /* COMMTRACE_ABI_H */
