/* SPDX-License-Identifier: MIT */
/*
 * Names come from target memory (and thread names from the kernel): every output must stay
 * valid UTF-8 whatever bytes they hold. One validator for the whole program.
 */
#ifndef CT_UTIL_UTF8_H
#define CT_UTIL_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlongs, no surrogates, nothing
 * past U+10FFFF), or 0. s[0] == 0 is a sequence of length 1. */
size_t ct_utf8_seq(const unsigned char *s);
/* In place: invalid UTF-8 and control characters become '?'. */
void ct_str_sanitize(char *s);
/* Whether ct_str_sanitize would change s. */
bool ct_str_needs_sanitize(const char *s);

#endif
