// SPDX-License-Identifier: MIT
/*
 * The catalog's argument decoders and byte rules, per function, on the values
 * the BPF side would read: the argument positions are checked against each
 * library's published prototype (counted here by hand, independently of the
 * tables), the bytes against the rules in README.md.
 */
#include "events.h"
#include "harness.h"
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cJSON.h>
#include "bandwidth.h"
#include "catalog/catalog.h"
#include "export/export.h"
#include "session.h"
#include "targets.h"

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

/* Each slot's argument, from the published prototypes (nccl.h, hccl.h), counted by hand. */
struct pos {
	const char *fn;
	int count, dtype, op, peer, comm;
};

static void check_positions(const struct ct_libdesc *d, const struct pos *want, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct ct_func *f = find(d, want[i].fn);

		ct_subtest(want[i].fn);
		if (!ASSERT_NOT_NULL(f, want[i].fn))
			return;
		ASSERT_EQ(arg_of(f, CT_V_COUNT), want[i].count, "count");
		ASSERT_EQ(arg_of(f, CT_V_DTYPE), want[i].dtype, "datatype");
		ASSERT_EQ(arg_of(f, CT_V_OP), want[i].op, "reduce op");
		ASSERT_EQ(arg_of(f, CT_V_PEER), want[i].peer, "root/peer");
		ASSERT_EQ(arg_of(f, CT_V_COMM), want[i].comm, "comm");
		/* enums and ranks are C ints: the upper half of the register is garbage */
		if (want[i].dtype)
			ASSERT_EQ(f->val[CT_V_DTYPE].size, 4, "datatype is an enum");
		if (want[i].op)
			ASSERT_EQ(f->val[CT_V_OP].size, 4, "op is an enum");
		if (want[i].peer)
			ASSERT_EQ(f->val[CT_V_PEER].size, 4, "root/peer is an int");
	}
}

TEST(catalog_nccl_positions)
{
	static const struct pos want[] = {
	    /* (sendbuff, recvbuff, count, datatype, op, comm, stream) */
	    {"ncclAllReduce", 3, 4, 5, 0, 6},
	    /* (sendbuff, recvbuff, count, datatype, root, comm, stream) */
	    {"ncclBroadcast", 3, 4, 0, 5, 6},
	    /* (sendbuff, recvbuff, count, datatype, op, root, comm, stream) */
	    {"ncclReduce", 3, 4, 5, 6, 7},
	    /* (sendbuff, recvbuff, sendcount, datatype, comm, stream) */
	    {"ncclAllGather", 3, 4, 0, 0, 5},
	    /* (sendbuff, recvbuff, recvcount, datatype, op, comm, stream) */
	    {"ncclReduceScatter", 3, 4, 5, 0, 6},
	    /* (sendbuff, recvbuff, count, datatype, comm, stream) */
	    {"ncclAlltoAll", 3, 4, 0, 0, 5},
	    /* (sendbuff, recvbuff, count, datatype, root, comm, stream) */
	    {"ncclGather", 3, 4, 0, 5, 6},
	    {"ncclScatter", 3, 4, 0, 5, 6},
	    /* (sendbuff, count, datatype, peer, comm, stream) */
	    {"ncclSend", 2, 3, 0, 4, 5},
	    /* (recvbuff, count, datatype, peer, comm, stream) */
	    {"ncclRecv", 2, 3, 0, 4, 5},
	    {"ncclCommDestroy", 0, 0, 0, 0, 1},
	    {"ncclCommAbort", 0, 0, 0, 0, 1},
	};

	check_positions(&ct_lib_nccl, want, ARRAY_LEN(want));
}

