// SPDX-License-Identifier: MIT
/*
 * The catalog's argument decoders and byte rules, per function, on the values
 * the BPF side would read: the argument positions are checked against each
 * library's published prototype (counted here by hand, independently of the
 * tables), the bytes against the rules in README.md.
 */
#include "harness.h"
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "catalog/catalog.h"

static const struct ct_func *find(const struct ct_libdesc *d, const char *name)
{
	for (size_t i = 0; i < d->n_funcs; i++)
		if (strcmp(d->funcs[i].name, name) == 0)
			return &d->funcs[i];
	return NULL;
}

/* Where a slot reads from: the argument index of a plain or dereferenced read. */
static int arg_of(const struct ct_func *f, int slot)
{
	return f->val[slot].op == CT_LOC_NONE ? 0 : f->val[slot].arg;
}

TEST(catalog_ids_roundtrip)
{
	const struct ct_libdesc *d;

	for (uint32_t id = 0; id < ct_catalog_size(); id++) {
		const struct ct_func *f = ct_catalog_func(id, &d);

		if (!ASSERT_NOT_NULL(f, "function") ||
		    !ASSERT_EQ(ct_catalog_base(d) + (f - d->funcs), id, "base + index"))
			return;
	}
	ASSERT_TRUE(ct_catalog_func(ct_catalog_size(), NULL) == NULL, "past the end");
	ASSERT_TRUE(ct_catalog_match_file("/usr/lib/x86_64-linux-gnu/libmpi.so.40.30.4") ==
			&ct_lib_mpi,
		    "libmpi");
	ASSERT_TRUE(ct_catalog_match_file("/opt/x/libnccl.so.2") == &ct_lib_nccl, "libnccl");
	ASSERT_TRUE(ct_catalog_match_file("/lib/libgloo.so.0") == &ct_lib_gloo, "libgloo");
	ASSERT_TRUE(ct_catalog_match_file("libtorch_cuda.so") == &ct_lib_c10d2, "libtorch_cuda");
	ASSERT_TRUE(ct_catalog_match_file("/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13") ==
			&ct_lib_c10d,
		    "Debian's torch 1.13");
	ASSERT_TRUE(ct_catalog_match_file("/usr/lib/libmpich.so") == NULL ||
			ct_catalog_match_file("/usr/lib/libmpich.so") == &ct_lib_mpi,
		    "prefix rule");
	ASSERT_TRUE(ct_catalog_match_file("/usr/lib/libfoo.so") == NULL, "unknown");
}

TEST(catalog_every_slot_sane)
{
	for (size_t l = 0; l < ct_n_libs; l++) {
		const struct ct_libdesc *d = ct_libs[l];

		for (size_t i = 0; i < d->n_funcs; i++) {
			const struct ct_func *f = &d->funcs[i];

			for (int s = 0; s < CT_NVAL; s++) {
				const struct ct_loc *v = &f->val[s];

				if (v->op == CT_LOC_NONE || v->op == CT_LOC_CONST ||
				    v->op == CT_LOC_COMMINFO)
					continue;
				if (!ASSERT_TRUE(v->arg >= 1 && v->arg <= 16, f->name) ||
				    !ASSERT_TRUE(v->size == 1 || v->size == 2 || v->size == 4 ||
						     v->size == 8,
						 f->name))
					return;
				if ((v->op == CT_LOC_SUM || v->op == CT_LOC_INDEX) &&
				    !ASSERT_TRUE(v->aux < CT_NVAL, f->name))
					return;
			}
			/* A byte rule must name slots the function fills. */
			if (f->sent.on &&
			    !ASSERT_TRUE(f->val[f->sent.count].op != CT_LOC_NONE, f->name))
				return;
			if (f->recv.on &&
			    !ASSERT_TRUE(f->val[f->recv.count].op != CT_LOC_NONE, f->name))
				return;
		}
	}
}

