/*
 * report's child (profile/box.h): report_work() in a process with no
 * rights, and what it needs from memsnap over the socket
 * (profile/box_wire.h).  It opens nothing: each file comes from memsnap
 * as a descriptor, through the opener below (symbols/opener.h); each
 * line it would print and each byte of the report go to memsnap.
 *
 * The child trusts memsnap: an answer it cannot read means memsnap is
 * gone, and the child ends (status 3) without a word.
 */
#include "profile/box_internal.h"

#include "profile/box_wire.h"
#include "common/sandbox.h"
#include "common/seqpacket.h"
#include "symbols/opener.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What the child has of memsnap. */
struct report_child {
	int fd;			/* the socket */
	struct opener op;	/* asks memsnap */
	unsigned char *msg;	/* RW_MSG_MAX: a message being sent */
	char *obuf;		/* the report's stdio buffer: RW_DATA_MAX */
};

/*
 * memsnap is gone, or said what it never says: nothing more to do.
 * (sandbox_exit() does not return.)
 */
static void lost(void)
{
	sandbox_exit(3);
}

static void send_or_die(struct report_child *c, uint32_t type, int32_t val,
			const void *bytes, size_t len, int fd)
{
	struct rw_head h = { .type = type, .val = val };

	if (len > RW_DATA_MAX)
		lost();
	memcpy(c->msg, &h, sizeof(h));
	if (len)
		memcpy(c->msg + sizeof(h), bytes, len);
	if (seqpacket_send(c->fd, c->msg, sizeof(h) + len, fd, 0))
		lost();
}

/*
 * A request and its FD answer: 0 with the descriptor in *@fd, RW_SAME,
 * or -errno.  (@give: a descriptor sent with the request, or -1.)
 */
static int ask(struct report_child *c, uint32_t type, int32_t val,
	       const void *bytes, size_t len, int give, int *fd)
{
	struct rw_head h;
	ssize_t n;

	send_or_die(c, type, val, bytes, len, give);
	n = seqpacket_recv(c->fd, &h, sizeof(h), fd);
	if (n != (ssize_t)sizeof(h) || h.type != RW_FD ||
	    (h.val == 0) != (*fd >= 0) || h.val > RW_SAME || h.val < -4095)
		lost();
	return h.val;
}

int report_child_input(struct report_child *c, size_t k)
{
	int fd = -1;

	if (k > INT32_MAX || ask(c, RW_INPUT, (int32_t)k, NULL, 0, -1, &fd))
		lost();	/* memsnap has none: it never hands it twice */
	return fd;
}

static int child_open(struct opener *op, const char *path, unsigned int how,
		      struct stat *st)
{
	struct report_child *c = op->arg;
	size_t len = strlen(path);
	int fd, rc;

	if (!len || len >= PATH_MAX)
		return -ENAMETOOLONG;
	rc = ask(c, RW_OPEN, (int32_t)how, path, len, -1, &fd);
	if (rc)
		return rc == RW_SAME ? -EPROTO : rc;
	if (fstat(fd, st)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

static int child_steady(struct opener *op, int fd, uint64_t max)
{
	struct report_child *c = op->arg;
	int copy, rc = ask(c, RW_STEADY, 0, &max, sizeof(max), fd, &copy);

	if (rc == RW_SAME)
		return fd;
	close(fd);
	return rc ? rc : copy;
}

static int child_debuginfod(struct opener *op, const unsigned char *id,
			    size_t len)
{
	struct report_child *c = op->arg;
	int fd, rc;

	if (!len || len > OPENER_ID_MAX)
		return -ENOENT;
	rc = ask(c, RW_DEBUGINFOD, 0, id, len, -1, &fd);
	if (rc)
		return rc == RW_SAME ? -EPROTO : rc;
	return fd;
}

struct opener *report_child_opener(struct report_child *c)
{
	return &c->op;
}

void report_child_progress(struct report_child *c, size_t objects)
{
	send_or_die(c, RW_PROGRESS,
		    objects > INT32_MAX ? INT32_MAX : (int32_t)objects, NULL, 0,
		    -1);
}

static void line(struct report_child *c, uint32_t type, int32_t val,
		 const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));

static void line(struct report_child *c, uint32_t type, int32_t val,
		 const char *fmt, va_list ap)
{
	char buf[RW_TEXT_MAX];
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);

	if (n < 0)
		n = 0;
	send_or_die(c, type, val, buf,
		    (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1, -1);
}

void report_child_warning(struct report_child *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	line(c, RW_WARNING, 0, fmt, ap);
	va_end(ap);
}

int report_child_error(struct report_child *c, int code, const char *fmt,
		       ...)
{
	va_list ap;

	va_start(ap, fmt);
	line(c, RW_ERROR, code, fmt, ap);
	va_end(ap);
	return code;
}

void report_child_skip(struct report_child *c, size_t k)
{
	send_or_die(c, RW_SKIP, k > INT32_MAX ? INT32_MAX : (int32_t)k, NULL,
		    0, -1);
}

/* stdio's write for the report: DATA messages. */
static ssize_t cookie_write(void *arg, const char *buf, size_t size)
{
	struct report_child *c = arg;
	size_t done = 0;

	while (done < size) {
		size_t n = size - done < RW_DATA_MAX ? size - done : RW_DATA_MAX;

		send_or_die(c, RW_DATA, 0, buf + done, n, -1);
		done += n;
	}
	return (ssize_t)size;
}

FILE *report_child_output(struct report_child *c, size_t k)
{
	static const cookie_io_functions_t io = { .write = cookie_write };
	FILE *f;

	send_or_die(c, RW_BEGIN, k > INT32_MAX ? INT32_MAX : (int32_t)k, NULL,
		    0, -1);
	f = fopencookie(c, "w", io);
	if (f && setvbuf(f, c->obuf, _IOFBF, RW_DATA_MAX)) {
		fclose(f);
		f = NULL;
	}
	return f;
}

int report_child_output_end(struct report_child *c, FILE *f, int rc)
{
	if (f && fclose(f) && !rc)
		rc = -EIO;
	if (rc < -4095 || rc > 0)
		rc = -EIO;
	send_or_die(c, RW_END, rc, NULL, 0, -1);
	return rc ? BOX_FAILED : 0;
}

int report_child_serve(int fd, void *arg)
{
	/* one child a process: in its own copy of memsnap's memory */
	static unsigned char msg[RW_MSG_MAX];
	static char obuf[RW_DATA_MAX];
	struct report_child c = {
		.fd = fd,
		.op = { .open = child_open, .steady = child_steady,
			.debuginfod = child_debuginfod, .arg = &c },
		.msg = msg,
		.obuf = obuf,
	};

	return report_work(&c, arg);
}
