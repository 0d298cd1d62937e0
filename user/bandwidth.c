// SPDX-License-Identifier: MIT
/* nccl-tests' algorithm and bus bandwidth of one call (bandwidth.h). */
#include <stdbool.h>
#include "bandwidth.h"
#include "catalog/catalog.h"

static const char *const reason_names[CT_BW_REASONS] = {
    [CT_BW_OK] = "ok",
    [CT_BW_ENQUEUE] = "enqueue_time",
    [CT_BW_POST] = "nonblocking_post",
    [CT_BW_NO_BYTES] = "no_bytes",
    [CT_BW_GROUP_UNKNOWN] = "group_size_unknown",
    [CT_BW_NO_DURATION] = "no_duration",
};

const char *ct_bw_reason_name(enum ct_bw_reason r)
{
	return r < CT_BW_REASONS ? reason_names[r] : "?";
}

double ct_bw_factor(uint8_t kind, int64_t n)
{
	switch (kind) {
	case CT_K_ALLREDUCE:
		return n > 0 ? 2.0 * (double)(n - 1) / (double)n : 0;
	case CT_K_ALLGATHER:
	case CT_K_REDUCE_SCATTER:
	case CT_K_ALLTOALL:
	case CT_K_GATHER:
	case CT_K_SCATTER:
		return n > 0 ? (double)(n - 1) / (double)n : 0;
	case CT_K_BROADCAST:
	case CT_K_REDUCE:
	case CT_K_SEND:
	case CT_K_RECV:
	case CT_K_SENDRECV:
		return 1;
	default:
		return 0;
	}
}

/* Whether the kind's busbw needs the group size (its factor, or S of a gather/scatter). */
static bool needs_n(uint8_t kind)
{
	return kind == CT_K_ALLREDUCE || kind == CT_K_ALLGATHER || kind == CT_K_REDUCE_SCATTER ||
	       kind == CT_K_ALLTOALL || kind == CT_K_GATHER || kind == CT_K_SCATTER;
}

/* Whether the kind moves data at all (not a barrier, a wait, a communicator call). */
static bool moves_data(uint8_t kind)
{
	return needs_n(kind) || ct_bw_factor(kind, 1) == 1;
}

/* S: the size of the whole operation (bandwidth.h). */
static uint64_t op_size(uint8_t kind, uint64_t sent, uint64_t recv, int64_t n)
{
	switch (kind) {
	case CT_K_GATHER: /* each rank's part, gathered n times at the root */
		return sent * (uint64_t)n;
	case CT_K_SCATTER:
		return recv * (uint64_t)n;
	default: /* the larger side is the whole: all-gather receives it, reduce-scatter sends */
		return sent > recv ? sent : recv;
	}
}

enum ct_bw_reason ct_bandwidth(const struct ct_libdesc *d, const struct ct_func *fn, uint64_t sent,
			       uint64_t recv, int64_t n, uint64_t dur_ns, struct ct_bw *out)
{
	double factor = ct_bw_factor(fn->kind, n);
	uint64_t size;

	if (!moves_data(fn->kind))
		return CT_BW_NO_BYTES;
	if (!d->times_transfer)
		return CT_BW_ENQUEUE;
	if (fn->nonblocking)
		return CT_BW_POST;
	if (needs_n(fn->kind) && n <= 0)
		return CT_BW_GROUP_UNKNOWN;
	size = op_size(fn->kind, sent, recv, n);
	if (!size)
		return CT_BW_NO_BYTES;
	if (!dur_ns)
		return CT_BW_NO_DURATION;
	out->algbw = (double)size * 1e9 / (double)dur_ns;
	out->busbw = out->algbw * factor;
	return CT_BW_OK;
}
