/* SPDX-License-Identifier: MIT */
/* What /proc tells about a target process: mappings, environment, threads, names. */
#ifndef CT_TARGET_PROC_H
#define CT_TARGET_PROC_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ct_map {
	uint64_t start, end, offset;
	uint64_t inode;
	unsigned int dev_major, dev_minor;
	char perms[5];	     /* "r-xp" */
	bool deleted;	     /* the path ended in " (deleted)" (suffix removed from path) */
	char path[PATH_MAX]; /* as the target sees it ("" for anonymous mappings) */
};

/*
 * Parse one line of /proc/PID/maps. 0 on success, -EINVAL on a malformed line,
 * -ENAMETOOLONG for a path that does not fit in ct_map.path.
 */
int ct_maps_parse_line(const char *line, struct ct_map *m);

/* Return non-zero from the callback to stop (that value is returned). */
typedef int (*ct_map_cb)(const struct ct_map *m, void *ctx);

/* Walk /proc/PID/maps. -ESRCH if the process is gone, other -errno on failure. */
int ct_maps_foreach(pid_t pid, ct_map_cb cb, void *ctx);

/*
 * The path through which this process can open a file the target maps:
 * "/proc/PID/root" + path (works across mount namespaces, containers included).
 */
int ct_proc_target_path(pid_t pid, const char *path, char *out, size_t outlen);

/*
 * Value of an environment variable of the target (/proc/PID/environ). 0, or -ENOENT;
 * -ERANGE if the value does not fit in out, -ESRCH if the process is gone.
 */
int ct_proc_getenv(pid_t pid, const char *name, char *out, size_t outlen);

/* The same lookup in a NUL-separated environment block already in memory. */
int ct_environ_lookup(const char *buf, size_t len, const char *name, char *out, size_t outlen);

/*
 * The rank of a process from its environment: RANK, OMPI_COMM_WORLD_RANK,
 * PMI_RANK, PMIX_RANK, SLURM_PROCID, MV2_COMM_WORLD_RANK (first found). -1 if none.
 * The matching world size goes to *world (or -1).
 */
int ct_proc_rank(pid_t pid, int *world);
/* The same; *var: the variable the rank came from ("RANK", …; a static string), or NULL. */
int ct_proc_rank_env(pid_t pid, int *world, const char **var);
/* The i-th rank variable in order of precedence (the strings *var points to), NULL past them. */
const char *ct_proc_rank_var(int i);

/* Name of a thread (/proc/PID/task/TID/comm), or of the process when tid == pid. */
int ct_proc_comm(pid_t pid, pid_t tid, char *out, size_t outlen);

/* Does the process exist (and is it not a zombie)? */
bool ct_proc_alive(pid_t pid);

/* The state letter of a /proc/PID/stat line (comm may hold spaces and ')'). 0 or -EINVAL. */
int ct_proc_parse_stat_state(const char *stat, char *state);

/*
 * Strict decimal parse of a pid list "1,2,3" into out (at most max). Count, or -EINVAL
 * (also for a repeated pid); -E2BIG for more than max pids.
 */
int ct_parse_pid_list(const char *s, pid_t *out, int max);

#endif
