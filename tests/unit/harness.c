// SPDX-License-Identifier: MIT
/* Runner for the unit tests: ./unit-tests [-v] [-a NAME[,NAME]] [-d NAME[,NAME]] [-l] */
#include "harness.h"

#include <fnmatch.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/stat.h>

static struct ct_test *tests;
static int cur_failed, verbose;
static const char *cur_name, *cur_sub;
static char tmpdir[256];

void ct_test_register(struct ct_test *t)
{
	struct ct_test **p = &tests;

	/* Sorted by name, so the run order does not depend on link order. */
	while (*p && strcmp((*p)->name, t->name) < 0)
		p = &(*p)->next;
	t->next = *p;
	*p = t;
}

void ct_test_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	cur_failed++;
	fprintf(stderr, "  FAIL %s%s%s at %s:%d: ", cur_name, cur_sub ? "/" : "",
		cur_sub ? cur_sub : "", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

bool ct_subtest(const char *name)
{
	cur_sub = name;
	if (verbose)
		fprintf(stderr, "  subtest %s/%s\n", cur_name, name);
	return true;
}

const char *ct_test_tmpdir(void)
{
	if (!tmpdir[0]) {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/ct-unit-XXXXXX");
		if (!mkdtemp(tmpdir)) {
			perror("mkdtemp");
			exit(2);
		}
	}
	return tmpdir;
}

static bool match_list(const char *list, const char *name)
{
	char buf[1024], *tok, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", list);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (fnmatch(tok, name, 0) == 0)
			return true;
	return false;
}

int main(int argc, char **argv)
{
	const char *allow = NULL, *deny = NULL;
	int opt, passed = 0, failed = 0, skipped = 0;
	struct ct_test *t;

	while ((opt = getopt(argc, argv, "va:d:l")) != -1) {
		switch (opt) {
		case 'v':
			verbose = 1;
			break;
		case 'a':
			allow = optarg;
			break;
		case 'd':
			deny = optarg;
			break;
		case 'l':
			for (t = tests; t; t = t->next)
				printf("%s\n", t->name);
			return 0;
		default:
			fprintf(stderr, "usage: %s [-v] [-l] [-a GLOB,...] [-d GLOB,...]\n",
				argv[0]);
			return 2;
		}
	}
	for (t = tests; t; t = t->next) {
		if ((allow && !match_list(allow, t->name)) || (deny && match_list(deny, t->name))) {
			skipped++;
			continue;
		}
		cur_name = t->name;
		cur_sub = NULL;
		cur_failed = 0;
		t->fn();
		fprintf(stderr, "%s: %s\n", cur_failed ? "FAIL" : "OK  ", t->name);
		if (cur_failed)
			failed++;
		else
			passed++;
	}
	printf("unit: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
	return failed ? 1 : 0;
}
