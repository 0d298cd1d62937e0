// SPDX-License-Identifier: MIT
/*
 * What a BPF program's reads of a traced process's memory cost, for `scripts/bench.py
 * reads`. An entry probe (read_cost.bpf.c) on rc_hit makes the reads a configuration asks;
 * a forked child calls rc_hit CALLS times; the kernel's bpf_stats (run_time_ns over
 * run_cnt) give the program's ns a run. Every configuration runs once a round, in turn:
 *
 *   read_cost CALLS ROUNDS    prints "round R NAME NS" for each round and configuration
 *
 * NAME "none" makes no read (the program's own cost); "absent" reads a page the child mapped
 * and never touched, which the kernel will not fault in. "cold-" configurations touch 16 MiB
 * between calls, as a traced program's own work would between two collectives, so that
 * the lines, the TLB and the page tables' caches the reads need are cold. Needs root
 * (bpf_stats is switched on for the run and restored).
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "read_cost.skel.h"

#define AREA	(64ul << 20)
#define POLLUTE (16ul << 20)

static const struct rc_config {
	const char *name;
	unsigned reads, len, stride, on_stack, cold;
} configs[] = {
    {"none", 0, 8, 0, 0, 0},
    {"1x8B", 1, 8, 0, 0, 0},
    {"2x8B-same-line", 2, 8, 0, 0, 0},
    {"2x8B-two-pages", 2, 8, 4096, 0, 0},
    {"2x8B-two-regions", 2, 8, 0, 2, 0},
    {"8x8B-eight-pages", 8, 8, 4096, 0, 0},
    {"1x2KiB", 1, 2048, 0, 0, 0},
    {"4x2KiB", 4, 2048, 2048, 0, 0},
    {"2x8B-second-absent", 2, 8, AREA, 0, 0},
    {"cold-none", 0, 8, 0, 0, 1},
    {"cold-1x8B", 1, 8, 0, 0, 1},
    {"cold-2x8B-two-regions", 2, 8, 0, 2, 1},
    {"cold-8x8B-eight-pages", 8, 8, 4096, 0, 1},
    {"cold-4x2KiB", 4, 2048, 2048, 0, 1},
};

__attribute__((noinline)) long rc_hit(const char *area)
{
	asm volatile("" ::: "memory");
	return area[0];
}

/* The child: CALLS calls, each with POLLUTE bytes touched before it where cold. The page
 * past AREA is mapped and never touched. */
static int target(long calls, int cold)
{
	char *area =
	    mmap(NULL, AREA + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *junk = cold ? malloc(POLLUTE) : NULL;
	volatile long sum = 0;

	if (area == MAP_FAILED || (cold && !junk))
		return 1;
	memset(area, 1, AREA);
	if (junk)
		memset(junk, 1, POLLUTE);
	for (long i = 0; i < calls; i++) {
		for (size_t j = 0; junk && j < POLLUTE; j += 64)
			sum += junk[j];
		sum += rc_hit(area);
	}
	return 0;
}

static int prog_stats(int fd, unsigned long long *ns, unsigned long long *runs)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return -1;
	*ns = info.run_time_ns;
	*runs = info.run_cnt;
	return 0;
}

static int set_stats(const char *v, char *old, size_t n)
{
	FILE *f = fopen("/proc/sys/kernel/bpf_stats_enabled", "r+");

	if (!f)
		return -1;
	if (old && !fgets(old, (int)n, f))
		old[0] = '\0';
	rewind(f);
	fputs(v, f);
	return fclose(f);
}

int main(int argc, char **argv)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = "rc_hit");
	long calls = argc > 1 ? atol(argv[1]) : 20000;
	int rounds = argc > 2 ? atoi(argv[2]) : 3, fd, rc = 1;
	struct read_cost *skel;
	char was[8] = "0", self[4096];
	ssize_t n;

	if (calls <= 0 || rounds <= 0) {
		fprintf(stderr, "usage: read_cost CALLS ROUNDS\n");
		return 2;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = '\0';
	skel = read_cost__open_and_load();
	if (!skel) {
		fprintf(stderr, "read_cost: cannot load the BPF program (root needed)\n");
		return 1;
	}
	skel->links.rc_probe =
	    bpf_program__attach_uprobe_opts(skel->progs.rc_probe, -1, self, 0, &uo);
	if (!skel->links.rc_probe || set_stats("1", was, sizeof(was))) {
		fprintf(stderr, "read_cost: cannot attach the probe or enable bpf_stats\n");
		goto out;
	}
	fd = bpf_program__fd(skel->progs.rc_probe);
	for (int r = 0; r < rounds; r++) {
		for (size_t k = 0; k < sizeof(configs) / sizeof(configs[0]); k++) {
			const struct rc_config *c = &configs[k];
			unsigned long long ns0, runs0, ns1, runs1;
			long n = c->cold ? calls / 4 : calls;
			int status;
			pid_t pid;

			skel->bss->reads = c->reads;
			skel->bss->len = c->len;
			skel->bss->stride = c->stride;
			skel->bss->on_stack = c->on_stack;
			if (prog_stats(fd, &ns0, &runs0))
				goto out;
			pid = fork();
			if (pid == 0)
				_exit(target(n, c->cold));
			if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
			    WEXITSTATUS(status) || prog_stats(fd, &ns1, &runs1)) {
				fprintf(stderr, "read_cost: the target failed (%s)\n", c->name);
				goto out;
			}
			if (runs1 - runs0 != (unsigned long long)n) {
				fprintf(stderr, "read_cost: %llu probe runs for %ld calls (%s)\n",
					runs1 - runs0, n, c->name);
				goto out;
			}
			printf("round %d %s %.1f\n", r, c->name, (double)(ns1 - ns0) / (double)n);
			fflush(stdout);
		}
	}
	rc = 0;
out:
	set_stats(was, NULL, 0);
	read_cost__destroy(skel);
	return rc;
}
