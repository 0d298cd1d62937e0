// SPDX-License-Identifier: MIT
/*
 * PyTorch c10d ProcessGroup methods: the caller-thread side of a collective
 * (Gloo in libtorch_cpu, NCCL in libtorch_cuda). Each library instance has only
 * some of them, hence all optional. They return a Work handle as soon as the
 * work is enqueued: the duration is the enqueue, not the collective.
 */
#include "catalog/catalog.h"

#define PG(cls, m, k) {"ProcessGroup" cls "::" m, "c10d::ProcessGroup" cls "::" m, .cxx = true, \
			.optional = true, .kind = (k)}
#define PG_ALL(cls)                                                                                \
	PG(cls, "allreduce", CT_K_ALLREDUCE), PG(cls, "allreduce_coalesced", CT_K_ALLREDUCE),      \
	PG(cls, "broadcast", CT_K_BROADCAST), PG(cls, "reduce", CT_K_REDUCE),                      \
	PG(cls, "allgather", CT_K_ALLGATHER), PG(cls, "_allgather_base", CT_K_ALLGATHER),          \
	PG(cls, "allgather_coalesced", CT_K_ALLGATHER), PG(cls, "gather", CT_K_GATHER),            \
	PG(cls, "scatter", CT_K_SCATTER), PG(cls, "reduce_scatter", CT_K_REDUCE_SCATTER),          \
	PG(cls, "_reduce_scatter_base", CT_K_REDUCE_SCATTER),                                      \
	PG(cls, "alltoall_base", CT_K_ALLTOALL), PG(cls, "alltoall", CT_K_ALLTOALL),               \
	PG(cls, "barrier", CT_K_BARRIER), PG(cls, "send", CT_K_SEND), PG(cls, "recv", CT_K_RECV)

static const struct ct_func c10d_funcs[] = {
	PG_ALL("Gloo"),
	PG_ALL("NCCL"),
};

static const char *const c10d_files[] = {"libtorch_cpu.so", "libtorch_cuda.so", NULL};

const struct ct_libdesc ct_lib_c10d = {
	.lib = CT_LIB_C10D,
	.name = "c10d",
	.files = c10d_files,
	.funcs = c10d_funcs,
	.n_funcs = ARRAY_LEN(c10d_funcs),
	.times = "caller thread: the enqueue of the work, not its execution",
};
