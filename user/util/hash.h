/* SPDX-License-Identifier: MIT */
/*
 * Slot indexes for the caches keyed by addresses of the target. An address's low bits
 * are no hash: Python objects of one size class lie at steps of a power of two within
 * their pools, so `(addr >> 4) % N` puts many of them in the same few slots, where they
 * evict each other on every event. This mixes every bit in (splitmix64's finalizer).
 */
#ifndef CT_UTIL_HASH_H
#define CT_UTIL_HASH_H

#include <stdint.h>

static inline uint64_t ct_hash_mix(uint64_t a, uint64_t b)
{
	uint64_t h = a ^ (b * 0x9e3779b97f4a7c15ULL);

	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebULL;
	return h ^ (h >> 31);
}

#endif
