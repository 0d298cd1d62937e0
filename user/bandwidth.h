/* SPDX-License-Identifier: MIT */
/*
 * Algorithm and bus bandwidth of one call, as nccl-tests defines them (its
 * doc/PERFORMANCE.md): algbw = S / t, busbw = algbw × a factor of the collective kind
 * and the group size n, so that busbw compares with the link's peak whatever n is:
 *
 *   all-reduce 2(n−1)/n; all-gather, reduce-scatter, all-to-all, gather, scatter (n−1)/n;
 *   broadcast, reduce, send, recv 1.
 *
 * S is the size of the whole operation: the buffer of an all-reduce, broadcast or reduce,
 * the gathered whole of an all-gather or gather (n × the part), the scattered whole of a
 * reduce-scatter or scatter.
 *
 * Only a duration that times the transfer gives a bandwidth: Gloo's algorithms on their
 * worker thread, blocking MPI calls. NCCL, HCCL and c10d's calls return at the enqueue
 * and an MPI I-form at the post: those get none, with the reason, never a number that
 * looks right and is not.
 */
#ifndef CT_BANDWIDTH_H
#define CT_BANDWIDTH_H

#include <stdint.h>

enum ct_bw_reason {
	CT_BW_OK = 0,
	CT_BW_ENQUEUE,	     /* "enqueue_time": the call returns when the work is queued */
	CT_BW_POST,	     /* "nonblocking_post": an I-form's duration is its post */
	CT_BW_NO_BYTES,	     /* "no_bytes": a barrier, a wait, a zero-size call */
	CT_BW_GROUP_UNKNOWN, /* "group_size_unknown": created before attach (NCCL, HCCL) */
	CT_BW_NO_DURATION,   /* "no_duration": zero, or its return was not seen */
	CT_BW_REASONS,
};

struct ct_func;
struct ct_libdesc;

struct ct_bw {
	double algbw, busbw; /* bytes per second */
};

const char *ct_bw_reason_name(enum ct_bw_reason r);
/* nccl-tests' factor from algbw to busbw; 0 for a kind that moves no data. */
double ct_bw_factor(uint8_t kind, int64_t n);
/*
 * The bandwidth of a call that moved sent and received bytes (ct_bytes) in a group of n
 * (0: unknown) in dur_ns. CT_BW_OK fills *out.
 */
enum ct_bw_reason ct_bandwidth(const struct ct_libdesc *d, const struct ct_func *fn, uint64_t sent,
			       uint64_t recv, int64_t n, uint64_t dur_ns, struct ct_bw *out);

#endif
