// SPDX-License-Identifier: MIT
/*
 * A STAND-IN for Huawei's HCCL (Ascend), which cannot be installed here. It has the ABI of
 * the published HCCL C API (hccl/hccl.h, hccl/hccl_types.h: function names, argument
 * order and types, enum values) so that the tracer's HCCL probes and argument decoders
 * are exercised against a real shared library with real calls. The bodies do trivial
 * local work (copies within the caller's buffers); nothing is communicated.
 *
 * The first part (up to HCCL_API_ONLY) is the API itself; tests/progs/hccl_driver.c
 * includes just that part, so the declarations exist once.
 */
#ifndef HCCL_STANDIN_API
#define HCCL_STANDIN_API

#include <stdint.h>

typedef enum {
	HCCL_SUCCESS = 0,
	HCCL_E_PARA = 1,
	HCCL_E_PTR = 2,
	HCCL_E_MEMORY = 3,
	HCCL_E_INTERNAL = 4,
	HCCL_E_NOT_SUPPORT = 5,
} HcclResult;

typedef void *HcclComm;
typedef void *aclrtStream;

#define HCCL_ROOT_INFO_BYTES 4108
typedef struct HcclRootInfoDef {
	char internal[HCCL_ROOT_INFO_BYTES];
} HcclRootInfo;

typedef enum {
	HCCL_DATA_TYPE_INT8 = 0,
	HCCL_DATA_TYPE_INT16 = 1,
	HCCL_DATA_TYPE_INT32 = 2,
	HCCL_DATA_TYPE_FP16 = 3,
	HCCL_DATA_TYPE_FP32 = 4,
	HCCL_DATA_TYPE_INT64 = 5,
	HCCL_DATA_TYPE_UINT64 = 6,
	HCCL_DATA_TYPE_UINT8 = 7,
	HCCL_DATA_TYPE_UINT16 = 8,
	HCCL_DATA_TYPE_UINT32 = 9,
	HCCL_DATA_TYPE_FP64 = 10,
	HCCL_DATA_TYPE_BFP16 = 11,
	HCCL_DATA_TYPE_RESERVED
} HcclDataType;

typedef enum {
	HCCL_REDUCE_SUM = 0,
	HCCL_REDUCE_PROD = 1,
	HCCL_REDUCE_MAX = 2,
	HCCL_REDUCE_MIN = 3,
	HCCL_REDUCE_RESERVED
} HcclReduceOp;

#define HCCL_API __attribute__((noinline, used, visibility("default")))

HCCL_API HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo);
HCCL_API HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo,
					 uint32_t rank, HcclComm *comm);
HCCL_API HcclResult HcclCommDestroy(HcclComm comm);
HCCL_API HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize);
HCCL_API HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank);
HCCL_API HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count,
				  HcclDataType dataType, HcclReduceOp op, HcclComm comm,
				  aclrtStream stream);
HCCL_API HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root,
				  HcclComm comm, aclrtStream stream);
HCCL_API HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount,
				  HcclDataType dataType, HcclComm comm, aclrtStream stream);
HCCL_API HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
				      HcclDataType dataType, HcclReduceOp op, HcclComm comm,
				      aclrtStream stream);
HCCL_API HcclResult HcclReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
			       HcclReduceOp op, uint32_t root, HcclComm comm, aclrtStream stream);
HCCL_API HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType,
				 const void *recvBuf, uint64_t recvCount, HcclDataType recvType,
				 HcclComm comm, aclrtStream stream);
HCCL_API HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void *sdispls,
				  HcclDataType sendType, const void *recvBuf,
				  const void *recvCounts, const void *rdispls,
				  HcclDataType recvType, HcclComm comm, aclrtStream stream);
HCCL_API HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType,
			     uint32_t destRank, HcclComm comm, aclrtStream stream);
HCCL_API HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank,
			     HcclComm comm, aclrtStream stream);
HCCL_API HcclResult HcclBarrier(HcclComm comm, aclrtStream stream);

#endif /* HCCL_STANDIN_API */

#ifndef HCCL_API_ONLY

#include <stdlib.h>
#include <string.h>

/* Not HCCL's layout (HcclComm is opaque there too): a tracer must not rely on it. */
struct standin_comm {
	uint64_t magic;
	uint32_t nranks, rank;
	uint64_t ops;
};
#define STANDIN_MAGIC 0x4843434c53544e44ULL /* "HCCLSTND" */

static size_t dtype_size(HcclDataType t)
{
	static const unsigned char sz[HCCL_DATA_TYPE_RESERVED] = {1, 2, 4, 2, 4, 8,
								  8, 1, 2, 4, 8, 2};

	return (unsigned)t < HCCL_DATA_TYPE_RESERVED ? sz[t] : 0;
}

static struct standin_comm *comm_of(HcclComm comm)
{
	struct standin_comm *c = comm;

	return c && c->magic == STANDIN_MAGIC ? c : NULL;
}

/* The "work": a copy within the caller's buffers, so every call touches memory. */
static void copy(void *dst, const void *src, uint64_t count, HcclDataType t)
{
	if (dst && src && dst != src)
		memmove(dst, src, count * dtype_size(t));
}

HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo)
{
	if (!rootInfo)
		return HCCL_E_PTR;
	memset(rootInfo, 0, sizeof(*rootInfo));
	memcpy(rootInfo->internal, "hccl-standin", 12);
	return HCCL_SUCCESS;
}

HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
				HcclComm *comm)
{
	struct standin_comm *c;

	if (!rootInfo || !comm)
		return HCCL_E_PTR;
	if (nRanks == 0 || rank >= nRanks)
		return HCCL_E_PARA;
	c = calloc(1, sizeof(*c));
	if (!c)
		return HCCL_E_MEMORY;
	c->magic = STANDIN_MAGIC;
	c->nranks = nRanks;
	c->rank = rank;
	*comm = c;
	return HCCL_SUCCESS;
}

