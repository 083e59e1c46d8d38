#include "allocators/dumpdir.h"

#include "common/procfs.h"
#include "common/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define DUMP_NAME "dump.heap"

struct dumpdir {
	pid_t pid;
	uid_t uid;	/* the target's fsuid and fsgid: it writes as them */
	gid_t gid;
	int parent_fd;	/* O_PATH: the writable place, e.g. /tmp */
	int dir_fd;	/* our private directory in it */
	char name[32];	/* ".memsnap-0123456789abcdef" */
	char place[520];	/* "/tmp", in the target's view */
	char fname[64];		/* "dump.heap" */
	char file[PATH_MAX];	/* "/tmp/.memsnap-.../dump.heap" */
	char here[PATH_MAX + 64]; /* "/proc/PID/root/tmp/.memsnap-..." */
};

/* "Uid:\t0\t0\t0\t0" -> the 4th field (fsuid). */
static int status_id(const char *status, const char *key, unsigned long *out)
{
	const char *p = strstr(status, key);
	unsigned long v[4];

	if (!p)
		return -EIO;
	if (sscanf(p + strlen(key), "%lu %lu %lu %lu", &v[0], &v[1], &v[2],
		   &v[3]) != 4)
		return -EIO;
	*out = v[3];
	return 0;
}

static int target_ids(pid_t pid, uid_t *uid, gid_t *gid)
{
	char status[4096];
	unsigned long u, g;
	int rc;

	rc = proc_read_small(pid, "status", status, sizeof(status), NULL);
	if (rc)
		return rc;
	if (status_id(status, "\nUid:", &u) || status_id(status, "\nGid:", &g))
		return -EIO;
	*uid = (uid_t)u;
	*gid = (gid_t)g;
	return 0;
}

/* The target's $TMPDIR when it is a plain absolute path, else "". */
static void target_tmpdir(pid_t pid, char *buf, size_t size)
{
	static char env[64 * 1024];
	size_t len, off, n;

	buf[0] = '\0';
	if (proc_read_small(pid, "environ", env, sizeof(env), &len))
		return;
	/* "K=V\0K=V\0...", the last one maybe cut: never past @len. */
	for (off = 0; off < len; off += n + 1) {
		const char *v = env + off;

		n = strnlen(v, len - off);
		if (n < 8 || strncmp(v, "TMPDIR=", 7))
			continue;
		v += 7;
		if (v[0] == '/' && n - 7 < size && n - 7 < 512 &&
		    !strstr(v, "/../") && !str_ends_with(v, "/.."))
			snprintf(buf, size, "%s", v);
	}
}

static int open_in_root(int root_fd, const char *path, int flags)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		/* No symlink at all: the path the target is told is then the
		 * path it resolves, in its root. */
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS |
			   RESOLVE_NO_MAGICLINKS,
	};
	char comp[256];
	const char *p = path;
	long fd;
	int dir, next;

	fd = syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
	if (fd >= 0 || errno != ENOSYS)
		return fd < 0 ? -errno : (int)fd;
	/*
	 * A kernel before 5.6 (or a sandbox that hides openat2): walk the
	 * path one component at a time from the root, refusing symlinks
	 * (O_NOFOLLOW) and "..", which gives the same guarantee for the
	 * plain absolute paths used here.
	 */
	dir = fcntl(root_fd, F_DUPFD_CLOEXEC, 0);
	if (dir < 0)
		return -errno;
	while (*p) {
		size_t n;
		bool last;

		p += strspn(p, "/");
		n = strcspn(p, "/");
		if (!n)
			break;
		if (n >= sizeof(comp) || (n == 2 && !strncmp(p, "..", 2))) {
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
		close(dir);
		if (next < 0)
			return errno == ELOOP ? -ELOOP : -errno;
		dir = next;
	}
	return dir;
}

