// SPDX-License-Identifier: MIT
/*
 * /proc readers: pure parsers on fixed strings, then the real files of child
 * processes this test starts (a known environment through execve, a chosen
 * comm through prctl, a zombie held with waitid(WNOWAIT)). No root needed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "target/proc.h"

TEST(proc_maps_parse_line)
{
	static struct ct_map m;

	ct_subtest("library");
	if (ASSERT_OK(ct_maps_parse_line("7f3a1c000000-7f3a1c021000 r-xp 00028000 fd:01 1835023    "
					 "               /usr/lib/x86_64-linux-gnu/libc.so.6\n",
					 &m),
		      "parse")) {
		ASSERT_EQ(m.start, 0x7f3a1c000000ULL, "start");
		ASSERT_EQ(m.end, 0x7f3a1c021000ULL, "end");
		ASSERT_EQ(m.offset, 0x28000, "offset");
		ASSERT_EQ(m.dev_major, 0xfd, "major");
		ASSERT_EQ(m.dev_minor, 1, "minor");
		ASSERT_EQ(m.inode, 1835023, "inode");
		ASSERT_STREQ(m.perms, "r-xp", "perms");
		ASSERT_FALSE(m.deleted, "deleted");
		ASSERT_STREQ(m.path, "/usr/lib/x86_64-linux-gnu/libc.so.6", "path");
	}

	ct_subtest("spaces and deleted");
	if (ASSERT_OK(ct_maps_parse_line("00400000-00401000 r--s 00000000 00:2a 42 /tmp/my dir/lib "
					 "x.so (deleted)\n",
					 &m),
		      "parse")) {
		ASSERT_TRUE(m.deleted, "deleted");
		ASSERT_STREQ(m.path, "/tmp/my dir/lib x.so", "path");
		ASSERT_STREQ(m.perms, "r--s", "perms");
		ASSERT_EQ(m.dev_minor, 0x2a, "hex minor");
	}

	ct_subtest("anonymous");
	if (ASSERT_OK(ct_maps_parse_line("7ffd000-7ffe000 rw-p 00000000 00:00 0 \n", &m),
		      "parse")) {
		ASSERT_STREQ(m.path, "", "no path");
		ASSERT_EQ(m.inode, 0, "inode");
		ASSERT_EQ(m.end - m.start, 0x1000, "size");
	}
	ASSERT_OK(ct_maps_parse_line("7ffd000-7ffe000 rw-p 00000000 00:00 0", &m), "no newline");
	ASSERT_STREQ(m.path, "", "no path");

	ct_subtest("pseudo");
	ASSERT_OK(ct_maps_parse_line("7ffc1000-7ffc3000 r-xp 00000000 00:00 0    [vdso]\n", &m),
		  "vdso");
	ASSERT_STREQ(m.path, "[vdso]", "vdso");
	ASSERT_OK(ct_maps_parse_line("55d0c000-55d2d000 rw-p 00000000 00:00 0  [heap]", &m),
		  "heap");
	ASSERT_STREQ(m.path, "[heap]", "heap");
	/* Only a real path gets " (deleted)" stripped; an anonymous name keeps its text. */
	ASSERT_OK(ct_maps_parse_line("1000-2000 rw-s 00000000 00:01 7 /memfd:x (deleted)", &m),
		  "memfd");
	ASSERT_STREQ(m.path, "/memfd:x", "memfd");
	ASSERT_TRUE(m.deleted, "memfd deleted");

	ct_subtest("malformed");
	{
		static const char *const bad[] = {
		    "",
		    "1000 r-xp 00000000 00:00 0",
		    "1000-2000 r-xp",
		    "1000-2000 r-xp 0 00:00",
		    "1000-2000 rwxq 00000000 00:00 0",
		    "1000-2000 r-x 00000000 00:00 0",
		    "2000-1000 r-xp 00000000 00:00 0",
		    "1000-2000 r-xp 00000000 0000 0",
		    "1000-2000 r-xp 00000000 00:00 x",
		    "1000-2000 r-xp 00000000 00:00 12x /lib",
		    "g000-2000 r-xp 00000000 00:00 0",
		    "10000000000000000-2000 r-xp 00000000 00:00 0",
		    "1000-2000 r-xp 00000000 00:00 0 /a\n2000-3000 r-xp 0 0:0 0",
		};
		size_t i;

		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			ASSERT_EQ(ct_maps_parse_line(bad[i], &m), -EINVAL, bad[i]);
	}
	{
		static char line[PATH_MAX + 128];
		int n = snprintf(line, sizeof(line), "1000-2000 r-xp 00000000 00:00 1 /");

		memset(line + n, 'a', PATH_MAX);
		line[n + PATH_MAX] = '\0';
		ASSERT_EQ(ct_maps_parse_line(line, &m), -ENAMETOOLONG, "path too long");
	}
}

