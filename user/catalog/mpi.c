// SPDX-License-Identifier: MIT
/*
 * Open MPI 4.x (libmpi.so.40). Handles are pointers into the library: the
 * datatype size and the communicator's rank and group size are read in BPF at
 * these offsets of the release build's structs (Open MPI 5 moves them):
 * ompi_datatype_t.super.size, ompi_communicator_t.c_my_rank / c_local_group,
 * ompi_group_t.grp_proc_count, and the world rank of the group's first process
 * (grp_proc_pointers[0]->super.proc_name.vpid, or the vpid a sentinel pointer encodes),
 * which tells groups of one size apart (offsets from offsetof() against Debian's
 * libopenmpi-dev 4.1.4 headers). Datatype and op names come from the library's
 * exported predefined objects (ompi_mpi_double …), compared by address.
 */
#include "catalog/catalog.h"

#define OMPI_DT_SIZE	 24
#define OMPI_COMM_RANK	 228
#define OMPI_COMM_GROUP	 248
#define OMPI_GROUP_NPROC 16
#define OMPI_GROUP_PROCS 32
#define OMPI_PROC_VPID	 44

#define DT(n)  [CT_V_DTYPE] = LOC_ARG(n), [CT_V_DTSIZE] = LOC_DEREF(n, OMPI_DT_SIZE, 8)
#define RDT(n) [CT_V_RDTYPE] = LOC_ARG(n), [CT_V_RDTSIZE] = LOC_DEREF(n, OMPI_DT_SIZE, 8)
#define COMM(n)                                                                                    \
	[CT_V_COMM] = LOC_ARG(n), [CT_V_COMM_RANK] = LOC_DEREF(n, OMPI_COMM_RANK, 4),              \
	[CT_V_COMM_SIZE] = LOC_DEREF2(n, OMPI_COMM_GROUP, OMPI_GROUP_NPROC, 4),                    \
	[CT_V_GROUP] = LOC_GROUP0(n, OMPI_COMM_GROUP, OMPI_GROUP_PROCS, OMPI_PROC_VPID)
/* Counts, roots and peers are C ints. */
#define CNT(n)	[CT_V_COUNT] = LOC_ARG32(n)
#define RCNT(n) [CT_V_RCOUNT] = LOC_ARG32(n)
#define OP(n)	[CT_V_OP] = LOC_ARG(n)
#define PEER(n) [CT_V_PEER] = LOC_ARG32(n)

#define S  BYTES(CT_V_COUNT, CT_V_DTSIZE)
#define R  BYTES(CT_V_RCOUNT, CT_V_RDTSIZE)
#define RS BYTES(CT_V_COUNT, CT_V_DTSIZE) /* one datatype for both sides */

/* Signatures shared by the blocking and non-blocking forms. */
#define ALLREDUCE_VALS CNT(3), DT(4), OP(5), COMM(6)
#define REDUCE_VALS    CNT(3), DT(4), OP(5), PEER(6), COMM(7)
#define BCAST_VALS     CNT(2), DT(3), PEER(4), COMM(5)
#define ALLGATHER_VALS CNT(2), DT(3), RCNT(5), RDT(6), COMM(7)
#define ALLTOALL_VALS  CNT(2), DT(3), RCNT(5), RDT(6), COMM(7)
#define GATHER_VALS    CNT(2), DT(3), RCNT(5), RDT(6), PEER(7), COMM(8)
#define SCATTER_VALS   CNT(2), DT(3), RCNT(5), RDT(6), PEER(7), COMM(8)
#define RSB_VALS       CNT(3), DT(4), OP(5), COMM(6)

