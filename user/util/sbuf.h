/* SPDX-License-Identifier: MIT */
/* A growable string buffer with JSON escaping. */
#ifndef CT_UTIL_SBUF_H
#define CT_UTIL_SBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ct_sbuf {
	char *buf;
	size_t len, cap;
	bool oom; /* an allocation failed: the content is incomplete, do not write it */
};

void ct_sbuf_reset(struct ct_sbuf *b);
void ct_sbuf_free(struct ct_sbuf *b);
void ct_sbuf_printf(struct ct_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * s as a JSON string literal, quotes included. Control characters become \uXXXX (or \n,
 * \t, …); bytes that are not valid UTF-8 (names read from a process' memory can be
 * anything) become U+FFFD, so the document stays valid for strict parsers. NULL: null.
 */
void ct_sbuf_jstr(struct ct_sbuf *b, const char *s);
/* Nanoseconds as microseconds with three decimals, exactly (no double rounding). */
void ct_sbuf_us(struct ct_sbuf *b, uint64_t ns);

#endif
