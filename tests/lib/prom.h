#ifndef MEMSNAP_TESTS_LIB_PROM_H
#define MEMSNAP_TESTS_LIB_PROM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * The other side of `memsnap exporter` in its tests: a small HTTP
 * client (also for the attacks on its listener), the exposition's
 * samples, `memsnap exporter` and the Prometheus side's daemons
 * (prometheus, prometheus-node-exporter) started on loopback ports of
 * their own with their output in a log, and PromQL over Prometheus's
 * HTTP API.  Nothing here sleeps to wait: every wait polls its
 * condition until a deadline.
 */

/* A loopback port that nothing listened on a moment ago (bound to port
 * 0 and closed). */
unsigned int free_port(void);

/* A TCP connection to 127.0.0.1:@port from address @from (NULL: the
 * kernel's choice; "127.0.0.2": another client of the loopback).  The
 * fd or -errno. */
int net_connect(unsigned int port, const char *from);

/* Write all of @buf (@len bytes) to @fd.  0 or -errno. */
int net_send(int fd, const void *buf, size_t len);

/* Read from @fd until EOF or @timeout_ms: malloc'ed, NUL-ended, its
 * length in *@len (may be NULL).  0, -ETIMEDOUT (what came is kept),
 * or -errno. */
int net_read_all(int fd, int timeout_ms, char **out, size_t *len);

/* @req on a new connection, then all of the reply.  0 or -errno. */
int net_exchange(unsigned int port, const void *req, size_t len,
		 int timeout_ms, char **reply);

/* GET @path over HTTP/1.0: the status (0: none) and the body
 * (malloc'ed).  0 or -errno. */
int http_get(unsigned int port, const char *path, int timeout_ms,
	     int *status, char **body);

/* The status code of the HTTP reply @reply, 0 if it is none. */
int http_status(const char *reply);

/*
 * The value of the first sample of metric @name (exactly) in exposition
 * @text whose label list holds every string of the NULL-ended @labels
 * ("pid=\"42\"", "part=\"heap_in_use\"").  0, or -ENOENT.
 */
int expo_value(const char *text, const char *name,
	       const char *const labels[], double *v);

/* The sum of the values of those samples. */
double expo_sum(const char *text, const char *name,
		const char *const labels[]);

/* The samples of @name in @text that hold every one of @labels. */
size_t expo_count(const char *text, const char *name,
		  const char *const labels[]);

/* A daemon of the test: @argv run with stdout and stderr to @log; it is
 * killed if the test's process dies first (a crash runs no .fini). */
struct daemon {
	pid_t pid;
	char log[512];
};

int daemon_start(struct daemon *d, char *const argv[], const char *log);

/* SIGTERM, then SIGKILL after @grace_ms; reaped.  Its exit status (128
 * + signal when killed by one), -1 when it was not running.  Safe to
 * call twice. */
int daemon_stop(struct daemon *d, int grace_ms);

/* What its log holds now (malloc'ed, "" when empty). */
char *daemon_log(const struct daemon *d);

/*
 * `memsnap exporter` ($MEMSNAP_BIN) with @args (NULL-ended) and
 * `--listen 127.0.0.1:0`, its stderr in @dir/exporter.log; waits up to
 * 30 s for its "serving http://127.0.0.1:PORT/metrics" line and puts
 * the port in *@port.  0 or -errno (its log then says why).
 */
int exporter_start(struct daemon *d, const char *dir,
		   const char *const args[], unsigned int *port);

/* Poll GET /-/ready of a Prometheus (or / of a node exporter) on @port
 * until it answers 200, at most @timeout_ms.  true when it did. */
bool http_wait_ready(unsigned int port, const char *path, int timeout_ms);

/*
 * PromQL instant query @expr against the Prometheus on @port: the value
 * of its one sample (a scalar, or a vector of one) in *@v.  0, -ENOENT
 * (no sample), -E2BIG (more than one), -EPROTO (Prometheus said it is
 * an error), -errno.
 */
int prom_query(unsigned int port, const char *expr, double *v);

/* The number of samples instant query @expr gives (-errno on error). */
int prom_count(unsigned int port, const char *expr);

/* Milliseconds of CLOCK_MONOTONIC. */
long prom_now_ms(void);

/* Does $MEMSNAP_BIN serve HTTP (built with libmicrohttpd)?  One built
 * without it (the static binary; a machine without libmicrohttpd-dev,
 * such as the arm64 guest) writes --textfile only, and says so in
 * --version.  need_http() skips the test when it does not. */
bool has_http(void);
void need_http(void);

#endif
