/*
 * The exporter's hold on a process (exporter/exporter_internal.h,
 * struct pin): proc/pin.h's pin and the /proc/PID directory it proves,
 * and /proc/PID/stat read through it.
 */
#include "exporter/exporter_internal.h"

#include "common/fsio.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define PF_KTHREAD 0x00200000

int pin_stat_parse(const char *text, size_t len, struct pin_stat *st)
{
	/* fields after comm, from the state (field 3) on */
	enum { STATE, FLAGS = 6, THREADS = 17, START = 19, RSS = 21 };
	const char *open_ = memchr(text, '(', len), *close_ = NULL, *p;
	const char *end = text + len;
	uint64_t v[RSS + 1] = { 0 };
	size_t i, n;

	memset(st, 0, sizeof(*st));
	for (p = text; p < end; p++)
		if (*p == ')')
			close_ = p;
	if (!open_ || !close_ || close_ < open_ || close_ + 2 >= end)
		return -EINVAL;
	n = (size_t)(close_ - open_ - 1);
	if (n >= sizeof(st->comm))
		n = sizeof(st->comm) - 1;
	memcpy(st->comm, open_ + 1, n);
	st->comm[n] = '\0';
	p = close_ + 2;
	st->state = *p;
	for (i = 1; i <= RSS; i++) {
		uint64_t x = 0;

		while (p < end && *p != ' ')
			p++;
		if (p >= end)
			return -EINVAL;
		p++;
		if (p < end && *p == '-')	/* nice, priority: not ours */
			p++;
		if (p >= end || *p < '0' || *p > '9')
			return -EINVAL;
		while (p < end && *p >= '0' && *p <= '9') {
			if (x > (UINT64_MAX - 9) / 10)
				return -EINVAL;
			x = x * 10 + (uint64_t)(*p++ - '0');
		}
		v[i] = x;
	}
	st->kernel_thread = (v[FLAGS] & PF_KTHREAD) != 0;
	st->threads = (unsigned long)v[THREADS];
	st->start_time = v[START];
	st->rss_pages = v[RSS];
	return 0;
}

bool pin_alive(const struct pin *p)
{
	return !proc_pin_check(&p->proc);
}

static int read_stat(int dir, struct pin_stat *st)
{
	char buf[1024];
	ssize_t n;
	int fd;

	fd = openat(dir, "stat", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	n = read_in_full(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return (int)n;
	buf[n] = '\0';
	return pin_stat_parse(buf, (size_t)n, st);
}

int pin_stat_read(const struct pin *p, struct pin_stat *st)
{
	int rc = read_stat(p->dir, st);

	return pin_alive(p) ? rc : -ESRCH;
}

int pin_open(pid_t pid, struct pin *p, struct pin_stat *st)
{
	int rc;

	p->dir = -1;
	rc = proc_pin_open(pid, &p->proc);
	if (rc)
		return rc;
	p->dir = proc_pin_dir(&p->proc);
	if (p->dir < 0) {
		rc = p->dir;
		goto out_pin;
	}
	rc = pin_stat_read(p, st);
	if (rc)
		goto out_dir;
	return 0;
out_dir:
	close(p->dir);
	p->dir = -1;
out_pin:
	proc_pin_close(&p->proc);
	return rc;
}

void pin_exe(const struct pin *p, char *buf, size_t size)
{
	ssize_t n = readlinkat(p->dir, "exe", buf, size - 1);

	buf[n > 0 ? (size_t)n : 0] = '\0';
	if (!pin_alive(p))
		buf[0] = '\0';
}

void pin_close(struct pin *p)
{
	if (p->dir >= 0)
		close(p->dir);
	p->dir = -1;
	proc_pin_close(&p->proc);
}
