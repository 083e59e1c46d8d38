#include "common/fsio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/syscall.h>
#include <unistd.h>

/* One loop for both: at @off with pread(), or at the file position. */
static ssize_t fill(int fd, void *buf, size_t len, bool at, off_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = at ? pread(fd, (char *)buf + got, len - got,
				       off + (off_t)got)
			       : read(fd, (char *)buf + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (!n)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

ssize_t read_in_full(int fd, void *buf, size_t len)
{
	return fill(fd, buf, len, false, 0);
}

ssize_t pread_in_full(int fd, void *buf, size_t len, off_t off)
{
	return fill(fd, buf, len, true, off);
}

int write_in_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (!n)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int fd_mount_id(int fd, uint64_t *id)
{
	struct statx stx;

	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID,
		  &stx))
		return -errno;
	if (!(stx.stx_mask & STATX_MNT_ID))
		return -ENOSYS;	/* before Linux 5.8: not checked */
	*id = stx.stx_mnt_id;
	return 0;
}

/* Before openat2: one component at a time, never through a symlink. */
static int walk_in_root(int rootfd, const char *path, int flags,
			unsigned int how)
{
	const char *p = path;
	char comp[NAME_MAX + 1];
	int dir, next;

	dir = fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
	if (dir < 0)
		return -errno;
	for (;;) {
		size_t n;
		bool last;
		uint64_t a, b;

		p += strspn(p, "/");
		n = strcspn(p, "/");
		if (!n) {
			/* "/" or a trailing slash: the directory itself */
			next = openat(dir, ".", flags | O_CLOEXEC);
			close(dir);
			return next < 0 ? -errno : next;
		}
		if (n > NAME_MAX) {
			close(dir);
			return -ENAMETOOLONG;
		}
		if (n == 2 && !strncmp(p, "..", 2)) {
			close(dir);
			return -EXDEV;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		p += n;
		last = !p[strspn(p, "/")];
		next = openat(dir, comp,
			      last ? flags | O_NOFOLLOW | O_CLOEXEC
				   : O_PATH | O_DIRECTORY | O_NOFOLLOW |
					     O_CLOEXEC);
		if (next < 0) {
			int e = errno;

			close(dir);
			/* O_NOFOLLOW on a symlink: ELOOP, or ENOTDIR for a
			 * directory component */
			return -e;
		}
		if ((how & FSIO_NO_XDEV) && !fd_mount_id(dir, &a) &&
		    !fd_mount_id(next, &b) && a != b) {
			close(next);
			close(dir);
			return -EXDEV;
		}
		close(dir);
		if (last)
			return next;
		dir = next;
	}
}

int open_in_root(int rootfd, const char *path, int flags, unsigned int how)
{
	struct open_how oh = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd;

	if (how & FSIO_NO_SYMLINKS)
		oh.resolve |= RESOLVE_NO_SYMLINKS;
	if (how & FSIO_NO_XDEV)
		oh.resolve |= RESOLVE_NO_XDEV;
	if (how & FSIO_NO_SYMLINKS)
		oh.flags |= O_NOFOLLOW;
	while (*path == '/')
		path++;
	if (!*path)
		path = ".";
	fd = syscall(SYS_openat2, rootfd, path, &oh, sizeof(oh));
	if (fd >= 0)
		return (int)fd;
	if (errno != ENOSYS)
		return -errno;
	return walk_in_root(rootfd, path, flags, how);
}

/*
 * @pathfd (O_PATH: nothing was opened yet) opened again for reading if
 * it is a regular file.  An O_PATH descriptor runs no driver's open, so
 * a device, a FIFO (whose waiting writer would be woken) or a socket is
 * only looked at.  /proc/self/fd/N is the descriptor's own magic link:
 * it reopens the very inode the descriptor holds, with no lookup by
 * name, so nothing can be swapped in between the fstat() and the open;
 * the reopened file is compared with the first anyway.
 */
static int reopen_regular(int pathfd, struct stat *st)
{
	char self[32];
	struct stat again;
	int fd;

	if (fstat(pathfd, st))
		return -errno;
	if (S_ISLNK(st->st_mode))
		return -ELOOP;
	if (!S_ISREG(st->st_mode))
		return -ENOEXEC;
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pathfd);
	fd = open(self, O_RDONLY | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &again) || again.st_ino != st->st_ino ||
	    again.st_dev != st->st_dev || !S_ISREG(again.st_mode)) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

int open_regular_in_root(int rootfd, const char *path, unsigned int how,
			 struct stat *st)
{
	int pathfd = open_in_root(rootfd, path, O_PATH, how), fd;

	if (pathfd < 0)
		return pathfd;
	fd = reopen_regular(pathfd, st);
	close(pathfd);
	return fd;
}

int open_regular_at(int dir_fd, const char *name, struct stat *st)
{
	int pathfd = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC), fd;

	if (pathfd < 0)
		return -errno;
	fd = reopen_regular(pathfd, st);
	close(pathfd);
	return fd;
}

int open_regular(const char *path, struct stat *st)
{
	int pathfd = open(path, O_PATH | O_CLOEXEC), fd;

	if (pathfd < 0)
		return -errno;
	fd = reopen_regular(pathfd, st);
	close(pathfd);
	return fd;
}

/* FUSE_SUPER_MAGIC: a file system some process serves */
#define FUSE_MAGIC 0x65735546

int fd_steady(int fd, uint64_t max)
{
	struct statfs sfs;
	struct stat st;
	off_t off = 0;
	int copy, e;

	if (fstat(fd, &st) || fstatfs(fd, &sfs)) {
		e = -errno;
		close(fd);
		return e;
	}
	if (S_ISREG(st.st_mode) && !st.st_uid &&
	    !(st.st_mode & (S_IWGRP | S_IWOTH)) &&
	    (unsigned long)sfs.f_type != FUSE_MAGIC)
		return fd;
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		close(fd);
		return S_ISREG(st.st_mode) ? -EFBIG : -ENOEXEC;
	}
	copy = memfd_create("memsnap-elf", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (copy < 0) {
		e = -errno;
		close(fd);
		return e;
	}
	/* what is there now; a file cut while copied is copied cut */
	e = 0;
	while (off < st.st_size && !e) {
		static char buf[1 << 16];
		size_t want = (uint64_t)(st.st_size - off) < sizeof(buf) ?
				      (size_t)(st.st_size - off) : sizeof(buf);
		ssize_t n = pread_in_full(fd, buf, want, off);

		if (n < 0)
			e = (int)n;
		else if (!n)
			break;
		else
			e = write_in_full(copy, buf, (size_t)n);
		off += n > 0 ? n : 0;
	}
	close(fd);
	if (!e && fcntl(copy, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
						    F_SEAL_WRITE | F_SEAL_SEAL))
		e = -errno;
	if (e) {
		close(copy);
		return e;
	}
	return copy;
}

bool fd_is_memory(int fd)
{
	struct stat st;

	return !fstat(fd, &st) && S_ISREG(st.st_mode) &&
	       fcntl(fd, F_GET_SEALS) >= 0;
}
