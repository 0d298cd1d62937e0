// SPDX-License-Identifier: MIT
/* /proc readers for a target process: maps, environ, stat, comm; strict pid lists. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "target/proc.h"

#define CT_DELETED_SUFFIX " (deleted)"
#define CT_STAT_MAX	  4096 /* /proc/PID/stat is far shorter; comm is at most 64 bytes */

static int parse_hex(const char **pp, char stop, uint64_t *out)
{
	const char *p = *pp;
	uint64_t v = 0;
	int n = 0;

	for (;; p++, n++) {
		char c = *p;
		unsigned int d;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			break;
		if (v >> 60)
			return -EINVAL; /* would overflow 64 bits */
		v = v << 4 | d;
	}
	if (!n || *p != stop)
		return -EINVAL;
	*out = v;
	*pp = p + 1;
	return 0;
}

static int parse_dec(const char **pp, uint64_t *out)
{
	const char *p = *pp;
	uint64_t v = 0;
	int n = 0;

	for (; *p >= '0' && *p <= '9'; p++, n++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (!n)
		return -EINVAL;
	*out = v;
	*pp = p;
	return 0;
}

/*
 * "start-end perms offset major:minor inode   path": the kernel pads the inode
 * field with spaces, and the path runs to the end of the line (it may hold
 * spaces; a newline in a file name is shown as "\012").
 */
int ct_maps_parse_line(const char *line, struct ct_map *m)
{
	const char *p = line;
	uint64_t maj, min;
	size_t len;
	int i;

	if (!line || !m)
		return -EINVAL;
	memset(m, 0, offsetof(struct ct_map, path));
	m->path[0] = '\0';
	if (parse_hex(&p, '-', &m->start) || parse_hex(&p, ' ', &m->end) || m->end < m->start)
		return -EINVAL;
	for (i = 0; i < 4; i++) {
		if (!p[i] || !strchr("rwxps-", p[i]))
			return -EINVAL;
		m->perms[i] = p[i];
	}
	m->perms[4] = '\0';
	p += 4;
	if (*p++ != ' ')
		return -EINVAL;
	if (parse_hex(&p, ' ', &m->offset) || parse_hex(&p, ':', &maj) || parse_hex(&p, ' ', &min))
		return -EINVAL;
	if (maj > UINT32_MAX || min > UINT32_MAX || parse_dec(&p, &m->inode))
		return -EINVAL;
	m->dev_major = maj;
	m->dev_minor = min;
	if (*p && *p != ' ' && *p != '\n')
		return -EINVAL;
	while (*p == ' ')
		p++;
	len = strcspn(p, "\n");
	if (p[len] == '\n' && p[len + 1])
		return -EINVAL; /* more than one line */
	if (len >= strlen(CT_DELETED_SUFFIX) &&
	    !memcmp(p + len - strlen(CT_DELETED_SUFFIX), CT_DELETED_SUFFIX,
		    strlen(CT_DELETED_SUFFIX)) &&
	    p[0] == '/') {
		m->deleted = true;
		len -= strlen(CT_DELETED_SUFFIX);
	}
	if (len >= sizeof(m->path))
		return -ENAMETOOLONG;
	memcpy(m->path, p, len);
	m->path[len] = '\0';
	return 0;
}

int ct_maps_foreach(pid_t pid, ct_map_cb cb, void *ctx)
{
	char fn[64];
	struct ct_map *m;
	char *line = NULL;
	size_t cap = 0;
	FILE *f;
	int ret = 0;

	if (pid <= 0 || !cb)
		return -EINVAL;
	snprintf(fn, sizeof(fn), "/proc/%d/maps", (int)pid);
	f = fopen(fn, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	/* One PATH_MAX record: off the stack, as callers may already sit deep in it. */
	m = malloc(sizeof(*m));
	if (!m) {
		fclose(f);
		return -ENOMEM;
	}
	errno = 0;
	while (getline(&line, &cap, f) > 0) {
		ret = ct_maps_parse_line(line, m);
		if (ret)
			break;
		ret = cb(m, ctx);
		if (ret)
			break;
		errno = 0;
	}
	/* A target that exits while we read makes read() fail with ESRCH. */
	if (!ret && ferror(f))
		ret = errno ? -errno : -EIO;
	free(line);
	free(m);
	fclose(f);
	return ret;
}

int ct_proc_target_path(pid_t pid, const char *path, char *out, size_t outlen)
{
	int n;

	if (pid <= 0 || !path || path[0] != '/' || !out || !outlen)
		return -EINVAL;
	n = snprintf(out, outlen, "/proc/%d/root%s", (int)pid, path);
	if (n < 0)
		return -EINVAL;
	return (size_t)n < outlen ? 0 : -ENAMETOOLONG;
}

/*
 * A chroot's file through the target's root: the kernel names the target's files as the
 * reader sees them, its root's path first; through that root, with that prefix taken off,
 * they are as the target sees them, in its own mount namespace (where a file may be
 * mounted over). 0 with the path in out, else -ENOENT (not under the target's root).
 */
static int chroot_view(pid_t pid, const char *path, char *out, size_t outlen)
{
	char link[32], root[PATH_MAX];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%d/root", (int)pid);
	n = readlink(link, root, sizeof(root) - 1);
	if (n <= 1)
		return -ENOENT;
	root[n] = '\0';
	if (strncmp(path, root, (size_t)n) || path[n] != '/')
		return -ENOENT;
	return ct_proc_target_path(pid, path + n, out, outlen);
}

static bool same_file(const char *path, const struct ct_map *m)
{
	struct stat st;

	return !stat(path, &st) && st.st_ino == m->inode && major(st.st_dev) == m->dev_major &&
	       minor(st.st_dev) == m->dev_minor;
}

int ct_map_candidate_path(pid_t pid, const struct ct_map *m, char *out, size_t outlen)
{
	char alt[PATH_MAX + 32];
	int rc;

	if (!m->path[0] || m->path[0] != '/' || !outlen)
		return -EINVAL;
	/* A mount namespace: the target's own view, through its root. */
	rc = ct_proc_target_path(pid, m->path, alt, sizeof(alt));
	if (!rc && same_file(alt, m))
		return snprintf(out, outlen, "%s", alt) < (int)outlen ? 0 : -ENAMETOOLONG;
	/* A chroot: the file as the target sees it, else as the reader does. */
	if (!chroot_view(pid, m->path, alt, sizeof(alt)) && same_file(alt, m))
		return snprintf(out, outlen, "%s", alt) < (int)outlen ? 0 : -ENAMETOOLONG;
	if (same_file(m->path, m))
		return snprintf(out, outlen, "%s", m->path) < (int)outlen ? 0 : -ENAMETOOLONG;
	return -ENOENT;
}

int ct_map_open_path(pid_t pid, const struct ct_map *m, char *out, size_t outlen)
{
	int n;

	if (pid <= 0 || !out || !outlen)
		return -EINVAL;
	n = snprintf(out, outlen, "/proc/%d/map_files/%llx-%llx", (int)pid,
		     (unsigned long long)m->start, (unsigned long long)m->end);
	if (n < 0 || (size_t)n >= outlen)
		return -ENAMETOOLONG;
	if (!access(out, R_OK))
		return 0;
	if (errno == ENOENT && !ct_proc_alive(pid))
		return -ESRCH;
	return ct_map_candidate_path(pid, m, out, outlen);
}

int ct_proc_file_path(pid_t pid, const char *path, char *out, size_t outlen)
{
	int rc = ct_proc_target_path(pid, path, out, outlen);

	if (rc || !access(out, R_OK))
		return rc;
	if (!chroot_view(pid, path, out, outlen) && !access(out, R_OK))
		return 0;
	if (!access(path, R_OK)) /* a chroot: the path of a mapped file as the reader sees it */
		return snprintf(out, outlen, "%s", path) < (int)outlen ? 0 : -ENAMETOOLONG;
	return -ENOENT;
}

/*
 * A streaming scanner over NUL-separated "NAME=value" entries: memory stays bounded
 * however large the environment is, and an entry split across reads still matches.
 */
struct env_scan {
	const char *const *names;
	char **outs;
	const size_t *outlens;
	int *state; /* per name: 0 unset, 1 found, -ERANGE value too long */
	int n;
	size_t pos;	     /* offset in the current entry */
	unsigned long alive; /* bit i: name i still matches the current entry */
	int copying;	     /* index of the name whose value is being copied, or -1 */
	size_t vlen;
};

static void env_scan_init(struct env_scan *es)
{
	es->pos = 0;
	es->alive = (es->n >= (int)(8 * sizeof(es->alive))) ? ~0UL : (1UL << es->n) - 1;
	es->copying = -1;
	es->vlen = 0;
}

static void env_scan_feed(struct env_scan *es, const char *buf, size_t len)
{
	size_t i;
	int k;

	for (i = 0; i < len; i++) {
		char c = buf[i];

		if (c == '\0') {
			if (es->copying >= 0 && es->state[es->copying] == 0) {
				es->outs[es->copying][es->vlen] = '\0';
				es->state[es->copying] = 1;
			}
			env_scan_init(es);
			continue;
		}
		if (es->copying >= 0) {
			int k2 = es->copying;

			if (es->state[k2] != 0)
				continue;
			if (es->vlen + 1 >= es->outlens[k2])
				es->state[k2] = -ERANGE;
			else
				es->outs[k2][es->vlen++] = c;
			continue;
		}
		for (k = 0; k < es->n && es->alive; k++) {
			size_t nl;

			if (!(es->alive & (1UL << k)))
				continue;
			nl = strlen(es->names[k]);
			if (es->pos < nl && es->names[k][es->pos] == c)
				continue;
			if (es->pos == nl && c == '=' && es->state[k] == 0) {
				/* The first definition wins, as getenv(3) returns it. */
				es->copying = k;
				es->vlen = 0;
				break;
			}
			es->alive &= ~(1UL << k);
		}
		es->pos++;
	}
}

static void env_scan_end(struct env_scan *es)
{
	/* The last entry may lack its NUL (an environment rewritten by the target). */
	char nul = '\0';

	if (es->pos || es->copying >= 0)
		env_scan_feed(es, &nul, 1);
}

int ct_environ_lookup(const char *buf, size_t len, const char *name, char *out, size_t outlen)
{
	int state = 0;
	struct env_scan es = {
	    .names = &name, .outs = &out, .outlens = &outlen, .state = &state, .n = 1};

	if (!buf || !name || !*name || strchr(name, '=') || !out || !outlen)
		return -EINVAL;
	env_scan_init(&es);
	env_scan_feed(&es, buf, len);
	env_scan_end(&es);
	return state == 1 ? 0 : state == 0 ? -ENOENT : state;
}

/* Look up n names in one read of /proc/PID/environ; per-name results in state[]. */
static int proc_env_scan(pid_t pid, const char *const *names, char **outs, const size_t *outlens,
			 int *state, int n)
{
	struct env_scan es = {
	    .names = names, .outs = outs, .outlens = outlens, .state = state, .n = n};
	char fn[64], buf[4096];
	ssize_t r;
	int fd, i;

	if (pid <= 0 || n <= 0 || n > (int)(8 * sizeof(es.alive)))
		return -EINVAL;
	for (i = 0; i < n; i++)
		state[i] = 0;
	snprintf(fn, sizeof(fn), "/proc/%d/environ", (int)pid);
	fd = open(fn, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	env_scan_init(&es);
	while ((r = read(fd, buf, sizeof(buf))) > 0)
		env_scan_feed(&es, buf, r);
	if (r < 0) {
		r = -errno;
		close(fd);
		return (int)r;
	}
	env_scan_end(&es);
	close(fd);
	return 0;
}

int ct_proc_getenv(pid_t pid, const char *name, char *out, size_t outlen)
{
	int state, err;

	if (!name || !*name || strchr(name, '=') || !out || !outlen)
		return -EINVAL;
	err = proc_env_scan(pid, &name, &out, &outlen, &state, 1);
	if (err)
		return err;
	return state == 1 ? 0 : state == 0 ? -ENOENT : state;
}

/* A non-negative int, all digits, no sign, no spaces; -1 otherwise. */
static long strict_nonneg(const char *s)
{
	uint64_t v;
	const char *p = s;

	if (parse_dec(&p, &v) || *p || v > INT_MAX)
		return -1;
	return (long)v;
}

/* Launchers in order of precedence; each rank variable with its own size variable. */
static const char *const rank_vars[] = {
    "RANK",
    "WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "PMIX_RANK",
    "PMIX_SIZE",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "MV2_COMM_WORLD_RANK",
    "MV2_COMM_WORLD_SIZE",
};

const char *ct_proc_rank_var(int i)
{
	/* i comes from recorded data (--record): compared before it is doubled */
	return i >= 0 && (size_t)i < sizeof(rank_vars) / sizeof(rank_vars[0]) / 2 ? rank_vars[2 * i]
										  : NULL;
}

int ct_proc_rank(pid_t pid, int *world)
{
	return ct_proc_rank_env(pid, world, NULL);
}

int ct_proc_rank_env(pid_t pid, int *world, const char **var)
{
	enum { N = sizeof(rank_vars) / sizeof(rank_vars[0]) };
	char vals[N][24], *outs[N];
	size_t lens[N];
	int state[N], i, rank = -1, size = -1;

	if (world)
		*world = -1;
	if (var)
		*var = NULL;
	for (i = 0; i < N; i++) {
		outs[i] = vals[i];
		lens[i] = sizeof(vals[i]);
	}
	if (proc_env_scan(pid, rank_vars, outs, lens, state, N))
		return -1;
	for (i = 0; i < N; i += 2) {
		long r = state[i] == 1 ? strict_nonneg(vals[i]) : -1;

		if (r < 0)
			continue;
		rank = (int)r;
		if (state[i + 1] == 1 && strict_nonneg(vals[i + 1]) > 0)
			size = (int)strict_nonneg(vals[i + 1]);
		break;
	}
	/* SLURM_NTASKS is unset for some job steps; SLURM_NPROCS is the older spelling. */
	if (rank >= 0 && size < 0 && i < N && strcmp(rank_vars[i], "SLURM_PROCID") == 0) {
		char v[24];

		if (!ct_proc_getenv(pid, "SLURM_NPROCS", v, sizeof(v)) && strict_nonneg(v) > 0)
			size = (int)strict_nonneg(v);
	}
	if (world && size > rank)
		*world = size;
	if (var && rank >= 0)
		*var = rank_vars[i];
	return rank;
}

static int read_small(const char *fn, char *buf, size_t len)
{
	ssize_t n;
	int fd;

	fd = open(fn, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	n = read(fd, buf, len - 1);
	if (n < 0) {
		n = -errno;
		close(fd);
		return (int)n;
	}
	close(fd);
	buf[n] = '\0';
	return (int)n;
}

int ct_proc_comm(pid_t pid, pid_t tid, char *out, size_t outlen)
{
	char fn[64], buf[64];
	int n;

	if (pid <= 0 || tid <= 0 || !out || !outlen)
		return -EINVAL;
	if (tid == pid)
		snprintf(fn, sizeof(fn), "/proc/%d/comm", (int)pid);
	else
		snprintf(fn, sizeof(fn), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	n = read_small(fn, buf, sizeof(buf));
	if (n < 0)
		return n;
	buf[strcspn(buf, "\n")] = '\0';
	snprintf(out, outlen, "%s", buf);
	return 0;
}

/*
 * "pid (comm) S ...": comm may hold spaces and parentheses ("a) b (c"), so the
 * state follows the *last* ") " in the line.
 */
int ct_proc_parse_stat_state(const char *stat, char *state)
{
	const char *close;

	if (!stat || !state)
		return -EINVAL;
	close = strrchr(stat, ')');
	if (!close || !strchr(stat, '(') || strchr(stat, '(') > close || close[1] != ' ' ||
	    !close[2] || close[2] == ' ' ||
	    (close[3] != ' ' && close[3] != '\0' && close[3] != '\n'))
		return -EINVAL;
	*state = close[2];
	return 0;
}

/* Fields 14 and 15 (utime, stime) of a /proc/PID/stat line, after the last ") ". */
int ct_proc_parse_stat_cpu(const char *stat, uint64_t *ticks)
{
	const char *p;
	char state;
	uint64_t v[2];

	if (ct_proc_parse_stat_state(stat, &state) || !ticks)
		return -EINVAL;
	p = strrchr(stat, ')') + 3; /* past ") S" */
	for (int field = 4; field <= 15; field++) {
		if (*p != ' ')
			return -EINVAL;
		p++;
		if (field >= 14) {
			if (parse_dec(&p, &v[field - 14]))
				return -EINVAL;
		} else {
			p += strcspn(p, " \n");
		}
	}
	*ticks = v[0] + v[1];
	return 0;
}

int ct_proc_cpu_ns(pid_t pid, uint64_t *ns)
{
	char fn[64], buf[CT_STAT_MAX];
	uint64_t ticks;
	long hz = sysconf(_SC_CLK_TCK);

	snprintf(fn, sizeof(fn), "/proc/%d/stat", (int)pid);
	if (read_small(fn, buf, sizeof(buf)) < 0)
		return -ESRCH;
	if (ct_proc_parse_stat_cpu(buf, &ticks) || hz <= 0)
		return -EINVAL;
	*ns = ticks * (1000000000ULL / (uint64_t)hz);
	return 0;
}

bool ct_proc_alive(pid_t pid)
{
	char fn[64], buf[CT_STAT_MAX], state;

	if (pid <= 0)
		return false;
	snprintf(fn, sizeof(fn), "/proc/%d/stat", (int)pid);
	if (read_small(fn, buf, sizeof(buf)) < 0 || ct_proc_parse_stat_state(buf, &state))
		return false;
	/* Z: exited, not reaped; X: being torn down. Neither will call a collective again. */
	return state != 'Z' && state != 'X' && state != 'x';
}

int ct_parse_pid_list(const char *s, pid_t *out, int max)
{
	int n = 0, i;

	if (!s || !out || max <= 0)
		return -EINVAL;
	for (;;) {
		const char *p = s;
		uint64_t v;

		/* Digits only: no sign, no spaces, no empty item, no zero. */
		if (parse_dec(&p, &v) || v == 0 || v > INT_MAX || (*p && *p != ','))
			return -EINVAL;
		for (i = 0; i < n; i++)
			if (out[i] == (pid_t)v)
				return -EINVAL; /* a pid twice would be attached twice */
		if (n == max)
			return -E2BIG;
		out[n++] = (pid_t)v;
		if (!*p)
			return n;
		s = p + 1;
	}
}
