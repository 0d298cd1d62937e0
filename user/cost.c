// SPDX-License-Identifier: MIT
/* What tracing cost the traced processes (--cost): cost.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "commtrace.skel.h"
#include "cost.h"
#include "session.h"
#include "target/proc.h"
#include "util/clock.h"
#include "util/log.h"

/*
 * The sites one hit is measured at: three alike, one left bare, one with an entry probe, one
 * with an entry and a return probe. On x86-64 the probes of the targets sit past a leading
 * endbr64 (targets.c), mostly on a push, which the kernel emulates: so do these.
 */
void ct_cost_bare(void);
void ct_cost_entry(void);
void ct_cost_pair(void);
#if defined(__x86_64__)
#define COST_SITE(name)                                                                            \
	".globl " name "\n.type " name ", @function\n" name ":\n\tendbr64\n\tpush %rbp\n"          \
	"\tpop %rbp\n\tret\n.size " name ", .-" name "\n"
__asm__(".pushsection .text\n" COST_SITE("ct_cost_bare") COST_SITE("ct_cost_entry")
	    COST_SITE("ct_cost_pair") ".popsection\n");
#define SITE_SKIP 4
#else
__attribute__((noipa)) void ct_cost_bare(void)
{
	__asm__ volatile("" ::: "memory");
}
__attribute__((noipa)) void ct_cost_entry(void)
{
	__asm__ volatile("nop" ::: "memory");
}
__attribute__((noipa)) void ct_cost_pair(void)
{
	__asm__ volatile("nop\n\tnop" ::: "memory");
}
#define SITE_SKIP 0
#endif

#define HIT_CALLS  400 /* per batch: 2 ms at 5 µs a hit */
#define HIT_ROUNDS 15  /* a batch of each site per round; the median round */
#define HIT_TRIES  3   /* measured again while a price comes out 0 or less */

static bool stats_sysctl_on(void)
{
	FILE *f = fopen("/proc/sys/kernel/bpf_stats_enabled", "r");
	int c = f ? fgetc(f) : EOF;

	if (f)
		fclose(f);
	return c == '1';
}

static bool uprobe_prog(struct bpf_program *p)
{
	const char *sec = bpf_program__section_name(p);

	return !strncmp(sec, "uprobe", 6) || !strncmp(sec, "uretprobe", 9);
}

/* Every program's runs and run time so far, ct_calib and ct_prefault (the tracer's) left out. */
static void read_progs(struct ct_session *s, struct ct_cost *c)
{
	struct bpf_program *prog;

	c->n_prog = 0;
	bpf_object__for_each_program(prog, s->skel->obj)
	{
		struct bpf_prog_info info;
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(prog);

		if (prog == s->skel->progs.ct_calib || prog == s->skel->progs.ct_prefault ||
		    fd < 0 || c->n_prog == CT_COST_PROGS)
			continue;
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &len))
			continue;
		c->prog[c->n_prog].name = bpf_program__name(prog);
		c->prog[c->n_prog].runs = info.run_cnt;
		c->prog[c->n_prog].ns = info.run_time_ns;
		c->prog[c->n_prog].uprobe = uprobe_prog(prog);
		c->prog[c->n_prog].ret = !strncmp(bpf_program__section_name(prog), "uretprobe", 9);
		c->n_prog++;
	}
}

/* The CPU time of the processes named by -p: from /proc while they run, else as the BPF
 * exit tracepoint kept it (at_end); *all false when one is not known. */
