#include "common/output.h"

#include "common/fsio.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LINKS_MAX 40

static bool on_procfs(int dfd)
{
	struct statfs sf;

	return !fstatfs(dfd, &sf) && sf.f_type == PROC_SUPER_MAGIC;
}

/* Root's links and the caller's own; never another user's. */
static bool trusted_link(const struct stat *st)
{
	return st->st_uid == 0 || st->st_uid == geteuid() ||
	       st->st_uid == getuid();
}

static int reopen(int *dir, int at, const char *name, int flags)
{
	int fd = openat(at, name, flags | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	close(*dir);
	*dir = fd;
	return 0;
}


/*
 * The symlink @fd (an O_PATH descriptor, closed here), met at @rest's
 * first @*off bytes, followed: @rest becomes its text and then what was
 * left after it (*@off 0), and *@dir the root for an absolute one.
 */
static int follow(int fd, int *dir, char *rest, size_t size, size_t *off)
{
	char link[PATH_MAX];
	ssize_t len = readlinkat(fd, "", link, sizeof(link) - 1);

	close(fd);
	if (len <= 0)
		return len < 0 ? -errno : -ENOENT;
	link[len] = '\0';
	if (strlen(link) + strlen(rest + *off) + 1 >= size)
		return -ENAMETOOLONG;
	memmove(rest + len, rest + *off, strlen(rest + *off) + 1);
	memcpy(rest, link, (size_t)len);
	*off = 0;
	if (link[0] == '/')
		return reopen(dir, AT_FDCWD, "/", O_PATH | O_DIRECTORY);
	return 0;
}

/*
 * Walk @path, following only trusted symlinks.  Results:
 *   1   *@dir and @name: an existing regular file
 *   0   *@dir and @name: nothing there yet
 *   2   *@through: an existing non-regular file, open for writing
 *   3   *@dir: @path is a directory, and @want_dir (else -EISDIR)
 * or -errno.  *@dir is closed by the caller when >= 0.  After -ELOOP,
 * @refused (PATH_MAX bytes) holds the symlink, as walked: "/tmp/x" of
 * "/tmp/x/out".
 */
static int resolve(const char *path, bool want_dir, int *dir, char name[256],
		   int *through, char *refused)
{
	char rest[2 * PATH_MAX + 2], comp[256];
	size_t off = 0;
	int links = 0;

	*dir = *through = -1;
	refused[0] = '\0';
	if (!path[0])
		return -ENOENT;
	if (strlen(path) >= PATH_MAX)
		return -ENAMETOOLONG;
	snprintf(rest, sizeof(rest), "%s", path);
	*dir = open(path[0] == '/' ? "/" : ".",
		    O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*dir < 0)
		return -errno;
	for (;;) {
		const char *p = rest + off;
		struct stat st;
		size_t n;
		bool last;
		int fd;

		p += strspn(p, "/");
		n = strcspn(p, "/");
		if (!n)
			return -EISDIR;	/* "dir/" or "/" */
		if (n >= sizeof(comp))
			return -ENAMETOOLONG;
		memcpy(comp, p, n);
		comp[n] = '\0';
		off = (size_t)(p - rest) + n;
		last = !rest[off];	/* "name/" is not last: a directory */
		if (!strcmp(comp, ".") || !strcmp(comp, "..")) {
			if (last)
				return -EISDIR;
			if (comp[1]) {
				int rc = reopen(dir, *dir, "..",
						O_PATH | O_DIRECTORY);

				if (rc)
					return rc;
			}
			continue;
		}
		fd = openat(*dir, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			if (errno == ENOENT && last) {
				snprintf(name, 256, "%s", comp);
				return 0;
			}
			return -errno;
		}
		if (fstat(fd, &st)) {
			close(fd);
			return -errno;
		}
		if (S_ISLNK(st.st_mode) && on_procfs(*dir)) {
			/* /proc/self, /proc/self/fd/1: the kernel's. */
			close(fd);
			if (!last) {
				int rc = reopen(dir, *dir, comp,
						O_PATH | O_DIRECTORY);

				if (rc)
					return rc;
				continue;
			}
			*through = openat(*dir, comp,
					  O_WRONLY | O_APPEND | O_NOCTTY |
						  O_CLOEXEC);
			return *through < 0 ? -errno : 2;
		}
		if (S_ISLNK(st.st_mode)) {
			int rc;

			if (!trusted_link(&st) || ++links > LINKS_MAX) {
				close(fd);
				snprintf(refused, PATH_MAX, "%.*s",
					 (int)off, rest);
				return -ELOOP;
			}
			rc = follow(fd, dir, rest, sizeof(rest), &off);
			if (rc)
				return rc;
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			close(*dir);
			*dir = fd;
			if (last)
				return want_dir ? 3 : -EISDIR;
			continue;
		}
		close(fd);
		if (!last)
			return -ENOTDIR;
		snprintf(name, 256, "%s", comp);
		if (S_ISREG(st.st_mode))
			return 1;
		/* A device, FIFO or socket: written to, never replaced. */
		*through = openat(*dir, comp,
				  O_WRONLY | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC);
		if (*through < 0)
			return -errno;
		if (fstat(*through, &st) || S_ISREG(st.st_mode)) {
			/* Swapped for a file since: not through that. */
			close(*through);
			*through = -1;
			return -EAGAIN;
		}
		return 2;
	}
}

/* The file being written, in @o->dir_fd: unnamed until complete; a
 * named temp file where the file system has no O_TMPFILE. */
static int open_temp(struct output *o)
{
	int rc;

	o->fd = openat(o->dir_fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
	if (o->fd >= 0)
		return 0;
	rc = random_name(o->tmp, sizeof(o->tmp), ".tmp");
	if (rc)
		return rc;
	o->fd = openat(o->dir_fd, o->tmp,
		       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		       0666);
	if (o->fd < 0)
		return -errno;
	o->linked = true;
	return 0;
}

int output_open(struct output *o, const char *path, bool replace)
{
	int rc;

	memset(o, 0, sizeof(*o));
	o->fd = o->dir_fd = -1;
	o->replace = replace;
	if (!strcmp(path, "-")) {
		o->fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
		return o->fd < 0 ? -errno : 0;
	}
	rc = resolve(path, false, &o->dir_fd, o->name, &o->fd, o->refused);
	if (rc == 2) {
		close(o->dir_fd);
		o->dir_fd = -1;
		return 0;
	}
	if (rc == 1 && !replace)
		rc = -EEXIST;
	if (rc < 0)
		goto fail;
	rc = open_temp(o);
	if (!rc)
		return 0;
fail:
	if (o->dir_fd >= 0)
		close(o->dir_fd);
	o->dir_fd = -1;
	return rc;
}

int output_open_at(struct output *o, int dir_fd, const char *name,
		   bool replace)
{
	int rc;

	memset(o, 0, sizeof(*o));
	o->fd = -1;
	o->replace = replace;
	if (!name[0] || strchr(name, '/') || !strcmp(name, ".") ||
	    !strcmp(name, "..") || strlen(name) >= sizeof(o->name))
		return -EINVAL;
	snprintf(o->name, sizeof(o->name), "%s", name);
	o->dir_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
	if (o->dir_fd < 0)
		return -errno;
	rc = open_temp(o);
	if (rc) {
		close(o->dir_fd);
		o->dir_fd = -1;
	}
	return rc;
}

int outdir_open(const char *path, bool create, char *why, size_t size)
{
	char p[PATH_MAX], name[256], refused[PATH_MAX];
	size_t len = strlen(path);
	int dir = -1, through = -1, fd = -1, rc;
	struct stat st;

	why[0] = '\0';
	if (!len || len >= sizeof(p))
		return -ENAMETOOLONG;
	memcpy(p, path, len + 1);
	while (len > 1 && p[len - 1] == '/')
		p[--len] = '\0';
	rc = !strcmp(p, "/") ? -EEXIST
			     : resolve(p, true, &dir, name, &through, refused);
	if (through >= 0)
		close(through);
	if (rc == 0 && create) {
		/* made here, ours: 0700 whatever the umask leaves */
		if (mkdirat(dir, name, 0700) && errno != EEXIST) {
			rc = -errno;
			goto out;
		}
		fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
					       O_CLOEXEC);
	} else if (rc == 3) {
		fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	} else {
		if (rc == -ELOOP && refused[0])
			snprintf(why, size, "'%s' is a symlink of another user; "
				 "memsnap does not follow it", refused);
		else if (rc == 1 || rc == 2)
			snprintf(why, size, "not a directory");
		else if (rc == 0)
			snprintf(why, size, "no such directory");
		rc = rc == 0 ? -ENOENT : rc > 0 ? -ENOTDIR : rc;
		goto out;
	}
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	rc = fstat(fd, &st) ? -errno : 0;
	if (!rc && st.st_uid != geteuid()) {
		snprintf(why, size, "it belongs to uid %u, not to you (uid %u): "
			 "memsnap writes and reads back only a directory of "
			 "yours, which no one else can change",
			 (unsigned)st.st_uid, (unsigned)geteuid());
		rc = -EPERM;
	} else if (!rc && (st.st_mode & (S_IWGRP | S_IWOTH))) {
		snprintf(why, size, "others can write into it (mode %04o): "
			 "memsnap writes and reads back only a directory no "
			 "one else can change", (unsigned)(st.st_mode & 07777));
		rc = -EPERM;
	}
	if (rc) {
		close(fd);
		fd = -1;
	}
out:
	if (dir >= 0)
		close(dir);
	if (rc && !why[0])
		snprintf(why, size, "%s", strerror(-rc));
	return rc ? rc : fd;
}

int outdir_open_file(int dir_fd, const char *name, uint64_t max)
{
	struct stat st;
	int fd = open_regular_at(dir_fd, name, &st);

	if (fd < 0)
		return fd == -ENOEXEC ? -EINVAL : fd;
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return -EFBIG;
	}
	return fd;
}

