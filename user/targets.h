/* SPDX-License-Identifier: MIT */
/*
 * Traced processes and the library files they map: discovery in /proc/PID/maps, one
 * resolution per file (dev, inode), the probes of each library instance (attach.c), the
 * process events (fork, exec, exit, a library loaded) that change them.
 */
#ifndef CT_TARGETS_H
#define CT_TARGETS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "attach.h"
#include "catalog/catalog.h"
#include "elf/elfsym.h"
#include "python/params.h"
#include "python/pyproc.h"
#include "stats.h"
#include "tree.h"

#define CT_MAX_LIBINST 16 /* attached library instances per process */
#define CT_MAX_THREADS 64 /* named threads remembered per process */

struct ct_session;
struct ct_torch_layout;
struct ct_pyops;
struct ct_params;

/* One resolved library file, shared by every process that maps it. */
struct ct_file {
	dev_t dev;
	ino_t ino;
	char path[PATH_MAX]; /* how it was first opened (ct_map_open_path: may be another process's)
			      */
	const struct ct_libdesc *desc;
	struct ct_sym_found *funcs;  /* desc->n_funcs */
	struct ct_sym_found *dtypes; /* desc->n_dtype_objects */
	struct ct_sym_found *ops;    /* desc->n_op_objects */
	int n_found;
	uint64_t base_vaddr; /* ct_elf_base_vaddr() */
	/* Launch mode, or a file shared by the processes named: probes on the file for every
	 * process, filtered in BPF by the traced set. */
	struct ct_links links;
	bool wide;
	bool per_pid; /* probed for one process: never made file-wide (it would be twice) */
};

/*
 * Runtime addresses of a library's predefined handle objects in one process (MPI_DOUBLE is
 * &ompi_mpi_double, MPI_SUM &ompi_mpi_op_sum): in the library, and the copies a non-PIC
 * executable holds (copy relocations). 0: not found. One allocation, owned by dtypes.
 */
struct ct_handles {
	uint64_t *dtypes, *ops;		/* desc->n_dtype_objects, desc->n_op_objects */
	uint64_t *exe_dtypes, *exe_ops; /* the same, in the executable */
};

/* A library file mapped into one process. */
struct ct_libinst {
	struct ct_file *file;
	char path[PATH_MAX];	     /* as the target sees it */
	uint64_t map_start, map_off; /* one executable mapping, for runtime addresses */
	struct ct_handles handles;   /* its predefined dtype and op objects (ct_handles_alloc) */
	int n_probes;		     /* functions probed (entry and return) */
};

struct ct_thread_name {
	pid_t tid;
	char name[16];
};

/* Threads per process with a traced call in flight at once (Python's, Gloo's workers). */
#define CT_PENDING_THREADS 64

/* A call in flight, for its bandwidth at the return. */
struct ct_pending_call {
	uint32_t probe1; /* probe id + 1; 0: none */
	int32_t group;	 /* communicator size, 0: unknown */
	uint64_t sent, recv;
};

struct ct_proc {
	pid_t pid;
	int rank, world;
	/*
	 * Where rank and world come from: the environment variable (rank_var, "RANK"), or,
	 * when the environment names none, the largest communicator seen (comm_world: its
	 * size; 0 while the rank is not from a communicator). -1 both: unknown.
	 */
	const char *rank_var;
	int comm_world;
	bool exited;
	bool attached; /* its libraries were scanned at least once */
	int exit_code;
	char comm[16];
	struct ct_libinst libs[CT_MAX_LIBINST];
	int n_libs;
	struct ct_links links;
	struct ct_fstats **stats; /* indexed by probe id, allocated on first call */
	struct ct_thread_name threads[CT_MAX_THREADS];
	struct ct_tree tree; /* seed 000's records, from the Python stacks */
	struct ct_pyproc py; /* its CPython, when has_python */
	bool py_checked, has_python;
	/* --ops: torch's tensor layout in this process, once BPF was told it */
	const struct ct_torch_layout *torch_layout;
	/* torch's tensor layout for reads from user space (a helper's tensor), or NULL */
	const struct ct_torch_layout *tensor_layout;
	int tensor_layout_tries;  /* lookups so far (torch may be imported later) */
	uint64_t root_module;	  /* the outermost nn.Module seen on a stack (its address) */
	const char *root_class;	  /* its class name (interned), or NULL */
	struct ct_params *params; /* --sharding: read at the first root_module, or NULL */
	int params_tries;	  /* reads of params so far */
	struct ct_pyops *ops;	  /* --ops: its calls in flight per thread, or NULL */
	/* torch 2.x: where its DTensorSpecs keep their placements and its DTensors their spec,
	 * for BPF to copy them at the call (0: not measured yet), and the measures tried */
	struct ct_spec_bpf spec_layout;
	int spec_layout_tries, dtensor_layout_tries;
	bool code_free; /* its code objects' deallocation is probed (ct_code_free) */
	struct ct_last_stacks *last_stacks; /* its threads' last stacks (laststack.h), or NULL */
	/*
	 * Each thread's calls in flight: the tree node of its outermost one (for its
	 * duration), and what each depth's call moved (for its bandwidth at the return).
	 */
	struct {
		pid_t tid;
		int32_t node;
		struct ct_pending_call at[CT_MAX_DEPTH];
	} pending[CT_PENDING_THREADS];
	int n_threads;
	uint64_t calls;
};

