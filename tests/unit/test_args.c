// SPDX-License-Identifier: MIT
/*
 * The BPF argument evaluator (bpf/args.bpf.h: eval_loc, decode_args), compiled for the
 * host: the very code the kernel runs, with the few BPF helpers it calls replaced by
 * their user-space meaning (bpf_probe_read_user: a copy that faults below 64 KiB,
 * bpf_loop: a loop, the maps: plain objects). Then every decoder of the catalog is fed
 * a call as the C ABI lays it out (six registers, then the stack) over fake library
 * objects at the catalog's offsets: Open MPI's handles, Gloo's options, c10d's tensors,
 * NCCL's and HCCL's enums, and what the bytes rules make of the values.
 */
#include "harness.h"
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include "catalog/catalog.h"
#include "commtrace/gloo_offsets.h"

/* What vmlinux.h and libbpf give the BPF side. */
struct pt_regs {
	__u64 di, si, dx, cx, r8, r9, sp;
};
#define PT_REGS_PARM1(x)	  ((x)->di)
#define PT_REGS_PARM2(x)	  ((x)->si)
#define PT_REGS_PARM3(x)	  ((x)->dx)
#define PT_REGS_PARM4(x)	  ((x)->cx)
#define PT_REGS_PARM5(x)	  ((x)->r8)
#define PT_REGS_SP(x)		  ((x)->sp)
#define BPF_MAP_TYPE_PERCPU_ARRAY 6
#define __uint(name, val)	  int(*name)[val]
#define __type(name, val)	  __typeof__(val) *name
#define SEC(name)

/* Below this, an address faults, as unmapped user memory does for bpf_probe_read_user. */
#define FAULT_BELOW 0x10000

struct ct_scratch {
	__u64 buf[64];
};

/* The maps commtrace.bpf.c defines: identities here; the lookups below give their contents. */
static struct {
	int id;
} scratch, comm_info, probe_specs;
static struct ct_scratch host_scratch;
static struct ct_probe_spec host_spec;
static struct {
	struct ct_comm_key k;
	struct ct_comm_info v;
} host_comms[4];
static int n_host_comms;
static unsigned long long host_drops[CT_DROP_MAX];

static void count_drop(__u32 reason)
{
	if (reason < CT_DROP_MAX)
		host_drops[reason]++;
}

static long bpf_probe_read_user(void *dst, __u32 size, const void *src)
{
	if ((uintptr_t)src < FAULT_BELOW) {
		memset(dst, 0, size); /* as the helper leaves it */
		return -EFAULT;
	}
	memcpy(dst, src, size);
	return 0;
}

static long bpf_loop(__u32 n, long (*cb)(__u64, void *), void *ctx, __u64 flags)
{
	__u32 i;

	for (i = 0; i < n;)
		if (cb(i++, ctx))
			break;
	return i;
}

static void *bpf_map_lookup_elem(void *map, const void *key);

/* As the BPF object compiles it (clang -Wall), not with the host's -Wextra. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "../../bpf/args.bpf.h"
#pragma GCC diagnostic pop

static struct ct_vals host_decoded;

static void *bpf_map_lookup_elem(void *map, const void *key)
{
	if (map == &decoded)
		return &host_decoded;
	if (map == &scratch)
		return &host_scratch;
	if (map == &probe_specs)
		return *(const __u32 *)key == 0 ? &host_spec : NULL;
	if (map == &comm_info) {
		const struct ct_comm_key *k = key;

		for (int i = 0; i < n_host_comms; i++)
			if (host_comms[i].k.tgid == k->tgid && host_comms[i].k.comm == k->comm)
				return &host_comms[i].v;
	}
	return NULL;
}

#define TGID 4242

static void reset(void)
{
	memset(host_drops, 0, sizeof(host_drops));
	memset(&host_decoded, 0xa5, sizeof(host_decoded)); /* decode_args must clear it */
	n_host_comms = 0;
}

static void add_comm(__u64 comm, __u32 size, __u32 rank)
{
	host_comms[n_host_comms].k = (struct ct_comm_key){.tgid = TGID, .comm = comm};
	host_comms[n_host_comms].v = (struct ct_comm_info){.size = size, .rank = rank};
	n_host_comms++;
}

/* A call's frame: arguments 1-6 in registers, 7+ above the return address. */
struct frame {
	struct pt_regs regs;
	__u64 stack[16];
};

static void frame_set(struct frame *f, const __u64 *args, int n)
{
	memset(f, 0, sizeof(*f));
	f->stack[0] = 0x401000; /* the return address */
	f->regs.sp = (__u64)(uintptr_t)f->stack;
	for (int i = 1; i <= n; i++) {
		switch (i) {
		case 1:
			f->regs.di = args[i];
			break;
		case 2:
			f->regs.si = args[i];
			break;
		case 3:
			f->regs.dx = args[i];
			break;
		case 4:
			f->regs.cx = args[i];
			break;
		case 5:
			f->regs.r8 = args[i];
			break;
		case 6:
			f->regs.r9 = args[i];
			break;
		default:
			f->stack[i - 6] = args[i];
		}
	}
}