TEST(catalog_hccl_positions)
{
	static const struct pos want[] = {
	    /* (sendBuf, recvBuf, count, dataType, op, comm, stream) */
	    {"HcclAllReduce", 3, 4, 5, 0, 6},
	    /* (buf, count, dataType, root, comm, stream) */
	    {"HcclBroadcast", 2, 3, 0, 4, 5},
	    /* (sendBuf, recvBuf, sendCount, dataType, comm, stream) */
	    {"HcclAllGather", 3, 4, 0, 0, 5},
	    /* (sendBuf, recvBuf, recvCount, dataType, op, comm, stream) */
	    {"HcclReduceScatter", 3, 4, 5, 0, 6},
	    /* (sendBuf, recvBuf, count, dataType, op, root, comm, stream) */
	    {"HcclReduce", 3, 4, 5, 6, 7},
	    /* (sendBuf, sendCount, sendType, recvBuf, recvCount, recvType, comm, stream) */
	    {"HcclAlltoAll", 2, 3, 0, 0, 7},
	    /* (sendBuf, sendCounts, sdispls, sendType, recvBuf, recvCounts, rdispls, recvType,
	     *  comm, stream) */
	    {"HcclAlltoAllV", 2, 4, 0, 0, 9},
	    /* (sendBuf, count, dataType, destRank, comm, stream) */
	    {"HcclSend", 2, 3, 0, 4, 5},
	    /* (recvBuf, count, dataType, srcRank, comm, stream) */
	    {"HcclRecv", 2, 3, 0, 4, 5},
	    /* (comm, stream) */
	    {"HcclBarrier", 0, 0, 0, 0, 1},
	};
	const struct ct_func *f;

	check_positions(&ct_lib_hccl, want, ARRAY_LEN(want));
	ct_subtest("receive side");
	f = find(&ct_lib_hccl, "HcclAlltoAll");
	ASSERT_EQ(arg_of(f, CT_V_RCOUNT), 5, "recvCount");
	ASSERT_EQ(arg_of(f, CT_V_RDTYPE), 6, "recvType");
	f = find(&ct_lib_hccl, "HcclAlltoAllV");
	ASSERT_EQ(f->val[CT_V_COUNT].op, CT_LOC_SUM, "sendCounts summed");
	ASSERT_EQ(f->val[CT_V_COUNT].size, 8, "uint64_t counts");
	ASSERT_EQ(arg_of(f, CT_V_RCOUNT), 6, "recvCounts");
	ASSERT_EQ(arg_of(f, CT_V_RDTYPE), 8, "recvType");
	ct_subtest("communicator creation");
	/* (nRanks, rootInfo, rank, comm *) */
	f = find(&ct_lib_hccl, "HcclCommInitRootInfo");
	ASSERT_EQ(arg_of(f, CT_V_COMM_SIZE), 1, "nRanks");
	ASSERT_EQ(arg_of(f, CT_V_COMM_RANK), 3, "rank");
	ASSERT_EQ(arg_of(f, CT_V_OUT), 4, "comm out");
	ASSERT_EQ(f->flags, CT_PF_OUT_PTR | CT_PF_COMM_INIT, "remembers the comm");
}

