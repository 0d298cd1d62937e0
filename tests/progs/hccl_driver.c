// SPDX-License-Identifier: MIT
/*
 * Drives the HCCL stand-in (build/progs/libhccl.so) through dlopen/dlsym, the way
 * frameworks load communication libraries late: nothing HCCL is mapped until the wait
 * is over, so a tracer started earlier must notice the library when it appears.
 *
 *   hccl_driver LIBPATH --rank R --nranks N [--wait-file PATH] [--expect FILE]
 *               [--iters K] [--settle-ms MS]
 *
 * --wait-file: write our pid to PATH.pid, then poll until PATH exists, then dlopen.
 * --settle-ms: sleep this long between dlopen and the first HCCL call. A tracer that
 *   learns of the new mapping asynchronously needs a moment to attach; the tests give it
 *   one, because they measure that the library is picked up, not that race.
 * --expect:    write the ledger (every HCCL call made, with bytes by the tracer's rules,
 *   the datatype name and the reduce op; per call, in "args", the op and the root or peer
 *   of the functions that take one) to FILE.RANK as JSON.
 */
#define HCCL_API_ONLY
#include "libhccl.c"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum fn {
	F_GET_ROOT_INFO,
	F_COMM_INIT_ROOT_INFO,
	F_GET_RANK_SIZE,
	F_GET_RANK_ID,
	F_ALLREDUCE,
	F_BROADCAST,
	F_ALLGATHER,
	F_REDUCE_SCATTER,
	F_REDUCE,
	F_ALLTOALL,
	F_ALLTOALLV,
	F_SEND,
	F_RECV,
	F_BARRIER,
	F_COMM_DESTROY,
	F_MAX,
};

static const char *const fn_name[F_MAX] = {
    [F_GET_ROOT_INFO] = "HcclGetRootInfo",
    [F_COMM_INIT_ROOT_INFO] = "HcclCommInitRootInfo",
    [F_GET_RANK_SIZE] = "HcclGetRankSize",
    [F_GET_RANK_ID] = "HcclGetRankId",
    [F_ALLREDUCE] = "HcclAllReduce",
    [F_BROADCAST] = "HcclBroadcast",
    [F_ALLGATHER] = "HcclAllGather",
    [F_REDUCE_SCATTER] = "HcclReduceScatter",
    [F_REDUCE] = "HcclReduce",
    [F_ALLTOALL] = "HcclAlltoAll",
    [F_ALLTOALLV] = "HcclAlltoAllV",
    [F_SEND] = "HcclSend",
    [F_RECV] = "HcclRecv",
    [F_BARRIER] = "HcclBarrier",
    [F_COMM_DESTROY] = "HcclCommDestroy",
};

static const char *const dt_name[HCCL_DATA_TYPE_RESERVED] = {
    "HCCL_DATA_TYPE_INT8",   "HCCL_DATA_TYPE_INT16", "HCCL_DATA_TYPE_INT32",
    "HCCL_DATA_TYPE_FP16",   "HCCL_DATA_TYPE_FP32",  "HCCL_DATA_TYPE_INT64",
    "HCCL_DATA_TYPE_UINT64", "HCCL_DATA_TYPE_UINT8", "HCCL_DATA_TYPE_UINT16",
    "HCCL_DATA_TYPE_UINT32", "HCCL_DATA_TYPE_FP64",  "HCCL_DATA_TYPE_BFP16",
};
static const unsigned dt_size[HCCL_DATA_TYPE_RESERVED] = {1, 2, 4, 2, 4, 8, 8, 1, 2, 4, 8, 2};

struct entry {
	unsigned long long calls, sent, recv;
	const char *dtype;
	const char *op; /* as the tracer names HCCL_REDUCE_SUM: "sum"; "mixed" */
	char *args;
	size_t args_len;
};
static struct entry ledger[F_MAX];

static const char *const op_name[] = {"sum", "prod", "max", "min"};