static __u64 P(const void *p)
{
	return (__u64)(uintptr_t)p;
}

/* One location against a frame (val: the slots already decoded). */
static __u64 eval1(const struct ct_loc *l, const __u64 *args, int n, const __u64 *val)
{
	struct frame f;
	struct ct_args a;
	__u64 zero[CT_NVAL] = {0};

	frame_set(&f, args, n);
	read_args(&f.regs, &a);
	return eval_loc(&a, l, TGID, val ? val : zero);
}

/* A catalog function decoded as the probe would: its spec, its order, every slot. */
static const struct ct_func *decode(const struct ct_libdesc *d, const char *name, const __u64 *args,
				    int n, __u64 *out)
{
	const struct ct_func *fn = NULL;
	struct frame f;
	uint32_t id;

	for (size_t i = 0; i < d->n_funcs; i++)
		if (!strcmp(d->funcs[i].name, name))
			fn = &d->funcs[i];
	if (!ASSERT_NOT_NULL(fn, name))
		return NULL;
	id = ct_catalog_base(d) + (uint32_t)(fn - d->funcs);
	ct_catalog_spec(id, &host_spec);
	frame_set(&f, args, n);
	if (!ASSERT_OK(decode_args(&f.regs, 0, TGID, host_spec.n_order), name))
		return NULL;
	memcpy(out, host_decoded.v, sizeof(host_decoded.v));
	return fn;
}

#define GARBAGE 0xdeadbeef00000000ULL /* the upper half of a register holding an int */

TEST(args_eval_loc_reads)
{
	__u64 args[11] = {0, GARBAGE | 7, 0x1234, 0, 0, 0, 0x66, 0x77, 0x88, 0x99, 0xaa};
	struct {
		__u64 a, b;
		__u32 c;
		__u16 d;
		__u8 e;
	} obj = {0x1111222233334444ULL, 0, 0xcafef00d, 0xbeef, 0x5a};
	__u64 inner[4] = {0, 0, 0xfeed, 0}, *inner_p = inner, **arr = &inner_p;
	struct {
		__u64 pad;
		void *p;
	} outer = {0, inner};
	struct ct_loc l;

	reset();
	args[3] = P(&obj);
	args[4] = P(&outer);
	args[5] = P(&arr);
	ct_subtest("arg");
	l = (struct ct_loc)LOC_ARG(1);
	ASSERT_EQ(eval1(&l, args, 10, NULL), GARBAGE | 7, "8 bytes: the whole register");
	l = (struct ct_loc)LOC_ARG32(1);
	ASSERT_EQ(eval1(&l, args, 10, NULL), 7, "4 bytes: the upper half dropped");
	l.size = 2, args[1] = GARBAGE | 0x10002;
	ASSERT_EQ(eval1(&l, args, 10, NULL), 2, "2 bytes");
	l.size = 1, args[1] = GARBAGE | 0x301;
	ASSERT_EQ(eval1(&l, args, 10, NULL), 1, "1 byte");
	for (int i = 6; i <= 10; i++) {
		l = (struct ct_loc)LOC_ARG(i);
		ASSERT_EQ(eval1(&l, args, 10, NULL), 0x66 + 0x11 * (i - 6), "register 6, stack 7+");
	}
	l = (struct ct_loc)LOC_ARG(17);
	ASSERT_EQ(eval1(&l, args, 10, NULL), 0, "past 16 arguments: nothing");

	ct_subtest("deref");
	l = (struct ct_loc)LOC_DEREF(3, 0, 8);
	ASSERT_EQ(eval1(&l, args, 10, NULL), 0x1111222233334444ULL, "8 bytes at +0");
	l = (struct ct_loc)LOC_DEREF(3, 16, 4);
	ASSERT_EQ(eval1(&l, args, 10, NULL), 0xcafef00d, "4 bytes at +16");
	l = (struct ct_loc)LOC_DEREF(3, 20, 2);
	ASSERT_EQ(eval1(&l, args, 10, NULL), 0xbeef, "2 bytes at +20");
	l = (struct ct_loc)LOC_DEREF(3, 22, 1);
	ASSERT_EQ(eval1(&l, args, 10, NULL), 0x5a, "1 byte at +22");
	l = (struct ct_loc)LOC_DEREF2(4, 8, 16, 8);
	ASSERT_EQ(eval1(&l, args, 10, NULL), 0xfeed, "through a pointer field");
	l = (struct ct_loc)LOC_DEREF3(5, 0, 16, 8);
	ASSERT_EQ(eval1(&l, args, 10, NULL), 0xfeed, "first element of a pointer array");
	ASSERT_EQ(host_drops[CT_DROP_READ], 0, "no read failed");

	ct_subtest("null and faults");
	args[3] = 0;
	l = (struct ct_loc)LOC_DEREF(3, 16, 4);
	ASSERT_EQ(eval1(&l, args, 10, NULL), 0, "NULL: 0");
	ASSERT_EQ(host_drops[CT_DROP_READ], 0, "NULL is not a failed read");
	args[3] = 0x100;
	ASSERT_EQ(eval1(&l, args, 10, NULL), 0, "unmapped: 0");
	ASSERT_EQ(host_drops[CT_DROP_READ], 1, "unmapped: counted");
	outer.p = (void *)0x200;
	l = (struct ct_loc)LOC_DEREF2(4, 8, 16, 8);
	ASSERT_EQ(eval1(&l, args, 10, NULL), 0, "second read unmapped: 0");
	ASSERT_EQ(host_drops[CT_DROP_READ], 2, "counted");

	ct_subtest("const");
	l = (struct ct_loc)LOC_CONST(1);
	ASSERT_EQ(eval1(&l, args, 10, NULL), 1, "LOC_CONST");
	l.off1 = 0x5678, l.off2 = 0x1234;
	ASSERT_EQ(eval1(&l, args, 10, NULL), 0x12345678, "off1 | off2 << 16");
}

