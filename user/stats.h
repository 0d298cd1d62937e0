/* SPDX-License-Identifier: MIT */
/*
 * Fixed-size aggregates: a log-linear latency histogram (8 sub-buckets per
 * power of two: quantiles within 6.25% of the true value, exact min/max/total)
 * and per-function call statistics. Memory does not grow with the run.
 */
#ifndef CT_STATS_H
#define CT_STATS_H

#include <stdbool.h>
#include <stdint.h>
#include "bandwidth.h"

#define CT_HIST_SUB	8
#define CT_HIST_BUCKETS (64 * CT_HIST_SUB)

struct ct_hist {
	uint64_t n, min, max, total;
	uint32_t b[CT_HIST_BUCKETS];
};

void ct_hist_add(struct ct_hist *h, uint64_t v);
/* q in [0, 1]; 0 when empty. */
uint64_t ct_hist_quantile(const struct ct_hist *h, double q);
unsigned int ct_hist_bucket(uint64_t v);
/* Inclusive lower bound and exclusive upper bound of a bucket. */
void ct_hist_bounds(unsigned int b, uint64_t *lo, uint64_t *hi);

/*
 * Fixed duration buckets for the Prometheus histogram (user/metrics/): exact counts of
 * durations at or below each bound (1 us to 60 s), the last one +Inf.
 */
#define CT_DUR_BUCKETS 16
extern const uint64_t ct_dur_bounds_ns[CT_DUR_BUCKETS];
/* The first bucket whose bound is >= ns, CT_DUR_BUCKETS (+Inf) past the last. */
unsigned int ct_dur_bucket(uint64_t ns);

/* The same for bus bandwidth, in bytes/s: 1 MB/s to 800 GB/s, the last one +Inf. */
#define CT_BW_BUCKETS 15
extern const uint64_t ct_bw_bounds[CT_BW_BUCKETS];
unsigned int ct_bw_bucket(uint64_t bytes_per_s);

struct ct_fstats {
	uint64_t calls;	   /* entries seen */
	uint64_t returned; /* returns seen (calls - returned were in flight or cut off) */
	uint64_t bytes_sent, bytes_recv;
	const char *dtype; /* name of the one dtype seen, NULL if none known */
	bool dtype_mixed;
	const char *op; /* name of the one reduce op seen, NULL if none known */
	bool op_mixed;
	struct ct_hist lat;
	uint64_t dur[CT_DUR_BUCKETS + 1]; /* completed calls per fixed bucket (not cumulative) */
	struct ct_hist algbw, busbw;	  /* bytes/s of the calls with a bandwidth */
	uint64_t bw_none[CT_BW_REASONS];  /* completed calls without one, by reason */
	uint64_t bwb[CT_BW_BUCKETS + 1];  /* busbw per fixed bucket (not cumulative) */
};

void ct_fstats_dtype(struct ct_fstats *f, const char *name);
void ct_fstats_op(struct ct_fstats *f, const char *name);

#endif