TEST(catalog_vector_forms)
{
	const struct ct_func *f;

	/* MPI's v-forms: int counts summed over the communicator, or indexed by the rank. */
	f = find(&ct_lib_mpi, "MPI_Allgatherv");
	ASSERT_EQ(f->val[CT_V_RCOUNT].op, CT_LOC_SUM, "Allgatherv recvcounts");
	ASSERT_EQ(f->val[CT_V_RCOUNT].arg, 5, "recvcounts");
	ASSERT_EQ(f->val[CT_V_RCOUNT].aux, CT_V_COMM_SIZE, "length: the comm size");
	ASSERT_EQ(arg_of(f, CT_V_RDTSIZE), 7, "recvtype");
	ASSERT_EQ(arg_of(f, CT_V_COMM), 8, "comm");
	f = find(&ct_lib_mpi, "MPI_Alltoallv");
	ASSERT_EQ(f->val[CT_V_COUNT].op, CT_LOC_SUM, "Alltoallv sendcounts");
	ASSERT_EQ(f->val[CT_V_COUNT].arg, 2, "sendcounts");
	ASSERT_EQ(f->val[CT_V_RCOUNT].arg, 6, "recvcounts");
	ASSERT_EQ(arg_of(f, CT_V_DTSIZE), 4, "sendtype");
	ASSERT_EQ(arg_of(f, CT_V_RDTSIZE), 8, "recvtype");
	ASSERT_EQ(arg_of(f, CT_V_COMM), 9, "comm");
	f = find(&ct_lib_mpi, "MPI_Reduce_scatter");
	ASSERT_EQ(f->val[CT_V_COUNT].op, CT_LOC_SUM, "sent: every block");
	ASSERT_EQ(f->val[CT_V_RCOUNT].op, CT_LOC_INDEX, "received: this rank's block");
	ASSERT_EQ(f->val[CT_V_RCOUNT].aux, CT_V_COMM_RANK, "indexed by the rank");
	ASSERT_EQ(f->val[CT_V_COUNT].size, 4, "int counts");
	ASSERT_EQ(arg_of(f, CT_V_OP), 5, "op");
	f = find(&ct_lib_mpi, "MPI_Gatherv");
	ASSERT_EQ(f->val[CT_V_RCOUNT].op, CT_LOC_SUM, "Gatherv recvcounts");
	ASSERT_EQ(f->recv.when, CT_W_ROOT, "received at the root only");
	f = find(&ct_lib_mpi, "MPI_Scatterv");
	ASSERT_EQ(f->val[CT_V_COUNT].op, CT_LOC_SUM, "Scatterv sendcounts");
	ASSERT_EQ(f->sent.when, CT_W_ROOT, "sent at the root only");
	/* Every SUM or INDEX is evaluated after what gives its length (ct_catalog_spec). */
	for (uint32_t id = 0; id < ct_catalog_size(); id++) {
		struct ct_probe_spec spec;
		int seen[CT_NVAL] = {0};

		ct_catalog_spec(id, &spec);
		for (int k = 0; k < spec.n_order; k++) {
			const struct ct_loc *l = &spec.val[spec.order[k]];

			if ((l->op == CT_LOC_SUM || l->op == CT_LOC_INDEX) &&
			    spec.val[l->aux].op != CT_LOC_NONE &&
			    !ASSERT_TRUE(seen[l->aux], "length read first"))
				return;
			if (l->op == CT_LOC_COMMINFO &&
			    !ASSERT_TRUE(seen[CT_V_COMM], "communicator read first"))
				return;
			seen[spec.order[k]] = 1;
		}
	}
}

TEST(catalog_peer_role)
{
	ASSERT_STREQ(ct_peer_role(find(&ct_lib_mpi, "MPI_Bcast")), "root", "Bcast");
	ASSERT_STREQ(ct_peer_role(find(&ct_lib_mpi, "MPI_Reduce")), "root", "Reduce");
	ASSERT_STREQ(ct_peer_role(find(&ct_lib_mpi, "MPI_Gatherv")), "root", "Gatherv");
	ASSERT_STREQ(ct_peer_role(find(&ct_lib_mpi, "MPI_Scatter")), "root", "Scatter");
	ASSERT_STREQ(ct_peer_role(find(&ct_lib_mpi, "MPI_Irecv")), "peer", "Irecv");
	ASSERT_STREQ(ct_peer_role(find(&ct_lib_mpi, "MPI_Sendrecv")), "peer", "Sendrecv");
	ASSERT_STREQ(ct_peer_role(find(&ct_lib_nccl, "ncclSend")), "peer", "ncclSend");
	ASSERT_STREQ(ct_peer_role(find(&ct_lib_gloo, "gloo::broadcast")), "root", "gloo");
	ASSERT_TRUE(ct_peer_role(find(&ct_lib_mpi, "MPI_Allreduce")) == NULL, "no root");
	/* c10d's broadcast root is in its options, not read: no root is claimed */
	ASSERT_TRUE(ct_peer_role(find(&ct_lib_c10d2, "ProcessGroupGloo::broadcast")) == NULL,
		    "c10d broadcast");
	ASSERT_TRUE(ct_func_reads(find(&ct_lib_nccl, "ncclReduce"), CT_V_OP), "reads op");
	ASSERT_FALSE(ct_func_reads(find(&ct_lib_nccl, "ncclBroadcast"), CT_V_OP), "no op");
}

/* A process that maps Open MPI at fake addresses (the layout of targets.c's attach_lib). */
struct fake_mpi_proc {
	struct ct_proc *p;
	struct ct_file file;
};

static size_t named_index(const struct ct_named_object *t, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(t[i].name, name))
			return i;
	return n;
}