HcclResult HcclCommDestroy(HcclComm comm)
{
	struct standin_comm *c = comm_of(comm);

	if (!c)
		return HCCL_E_PARA;
	c->magic = 0;
	free(c);
	return HCCL_SUCCESS;
}

HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize)
{
	struct standin_comm *c = comm_of(comm);

	if (!c || !rankSize)
		return HCCL_E_PARA;
	*rankSize = c->nranks;
	return HCCL_SUCCESS;
}

HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank)
{
	struct standin_comm *c = comm_of(comm);

	if (!c || !rank)
		return HCCL_E_PARA;
	*rank = c->rank;
	return HCCL_SUCCESS;
}

HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
			 HcclReduceOp op, HcclComm comm, aclrtStream stream)
{
	struct standin_comm *c = comm_of(comm);

	if (!c || !dtype_size(dataType) || (unsigned)op >= HCCL_REDUCE_RESERVED)
		return HCCL_E_PARA;
	copy(recvBuf, sendBuf, count, dataType);
	c->ops++;
	return HCCL_SUCCESS;
}

HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root,
			 HcclComm comm, aclrtStream stream)
{
	struct standin_comm *c = comm_of(comm);

	if (!c || !dtype_size(dataType) || root >= c->nranks)
		return HCCL_E_PARA;
	if (buf && count)
		(void)((volatile const char *)buf)[count * dtype_size(dataType) - 1];
	c->ops++;
	return HCCL_SUCCESS;
}

HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount, HcclDataType dataType,
			 HcclComm comm, aclrtStream stream)
{
	struct standin_comm *c = comm_of(comm);

	if (!c || !dtype_size(dataType))
		return HCCL_E_PARA;
	if (recvBuf)
		copy((char *)recvBuf + c->rank * sendCount * dtype_size(dataType), sendBuf,
		     sendCount, dataType);
	c->ops++;
	return HCCL_SUCCESS;
}

HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
			     HcclDataType dataType, HcclReduceOp op, HcclComm comm,
			     aclrtStream stream)
{
	struct standin_comm *c = comm_of(comm);

	if (!c || !dtype_size(dataType) || (unsigned)op >= HCCL_REDUCE_RESERVED)
		return HCCL_E_PARA;
	if (sendBuf)
		copy(recvBuf, (char *)sendBuf + c->rank * recvCount * dtype_size(dataType),
		     recvCount, dataType);
	c->ops++;
	return HCCL_SUCCESS;
}

HcclResult HcclReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
		      HcclReduceOp op, uint32_t root, HcclComm comm, aclrtStream stream)
{
	struct standin_comm *c = comm_of(comm);

	if (!c || !dtype_size(dataType) || (unsigned)op >= HCCL_REDUCE_RESERVED ||
	    root >= c->nranks)
		return HCCL_E_PARA;
	if (c->rank == root)
		copy(recvBuf, sendBuf, count, dataType);
	c->ops++;
	return HCCL_SUCCESS;
}

HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType,
			const void *recvBuf, uint64_t recvCount, HcclDataType recvType,
			HcclComm comm, aclrtStream stream)
{
	struct standin_comm *c = comm_of(comm);
	uint64_t n;

	if (!c || !dtype_size(sendType) || !dtype_size(recvType))
		return HCCL_E_PARA;
	n = sendCount * dtype_size(sendType) < recvCount * dtype_size(recvType) ? sendCount
										: recvCount;
	copy((void *)recvBuf, sendBuf, n, sendType);
	c->ops++;
	return HCCL_SUCCESS;
}

HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void *sdispls,
			 HcclDataType sendType, const void *recvBuf, const void *recvCounts,
			 const void *rdispls, HcclDataType recvType, HcclComm comm,
			 aclrtStream stream)
{
	struct standin_comm *c = comm_of(comm);
	const uint64_t *sc = sendCounts, *rc = recvCounts;

	if (!c || !sc || !rc || !dtype_size(sendType) || !dtype_size(recvType))
		return HCCL_E_PARA;
	/* Our own block: what rank r sends to itself. */
	copy((char *)recvBuf + ((const uint64_t *)rdispls)[c->rank] * dtype_size(recvType),
	     (const char *)sendBuf + ((const uint64_t *)sdispls)[c->rank] * dtype_size(sendType),
	     sc[c->rank] < rc[c->rank] ? sc[c->rank] : rc[c->rank], sendType);
	c->ops++;
	return HCCL_SUCCESS;
}

HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank,
		    HcclComm comm, aclrtStream stream)
{
	struct standin_comm *c = comm_of(comm);

	if (!c || !dtype_size(dataType) || destRank >= c->nranks)
		return HCCL_E_PARA;
	if (sendBuf && count)
		(void)((volatile char *)sendBuf)[count * dtype_size(dataType) - 1];
	c->ops++;
	return HCCL_SUCCESS;
}

HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank,
		    HcclComm comm, aclrtStream stream)
{
	struct standin_comm *c = comm_of(comm);

	if (!c || !dtype_size(dataType) || srcRank >= c->nranks)
		return HCCL_E_PARA;
	if (recvBuf && count)
		memset(recvBuf, (int)srcRank, count * dtype_size(dataType));
	c->ops++;
	return HCCL_SUCCESS;
}

HcclResult HcclBarrier(HcclComm comm, aclrtStream stream)
{
	struct standin_comm *c = comm_of(comm);

	if (!c)
		return HCCL_E_PARA;
	c->ops++;
	return HCCL_SUCCESS;
}

#endif /* HCCL_API_ONLY */
