// SPDX-License-Identifier: MIT
#include <stdint.h>
#include "util/utf8.h"

size_t ct_utf8_seq(const unsigned char *s)
{
	unsigned char c = s[0];
	size_t n;
	uint32_t cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, cp = c & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

static bool bad_at(const unsigned char *p, size_t *n)
{
	*n = ct_utf8_seq(p);
	return !*n || *p < 0x20 || *p == 0x7f;
}

bool ct_str_needs_sanitize(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n;

	/* Interning checks every name it is given: printable ASCII, nearly all of them, first. */
	while (p && *p) {
		if (*p >= 0x20 && *p < 0x7f) {
			p++;
			continue;
		}
		if (bad_at(p, &n))
			return true;
		p += n;
	}
	return false;
}

void ct_str_sanitize(char *s)
{
	unsigned char *p = (unsigned char *)s;
	size_t n;

	while (p && *p) {
		if (bad_at(p, &n)) {
			*p++ = '?';
			continue;
		}
		p += n;
	}
}