static bool fake_mpi(struct fake_mpi_proc *f)
{
	const struct ct_libdesc *d = &ct_lib_mpi;
	size_t nd = d->n_dtype_objects, no = d->n_op_objects;
	struct ct_libinst *li;

	memset(f, 0, sizeof(*f));
	f->p = calloc(1, sizeof(*f->p));
	if (!ASSERT_NOT_NULL(f->p, "calloc"))
		return false;
	f->file.desc = d;
	li = &f->p->libs[0];
	li->file = &f->file;
	if (!ASSERT_EQ(ct_handles_alloc(&li->handles, d), 0, "ct_handles_alloc"))
		return false;
	li->handles.dtypes[named_index(d->dtype_objects, nd, "MPI_DOUBLE")] = 0x7f0000001000;
	li->handles.ops[named_index(d->op_objects, no, "sum")] = 0x7f0000002000;
	/* copies in a non-PIC executable (copy relocations) */
	li->handles.exe_dtypes[named_index(d->dtype_objects, nd, "MPI_INT")] = 0x601000;
	li->handles.exe_ops[named_index(d->op_objects, no, "max")] = 0x602000;
	f->p->n_libs = 1;
	return true;
}

static void fake_mpi_free(struct fake_mpi_proc *f)
{
	if (f->p)
		ct_handles_free(&f->p->libs[0].handles);
	free(f->p);
}

TEST(catalog_op_and_dtype_names)
{
	struct fake_mpi_proc f;
	static struct ct_proc no_libs; /* a process that maps none of them */
	struct ct_proc *none = &no_libs;

	ct_subtest("enums");
	ASSERT_STREQ(ct_op_name(none, &ct_lib_nccl, 0), "sum", "ncclSum");
	ASSERT_STREQ(ct_op_name(none, &ct_lib_nccl, 1), "prod", "ncclProd");
	ASSERT_STREQ(ct_op_name(none, &ct_lib_nccl, 2), "max", "ncclMax");
	ASSERT_STREQ(ct_op_name(none, &ct_lib_nccl, 3), "min", "ncclMin");
	ASSERT_STREQ(ct_op_name(none, &ct_lib_nccl, 4), "avg", "ncclAvg");
	ASSERT_TRUE(ct_op_name(none, &ct_lib_nccl, 5) == NULL, "ncclRedOpCreatePreMulSum op");
	ASSERT_STREQ(ct_op_name(none, &ct_lib_hccl, 0), "sum", "HCCL_REDUCE_SUM");
	ASSERT_STREQ(ct_op_name(none, &ct_lib_hccl, 3), "min", "HCCL_REDUCE_MIN");
	ASSERT_TRUE(ct_op_name(none, &ct_lib_hccl, 4) == NULL, "past HCCL_REDUCE_MIN");
	ASSERT_STREQ(ct_dtype_name(none, &ct_lib_nccl, 7), "ncclFloat32", "nccl dtype");
	ASSERT_STREQ(ct_dtype_name(none, &ct_lib_hccl, 11), "HCCL_DATA_TYPE_BFP16", "hccl dtype");
	ASSERT_TRUE(ct_dtype_name(none, &ct_lib_hccl, 12) == NULL, "unknown hccl dtype");
	ASSERT_TRUE(ct_op_name(none, &ct_lib_gloo, 0) == NULL, "gloo names no op");

	ct_subtest("mpi handles");
	if (!fake_mpi(&f)) {
		fake_mpi_free(&f);
		return;
	}
	ASSERT_STREQ(ct_op_name(f.p, &ct_lib_mpi, 0x7f0000002000), "sum", "MPI_SUM");
	ASSERT_STREQ(ct_op_name(f.p, &ct_lib_mpi, 0x602000), "max", "executable's MPI_MAX");
	ASSERT_STREQ(ct_op_name(f.p, &ct_lib_mpi, 0x7f0000009000), "user", "MPI_Op_create op");
	ASSERT_TRUE(ct_op_name(f.p, &ct_lib_mpi, 0) == NULL, "no handle");
	ASSERT_TRUE(ct_op_name(none, &ct_lib_mpi, 0x7f0000002000) == NULL, "library not mapped");
	ASSERT_STREQ(ct_dtype_name(f.p, &ct_lib_mpi, 0x7f0000001000), "MPI_DOUBLE", "MPI_DOUBLE");
	ASSERT_STREQ(ct_dtype_name(f.p, &ct_lib_mpi, 0x601000), "MPI_INT", "executable's MPI_INT");
	ASSERT_STREQ(ct_dtype_name(f.p, &ct_lib_mpi, 0x7f0000002000), "derived",
		     "an op is no predefined datatype");
	ASSERT_TRUE(ct_dtype_name(f.p, &ct_lib_mpi, 0) == NULL, "no handle");
	ASSERT_TRUE(ct_dtype_name(none, &ct_lib_mpi, 0x7f0000001000) == NULL, "not mapped");
	fake_mpi_free(&f);
}