TEST(args_eval_loc_vectors)
{
	static __s32 c32[200];
	static __u64 c64[CT_MAX_VEC + 10];
	__u64 args[3] = {0, 0, 0}, val[CT_NVAL] = {0};
	unsigned long long want = 0;
	struct ct_loc l;

	reset();
	for (int i = 0; i < 200; i++)
		c32[i] = i + 1;
	c32[5] = -7; /* a negative C int is garbage, not a huge count */
	for (int i = 0; i < 200; i++)
		want += c32[i] > 0 ? (unsigned long long)c32[i] : 0;
	args[1] = P(c32);

	ct_subtest("sum of ints, in chunks of 64");
	l = (struct ct_loc)LOC_SUM(1, 4);
	val[CT_V_COMM_SIZE] = 200;
	ASSERT_EQ(eval1(&l, args, 2, val), want, "200 counts, one negative");
	val[CT_V_COMM_SIZE] = 3;
	ASSERT_EQ(eval1(&l, args, 2, val), 1 + 2 + 3, "length from the comm-size slot");
	val[CT_V_COMM_SIZE] = 0;
	ASSERT_EQ(eval1(&l, args, 2, val), 0, "length 0");
	l.aux = CT_V_COUNT, val[CT_V_COUNT] = 64;
	ASSERT_EQ(eval1(&l, args, 2, val), 64 * 65 / 2 - 6, "length from another slot (aux)");

	ct_subtest("sum of u64, clamped to CT_MAX_VEC");
	for (int i = 0; i < CT_MAX_VEC + 10; i++)
		c64[i] = 2;
	args[2] = P(c64);
	l = (struct ct_loc)LOC_SUM(2, 8);
	val[CT_V_COMM_SIZE] = 5;
	ASSERT_EQ(eval1(&l, args, 2, val), 10, "five u64 counts");
	val[CT_V_COMM_SIZE] = CT_MAX_VEC + 10;
	ASSERT_EQ(eval1(&l, args, 2, val), 2ULL * CT_MAX_VEC, "at most CT_MAX_VEC counts");

	ct_subtest("sum: NULL and faults");
	args[2] = 0;
	val[CT_V_COMM_SIZE] = 4;
	ASSERT_EQ(eval1(&l, args, 2, val), 0, "NULL array (non-root of a Gatherv)");
	ASSERT_EQ(host_drops[CT_DROP_READ], 0, "NULL is not a failed read");
	args[2] = 0x300;
	ASSERT_EQ(eval1(&l, args, 2, val), 0, "unmapped array");
	ASSERT_EQ(host_drops[CT_DROP_READ], 1, "counted");

	ct_subtest("index");
	l = (struct ct_loc)LOC_INDEX(1, 4);
	val[CT_V_COMM_RANK] = 3;
	ASSERT_EQ(eval1(&l, args, 2, val), 4, "counts[rank]");
	val[CT_V_COMM_RANK] = CT_MAX_VEC + 1;
	ASSERT_EQ(eval1(&l, args, 2, val), 0, "index past CT_MAX_VEC");
	args[1] = 0;
	val[CT_V_COMM_RANK] = 1;
	ASSERT_EQ(eval1(&l, args, 2, val), 0, "NULL array");
}

