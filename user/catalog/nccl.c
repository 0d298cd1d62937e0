// SPDX-License-Identifier: MIT
/*
 * NCCL's C API (libnccl.so.2). ncclX is a weak alias of pncclX: resolution
 * attaches once per address. Calls enqueue work on a CUDA stream and return:
 * durations are host-side enqueue times. ncclComm_t is opaque, so a
 * communicator's size and rank are remembered from ncclCommInitRank* (in BPF,
 * at its return) and looked up for every later call.
 */
#include "catalog/catalog.h"

#define CNT(n)	[CT_V_COUNT] = LOC_ARG(n)
#define DT(n)	[CT_V_DTYPE] = LOC_ARG32(n)
#define OP(n)	[CT_V_OP] = LOC_ARG32(n)
#define PEER(n) [CT_V_PEER] = LOC_ARG32(n)
#define COMM(n)                                                                                    \
	[CT_V_COMM] = LOC_ARG(n), [CT_V_COMM_SIZE] = LOC_COMM_SIZE, [CT_V_COMM_RANK] = LOC_COMM_RANK

#define S BYTES(CT_V_COUNT, CT_SZ_DTYPE)

static const struct ct_func nccl_funcs[] = {
    {"ncclAllReduce", "ncclAllReduce", .kind = CT_K_ALLREDUCE,
     .val = {CNT(3), DT(4), OP(5), COMM(6)}, .sent = S, .recv = S},
    {"ncclBroadcast", "ncclBroadcast", .kind = CT_K_BROADCAST,
     .val = {CNT(3), DT(4), PEER(5), COMM(6)}, .sent = S, .recv = S},
    /* Not ncclBcast: it is ncclBroadcast(buff, buff, ...), and probing both counted every
     * in-place broadcast twice (seen with NCCL 2.28 under PyTorch 2.11 on an H200). */
    {"ncclReduce", "ncclReduce", .kind = CT_K_REDUCE,
     .val = {CNT(3), DT(4), OP(5), PEER(6), COMM(7)}, .sent = S,
     .recv = BYTES_ROOT(CT_V_COUNT, CT_SZ_DTYPE)},
    {"ncclAllGather", "ncclAllGather", .kind = CT_K_ALLGATHER, .val = {CNT(3), DT(4), COMM(5)},
     .sent = S, .recv = BYTES_X(CT_V_COUNT, CT_SZ_DTYPE)},
    {"ncclReduceScatter", "ncclReduceScatter", .kind = CT_K_REDUCE_SCATTER,
     .val = {CNT(3), DT(4), OP(5), COMM(6)}, .sent = BYTES_X(CT_V_COUNT, CT_SZ_DTYPE), .recv = S},
    {"ncclAlltoAll", "ncclAlltoAll", .optional = true, .kind = CT_K_ALLTOALL,
     .val = {CNT(3), DT(4), COMM(5)}, .sent = BYTES_X(CT_V_COUNT, CT_SZ_DTYPE),
     .recv = BYTES_X(CT_V_COUNT, CT_SZ_DTYPE)},
    {"ncclGather", "ncclGather", .optional = true, .kind = CT_K_GATHER,
     .val = {CNT(3), DT(4), PEER(5), COMM(6)}, .sent = S,
     .recv = BYTES_X_ROOT(CT_V_COUNT, CT_SZ_DTYPE)},
    {"ncclScatter", "ncclScatter", .optional = true, .kind = CT_K_SCATTER,
     .val = {CNT(3), DT(4), PEER(5), COMM(6)}, .sent = BYTES_X_ROOT(CT_V_COUNT, CT_SZ_DTYPE),
     .recv = S},
    {"ncclSend", "ncclSend", .kind = CT_K_SEND, .val = {CNT(2), DT(3), PEER(4), COMM(5)},
     .sent = S},
    {"ncclRecv", "ncclRecv", .kind = CT_K_RECV, .val = {CNT(2), DT(3), PEER(4), COMM(5)},
     .recv = S},
    {"ncclGroupStart", "ncclGroupStart", .kind = CT_K_GROUP_START},
    {"ncclGroupEnd", "ncclGroupEnd", .kind = CT_K_GROUP_END},
    /* The 128-byte ncclUniqueId goes by value on the stack: rank is the 3rd register. */
    {"ncclCommInitRank", "ncclCommInitRank", .kind = CT_K_COMM_INIT,
     .flags = CT_PF_OUT_PTR | CT_PF_COMM_INIT,
     .val = {[CT_V_OUT] = LOC_ARG(1),
	     [CT_V_COMM_SIZE] = LOC_ARG32(2),
	     [CT_V_COMM_RANK] = LOC_ARG32(3)}},
    {"ncclCommInitRankConfig", "ncclCommInitRankConfig", .optional = true, .kind = CT_K_COMM_INIT,
     .flags = CT_PF_OUT_PTR | CT_PF_COMM_INIT,
     .val = {[CT_V_OUT] = LOC_ARG(1),
	     [CT_V_COMM_SIZE] = LOC_ARG32(2),
	     [CT_V_COMM_RANK] = LOC_ARG32(3)}},
    {"ncclCommInitAll", "ncclCommInitAll", .kind = CT_K_COMM_INIT,
     .val = {[CT_V_COMM_SIZE] = LOC_ARG32(2)}},
    {"ncclCommSplit", "ncclCommSplit", .optional = true, .kind = CT_K_COMM_SPLIT,
     .flags = CT_PF_OUT_PTR, .val = {COMM(1), [CT_V_OUT] = LOC_ARG(4)}},
    {"ncclCommDestroy", "ncclCommDestroy", .kind = CT_K_COMM_DESTROY, .val = {COMM(1)}},
    {"ncclCommAbort", "ncclCommAbort", .kind = CT_K_COMM_DESTROY, .val = {COMM(1)}},
};

static const struct ct_named_value nccl_dtypes[] = {
    {0, "ncclInt8", 1},	    {1, "ncclUint8", 1},       {2, "ncclInt32", 4},
    {3, "ncclUint32", 4},   {4, "ncclInt64", 8},       {5, "ncclUint64", 8},
    {6, "ncclFloat16", 2},  {7, "ncclFloat32", 4},     {8, "ncclFloat64", 8},
    {9, "ncclBfloat16", 2}, {10, "ncclFloat8e4m3", 1}, {11, "ncclFloat8e5m2", 1},
};

/* ncclRedOp_t; named as reported (docs/json.md): ncclSum is "sum". Values from
 * ncclRedOpCreatePreMulSum (5 and up) are not named. */
static const struct ct_named_value nccl_ops[] = {
    {0, "sum", 0}, {1, "prod", 0}, {2, "max", 0}, {3, "min", 0}, {4, "avg", 0},
};

static const char *const nccl_files[] = {"libnccl.so", NULL};

const struct ct_libdesc ct_lib_nccl = {
    .lib = CT_LIB_NCCL,
    .name = "nccl",
    .files = nccl_files,
    .funcs = nccl_funcs,
    .n_funcs = ARRAY_LEN(nccl_funcs),
    .dtypes = nccl_dtypes,
    .n_dtypes = ARRAY_LEN(nccl_dtypes),
    .ops = nccl_ops,
    .n_ops = ARRAY_LEN(nccl_ops),
    .times = "host-side enqueue onto a CUDA stream, not the device execution",
};
