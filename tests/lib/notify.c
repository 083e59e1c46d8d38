/*
 * The systemd readiness protocol, server side, for the tests that start
 * a real server (redis, mariadbd): it says "READY=1" on $NOTIFY_SOCKET.
 */
#include "notify.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int notify_socket(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a))) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

int notify_wait_ready(int fd, int timeout_ms)
{
	char buf[512];

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;
		int rc = poll(&p, 1, timeout_ms);

		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0)
			return rc ? -errno : -ETIMEDOUT;
		n = recv(fd, buf, sizeof(buf) - 1, 0);
		if (n < 0)
			return -errno;
		buf[n] = '\0';
		if (strstr(buf, "READY=1"))
			return 0;
	}
}
