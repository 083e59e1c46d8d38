/*
 * common/seqpacket.h: a message and at most one descriptor beside it.
 * The receiver may be memsnap reading a child it does not trust: more
 * descriptors than one, or a message cut short, are refused and nothing
 * received stays open.
 */
#include "common/seqpacket.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static int sv[2];

static void setup(void)
{
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv),
		     0);
}

static void teardown(void)
{
	close(sv[0]);
	close(sv[1]);
}

TestSuite(seqpacket, .init = setup, .fini = teardown);

static size_t open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	size_t n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

Test(seqpacket, a_message_and_its_descriptor)
{
	struct stat a, b;
	char buf[16] = "";
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC), got;

	cr_assert_geq(fd, 0);
	cr_assert_eq(seqpacket_send(sv[0], "hello", 5, fd, 0), 0);
	cr_assert_eq(seqpacket_recv(sv[1], buf, sizeof(buf), &got), 5);
	cr_assert_str_eq(buf, "hello");
	cr_assert_geq(got, 0);
	cr_assert_neq(got, fd);
	cr_assert_eq(fstat(fd, &a), 0);
	cr_assert_eq(fstat(got, &b), 0);
	cr_assert(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	cr_assert_eq(fcntl(got, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	close(got);
	close(fd);
	/* and one without */
	cr_assert_eq(seqpacket_send(sv[0], "x", 1, -1, 0), 0);
	cr_assert_eq(seqpacket_recv(sv[1], buf, sizeof(buf), &got), 1);
	cr_assert_eq(got, -1);
}

/* Two descriptors in one message: refused, both closed. */
Test(seqpacket, more_than_one_descriptor_is_refused_and_closed)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(2 * sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = (void *)"x", .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf) };
	struct cmsghdr *c;
	int fds[2], got;
	size_t before;
	char buf[4];

	fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	fds[1] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	memset(&ctl, 0, sizeof(ctl));
	c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	cr_assert_eq(sendmsg(sv[0], &m, 0), 1);
	close(fds[0]);
	close(fds[1]);
	before = open_fds();
	cr_assert_eq(seqpacket_recv(sv[1], buf, sizeof(buf), &got), -EPROTO);
	cr_assert_eq(got, -1);
	cr_assert_eq(open_fds(), before, "a descriptor received stays open");
}

/* Longer than the buffer: refused, and its descriptor closed. */
Test(seqpacket, a_message_cut_short_is_refused)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC), got;
	char buf[4];
	size_t before;

	cr_assert_eq(seqpacket_send(sv[0], "too long", 8, fd, 0), 0);
	close(fd);
	before = open_fds();
	cr_assert_eq(seqpacket_recv(sv[1], buf, sizeof(buf), &got), -EMSGSIZE);
	cr_assert_eq(got, -1);
	cr_assert_eq(open_fds(), before, "a descriptor received stays open");
}

Test(seqpacket, the_other_end_gone)
{
	char buf[4];
	int got;

	cr_assert_eq(seqpacket_send(sv[0], "x", 1, -1, 0), 0);
	close(sv[0]);
	sv[0] = -1;
	/* what was sent before still comes, then the end */
	cr_assert_eq(seqpacket_recv(sv[1], buf, sizeof(buf), &got), 1);
	cr_assert_eq(seqpacket_recv(sv[1], buf, sizeof(buf), &got), 0);
	cr_assert_eq(seqpacket_send(sv[1], "x", 1, -1, 0), -EPIPE);
}
