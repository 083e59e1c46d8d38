/*
 * common/fsio.c: open_in_root() never leaves its root, and
 * open_regular_in_root() opens nothing but regular files, with openat2()
 * and without it (a seccomp filter in this test process makes openat2
 * fail with ENOSYS, as on Linux before 5.6; Criterion runs each test in
 * its own process, so the filter dies with it).  And the full-count
 * reads and writes.
 */
#include "common/fsio.h"

#include "../lib/noopenat2.h"
#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

static char top[PATH_MAX], root[PATH_MAX + 8];
static int rootfd = -1;

/*
 *   top/secret                 outside the root
 *   top/root/lib/libx.so       "inside"
 *   top/root/lib/up -> ../..   a relative way out
 *   top/root/abs -> /          an absolute way out
 *   top/root/lib/alias -> libx.so
 */
static void make_tree(void)
{
	char p[PATH_MAX + 64];
	FILE *f;
	int rc;

	rc = scratch_make("memsnap-fsio", top, sizeof(top));
	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	snprintf(p, sizeof(p), "%s/secret", top);
	f = fopen(p, "w");
	cr_assert_not_null(f);
	fputs("secret\n", f);
	fclose(f);
	snprintf(root, sizeof(root), "%s/root", top);
	cr_assert_eq(mkdir(root, 0700), 0);
	snprintf(p, sizeof(p), "%s/lib", root);
	cr_assert_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/lib/libx.so", root);
	f = fopen(p, "w");
	cr_assert_not_null(f);
	fputs("inside\n", f);
	fclose(f);
	snprintf(p, sizeof(p), "%s/lib/up", root);
	cr_assert_eq(symlink("../..", p), 0);
	snprintf(p, sizeof(p), "%s/abs", root);
	cr_assert_eq(symlink("/", p), 0);
	snprintf(p, sizeof(p), "%s/lib/alias", root);
	cr_assert_eq(symlink("libx.so", p), 0);
	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(rootfd, 0);
}

/* abs -> / and up -> ../.. are unlinked, not followed. */
static void remove_tree(void)
{
	if (rootfd >= 0)
		close(rootfd);
	scratch_cleanup(top);
}

TestSuite(fsio, .init = make_tree, .fini = remove_tree);

/* What @path opens to under the root: its first line, or "" and the
 * error in *@err. */