/* What the last call of f passed: its op (or -1) and its root or peer (role NULL: none). */
static void led_args(enum fn f, int op, const char *role, unsigned rank_arg)
{
	struct entry *e = &ledger[f];
	char one[96];
	int n;

	if (op >= 0 && !e->op)
		e->op = op_name[op];
	else if (op >= 0 && strcmp(e->op, op_name[op]) != 0)
		e->op = "mixed";
	n = snprintf(one, sizeof(one), "%s{", e->args_len ? ", " : "");
	if (op >= 0)
		n += snprintf(one + n, sizeof(one) - n, "\"op\": \"%s\"%s", op_name[op],
			      role ? ", " : "");
	if (role)
		n += snprintf(one + n, sizeof(one) - n, "\"%s\": %u", role, rank_arg);
	n += snprintf(one + n, sizeof(one) - n, "}");
	e->args = realloc(e->args, e->args_len + n + 1);
	if (!e->args) {
		fprintf(stderr, "hccl_driver: out of memory\n");
		exit(2);
	}
	memcpy(e->args + e->args_len, one, n + 1);
	e->args_len += n;
}

static void led(enum fn f, unsigned long long sent, unsigned long long recv, int dtype)
{
	struct entry *e = &ledger[f];
	const char *name = dtype >= 0 ? dt_name[dtype] : NULL;

	e->calls++;
	e->sent += sent;
	e->recv += recv;
	if (!name)
		return;
	if (!e->dtype)
		e->dtype = name;
	else if (strcmp(e->dtype, name) != 0)
		e->dtype = "mixed";
}

static struct {
	HcclResult (*GetRootInfo)(HcclRootInfo *);
	HcclResult (*CommInitRootInfo)(uint32_t, const HcclRootInfo *, uint32_t, HcclComm *);
	HcclResult (*GetRankSize)(HcclComm, uint32_t *);
	HcclResult (*GetRankId)(HcclComm, uint32_t *);
	HcclResult (*AllReduce)(void *, void *, uint64_t, HcclDataType, HcclReduceOp, HcclComm,
				aclrtStream);
	HcclResult (*Broadcast)(void *, uint64_t, HcclDataType, uint32_t, HcclComm, aclrtStream);
	HcclResult (*AllGather)(void *, void *, uint64_t, HcclDataType, HcclComm, aclrtStream);
	HcclResult (*ReduceScatter)(void *, void *, uint64_t, HcclDataType, HcclReduceOp, HcclComm,
				    aclrtStream);
	HcclResult (*Reduce)(void *, void *, uint64_t, HcclDataType, HcclReduceOp, uint32_t,
			     HcclComm, aclrtStream);
	HcclResult (*AlltoAll)(const void *, uint64_t, HcclDataType, const void *, uint64_t,
			       HcclDataType, HcclComm, aclrtStream);
	HcclResult (*AlltoAllV)(const void *, const void *, const void *, HcclDataType,
				const void *, const void *, const void *, HcclDataType, HcclComm,
				aclrtStream);
	HcclResult (*Send)(void *, uint64_t, HcclDataType, uint32_t, HcclComm, aclrtStream);
	HcclResult (*Recv)(void *, uint64_t, HcclDataType, uint32_t, HcclComm, aclrtStream);
	HcclResult (*Barrier)(HcclComm, aclrtStream);
	HcclResult (*CommDestroy)(HcclComm);
} api;

static void check(HcclResult rc, enum fn f)
{
	if (rc != HCCL_SUCCESS) {
		fprintf(stderr, "hccl_driver: %s failed (%d)\n", fn_name[f], (int)rc);
		exit(3);
	}
}

static void *sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);

	if (!p) {
		fprintf(stderr, "hccl_driver: %s: %s\n", name, dlerror());
		exit(2);
	}
	return p;
}

#define BUF_BYTES (1 << 20)