/* Give the O_TMPFILE @o->fd the name @name in the directory. */
static int link_tmpfile(struct output *o, const char *name)
{
	char self[64];

	snprintf(self, sizeof(self), "/proc/self/fd/%d", o->fd);
	if (!linkat(AT_FDCWD, self, o->dir_fd, name, AT_SYMLINK_FOLLOW))
		return 0;
	if (errno != ENOENT)
		return -errno;
	/* No /proc: the same, with CAP_DAC_READ_SEARCH. */
	return linkat(o->fd, "", o->dir_fd, name, AT_EMPTY_PATH) ? -errno : 0;
}

int output_commit(struct output *o)
{
	int rc = 0;

	if (o->dir_fd < 0) {
		rc = close(o->fd) && errno != EINTR ? -errno : 0;
		o->fd = -1;
		return rc;
	}
	if (!o->linked) {
		if (!o->replace) {
			/* No window at all: the name appears complete. */
			rc = link_tmpfile(o, o->name);
			goto out;
		}
		rc = random_name(o->tmp, sizeof(o->tmp), ".tmp");
		if (!rc)
			rc = link_tmpfile(o, o->tmp);
		if (rc)
			goto out;
		o->linked = true;
	}
	if (syscall(SYS_renameat2, o->dir_fd, o->tmp, o->dir_fd, o->name,
		    o->replace ? 0 : RENAME_NOREPLACE) == 0) {
		o->linked = false;
		goto out;
	}
	rc = -errno;
	if (!o->replace && rc == -EINVAL) {
		/* No RENAME_NOREPLACE here: link() does not replace. */
		rc = linkat(o->dir_fd, o->tmp, o->dir_fd, o->name, 0) ? -errno
								       : 0;
	}
out:
	output_abort(o);
	return rc;
}