static int random_name(char *buf, size_t size)
{
	unsigned char r[8];
	char hex[2 * sizeof(r) + 1];
	size_t got = 0;

	while (got < sizeof(r)) {
		ssize_t n = getrandom(r + got, sizeof(r) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		got += (size_t)n;
	}
	hex_encode(r, sizeof(r), hex);
	snprintf(buf, size, ".memsnap-%s", hex);
	return 0;
}

/* Make our directory inside @d->parent_fd.  0 or -errno. */
static int make_private(struct dumpdir *d)
{
	struct stat st;
	int tries, rc, fd;

	for (tries = 0; tries < 8; tries++) {
		rc = random_name(d->name, sizeof(d->name));
		if (rc)
			return rc;
		if (mkdirat(d->parent_fd, d->name, 0700) == 0)
			break;
		if (errno != EEXIST)
			return -errno;
	}
	if (tries == 8)
		return -EEXIST;
	fd = openat(d->parent_fd, d->name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		unlinkat(d->parent_fd, d->name, AT_REMOVEDIR);
		return rc;
	}
	d->dir_fd = fd;
	/* Held until we exit, however we exit: an unlocked directory of
	 * ours is one a killed memsnap left behind (sweep_stale()). */
	flock(fd, LOCK_EX | LOCK_NB);
	/* Still the directory we made: ours, empty of others' rights. */
	if (fstat(fd, &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return -EPERM;
	if ((st.st_uid != d->uid || st.st_gid != d->gid) &&
	    fchown(fd, d->uid, d->gid))
		return -errno;
	if (fchmod(fd, 0700))
		return -errno;
	return 0;
}

/* Unlink everything in @dfd (one level of subdirectories).  0 or the
 * first -errno. */
static int empty_dir(int dfd)
{
	struct dirent *e;
	DIR *dir;
	int rc = 0, fd;

	/* A fresh open file description: readdir from the start. */
	fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	dir = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dir) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		return rc;
	}
	while ((e = readdir(dir))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (unlinkat(dfd, e->d_name, 0) &&
		    (errno != EISDIR ||
		     unlinkat(dfd, e->d_name, AT_REMOVEDIR)) && !rc)
			rc = -errno;
	}
	closedir(dir);
	return rc;
}

/* ".memsnap-" and 16 hex digits. */
static bool is_our_name(const char *name)
{
	size_t i;

	if (strncmp(name, ".memsnap-", 9) || strlen(name) != 9 + 16)
		return false;
	for (i = 9; name[i]; i++)
		if (!strchr("0123456789abcdef", name[i]))
			return false;
	return true;
}

/*
 * Remove what a memsnap killed mid-dump left in this place: our
 * directories nobody holds locked and untouched for a minute (a
 * running memsnap locks its directory right after making it).
 */
static void sweep_stale(struct dumpdir *d)
{
	time_t now = time(NULL);
	struct dirent *e;
	DIR *dir;
	int fd;

	fd = openat(d->parent_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	dir = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dir) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(dir))) {
		struct stat st;
		int sfd;

		if (!is_our_name(e->d_name) || !strcmp(e->d_name, d->name))
			continue;
		sfd = openat(d->parent_fd, e->d_name,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK |
				     O_CLOEXEC);
		if (sfd < 0)
			continue;
		if (!fstat(sfd, &st) && S_ISDIR(st.st_mode) &&
		    (st.st_mode & 07777) == 0700 &&
		    (st.st_uid == d->uid || st.st_uid == geteuid()) &&
		    st.st_mtime + 60 < now &&
		    !flock(sfd, LOCK_EX | LOCK_NB) && !empty_dir(sfd))
			unlinkat(d->parent_fd, e->d_name, AT_REMOVEDIR);
		close(sfd);
	}
	closedir(dir);
}

static void free_dumpdir(struct dumpdir *d)
{
	if (d->dir_fd >= 0)
		close(d->dir_fd);
	if (d->parent_fd >= 0)
		close(d->parent_fd);
	free(d);
}

