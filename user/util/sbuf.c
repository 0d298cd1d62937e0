// SPDX-License-Identifier: MIT
/* A growable string buffer with JSON escaping: the Chrome trace, the metrics, merge. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/sbuf.h"
#include "util/utf8.h"

static bool sbuf_grow(struct ct_sbuf *b, size_t more)
{
	size_t cap;
	char *nb;

	if (b->oom)
		return false;
	if (b->len + more + 1 <= b->cap)
		return true;
	cap = b->cap ? b->cap : 1024;
	while (cap < b->len + more + 1)
		cap *= 2;
	nb = realloc(b->buf, cap);
	if (!nb) {
		b->oom = true;
		return false;
	}
	b->buf = nb;
	b->cap = cap;
	return true;
}

void ct_sbuf_reset(struct ct_sbuf *b)
{
	b->len = 0;
	b->oom = false;
	if (b->buf)
		b->buf[0] = 0;
}

void ct_sbuf_free(struct ct_sbuf *b)
{
	free(b->buf);
	memset(b, 0, sizeof(*b));
}

void ct_sbuf_printf(struct ct_sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !sbuf_grow(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->buf + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

static void sbuf_put(struct ct_sbuf *b, const char *s, size_t n)
{
	if (!sbuf_grow(b, n))
		return;
	memcpy(b->buf + b->len, s, n);
	b->len += n;
	b->buf[b->len] = 0;
}

void ct_sbuf_jstr(struct ct_sbuf *b, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	char esc[8];

	if (!s) {
		sbuf_put(b, "null", 4);
		return;
	}
	sbuf_put(b, "\"", 1);
	while (*s) {
		size_t n = ct_utf8_seq(s);

		if (n == 0) {
			sbuf_put(b, "\\ufffd", 6);
			s++;
			continue;
		}
		if (n > 1) {
			sbuf_put(b, (const char *)s, n);
			s += n;
			continue;
		}
		switch (*s) {
		case '"':
			sbuf_put(b, "\\\"", 2);
			break;
		case '\\':
			sbuf_put(b, "\\\\", 2);
			break;
		case '\n':
			sbuf_put(b, "\\n", 2);
			break;
		case '\r':
			sbuf_put(b, "\\r", 2);
			break;
		case '\t':
			sbuf_put(b, "\\t", 2);
			break;
		default:
			if (*s < 0x20) {
				snprintf(esc, sizeof(esc), "\\u%04x", *s);
				sbuf_put(b, esc, 6);
			} else {
				sbuf_put(b, (const char *)s, 1);
			}
		}
		s++;
	}
	sbuf_put(b, "\"", 1);
}

void ct_sbuf_us(struct ct_sbuf *b, uint64_t ns)
{
	ct_sbuf_printf(b, "%llu.%03llu", (unsigned long long)(ns / 1000),
		       (unsigned long long)(ns % 1000));
}
