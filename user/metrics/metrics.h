/* SPDX-License-Identifier: MIT */
/*
 * --metrics [ADDR:]PORT: the session's counters in the Prometheus text exposition format
 * (version 0.0.4), served over HTTP by libmicrohttpd (docs/metrics.md).
 *
 * Threads: the tracer's event path stays single-threaded. libmicrohttpd runs its own
 * threads (one listener, one per connection, at most CT_METRICS_MAX_CONN), which never
 * read the session: the trace loop renders the exposition text into a private buffer
 * and publishes it under a mutex (a pointer swap), and a scrape serves a copy of the
 * latest published text. A scrape asks for a fresh one (a flag the loop reads after
 * each ring-buffer poll, at most every 100 ms) and waits for it up to 1 s, so what it
 * gets is never older than the scrape, yet the event path never waits on a scrape: it
 * renders when it gets to it, between two polls, and holds the mutex only for the swap.
 * Driving MHD from the poll loop instead (MHD_run) would put socket I/O, slow clients
 * and TLS-less keep-alive handling on the event path; a thread keeps it off.
 */
#ifndef CT_METRICS_H
#define CT_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct ct_session;
struct ct_sbuf;

#define CT_METRICS_MAX_CONN   16	   /* concurrent HTTP connections */
#define CT_METRICS_REFRESH_NS 100000000ULL /* at most one render per 100 ms */

/*
 * "PORT" (loopback: 127.0.0.1:PORT), "ADDR:PORT" (IPv4 literal, "localhost", or
 * "[IPv6]:PORT"). PORT 0..65535; 0 picks a free port (the one used is printed).
 * 0, or -EINVAL with a message in err.
 */
int ct_metrics_parse_addr(const char *spec, struct sockaddr_storage *ss, socklen_t *len, char *err,
			  size_t errlen);

/*
 * The diagnosis findings of the time (issue 7, user/diag/). The metrics call this hook at
 * each render; the diagnosis module provides it. Until it does, a weak default in
 * user/metrics/prom.c says available = false and the findings metrics say so
 * (commtrace_diagnosis_available 0) instead of exporting zeros that would mean "no hang".
 */
#define CT_METRICS_FINDING_KINDS 8
#define CT_METRICS_LATE_RANKS	 256 /* one series per rank, as many as traced processes */
struct ct_metrics_findings {
	bool available;
	int n_kinds;
	struct {
		const char *kind; /* "late_rank", "mismatch", "hang", … (a fixed set) */
		uint64_t total;	  /* findings of this kind so far (a counter) */
	} by_kind[CT_METRICS_FINDING_KINDS];
	uint32_t ranks_hung; /* ranks with a collective hung now (a gauge) */
	uint32_t ranks_late; /* ranks found late in the latest matched collective (a gauge) */
	uint64_t matched;    /* collectives matched across ranks so far (a counter) */
	uint64_t skew_max_ns, skew_last_ns; /* arrival skew: largest, latest matched */
	int n_late;			    /* entries of late[] */
	struct {
		int rank;      /* -1: processes without a rank, summed */
		uint64_t late; /* collectives it arrived last at, skew >= --late-after */
	} late[CT_METRICS_LATE_RANKS];
};
void ct_diag_metrics_fill(const struct ct_session *s, struct ct_metrics_findings *out);

/* How far each (process, communicator) has got (diag.h, struct ct_diag_progress). */
#define CT_METRICS_PROGRESS 512 /* every (process, communicator) the diagnosis holds */
struct ct_metrics_progress {
	uint32_t pid;
	int rank; /* -1: unknown */
	char comm[48];
	uint64_t entered, completed;
	bool inflight;
	uint64_t inflight_ns; /* how long the oldest call in flight has been (0: exited) */
};
/* Rows filled, at monotonic time now. */
int ct_diag_metrics_progress(const struct ct_session *s, struct ct_metrics_progress *out, int max,
			     uint64_t now);

/*
 * The exposition text of the session now. wall_ns: the snapshot's CLOCK_REALTIME time
 * (commtrace_snapshot_timestamp_seconds: every event the kernel had produced by then is
 * counted); render_s: how long the previous render took.
 */
void ct_metrics_render(struct ct_session *s, struct ct_sbuf *b, uint64_t wall_ns, double render_s);

/*
 * Starts the endpoint (binds, listens, starts libmicrohttpd's threads) and prints
 * "metrics: serving http://ADDR:PORT/metrics" on stderr. 0, or -errno with a message.
 */
int ct_metrics_start(struct ct_session *s, const char *spec, char *err, size_t errlen);
/*
 * From the trace loop after each ring-buffer read: renders and publishes a snapshot when
 * a scrape asked for one (or force: the final one). consumed_mono_ns: the CLOCK_MONOTONIC
 * time when that read began.
 */
void ct_metrics_tick(struct ct_session *s, uint64_t consumed_mono_ns, bool force);
/* Stops serving (waits for the HTTP threads) and frees everything. */
void ct_metrics_stop(struct ct_session *s);

#endif