void output_abort(struct output *o)
{
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
	if (o->dir_fd >= 0) {
		if (o->linked)
			unlinkat(o->dir_fd, o->tmp, 0);
		close(o->dir_fd);
	}
	o->dir_fd = -1;
	o->linked = false;
}

int copy_fd_max(int in, int out, uint64_t max, uint64_t *copied)
{
	static char buf[64 * 1024];
	uint64_t total = 0;
	struct stat st;
	int rc = 0;

	/* A 1 TiB sparse file is refused before a byte is copied. */
	if (!fstat(in, &st) && S_ISREG(st.st_mode)) {
		off_t pos = lseek(in, 0, SEEK_CUR);

		if (pos >= 0 && st.st_size > pos &&
		    (uint64_t)(st.st_size - pos) > max)
			rc = -EFBIG;
	}
	while (!rc) {
		ssize_t n = read(in, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : 0;
			break;
		}
		if ((uint64_t)n > max - total) {
			rc = -EFBIG;
			break;
		}
		rc = write_in_full(out, buf, (size_t)n);
		total += (uint64_t)n;
	}
	if (copied)
		*copied = total;
	return rc;
}

int output_write_fd(int in, const char *path, bool replace, uint64_t max)
{
	struct output o;
	int rc = output_open(&o, path, replace);

	if (rc)
		return rc;
	rc = copy_fd_max(in, o.fd, max, NULL);
	if (rc) {
		output_abort(&o);
		return rc;
	}
	return output_commit(&o);
}

void output_default_name(pid_t pid, time_t when, unsigned int attempt,
			 char *buf, size_t size)
{
	char stamp[32] = "0";
	struct tm tm;

	if (localtime_r(&when, &tm))
		strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	if (attempt > 1)
		snprintf(buf, size, "memsnap.%d.%s-%u.heap", (int)pid, stamp,
			 attempt);
	else
		snprintf(buf, size, "memsnap.%d.%s.heap", (int)pid, stamp);
}
