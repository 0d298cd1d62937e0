/* SPDX-License-Identifier: MIT */
/*
 * The --record file (docs/record.md): the ring buffer's records as the kernel wrote
 * them, framed, after a small versioned header; `commtrace-bpf replay FILE` feeds them
 * through the same path as a live run (user/calls.c) and the same exporters. Little-endian, the
 * host's layout of include/commtrace/abi.h: a file is replayed by a build with the same function
 * catalog (checked: catalog_hash) and the same record ABI (checked: call_event_size,
 * py_max_frames).
 *
 *   struct ct_rec_header
 *   frames until the end of the file: struct ct_rec_frame, then `len` bytes
 *     CT_REC_EVENT  one ring-buffer record (struct ct_call_event, ct_ret_event or
 *                   ct_proc_event), len <= CT_REC_MAX_EVENT
 *     CT_REC_PYCALL struct ct_rec_pycall: the Python side of the call record just
 *                   before it, as resolved from the live process
 *     CT_REC_PROC   struct ct_rec_proc: one traced process, written at the end
 *     CT_REC_END    struct ct_rec_end: the clock and the drop counters, written last
 *
 * A file cut short (the tracer killed) replays up to its last whole frame; without
 * CT_REC_END, its clock and drop counters are 0.
 */
#ifndef COMMTRACE_RECORD_H
#define COMMTRACE_RECORD_H

#include <linux/types.h>

#define CT_REC_MAGIC "CTRECORD"
#define CT_REC_VERSION                                                                             \
	8 /* 2: ct_rec_pycall names its op and root class; 3: ct_op_event.func; 4:                 \
	     ct_call_event.val[CT_V_GROUP]; 5: ct_pystack.helper, 512 frames with their ident      \
	     and arg2, ct_rec_pynode.src/dst; 6: a ct_rec_pynode may be a compiled graph; 7:       \
	     ct_pystack.nguess, a second helper; 8: ct_pystack.nsame, frames shared */
#define CT_REC_MAX_EVENT 28672 /* >= sizeof(struct ct_call_event) */
#define CT_REC_MAX_DROPS 16    /* >= CT_DROP_MAX */

struct ct_rec_header {
	char magic[8]; /* CT_REC_MAGIC, no NUL */
	__u32 version; /* CT_REC_VERSION */
	__u32 header_size;
	__u32 catalog_hash; /* FNV-1a over the catalog's library and function names, in order */
	__u32 n_probes;	    /* functions in the catalog: probe ids are below this */
	__u32 call_event_size;
	__u32 py_max_frames;
};

enum ct_rec_type {
	CT_REC_EVENT = 1,
	CT_REC_PROC,
	CT_REC_END,
	CT_REC_PYCALL,
};

struct ct_rec_frame {
	__u32 type; /* enum ct_rec_type */
	__u32 len;  /* bytes that follow */
};

/* Where a process' rank came from (ct_rec_proc.rank_source). */
#define CT_REC_RANK_UNKNOWN 0 /* no rank, or a recording made before this was kept */
#define CT_REC_RANK_COMM    1 /* the largest communicator used (no rank in the environment) */
#define CT_REC_RANK_ENV	    2 /* + i: the environment's i-th rank variable (RANK, …) */

struct ct_rec_proc {
	__s32 pid, rank, world, exited, exit_code;
	__s32 rank_source; /* CT_REC_RANK_* */
	char comm[16];
};

/*
 * CT_REC_PYCALL, after a call record with a Python stack: what the tracer made of the
 * stack by reading the live process, which a replay cannot read. Then, in the frame:
 * npath struct ct_rec_pynode (the module/op/redistribute path, outermost first), nstack
 * struct ct_rec_pyline (the stack's lines, innermost first), and NUL-terminated strings
 * that the string fields give as byte offsets from the first string (CT_REC_NOSTR: none).
 * The whole frame is at most CT_REC_MAX_EVENT bytes: strings that do not fit are
 * CT_REC_NOSTR.
 */
#define CT_REC_NOSTR	    0xffffffffu
#define CT_REC_PY_MAX_PATH  31 /* < the tree's depth */
#define CT_REC_PY_MAX_STACK 16

struct ct_rec_pycall {
	__u32 pid, tid;
	__u64 ts;	  /* the call record's: they must match */
	__u32 helper;	  /* the outermost collective API on the stack (string) */
	__u32 op;	  /* the op it dispatches, as CommDebugMode names it (string) */
	__u32 root_class; /* the class of the outermost module of the path (string) */
	__u8 phase;	  /* 0 forward, 1 backward */
	__u8 truncated;
	__u16 npath, nstack;
	__s8 in_ndim; /* the helper's tensor argument: its dims, its shape; below 0 none, and why:
		       * -1 none to show, -2 freed, -3 torch's layout unknown, -4 unreadable */
	__u8 pad[5];
	__s64 in_shape[6];
};

struct ct_rec_pynode {
	__u64 code, self, instr;
	__u32 name;	/* string: the display name (a module's FQN) */
	__u32 src, dst; /* strings: a redistribution's placements, before and after */
	__u8 type;	/* 1 module, 2 op, 3 redistribute, 5 compiled graph */
	__u8 pad[7];
};

struct ct_rec_pyline {
	__u32 qualname, file; /* strings */
	__s32 line;
	__u32 pad;
};

struct ct_rec_end {
	__u64 mono_to_wall_ns, start_ns, end_ns;
	__u64 lost_procs, dropped_user;
	__u32 n_drops, pad;
	__u64 drops[CT_REC_MAX_DROPS];
};

#endif /* COMMTRACE_RECORD_H */