static const struct ct_func mpi_funcs[] = {
    {"MPI_Allreduce", "MPI_Allreduce", .kind = CT_K_ALLREDUCE, .val = {ALLREDUCE_VALS}, .sent = S,
     .recv = RS},
    {"MPI_Iallreduce", "MPI_Iallreduce", .nonblocking = true, .kind = CT_K_ALLREDUCE,
     .val = {ALLREDUCE_VALS}, .sent = S, .recv = RS},
    {"MPI_Reduce", "MPI_Reduce", .kind = CT_K_REDUCE, .val = {REDUCE_VALS}, .sent = S,
     .recv = BYTES_ROOT(CT_V_COUNT, CT_V_DTSIZE)},
    {"MPI_Ireduce", "MPI_Ireduce", .nonblocking = true, .kind = CT_K_REDUCE, .val = {REDUCE_VALS},
     .sent = S, .recv = BYTES_ROOT(CT_V_COUNT, CT_V_DTSIZE)},
    {"MPI_Bcast", "MPI_Bcast", .kind = CT_K_BROADCAST, .val = {BCAST_VALS}, .sent = S, .recv = RS},
    {"MPI_Ibcast", "MPI_Ibcast", .nonblocking = true, .kind = CT_K_BROADCAST, .val = {BCAST_VALS},
     .sent = S, .recv = RS},
    {"MPI_Allgather", "MPI_Allgather", .kind = CT_K_ALLGATHER, .val = {ALLGATHER_VALS}, .sent = S,
     .recv = BYTES_X(CT_V_RCOUNT, CT_V_RDTSIZE)},
    {"MPI_Iallgather", "MPI_Iallgather", .nonblocking = true, .kind = CT_K_ALLGATHER,
     .val = {ALLGATHER_VALS}, .sent = S, .recv = BYTES_X(CT_V_RCOUNT, CT_V_RDTSIZE)},
    {"MPI_Allgatherv", "MPI_Allgatherv", .kind = CT_K_ALLGATHER,
     .val = {CNT(2), DT(3), [CT_V_RCOUNT] = LOC_SUM(5, 4), RDT(7), COMM(8)}, .sent = S, .recv = R},
    {"MPI_Gather", "MPI_Gather", .kind = CT_K_GATHER, .val = {GATHER_VALS}, .sent = S,
     .recv = BYTES_X_ROOT(CT_V_RCOUNT, CT_V_RDTSIZE)},
    {"MPI_Igather", "MPI_Igather", .nonblocking = true, .kind = CT_K_GATHER, .val = {GATHER_VALS},
     .sent = S, .recv = BYTES_X_ROOT(CT_V_RCOUNT, CT_V_RDTSIZE)},
    {"MPI_Gatherv", "MPI_Gatherv", .kind = CT_K_GATHER,
     .val = {CNT(2), DT(3), [CT_V_RCOUNT] = LOC_SUM(5, 4), RDT(7), PEER(8), COMM(9)}, .sent = S,
     .recv = BYTES_ROOT(CT_V_RCOUNT, CT_V_RDTSIZE)},
    {"MPI_Scatter", "MPI_Scatter", .kind = CT_K_SCATTER, .val = {SCATTER_VALS},
     .sent = BYTES_X_ROOT(CT_V_COUNT, CT_V_DTSIZE), .recv = R},
    {"MPI_Iscatter", "MPI_Iscatter", .nonblocking = true, .kind = CT_K_SCATTER,
     .val = {SCATTER_VALS}, .sent = BYTES_X_ROOT(CT_V_COUNT, CT_V_DTSIZE), .recv = R},
    {"MPI_Scatterv", "MPI_Scatterv", .kind = CT_K_SCATTER,
     .val = {[CT_V_COUNT] = LOC_SUM(2, 4), DT(4), RCNT(6), RDT(7), PEER(8), COMM(9)},
     .sent = BYTES_ROOT(CT_V_COUNT, CT_V_DTSIZE), .recv = R},
    {"MPI_Alltoall", "MPI_Alltoall", .kind = CT_K_ALLTOALL, .val = {ALLTOALL_VALS},
     .sent = BYTES_X(CT_V_COUNT, CT_V_DTSIZE), .recv = BYTES_X(CT_V_RCOUNT, CT_V_RDTSIZE)},
    {"MPI_Ialltoall", "MPI_Ialltoall", .nonblocking = true, .kind = CT_K_ALLTOALL,
     .val = {ALLTOALL_VALS}, .sent = BYTES_X(CT_V_COUNT, CT_V_DTSIZE),
     .recv = BYTES_X(CT_V_RCOUNT, CT_V_RDTSIZE)},
    {"MPI_Alltoallv", "MPI_Alltoallv", .kind = CT_K_ALLTOALL,
     .val = {[CT_V_COUNT] = LOC_SUM(2, 4), DT(4), [CT_V_RCOUNT] = LOC_SUM(6, 4), RDT(8), COMM(9)},
     .sent = S, .recv = R},
    {"MPI_Reduce_scatter", "MPI_Reduce_scatter", .kind = CT_K_REDUCE_SCATTER,
     .val = {[CT_V_COUNT] = LOC_SUM(3, 4), [CT_V_RCOUNT] = LOC_INDEX(3, 4), DT(4), OP(5), COMM(6)},
     .sent = S, .recv = BYTES(CT_V_RCOUNT, CT_V_DTSIZE)},
    {"MPI_Reduce_scatter_block", "MPI_Reduce_scatter_block", .kind = CT_K_REDUCE_SCATTER,
     .val = {RSB_VALS}, .sent = BYTES_X(CT_V_COUNT, CT_V_DTSIZE), .recv = RS},
    {"MPI_Ireduce_scatter_block", "MPI_Ireduce_scatter_block", .nonblocking = true,
     .kind = CT_K_REDUCE_SCATTER, .val = {RSB_VALS}, .sent = BYTES_X(CT_V_COUNT, CT_V_DTSIZE),
     .recv = RS},
    {"MPI_Barrier", "MPI_Barrier", .kind = CT_K_BARRIER, .val = {COMM(1)}},
    {"MPI_Ibarrier", "MPI_Ibarrier", .nonblocking = true, .kind = CT_K_BARRIER, .val = {COMM(1)}},
    {"MPI_Send", "MPI_Send", .kind = CT_K_SEND, .val = {CNT(2), DT(3), PEER(4), COMM(6)},
     .sent = S},
    {"MPI_Isend", "MPI_Isend", .nonblocking = true, .kind = CT_K_SEND,
     .val = {CNT(2), DT(3), PEER(4), COMM(6)}, .sent = S},
    {"MPI_Recv", "MPI_Recv", .kind = CT_K_RECV, .val = {CNT(2), DT(3), PEER(4), COMM(6)},
     .recv = RS},
    {"MPI_Irecv", "MPI_Irecv", .nonblocking = true, .kind = CT_K_RECV,
     .val = {CNT(2), DT(3), PEER(4), COMM(6)}, .recv = RS},
    {"MPI_Sendrecv", "MPI_Sendrecv", .kind = CT_K_SENDRECV,
     .val = {CNT(2), DT(3), PEER(4), RCNT(7), RDT(8), COMM(11)}, .sent = S, .recv = R},
    {"MPI_Wait", "MPI_Wait", .kind = CT_K_WAIT},
    {"MPI_Waitall", "MPI_Waitall", .kind = CT_K_WAIT, .val = {CNT(1)}},
    {"MPI_Comm_split", "MPI_Comm_split", .kind = CT_K_COMM_SPLIT, .val = {COMM(1)}},
    {"MPI_Comm_dup", "MPI_Comm_dup", .kind = CT_K_COMM_INIT, .val = {COMM(1)}},
    {"MPI_Comm_create", "MPI_Comm_create", .kind = CT_K_COMM_INIT, .val = {COMM(1)}},
    {"MPI_Comm_free", "MPI_Comm_free", .kind = CT_K_COMM_DESTROY},
};

