// SPDX-License-Identifier: MIT
/*
 * --metrics: the HTTP endpoint (libmicrohttpd) and the snapshot hand-over between the
 * trace loop and the HTTP threads. Why threads, and why a published snapshot rather than
 * reads of live statistics: user/metrics/metrics.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include "export/chrome.h"
#include "metrics/metrics.h"
#include "session.h"
#include "util/clock.h"

#define WAIT_FRESH_NS 1000000000ULL /* a scrape waits this long at most for a fresh render */

struct ct_metrics {
	struct MHD_Daemon *mhd;
	int fd;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* under lock: the published text and its generation */
	char *text;
	size_t len, cap;
	uint64_t gen;
	bool stopping;
	/* set by a scrape, cleared by the trace loop when it renders */
	atomic_bool wanted;
	/* the trace loop's own */
	struct ct_sbuf work;
	uint64_t last_render_mono;
	double render_s;
	uint64_t scrapes;
};

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned int status, const char *type,
			     char *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
	enum MHD_Result ret;

	if (!r) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* A copy of a snapshot rendered after this call began (or the latest, after 1 s). */
static char *fresh_copy(struct ct_metrics *m, size_t *len)
{
	struct timespec dl;
	uint64_t gen, t;
	char *copy;

	t = ct_now_ns(CLOCK_MONOTONIC) + WAIT_FRESH_NS;
	dl.tv_sec = (time_t)(t / 1000000000ULL);
	dl.tv_nsec = (long)(t % 1000000000ULL);
	pthread_mutex_lock(&m->lock);
	gen = m->gen;
	m->scrapes++;
	atomic_store(&m->wanted, true);
	while (m->gen == gen && !m->stopping)
		if (pthread_cond_timedwait(&m->cond, &m->lock, &dl) == ETIMEDOUT)
			break;
	copy = malloc(m->len + 1);
	if (copy) {
		memcpy(copy, m->text, m->len);
		*len = m->len;
	}
	pthread_mutex_unlock(&m->lock);
	return copy;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_size, void **con_cls)
{
	static const char index_page[] =
	    "commtrace-bpf: Prometheus metrics at /metrics (docs/metrics.md)\n";
	static const char not_found[] = "not found: the metrics are at /metrics\n";
	struct ct_metrics *m = cls;
	size_t len = 0;
	char *body;

	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain; charset=utf-8",
			     (char *)"only GET and HEAD\n", 18, MHD_RESPMEM_PERSISTENT);
	if (!strcmp(url, "/"))
		return reply(conn, MHD_HTTP_OK, "text/plain; charset=utf-8", (char *)index_page,
			     sizeof(index_page) - 1, MHD_RESPMEM_PERSISTENT);
	if (strcmp(url, "/metrics"))
		return reply(conn, MHD_HTTP_NOT_FOUND, "text/plain; charset=utf-8",
			     (char *)not_found, sizeof(not_found) - 1, MHD_RESPMEM_PERSISTENT);
	body = fresh_copy(m, &len);
	if (!body)
		return reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8",
			     (char *)"out of memory\n", 14, MHD_RESPMEM_PERSISTENT);
	return reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body, len,
		     MHD_RESPMEM_MUST_FREE);
}

static void publish(struct ct_metrics *m, struct ct_sbuf *b)
{
	char *old;
	size_t old_cap;

	pthread_mutex_lock(&m->lock);
	old = m->text;
	old_cap = m->cap;
	m->text = b->buf;
	m->len = b->len;
	m->cap = b->cap;
	m->gen++;
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
	/* The old text becomes the next render's buffer: no allocation in steady state. */
	b->buf = old;
	b->cap = old_cap;
	b->len = 0;
}