struct ct_proc *ct_proc_find(struct ct_session *s, pid_t pid);
struct ct_proc *ct_proc_add(struct ct_session *s, pid_t pid);
/* Scan the process' mappings and attach to every known library not yet attached.
 * Returns the number of library instances newly attached, or -errno. */
int ct_proc_scan(struct ct_session *s, struct ct_proc *p);
void ct_proc_detach(struct ct_session *s, struct ct_proc *p);
/* The communication libraries p maps (not the aux ones, libtorch_python). */
int ct_proc_comm_libs(const struct ct_proc *p);
/* Whether p maps a library of that kind (enum ct_lib) that is attached. */
bool ct_proc_has_lib(const struct ct_proc *p, int lib);
/* The dynamic linker's _dl_debug_state, file-wide, once per file: libraries loaded later. */
int ct_attach_ldso(struct ct_session *s, const char *path);
/*
 * Launch mode: attach, before the command starts, to the known libraries in the
 * dynamic linker's default directories, for every process (filtered in BPF): a
 * rank that links one is covered from its first instruction. The number of
 * functions attached.
 */
int ct_prescan_system_libs(struct ct_session *s);
/*
 * By pid, before attaching: the library files that at least CT_WIDE_MIN of the processes
 * map (COMMTRACE_FILE_WIDE=N sets it; 0: none) go into s->shared. Each is probed once for
 * every process, the traced ones kept in BPF, so that a call runs one uprobe consumer, not
 * one per traced process. Other processes that map such a file then take the breakpoint
 * on its probed functions (and are dropped in BPF). The number of files.
 */
#define CT_WIDE_MIN 4
int ct_procs_find_shared(struct ct_session *s, const pid_t *pids, int n);
struct ct_file *ct_file_get(struct ct_session *s, const char *path, const struct ct_libdesc *d,
			    char *err, size_t errlen);
/* Rank and world size from the environment (RANK, OMPI_COMM_WORLD_RANK, …), or -1. */
void ct_proc_env_rank(struct ct_proc *p);
const char *ct_proc_thread_name(struct ct_proc *p, pid_t tid);
void ct_proc_set_thread_name(struct ct_proc *p, pid_t tid, const char *name);
int ct_session_live_procs(struct ct_session *s);
void ct_session_free(struct ct_session *s);

/* Name of a raw dtype value (enum or handle) of a library in a process, or NULL. */
const char *ct_dtype_name(const struct ct_proc *p, const struct ct_libdesc *d, uint64_t raw);
/*
 * Name of a raw reduce-op value (enum or handle): "sum", "prod", "max", "min", "avg", …;
 * "user" for an MPI handle that is no predefined op; NULL when unknown.
 */
const char *ct_op_name(const struct ct_proc *p, const struct ct_libdesc *d, uint64_t raw);
/* Zeroed handle tables for d's objects; 0 or -ENOMEM. ct_handles_free() releases them. */
int ct_handles_alloc(struct ct_handles *h, const struct ct_libdesc *d);
void ct_handles_free(struct ct_handles *h);

/* A process event record (fork, exec, exit, a library loaded): attach, detach, rescan. */
void ct_targets_proc_event(struct ct_session *s, const struct ct_proc_event *ev);
/* The process has gone (exit_code: its wait status, 0 when unknown): detach, tell the
 * diagnosis. */
void ct_proc_exited(struct ct_session *s, struct ct_proc *p, int exit_code);

#endif