/* A child parked in pause(): its maps and environment do not change under us. */
static pid_t park_child(char *const envp[], const char *comm)
{
	pid_t pid = fork();

	if (pid == 0) {
		if (comm)
			prctl(PR_SET_NAME, comm);
		if (envp) {
			char *const argv[] = {"sleep", "30", NULL};

			execve("/bin/sleep", argv, envp);
			_exit(127);
		}
		pause();
		_exit(0);
	}
	return pid;
}

static void reap(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

/* Wait (bounded) until the child has exec'ed, so /proc shows the new image. */
/* Whether /proc/PID/environ has anything in it yet. */
static bool has_environ(pid_t pid)
{
	char path[64], c;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/environ", pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	n = read(fd, &c, 1);
	close(fd);
	return n == 1;
}

/*
 * Until the child runs comm with its new environment: the kernel names the task at exec
 * before it places the environment on the new stack (load_elf_binary's create_elf_tables),
 * and environ reads as empty in between.
 */
static bool wait_comm(pid_t pid, const char *comm)
{
	struct timespec ts = {0, 5 * 1000 * 1000};
	char buf[32];
	int i;

	for (i = 0; i < 400; i++) {
		if (ct_proc_comm(pid, pid, buf, sizeof(buf)) == 0 && strcmp(buf, comm) == 0 &&
		    has_environ(pid))
			return true;
		nanosleep(&ts, NULL);
	}
	return false;
}

struct maps_count {
	int n, stop_at;
	int vdso, exe;
	char exe_path[PATH_MAX];
};

static int maps_cb(const struct ct_map *m, void *ctx)
{
	struct maps_count *mc = ctx;

	mc->n++;
	if (strcmp(m->path, "[vdso]") == 0)
		mc->vdso++;
	if (strcmp(m->path, mc->exe_path) == 0)
		mc->exe++;
	return mc->n == mc->stop_at ? -1234 : 0;
}

TEST(proc_maps_foreach)
{
	char fn[64], line[PATH_MAX + 128];
	struct maps_count mc = {0};
	pid_t pid = park_child(NULL, NULL);
	int lines = 0, exe_lines = 0, vdso_lines = 0;
	ssize_t len;
	FILE *f;

	if (!ASSERT_GT(pid, 0, "fork"))
		return;
	len = readlink("/proc/self/exe", mc.exe_path, sizeof(mc.exe_path) - 1);
	if (!ASSERT_GT(len, 0, "readlink"))
		goto out;
	mc.exe_path[len] = '\0';
	/* Independent count: lines, and lines ending in our executable's path. */
	snprintf(fn, sizeof(fn), "/proc/%d/maps", (int)pid);
	f = fopen(fn, "r");
	if (!ASSERT_NOT_NULL(f, fn))
		goto out;
	while (fgets(line, sizeof(line), f)) {
		size_t l = strlen(line), pl = strlen(mc.exe_path);

		lines++;
		if (l > 7 && strcmp(line + l - 7, "[vdso]\n") == 0)
			vdso_lines++;
		if (l > pl + 1 && strncmp(line + l - pl - 1, mc.exe_path, pl) == 0)
			exe_lines++;
	}
	fclose(f);
	ASSERT_OK(ct_maps_foreach(pid, maps_cb, &mc), "walk");
	ASSERT_EQ(mc.n, lines, "one callback per line");
	ASSERT_EQ(mc.exe, exe_lines, "executable mappings");
	ASSERT_GT(mc.exe, 0, "executable mapped");
	/* One [vdso], except under valgrind, which hides it. */
	ASSERT_EQ(mc.vdso, vdso_lines, "[vdso]");
	ASSERT_LE(mc.vdso, 1, "[vdso]");
	mc.n = 0;
	mc.stop_at = 2;
	ASSERT_EQ(ct_maps_foreach(pid, maps_cb, &mc), -1234, "stop value");
	ASSERT_EQ(mc.n, 2, "stopped");
out:
	reap(pid);
	ASSERT_EQ(ct_maps_foreach(pid, maps_cb, &mc), -ESRCH, "reaped child");
	ASSERT_EQ(ct_maps_foreach(0, maps_cb, &mc), -EINVAL, "pid 0");
}

TEST(proc_target_path)
{
	char out[64];

	ASSERT_OK(ct_proc_target_path(1234, "/usr/lib/libnccl.so.2", out, sizeof(out)), "ok");
	ASSERT_STREQ(out, "/proc/1234/root/usr/lib/libnccl.so.2", "path");
	ASSERT_EQ(ct_proc_target_path(1234, "usr/lib/x.so", out, sizeof(out)), -EINVAL, "relative");
	ASSERT_EQ(ct_proc_target_path(0, "/x", out, sizeof(out)), -EINVAL, "pid 0");
	ASSERT_EQ(ct_proc_target_path(1234, "/x", out, 0), -EINVAL, "no room");
	/* "/proc/1234/root" is 15 bytes; with "/x" 17 + NUL. */
	ASSERT_EQ(ct_proc_target_path(1234, "/x", out, 17), -ENAMETOOLONG, "one short");
	ASSERT_OK(ct_proc_target_path(1234, "/x", out, 18), "exact fit");
	ASSERT_STREQ(out, "/proc/1234/root/x", "fit");
}

TEST(proc_environ_lookup)
{
	static const char env[] = "A=1\0RANKX=9\0RANK=3\0RANK=4\0EMPTY=\0NOEQ\0RAN\0SP=a b=c\0"
				  "LAST=z";
	size_t len = sizeof(env) - 1; /* no NUL after the last entry */
	char out[8];

	ASSERT_OK(ct_environ_lookup(env, len, "RANK", out, sizeof(out)), "RANK");
	ASSERT_STREQ(out, "3", "first definition wins");
	ASSERT_OK(ct_environ_lookup(env, len, "A", out, sizeof(out)), "A");
	ASSERT_STREQ(out, "1", "A");
	ASSERT_OK(ct_environ_lookup(env, len, "EMPTY", out, sizeof(out)), "EMPTY");
	ASSERT_STREQ(out, "", "empty value");
	ASSERT_OK(ct_environ_lookup(env, len, "SP", out, sizeof(out)), "SP");
	ASSERT_STREQ(out, "a b=c", "spaces and '='");
	ASSERT_OK(ct_environ_lookup(env, len, "LAST", out, sizeof(out)), "LAST");
	ASSERT_STREQ(out, "z", "unterminated last entry");
	ASSERT_EQ(ct_environ_lookup(env, len, "NOEQ", out, sizeof(out)), -ENOENT, "no '='");
	ASSERT_EQ(ct_environ_lookup(env, len, "RAN", out, sizeof(out)), -ENOENT, "prefix");
	ASSERT_EQ(ct_environ_lookup(env, len, "ANK", out, sizeof(out)), -ENOENT, "suffix");
	ASSERT_EQ(ct_environ_lookup(env, len, "SP", out, 5), -ERANGE, "value too long");
	ASSERT_OK(ct_environ_lookup(env, len, "SP", out, 6), "exact fit");
	ASSERT_EQ(ct_environ_lookup(env, len, "A=", out, sizeof(out)), -EINVAL, "'=' in name");
	ASSERT_EQ(ct_environ_lookup(env, 0, "A", out, sizeof(out)), -ENOENT, "empty block");
}

/* var: the variable the rank must be said to come from, NULL when there is none */
static void rank_case(const char *what, char *const envp[], int rank, int world, const char *var)
{
	const char *got = "unset";
	pid_t pid;
	int w = -2;

	ct_subtest(what);
	pid = park_child(envp, NULL);
	if (!ASSERT_GT(pid, 0, "fork"))
		return;
	if (ASSERT_TRUE(wait_comm(pid, "sleep"), "exec")) {
		ASSERT_EQ(ct_proc_rank(pid, &w), rank, "rank");
		ASSERT_EQ(w, world, "world");
		w = -2;
		ASSERT_EQ(ct_proc_rank_env(pid, &w, &got), rank, "rank_env");
		ASSERT_EQ(w, world, "rank_env world");
		if (var)
			ASSERT_STREQ(got, var, "source variable");
		else
			ASSERT_TRUE(got == NULL, "no source variable");
	}
	reap(pid);
}

TEST(proc_getenv_and_rank)
{
	char *big = malloc(120000), out[64];
	pid_t pid;

	if (!big) {
		ASSERT_NOT_NULL(big, "malloc");
		return;
	}
	/* 120 KB ahead of the variable (one string may hold 128 KiB): many reads. */
	memcpy(big, "BIG=", 4);
	memset(big + 4, 'x', 120000 - 5);
	big[120000 - 1] = '\0';
	{
		char *envp[] = {big, "FOO=bar baz", "OMPI_COMM_WORLD_RANK=5",
				"OMPI_COMM_WORLD_SIZE=8", NULL};

		ct_subtest("getenv");
		pid = park_child(envp, NULL);
		if (ASSERT_GT(pid, 0, "fork") && ASSERT_TRUE(wait_comm(pid, "sleep"), "exec")) {
			ASSERT_OK(ct_proc_getenv(pid, "FOO", out, sizeof(out)), "FOO");
			ASSERT_STREQ(out, "bar baz", "FOO");
			ASSERT_EQ(ct_proc_getenv(pid, "BIG", out, sizeof(out)), -ERANGE, "BIG");
			ASSERT_EQ(ct_proc_getenv(pid, "NOPE", out, sizeof(out)), -ENOENT, "NOPE");
		}
		reap(pid);
		ASSERT_EQ(ct_proc_getenv(pid, "FOO", out, sizeof(out)), -ESRCH, "gone");
		rank_case("ompi", envp, 5, 8, "OMPI_COMM_WORLD_RANK");
	}
	free(big);
	{
		char *envp[] = {"OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=8", "RANK=2",
				"WORLD_SIZE=4", NULL};

		rank_case("RANK first", envp, 2, 4, "RANK");
	}
	{
		char *envp[] = {"RANK=x", "PMI_RANK=3", "PMI_SIZE=4", NULL};

		rank_case("bad RANK skipped", envp, 3, 4, "PMI_RANK");
	}
	{
		char *envp[] = {"SLURM_PROCID=1", "SLURM_NPROCS=3", NULL};

		rank_case("slurm nprocs", envp, 1, 3, "SLURM_PROCID");
	}
	{
		char *envp[] = {"PMIX_RANK=7", NULL};

		rank_case("no size", envp, 7, -1, "PMIX_RANK");
	}
	{
		char *envp[] = {"MV2_COMM_WORLD_RANK=4", "MV2_COMM_WORLD_SIZE=4", NULL};

		rank_case("size not above rank", envp, 4, -1, "MV2_COMM_WORLD_RANK");
	}
	{
		char *envp[] = {"RANK=-1", "LOCAL_RANK=0", "RANK_X=1", NULL};

		rank_case("none", envp, -1, -1, NULL);
	}
}

struct thread_arg {
	pid_t tid;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool ready, done;
};

static void *thread_fn(void *p)
{
	struct thread_arg *a = p;

	prctl(PR_SET_NAME, "ct worker)");
	pthread_mutex_lock(&a->mu);
	a->tid = (pid_t)syscall(SYS_gettid);
	a->ready = true;
	pthread_cond_broadcast(&a->cv);
	while (!a->done)
		pthread_cond_wait(&a->cv, &a->mu);
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

TEST(proc_comm)
{
	struct thread_arg a = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	char out[32];
	pthread_t t;
	pid_t pid;

	if (!ASSERT_OK(pthread_create(&t, NULL, thread_fn, &a), "thread"))
		return;
	pthread_mutex_lock(&a.mu);
	while (!a.ready)
		pthread_cond_wait(&a.cv, &a.mu);
	pthread_mutex_unlock(&a.mu);
	ASSERT_OK(ct_proc_comm(getpid(), a.tid, out, sizeof(out)), "thread comm");
	ASSERT_STREQ(out, "ct worker)", "thread name");
	ASSERT_OK(ct_proc_comm(getpid(), a.tid, out, 4), "truncated");
	ASSERT_STREQ(out, "ct ", "truncated to the buffer");
	pthread_mutex_lock(&a.mu);
	a.done = true;
	pthread_cond_broadcast(&a.cv);
	pthread_mutex_unlock(&a.mu);
	pthread_join(t, NULL);

	pid = park_child(NULL, "a) b (c) Z 1");
	if (!ASSERT_GT(pid, 0, "fork"))
		return;
	if (ASSERT_TRUE(wait_comm(pid, "a) b (c) Z 1"), "comm"))
		/* A comm that spells a zombie's stat must not fool the state parser. */
		ASSERT_TRUE(ct_proc_alive(pid), "parked child alive");
	reap(pid);
	ASSERT_EQ(ct_proc_comm(pid, pid, out, sizeof(out)), -ESRCH, "gone");
}

TEST(proc_alive_zombie)
{
	siginfo_t si;
	pid_t pid;

	ASSERT_TRUE(ct_proc_alive(getpid()), "self");
	ASSERT_FALSE(ct_proc_alive(0), "pid 0");
	ASSERT_FALSE(ct_proc_alive(-5), "negative");
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_NAME, "x) R (y");
		_exit(0);
	}
	if (!ASSERT_GT(pid, 0, "fork"))
		return;
	/* WNOWAIT: wait for the exit but leave the zombie in place. */
	memset(&si, 0, sizeof(si));
	if (ASSERT_OK(waitid(P_PID, pid, &si, WEXITED | WNOWAIT), "waitid"))
		ASSERT_FALSE(ct_proc_alive(pid), "zombie");
	waitpid(pid, NULL, 0);
	ASSERT_FALSE(ct_proc_alive(pid), "reaped");
}