static void render_publish(struct ct_session *s, uint64_t consumed_mono_ns)
{
	struct ct_metrics *m = s->metrics;
	uint64_t t0 = ct_now_ns(CLOCK_MONOTONIC);
	uint64_t wall = consumed_mono_ns + s->mono_to_wall_ns;

	if (!s->mono_to_wall_ns) /* before the trace set its clock */
		wall = ct_now_ns(CLOCK_REALTIME) - (t0 - consumed_mono_ns);
	if (s->skel)
		ct_bpf_read_drops(s);
	ct_metrics_render(s, &m->work, wall, m->render_s);
	m->last_render_mono = ct_now_ns(CLOCK_MONOTONIC);
	m->render_s = (double)(m->last_render_mono - t0) / 1e9;
	if (m->work.oom) { /* keep serving the previous snapshot */
		ct_sbuf_reset(&m->work);
		return;
	}
	publish(m, &m->work);
}

void ct_metrics_tick(struct ct_session *s, uint64_t consumed_mono_ns, bool force)
{
	struct ct_metrics *m = s->metrics;

	if (!m)
		return;
	if (!force && (!atomic_load(&m->wanted) ||
		       consumed_mono_ns - m->last_render_mono < CT_METRICS_REFRESH_NS))
		return;
	atomic_store(&m->wanted, false);
	render_publish(s, consumed_mono_ns);
}

static void addr_text(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;

		inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, ntohs(a->sin6_port));
	} else {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;

		inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, ntohs(a->sin_port));
	}
}

int ct_metrics_start(struct ct_session *s, const char *spec, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	struct ct_metrics *m;
	pthread_condattr_t ca;
	sigset_t block, old;
	char where[INET6_ADDRSTRLEN + 16];
	int one = 1, rc;

	rc = ct_metrics_parse_addr(spec, &ss, &sl, err, errlen);
	if (rc)
		return rc;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* fresh_copy's deadline */
	pthread_cond_init(&m->cond, &ca);
	pthread_condattr_destroy(&ca);
	m->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (m->fd < 0)
		goto sys_fail;
	setsockopt(m->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6)
		setsockopt(m->fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	addr_text(&ss, where, sizeof(where));
	if (bind(m->fd, (struct sockaddr *)&ss, sl) || listen(m->fd, 64))
		goto sys_fail;
	sl = sizeof(ss);
	if (getsockname(m->fd, (struct sockaddr *)&ss, &sl) == 0)
		addr_text(&ss, where, sizeof(where)); /* the port picked for PORT 0 */

	/* The first snapshot, so that no scrape ever sees an empty page. */
	s->metrics = m;
	render_publish(s, ct_now_ns(CLOCK_MONOTONIC));

	/* Signals are the trace loop's: libmicrohttpd's threads inherit them blocked. */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	m->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
				      MHD_USE_ERROR_LOG,
				  0, NULL, NULL, handle, m, MHD_OPTION_LISTEN_SOCKET, m->fd,
				  MHD_OPTION_CONNECTION_LIMIT, (unsigned int)CT_METRICS_MAX_CONN,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)30, MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!m->mhd) {
		snprintf(err, errlen, "--metrics %s: libmicrohttpd could not start its server",
			 where);
		s->metrics = NULL;
		close(m->fd);
		ct_sbuf_free(&m->work);
		free(m->text);
		free(m);
		return -EIO;
	}
	fprintf(stderr, "metrics: serving http://%s/metrics\n", where);
	return 0;

sys_fail:
	rc = -errno;
	addr_text(&ss, where, sizeof(where));
	snprintf(err, errlen, "--metrics %s: cannot listen there: %s%s", where, strerror(-rc),
		 rc == -EADDRINUSE ? " (another server has this port: pick another)" : "");
	if (m->fd >= 0)
		close(m->fd);
	free(m);
	return rc;
}

void ct_metrics_stop(struct ct_session *s)
{
	struct ct_metrics *m = s->metrics;

	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->stopping = true;
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
	MHD_stop_daemon(m->mhd); /* joins its threads and closes the listening socket */
	pthread_cond_destroy(&m->cond);
	pthread_mutex_destroy(&m->lock);
	ct_sbuf_free(&m->work);
	free(m->text);
	free(m);
	s->metrics = NULL;
}