static void one_iteration(HcclComm comm, uint32_t rank, uint32_t n, char *sb, char *rb)
{
	/* A fake but non-NULL stream handle, as a framework would pass. */
	aclrtStream stream = (aclrtStream)0x5354524d;
	static uint64_t sc[256], sd[256], rc[256], rd[256];
	unsigned long long ssum = 0, rsum = 0;
	HcclDataType t;

	/* HcclAllReduce: sent = recv = count; three dtypes → "mixed". */
	t = HCCL_DATA_TYPE_FP32;
	check(api.AllReduce(sb, rb, 1024, t, HCCL_REDUCE_SUM, comm, stream), F_ALLREDUCE);
	led(F_ALLREDUCE, 1024ULL * dt_size[t], 1024ULL * dt_size[t], t);
	led_args(F_ALLREDUCE, HCCL_REDUCE_SUM, NULL, 0);
	check(api.AllReduce(sb, rb, 7, t, HCCL_REDUCE_MAX, comm, stream), F_ALLREDUCE);
	led(F_ALLREDUCE, 7ULL * dt_size[t], 7ULL * dt_size[t], t);
	led_args(F_ALLREDUCE, HCCL_REDUCE_MAX, NULL, 0);
	t = HCCL_DATA_TYPE_BFP16;
	check(api.AllReduce(sb, rb, 2048, t, HCCL_REDUCE_SUM, comm, stream), F_ALLREDUCE);
	led(F_ALLREDUCE, 2048ULL * dt_size[t], 2048ULL * dt_size[t], t);
	led_args(F_ALLREDUCE, HCCL_REDUCE_SUM, NULL, 0);

	/* HcclBroadcast: sent = recv = count, one buffer. */
	t = HCCL_DATA_TYPE_INT64;
	check(api.Broadcast(rb, 100, t, 0, comm, stream), F_BROADCAST);
	led(F_BROADCAST, 100ULL * dt_size[t], 100ULL * dt_size[t], t);
	led_args(F_BROADCAST, -1, "root", 0);

	/* HcclAllGather: sent = sendCount; recv = sendCount * nranks. */
	t = HCCL_DATA_TYPE_FP16;
	check(api.AllGather(sb, rb, 256, t, comm, stream), F_ALLGATHER);
	led(F_ALLGATHER, 256ULL * dt_size[t], 256ULL * n * dt_size[t], t);

	/* HcclReduceScatter: sent = recvCount * nranks; recv = recvCount. */
	t = HCCL_DATA_TYPE_FP32;
	check(api.ReduceScatter(sb, rb, 64, t, HCCL_REDUCE_SUM, comm, stream), F_REDUCE_SCATTER);
	led(F_REDUCE_SCATTER, 64ULL * n * dt_size[t], 64ULL * dt_size[t], t);
	led_args(F_REDUCE_SCATTER, HCCL_REDUCE_SUM, NULL, 0);

	/* HcclReduce: recv counts at the root only; once as root, once not. */
	t = HCCL_DATA_TYPE_INT32;
	check(api.Reduce(sb, rb, 50, t, HCCL_REDUCE_SUM, rank, comm, stream), F_REDUCE);
	led(F_REDUCE, 50ULL * dt_size[t], 50ULL * dt_size[t], t);
	led_args(F_REDUCE, HCCL_REDUCE_SUM, "root", rank);
	check(api.Reduce(sb, rb, 50, t, HCCL_REDUCE_MIN, (rank + 1) % n, comm, stream), F_REDUCE);
	led(F_REDUCE, 50ULL * dt_size[t], n == 1 ? 50ULL * dt_size[t] : 0, t);
	led_args(F_REDUCE, HCCL_REDUCE_MIN, "root", (rank + 1) % n);

	/* HcclAlltoAll: sent = sendCount * nranks; recv = recvCount * nranks. */
	t = HCCL_DATA_TYPE_UINT8;
	check(api.AlltoAll(sb, 10, t, rb, 10, t, comm, stream), F_ALLTOALL);
	led(F_ALLTOALL, 10ULL * n * dt_size[t], 10ULL * n * dt_size[t], t);

	/* HcclAlltoAllV: sums of the uint64_t counts arrays. */
	t = HCCL_DATA_TYPE_FP64;
	for (uint32_t i = 0; i < n; i++) {
		sc[i] = i + 1;
		rc[i] = rank + 2;
		sd[i] = ssum;
		rd[i] = rsum;
		ssum += sc[i];
		rsum += rc[i];
	}
	check(api.AlltoAllV(sb, sc, sd, t, rb, rc, rd, t, comm, stream), F_ALLTOALLV);
	led(F_ALLTOALLV, ssum * dt_size[t], rsum * dt_size[t], t);

	/* HcclSend / HcclRecv around the ring. */
	t = HCCL_DATA_TYPE_INT8;
	check(api.Send(sb, 300, t, (rank + 1) % n, comm, stream), F_SEND);
	led(F_SEND, 300ULL * dt_size[t], 0, t);
	led_args(F_SEND, -1, "peer", (rank + 1) % n);
	check(api.Recv(rb, 300, t, (rank + n - 1) % n, comm, stream), F_RECV);
	led(F_RECV, 0, 300ULL * dt_size[t], t);
	led_args(F_RECV, -1, "peer", (rank + n - 1) % n);

	check(api.Barrier(comm, stream), F_BARRIER);
	led(F_BARRIER, 0, 0, -1);
}

