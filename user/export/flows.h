/* SPDX-License-Identifier: MIT */
/*
 * The pure parts behind a Chrome trace's nesting and flow arrows, used by the --chrome
 * exporter and by merge: the Perfetto nesting check, the cross-rank matcher, the c10d → Gloo
 * handoff queue. No session, no I/O.
 */
#ifndef CT_EXPORT_FLOWS_H
#define CT_EXPORT_FLOWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- nesting check ---------------------------------------------------------------------- */

struct ct_span {
	uint64_t start, end; /* ns, end >= start */
	uint32_t id;	     /* the caller's */
	bool bad;	     /* set: partially overlaps a span kept before it */
};

/*
 * Perfetto nests the slices of one track by time and rejects a slice that starts inside
 * another and ends after it. Sorts spans (start ascending, longer first) and marks every
 * span that partially overlaps one already accepted; returns how many were marked.
 * Equal spans nest (the first one encloses the second).
 */
size_t ct_span_check(struct ct_span *spans, size_t n);

/* ---- cross-rank matcher ----------------------------------------------------------------- */

/*
 * The halves of one collective in different processes. Communicator handles (Gloo
 * contexts, ProcessGroup and ncclComm_t pointers, MPI_Comm handles) are addresses local
 * to each process, so halves are matched by the diagnosis' cross-process communicator
 * identity (user/diag/diag.h: "LIB#ORDINAL/SIZE") and the sequence number of the
 * collective on it: the collective-ordering rule every library imposes on the members
 * of a communicator. The function keeps the layers apart (c10d's call and the Gloo
 * execution linked to it share the identity and number).
 */
struct ct_xkey {
	const char *function; /* interned: compared by address */
	int32_t comm;	      /* identity: index in the session's diagnosis */
	uint32_t sub;	      /* 0; n: the n-th collective nested in the call with that identity */
	uint64_t seq;	      /* 1-based, per process and identity */
};

struct ct_xhalf {
	uint32_t pid, tid;
	uint64_t ts, end;
};

#define CT_XMATCH_SLOTS 4096 /* collectives remembered, the oldest forgotten first */

struct ct_xmatch {
	struct {
		struct ct_xkey key;
		struct ct_xhalf first;
		bool used;
	} slot[CT_XMATCH_SLOTS];
	uint32_t next;
	uint64_t evicted;
};

/*
 * Records h under k. Returns true, with *first set, when another process already recorded
 * a half under k (the flow goes from that one to h); the first half stays for later ranks.
 */
bool ct_xmatch_add(struct ct_xmatch *m, const struct ct_xkey *k, const struct ct_xhalf *h,
		   struct ct_xhalf *first);

/* ---- caller thread → library worker thread (c10d → Gloo) -------------------------------- */

#define CT_HANDOFF_SLOTS 64 /* c10d calls per process awaiting their Gloo execution */

struct ct_handoff {
	struct {
		uint8_t kind;
		bool used, matched, src_done, dst_done;
		struct ct_xhalf src, dst;
	} slot[CT_HANDOFF_SLOTS];
	uint32_t next;
	uint64_t evicted;
};

/* A caller-side (c10d) call began; returns its slot (for ct_handoff_end), -1 if none. */
int ct_handoff_caller(struct ct_handoff *q, uint8_t kind, const struct ct_xhalf *src);
/*
 * A library call of this kind began on a worker thread: the oldest unmatched caller-side
 * call of the same kind that began before it is its origin. Returns that slot, or -1.
 */
int ct_handoff_worker(struct ct_handoff *q, uint8_t kind, const struct ct_xhalf *dst);
/*
 * One end returned (dst: the worker side). Returns true when both ends are complete; then
 * *src and *dst hold them and the slot is freed.
 */
bool ct_handoff_end(struct ct_handoff *q, int slot, bool worker, uint64_t end, struct ct_xhalf *src,
		    struct ct_xhalf *dst);

#endif