TEST(args_eval_loc_comm_info)
{
	__u64 args[2] = {0, 0}, val[CT_NVAL] = {0};
	struct ct_loc size = LOC_COMM_SIZE, rank = LOC_COMM_RANK;

	reset();
	add_comm(0xc0ffee, 8, 5);
	val[CT_V_COMM] = 0xc0ffee;
	ASSERT_EQ(eval1(&size, args, 1, val), 8, "size remembered at creation");
	ASSERT_EQ(eval1(&rank, args, 1, val), 5, "rank remembered at creation");
	val[CT_V_COMM] = 0xbad;
	ASSERT_EQ(eval1(&size, args, 1, val), 0, "a communicator created before attach");
	ASSERT_EQ(eval1(&rank, args, 1, val), 0, "unknown rank");
}

/* Open MPI 4 objects at the offsets of user/catalog/mpi.c, laid out by hand here. */
struct fake_ompi {
	unsigned char dt[64], rdt[64], comm[256], group[48], proc[64];
	__u64 procs[2]; /* the group's ompi_proc_t pointers */
	char op;	/* its address is the MPI_Op handle */
};

/* A communicator of size ranks, this one rank; world rank 6 is the group's rank 0. */
static void ompi_init(struct fake_ompi *o, __u64 dtsize, __u64 rdtsize, int rank, int size)
{
	void *g = o->group, *procs = o->procs;
	__u32 leader = 6;

	memset(o, 0, sizeof(*o));
	memcpy(o->dt + 24, &dtsize, 8);
	memcpy(o->rdt + 24, &rdtsize, 8);
	memcpy(o->comm + 228, &rank, 4);
	memcpy(o->comm + 248, &g, 8);
	memcpy(o->group + 16, &size, 4);
	memcpy(o->group + 32, &procs, 8);
	o->procs[0] = P(o->proc);
	memcpy(o->proc + 44, &leader, 4);
}

