/* SPDX-License-Identifier: MIT */
/*
 * A tiny test harness in the manner of the kernel's test_progs: tests register
 * themselves by name, ASSERT_* macros log the failing values and return false,
 * subtests group related checks, and the runner filters with -a/-d.
 *
 *	TEST(elf_weak_alias) {
 *		if (!ASSERT_EQ(n, 1, "symbols")) return;
 *	}
 */
#ifndef CT_TEST_HARNESS_H
#define CT_TEST_HARNESS_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <inttypes.h>

struct ct_test {
	const char *name;
	void (*fn)(void);
	struct ct_test *next;
};

void ct_test_register(struct ct_test *t);
void ct_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
bool ct_subtest(const char *name);
/* A directory for temporary files of the running test, created on first use. */
const char *ct_test_tmpdir(void);

#define TEST(name)                                                                                 \
	static void test_##name(void);                                                             \
	static struct ct_test ct_test_##name = {#name, test_##name, NULL};                         \
	__attribute__((constructor)) static void ct_reg_##name(void)                               \
	{                                                                                          \
		ct_test_register(&ct_test_##name);                                                 \
	}                                                                                          \
	static void test_##name(void)

#define ASSERT_TRUE(cond, what)                                                                    \
	({                                                                                         \
		bool ___ok = (cond);                                                               \
		if (!___ok)                                                                        \
			ct_test_fail(__FILE__, __LINE__, "%s: expected true: %s", what, #cond);    \
		___ok;                                                                             \
	})
#define ASSERT_FALSE(cond, what) ASSERT_TRUE(!(cond), what)

#define ASSERT_OP(a, op, b, what)                                                                  \
	({                                                                                         \
		long long ___a = (long long)(a), ___b = (long long)(b);                            \
		bool ___ok = ___a op ___b;                                                         \
		if (!___ok)                                                                        \
			ct_test_fail(__FILE__, __LINE__, "%s: %s %s %s: %lld vs %lld", what, #a,   \
				     #op, #b, ___a, ___b);                                         \
		___ok;                                                                             \
	})
#define ASSERT_EQ(a, b, what)  ASSERT_OP(a, ==, b, what)
#define ASSERT_NEQ(a, b, what) ASSERT_OP(a, !=, b, what)
#define ASSERT_LT(a, b, what)  ASSERT_OP(a, <, b, what)
#define ASSERT_LE(a, b, what)  ASSERT_OP(a, <=, b, what)
#define ASSERT_GT(a, b, what)  ASSERT_OP(a, >, b, what)
#define ASSERT_GE(a, b, what)  ASSERT_OP(a, >=, b, what)
#define ASSERT_OK(err, what)   ASSERT_OP(err, ==, 0, what)

#define ASSERT_STREQ(a, b, what)                                                                   \
	({                                                                                         \
		const char *___a = (a), *___b = (b);                                               \
		bool ___ok = ___a && ___b && strcmp(___a, ___b) == 0;                              \
		if (!___ok)                                                                        \
			ct_test_fail(__FILE__, __LINE__, "%s: \"%s\" != \"%s\"", what,             \
				     ___a ? ___a : "(null)", ___b ? ___b : "(null)");              \
		___ok;                                                                             \
	})
#define ASSERT_NOT_NULL(p, what) ASSERT_TRUE((p) != NULL, what)

#endif