TEST(catalog_mpi_positions)
{
	/* From mpi.h: (sendbuf, recvbuf, count, datatype, op, comm) etc. */
	static const struct {
		const char *fn;
		int count, dtype, comm, peer;
	} want[] = {
	    {"MPI_Allreduce", 3, 4, 6, 0}, {"MPI_Reduce", 3, 4, 7, 6},
	    {"MPI_Bcast", 2, 3, 5, 4},	   {"MPI_Allgather", 2, 3, 7, 0},
	    {"MPI_Gather", 2, 3, 8, 7},	   {"MPI_Scatter", 2, 3, 8, 7},
	    {"MPI_Alltoall", 2, 3, 7, 0},  {"MPI_Send", 2, 3, 6, 4},
	    {"MPI_Recv", 2, 3, 6, 4},	   {"MPI_Iallreduce", 3, 4, 6, 0},
	    {"MPI_Sendrecv", 2, 3, 11, 4}, {"MPI_Reduce_scatter_block", 3, 4, 6, 0},
	};

	for (size_t i = 0; i < ARRAY_LEN(want); i++) {
		const struct ct_func *f = find(&ct_lib_mpi, want[i].fn);

		ct_subtest(want[i].fn);
		if (!ASSERT_NOT_NULL(f, want[i].fn))
			return;
		ASSERT_EQ(arg_of(f, CT_V_COUNT), want[i].count, "count");
		ASSERT_EQ(arg_of(f, CT_V_DTSIZE), want[i].dtype, "datatype");
		ASSERT_EQ(arg_of(f, CT_V_COMM), want[i].comm, "comm");
		ASSERT_EQ(arg_of(f, CT_V_PEER), want[i].peer, "root/peer");
		/* ints: the upper half of the register is garbage */
		ASSERT_EQ(f->val[CT_V_COUNT].size, 4, "count is an int");
	}
}

static uint64_t sent(const struct ct_libdesc *d, const char *fn, const __u64 *v)
{
	return ct_bytes(d, &find(d, fn)->sent, v);
}

static uint64_t recv(const struct ct_libdesc *d, const char *fn, const __u64 *v)
{
	return ct_bytes(d, &find(d, fn)->recv, v);
}

TEST(catalog_mpi_bytes)
{
	__u64 v[CT_NVAL] = {0};

	v[CT_V_COUNT] = 10, v[CT_V_DTSIZE] = 8, v[CT_V_RCOUNT] = 10, v[CT_V_RDTSIZE] = 8;
	v[CT_V_COMM_SIZE] = 4, v[CT_V_COMM_RANK] = 1, v[CT_V_PEER] = 0;
	ASSERT_EQ(sent(&ct_lib_mpi, "MPI_Allreduce", v), 80, "allreduce sent");
	ASSERT_EQ(recv(&ct_lib_mpi, "MPI_Allreduce", v), 80, "allreduce recv");
	ASSERT_EQ(recv(&ct_lib_mpi, "MPI_Reduce", v), 0, "reduce recv off the root");
	ASSERT_EQ(recv(&ct_lib_mpi, "MPI_Allgather", v), 320, "allgather recv x size");
	ASSERT_EQ(recv(&ct_lib_mpi, "MPI_Gather", v), 0, "gather recv off the root");
	ASSERT_EQ(sent(&ct_lib_mpi, "MPI_Scatter", v), 0, "scatter sent off the root");
	ASSERT_EQ(sent(&ct_lib_mpi, "MPI_Alltoall", v), 320, "alltoall sent x size");
	ASSERT_EQ(sent(&ct_lib_mpi, "MPI_Reduce_scatter_block", v), 320, "rsb sent x size");
	ASSERT_EQ(recv(&ct_lib_mpi, "MPI_Reduce_scatter_block", v), 80, "rsb recv");
	ASSERT_EQ(sent(&ct_lib_mpi, "MPI_Barrier", v), 0, "barrier");
	v[CT_V_PEER] = 1; /* now this rank is the root */
	ASSERT_EQ(recv(&ct_lib_mpi, "MPI_Reduce", v), 80, "reduce recv at the root");
	ASSERT_EQ(recv(&ct_lib_mpi, "MPI_Gather", v), 320, "gather recv at the root");
	ASSERT_EQ(sent(&ct_lib_mpi, "MPI_Scatter", v), 320, "scatter sent at the root");
	ASSERT_EQ(sent(&ct_lib_mpi, "MPI_Send", v), 80, "send");
	ASSERT_EQ(recv(&ct_lib_mpi, "MPI_Send", v), 0, "send receives nothing");
	ASSERT_EQ(recv(&ct_lib_mpi, "MPI_Recv", v), 80, "recv (the recv slot is the count)");
}