#define NAMED(sym, name)                                                                           \
	{                                                                                          \
		"ompi_mpi_" sym, name                                                              \
	}
static const struct ct_named_object mpi_dtypes[] = {
    NAMED("char", "MPI_CHAR"),
    NAMED("signed_char", "MPI_SIGNED_CHAR"),
    NAMED("unsigned_char", "MPI_UNSIGNED_CHAR"),
    NAMED("byte", "MPI_BYTE"),
    NAMED("short", "MPI_SHORT"),
    NAMED("unsigned_short", "MPI_UNSIGNED_SHORT"),
    NAMED("int", "MPI_INT"),
    NAMED("unsigned", "MPI_UNSIGNED"),
    NAMED("long", "MPI_LONG"),
    NAMED("unsigned_long", "MPI_UNSIGNED_LONG"),
    NAMED("long_long_int", "MPI_LONG_LONG"),
    NAMED("unsigned_long_long", "MPI_UNSIGNED_LONG_LONG"),
    NAMED("float", "MPI_FLOAT"),
    NAMED("double", "MPI_DOUBLE"),
    NAMED("long_double", "MPI_LONG_DOUBLE"),
    NAMED("int8_t", "MPI_INT8_T"),
    NAMED("int16_t", "MPI_INT16_T"),
    NAMED("int32_t", "MPI_INT32_T"),
    NAMED("int64_t", "MPI_INT64_T"),
    NAMED("uint8_t", "MPI_UINT8_T"),
    NAMED("uint16_t", "MPI_UINT16_T"),
    NAMED("uint32_t", "MPI_UINT32_T"),
    NAMED("uint64_t", "MPI_UINT64_T"),
    NAMED("c_bool", "MPI_C_BOOL"),
    NAMED("c_float_complex", "MPI_C_FLOAT_COMPLEX"),
    NAMED("c_double_complex", "MPI_C_DOUBLE_COMPLEX"),
    NAMED("float_int", "MPI_FLOAT_INT"),
    NAMED("double_int", "MPI_DOUBLE_INT"),
    NAMED("long_int", "MPI_LONG_INT"),
    NAMED("2int", "MPI_2INT"),
    NAMED("aint", "MPI_AINT"),
    NAMED("count", "MPI_COUNT"),
    NAMED("offset", "MPI_OFFSET"),
};

/*
 * Predefined reduce ops, named as reported (docs/json.md): MPI_SUM is "sum", as NCCL's and
 * HCCL's. Any other handle is an MPI_Op_create op: "user".
 */
static const struct ct_named_object mpi_ops[] = {
    NAMED("op_sum", "sum"),	    NAMED("op_prod", "prod"),	  NAMED("op_max", "max"),
    NAMED("op_min", "min"),	    NAMED("op_land", "land"),	  NAMED("op_lor", "lor"),
    NAMED("op_lxor", "lxor"),	    NAMED("op_band", "band"),	  NAMED("op_bor", "bor"),
    NAMED("op_bxor", "bxor"),	    NAMED("op_maxloc", "maxloc"), NAMED("op_minloc", "minloc"),
    NAMED("op_replace", "replace"),
};

static const char *const mpi_files[] = {"libmpi.so", NULL};

const struct ct_libdesc ct_lib_mpi = {
    .lib = CT_LIB_MPI,
    .name = "mpi",
    .files = mpi_files,
    .funcs = mpi_funcs,
    .n_funcs = ARRAY_LEN(mpi_funcs),
    .dtype_objects = mpi_dtypes,
    .n_dtype_objects = ARRAY_LEN(mpi_dtypes),
    .op_objects = mpi_ops,
    .n_op_objects = ARRAY_LEN(mpi_ops),
    .times_transfer = true,
    .times = "host time inside the call (blocking: the whole collective; I-forms: the post)",
};