TEST(args_decode_mpi)
{
	static struct fake_ompi o;
	static __s32 rcounts[4] = {1, 2, 3, 4}, scounts[4] = {5, 6, 7, 8}, displs[4];
	__u64 v[CT_NVAL];
	const struct ct_func *fn;

	reset();
	ompi_init(&o, 8, 4, 1, 4);
	{ /* MPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm) */
		__u64 a[] = {0, 0x1000, 0x2000, GARBAGE | 10, P(o.dt), P(&o.op), P(o.comm)};

		fn = decode(&ct_lib_mpi, "MPI_Allreduce", a, 6, v);
		if (fn) {
			ASSERT_EQ(v[CT_V_COUNT], 10, "count (an int)");
			ASSERT_EQ(v[CT_V_DTYPE], P(o.dt), "datatype handle");
			ASSERT_EQ(v[CT_V_DTSIZE], 8, "datatype size from the object");
			ASSERT_EQ(v[CT_V_OP], P(&o.op), "op handle");
			ASSERT_EQ(v[CT_V_COMM], P(o.comm), "comm handle");
			ASSERT_EQ(v[CT_V_COMM_RANK], 1, "c_my_rank");
			ASSERT_EQ(v[CT_V_COMM_SIZE], 4, "grp_proc_count");
			ASSERT_EQ(v[CT_V_GROUP], (1ULL << 32) | 6,
				  "the leader's vpid, marked read");
			ASSERT_EQ(ct_bytes(&ct_lib_mpi, &fn->sent, v), 80, "sent");
			ASSERT_EQ(ct_bytes(&ct_lib_mpi, &fn->recv, v), 80, "received");
		}
		/* A sentinel (a process not instantiated): the vpid it encodes in bits 32-63. */
		o.procs[0] = (9ULL << 32) | (3 << 16) | 1;
		fn = decode(&ct_lib_mpi, "MPI_Allreduce", a, 6, v);
		if (fn)
			ASSERT_EQ(v[CT_V_GROUP], (1ULL << 32) | 9, "a sentinel's vpid");
		o.procs[0] = 0x100; /* unreadable: unknown, not rank 0 */
		fn = decode(&ct_lib_mpi, "MPI_Allreduce", a, 6, v);
		if (fn)
			ASSERT_EQ(v[CT_V_GROUP], 0, "unknown");
		o.procs[0] = P(o.proc);
	}
	{ /* MPI_Allgatherv(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm): 7, 8 stacked */
		__u64 a[] = {0,		 0x1000,    3,	      P(o.dt),	0x2000,
			     P(rcounts), P(displs), P(o.rdt), P(o.comm)};

		fn = decode(&ct_lib_mpi, "MPI_Allgatherv", a, 8, v);
		if (fn) {
			ASSERT_EQ(v[CT_V_COUNT], 3, "sendcount");
			ASSERT_EQ(v[CT_V_RCOUNT], 1 + 2 + 3 + 4, "sum of comm-size recvcounts");
			ASSERT_EQ(v[CT_V_RDTSIZE], 4, "recv datatype (arg 7, stack)");
			ASSERT_EQ(v[CT_V_COMM_SIZE], 4, "comm (arg 8, stack)");
			ASSERT_EQ(ct_bytes(&ct_lib_mpi, &fn->sent, v), 3 * 8, "sent");
			ASSERT_EQ(ct_bytes(&ct_lib_mpi, &fn->recv, v), 10 * 4, "received");
		}
	}
	{ /* MPI_Alltoallv(sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt, comm) */
		__u64 a[] = {0,	     0x1000,	 P(scounts), P(displs), P(o.dt),
			     0x2000, P(rcounts), P(displs),  P(o.rdt),	P(o.comm)};

		fn = decode(&ct_lib_mpi, "MPI_Alltoallv", a, 9, v);
		if (fn) {
			ASSERT_EQ(v[CT_V_COUNT], 5 + 6 + 7 + 8, "sum of sendcounts");
			ASSERT_EQ(v[CT_V_RCOUNT], 1 + 2 + 3 + 4, "sum of recvcounts");
			ASSERT_EQ(ct_bytes(&ct_lib_mpi, &fn->sent, v), 26 * 8, "sent");
			ASSERT_EQ(ct_bytes(&ct_lib_mpi, &fn->recv, v), 10 * 4, "received");
		}
	}
	{ /* MPI_Reduce_scatter(sbuf, rbuf, recvcounts, datatype, op, comm) */
		__u64 a[] = {0, 0x1000, 0x2000, P(rcounts), P(o.dt), P(&o.op), P(o.comm)};

		fn = decode(&ct_lib_mpi, "MPI_Reduce_scatter", a, 6, v);
		if (fn) {
			ASSERT_EQ(v[CT_V_COUNT], 10, "SUM: every rank's block");
			ASSERT_EQ(v[CT_V_RCOUNT], 2, "INDEX: recvcounts[rank 1]");
			ASSERT_EQ(v[CT_V_OP], P(&o.op), "op");
			ASSERT_EQ(ct_bytes(&ct_lib_mpi, &fn->sent, v), 10 * 8, "sent");
			ASSERT_EQ(ct_bytes(&ct_lib_mpi, &fn->recv, v), 2 * 8, "received");
		}
	}
	{ /* MPI_Gatherv off the root: recvcounts NULL, as programs pass it */
		__u64 a[] = {0, 0x1000, 2, P(o.dt), 0, 0, 0, P(o.rdt), GARBAGE | 0, P(o.comm)};

		fn = decode(&ct_lib_mpi, "MPI_Gatherv", a, 9, v);
		if (fn) {
			ASSERT_EQ(v[CT_V_RCOUNT], 0, "recvcounts not read");
			ASSERT_EQ(v[CT_V_PEER], 0, "root (an int, arg 8)");
			ASSERT_EQ(ct_bytes(&ct_lib_mpi, &fn->recv, v), 0, "nothing received");
			ASSERT_EQ(host_drops[CT_DROP_READ], 0, "NULL is not a failed read");
		}
	}
	{ /* MPI_Reduce(sbuf, rbuf, count, datatype, op, root, comm): root = this rank */
		__u64 a[] = {0, 0x1000, 0x2000, 6, P(o.dt), P(&o.op), GARBAGE | 1, P(o.comm)};

		fn = decode(&ct_lib_mpi, "MPI_Reduce", a, 7, v);
		if (fn) {
			ASSERT_EQ(v[CT_V_PEER], 1, "root");
			ASSERT_EQ(ct_bytes(&ct_lib_mpi, &fn->recv, v), 48, "received at the root");
		}
	}
	{ /* MPI_Send(buf, count, datatype, dest, tag, comm) */
		__u64 a[] = {0, 0x1000, 9, P(o.dt), 3, 77, P(o.comm)};

		fn = decode(&ct_lib_mpi, "MPI_Send", a, 6, v);
		if (fn) {
			ASSERT_EQ(v[CT_V_PEER], 3, "dest");
			ASSERT_STREQ(ct_peer_role(fn), "peer", "a peer, not a root");
			ASSERT_EQ(ct_bytes(&ct_lib_mpi, &fn->sent, v), 72, "sent");
		}
	}
}

