/*
 * The other side of `memsnap exporter` in its tests (tests/lib/prom.h).
 */
#include "prom.h"
#include "fixture.h"

#include <criterion/criterion.h>


#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

long prom_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A short pause between two polls of a condition (not a wait for it). */
static void poll_pause(void)
{
	struct timespec ts = { .tv_nsec = 50 * 1000 * 1000 };

	nanosleep(&ts, NULL);
}

unsigned int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	unsigned int port = 0;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof(a)) &&
	    !getsockname(fd, (struct sockaddr *)&a, &len))
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

int net_connect(unsigned int port, const char *from)
{
	struct sockaddr_in a = { .sin_family = AF_INET }, src = a;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = 0;

	if (fd < 0)
		return -errno;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (from) {
		inet_pton(AF_INET, from, &src.sin_addr);
		if (bind(fd, (struct sockaddr *)&src, sizeof(src)))
			rc = -errno;
	}
	if (!rc && connect(fd, (struct sockaddr *)&a, sizeof(a)))
		rc = -errno;
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

int net_send(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int net_read_all(int fd, int timeout_ms, char **out, size_t *lenp)
{
	long deadline = prom_now_ms() + timeout_ms;
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		long left = deadline - prom_now_ms();
		ssize_t n;

		if (left <= 0) {
			rc = -ETIMEDOUT;
			break;
		}
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		if (len + 1 >= cap) {
			char *nb = realloc(buf, cap * 2);

			if (!nb) {
				rc = -ENOMEM;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == ECONNRESET)
			break;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	*out = buf;
	if (lenp)
		*lenp = len;
	return rc;
}

int net_exchange(unsigned int port, const void *req, size_t len,
		 int timeout_ms, char **reply)
{
	int fd = net_connect(port, NULL), rc;

	*reply = NULL;
	if (fd < 0)
		return fd;
	rc = net_send(fd, req, len);
	if (!rc)
		rc = net_read_all(fd, timeout_ms, reply, NULL);
	close(fd);
	return rc;
}

int http_status(const char *reply)
{
	int code = 0;

	if (reply && sscanf(reply, "HTTP/1.%*d %d", &code) != 1)
		code = 0;
	return code;
}

int http_get(unsigned int port, const char *path, int timeout_ms,
	     int *status, char **body)
{
	char req[4096], *reply = NULL, *b;
	int rc;

	*status = 0;
	*body = NULL;
	snprintf(req, sizeof(req),
		 "GET %s HTTP/1.0\r\nHost: 127.0.0.1:%u\r\n\r\n", path, port);
	rc = net_exchange(port, req, strlen(req), timeout_ms, &reply);
	if (rc) {
		free(reply);
		return rc;
	}
	*status = http_status(reply);
	b = strstr(reply, "\r\n\r\n");
	*body = strdup(b ? b + 4 : "");
	free(reply);
	return *body ? 0 : -ENOMEM;
}

/* The sample line of @name at @p holding all of @labels, its value. */
static bool sample_at(const char *p, const char *name,
		      const char *const labels[], double *v)
{
	size_t n = strlen(name), line = strcspn(p, "\n"), i;
	const char *sp;

	if (strncmp(p, name, n) || (p[n] != '{' && p[n] != ' '))
		return false;
	for (i = 0; labels && labels[i]; i++) {
		const char *hit = strstr(p, labels[i]);

		if (!hit || hit >= p + line)
			return false;
	}
	sp = p + line;
	while (sp > p && sp[-1] != ' ')
		sp--;
	if (v)
		*v = strtod(sp, NULL);
	return true;
}

int expo_value(const char *text, const char *name,
	       const char *const labels[], double *v)
{
	const char *p = text;

	while (p && *p) {
		if (sample_at(p, name, labels, v))
			return 0;
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	return -ENOENT;
}

double expo_sum(const char *text, const char *name,
		const char *const labels[])
{
	const char *p = text;
	double sum = 0, v;

	while (p && *p) {
		if (sample_at(p, name, labels, &v))
			sum += v;
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	return sum;
}

size_t expo_count(const char *text, const char *name,
		  const char *const labels[])
{
	const char *p = text;
	size_t n = 0;

	while (p && *p) {
		n += sample_at(p, name, labels, NULL);
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	return n;
}

int daemon_start(struct daemon *d, char *const argv[], const char *log)
{
	pid_t pid;
	int fd;

	snprintf(d->log, sizeof(d->log), "%s", log);
	fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		/* a test that crashes runs no .fini: the daemon goes with it
		 * rather than serve on for ever */
		prctl(PR_SET_PDEATHSIG, SIGKILL);

		if (null < 0 || dup2(null, 0) < 0 || dup2(fd, 1) < 0 ||
		    dup2(fd, 2) < 0)
			_exit(127);
		/* the test's fixture pipes stay the test's */
		execv(argv[0], argv);
		_exit(127);
	}
	close(fd);
	if (pid < 0)
		return -errno;
	d->pid = pid;
	return 0;
}

int daemon_stop(struct daemon *d, int grace_ms)
{
	long deadline = prom_now_ms() + grace_ms;
	int st = 0;
	pid_t w;

	if (d->pid <= 0)
		return -1;
	kill(d->pid, SIGTERM);
	while ((w = waitpid(d->pid, &st, WNOHANG)) == 0 &&
	       prom_now_ms() < deadline)
		poll_pause();
	if (w == 0) {
		kill(d->pid, SIGKILL);
		waitpid(d->pid, &st, 0);
	}
	d->pid = -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

char *daemon_log(const struct daemon *d)
{
	char *out = NULL;
	int fd = open(d->log, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		net_read_all(fd, 1000, &out, NULL);
		close(fd);
	}
	return out ? out : strdup("");
}

int exporter_start(struct daemon *d, const char *dir,
		   const char *const args[], unsigned int *port)
{
	const char *bin = getenv("MEMSNAP_BIN");
	char *argv[64], log[512];
	long deadline;
	size_t n = 0, i;
	int rc;

	*port = 0;
	d->pid = -1;
	argv[n++] = (char *)(bin ? bin : "./memsnap");
	argv[n++] = (char *)"exporter";
	argv[n++] = (char *)"--listen";
	argv[n++] = (char *)"127.0.0.1:0";
	for (i = 0; args[i] && n + 1 < sizeof(argv) / sizeof(argv[0]); i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	snprintf(log, sizeof(log), "%s/exporter.log", dir);
	rc = daemon_start(d, argv, log);
	if (rc)
		return rc;
	deadline = prom_now_ms() + 30000;
	while (prom_now_ms() < deadline) {
		char *text = daemon_log(d);
		const char *at = strstr(text, "serving http://127.0.0.1:");

		if (at) {
			*port = (unsigned int)strtoul(at + 25, NULL, 10);
			free(text);
			return *port ? 0 : -EPROTO;
		}
		free(text);
		if (waitpid(d->pid, NULL, WNOHANG) == d->pid) {
			d->pid = -1;
			return -ECHILD;
		}
		poll_pause();
	}
	return -ETIMEDOUT;
}

bool http_wait_ready(unsigned int port, const char *path, int timeout_ms)
{
	long deadline = prom_now_ms() + timeout_ms;

	while (prom_now_ms() < deadline) {
		char *body = NULL;
		int status = 0;

		http_get(port, path, 2000, &status, &body);
		free(body);
		if (status == 200)
			return true;
		poll_pause();
	}
	return false;
}

static void url_encode(const char *s, char *out, size_t size)
{
	size_t n = 0;

	for (; *s && n + 4 < size; s++) {
		unsigned char c = (unsigned char)*s;

		if (isalnum(c) || strchr("-_.~", c))
			out[n++] = (char)c;
		else
			n += (size_t)snprintf(out + n, size - n, "%%%02X", c);
	}
	out[n] = '\0';
}

/* The values of the samples in a query's JSON reply, at most @max. */
static int query(unsigned int port, const char *expr, double *v, int max)
{
	char path[8192], enc[6000], *body = NULL;
	const char *p, *key;
	int status, rc, n = 0;

	url_encode(expr, enc, sizeof(enc));
	snprintf(path, sizeof(path), "/api/v1/query?query=%s", enc);
	rc = http_get(port, path, 10000, &status, &body);
	if (rc)
		return rc;
	if (status != 200 || !strstr(body, "\"status\":\"success\"")) {
		fprintf(stderr, "prometheus: %s: %d %s\n", expr, status, body);
		free(body);
		return -EPROTO;
	}
	/* a vector: "value":[T,"V"] per sample; a scalar: "result":[T,"V"] */
	key = strstr(body, "\"resultType\":\"scalar\"") ? "\"result\":["
							  : "\"value\":[";
	for (p = strstr(body, key); p; p = strstr(p, key)) {
		const char *q = strstr(p, ",\"");

		if (!q)
			break;
		if (n < max)
			v[n] = strtod(q + 2, NULL);
		n++;
		p = q + 2;
	}
	free(body);
	return n;
}

int prom_query(unsigned int port, const char *expr, double *v)
{
	double vals[2];
	int n = query(port, expr, vals, 2);

	if (n < 0)
		return n;
	if (n == 0)
		return -ENOENT;
	if (n > 1)
		return -E2BIG;
	*v = vals[0];
	return 0;
}

int prom_count(unsigned int port, const char *expr)
{
	double vals[1];

	return query(port, expr, vals, 1);
}

/* Does this memsnap serve HTTP (built with libmicrohttpd)?  A build
 * without it (the static binary, a machine without libmicrohttpd-dev:
 * the arm64 guest) writes --textfile only, and says so. */
bool has_http(void)
{
	const char *args[] = { "--version", NULL };
	struct run r;
	bool yes;

	cr_assert_eq(run_memsnap(&r, args), 0);
	yes = strstr(r.out, "exporter: HTTP") != NULL;
	run_free(&r);
	return yes;
}

void need_http(void)
{
	if (!has_http())
		cr_skip_test("this memsnap has no HTTP server (built without "
			     "libmicrohttpd-dev)");
}

/* Start fixture @name with @args (NULL-ended) as fx[@i]. */
