// SPDX-License-Identifier: MIT
/* util/hash.h: slots for addresses of the target. */
#include <stdbool.h>
#include <string.h>

#include "harness.h"
#include "util/hash.h"

/*
 * 256 objects of one pool at a 16 KiB step (an OpOverload and the objects it shared a
 * slot with): `(addr >> 4) % 256` put them all in one set; mixed, they spread over most of
 * the 256 sets (a random spread fills about 162), and no set holds more than a few.
 */
TEST(hash_spreads_pool_strides)
{
	unsigned int per_set[256];
	int used = 0, most = 0;

	memset(per_set, 0, sizeof(per_set));
	for (uint64_t i = 0; i < 256; i++)
		per_set[ct_hash_mix(0x7fe57304ee40ULL + i * 0x4000, 1234) % 256]++;
	for (int s = 0; s < 256; s++) {
		used += per_set[s] > 0;
		most = per_set[s] > (unsigned int)most ? (int)per_set[s] : most;
	}
	ASSERT_GE(used, 140, "sets used");
	ASSERT_LE(most, 6, "objects in the fullest set");
	/* the pid and the parent take part */
	ASSERT_NEQ(ct_hash_mix(0x7fe57304ee40ULL, 1), ct_hash_mix(0x7fe57304ee40ULL, 2), "key b");
}
