// SPDX-License-Identifier: MIT
/* CPython's location tables, decoded to a line: linetable.h. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "python/linetable.h"

#define PY_MAX_LASTI (1 << 24) /* code units: no real code object comes close */

/* 3.10 (PEP 626): (byte-offset delta, signed line delta) pairs; -128 means "no line". */
static int line_310(const uint8_t *tab, size_t len, int line, int64_t addr)
{
	int64_t start, end = 0;

	for (size_t i = 0; i + 1 < len; i += 2) {
		int ld = (int8_t)tab[i + 1];

		start = end;
		end += tab[i];
		if (ld != -128)
			line += ld;
		if (addr >= start && addr < end)
			return ld == -128 ? -1 : line;
	}
	return -1;
}

static unsigned int varint(const uint8_t *tab, size_t len, size_t *i)
{
	unsigned int v = 0, shift = 0, b;

	do {
		if (*i >= len || shift > 24)
			return 0;
		b = tab[(*i)++];
		v |= (b & 63) << shift;
		shift += 6;
	} while (b & 64);
	return v;
}

static int svarint(const uint8_t *tab, size_t len, size_t *i)
{
	unsigned int v = varint(tab, len, i);

	return v & 1 ? -(int)(v >> 1) : (int)(v >> 1);
}

/*
 * 3.11+ location table (PEP 657, Objects/locations.md): entries of 1-8 code units, the
 * first byte 1ccccnnn; code 15 no location, 14 long form, 13 line only, 10-12 one-line
 * forms with a line delta of code - 10, 0-9 short forms on the same line.
 */
static int line_311(const uint8_t *tab, size_t len, int line, int64_t lasti)
{
	int64_t start = 0;
	size_t i = 0;

	while (i < len) {
		unsigned int b = tab[i++], code = b >> 3 & 15, n = (b & 7) + 1;
		bool none = false;

		if (!(b & 0x80))
			return -1; /* lost sync: a corrupt or misread table */
		switch (code) {
		case 15:
			none = true;
			break;
		case 14:
			line += svarint(tab, len, &i);
			varint(tab, len, &i); /* end line delta */
			varint(tab, len, &i); /* column + 1 */
			varint(tab, len, &i); /* end column + 1 */
			break;
		case 13:
			line += svarint(tab, len, &i);
			break;
		case 10:
		case 11:
		case 12:
			line += (int)code - 10;
			i += 2; /* column, end column */
			break;
		default:
			i += 1; /* column bits, end column delta */
			break;
		}
		if (lasti >= start && lasti < start + n)
			return none ? -1 : line;
		start += n;
	}
	return -1;
}

int ct_py_linetable_line(int minor, const uint8_t *tab, size_t len, int firstlineno, int64_t lasti)
{
	/* Before the first instruction ran (3.10 f_lasti -1, 3.11+ prev_instr = start - 1). */
	if (lasti < 0)
		return firstlineno;
	if (!tab || lasti > PY_MAX_LASTI)
		return -1;
	if (minor == 10)
		return line_310(tab, len, firstlineno, lasti * 2);
	return line_311(tab, len, firstlineno, lasti);
}