int dumpdir_create(pid_t pid, struct dumpdir **out, char *why,
		   size_t why_size)
{
	const char *fixed[] = { "/tmp", "/var/tmp", "/dev/shm" };
	char tmpdir[512], rootpath[64];
	const char *places[4];
	struct dumpdir *d;
	size_t n = 0, i, w = 0;
	int root_fd, rc = -ENOENT;

	if (why && why_size)
		why[0] = '\0';
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->pid = pid;
	d->parent_fd = d->dir_fd = -1;
	rc = target_ids(pid, &d->uid, &d->gid);
	if (rc) {
		free_dumpdir(d);
		return rc;
	}
	rc = -ENOENT;	/* until a place works */
	target_tmpdir(pid, tmpdir, sizeof(tmpdir));
	if (tmpdir[0])
		places[n++] = tmpdir;
	for (i = 0; i < ARRAY_SIZE(fixed); i++)
		if (!tmpdir[0] || strcmp(tmpdir, fixed[i]))
			places[n++] = fixed[i];

	snprintf(rootpath, sizeof(rootpath), "/proc/%d/root", (int)pid);
	root_fd = open(rootpath, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0) {
		rc = -errno;
		free_dumpdir(d);
		return rc;
	}
	for (i = 0; i < n; i++) {
		int err;

		d->parent_fd = open_in_root(root_fd, places[i],
					    O_PATH | O_DIRECTORY);
		err = d->parent_fd < 0 ? d->parent_fd : make_private(d);
		if (!err) {
			rc = 0;
			snprintf(d->place, sizeof(d->place), "%s", places[i]);
			break;
		}
		if (why && w < why_size)
			w += (size_t)snprintf(why + w, why_size - w, "%s%s: %s",
					      w ? "; " : "", places[i],
					      strerror(-err));
		if (d->dir_fd >= 0) {
			close(d->dir_fd);
			d->dir_fd = -1;
			unlinkat(d->parent_fd, d->name, AT_REMOVEDIR);
		}
		if (d->parent_fd >= 0)
			close(d->parent_fd);
		d->parent_fd = -1;
		/* Keep the most telling error: a permission problem beats a
		 * place that does not exist. */
		if (rc == -ENOENT || err == -EPERM)
			rc = err;
	}
	close(root_fd);
	if (rc) {
		free_dumpdir(d);
		return rc;
	}
	sweep_stale(d);
	dumpdir_set_name(d, DUMP_NAME);
	*out = d;
	return 0;
}

int dumpdir_set_name(struct dumpdir *d, const char *name)
{
	if (!name[0] || strchr(name, '/') || !strcmp(name, ".") ||
	    !strcmp(name, "..") || strlen(name) >= sizeof(d->fname))
		return -EINVAL;
	snprintf(d->fname, sizeof(d->fname), "%s", name);
	snprintf(d->file, sizeof(d->file), "%s/%s/%s",
		 strcmp(d->place, "/") ? d->place : "", d->name, d->fname);
	snprintf(d->here, sizeof(d->here), "/proc/%d/root%s", (int)d->pid,
		 d->file);
	return 0;
}

const char *dumpdir_file(const struct dumpdir *d)
{
	return d->file;
}

const char *dumpdir_here(const struct dumpdir *d)
{
	return d->here;
}

