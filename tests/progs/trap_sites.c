// SPDX-License-Identifier: MIT
/*
 * What one uprobe hit costs by the instruction it sits on, for `scripts/bench.py traps`.
 * Four alike x86-64 functions, each called CALLS times in a timed loop:
 *
 *   site_bare   push %rbp; pop %rbp; ret     left unprobed: the loop's own cost
 *   site_push   push %rbp; pop %rbp; ret     an entry probe on a push (the kernel
 *                                            emulates it; a breakpoint trap each hit)
 *   site_pair   push %rbp; pop %rbp; ret     an entry and a return probe
 *   site_nop5   nopl 0x0(%rax,%rax,1); ret   an entry probe on a 5-byte nop, which
 *                                            Linux 6.18+ rewrites into a call to its
 *                                            uprobe trampoline (a syscall, no trap)
 *
 * The probes of commtrace sit where the libraries' code puts them (past a leading
 * endbr64, mostly on a push or a conditional jump): site_push is their price, site_nop5
 * what the same hit costs where the kernel need not trap.
 *
 *   trap_sites CALLS [ROUNDS]   prints, per round, ns per call of each site:
 *                               "round R bare B push P pair Q nop5 N"
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__)
#define SITE(name, body)                                                                           \
	".p2align 4\n.globl " name "\n.type " name ", @function\n" name ":\n" body                 \
	"\tret\n.size " name ", .-" name "\n"
#define PUSH_POP "\tpush %rbp\n\tpop %rbp\n"
__asm__(".pushsection .text\n" SITE("site_bare", PUSH_POP) SITE("site_push", PUSH_POP)
	    SITE("site_pair", PUSH_POP)
		SITE("site_nop5", "\t.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n") ".popsection\n");
void site_bare(void);
void site_push(void);
void site_pair(void);
void site_nop5(void);

static double per_call(void (*site)(void), long calls)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < calls; i++)
		site();
	clock_gettime(CLOCK_MONOTONIC, &b);
	return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / (double)calls;
}

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 0;
	int rounds = argc > 2 ? atoi(argv[2]) : 1;

	if (calls <= 0 || rounds <= 0) {
		fprintf(stderr, "usage: trap_sites CALLS [ROUNDS]\n");
		return 2;
	}
	for (int r = 0; r < rounds; r++) {
		double bare = per_call(site_bare, calls), push = per_call(site_push, calls);
		double pair = per_call(site_pair, calls), nop5 = per_call(site_nop5, calls);

		printf("round %d bare %.1f push %.1f pair %.1f nop5 %.1f\n", r, bare, push, pair,
		       nop5);
		fflush(stdout);
	}
	return 0;
}
#else
int main(void)
{
	fprintf(stderr, "trap_sites: x86-64 only (the sites are written in its assembly)\n");
	return 2;
}
#endif