TEST(catalog_enum_dtypes)
{
	__u64 v[CT_NVAL] = {0};

	v[CT_V_COUNT] = 5, v[CT_V_DTYPE] = 9 /* ncclBfloat16 */, v[CT_V_COMM_SIZE] = 8;
	ASSERT_EQ(sent(&ct_lib_nccl, "ncclAllReduce", v), 10, "bf16 is 2 bytes");
	ASSERT_EQ(recv(&ct_lib_nccl, "ncclAllGather", v), 80, "allgather x nranks");
	ASSERT_EQ(sent(&ct_lib_nccl, "ncclReduceScatter", v), 80, "reducescatter sent x nranks");
	v[CT_V_DTYPE] = 42; /* unknown: no size, no invented bytes */
	ASSERT_EQ(sent(&ct_lib_nccl, "ncclAllReduce", v), 0, "unknown dtype");
	v[CT_V_DTYPE] = 10 /* HCCL FP64 */, v[CT_V_RCOUNT] = 3, v[CT_V_RDTYPE] = 3 /* FP16 */;
	ASSERT_EQ(sent(&ct_lib_hccl, "HcclAlltoAll", v), 5 * 8 * 8, "hccl alltoall sent");
	ASSERT_EQ(recv(&ct_lib_hccl, "HcclAlltoAll", v), 3 * 2 * 8, "hccl alltoall recv");
	ASSERT_STREQ(ct_named_find(ct_lib_hccl.dtypes, ct_lib_hccl.n_dtypes, 4)->name,
		     "HCCL_DATA_TYPE_FP32", "hccl enum");
	ASSERT_STREQ(ct_named_find(ct_lib_c10d.dtypes, ct_lib_c10d.n_dtypes, 6)->name,
		     "torch.float32", "ScalarType");
	/* the NCCL rank sits in the 3rd register: ncclUniqueId goes on the stack */
	ASSERT_EQ(arg_of(find(&ct_lib_nccl, "ncclCommInitRank"), CT_V_COMM_RANK), 3, "rank");
	ASSERT_EQ(find(&ct_lib_nccl, "ncclCommInitRank")->flags, CT_PF_OUT_PTR | CT_PF_COMM_INIT,
		  "remembers the comm");
}

TEST(catalog_torch_major)
{
	char dir[] = "/tmp/ct-torch-XXXXXX", path[256];
	FILE *f;

	ASSERT_EQ(ct_torch_major("/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13"), 1,
		  "versioned name");
	ASSERT_EQ(ct_torch_major("libtorch_cpu.so"), 0, "unknown");
	ASSERT_TRUE(mkdtemp(dir) != NULL, "mkdtemp");
	snprintf(path, sizeof(path), "%s/version.py", dir);
	f = fopen(path, "w");
	ASSERT_TRUE(f != NULL, "version.py");
	fputs("from typing import Optional\n__version__ = '2.11.0+cu130'\n", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/lib", dir);
	ASSERT_EQ(mkdir(path, 0700), 0, "mkdir");
	snprintf(path, sizeof(path), "%s/lib/libtorch_cuda.so", dir);
	ASSERT_EQ(ct_torch_major(path), 2, "version.py");
	ASSERT_TRUE(ct_catalog_match_file(path) == &ct_lib_c10d2, "pip torch 2.x");
	snprintf(path, sizeof(path), "%s/version.py", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/lib", dir);
	rmdir(path);
	rmdir(dir);
}
