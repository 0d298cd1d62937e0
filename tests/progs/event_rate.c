// SPDX-License-Identifier: MIT
/*
 * A synthetic event source for the tracer's event-path benchmark and its drop-accounting
 * test: it issues traced calls as fast as it can, or at a given rate, and says exactly
 * how many it issued. The calls go to the HCCL STAND-IN (build/progs/libhccl.so, see
 * tests/progs/libhccl.c), whose HcclBarrier does nothing but count: what is measured is
 * the tracer's cost per probe hit and its event path, not any communication. That is
 * the only thing this stand-in is used for here.
 *
 *   event_rate LIBPATH --calls N [--rate R] [--threads T] [--wait-file PATH]
 *
 * --calls:     HcclBarrier calls in all (split evenly between the threads)
 * --rate:      calls per second in all (0, the default: flat out). Paced against the
 *              clock: a thread that falls behind catches up at full speed.
 * --threads:   threads issuing calls, each with its own communicator
 * --wait-file: dlopen the library, write our pid to PATH.pid, then wait until PATH
 *              exists before the first traced call (a tracer attaches in between)
 *
 * Prints, on stdout:  issued_calls N   (HcclBarrier calls made)
 *                     traced_calls M   (every call of a traced function: N plus one
 *                                       HcclCommInitRootInfo and one HcclCommDestroy
 *                                       per thread)
 *                     elapsed_ns E     rate_per_s R
 */
#define HCCL_API_ONLY
#include "libhccl.c"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64

static HcclResult (*get_root_info)(HcclRootInfo *);
static HcclResult (*comm_init)(uint32_t, const HcclRootInfo *, uint32_t, HcclComm *);
static HcclResult (*barrier)(HcclComm, aclrtStream);
static HcclResult (*comm_destroy)(HcclComm);

struct worker {
	pthread_t thread;
	unsigned long long calls, issued, traced;
	double rate; /* calls per second, 0: flat out */
	uint64_t t0;
	int failed;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void sleep_ns(long ns)
{
	struct timespec ts = {ns / 1000000000L, ns % 1000000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	aclrtStream stream = (aclrtStream)0x5354524d;
	HcclRootInfo root;
	HcclComm comm = NULL;

	if (get_root_info(&root) != HCCL_SUCCESS || comm_init(1, &root, 0, &comm) != HCCL_SUCCESS) {
		w->failed = 1;
		return NULL;
	}
	w->traced++;
	while (w->issued < w->calls) {
		if (w->rate > 0) {
			/* Calls due by now; ahead of time: sleep rather than spin. */
			double due = (double)(now_ns() - w->t0) * 1e-9 * w->rate;

			if ((double)w->issued >= due) {
				double ahead_ns = ((double)w->issued + 1 - due) / w->rate * 1e9;

				sleep_ns(ahead_ns > 1e6 ? 1000000L : (long)ahead_ns + 1);
				continue;
			}
		}
		if (barrier(comm, stream) != HCCL_SUCCESS) {
			w->failed = 1;
			break;
		}
		w->issued++;
		w->traced++;
	}
	if (comm_destroy(comm) != HCCL_SUCCESS)
		w->failed = 1;
	else
		w->traced++;
	return NULL;
}

static double parse_num(const char *s, const char *opt)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || v < 0) {
		fprintf(stderr, "event_rate: invalid %s '%s'\n", opt, s);
		exit(2);
	}
	return v;
}

static void *sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);

	if (!p) {
		fprintf(stderr, "event_rate: %s: %s\n", name, dlerror());
		exit(2);
	}
	return p;
}

int main(int argc, char **argv)
{
	static struct worker w[MAX_THREADS];
	unsigned long long calls = 0, issued = 0, traced = 0;
	const char *wait_file = NULL;
	double rate = 0;
	long threads = 1;
	uint64_t t0, t1;
	struct timespec cpu;
	int failed = 0;
	void *lib;

	if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: event_rate LIBPATH --calls N [--rate R] [--threads T] "
				"[--wait-file PATH]\n");
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];

		if (i + 1 >= argc) {
			fprintf(stderr, "event_rate: %s needs a value\n", a);
			return 2;
		}
		if (!strcmp(a, "--calls"))
			calls = (unsigned long long)parse_num(argv[++i], a);
		else if (!strcmp(a, "--rate"))
			rate = parse_num(argv[++i], a);
		else if (!strcmp(a, "--threads"))
			threads = (long)parse_num(argv[++i], a);
		else if (!strcmp(a, "--wait-file"))
			wait_file = argv[++i];
		else {
			fprintf(stderr, "event_rate: unknown option %s\n", a);
			return 2;
		}
	}
	if (threads < 1 || threads > MAX_THREADS) {
		fprintf(stderr, "event_rate: --threads from 1 to %d\n", MAX_THREADS);
		return 2;
	}

	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "event_rate: dlopen %s: %s\n", argv[1], dlerror());
		return 2;
	}
	*(void **)&get_root_info = sym(lib, "HcclGetRootInfo");
	*(void **)&comm_init = sym(lib, "HcclCommInitRootInfo");
	*(void **)&barrier = sym(lib, "HcclBarrier");
	*(void **)&comm_destroy = sym(lib, "HcclCommDestroy");

	if (wait_file) {
		char file[PATH_MAX], tmp[PATH_MAX + 8];
		FILE *f;

		snprintf(file, sizeof(file), "%s.pid", wait_file);
		snprintf(tmp, sizeof(tmp), "%s.tmp", file);
		f = fopen(tmp, "w");
		if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 ||
		    rename(tmp, file) != 0) {
			fprintf(stderr, "event_rate: cannot write %s: %s\n", file, strerror(errno));
			return 2;
		}
		while (access(wait_file, F_OK) != 0)
			sleep_ns(10000000L);
	}

	t0 = now_ns();
	for (long i = 0; i < threads; i++) {
		w[i].calls = calls / threads + ((unsigned long long)i < calls % threads);
		w[i].rate = rate / threads;
		w[i].t0 = t0;
		if (pthread_create(&w[i].thread, NULL, work, &w[i])) {
			fprintf(stderr, "event_rate: pthread_create failed\n");
			return 2;
		}
	}
	for (long i = 0; i < threads; i++) {
		pthread_join(w[i].thread, NULL);
		issued += w[i].issued;
		traced += w[i].traced;
		failed |= w[i].failed;
	}
	t1 = now_ns();
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu); /* every thread's, from the start */
	printf("issued_calls %llu\ntraced_calls %llu\nelapsed_ns %llu\nrate_per_s %.0f\n"
	       "cpu_ns %llu\n",
	       issued, traced, (unsigned long long)(t1 - t0),
	       (double)issued * 1e9 / (double)(t1 - t0),
	       (unsigned long long)cpu.tv_sec * 1000000000ULL + (unsigned long long)cpu.tv_nsec);
	if (failed) {
		fprintf(stderr, "event_rate: an HCCL stand-in call failed\n");
		return 3;
	}
	return 0;
}
