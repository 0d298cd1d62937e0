/* SPDX-License-Identifier: MIT */
/* Interned strings: one copy per distinct string for the whole session, bounded. */
#ifndef CT_UTIL_INTERN_H
#define CT_UTIL_INTERN_H

#include <stddef.h>

/* Sanitized (util/utf8.h) and interned; past the budget a fixed "<names table full>". */
const char *ct_intern(const char *s);
/* One copy per distinct byte string (same budget as names); NULL past the budget. */
const void *ct_intern_blob(const void *p, size_t len);
void ct_intern_free(void);

#endif