static int write_ledger(const char *path, uint32_t rank, uint32_t n, int iters)
{
	char file[PATH_MAX], tmp[PATH_MAX + 8];
	FILE *f;

	if (snprintf(file, sizeof(file), "%s.%u", path, rank) >= (int)sizeof(file))
		return -ENAMETOOLONG;
	snprintf(tmp, sizeof(tmp), "%s.tmp", file);
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f,
		"{\n  \"program\": \"hccl_driver\",\n  \"pid\": %d,\n  \"rank\": %u,\n"
		"  \"size\": %u,\n  \"iterations\": %d,\n  \"final\": true,\n  \"setup\": {},\n"
		"  \"functions\": {",
		(int)getpid(), rank, n, iters);
	for (int i = 0, k = 0; i < F_MAX; i++) {
		const struct entry *e = &ledger[i];

		if (!e->calls)
			continue;
		fprintf(f,
			"%s\n    \"%s\": {\"library\": \"hccl\", \"calls\": %llu, "
			"\"bytes_sent\": %llu, \"bytes_received\": %llu, \"dtype\": ",
			k++ ? "," : "", fn_name[i], e->calls, e->sent, e->recv);
		if (e->dtype)
			fprintf(f, "\"%s\"", e->dtype);
		else
			fprintf(f, "null");
		if (e->op)
			fprintf(f, ", \"op\": \"%s\"", e->op);
		if (e->args_len)
			fprintf(f, ", \"args\": [%s]", e->args);
		fprintf(f, "}");
	}
	fprintf(f, "\n  }\n}\n");
	if (fclose(f) != 0)
		return -errno;
	return rename(tmp, file) ? -errno : 0;
}

