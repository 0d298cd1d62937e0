/* SPDX-License-Identifier: MIT */
/* CPython's location tables (co_linetable), decoded to a line. */
#ifndef CT_PY_LINETABLE_H
#define CT_PY_LINETABLE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Line of a code-unit offset (lasti: index of the 2-byte unit) in a location table:
 * the PEP 626 format of 3.10 (minor 10) or the PEP 657 format of 3.11+. -1 if none.
 */
int ct_py_linetable_line(int minor, const uint8_t *tab, size_t len, int firstlineno, int64_t lasti);

#endif
