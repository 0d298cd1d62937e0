// SPDX-License-Identifier: MIT
/*
 * Gloo's collective entry points (libgloo.so.0, or statically inside
 * libtorch_cpu in some builds). Each takes one options object; its fields are
 * read at offsets generated from Gloo's headers (include/commtrace/gloo_offsets.h).
 * These run on Gloo's worker threads, not on the thread that called c10d: their
 * durations are the execution of the algorithm.
 */
#include "catalog/catalog.h"
#include "commtrace/gloo_offsets.h"

#define CTX(T)                                                                                     \
	[CT_V_COMM] = LOC_DEREF(1, CT_GLOO_##T##_CONTEXT, 8),                                      \
	[CT_V_COMM_RANK] = LOC_DEREF2(1, CT_GLOO_##T##_CONTEXT, CT_GLOO_CONTEXT_RANK, 4),          \
	[CT_V_COMM_SIZE] = LOC_DEREF2(1, CT_GLOO_##T##_CONTEXT, CT_GLOO_CONTEXT_SIZE, 4)
#define ELEMS(T)                                                                                   \
	[CT_V_COUNT] = LOC_DEREF(1, CT_GLOO_##T##_ELEMENTS, 8), [CT_V_DTSIZE] = LOC_DEREF(         \
								    1, CT_GLOO_##T##_ELEMSIZE, 8)
/* Byte sizes of the unbound input / output buffers (count in bytes, element size 1). */
#define INBUF(T)                                                                                   \
	[CT_V_COUNT] = LOC_DEREF2(1, CT_GLOO_##T##_IN, CT_GLOO_UBUF_SIZE, 8), [CT_V_DTSIZE] =      \
										  LOC_CONST(1)
#define OUTBUF(T)                                                                                  \
	[CT_V_RCOUNT] = LOC_DEREF2(1, CT_GLOO_##T##_OUT, CT_GLOO_UBUF_SIZE, 8), [CT_V_RDTSIZE] =   \
										    LOC_CONST(1)
#define ROOT(T) [CT_V_PEER] = LOC_DEREF(1, CT_GLOO_##T##_ROOT, 4)

#define S BYTES(CT_V_COUNT, CT_V_DTSIZE)
#define R BYTES(CT_V_RCOUNT, CT_V_RDTSIZE)

static const struct ct_func gloo_funcs[] = {
    {"gloo::allreduce", "gloo::allreduce", .cxx = true, .kind = CT_K_ALLREDUCE,
     .val = {CTX(ALLREDUCE), ELEMS(ALLREDUCE)}, .sent = S, .recv = S},
    {"gloo::allgather", "gloo::allgather", .cxx = true, .kind = CT_K_ALLGATHER,
     .val = {CTX(ALLGATHER), INBUF(ALLGATHER), OUTBUF(ALLGATHER)}, .sent = S, .recv = R},
    {"gloo::allgatherv", "gloo::allgatherv", .cxx = true, .kind = CT_K_ALLGATHER,
     .val = {CTX(ALLGATHERV), INBUF(ALLGATHERV), OUTBUF(ALLGATHERV)}, .sent = S, .recv = R},
    {"gloo::broadcast", "gloo::broadcast", .cxx = true, .kind = CT_K_BROADCAST,
     .val = {CTX(BROADCAST), ELEMS(BROADCAST), ROOT(BROADCAST)}, .sent = S, .recv = S},
    {"gloo::reduce", "gloo::reduce", .cxx = true, .kind = CT_K_REDUCE,
     .val = {CTX(REDUCE), ELEMS(REDUCE), ROOT(REDUCE)}, .sent = S,
     .recv = BYTES_ROOT(CT_V_COUNT, CT_V_DTSIZE)},
    {"gloo::alltoall", "gloo::alltoall", .cxx = true, .kind = CT_K_ALLTOALL,
     .val = {CTX(ALLTOALL), INBUF(ALLTOALL), OUTBUF(ALLTOALL)}, .sent = S, .recv = R},
    {"gloo::alltoallv", "gloo::alltoallv", .cxx = true, .kind = CT_K_ALLTOALL,
     .val = {CTX(ALLTOALLV), INBUF(ALLTOALLV), OUTBUF(ALLTOALLV)}, .sent = S, .recv = R},
    {"gloo::gather", "gloo::gather", .cxx = true, .kind = CT_K_GATHER,
     .val = {CTX(GATHER), INBUF(GATHER), OUTBUF(GATHER), ROOT(GATHER)}, .sent = S,
     .recv = BYTES_ROOT(CT_V_RCOUNT, CT_V_RDTSIZE)},
    /* ScatterOptions' input is a vector of buffers: only the received side is read. */
    {"gloo::scatter", "gloo::scatter", .cxx = true, .kind = CT_K_SCATTER,
     .val = {CTX(SCATTER), OUTBUF(SCATTER), ROOT(SCATTER)}, .recv = R},
    {"gloo::barrier", "gloo::barrier", .cxx = true, .kind = CT_K_BARRIER, .val = {CTX(BARRIER)}},
};

static const char *const gloo_files[] = {"libgloo.so", NULL};

const struct ct_libdesc ct_lib_gloo = {
    .lib = CT_LIB_GLOO,
    .name = "gloo",
    .files = gloo_files,
    .funcs = gloo_funcs,
    .n_funcs = ARRAY_LEN(gloo_funcs),
    .times_transfer = true,
    .times = "execution of the algorithm on a Gloo worker thread",
};
