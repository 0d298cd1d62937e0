// SPDX-License-Identifier: MIT
#include <string.h>
#include "stats.h"

unsigned int ct_hist_bucket(uint64_t v)
{
	unsigned int msb;

	if (v < CT_HIST_SUB)
		return (unsigned int)v;
	msb = 63 - __builtin_clzll(v);
	/* msb >= 3 here: the top 3 bits after the leading one pick the sub-bucket. */
	return (msb - 2) * CT_HIST_SUB + (unsigned int)((v >> (msb - 3)) & (CT_HIST_SUB - 1));
}

void ct_hist_bounds(unsigned int b, uint64_t *lo, uint64_t *hi)
{
	unsigned int msb, sub;

	if (b < CT_HIST_SUB) {
		*lo = b;
		*hi = b + 1;
		return;
	}
	msb = b / CT_HIST_SUB + 2;
	sub = b % CT_HIST_SUB;
	*lo = (1ULL << msb) | ((uint64_t)sub << (msb - 3));
	*hi = *lo + (1ULL << (msb - 3));
}

void ct_hist_add(struct ct_hist *h, uint64_t v)
{
	if (h->n == 0 || v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	h->n++;
	h->total += v;
	h->b[ct_hist_bucket(v)]++;
}

uint64_t ct_hist_quantile(const struct ct_hist *h, double q)
{
	uint64_t rank, seen = 0, lo, hi, mid;

	if (h->n == 0)
		return 0;
	if (q <= 0)
		return h->min;
	if (q >= 1)
		return h->max;
	/* The nearest-rank definition: the smallest value with at least q·n at or below it. */
	rank = (uint64_t)(q * (double)h->n + 0.999999999);
	if (rank == 0)
		rank = 1;
	for (unsigned int b = 0; b < CT_HIST_BUCKETS; b++) {
		seen += h->b[b];
		if (seen < rank)
			continue;
		ct_hist_bounds(b, &lo, &hi);
		mid = lo + (hi - lo) / 2;
		if (mid < h->min)
			mid = h->min;
		if (mid > h->max)
			mid = h->max;
		return mid;
	}
	return h->max;
}

/* The one name seen (unknown ones, NULL, aside), or mixed once two differ. */
static void one_name(const char **one, bool *mixed, const char *name)
{
	if (!name || *mixed)
		return;
	if (!*one)
		*one = name;
	else if (*one != name && strcmp(*one, name) != 0)
		*mixed = true;
}

void ct_fstats_dtype(struct ct_fstats *f, const char *name)
{
	one_name(&f->dtype, &f->dtype_mixed, name);
}

void ct_fstats_op(struct ct_fstats *f, const char *name)
{
	one_name(&f->op, &f->op_mixed, name);
}

const uint64_t ct_dur_bounds_ns[CT_DUR_BUCKETS] = {
    1000ULL,	   5000ULL,	  10000ULL,	  50000ULL,	  100000ULL,	500000ULL,
    1000000ULL,	   5000000ULL,	  10000000ULL,	  50000000ULL,	  100000000ULL, 500000000ULL,
    1000000000ULL, 5000000000ULL, 10000000000ULL, 60000000000ULL,
};

/* The first bound >= v (Prometheus' le is inclusive); n past the last. */
static unsigned int bound_bucket(const uint64_t *bounds, unsigned int n, uint64_t v)
{
	unsigned int lo = 0, hi = n;

	while (lo < hi) {
		unsigned int mid = (lo + hi) / 2;

		if (bounds[mid] >= v)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

unsigned int ct_dur_bucket(uint64_t ns)
{
	return bound_bucket(ct_dur_bounds_ns, CT_DUR_BUCKETS, ns);
}

const uint64_t ct_bw_bounds[CT_BW_BUCKETS] = {
    1000000ULL,	    10000000ULL,     100000000ULL,    250000000ULL,    500000000ULL,
    1000000000ULL,  2500000000ULL,   5000000000ULL,   10000000000ULL,  25000000000ULL,
    50000000000ULL, 100000000000ULL, 200000000000ULL, 400000000000ULL, 800000000000ULL,
};

unsigned int ct_bw_bucket(uint64_t bytes_per_s)
{
	return bound_bucket(ct_bw_bounds, CT_BW_BUCKETS, bytes_per_s);
}
