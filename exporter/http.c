/*
 * The exporter's HTTP server over libmicrohttpd (exporter/http.h).
 * Built twice: with MEMSNAP_HTTP for the binary that links the library,
 * without it for the static one, where every function says there is no
 * server.
 */
#include "exporter/http.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#ifdef MEMSNAP_HTTP

#include "common/util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The statuses memsnap answers with itself, for the counter. */
static const unsigned int codes[] = { 200, 404, 405, 413, 500 };
#define CODES (sizeof(codes) / sizeof(codes[0]))

struct http {
	struct MHD_Daemon *d;
	int fd;
	struct http_handler h;
	uint64_t answered[CODES];
	uint64_t connections;
};

static const char index_page[] =
	"<!DOCTYPE html>\n"
	"<html><head><meta charset=\"utf-8\"><title>memsnap exporter</title>"
	"</head>\n<body><h1>memsnap exporter</h1>\n"
	"<p>The memory of each target process, broken down as "
	"<code>memsnap --pid PID explain</code> breaks it down: "
	"<a href=\"/metrics\">/metrics</a>.</p>\n</body></html>\n";

bool http_available(void)
{
	return true;
}

const char *http_library(void)
{
	static char name[64];

	snprintf(name, sizeof(name), "libmicrohttpd %s", MHD_get_version());
	return name;
}

static void count(struct http *s, unsigned int code)
{
	size_t i;

	for (i = 0; i < CODES; i++)
		if (codes[i] == code)
			s->answered[i]++;
}

/* Queue the reply @code with @body (@len bytes; @mode as libmicrohttpd
 * takes it: MUST_FREE gives it @body). */
static enum MHD_Result reply(struct http *s, struct MHD_Connection *c,
			     unsigned int code, const char *type, void *body,
			     size_t len, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(len, body, mode);
	if (!r) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	count(s, code);
	return ret;
}

static enum MHD_Result text(struct http *s, struct MHD_Connection *c,
			    unsigned int code, const char *msg)
{
	return reply(s, c, code, "text/plain; charset=utf-8", (void *)msg,
		     strlen(msg), MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct http *s = cls;
	const char *len, *te;
	char *body;
	size_t n;

	(void)version;
	(void)upload;
	(void)con_cls;
	/* No request carries a body: refused before any of it is read. */
	len = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
					  MHD_HTTP_HEADER_CONTENT_LENGTH);
	te = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
					 MHD_HTTP_HEADER_TRANSFER_ENCODING);
	if (*upload_size || te || (len && strcmp(len, "0")))
		return text(s, c, MHD_HTTP_CONTENT_TOO_LARGE,
			    "no request has a body here\n");
	if (strcmp(method, MHD_HTTP_METHOD_GET) &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD))
		return text(s, c, MHD_HTTP_METHOD_NOT_ALLOWED,
			    "GET /metrics\n");
	if (!strcmp(url, "/"))
		return reply(s, c, MHD_HTTP_OK, "text/html; charset=utf-8",
			     (void *)index_page, sizeof(index_page) - 1,
			     MHD_RESPMEM_PERSISTENT);
	if (strcmp(url, "/metrics"))
		return text(s, c, MHD_HTTP_NOT_FOUND,
			    "not found: GET /metrics\n");
	if (s->h.metrics(s->h.ctx, &body, &n))
		return text(s, c, MHD_HTTP_INTERNAL_SERVER_ERROR,
			    "the scrape failed\n");
	return reply(s, c, MHD_HTTP_OK,
		     "text/plain; version=0.0.4; charset=utf-8", body, n,
		     MHD_RESPMEM_MUST_FREE);
}

static void on_connection(void *cls, struct MHD_Connection *c,
			  void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct http *s = cls;

	(void)c;
	(void)socket_context;
	if (code == MHD_CONNECTION_NOTIFY_STARTED)
		s->connections++;
}

/* "ADDR:PORT" or "[ADDR]:PORT", numeric, into a bound, listening
 * socket. */
static int bind_listen(const char *listen_at, int *fd, char *why,
		       size_t size)
{
	struct addrinfo hints = {
		.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
		.ai_socktype = SOCK_STREAM,
	};
	const char *colon = strrchr(listen_at, ':');
	char host[128];
	struct addrinfo *ai;
	size_t n;
	int rc, one = 1;

	n = colon ? (size_t)(colon - listen_at) : 0;
	if (n >= 2 && listen_at[0] == '[' && listen_at[n - 1] == ']') {
		listen_at++;
		n -= 2;
	}
	if (!colon || !n || n >= sizeof(host) || !colon[1]) {
		snprintf(why, size, "'%s' is not ADDR:PORT (e.g. 127.0.0.1:9853)",
			 listen_at);
		return -EINVAL;
	}
	snprintf(host, sizeof(host), "%.*s", (int)n, listen_at);
	rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rc) {
		snprintf(why, size, "'%s:%s': %s", host, colon + 1,
			 gai_strerror(rc));
		return -EINVAL;
	}
	*fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		     0);
	rc = *fd < 0 ? -errno : 0;
	if (!rc) {
		setsockopt(*fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6)
			setsockopt(*fd, IPPROTO_IPV6, IPV6_V6ONLY, &one,
				   sizeof(one));
		if (bind(*fd, ai->ai_addr, ai->ai_addrlen) || listen(*fd, 64))
			rc = -errno;
	}
	freeaddrinfo(ai);
	if (rc) {
		snprintf(why, size, "listening on %s: %s", listen_at,
			 strerror(-rc));
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
	}
	return rc;
}