int dumpdir_open_result(struct dumpdir *d, uint64_t *size)
{
	struct stat st;
	int fd;

	fd = openat(d->dir_fd, d->fname,
		    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	if (st.st_uid != d->uid && st.st_uid != geteuid()) {
		close(fd);
		return -EPERM;
	}
	if (size)
		*size = (uint64_t)st.st_size;
	return fd;
}

/* Open file descriptors of @pid and its RLIMIT_NOFILE soft limit. */
static bool fd_usage(pid_t pid, unsigned long *used, unsigned long *limit)
{
	char limits[4096];
	const char *p;
	struct dirent *e;
	DIR *dir;
	int fd;

	if (proc_read_small(pid, "limits", limits, sizeof(limits), NULL))
		return false;
	p = strstr(limits, "Max open files");
	if (!p || sscanf(p + strlen("Max open files"), "%lu", limit) != 1)
		return false;
	fd = proc_open(pid, "fd", O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return false;
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return false;
	}
	*used = 0;
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			(*used)++;
	closedir(dir);
	return true;
}

void dumpdir_explain(struct dumpdir *d, char *buf, size_t size)
{
	unsigned long used, limit;
	struct statvfs sv;
	struct stat st;
	char status[4096];
	const char *p;

	buf[0] = '\0';
	if (fd_usage(d->pid, &used, &limit) && used + 1 >= limit) {
		snprintf(buf, size,
			 "pid %d has %lu of %lu file descriptors open (RLIMIT_NOFILE)",
			 (int)d->pid, used, limit);
		return;
	}
	if (!fstatvfs(d->dir_fd, &sv)) {
		if (sv.f_flag & ST_RDONLY) {
			snprintf(buf, size, "%s is on a read-only file system",
				 d->place);
			return;
		}
		if ((uint64_t)sv.f_bavail * sv.f_frsize < 64 * 1024) {
			snprintf(buf, size, "%s is full (%llu bytes free)",
				 d->place,
				 (unsigned long long)sv.f_bavail * sv.f_frsize);
			return;
		}
	}
	if (!fstatat(d->dir_fd, d->fname, &st, AT_SYMLINK_NOFOLLOW)) {
		snprintf(buf, size, "it created %s but stopped after %lld bytes",
			 d->file, (long long)st.st_size);
		return;
	}
	if (!proc_read_small(d->pid, "status", status, sizeof(status), NULL) &&
	    (p = strstr(status, "\nSeccomp:")) && atoi(p + 9) == 2) {
		snprintf(buf, size,
			 "it could not create %s; it runs under a seccomp filter, which may refuse open()",
			 d->file);
		return;
	}
}

int dumpdir_remove(struct dumpdir *d)
{
	int rc;

	if (!d)
		return 0;
	rc = empty_dir(d->dir_fd);
	if (unlinkat(d->parent_fd, d->name, AT_REMOVEDIR) && !rc)
		rc = -errno;
	free_dumpdir(d);
	return rc;
}

/* ---- the caller's side ------------------------------------------------- */

static int copy_fd(int in, int out)
{
	char buf[64 * 1024];

	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf)), w;
		size_t off = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		while (off < (size_t)n) {
			w = write(out, buf + off, (size_t)n - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return -errno;
			off += (size_t)w;
		}
	}
}

int output_write_atomic(int fd, const char *path, bool replace)
{
	char dir[PATH_MAX], tmp[NAME_MAX + 1], rnd[32];
	const char *slash = strrchr(path, '/'), *base;
	int dfd, out, rc;

	if (!path[0])
		return -ENOENT;
	if (slash) {
		size_t len = (size_t)(slash - path);

		if (len >= sizeof(dir))
			return -ENAMETOOLONG;
		memcpy(dir, path, len);
		dir[len] = '\0';
		if (!len)
			snprintf(dir, sizeof(dir), "/");
		base = slash + 1;
	} else {
		snprintf(dir, sizeof(dir), ".");
		base = path;
	}
	if (!base[0] || !strcmp(base, ".") || !strcmp(base, ".."))
		return -EISDIR;
	if (strlen(base) > NAME_MAX)
		return -ENAMETOOLONG;
	dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	rc = random_name(rnd, sizeof(rnd));
	if (rc)
		goto out_dir;
	/* ".memsnap-<hex>.tmp": short, hidden, never a name in use. */
	snprintf(tmp, sizeof(tmp), "%s.tmp", rnd);
	out = openat(dfd, tmp,
		     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK |
			     O_CLOEXEC,
		     0666);
	if (out < 0) {
		rc = -errno;
		goto out_dir;
	}
	rc = copy_fd(fd, out);
	if (close(out) && !rc)
		rc = -errno;
	if (rc)
		goto out_tmp;
	if (syscall(SYS_renameat2, dfd, tmp, dfd, base,
		    replace ? 0 : RENAME_NOREPLACE) == 0)
		goto out_dir;
	rc = -errno;
	if (!replace && rc == -EINVAL) {
		/* A file system without RENAME_NOREPLACE: link() does not
		 * replace either. */
		rc = linkat(dfd, tmp, dfd, base, 0) ? -errno : 0;
	}
out_tmp:
	unlinkat(dfd, tmp, 0);
out_dir:
	close(dfd);
	return rc;
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