static long parse_num(const char *s, const char *opt, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > max) {
		fprintf(stderr, "hccl_driver: invalid %s '%s'\n", opt, s);
		exit(2);
	}
	return v;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int main(int argc, char **argv)
{
	const char *libpath, *wait_file = NULL, *expect = NULL;
	long rank = -1, nranks = -1, iters = 1, settle_ms = 0;
	HcclRootInfo root_info;
	HcclComm comm = NULL;
	uint32_t got_size = 0, got_rank = 0;
	char *sb, *rb;
	void *lib;

	if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: hccl_driver LIBPATH --rank R --nranks N [--wait-file PATH] "
				"[--expect FILE] [--iters K] [--settle-ms MS]\n");
		return 2;
	}
	libpath = argv[1];
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];

		if (i + 1 >= argc) {
			fprintf(stderr, "hccl_driver: %s needs a value\n", a);
			return 2;
		}
		if (!strcmp(a, "--rank"))
			rank = parse_num(argv[++i], a, 255);
		else if (!strcmp(a, "--nranks"))
			nranks = parse_num(argv[++i], a, 256);
		else if (!strcmp(a, "--wait-file"))
			wait_file = argv[++i];
		else if (!strcmp(a, "--expect"))
			expect = argv[++i];
		else if (!strcmp(a, "--iters"))
			iters = parse_num(argv[++i], a, 1000000);
		else if (!strcmp(a, "--settle-ms"))
			settle_ms = parse_num(argv[++i], a, 600000);
		else {
			fprintf(stderr, "hccl_driver: unknown option %s\n", a);
			return 2;
		}
	}
	if (nranks < 1 || rank < 0 || rank >= nranks) {
		fprintf(stderr, "hccl_driver: need --rank R --nranks N with 0 <= R < N\n");
		return 2;
	}

	if (wait_file) {
		char file[PATH_MAX], tmp[PATH_MAX + 8];
		FILE *f;

		snprintf(file, sizeof(file), "%s.pid", wait_file);
		snprintf(tmp, sizeof(tmp), "%s.tmp", file);
		f = fopen(tmp, "w");
		if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 ||
		    rename(tmp, file) != 0) {
			fprintf(stderr, "hccl_driver: cannot write %s: %s\n", file,
				strerror(errno));
			return 2;
		}
		while (access(wait_file, F_OK) != 0)
			sleep_ms(10);
	}

	lib = dlopen(libpath, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "hccl_driver: dlopen %s: %s\n", libpath, dlerror());
		return 2;
	}
	*(void **)&api.GetRootInfo = sym(lib, "HcclGetRootInfo");
	*(void **)&api.CommInitRootInfo = sym(lib, "HcclCommInitRootInfo");
	*(void **)&api.GetRankSize = sym(lib, "HcclGetRankSize");
	*(void **)&api.GetRankId = sym(lib, "HcclGetRankId");
	*(void **)&api.AllReduce = sym(lib, "HcclAllReduce");
	*(void **)&api.Broadcast = sym(lib, "HcclBroadcast");
	*(void **)&api.AllGather = sym(lib, "HcclAllGather");
	*(void **)&api.ReduceScatter = sym(lib, "HcclReduceScatter");
	*(void **)&api.Reduce = sym(lib, "HcclReduce");
	*(void **)&api.AlltoAll = sym(lib, "HcclAlltoAll");
	*(void **)&api.AlltoAllV = sym(lib, "HcclAlltoAllV");
	*(void **)&api.Send = sym(lib, "HcclSend");
	*(void **)&api.Recv = sym(lib, "HcclRecv");
	*(void **)&api.Barrier = sym(lib, "HcclBarrier");
	*(void **)&api.CommDestroy = sym(lib, "HcclCommDestroy");
	if (settle_ms)
		sleep_ms(settle_ms);

	sb = calloc(1, BUF_BYTES);
	rb = calloc(1, BUF_BYTES);
	if (!sb || !rb) {
		fprintf(stderr, "hccl_driver: out of memory\n");
		return 2;
	}

	check(api.GetRootInfo(&root_info), F_GET_ROOT_INFO);
	led(F_GET_ROOT_INFO, 0, 0, -1);
	check(api.CommInitRootInfo((uint32_t)nranks, &root_info, (uint32_t)rank, &comm),
	      F_COMM_INIT_ROOT_INFO);
	led(F_COMM_INIT_ROOT_INFO, 0, 0, -1);
	check(api.GetRankSize(comm, &got_size), F_GET_RANK_SIZE);
	led(F_GET_RANK_SIZE, 0, 0, -1);
	check(api.GetRankId(comm, &got_rank), F_GET_RANK_ID);
	led(F_GET_RANK_ID, 0, 0, -1);
	if (got_size != nranks || got_rank != rank) {
		fprintf(stderr, "hccl_driver: stand-in says rank %u of %u\n", got_rank, got_size);
		return 3;
	}

	for (long it = 0; it < iters; it++)
		one_iteration(comm, (uint32_t)rank, (uint32_t)nranks, sb, rb);

	check(api.CommDestroy(comm), F_COMM_DESTROY);
	led(F_COMM_DESTROY, 0, 0, -1);

	if (expect) {
		int err = write_ledger(expect, (uint32_t)rank, (uint32_t)nranks, (int)iters);

		if (err) {
			fprintf(stderr, "hccl_driver: cannot write %s.%ld: %s\n", expect, rank,
				strerror(-err));
			return 2;
		}
	}
	return 0;
}