TEST(proc_parse_stat_state)
{
	static const struct {
		const char *line;
		char state;
	} ok[] = {
	    {"123 (bash) S 1 123 123 0 -1", 'S'},
	    {"123 (a) b (c) Z 1) R 1 2 3", 'R'},
	    {"9 ((sd-pam)) S 1", 'S'},
	    {"9 () Z 1", 'Z'},
	    {"9 (x) t\n", 't'},
	    {"9 (x) X", 'X'},
	};
	static const char *const bad[] = {"",	      "9 x S 1",   "9 (x)S 1",	"9 (x) ",
					  "9 (x)  S", "9 )x( S 1", "9 (x) SS 1"};
	char st;
	size_t i;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		st = 0;
		if (ASSERT_OK(ct_proc_parse_stat_state(ok[i].line, &st), ok[i].line))
			ASSERT_EQ(st, ok[i].state, ok[i].line);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ASSERT_EQ(ct_proc_parse_stat_state(bad[i], &st), -EINVAL, bad[i]);
}

TEST(proc_parse_stat_cpu)
{
	/* fields 14 and 15: utime 7, stime 5; a comm with spaces and ')' */
	static const char line[] = "123 (a) b) S 1 123 123 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 3";
	static const char *const bad[] = {"123 (x) S 1 2 3 4 5 6 7 8 9 10", /* too short */
					  "123 (x) S 1 2 3 4 5 6 7 8 9 10 x 5",
					  "123 (x) S 1 2 3 4 5 6 7 8 9 10 7  5"};
	uint64_t t = 0;

	if (ASSERT_OK(ct_proc_parse_stat_cpu(line, &t), line))
		ASSERT_EQ(t, 12, "utime + stime");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ASSERT_EQ(ct_proc_parse_stat_cpu(bad[i], &t), -EINVAL, bad[i]);
	if (ASSERT_OK(ct_proc_cpu_ns(getpid(), &t), "own CPU"))
		ASSERT_TRUE(t < 3600ULL * 1000000000ULL, "a unit test's CPU time, in ns");
}

