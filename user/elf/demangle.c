// SPDX-License-Identifier: MIT
/*
 * C++ names: libiberty's demangler, then a small scanner that reduces the
 * demangled text to the qualified name a user types ("ns::Cls::fn"): no return
 * type, no parameter list, no cv/ref-qualifiers, no template arguments, no
 * ABI tags, no "[clone .cold]" suffix.
 *
 * The names come from the target's libraries, so they are untrusted input. A
 * mangled name expands through its back-references: each "1AIS1_S1_E" doubles
 * the text, so 242 bytes of it ask for 140 MB and every 12 bytes more double
 * that (a tracer that never attaches). libstdc++'s __cxa_demangle has no bound on its output.
 * libiberty's callback entry point is the same demangler (the one behind
 * __cxa_demangle, with the same options) but hands its text over in pieces and
 * allocates nothing itself (its tables are on the stack, sized by the name), so
 * this file stops it with longjmp once the text passes CT_DEMANGLE_MAX.
 */
#include <ctype.h>
#include <libiberty/demangle.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "elf/elfsym.h"

struct dm_out {
	char *buf;
	size_t len, cap;
	jmp_buf stop;
};

static void dm_append(const char *s, size_t n, void *opaque)
{
	struct dm_out *o = opaque;

	if (n >= CT_DEMANGLE_MAX - o->len)
		longjmp(o->stop, 1);
	if (o->len + n + 1 > o->cap) {
		size_t cap = o->cap ? o->cap : 256;
		char *nb;

		while (cap < o->len + n + 1)
			cap *= 2;
		nb = realloc(o->buf, cap);
		if (!nb)
			longjmp(o->stop, 1);
		o->buf = nb;
		o->cap = cap;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
	o->buf[o->len] = '\0';
}

char *ct_demangle(const char *mangled)
{
	/* On the heap: longjmp leaves locals changed after setjmp indeterminate, not memory. */
	struct dm_out *o;
	char *d = NULL;

	/* Only "_Z" names: the demangler also takes bare types ("i" -> "int"). */
	if (!mangled || strncmp(mangled, "_Z", 2) != 0)
		return NULL;
	o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	if (!setjmp(o->stop) &&
	    cplus_demangle_v3_callback(mangled, DMGL_PARAMS | DMGL_TYPES, dm_append, o) && o->len)
		d = o->buf;
	else
		free(o->buf);
	free(o);
	return d;
}

static bool is_ident(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '$';
}

static bool ends_with(const char *s, size_t len, const char *suffix)
{
	size_t n = strlen(suffix);

	return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

/* Length of "operator..." at p (the keyword and its symbol), or 0 if p is no operator name. */
static size_t operator_len(const char *p, const char *start, bool *conversion)
{
	size_t j = 8;

	*conversion = false;
	if (strncmp(p, "operator", 8) != 0 || (p > start && is_ident(p[-1])) || is_ident(p[8]))
		return 0;
	if ((p[j] == '(' && p[j + 1] == ')') || (p[j] == '[' && p[j + 1] == ']'))
		return j + 2;
	if (p[j] == ' ' || p[j] == '"') {
		/* "operator bool", "operator new[]", operator"" _x: the rest is the name. */
		*conversion = true;
		return j;
	}
	/* The demangler separates "operator<" from a following "<T>" with a space. */
	while (p[j] && strchr("+-*/%^&|~!=<>,", p[j]))
		j++;
	return j;
}

char *ct_demangled_to_qualified(const char *d)
{
	static const char *const quals[] = {" const", " volatile", " &&",
					    " &",     " noexcept", " transaction_safe"};
	size_t len, i, o = 0, k;
	int paren = 0, angle = 0;
	const char *clone;
	char *out;
	bool again;

	if (!d)
		return NULL;
	len = strlen(d);
	clone = strstr(d, " [clone ");
	if (clone)
		len = clone - d;
	do {
		again = false;
		for (k = 0; k < sizeof(quals) / sizeof(quals[0]); k++) {
			if (ends_with(d, len, quals[k])) {
				len -= strlen(quals[k]);
				again = true;
			}
		}
	} while (again);

	/* A function: cut the parameter list, found by matching the last ')' backwards. */
	if (len && d[len - 1] == ')') {
		int depth = 0;

		for (i = len; i-- > 0;) {
			if (d[i] == ')')
				depth++;
			else if (d[i] == '(' && --depth == 0)
				break;
		}
		if (depth != 0 || i == (size_t)-1)
			return NULL;
		len = i;
		/* "X::operator()" followed by "(int)": the cut above took the params only. */
	}

	out = malloc(len + 1);
	if (!out)
		return NULL;
	for (i = 0; i < len; i++) {
		char c = d[i];
		bool conv;
		size_t n;

		if (angle == 0 && (n = operator_len(d + i, d, &conv))) {
			/* The operator may run past the cut (found by the fuzzer: "_Zcl"). */
			if (n > len - i)
				n = len - i;
			if (conv) {
				/* A conversion operator's type is part of its name: keep it
				 * verbatim. */
				memcpy(out + o, d + i, len - i);
				o += len - i;
				break;
			}
			memcpy(out + o, d + i, n);
			o += n;
			i += n - 1;
			/* "operator< <int>": drop the separating space before template args. */
			if (i + 2 < len && d[i + 1] == ' ' && d[i + 2] == '<')
				i++;
			continue;
		}
		if (c == '[' && angle == 0 && strncmp(d + i, "[abi:", 5) == 0) {
			const char *end = memchr(d + i, ']', len - i);

			if (!end)
				break;
			i = end - d;
			continue;
		}
		switch (c) {
		case '<':
			angle++;
			continue;
		case '>':
			if (angle > 0) {
				angle--;
				continue;
			}
			break;
		case '(':
		case '{':
		case '[':
			paren++;
			break;
		case ')':
		case '}':
		case ']':
			paren--;
			break;
		case ' ':
			/* A space outside brackets ends the return type. */
			if (angle == 0 && paren == 0) {
				o = 0;
				continue;
			}
			break;
		}
		if (angle == 0)
			out[o++] = c;
	}
	out[o] = '\0';
	if (!o) {
		free(out);
		return NULL;
	}
	return out;
}

char *ct_demangle_qualified(const char *mangled)
{
	char *d = ct_demangle(mangled), *q;

	if (!d)
		return NULL;
	q = ct_demangled_to_qualified(d);
	free(d);
	return q;
}
