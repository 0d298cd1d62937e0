// SPDX-License-Identifier: MIT
/*
 * Interned strings and blobs: one copy per distinct value for the whole session, with one
 * byte budget for both. Names (qualnames, module FQNs, type names) and op values repeat
 * endlessly; a table of them stays small.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/intern.h"
#include "util/utf8.h"

#define INTERN_BUCKETS	 4096
#define INTERN_MAX_BYTES (4u << 20)

struct istr {
	struct istr *next;
	char s[];
};

static struct istr *itab[INTERN_BUCKETS];
static size_t ibytes;

/*
 * Names come from target memory (and thread names from the kernel): what is not valid
 * UTF-8, or is a control character, becomes '?' so that every output stays valid.
 */
const char *ct_intern(const char *in)
{
	char buf[1024];
	const char *s = in;
	uint32_t h = 2166136261u;
	struct istr *e;
	size_t len;

	if (!s)
		return NULL;
	if (ct_str_needs_sanitize(s)) {
		snprintf(buf, sizeof(buf), "%s", in);
		ct_str_sanitize(buf);
		s = buf;
	}
	for (const char *p = s; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	for (e = itab[h % INTERN_BUCKETS]; e; e = e->next)
		if (strcmp(e->s, s) == 0)
			return e->s;
	len = strlen(s) + 1;
	/* Names, not data: a program has few distinct ones. Past the cap, say so. */
	if (ibytes + len > INTERN_MAX_BYTES)
		return "<names table full>";
	e = malloc(sizeof(*e) + len);
	if (!e)
		return "<out of memory>";
	memcpy(e->s, s, len);
	e->next = itab[h % INTERN_BUCKETS];
	itab[h % INTERN_BUCKETS] = e;
	ibytes += len;
	return e->s;
}

/* Blobs (struct ct_values): the same budget as names, a table of their own. */
struct iblob {
	struct iblob *next;
	size_t len;
	uint64_t data[]; /* aligned for any struct of pointers and integers */
};

static struct iblob *btab[INTERN_BUCKETS];

const void *ct_intern_blob(const void *p, size_t len)
{
	uint32_t h = 2166136261u;
	struct iblob *e;

	for (size_t i = 0; i < len; i++)
		h = (h ^ ((const uint8_t *)p)[i]) * 16777619u;
	for (e = btab[h % INTERN_BUCKETS]; e; e = e->next)
		if (e->len == len && memcmp(e->data, p, len) == 0)
			return e->data;
	if (ibytes + len > INTERN_MAX_BYTES)
		return NULL;
	e = malloc(sizeof(*e) + len);
	if (!e)
		return NULL;
	e->len = len;
	memcpy(e->data, p, len);
	e->next = btab[h % INTERN_BUCKETS];
	btab[h % INTERN_BUCKETS] = e;
	ibytes += len;
	return e->data;
}

void ct_intern_free(void)
{
	for (int i = 0; i < INTERN_BUCKETS; i++) {
		while (btab[i]) {
			struct iblob *n = btab[i]->next;

			free(btab[i]);
			btab[i] = n;
		}
	}
	for (int i = 0; i < INTERN_BUCKETS; i++) {
		while (itab[i]) {
			struct istr *n = itab[i]->next;

			free(itab[i]);
			itab[i] = n;
		}
	}
	ibytes = 0;
}
