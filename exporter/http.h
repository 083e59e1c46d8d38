#ifndef MEMSNAP_EXPORTER_HTTP_H
#define MEMSNAP_EXPORTER_HTTP_H

#include "exporter/expo.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The exporter's HTTP server, over libmicrohttpd (Debian's
 * libmicrohttpd12): memsnap runs as root and parses no HTTP itself.
 * It answers GET and HEAD of two paths, /metrics (the exposition) and /
 * (a page that links to it); any other path is 404, any other method
 * 405, a request with a body 413, and the library answers malformed
 * requests itself (400, 414, 431).  Nothing a request carries (its
 * query, its headers) chooses or acts on a process: /metrics is one
 * scrape of the targets the command line chose.
 *
 * Bounds: HTTP_CONNECTIONS connections at once, HTTP_PER_IP from one
 * address (so that one client holding connections leaves the others
 * served), HTTP_REQUEST_BYTES for a request's line and headers, and a
 * connection idle for HTTP_IDLE_SECONDS is closed.  Everything runs on
 * the caller's thread, in http_run(): one scrape never overlaps
 * another, and no thread of memsnap's runs beside the one that
 * ptraces (a scrape borrows none: exporter/exporter.h).
 */
#define HTTP_CONNECTIONS 64
#define HTTP_PER_IP 8
#define HTTP_REQUEST_BYTES (16u << 10)
#define HTTP_IDLE_SECONDS 10

struct http;

/* What /metrics serves: one scrape's text, malloc'ed, into *@text and
 * *@len.  0, or -errno (the reply is then 500). */
struct http_handler {
	int (*metrics)(void *ctx, char **text, size_t *len);
	void *ctx;
};

/* Is the server compiled into this memsnap?  (The static binary has
 * none: libmicrohttpd would bring GnuTLS with it.) */
bool http_available(void);

/* "libmicrohttpd 0.9.75", or why there is none. */
const char *http_library(void);

/*
 * Listen on @listen ("127.0.0.1:9853", "[::1]:9853", "0.0.0.0:9853";
 * numeric, port 0 for any free one) and serve @h.  The address bound,
 * as "ADDR:PORT", into @where.  0, or -errno with one line in @why.
 */
int http_open(const char *listen, const struct http_handler *h,
	      struct http **out, char *where, size_t wsize, char *why,
	      size_t size);

/*
 * Wait at most @ms milliseconds for a connection, a request or a
 * signal, with @wait_mask the signal mask while waiting (as ppoll()
 * takes it: a caller blocks its signals, checks its flag, and passes
 * the mask that lets them in, so that one arriving just before the wait
 * is not slept through); then serve what is ready.  0, or -errno when
 * the server failed.
 */
int http_run(struct http *s, uint64_t ms, const sigset_t *wait_mask);

void http_close(struct http *s);

/* The server's own families: requests answered by status, connections
 * taken and open now. */
void http_render(const struct http *s, struct expo *x);

#endif
