#include "redis.h"
#include "fixture.h"
#include "notify.h"
#include "scratch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define REDIS_BIN "/usr/bin/redis-server"

int redis_start(struct redis *r, const char *malloc_conf)
{
	char notify[96], conf[96];
	int nfd, rc;

	memset(r, 0, sizeof(*r));
	r->pid = -1;
	if (access(REDIS_BIN, X_OK))
		return -ENOENT;
	if (malloc_conf && strstr(malloc_conf, "prof"))
		need_jemalloc_profiling();
	/* in /tmp itself, whatever $TMPDIR: a socket's path must be short */
	rc = scratch_make("/tmp/memsnap-redis", r->dir, sizeof(r->dir));
	if (rc)
		return rc;
	snprintf(r->socket, sizeof(r->socket), "%s/redis.sock", r->dir);
	snprintf(notify, sizeof(notify), "%s/notify.sock", r->dir);
	nfd = notify_socket(notify);
	if (nfd < 0) {
		scratch_cleanup(r->dir);
		return nfd;
	}
	r->pid = fork();
	if (r->pid < 0) {
		rc = -errno;
		close(nfd);
		redis_stop(r);
		return rc;
	}
	if (r->pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(null, 0);
		dup2(null, 1);
		setenv("NOTIFY_SOCKET", notify, 1);
		if (malloc_conf)
			setenv("MALLOC_CONF", malloc_conf, 1);
		snprintf(conf, sizeof(conf), "%s", r->socket);
		execl(REDIS_BIN, REDIS_BIN, "--port", "0", "--unixsocket", conf,
		      "--dir", r->dir, "--save", "", "--appendonly", "no",
		      "--supervised", "systemd", "--daemonize", "no",
		      "--loglevel", "warning", (char *)NULL);
		_exit(127);
	}
	/* redis profiling densely takes a backtrace per sampled
	 * allocation: under arm64 emulation on a busy host its start
	 * passed 20 s */
	rc = notify_wait_ready(nfd, 90000);
	close(nfd);
	if (rc)
		redis_stop(r);
	return rc;
}

/* A small /proc file as one string, or -errno. */
static int read_small(const char *path, char *buf, size_t size)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

int redis_connect(const struct redis *r)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd, rc;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", r->socket);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

/* All @len bytes at @buf to @fd (no SIGPIPE should redis be gone). */
static int send_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int redis_ask(int fd, const char *cmd, char *reply, size_t size)
{
	char buf[4096];
	size_t got = 0;
	char *nl;
	int rc;

	rc = send_all(fd, cmd, strlen(cmd));
	if (!rc)
		rc = send_all(fd, "\r\n", 2);
	if (rc)
		return rc;
	/* Enough for a status line or a small bulk reply. */
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		/* a bound, not a wait: see redis_start() */
		if (poll(&p, 1, 45000) <= 0)
			return -ETIMEDOUT;
		n = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (n <= 0)
			return n ? -errno : -EPIPE;
		got += (size_t)n;
		buf[got] = '\0';
		nl = strstr(buf, "\r\n");
		if (!nl)
			continue;
		if (buf[0] != '$' || !strcmp(buf, "$-1\r\n"))
			break;
		if (strstr(nl + 2, "\r\n"))
			break;
	}
	if (buf[0] == '$' && strcmp(buf, "$-1\r\n")) {
		char *v = strstr(buf, "\r\n") + 2;

		v[strcspn(v, "\r")] = '\0';
		snprintf(reply, size, "%s", v);
	} else {
		buf[strcspn(buf, "\r")] = '\0';
		snprintf(reply, size, "%s", buf);
	}
	return 0;
}

int redis_command(const struct redis *r, const char *cmd, char *reply,
		  size_t size)
{
	int fd = redis_connect(r), rc;

	if (fd < 0)
		return fd;
	rc = redis_ask(fd, cmd, reply, size);
	close(fd);
	return rc;
}

int redis_set_keys(const struct redis *r, const char *prefix,
		   unsigned int from, unsigned int to, const char *value)
{
	size_t vlen = strlen(value), size = vlen + 160, got = 0, i;
	unsigned int n, replies = 0;
	char *cmd = malloc(size), buf[4096];
	int fd, rc = 0;

	if (!cmd)
		return -ENOMEM;
	fd = redis_connect(r);
	if (fd < 0) {
		free(cmd);
		return fd;
	}
	for (n = from; n < to && !rc; n++) {
		char key[96];
		int len;

		snprintf(key, sizeof(key), "%s:%u", prefix, n);
		len = snprintf(cmd, size, "*3\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n"
			       "$%zu\r\n", strlen(key), key, vlen);
		memcpy(cmd + len, value, vlen);
		memcpy(cmd + len + vlen, "\r\n", 2);
		rc = send_all(fd, cmd, (size_t)len + vlen + 2);
	}
	/* then a "+OK\r\n" for each */
	while (!rc && replies < to - from) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t k;

		/* a bound, not a wait: see redis_start() */
		if (poll(&p, 1, 45000) <= 0) {
			rc = -ETIMEDOUT;
			break;
		}
		k = read(fd, buf + got, sizeof(buf) - got);
		if (k <= 0) {
			rc = k ? -errno : -EPIPE;
			break;
		}
		got += (size_t)k;
		for (i = 0; got - i >= 5 && replies < to - from; i += 5) {
			if (memcmp(buf + i, "+OK\r\n", 5)) {
				rc = -EPROTO;
				break;
			}
			replies++;
		}
		memmove(buf, buf + i, got - i);
		got -= i;
	}
	close(fd);
	free(cmd);
	return rc;
}

const char *redis_why(const struct redis *r, int rc, char *buf,
		      size_t size)
{
	char path[64], stat[512] = "", wchan[64] = "";
	const char *state;
	char *close_paren;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)r->pid);
	if (read_small(path, stat, sizeof(stat)) < 0) {
		snprintf(buf, size, "%s; redis-server %d is gone",
			 strerror(-rc), (int)r->pid);
		return buf;
	}
	/* the state follows the last ')': the name may hold any byte */
	close_paren = strrchr(stat, ')');
	state = close_paren && close_paren[1] ? close_paren + 2 : "?";
	snprintf(path, sizeof(path), "/proc/%d/wchan", (int)r->pid);
	read_small(path, wchan, sizeof(wchan));
	snprintf(buf, size, "%s; redis-server %d is %c in %s", strerror(-rc),
		 (int)r->pid, *state, *wchan ? wchan : "?");
	return buf;
}

bool redis_alive(const struct redis *r)
{
	char reply[64];

	return !redis_command(r, "PING", reply, sizeof(reply)) &&
	       !strcmp(reply, "+PONG");
}

void redis_stop(struct redis *r)
{
	if (r->pid > 0) {
		kill(r->pid, SIGKILL);
		while (waitpid(r->pid, NULL, 0) < 0 && errno == EINTR)
			;
		r->pid = -1;
	}
	/* its sockets, and whatever else it wrote there */
	scratch_cleanup(r->dir);
}
