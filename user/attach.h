/* SPDX-License-Identifier: MIT */
/*
 * The BPF side's lifecycle, and every link's: made here (one uprobe_multi link per program,
 * library and process, or one libbpf link per probe), destroyed here, in the background for
 * a process that has gone.
 */
#ifndef CT_ATTACH_H
#define CT_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <bpf/libbpf.h>

struct ct_session;

/*
 * One attachment: a libbpf link (one uprobe), or the fd of a uprobe_multi link, which
 * holds the probes of one program on one file for one process (Linux 6.6+) and detaches
 * them all with one wait for the kernel's grace period instead of one each.
 */
struct ct_link {
	struct bpf_link *bl; /* or NULL, and fd */
	int fd;
	unsigned int probes;
};

struct ct_links {
	struct ct_link *v;
	size_t n, cap;
};

/* Destroy the links from index `from` on (several at once: each close waits for the
 * kernel); free the array when from is 0. */
void ct_links_destroy(struct ct_links *l, size_t from);
/* Takes the links over (*l is emptied): destroyed by a background thread, so that the event
 * loop goes on while the kernel waits out its grace period (or here, without a thread). */
void ct_links_destroy_async(struct ct_links *l);
/* Probes held by the links. */
size_t ct_links_probes(const struct ct_links *l);
/* Wait until the links handed to ct_links_destroy_async() are gone. */
void ct_links_wait(void);

/*
 * open, configure, load, fill the probe specs, attach the process tracepoints; with
 * on_record, the ring buffer that calls it for each record (ctx: the session).
 */
int ct_bpf_open_load(struct ct_session *s, ring_buffer_sample_fn on_record);
/*
 * Entry and return probes at the n file offsets of path (points: one probe each, inside
 * the function, CT_PF_POINT), with the catalog's probe ids as cookies, for pid (-1: every
 * process, filtered in BPF by the traced set), links added to out. The number of functions
 * probed (a function the kernel refuses is left out, said on stderr), or -ESRCH/-ENOENT
 * when the process is gone.
 */
int ct_bpf_attach_funcs(struct ct_session *s, pid_t pid, const char *path, const uint64_t *offs,
			const uint64_t *cookies, size_t n, bool points, struct ct_links *out);
/* A file-wide entry probe on the dynamic linker's _dl_debug_state at file offset off. */
int ct_bpf_attach_ldso(struct ct_session *s, const char *path, uint64_t off);
int ct_bpf_trace_pid(struct ct_session *s, pid_t pid);
/*
 * Start tracing: nothing is traced before, so that the processes named by pid, attached one
 * after the other, all start at this instant (calls in flight then return as CT_EV_UNSEEN).
 */
void ct_bpf_open_gate(struct ct_session *s);
/* A probe on an executable's entry point (file offset off): its startup libraries are
 * mapped then. */
int ct_bpf_attach_entry(struct ct_session *s, pid_t pid, const char *path, uint64_t off,
			struct ct_links *out);
/* --ops: the frame evaluation entry and exit at file offset off of path, for pid only. */
int ct_bpf_attach_pyops(struct ct_session *s, pid_t pid, const char *path, uint64_t off,
			struct ct_links *out);
/*
 * --ops on torch 2.x, for pid only, in libtorch_python at path: the entry and return of the
 * function that calls a tensor subclass's __torch_dispatch__ (file offset dispatch) and the
 * entry of PyNode::apply (gradfn; 0: not probed). Both or neither.
 */
int ct_bpf_attach_dispatch(struct ct_session *s, pid_t pid, const char *path, uint64_t dispatch,
			   uint64_t gradfn, struct ct_links *out);
/* The interpreter's code object deallocator at file offset off of path, for pid only. */
int ct_bpf_attach_code_free(struct ct_session *s, pid_t pid, const char *path, uint64_t off,
			    struct ct_links *out);
/* --cost: the do-nothing program as an entry probe (and with ret, a return probe too) at
 * file offset off of path, in the tracer itself, as the probes of the targets attach
 * (uprobe_multi or perf-event links). */
int ct_bpf_attach_calib(struct ct_session *s, const char *path, uint64_t off, bool ret,
			struct ct_links *out);
void ct_bpf_read_drops(struct ct_session *s);
#define CT_VERIFIER_LIMIT 1000000 /* instructions the kernel's verifier goes through, at most */
/* Each loaded program's verified instructions, on stderr (--check). */
void ct_bpf_print_verified(const struct ct_session *s);
void ct_bpf_close(struct ct_session *s);
/* Why BPF cannot be used here (missing capability, …), or NULL when it can. */
const char *ct_bpf_unavailable_reason(void);

#endif
