// SPDX-License-Identifier: MIT
/*
 * PyTorch c10d ProcessGroup methods: the caller-thread side of a collective
 * (Gloo in libtorch_cpu, NCCL in libtorch_cuda). Each library instance has only
 * some of them, hence all optional. They return a Work handle as soon as the
 * work is enqueued: the duration is the enqueue, not the collective.
 *
 * Every method returns c10::intrusive_ptr<Work> by value: a class with a
 * non-trivial destructor, returned through a hidden pointer in the first
 * register. So `this` is argument 2 and the method's own arguments start at 3.
 *
 * Sizes come from the tensors' TensorImpl and the group from ProcessGroup, at
 * offsets of PyTorch 1.13 (x86-64), measured on the live objects (an at::Tensor
 * is one TensorImpl pointer; Tensor._cdata is that pointer):
 * TensorImpl.numel_ 168, TensorImpl.data_type_ (TypeMeta index = ScalarType) 176,
 * ProcessGroup.rank_ 24, size_ 28 (after the intrusive_ptr_target header).
 * Re-measured for --sharding (user/python/params.c, which also reads the dim count at 72
 * and the sizes at 80: inline up to 5 dims, else a heap pointer there).
 */
#include "catalog/catalog.h"

#define TI_NUMEL 168
#define TI_DTYPE 176
#define PG_RANK	 24
#define PG_SIZE	 28

#define GROUP                                                                                      \
	[CT_V_COMM] = LOC_ARG(2), [CT_V_COMM_RANK] = LOC_DEREF(2, PG_RANK, 4),                     \
	[CT_V_COMM_SIZE] = LOC_DEREF(2, PG_SIZE, 4)
/* std::vector<at::Tensor>& in argument n: its first tensor. */
#define VEC(n)                                                                                     \
	[CT_V_COUNT] = LOC_DEREF3(n, 0, TI_NUMEL, 8), [CT_V_DTYPE] = LOC_DEREF3(n, 0, TI_DTYPE, 2)
/* at::Tensor& in argument n. */
#define TEN(n)                                                                                     \
	[CT_V_COUNT] = LOC_DEREF2(n, 0, TI_NUMEL, 8), [CT_V_DTYPE] = LOC_DEREF2(n, 0, TI_DTYPE, 2)
#define RTEN(n)                                                                                    \
	[CT_V_RCOUNT] = LOC_DEREF2(n, 0, TI_NUMEL, 8), [CT_V_RDTYPE] = LOC_DEREF2(n, 0, TI_DTYPE, 2)

#define S  BYTES(CT_V_COUNT, CT_SZ_DTYPE)
#define SX BYTES_X(CT_V_COUNT, CT_SZ_DTYPE)

#define PG(cls, m, k, ...)                                                                         \
	{                                                                                          \
		"ProcessGroup" cls "::" m, "c10d::ProcessGroup" cls "::" m,                        \
		    .cxx = true, .optional = true, .kind = (k), __VA_ARGS__                        \
	}
/* Argument 1 is the hidden return slot, 2 `this`; the tensors follow. */
#define PG_ALL(cls)                                                                                \
	PG(cls, "allreduce", CT_K_ALLREDUCE, .val = {GROUP, VEC(3)}, .sent = S, .recv = S),        \
	    PG(cls, "allreduce_coalesced", CT_K_ALLREDUCE, .val = {GROUP}),                        \
	    PG(cls, "broadcast", CT_K_BROADCAST, .val = {GROUP, VEC(3)}, .sent = S, .recv = S),    \
	    PG(cls, "reduce", CT_K_REDUCE, .val = {GROUP, VEC(3)}, .sent = S),                     \
	    PG(cls, "allgather", CT_K_ALLGATHER, .val = {GROUP, VEC(4)}, .sent = S, .recv = SX),   \
	    PG(cls, "_allgather_base", CT_K_ALLGATHER, .val = {GROUP, TEN(4)}, .sent = S,          \
	       .recv = SX),                                                                        \
	    PG(cls, "allgather_coalesced", CT_K_ALLGATHER, .val = {GROUP}),                        \
	    PG(cls, "gather", CT_K_GATHER, .val = {GROUP}),                                        \
	    PG(cls, "scatter", CT_K_SCATTER, .val = {GROUP}),                                      \
	    PG(cls, "reduce_scatter", CT_K_REDUCE_SCATTER, .val = {GROUP, VEC(3)}, .sent = SX,     \
	       .recv = S),                                                                         \
	    PG(cls, "_reduce_scatter_base", CT_K_REDUCE_SCATTER, .val = {GROUP, TEN(3)},           \
	       .sent = SX, .recv = S),                                                             \
	    PG(cls, "alltoall_base", CT_K_ALLTOALL, .val = {GROUP, TEN(4), RTEN(3)}, .sent = S,    \
	       .recv = BYTES(CT_V_RCOUNT, CT_SZ_RDTYPE)),                                          \
	    PG(cls, "alltoall", CT_K_ALLTOALL, .val = {GROUP}),                                    \
	    PG(cls, "barrier", CT_K_BARRIER, .val = {GROUP}),                                      \
	    PG(cls, "send", CT_K_SEND, .val = {GROUP, VEC(3), [CT_V_PEER] = LOC_ARG32(4)},         \
	       .sent = S),                                                                         \
	    PG(cls, "recv", CT_K_RECV, .val = {GROUP, VEC(3), [CT_V_PEER] = LOC_ARG32(4)},         \
	       .recv = S)

static const struct ct_func c10d_funcs[] = {
    PG_ALL("Gloo"),
    PG_ALL("NCCL"),
};

/* c10::ScalarType, which is also the TypeMeta index of these types. */
static const struct ct_named_value torch_dtypes[] = {
    {0, "torch.uint8", 1},     {1, "torch.int8", 1},	     {2, "torch.int16", 2},
    {3, "torch.int32", 4},     {4, "torch.int64", 8},	     {5, "torch.float16", 2},
    {6, "torch.float32", 4},   {7, "torch.float64", 8},	     {8, "torch.complex32", 4},
    {9, "torch.complex64", 8}, {10, "torch.complex128", 16}, {11, "torch.bool", 1},
    {12, "torch.qint8", 1},    {13, "torch.quint8", 1},	     {14, "torch.qint32", 4},
    {15, "torch.bfloat16", 2},
};

static const char *const c10d_files[] = {"libtorch_cpu.so", "libtorch_cuda.so", NULL};

const struct ct_libdesc ct_lib_c10d = {
    .lib = CT_LIB_C10D,
    .name = "c10d",
    .files = c10d_files,
    .funcs = c10d_funcs,
    .n_funcs = ARRAY_LEN(c10d_funcs),
    .dtypes = torch_dtypes,
    .n_dtypes = ARRAY_LEN(torch_dtypes),
    .times = "caller thread: the enqueue of the work, not its execution",
};