TEST(args_decode_gloo)
{
	static unsigned char opts[160], ctx[32], in[32], out[32];
	void *pctx = ctx, *pin = in, *pout = out;
	__u64 elems = 1000, esz = 4, insz = 24, outsz = 96, v[CT_NVAL];
	__s32 rank = 2, size = 4, root = 3;
	__u64 a[2] = {0, P(opts)};
	const struct ct_func *fn;

	reset();
	memcpy(ctx + CT_GLOO_CONTEXT_RANK, &rank, 4);
	memcpy(ctx + CT_GLOO_CONTEXT_SIZE, &size, 4);
	memcpy(in + CT_GLOO_UBUF_SIZE, &insz, 8);
	memcpy(out + CT_GLOO_UBUF_SIZE, &outsz, 8);

	ct_subtest("allreduce");
	memset(opts, 0, sizeof(opts));
	memcpy(opts + CT_GLOO_ALLREDUCE_CONTEXT, &pctx, 8);
	memcpy(opts + CT_GLOO_ALLREDUCE_ELEMENTS, &elems, 8);
	memcpy(opts + CT_GLOO_ALLREDUCE_ELEMSIZE, &esz, 8);
	fn = decode(&ct_lib_gloo, "gloo::allreduce", a, 1, v);
	if (fn) {
		ASSERT_EQ(v[CT_V_COMM], P(ctx), "context");
		ASSERT_EQ(v[CT_V_COMM_RANK], 2, "context rank");
		ASSERT_EQ(v[CT_V_COMM_SIZE], 4, "context size");
		ASSERT_EQ(v[CT_V_COUNT], 1000, "elements");
		ASSERT_EQ(v[CT_V_DTSIZE], 4, "elementSize");
		ASSERT_EQ(ct_bytes(&ct_lib_gloo, &fn->sent, v), 4000, "sent");
		ASSERT_EQ(ct_bytes(&ct_lib_gloo, &fn->recv, v), 4000, "received");
	}

	ct_subtest("broadcast");
	memset(opts, 0, sizeof(opts));
	memcpy(opts + CT_GLOO_BROADCAST_CONTEXT, &pctx, 8);
	memcpy(opts + CT_GLOO_BROADCAST_ELEMENTS, &elems, 8);
	memcpy(opts + CT_GLOO_BROADCAST_ELEMSIZE, &esz, 8);
	memcpy(opts + CT_GLOO_BROADCAST_ROOT, &root, 4);
	fn = decode(&ct_lib_gloo, "gloo::broadcast", a, 1, v);
	if (fn) {
		ASSERT_EQ(v[CT_V_PEER], 3, "root");
		ASSERT_STREQ(ct_peer_role(fn), "root", "role");
		ASSERT_EQ(ct_bytes(&ct_lib_gloo, &fn->sent, v), 4000, "sent");
	}

	ct_subtest("reduce");
	memset(opts, 0, sizeof(opts));
	memcpy(opts + CT_GLOO_REDUCE_CONTEXT, &pctx, 8);
	memcpy(opts + CT_GLOO_REDUCE_ELEMENTS, &elems, 8);
	memcpy(opts + CT_GLOO_REDUCE_ELEMSIZE, &esz, 8);
	memcpy(opts + CT_GLOO_REDUCE_ROOT, &rank, 4); /* this rank is the root */
	fn = decode(&ct_lib_gloo, "gloo::reduce", a, 1, v);
	if (fn)
		ASSERT_EQ(ct_bytes(&ct_lib_gloo, &fn->recv, v), 4000, "received at the root");

	ct_subtest("allgather");
	memset(opts, 0, sizeof(opts));
	memcpy(opts + CT_GLOO_ALLGATHER_CONTEXT, &pctx, 8);
	memcpy(opts + CT_GLOO_ALLGATHER_IN, &pin, 8);
	memcpy(opts + CT_GLOO_ALLGATHER_OUT, &pout, 8);
	fn = decode(&ct_lib_gloo, "gloo::allgather", a, 1, v);
	if (fn) {
		ASSERT_EQ(ct_bytes(&ct_lib_gloo, &fn->sent, v), 24, "input buffer size");
		ASSERT_EQ(ct_bytes(&ct_lib_gloo, &fn->recv, v), 96, "output buffer size");
	}

	ct_subtest("gather off the root");
	memset(opts, 0, sizeof(opts));
	memcpy(opts + CT_GLOO_GATHER_CONTEXT, &pctx, 8);
	memcpy(opts + CT_GLOO_GATHER_IN, &pin, 8);
	memcpy(opts + CT_GLOO_GATHER_OUT, &pout, 8);
	memcpy(opts + CT_GLOO_GATHER_ROOT, &root, 4);
	fn = decode(&ct_lib_gloo, "gloo::gather", a, 1, v);
	if (fn) {
		ASSERT_EQ(ct_bytes(&ct_lib_gloo, &fn->sent, v), 24, "sent");
		ASSERT_EQ(ct_bytes(&ct_lib_gloo, &fn->recv, v), 0, "received off the root");
	}

	ct_subtest("scatter");
	memset(opts, 0, sizeof(opts));
	memcpy(opts + CT_GLOO_SCATTER_CONTEXT, &pctx, 8);
	memcpy(opts + CT_GLOO_SCATTER_OUT, &pout, 8);
	memcpy(opts + CT_GLOO_SCATTER_ROOT, &root, 4);
	fn = decode(&ct_lib_gloo, "gloo::scatter", a, 1, v);
	if (fn) {
		ASSERT_EQ(v[CT_V_PEER], 3, "root");
		ASSERT_EQ(ct_bytes(&ct_lib_gloo, &fn->recv, v), 96, "received");
	}

	ct_subtest("barrier");
	memset(opts, 0, sizeof(opts));
	memcpy(opts + CT_GLOO_BARRIER_CONTEXT, &pctx, 8);
	fn = decode(&ct_lib_gloo, "gloo::barrier", a, 1, v);
	if (fn)
		ASSERT_EQ(v[CT_V_COMM_SIZE], 4, "context size");
}

