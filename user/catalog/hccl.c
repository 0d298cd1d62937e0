// SPDX-License-Identifier: MIT
/*
 * Huawei HCCL's published C API (libhccl.so, Ascend). Not installable here: the
 * tests prove this table with a stand-in library of the same ABI
 * (tests/progs/libhccl.c). Like NCCL, calls enqueue on a stream (host-side
 * enqueue times) and HcclComm is opaque: size and rank are remembered from
 * HcclCommInitRootInfo.
 */
#include "catalog/catalog.h"

#define CNT(n)	[CT_V_COUNT] = LOC_ARG(n)
#define RCNT(n) [CT_V_RCOUNT] = LOC_ARG(n)
#define DT(n)	[CT_V_DTYPE] = LOC_ARG32(n)
#define RDT(n)	[CT_V_RDTYPE] = LOC_ARG32(n)
#define OP(n)	[CT_V_OP] = LOC_ARG32(n)
#define PEER(n) [CT_V_PEER] = LOC_ARG32(n)
#define COMM(n)                                                                                    \
	[CT_V_COMM] = LOC_ARG(n), [CT_V_COMM_SIZE] = LOC_COMM_SIZE, [CT_V_COMM_RANK] = LOC_COMM_RANK

#define S BYTES(CT_V_COUNT, CT_SZ_DTYPE)
#define R BYTES(CT_V_RCOUNT, CT_SZ_RDTYPE)

static const struct ct_func hccl_funcs[] = {
    {"HcclAllReduce", "HcclAllReduce", .kind = CT_K_ALLREDUCE,
     .val = {CNT(3), DT(4), OP(5), COMM(6)}, .sent = S, .recv = S},
    {"HcclBroadcast", "HcclBroadcast", .kind = CT_K_BROADCAST,
     .val = {CNT(2), DT(3), PEER(4), COMM(5)}, .sent = S, .recv = S},
    {"HcclAllGather", "HcclAllGather", .kind = CT_K_ALLGATHER, .val = {CNT(3), DT(4), COMM(5)},
     .sent = S, .recv = BYTES_X(CT_V_COUNT, CT_SZ_DTYPE)},
    {"HcclReduceScatter", "HcclReduceScatter", .kind = CT_K_REDUCE_SCATTER,
     .val = {CNT(3), DT(4), OP(5), COMM(6)}, .sent = BYTES_X(CT_V_COUNT, CT_SZ_DTYPE), .recv = S},
    {"HcclReduce", "HcclReduce", .kind = CT_K_REDUCE,
     .val = {CNT(3), DT(4), OP(5), PEER(6), COMM(7)}, .sent = S,
     .recv = BYTES_ROOT(CT_V_COUNT, CT_SZ_DTYPE)},
    {"HcclAlltoAll", "HcclAlltoAll", .kind = CT_K_ALLTOALL,
     .val = {CNT(2), DT(3), RCNT(5), RDT(6), COMM(7)}, .sent = BYTES_X(CT_V_COUNT, CT_SZ_DTYPE),
     .recv = BYTES_X(CT_V_RCOUNT, CT_SZ_RDTYPE)},
    {"HcclAlltoAllV", "HcclAlltoAllV", .kind = CT_K_ALLTOALL,
     .val = {[CT_V_COUNT] = LOC_SUM(2, 8), DT(4), [CT_V_RCOUNT] = LOC_SUM(6, 8), RDT(8), COMM(9)},
     .sent = S, .recv = R},
    {"HcclSend", "HcclSend", .kind = CT_K_SEND, .val = {CNT(2), DT(3), PEER(4), COMM(5)},
     .sent = S},
    {"HcclRecv", "HcclRecv", .kind = CT_K_RECV, .val = {CNT(2), DT(3), PEER(4), COMM(5)},
     .recv = S},
    {"HcclBarrier", "HcclBarrier", .kind = CT_K_BARRIER, .val = {COMM(1)}},
    {"HcclCommInitRootInfo", "HcclCommInitRootInfo", .kind = CT_K_COMM_INIT,
     .flags = CT_PF_OUT_PTR | CT_PF_COMM_INIT,
     .val = {[CT_V_COMM_SIZE] = LOC_ARG32(1),
	     [CT_V_COMM_RANK] = LOC_ARG32(3),
	     [CT_V_OUT] = LOC_ARG(4)}},
    {"HcclCommInitClusterInfo", "HcclCommInitClusterInfo", .optional = true, .kind = CT_K_COMM_INIT,
     .flags = CT_PF_OUT_PTR, .val = {[CT_V_COMM_RANK] = LOC_ARG32(2), [CT_V_OUT] = LOC_ARG(3)}},
    {"HcclCommInitAll", "HcclCommInitAll", .optional = true, .kind = CT_K_COMM_INIT,
     .val = {[CT_V_COMM_SIZE] = LOC_ARG32(1)}},
    {"HcclCommDestroy", "HcclCommDestroy", .kind = CT_K_COMM_DESTROY, .val = {COMM(1)}},
};

static const struct ct_named_value hccl_dtypes[] = {
    {0, "HCCL_DATA_TYPE_INT8", 1},   {1, "HCCL_DATA_TYPE_INT16", 2},
    {2, "HCCL_DATA_TYPE_INT32", 4},  {3, "HCCL_DATA_TYPE_FP16", 2},
    {4, "HCCL_DATA_TYPE_FP32", 4},   {5, "HCCL_DATA_TYPE_INT64", 8},
    {6, "HCCL_DATA_TYPE_UINT64", 8}, {7, "HCCL_DATA_TYPE_UINT8", 1},
    {8, "HCCL_DATA_TYPE_UINT16", 2}, {9, "HCCL_DATA_TYPE_UINT32", 4},
    {10, "HCCL_DATA_TYPE_FP64", 8},  {11, "HCCL_DATA_TYPE_BFP16", 2},
};

/* HcclReduceOp; named as reported (docs/json.md): HCCL_REDUCE_SUM is "sum". */
static const struct ct_named_value hccl_ops[] = {
    {0, "sum", 0},
    {1, "prod", 0},
    {2, "max", 0},
    {3, "min", 0},
};

static const char *const hccl_files[] = {"libhccl.so", NULL};

const struct ct_libdesc ct_lib_hccl = {
    .lib = CT_LIB_HCCL,
    .name = "hccl",
    .files = hccl_files,
    .funcs = hccl_funcs,
    .n_funcs = ARRAY_LEN(hccl_funcs),
    .dtypes = hccl_dtypes,
    .n_dtypes = ARRAY_LEN(hccl_dtypes),
    .ops = hccl_ops,
    .n_ops = ARRAY_LEN(hccl_ops),
    .times = "host-side enqueue onto an Ascend stream, not the device execution",
};
