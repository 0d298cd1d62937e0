/* SPDX-License-Identifier: MIT */
/*
 * The probe catalog: per-library knowledge as data. A library is a table of
 * functions; a function says which symbol to probe, what kind of call it is,
 * where each argument value lives (struct ct_loc, evaluated in BPF) and how the
 * values give bytes sent and received (evaluated here). The probe id (attach
 * cookie) of a function is its index in the global catalog.
 */
#ifndef CT_CATALOG_H
#define CT_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "commtrace/abi.h"

/* Bytes of one side of a call: count × element size [× comm size], maybe root-only. */
enum ct_when {
	CT_W_ALWAYS = 0,
	CT_W_ROOT,    /* only where this rank is the root (CT_V_PEER) */
	CT_W_NONROOT, /* only where it is not */
};

struct ct_bytes_rule {
	uint8_t on;
	uint8_t count;	 /* value slot of the count */
	uint8_t size;	 /* value slot of the element size; CT_SZ_DTYPE: from the dtype table */
	uint8_t by_comm; /* multiply by the communicator size */
	uint8_t when;	 /* enum ct_when */
};

#define CT_SZ_DTYPE  0xfe /* element size from the library's dtype enum (NCCL, HCCL) */
#define CT_SZ_RDTYPE 0xfd /* same, receive-side dtype */

/*
 * A probe inside a function instead of at its entry and return: at the instruction after a
 * call whose result it reads, found by the call's bytes (and the next instruction's) among
 * the function's first bytes. Where they are not found, the function's other catalog entry
 * (same symbol, no point) is probed at entry and return.
 */
struct ct_point {
	const uint8_t *bytes;
	uint8_t len;	/* of bytes */
	uint8_t at;	/* the probe's offset in them: just after the call */
	uint8_t within; /* how far into the function they may start */
};

struct ct_func {
	const char *name;   /* the name users know: MPI_Allreduce, gloo::allreduce, … */
	const char *symbol; /* C symbol, or C++ qualified name when cxx */
	bool cxx;
	bool optional;		      /* absent from some versions: not an error when missing */
	bool nonblocking;	      /* returns at the post (MPI's I-forms): no transfer time */
	uint8_t kind;		      /* enum ct_kind */
	uint16_t flags;		      /* CT_PF_* */
	const struct ct_point *point; /* with CT_PF_POINT */
	struct ct_loc val[CT_NVAL];
	struct ct_bytes_rule sent, recv;
};

struct ct_named_value {
	uint64_t value;
	const char *name;
	uint32_t size; /* element size for dtypes */
};

/* A data symbol of the library that names a handle value (Open MPI's predefined datatypes). */
struct ct_named_object {
	const char *symbol;
	const char *name;
};

struct ct_libdesc {
	uint8_t lib;		  /* enum ct_lib */
	const char *name;	  /* "mpi", "gloo", "c10d", "nccl", "hccl" */
	const char *const *files; /* basename prefixes that identify the library */
	/* when several descriptions share file names: does this one fit the file? */
	bool (*accept)(const char *path);
	const struct ct_func *funcs;
	size_t n_funcs;
	/* dtype / op naming: enum values (NCCL, HCCL) or handle objects (MPI) */
	const struct ct_named_value *dtypes;
	size_t n_dtypes;
	const struct ct_named_value *ops;
	size_t n_ops;
	const struct ct_named_object *dtype_objects;
	size_t n_dtype_objects;
	const struct ct_named_object *op_objects;
	size_t n_op_objects;
	const char *times;   /* what the durations mean, for the README and the summary */
	bool times_transfer; /* they time the transfer: a bandwidth (bandwidth.h) */
	/* not a communication library (it helps attribute calls): no statistics, reports
	 * or "no library" check of its own */
	bool aux;
	bool stacks_only; /* its probes serve the Python stacks only: none with --no-stacks */
};

extern const struct ct_libdesc ct_lib_mpi, ct_lib_gloo, ct_lib_c10d, ct_lib_c10d2, ct_lib_nccl,
    ct_lib_hccl, ct_lib_ldso, ct_lib_torch_python;
int ct_torch_major(const char *path);

/* All libraries, in probe-id order. */
extern const struct ct_libdesc *const ct_libs[];
extern const size_t ct_n_libs;

/* Global probe ids. */
size_t ct_catalog_size(void);
const struct ct_func *ct_catalog_func(uint32_t probe_id, const struct ct_libdesc **lib);
/*
 * The probe spec BPF evaluates for a probe id (the attach cookie): the function's slots,
 * and the order to read them in (plain reads, then what the communicator gives, then
 * sums and indexes). Zeroed for an unknown id.
 */