/* A c10d call over fake TensorImpls and a fake Backend/ProcessGroup. */
static void c10d_case(const struct ct_libdesc *d, int numel_off, int dtype_off, int rank_off,
		      int size_off)
{
	static unsigned char ti[256], ti2[256], pg[64];
	void *tp = ti, *tp2 = ti2, *tensors[1] = {tp};
	struct {
		void **begin, **end, **cap;
	} vec = {tensors, tensors + 1, tensors + 1};
	__u64 numel = 12, numel2 = 48, v[CT_NVAL];
	__u16 f32 = 6, f16 = 5;
	__s32 rank = 1, size = 4;
	const struct ct_func *fn;

	memset(ti, 0, sizeof(ti));
	memset(ti2, 0, sizeof(ti2));
	memcpy(ti + numel_off, &numel, 8);
	memcpy(ti + dtype_off, &f32, 2);
	memcpy(ti2 + numel_off, &numel2, 8);
	memcpy(ti2 + dtype_off, &f16, 2);
	memcpy(pg + rank_off, &rank, 4);
	memcpy(pg + size_off, &size, 4);
	{ /* allreduce(ret, this, std::vector<at::Tensor>&, opts) */
		__u64 a[] = {0, 0x7000, P(pg), P(&vec), 0x8000};

		fn = decode(d, "ProcessGroupGloo::allreduce", a, 4, v);
		if (fn) {
			ASSERT_EQ(v[CT_V_COMM], P(pg), "this");
			ASSERT_EQ(v[CT_V_COMM_RANK], 1, "rank_");
			ASSERT_EQ(v[CT_V_COMM_SIZE], 4, "size_");
			ASSERT_EQ(v[CT_V_COUNT], 12, "numel of the first tensor");
			ASSERT_EQ(v[CT_V_DTYPE], 6, "ScalarType");
			ASSERT_EQ(ct_bytes(d, &fn->sent, v), 48, "float32 x 12");
		}
	}
	{ /* _allgather_base(ret, this, at::Tensor& out, at::Tensor& in, opts) */
		__u64 a[] = {0, 0x7000, P(pg), P(&tp2), P(&tp), 0x8000};

		fn = decode(d, "ProcessGroupNCCL::_allgather_base", a, 5, v);
		if (fn) {
			ASSERT_EQ(v[CT_V_COUNT], 12, "input tensor (arg 4)");
			ASSERT_EQ(ct_bytes(d, &fn->recv, v), 48 * 4, "x group size");
		}
	}
	{ /* alltoall_base(ret, this, at::Tensor& out, at::Tensor& in, ...) */
		__u64 a[] = {0, 0x7000, P(pg), P(&tp2), P(&tp), 0, 0, 0x8000};

		fn = decode(d, "ProcessGroupGloo::alltoall_base", a, 7, v);
		if (fn) {
			ASSERT_EQ(ct_bytes(d, &fn->sent, v), 48, "input: 12 float32");
			ASSERT_EQ(v[CT_V_RDTYPE], 5, "output dtype");
			ASSERT_EQ(ct_bytes(d, &fn->recv, v), 96, "output: 48 float16");
		}
	}
	{ /* send(ret, this, std::vector<at::Tensor>&, int dstRank, int tag) */
		__u64 a[] = {0, 0x7000, P(pg), P(&vec), GARBAGE | 3, 0};

		fn = decode(d, "ProcessGroupNCCL::send", a, 5, v);
		if (fn) {
			ASSERT_EQ(v[CT_V_PEER], 3, "dstRank");
			ASSERT_EQ(ct_bytes(d, &fn->sent, v), 48, "sent");
		}
	}
}

TEST(args_decode_c10d)
{
	reset();
	ct_subtest("torch 1.x");
	c10d_case(&ct_lib_c10d, 168, 176, 24, 28);
	ct_subtest("torch 2.x");
	c10d_case(&ct_lib_c10d2, 160, 168, 16, 20);
}

