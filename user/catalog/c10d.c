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
 * offsets measured on the live objects (an at::Tensor is one TensorImpl pointer;
 * Tensor._cdata is that pointer), x86-64:
 * - PyTorch 1.13: TensorImpl.numel_ 168, data_type_ (TypeMeta index = ScalarType) 176,
 *   ProcessGroup.rank_ 24, size_ 28 (after the intrusive_ptr_target header). Re-measured
 *   for --sharding (user/python/params.c, which also reads the dim count at 72 and the
 *   sizes at 80: inline up to 5 dims, else a heap pointer there).
 * - PyTorch 2.11 (scripts/torch-layout.py on the GPU machine): numel_ 160, data_type_ 168.
 *   `this` is now a c10d::Backend (ProcessGroupGloo/NCCL derive from it, not from
 *   ProcessGroup): rank_ 16, size_ 20 (ProcessGroup's own stay at 24/28).
 * The same file names carry both layouts: ct_torch_major() picks the table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "catalog/catalog.h"

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
	    PG(cls, "allgather_coalesced", CT_K_ALLGATHER, .val = {GROUP, VEC(4)}, .sent = S,      \
	       .recv = SX),                                                                        \
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

/* PyTorch 1.x */
#define TI_NUMEL 168
#define TI_DTYPE 176
#define PG_RANK	 24
#define PG_SIZE	 28
static const struct ct_func c10d1_funcs[] = {
    PG_ALL("Gloo"),
    PG_ALL("NCCL"),
};
#undef TI_NUMEL
#undef TI_DTYPE
#undef PG_RANK
#undef PG_SIZE

/* PyTorch 2.x */
#define TI_NUMEL 160
#define TI_DTYPE 168
#define PG_RANK	 16
#define PG_SIZE	 20
static const struct ct_func c10d2_funcs[] = {
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

/*
 * PyTorch's major version for a libtorch file: from a versioned name (Debian's
 * libtorch_cpu.so.1.13), else from torch/version.py beside torch/lib/ (pip wheels),
 * else 0 (unknown: the newest layout is assumed).
 */
static char last_vpath[4096];
static int last_major;

int ct_torch_major(const char *path)
{
	const char *base = strrchr(path, '/'), *so;
	char vpath[4096], line[256];
	FILE *f;
	int major = 0;

	base = base ? base + 1 : path;
	so = strstr(base, ".so.");
	if (so)
		return atoi(so + 4);
	if (base == path || (size_t)(base - path) + sizeof("../version.py") > sizeof(vpath))
		return 0;
	snprintf(vpath, sizeof(vpath), "%.*s../version.py", (int)(base - path), path);
	/* Both c10d descriptions ask, for every mapping of the file, at every rescan: the
	 * last answer is kept. */
	if (!strcmp(vpath, last_vpath))
		return last_major;
	f = fopen(vpath, "re");
	if (f) {
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "__version__ = '%d.", &major) == 1)
				break;
		fclose(f);
	}
	snprintf(last_vpath, sizeof(last_vpath), "%s", vpath);
	last_major = major;
	return major;
}

static bool is_torch1(const char *path)
{
	return ct_torch_major(path) == 1;
}

static bool is_not_torch1(const char *path)
{
	return !is_torch1(path);
}

#define C10D_DESC(funcs_, accept_)                                                                 \
	{                                                                                          \
		.lib = CT_LIB_C10D, .name = "c10d", .files = c10d_files, .accept = (accept_),      \
		.funcs = (funcs_), .n_funcs = ARRAY_LEN(funcs_), .dtypes = torch_dtypes,           \
		.n_dtypes = ARRAY_LEN(torch_dtypes),                                               \
		.times = "caller thread: the enqueue of the work, not its execution",              \
	}

const struct ct_libdesc ct_lib_c10d = C10D_DESC(c10d1_funcs, is_torch1);
const struct ct_libdesc ct_lib_c10d2 = C10D_DESC(c10d2_funcs, is_not_torch1);