void ct_catalog_spec(uint32_t probe_id, struct ct_probe_spec *spec);
/* First probe id of a library's functions. */
uint32_t ct_catalog_base(const struct ct_libdesc *lib);
/* The library a file belongs to, by its basename; NULL if none. */
const struct ct_libdesc *ct_catalog_match_file(const char *path);
/* "libmpi*, libgloo*, …" for messages. */
const char *ct_catalog_file_list(void);

const char *ct_lib_name(uint8_t lib);
const char *ct_kind_name(uint8_t kind);

/* Whether a function reads a value slot (CT_V_OP, CT_V_PEER, …). */
static inline bool ct_func_reads(const struct ct_func *fn, int slot)
{
	return slot >= 0 && slot < CT_NVAL && fn->val[slot].op != CT_LOC_NONE;
}

/*
 * What the function's CT_V_PEER is: "root" (broadcast, reduce, gather, scatter), "peer"
 * (send, recv, sendrecv: the destination of a sendrecv), or NULL when it reads none.
 */
const char *ct_peer_role(const struct ct_func *fn);

/* Enum lookups (NULL / 0 when unknown). */
const struct ct_named_value *ct_named_find(const struct ct_named_value *t, size_t n,
					   uint64_t value);

/* Bytes of one side of a call from its decoded values (rank: this rank in the comm, or -1). */
uint64_t ct_bytes(const struct ct_libdesc *lib, const struct ct_bytes_rule *r, const __u64 *val);

/* Shorthands for the tables. */
#define LOC_ARG(n)                                                                                 \
	{                                                                                          \
		.op = CT_LOC_ARG, .arg = (n), .size = 8                                            \
	}
#define LOC_ARG32(n)                                                                               \
	{                                                                                          \
		.op = CT_LOC_ARG, .arg = (n), .size = 4                                            \
	}
#define LOC_DEREF(n, off, sz)                                                                      \
	{                                                                                          \
		.op = CT_LOC_DEREF, .arg = (n), .size = (sz), .off1 = (off)                        \
	}
#define LOC_DEREF2(n, o1, o2, sz)                                                                  \
	{                                                                                          \
		.op = CT_LOC_DEREF2, .arg = (n), .size = (sz), .off1 = (o1), .off2 = (o2)          \
	}
#define LOC_DEREF3(n, o1, o2, sz)                                                                  \
	{                                                                                          \
		.op = CT_LOC_DEREF3, .arg = (n), .size = (sz), .off1 = (o1), .off2 = (o2)          \
	}
#define LOC_GROUP0(n, o1, o2, at)                                                                  \
	{                                                                                          \
		.op = CT_LOC_GROUP0, .arg = (n), .size = 4, .aux = (at), .off1 = (o1),             \
		.off2 = (o2)                                                                       \
	}
#define LOC_SUM(n, sz)                                                                             \
	{                                                                                          \
		.op = CT_LOC_SUM, .arg = (n), .size = (sz), .aux = CT_V_COMM_SIZE                  \
	}
#define LOC_INDEX(n, sz)                                                                           \
	{                                                                                          \
		.op = CT_LOC_INDEX, .arg = (n), .size = (sz), .aux = CT_V_COMM_RANK                \
	}
#define LOC_CONST(v)                                                                               \
	{                                                                                          \
		.op = CT_LOC_CONST, .off1 = (v)                                                    \
	}
#define LOC_COMM_SIZE                                                                              \
	{                                                                                          \
		.op = CT_LOC_COMMINFO, .aux = 0                                                    \
	}
#define LOC_COMM_RANK                                                                              \
	{                                                                                          \
		.op = CT_LOC_COMMINFO, .aux = 1                                                    \
	}

#define BYTES(c, s)                                                                                \
	{                                                                                          \
		.on = 1, .count = (c), .size = (s)                                                 \
	}
#define BYTES_X(c, s)                                                                              \
	{                                                                                          \
		.on = 1, .count = (c), .size = (s), .by_comm = 1                                   \
	}
#define BYTES_ROOT(c, s)                                                                           \
	{                                                                                          \
		.on = 1, .count = (c), .size = (s), .when = CT_W_ROOT                              \
	}
#define BYTES_X_ROOT(c, s)                                                                         \
	{                                                                                          \
		.on = 1, .count = (c), .size = (s), .by_comm = 1, .when = CT_W_ROOT                \
	}

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