TEST(args_decode_nccl_hccl)
{
	__u64 v[CT_NVAL], comm = 0xabc000;
	const struct ct_func *fn;

	reset();
	add_comm(comm, 8, 2);
	{ /* ncclSend(sendbuff, count, datatype, peer, comm, stream) */
		__u64 a[] = {0, 0x1000, 100, GARBAGE | 7, GARBAGE | 5, comm, 0x5000};

		fn = decode(&ct_lib_nccl, "ncclSend", a, 6, v);
		if (fn) {
			ASSERT_EQ(v[CT_V_COUNT], 100, "count");
			ASSERT_EQ(v[CT_V_DTYPE], 7, "ncclFloat32");
			ASSERT_EQ(v[CT_V_PEER], 5, "peer");
			ASSERT_EQ(v[CT_V_COMM_SIZE], 8, "size from comm_info");
			ASSERT_EQ(v[CT_V_COMM_RANK], 2, "rank from comm_info");
			ASSERT_EQ(ct_bytes(&ct_lib_nccl, &fn->sent, v), 400, "sent");
			ASSERT_EQ(ct_bytes(&ct_lib_nccl, &fn->recv, v), 0, "nothing received");
		}
	}
	{ /* ncclRecv(recvbuff, count, datatype, peer, comm, stream) */
		__u64 a[] = {0, 0x1000, 10, 8, 1, comm, 0x5000};

		fn = decode(&ct_lib_nccl, "ncclRecv", a, 6, v);
		if (fn) {
			ASSERT_EQ(v[CT_V_PEER], 1, "peer");
			ASSERT_EQ(ct_bytes(&ct_lib_nccl, &fn->recv, v), 80, "float64 received");
		}
	}
	{ /* ncclBroadcast(sendbuff, recvbuff, count, datatype, root, comm, stream): 7 stacked */
		__u64 a[] = {0, 0x1000, 0x2000, 16, 9, GARBAGE | 2, comm, 0x5000};

		fn = decode(&ct_lib_nccl, "ncclBroadcast", a, 7, v);
		if (fn) {
			ASSERT_EQ(v[CT_V_PEER], 2, "root");
			ASSERT_EQ(v[CT_V_COMM], comm, "comm (arg 6)");
			ASSERT_EQ(ct_bytes(&ct_lib_nccl, &fn->sent, v), 32, "bf16 x 16");
		}
	}
	{ /* ncclReduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream) */
		__u64 a[] = {0, 0x1000, 0x2000, 4, 7, GARBAGE | 4, 2, comm, 0x5000};

		fn = decode(&ct_lib_nccl, "ncclReduce", a, 8, v);
		if (fn) {
			ASSERT_EQ(v[CT_V_OP], 4, "ncclAvg");
			ASSERT_EQ(v[CT_V_PEER], 2, "root");
			ASSERT_EQ(v[CT_V_COMM], comm, "comm (arg 7, stack)");
			ASSERT_EQ(ct_bytes(&ct_lib_nccl, &fn->recv, v), 16, "at the root");
		}
	}
	{ /* HcclReduce(sendBuf, recvBuf, count, dataType, op, root, comm, stream) */
		__u64 a[] = {0, 0x1000, 0x2000, 50, 2, GARBAGE | 3, 6, comm, 0x5000};

		fn = decode(&ct_lib_hccl, "HcclReduce", a, 8, v);
		if (fn) {
			ASSERT_EQ(v[CT_V_OP], 3, "HCCL_REDUCE_MIN");
			ASSERT_EQ(v[CT_V_PEER], 6, "root");
			ASSERT_EQ(ct_bytes(&ct_lib_hccl, &fn->recv, v), 0, "not the root");
		}
	}
	{ /* HcclAlltoAllV(sbuf, sendCounts, sdispls, sendType, rbuf, recvCounts, rdispls,
	     recvType, comm, stream): u64 counts, size from comm_info */
		static __u64 sc[8] = {1, 2, 3, 4, 5, 6, 7, 8}, rc[8] = {2, 2, 2, 2, 2, 2, 2, 2};
		__u64 a[] = {0, 0x1000, P(sc), 0x3000, 4, 0x2000, P(rc), 0x4000, 10, comm, 0};

		fn = decode(&ct_lib_hccl, "HcclAlltoAllV", a, 10, v);
		if (fn) {
			ASSERT_EQ(v[CT_V_COUNT], 36, "sum of 8 sendCounts");
			ASSERT_EQ(v[CT_V_RCOUNT], 16, "sum of 8 recvCounts");
			ASSERT_EQ(ct_bytes(&ct_lib_hccl, &fn->sent, v), 36 * 4, "FP32");
			ASSERT_EQ(ct_bytes(&ct_lib_hccl, &fn->recv, v), 16 * 8, "FP64");
		}
	}
	{ /* HcclCommInitRootInfo(nRanks, rootInfo, rank, comm *) */
		__u64 a[] = {0, GARBAGE | 16, 0x1000, GARBAGE | 9, 0x2000};

		fn = decode(&ct_lib_hccl, "HcclCommInitRootInfo", a, 4, v);
		if (fn) {
			ASSERT_EQ(v[CT_V_COMM_SIZE], 16, "nRanks");
			ASSERT_EQ(v[CT_V_COMM_RANK], 9, "rank");
			ASSERT_EQ(v[CT_V_OUT], 0x2000, "where the comm is written");
		}
	}
}