/* The records path: one call record through ct_events_handle. */
static void feed_call(struct ct_session *s, pid_t pid, const struct ct_libdesc *d, const char *name,
		      const __u64 *val)
{
	struct ct_call_event *ev = calloc(1, sizeof(*ev));
	const struct ct_func *f = find(d, name);

	if (!ASSERT_NOT_NULL(ev, "calloc") || !ASSERT_NOT_NULL(f, name)) {
		free(ev);
		return;
	}
	ev->hdr.type = CT_EV_CALL;
	ev->hdr.probe_id = (__u16)(ct_catalog_base(d) + (f - d->funcs));
	ev->hdr.pid = (__u32)pid;
	ev->hdr.tid = (__u32)pid;
	ev->hdr.ts = 1000;
	memcpy(ev->comm, "rank", 5);
	memcpy(ev->val, val, sizeof(ev->val));
	ct_events_handle(s, ev, CT_CALL_EVENT_SIZE(0));
	free(ev);
}

static struct ct_proc *fake_proc(struct ct_session *s, pid_t pid, int rank, const char *var)
{
	struct ct_proc *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->stats = calloc(ct_catalog_size(), sizeof(*p->stats));
	if (!p->stats) {
		free(p);
		return NULL;
	}
	p->pid = pid;
	p->rank = rank;
	p->world = rank >= 0 ? 2 : -1;
	p->rank_var = var;
	s->procs[s->n_procs++] = p;
	return p;
}

static const struct ct_fstats *stats_of(const struct ct_proc *p, const struct ct_libdesc *d,
					const char *name)
{
	return p->stats[ct_catalog_base(d) + (find(d, name) - d->funcs)];
}

static cJSON *json_proc(cJSON *js, pid_t pid)
{
	cJSON *p;

	cJSON_ArrayForEach(
	    p,
	    cJSON_GetObjectItem(js, "processes")) if (cJSON_GetObjectItem(p, "pid")->valuedouble ==
						      pid) return p;
	return NULL;
}

static cJSON *json_coll(cJSON *proc, const char *fn)
{
	cJSON *c;

	cJSON_ArrayForEach(
	    c,
	    cJSON_GetObjectItem(
		proc, "collectives")) if (!strcmp(cJSON_GetObjectItem(c, "function")->valuestring,
						  fn)) return c;
	return NULL;
}

