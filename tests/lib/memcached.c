/*
 * A client of memcached's text protocol (memcached.h).
 */
#include "memcached.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int mc_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		close(fd);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

void mc_request(int fd, const char *req, size_t len, const char *end,
		char *buf, size_t size)
{
	size_t got = 0, off = 0;

	while (off < len) {
		ssize_t n = write(fd, req + off, len - off);

		cr_assert_gt(n, 0, "memcached write: %s", strerror(errno));
		off += (size_t)n;
	}
	buf[0] = '\0';
	while (got + 1 < size) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		cr_assert_eq(poll(&p, 1, 10000), 1, "memcached did not answer");
		n = read(fd, buf + got, size - 1 - got);
		cr_assert_gt(n, 0, "memcached closed the connection");
		got += (size_t)n;
		buf[got] = '\0';
		if (got >= strlen(end) && !strcmp(buf + got - strlen(end), end))
			return;
	}
	cr_assert_fail("memcached reply too long");
}

void mc_value(unsigned int k, char *v, size_t size)
{
	size_t i;

	for (i = 0; i + 1 < size; i++)
		v[i] = (char)('a' + (k * 7 + i) % 26);
	v[size - 1] = '\0';
}
