#ifndef MEMSNAP_COMMON_FSIO_H
#define MEMSNAP_COMMON_FSIO_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/*
 * Reading, writing and opening files, one way each: every loop over
 * EINTR and short counts, every open of a path that must not leave a
 * directory, and every open of a file a target named, is here.
 */

/* Read until @len bytes or end of file: the count, or -errno. */
ssize_t read_in_full(int fd, void *buf, size_t len);

/* The same from offset @off, with pread(). */
ssize_t pread_in_full(int fd, void *buf, size_t len, off_t off);

/* All of @buf, or -errno (-EIO if the file takes no more). */
int write_in_full(int fd, const void *buf, size_t len);

/* The id of the mount @fd is on (statx STX_MNT_ID, Linux 5.8): 0, or
 * -errno (-ENOSYS before 5.8). */
int fd_mount_id(int fd, uint64_t *id);

/* open_in_root() @how */
#define FSIO_NO_SYMLINKS 1u	/* any symlink on the way: -ELOOP */
#define FSIO_NO_XDEV 2u		/* any other mount on the way: -EXDEV */

/*
 * Open @path below the directory @rootfd as if @rootfd were "/": ".."
 * and symlinks (absolute ones too) resolve inside it, and /proc's magic
 * links are never followed (openat2 RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS).  O_CLOEXEC is added to @flags.
 *
 * Before Linux 5.6 (no openat2) the same guarantee, more strictly: the
 * path is walked one component at a time with O_NOFOLLOW, so a symlink
 * anywhere is -ELOOP and ".." is -EXDEV; with FSIO_NO_XDEV each step's
 * mount is compared with its parent's (statx STX_MNT_ID).
 *
 * An fd, or -errno.
 */
int open_in_root(int rootfd, const char *path, int flags, unsigned int how);

/*
 * Open a file the target named, for reading, only if it is a regular
 * file: the path is resolved to an O_PATH descriptor (which opens
 * nothing: no driver's open runs, a FIFO's writer is not woken), that
 * is fstat()ed into *@st, and only a regular file is opened again,
 * through /proc/self/fd (the same inode, no second lookup).  So a
 * device, a FIFO or a socket there is never opened.
 *
 * open_regular_in_root(): @path resolved as open_in_root() does, with
 * @how.  With FSIO_NO_SYMLINKS a symlink as the last component is not
 * followed either.
 *
 * open_regular(): @path as memsnap made it, magic links followed, for
 * /proc/PID/map_files/START-END (the mapped file itself) and
 * /proc/PID/exe.
 *
 * An fd (O_RDONLY | O_CLOEXEC, blocking), or -errno: -ENOEXEC it is
 * not a regular file, -ELOOP a symlink, -ESTALE it changed under us.
 * Needs /proc mounted.
 */
int open_regular_in_root(int rootfd, const char *path, unsigned int how,
			 struct stat *st);
int open_regular(const char *path, struct stat *st);
/* The same for @name in the directory @dir_fd, no symlink followed
 * (-ELOOP), nothing but a regular file opened (-ENOEXEC). */
int open_regular_at(int dir_fd, const char *name, struct stat *st);

/*
 * The contents of the regular file @fd, in a descriptor that nobody but
 * root can shrink, for a reader that maps it (libdw: an access past the
 * end of a file truncated after mmap() is SIGBUS).  @fd itself when the
 * file is root's and writable by no one else on a file system that is
 * not FUSE; otherwise a copy of at most @max bytes in a sealed memfd
 * (no shrink, no grow, no write), and @fd is closed.  The new fd, or
 * -errno (-EFBIG: larger than @max; @fd is closed then too).
 */
int fd_steady(int fd, uint64_t max);

/*
 * Is @fd memory and nothing else: a regular file that takes seals (a
 * memfd, or a file of tmpfs or hugetlbfs)?  Reading it can neither block
 * nor act on anything; a FIFO, a socket, a device, a file of any other
 * file system is not.
 */
bool fd_is_memory(int fd);

#endif