TEST(catalog_events_op_and_comm_rank)
{
	struct ct_opts o = {0};
	struct ct_session s = {.opts = &o};
	struct ct_proc *p, *q;
	__u64 v[CT_NVAL] = {0};
	char path[512], *text = NULL;
	cJSON *js = NULL, *jp, *jc;
	FILE *f;
	long n;

	p = fake_proc(&s, 1001, -1, NULL);
	q = fake_proc(&s, 1002, 0, "RANK");
	if (!ASSERT_NOT_NULL(p, "proc") || !ASSERT_NOT_NULL(q, "proc"))
		goto out;

	ct_subtest("rank from the communicator");
	v[CT_V_COUNT] = 8, v[CT_V_DTYPE] = 4, v[CT_V_OP] = 0, v[CT_V_COMM] = 0xc1;
	v[CT_V_COMM_SIZE] = 4, v[CT_V_COMM_RANK] = 1;
	feed_call(&s, 1001, &ct_lib_hccl, "HcclAllReduce", v);
	ASSERT_EQ(p->rank, 1, "rank in the 4-rank communicator");
	ASSERT_EQ(p->world, 4, "world size");
	ASSERT_EQ(p->comm_world, 4, "from a communicator");
	v[CT_V_OP] = 2, v[CT_V_COMM] = 0xc2, v[CT_V_COMM_SIZE] = 2, v[CT_V_COMM_RANK] = 0;
	feed_call(&s, 1001, &ct_lib_hccl, "HcclAllReduce", v);
	ASSERT_EQ(p->rank, 1, "a smaller communicator does not change it");
	v[CT_V_COMM_SIZE] = 16, v[CT_V_COMM_RANK] = 16;
	feed_call(&s, 1001, &ct_lib_hccl, "HcclBarrier", v);
	ASSERT_EQ(p->rank, 1, "rank >= size: garbage, ignored");
	v[CT_V_COMM_SIZE] = 16, v[CT_V_COMM_RANK] = 0;
	feed_call(&s, 1001, &ct_lib_nccl, "ncclCommInitAll", v);
	ASSERT_EQ(p->rank, 1, "a function that reads no rank");
	v[CT_V_COMM_SIZE] = 8, v[CT_V_COMM_RANK] = 5;
	feed_call(&s, 1001, &ct_lib_hccl, "HcclBarrier", v);
	ASSERT_EQ(p->rank, 5, "a larger communicator: the world");
	ASSERT_EQ(p->world, 8, "its size");
	feed_call(&s, 1002, &ct_lib_hccl, "HcclBarrier", v);
	ASSERT_EQ(q->rank, 0, "the environment's rank stays");
	ASSERT_EQ(q->world, 2, "and its world size");
	ASSERT_EQ(q->comm_world, 0, "not from a communicator");

	ct_subtest("reduce op per function");
	ASSERT_TRUE(stats_of(p, &ct_lib_hccl, "HcclAllReduce")->op_mixed, "sum then max: mixed");
	v[CT_V_OP] = 3;
	feed_call(&s, 1002, &ct_lib_hccl, "HcclReduce", v);
	feed_call(&s, 1002, &ct_lib_hccl, "HcclReduce", v);
	ASSERT_STREQ(stats_of(q, &ct_lib_hccl, "HcclReduce")->op, "min", "min twice");
	ASSERT_FALSE(stats_of(q, &ct_lib_hccl, "HcclReduce")->op_mixed, "one op");
	v[CT_V_OP] = 0;
	feed_call(&s, 1002, &ct_lib_hccl, "HcclBroadcast", v);
	ASSERT_TRUE(stats_of(q, &ct_lib_hccl, "HcclBroadcast")->op == NULL, "no op read");

	ct_subtest("json");
	snprintf(path, sizeof(path), "%s/ops.json", ct_test_tmpdir());
	if (!ASSERT_OK(ct_export_json(&s, path), "ct_export_json"))
		goto out;
	f = fopen(path, "r");
	if (!ASSERT_NOT_NULL(f, path))
		goto out;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	text = calloc(1, n + 1);
	if (text && fread(text, 1, n, f) != (size_t)n)
		text[0] = 0;
	fclose(f);
	js = text ? cJSON_Parse(text) : NULL;
	if (!ASSERT_NOT_NULL(js, "valid JSON"))
		goto out;
	jp = json_proc(js, 1001);
	ASSERT_EQ(cJSON_GetObjectItem(jp, "rank")->valuedouble, 5, "rank");
	ASSERT_EQ(cJSON_GetObjectItem(jp, "world_size")->valuedouble, 8, "world_size");
	ASSERT_STREQ(cJSON_GetStringValue(cJSON_GetObjectItem(jp, "rank_source")), "communicator",
		     "rank_source");
	jc = json_coll(jp, "HcclAllReduce");
	ASSERT_STREQ(cJSON_GetStringValue(cJSON_GetObjectItem(jc, "op")), "mixed", "mixed op");
	jc = json_coll(jp, "HcclBarrier");
	ASSERT_TRUE(jc && !cJSON_GetObjectItem(jc, "op"), "no op field: takes no op");
	jp = json_proc(js, 1002);
	ASSERT_STREQ(cJSON_GetStringValue(cJSON_GetObjectItem(jp, "rank_source")), "env:RANK",
		     "env rank_source");
	jc = json_coll(jp, "HcclReduce");
	ASSERT_STREQ(cJSON_GetStringValue(cJSON_GetObjectItem(jc, "op")), "min", "one op");
	unlink(path);
out:
	cJSON_Delete(js);
	free(text);
	for (int i = 0; i < s.n_procs; i++) {
		for (size_t k = 0; k < ct_catalog_size(); k++)
			free(s.procs[i]->stats[k]);
		free(s.procs[i]->stats);
		free(s.procs[i]);
	}
}

