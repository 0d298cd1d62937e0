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
 * "/proc/PID/root" + path: a file of the target's own view of the file system (its mount
 * namespace, container). For a mapped file use ct_map_open_path().
 */
int ct_proc_target_path(pid_t pid, const char *path, char *out, size_t outlen);

/*
 * A path that opens the file of mapping m of process pid whatever the process' root is
 * (chroot, mount namespace, overlay container) and even when the file was replaced or
 * removed since it was mapped: /proc/PID/map_files/START-END, which the kernel resolves to
 * the mapped inode (it needs CAP_SYS_ADMIN). Where that cannot be read, the candidate whose
 * device and inode are the mapping's (ct_map_candidate_path). 0; -ESRCH when the process is
 * gone; -ENOENT when no candidate is the mapped file (never a guess).
 */
int ct_map_open_path(pid_t pid, const struct ct_map *m, char *out, size_t outlen);
/*
 * Of "/proc/PID/root" + m->path (a mount namespace), a chroot's file through its root (the
 * kernel names the files of a chrooted process as the reader sees them, the root's path
 * first: that prefix taken off) and m->path itself, the one whose device and inode are the
 * mapping's. 0, or -ENOENT.
 */
int ct_map_candidate_path(pid_t pid, const struct ct_map *m, char *out, size_t outlen);
/*
 * A file the target has but does not map (torch's version.py beside its mapped _C.so):
 * through its root when it is there; a chroot's file (named as the reader sees it, the
 * root's path first) through its root, that prefix taken off; else the path as given.
 * 0, or -ENOENT.
 */
int ct_proc_file_path(pid_t pid, const char *path, char *out, size_t outlen);

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

/* utime + stime (clock ticks) of a /proc/PID/stat line. 0 or -EINVAL. */
int ct_proc_parse_stat_cpu(const char *stat, uint64_t *ticks);
/* The CPU time of a process, its threads' (exited ones included): 0, -ESRCH or -EINVAL. */
int ct_proc_cpu_ns(pid_t pid, uint64_t *ns);

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