static const char *read_via(const char *path, unsigned int how, int *err)
{
	static char buf[64];
	int fd = open_in_root(rootfd, path, O_RDONLY, how);
	ssize_t n;

	buf[0] = '\0';
	*err = fd < 0 ? fd : 0;
	if (fd < 0)
		return buf;
	n = read_in_full(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

/* Every way out stays in, whatever else it gives. */
static void assert_never_out(unsigned int how)
{
	static const char *const ways[] = {
		"lib/up/secret", "/lib/up/secret", "abs/../secret",
		"../secret", "../../secret", "/../secret", "abs/tmp",
	};
	size_t i;
	int err;

	for (i = 0; i < sizeof(ways) / sizeof(*ways); i++)
		cr_assert_str_neq(read_via(ways[i], how, &err), "secret\n",
				  "%s escaped the root", ways[i]);
}

static void assert_inside_works(void)
{
	int err;

	cr_assert_str_eq(read_via("/lib/libx.so", 0, &err), "inside\n",
			 "error %d", err);
	cr_assert_str_eq(read_via("lib//libx.so", 0, &err), "inside\n",
			 "error %d", err);
}

Test(fsio, openat2_stays_in_the_root)
{
	int err;

	assert_inside_works();
	assert_never_out(0);
	assert_never_out(FSIO_NO_SYMLINKS);
	/* inside the root a symlink is followed, unless told not to */
	cr_assert_str_eq(read_via("lib/alias", 0, &err), "inside\n");
	read_via("lib/alias", FSIO_NO_SYMLINKS, &err);
	cr_assert_eq(err, -ELOOP);
}

Test(fsio, without_openat2_stays_in_the_root)
{
	int err;

	no_openat2();
	cr_assert_eq(syscall(SYS_openat2, AT_FDCWD, "/", NULL, 0), -1);
	cr_assert_eq(errno, ENOSYS, "the filter is not in place");
	assert_inside_works();
	assert_never_out(0);
	assert_never_out(FSIO_NO_SYMLINKS | FSIO_NO_XDEV);
	/* the walk refuses every symlink and every ".." */
	read_via("lib/alias", 0, &err);
	cr_assert_eq(err, -ELOOP);
	read_via("lib/../lib/libx.so", 0, &err);
	cr_assert_eq(err, -EXDEV);
	read_via("abs/tmp", 0, &err);
	cr_assert(err == -ELOOP || err == -ENOTDIR, "error %d", err);
}

Test(fsio, full_reads_and_writes)
{
	char big[100000], back[100000];
	int p[2];
	size_t i;

	for (i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7);
	cr_assert_eq(pipe(p), 0);
	/* a pipe holds 64 KiB: the writer must loop on short writes */
	if (fork() == 0) {
		close(p[0]);
		_exit(write_in_full(p[1], big, sizeof(big)) ? 1 : 0);
	}
	close(p[1]);
	cr_assert_eq(read_in_full(p[0], back, sizeof(back)),
		     (ssize_t)sizeof(back));
	cr_assert_eq(memcmp(big, back, sizeof(big)), 0);
	cr_assert_eq(read_in_full(p[0], back, 10), 0, "end of file");
	close(p[0]);
}

/* Opens of @path (made by the test) seen since the watch was set. */
static int watch_opens(const char *path)
{
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);

	cr_assert_geq(fd, 0);
	cr_assert_geq(inotify_add_watch(fd, path, IN_OPEN), 0, "%s", path);
	return fd;
}

static bool was_opened(int ino)
{
	char buf[1024] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool opened = read(ino, buf, sizeof(buf)) > 0;

	close(ino);
	return opened;
}

/* Only a regular file is opened; a FIFO (a waiting writer would be
 * woken, no writer blocks us), a directory or a symlink is refused
 * without being opened. */
static void assert_regular_only(void)
{
	char fifo[PATH_MAX + 32], dev[PATH_MAX + 32], buf[16] = "";
	struct stat st;
	int ino_fifo, ino_dev = -1, fd;

	snprintf(fifo, sizeof(fifo), "%s/lib/fifo", root);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	ino_fifo = watch_opens(fifo);
	snprintf(dev, sizeof(dev), "%s/lib/null", root);
	if (!mknod(dev, S_IFCHR | 0600, makedev(1, 3)))
		ino_dev = watch_opens(dev);

	fd = open_regular_in_root(rootfd, "/lib/libx.so", FSIO_NO_SYMLINKS,
				  &st);
	cr_assert_geq(fd, 0, "error %d", fd);
	cr_assert(S_ISREG(st.st_mode));
	cr_assert_eq(read_in_full(fd, buf, 7), 7);
	cr_assert_str_eq(buf, "inside\n");
	close(fd);
	cr_assert_eq(open_regular_in_root(rootfd, "/lib/fifo", 0, &st),
		     -ENOEXEC);
	cr_assert(S_ISFIFO(st.st_mode));
	cr_assert_eq(open_regular_in_root(rootfd, "/lib", 0, &st), -ENOEXEC);
	cr_assert_eq(open_regular_in_root(rootfd, "lib/alias",
					  FSIO_NO_SYMLINKS, &st), -ELOOP);
	if (ino_dev >= 0)
		cr_assert_eq(open_regular_in_root(rootfd, "/lib/null", 0, &st),
			     -ENOEXEC);
	cr_assert(!was_opened(ino_fifo), "the FIFO was opened");
	if (ino_dev >= 0)
		cr_assert(!was_opened(ino_dev), "the device was opened");
}

Test(fsio, openat2_opens_regular_files_only)
{
	char self[64];
	struct stat st;
	int fd;

	assert_regular_only();
	/* inside the root a symlink to a regular file is followed unless
	 * told not to */
	fd = open_regular_in_root(rootfd, "lib/alias", 0, &st);
	cr_assert_geq(fd, 0, "error %d", fd);
	close(fd);
	/* and a magic link, by open_regular() */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", rootfd);
	cr_assert_eq(open_regular(self, &st), -ENOEXEC);
	cr_assert(S_ISDIR(st.st_mode));
	fd = open_regular("/proc/self/exe", &st);
	cr_assert_geq(fd, 0, "error %d", fd);
	close(fd);
}

Test(fsio, without_openat2_opens_regular_files_only)
{
	no_openat2();
	assert_regular_only();
}

/* A file of @owner and @mode under the tree, 3 pages of 'x'; its fd. */
static int file_of(const char *name, uid_t owner, mode_t mode, char *path,
		   size_t size)
{
	static char page[3 * 4096];
	int fd;

	snprintf(path, size, "%s/%s", top, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	memset(page, 'x', sizeof(page));
	cr_assert_eq(write(fd, page, sizeof(page)), (ssize_t)sizeof(page));
	cr_assert_eq(fchown(fd, owner, owner), 0);
	cr_assert_eq(fchmod(fd, mode), 0);
	return fd;
}

/*
 * libdw maps the objects of a report: a file its owner cuts after that
 * would be SIGBUS in memsnap.  Another user's file (or one others may
 * write) is copied into a sealed memfd; root's own is used as it is.
 */
Test(fsio, steady_copies_what_another_user_can_cut)
{
	char path[PATH_MAX + 32];
	struct stat a, b;
	unsigned char *m;
	int fd, got, i;

	if (geteuid())
		cr_skip_test("needs root: files of another owner are made");
	fd = file_of("theirs", 65534, 0644, path, sizeof(path));
	cr_assert_eq(fstat(fd, &a), 0);
	got = fd_steady(fcntl(fd, F_DUPFD_CLOEXEC, 0), 1 << 20);
	cr_assert_geq(got, 0, "error %d", got);
	cr_assert_eq(fstat(got, &b), 0);
	cr_assert(a.st_ino != b.st_ino || a.st_dev != b.st_dev,
		  "another user's file was not copied");
	cr_assert_eq(fcntl(got, F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_WRITE),
		     F_SEAL_SHRINK | F_SEAL_WRITE);
	m = mmap(NULL, 3 * 4096, PROT_READ, MAP_PRIVATE, got, 0);
	cr_assert_neq(m, MAP_FAILED);
	/* the owner cuts the file: every page still reads */
	cr_assert_eq(ftruncate(fd, 0), 0);
	for (i = 0; i < 3 * 4096; i += 4096)
		cr_assert_eq(m[i], 'x');
	cr_assert_eq(ftruncate(got, 0), -1, "the copy could be cut");
	munmap(m, 3 * 4096);
	close(got);
	close(fd);
}

Test(fsio, steady_keeps_roots_own_file_and_bounds_a_copy)
{
	char path[PATH_MAX + 32];
	struct stat a, b;
	int fd, got;

	if (geteuid())
		cr_skip_test("needs root: files of another owner are made");
	fd = file_of("roots", 0, 0644, path, sizeof(path));
	cr_assert_eq(fstat(fd, &a), 0);
	got = fd_steady(fcntl(fd, F_DUPFD_CLOEXEC, 0), 1 << 20);
	cr_assert_geq(got, 0);
	cr_assert_eq(fstat(got, &b), 0);
	cr_assert(a.st_ino == b.st_ino && a.st_dev == b.st_dev,
		  "root's own file was copied");
	close(got);
	close(fd);
	/* writable by others: copied, and not past the bound */
	fd = file_of("open", 0, 0666, path, sizeof(path));
	cr_assert_eq(fd_steady(fcntl(fd, F_DUPFD_CLOEXEC, 0), 4096), -EFBIG);
	got = fd_steady(fcntl(fd, F_DUPFD_CLOEXEC, 0), 1 << 20);
	cr_assert_geq(got, 0);
	cr_assert_eq(fstat(got, &b), 0);
	cr_assert(a.st_ino != b.st_ino, "a file others may write was kept");
	close(got);
	close(fd);
}

/* fd_is_memory(): a memfd, and a regular file only on tmpfs; never a
 * pipe, a socket, a FIFO, a device or a directory. */
Test(fsio, memory_is_a_memfd_never_a_device_or_a_fifo)
{
	char fifo[PATH_MAX + 16];
	int p[2], sv[2], fd;
	struct statfs sf;

	fd = memfd_create("t", MFD_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert(fd_is_memory(fd));
	close(fd);
	cr_assert_eq(pipe(p), 0);
	cr_assert_not(fd_is_memory(p[0]));
	cr_assert_not(fd_is_memory(p[1]));
	close(p[0]);
	close(p[1]);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	cr_assert_not(fd_is_memory(sv[0]));
	close(sv[0]);
	close(sv[1]);
	fd = open("/dev/null", O_RDONLY);
	cr_assert_geq(fd, 0);
	cr_assert_not(fd_is_memory(fd));
	close(fd);
	snprintf(fifo, sizeof(fifo), "%s/fifo", top);
	cr_assert_eq(mkfifo(fifo, 0600), 0, "%s", strerror(errno));
	fd = open(fifo, O_RDWR);
	cr_assert_geq(fd, 0);
	cr_assert_not(fd_is_memory(fd));
	close(fd);
	unlink(fifo);
	fd = open(top, O_RDONLY | O_DIRECTORY);
	cr_assert_geq(fd, 0);
	cr_assert_not(fd_is_memory(fd));
	close(fd);
	/* this program's file: memory only where it lies on tmpfs */
	fd = open("/proc/self/exe", O_RDONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fstatfs(fd, &sf), 0);
	cr_assert_eq(fd_is_memory(fd), sf.f_type == TMPFS_MAGIC);
	close(fd);
}