TEST(proc_parse_pid_list)
{
	static const char *const bad[] = {
	    "",	    "12x",  "-3", "0",	  "+1",		" 1",	      "1 ",
	    "1,,2", "1,",   ",1", "1, 2", "2147483648", "4294967296", "99999999999999999999999",
	    "1,1",  "0x10", ",",  "1;2",
	};
	pid_t out[4];
	size_t i;

	ASSERT_EQ(ct_parse_pid_list("1,22,333", out, 4), 3, "three");
	ASSERT_EQ(out[0], 1, "first");
	ASSERT_EQ(out[1], 22, "second");
	ASSERT_EQ(out[2], 333, "third");
	ASSERT_EQ(ct_parse_pid_list("2147483647", out, 4), 1, "INT_MAX");
	ASSERT_EQ(out[0], 2147483647, "INT_MAX value");
	ASSERT_EQ(ct_parse_pid_list("007", out, 4), 1, "leading zeros are decimal");
	ASSERT_EQ(out[0], 7, "not octal");
	ASSERT_EQ(ct_parse_pid_list("1,2,3,4", out, 4), 4, "exactly max");
	ASSERT_EQ(ct_parse_pid_list("1,2,3,4,5", out, 4), -E2BIG, "over max");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ASSERT_EQ(ct_parse_pid_list(bad[i], out, 4), -EINVAL, bad[i]);
	ASSERT_EQ(ct_parse_pid_list(NULL, out, 4), -EINVAL, "NULL");
	ASSERT_EQ(ct_parse_pid_list("1", out, 0), -EINVAL, "max 0");
}

/* The index comes from recorded data: any int is answered, never overflowed (fuzz_replay). */
TEST(proc_rank_var_index)
{
	ASSERT_STREQ(ct_proc_rank_var(0), "RANK", "first");
	ASSERT_STREQ(ct_proc_rank_var(1), "OMPI_COMM_WORLD_RANK", "second");
	ASSERT_STREQ(ct_proc_rank_var(5), "MV2_COMM_WORLD_RANK", "last");
	ASSERT_TRUE(ct_proc_rank_var(6) == NULL, "past the end");
	ASSERT_TRUE(ct_proc_rank_var(-1) == NULL, "negative");
	ASSERT_TRUE(ct_proc_rank_var(INT_MAX) == NULL, "INT_MAX");
	ASSERT_TRUE(ct_proc_rank_var(1717986916) == NULL, "the fuzzer's value");
}
