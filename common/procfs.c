#include "common/procfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

int proc_open(pid_t pid, const char *rel, int flags)
{
	char path[64 + PATH_MAX];
	int fd;

	if ((size_t)snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid,
			     rel) >= sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, flags | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int proc_read_small(pid_t pid, const char *rel, char *buf, size_t size,
		    size_t *len)
{
	size_t got = 0;
	ssize_t n;
	int fd, rc = 0;

	if (size == 0)
		return -EINVAL;
	fd = proc_open(pid, rel, O_RDONLY);
	if (fd < 0)
		return fd;
	while (got < size - 1) {
		n = read(fd, buf + got, size - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	/* A process that died between open and read gives ESRCH. */
	if (rc == -ESRCH)
		rc = -ENOENT;
	buf[got] = '\0';
	if (len)
		*len = got;
	return rc;
}

int proc_read_mem(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { .iov_base = buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr,
				.iov_len = len };
	ssize_t n;

	if (len == 0)
		return 0;
	n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

int proc_write_mem(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec local = { .iov_base = (void *)buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr,
				.iov_len = len };
	ssize_t n;

	if (len == 0)
		return 0;
	n = process_vm_writev(pid, &local, 1, &remote, 1, 0);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

int proc_read_cstr(pid_t pid, uint64_t addr, char *buf, size_t size)
{
	size_t got = 0;

	while (got < size) {
		/* Never cross a page boundary in one read. */
		size_t chunk = 4096 - ((addr + got) & 4095);
		char *nul;
		int rc;

		if (chunk > size - got)
			chunk = size - got;
		rc = proc_read_mem(pid, addr + got, buf + got, chunk);
		if (rc)
			return rc;
		nul = memchr(buf + got, '\0', chunk);
		if (nul)
			return 0;
		got += chunk;
	}
	if (size)
		buf[size - 1] = '\0';
	return -ENAMETOOLONG;
}