/*
 * nccl-tests' bandwidth (user/bandwidth.h) on hand-made calls: S and the factor of each
 * kind, and every reason a call gets none.
 */
TEST(bandwidth_formula_and_reasons)
{
	const struct ct_func *ar = find(&ct_lib_mpi, "MPI_Allreduce");
	const struct ct_func *ag = find(&ct_lib_mpi, "MPI_Allgather");
	const struct ct_func *ga = find(&ct_lib_mpi, "MPI_Gather");
	const struct ct_func *bc = find(&ct_lib_mpi, "MPI_Bcast");
	const struct ct_func *iar = find(&ct_lib_mpi, "MPI_Iallreduce");
	const struct ct_func *bar = find(&ct_lib_mpi, "MPI_Barrier");
	const struct ct_func *nar = find(&ct_lib_nccl, "ncclAllReduce");
	struct ct_bw bw;

	if (!ASSERT_TRUE(ar && ag && ga && bc && iar && bar && nar, "functions"))
		return;
	/* 1 MiB all-reduce over 4 ranks in 1 ms: algbw 1.048576 GB/s, busbw × 2·3/4 */
	ASSERT_EQ(ct_bandwidth(&ct_lib_mpi, ar, 1 << 20, 1 << 20, 4, 1000000, &bw), CT_BW_OK,
		  "all-reduce");
	ASSERT_TRUE(bw.algbw == 1048576e3 && bw.busbw == 1048576e3 * 1.5, "all-reduce values");
	/* all-gather: S is what it receives (n parts), busbw × 3/4 */
	ASSERT_EQ(ct_bandwidth(&ct_lib_mpi, ag, 1000, 4000, 4, 1000, &bw), CT_BW_OK, "all-gather");
	ASSERT_TRUE(bw.algbw == 4e9 && bw.busbw == 3e9, "all-gather values");
	/* gather on a non-root rank: its part × n */
	ASSERT_EQ(ct_bandwidth(&ct_lib_mpi, ga, 1000, 0, 4, 1000, &bw), CT_BW_OK, "gather");
	ASSERT_TRUE(bw.algbw == 4e9 && bw.busbw == 3e9, "gather values");
	/* broadcast: factor 1, and no group size needed */
	ASSERT_EQ(ct_bandwidth(&ct_lib_mpi, bc, 0, 500, 0, 1000, &bw), CT_BW_OK, "broadcast");
	ASSERT_TRUE(bw.algbw == 5e8 && bw.busbw == 5e8, "broadcast values");
	ASSERT_EQ(ct_bandwidth(&ct_lib_mpi, ar, 1024, 1024, 0, 1000, &bw), CT_BW_GROUP_UNKNOWN,
		  "no group size");
	ASSERT_EQ(ct_bandwidth(&ct_lib_mpi, ar, 1024, 1024, 4, 0, &bw), CT_BW_NO_DURATION,
		  "zero duration");
	ASSERT_EQ(ct_bandwidth(&ct_lib_mpi, ar, 0, 0, 4, 1000, &bw), CT_BW_NO_BYTES, "no bytes");
	ASSERT_EQ(ct_bandwidth(&ct_lib_mpi, bar, 0, 0, 4, 1000, &bw), CT_BW_NO_BYTES, "barrier");
	ASSERT_EQ(ct_bandwidth(&ct_lib_mpi, iar, 1024, 1024, 4, 1000, &bw), CT_BW_POST, "I-form");
	ASSERT_EQ(ct_bandwidth(&ct_lib_nccl, nar, 1024, 1024, 4, 1000, &bw), CT_BW_ENQUEUE,
		  "NCCL enqueue");
	ASSERT_STREQ(ct_bw_reason_name(CT_BW_ENQUEUE), "enqueue_time", "reason name");
	ASSERT_TRUE(ct_bw_factor(CT_K_ALLREDUCE, 1) == 0, "one rank moves nothing");
}