/* The address @fd is bound to, as "ADDR:PORT" or "[ADDR]:PORT". */
static void bound(int fd, char *where, size_t size)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char a[INET6_ADDRSTRLEN] = "?";

	if (getsockname(fd, (struct sockaddr *)&ss, &len)) {
		snprintf(where, size, "?");
		return;
	}
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof(a));
		snprintf(where, size, "[%s]:%u", a, ntohs(s6->sin6_port));
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &s4->sin_addr, a, sizeof(a));
		snprintf(where, size, "%s:%u", a, ntohs(s4->sin_port));
	}
}

int http_open(const char *listen_at, const struct http_handler *h,
	      struct http **out, char *where, size_t wsize, char *why,
	      size_t size)
{
	struct http *s = calloc(1, sizeof(*s));
	unsigned int flags = MHD_USE_EPOLL;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int rc;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->h = *h;
	rc = bind_listen(listen_at, &s->fd, why, size);
	if (rc) {
		free(s);
		return rc;
	}
	if (!getsockname(s->fd, (struct sockaddr *)&ss, &sl) &&
	    ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	s->d = MHD_start_daemon(
		flags, 0, NULL, NULL, on_request, s,
		MHD_OPTION_LISTEN_SOCKET, s->fd,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned int)HTTP_CONNECTIONS,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)HTTP_PER_IP,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)HTTP_IDLE_SECONDS,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_REQUEST_BYTES,
		MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
		MHD_OPTION_END);
	if (!s->d) {
		snprintf(why, size, "libmicrohttpd would not serve %s",
			 listen_at);
		close(s->fd);
		free(s);
		return -EIO;
	}
	bound(s->fd, where, wsize);
	*out = s;
	return 0;
}

int http_run(struct http *s, uint64_t ms, const sigset_t *wait_mask)
{
	const union MHD_DaemonInfo *info;
	MHD_UNSIGNED_LONG_LONG next;
	struct pollfd p = { .events = POLLIN };
	struct timespec ts;

	info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_EPOLL_FD);
	if (!info)
		return -EIO;
	p.fd = info->epoll_fd;
	/* the next connection that times out, if sooner */
	if (MHD_get_timeout(s->d, &next) == MHD_YES && next < ms)
		ms = next;
	ts.tv_sec = (time_t)(ms / 1000);
	ts.tv_nsec = (long)(ms % 1000) * 1000000;
	if (ppoll(&p, 1, &ts, wait_mask) < 0 && errno != EINTR)
		return -errno;
	return MHD_run(s->d) == MHD_YES ? 0 : -EIO;
}

void http_close(struct http *s)
{
	if (!s)
		return;
	MHD_stop_daemon(s->d);
	close(s->fd);
	free(s);
}

void http_render(const struct http *s, struct expo *x)
{
	static const char req[] = "memsnap_exporter_http_requests_total";
	const union MHD_DaemonInfo *info;
	size_t i;

	expo_family(x, req, "counter",
		    "HTTP requests memsnap answered, by status (malformed "
		    "ones libmicrohttpd refuses by itself are not counted).");
	for (i = 0; i < CODES; i++) {
		char code[8];

		snprintf(code, sizeof(code), "%u", codes[i]);
		expo_sample_u64(x, req, NULL, "code", code, s->answered[i]);
	}
	expo_family(x, "memsnap_exporter_http_connections_total", "counter",
		    "HTTP connections accepted.");
	expo_sample_u64(x, "memsnap_exporter_http_connections_total", NULL,
			NULL, NULL, s->connections);
	info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
	if (info) {
		expo_family(x, "memsnap_exporter_http_connections", "gauge",
			    "HTTP connections open now.");
		expo_sample_u64(x, "memsnap_exporter_http_connections", NULL,
				NULL, NULL, info->num_connections);
	}
}

#else /* !MEMSNAP_HTTP */

bool http_available(void)
{
	return false;
}

const char *http_library(void)
{
	return "not in this build (the static binary links no "
	       "libmicrohttpd: it would bring GnuTLS with it)";
}

int http_open(const char *listen_at, const struct http_handler *h,
	      struct http **out, char *where, size_t wsize, char *why,
	      size_t size)
{
	(void)listen_at;
	(void)h;
	*out = NULL;
	if (wsize)
		where[0] = '\0';
	snprintf(why, size,
		 "this memsnap has no HTTP server (the static binary links no libmicrohttpd): use --textfile PATH, or the dynamically linked memsnap");
	return -ENOSYS;
}

int http_run(struct http *s, uint64_t ms, const sigset_t *wait_mask)
{
	(void)s;
	(void)ms;
	(void)wait_mask;
	return -ENOSYS;
}

void http_close(struct http *s)
{
	(void)s;
}

void http_render(const struct http *s, struct expo *x)
{
	(void)s;
	(void)x;
}

#endif