static uint64_t targets_cpu(const struct ct_session *s, bool at_end, bool *all)
{
	int fd = bpf_map__fd(s->skel->maps.exit_cpu);
	uint64_t sum = 0, ns;

	*all = true;
	for (int i = 0; i < s->opts->n_pids; i++) {
		__u32 key = (__u32)s->opts->pids[i];

		if (!ct_proc_cpu_ns(s->opts->pids[i], &ns) && ct_proc_alive(s->opts->pids[i]))
			sum += ns;
		else if (at_end && !bpf_map_lookup_elem(fd, &key, &ns))
			sum += ns;
		else
			*all = false;
	}
	return sum;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* This thread's CPU ns per call of a site, over one batch. */
static double batch_ns(void (*site)(void))
{
	uint64_t t0 = ct_now_ns(CLOCK_THREAD_CPUTIME_ID);

	for (int i = 0; i < HIT_CALLS; i++)
		site();
	return (double)(ct_now_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / HIT_CALLS;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(v[0]), cmp_double);
	return v[n / 2];
}

/*
 * One entry hit's price and one return hit's: the three sites measured in turn, round after
 * round, in an order that rotates, each price the median of its rounds' differences. A return
 * hit (a system call) costs about a fourth of an entry hit (a breakpoint): measured apart,
 * one after the other, a drift of the machine between the two swallowed it (0 ns).
 */
static void measure_rounds(double *entry, double *ret)
{
	void (*site[3])(void) = {ct_cost_bare, ct_cost_entry, ct_cost_pair};
	double d_entry[HIT_ROUNDS], d_ret[HIT_ROUNDS];

	for (int r = 0; r < HIT_ROUNDS; r++) {
		double ns[3];

		for (int k = 0; k < 3; k++)
			ns[(r + k) % 3] = batch_ns(site[(r + k) % 3]);
		d_entry[r] = ns[1] - ns[0];
		d_ret[r] = ns[2] - ns[1];
	}
	*entry = median(d_entry, HIT_ROUNDS);
	*ret = median(d_ret, HIT_ROUNDS);
}

struct site_find {
	uint64_t addr, off;
};

static int site_map(const struct ct_map *m, void *ctx)
{
	struct site_find *f = ctx;

	if (f->addr < m->start || f->addr >= m->end)
		return 0;
	f->off = f->addr - m->start + m->offset;
	return 1;
}

/* The file offset of a site in the tracer's own executable, from its mapping. */
static int site_offset(void (*site)(void), uint64_t *off)
{
	struct site_find f = {.addr = (uint64_t)(uintptr_t)site + SITE_SKIP};
	int rc = ct_maps_foreach(getpid(), site_map, &f);

	if (rc < 0)
		return rc;
	if (rc == 0)
		return -ENOENT;
	*off = f.off;
	return 0;
}

/* The do-nothing program as an entry probe on ct_cost_entry, as both probes on ct_cost_pair. */
static int attach_sites(struct ct_session *s, struct ct_links *links)
{
	uint64_t entry_off = 0, pair_off = 0;
	int err = site_offset(ct_cost_entry, &entry_off);

	if (!err)
		err = site_offset(ct_cost_pair, &pair_off);
	if (!err)
		err = ct_bpf_attach_calib(s, "/proc/self/exe", entry_off, false, links);
	if (!err)
		err = ct_bpf_attach_calib(s, "/proc/self/exe", pair_off, true, links);
	return err;
}

/* What one entry hit and one return hit cost here (said on stderr when they could not be
 * measured: those hits are then not in the targets' added CPU). */
static void measure_hits(struct ct_session *s, struct ct_cost *c)
{
	struct ct_links links = {0};
	double entry = 0, ret = 0;
	int err = attach_sites(s, &links);

	if (err) {
		ct_links_destroy(&links, 0);
		fprintf(stderr,
			"commtrace-bpf: --cost: one probe hit could not be measured (%s): the "
			"cost below is the BPF time only\n",
			strerror(-err));
		return;
	}
	ct_cost_entry(); /* the first hits map the kernel's side */
	ct_cost_pair();
	for (int t = 0; t < HIT_TRIES && (entry <= 0 || ret <= 0); t++)
		measure_rounds(&entry, &ret);
	ct_links_destroy(&links, 0);
	c->hit_ns = entry > 0 ? entry : 0;
	c->ret_ns = ret > 0 ? ret : 0;
}

static uint64_t rusage_ns(const struct rusage *ru)
{
	return (uint64_t)ru->ru_utime.tv_sec * 1000000000ULL +
	       (uint64_t)ru->ru_utime.tv_usec * 1000ULL +
	       (uint64_t)ru->ru_stime.tv_sec * 1000000000ULL +
	       (uint64_t)ru->ru_stime.tv_usec * 1000ULL;
}

void ct_cost_begin(struct ct_session *s)
{
	struct ct_cost *c = &s->cost;
	bool all;

	c->stats_fd = -1;
	c->targets_cpu_ns = -1;
	if (!s->opts->cost || !s->skel)
		return;
	c->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (c->stats_fd < 0)
		ct_info("commtrace: --cost: BPF_ENABLE_STATS refused (%s); counting only if "
			"kernel.bpf_stats_enabled is 1\n",
			strerror(errno));
	c->on_at_start = c->stats_fd >= 0 || stats_sysctl_on();
	if (c->on_at_start)
		measure_hits(s, c);
	c->targets_start_ns = targets_cpu(s, false, &all);
	read_progs(s, c); /* what ran before, subtracted from now on */
	memcpy(c->base, c->prog, sizeof(c->base));
}

void ct_cost_sample(struct ct_session *s)
{
	struct ct_cost *c = &s->cost;
	struct rusage ru;

	if (!s->opts->cost || !s->skel)
		return;
	if (!getrusage(RUSAGE_SELF, &ru))
		c->tracer_cpu_ns = rusage_ns(&ru);
	read_progs(s, c); /* the same programs in the same order as at the start */
	c->hits = c->ret_hits = c->bpf_ns = 0;
	for (int i = 0; i < c->n_prog; i++) {
		if (c->base[i].name == c->prog[i].name) {
			c->prog[i].runs -= c->base[i].runs;
			c->prog[i].ns -= c->base[i].ns;
		}
		if (c->prog[i].uprobe) {
			c->hits += c->prog[i].runs;
			c->bpf_ns += c->prog[i].ns;
		}
		if (c->prog[i].ret)
			c->ret_hits += c->prog[i].runs;
	}
}

void ct_cost_end(struct ct_session *s)
{
	struct ct_cost *c = &s->cost;
	struct rusage ru;
	bool all;

	if (!s->opts->cost || !s->skel)
		return;
	ct_cost_sample(s);
	if (s->opts->cmd) { /* the command and what it started and waited for */
		if (s->child_reaped && !getrusage(RUSAGE_CHILDREN, &ru))
			c->targets_cpu_ns = (int64_t)rusage_ns(&ru);
	} else {
		uint64_t now = targets_cpu(s, true, &all);

		if (all && now >= c->targets_start_ns)
			c->targets_cpu_ns = (int64_t)(now - c->targets_start_ns);
	}
	if (!c->on_at_start || !(c->stats_fd >= 0 || stats_sysctl_on()))
		c->why = "BPF statistics were off (BPF_ENABLE_STATS refused and "
			 "kernel.bpf_stats_enabled not 1 for the whole trace)";
	if (c->stats_fd >= 0)
		close(c->stats_fd);
	c->stats_fd = -1;
}

double ct_cost_targets_added_ns(const struct ct_cost *c)
{
	if (c->why)
		return 0;
	return (double)(c->hits - c->ret_hits) * c->hit_ns + (double)c->ret_hits * c->ret_ns +
	       (double)c->bpf_ns;
}
