/*
 * Messages with a descriptor (common/seqpacket.h).  The receiver may be
 * memsnap reading a child it does not trust: whatever the control data
 * holds beyond one SCM_RIGHTS descriptor is closed and refused, and so
 * is a message or control data cut short.
 */
#include "common/seqpacket.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int seqpacket_send(int sock, const void *buf, size_t len, int fd, int flags)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (fd >= 0) {
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.buf;
		m.msg_controllen = sizeof(ctl.buf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	do
		n = sendmsg(sock, &m, flags | MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EMSGSIZE;
}

/* Close every descriptor in @m's control data. */
static void close_passed(struct msghdr *m)
{
	struct cmsghdr *c;

	for (c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		size_t i, n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0))
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			close(fd);
		}
	}
}

ssize_t seqpacket_recv(int sock, void *buf, size_t size, int *fd)
{
	/* room for more than one: a second one is seen, and closed */
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = size };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf) };
	struct cmsghdr *c;
	ssize_t n;

	*fd = -1;
	do
		n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		close_passed(&m);
		return m.msg_flags & MSG_TRUNC ? -EMSGSIZE : -EPROTO;
	}
	c = CMSG_FIRSTHDR(&m);
	if (!c)
		return n;
	if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
	    c->cmsg_len != CMSG_LEN(sizeof(int)) || CMSG_NXTHDR(&m, c)) {
		close_passed(&m);
		return -EPROTO;
	}
	memcpy(fd, CMSG_DATA(c), sizeof(int));
	return n;
}
