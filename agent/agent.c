#include "agent/agent.h"

#include "common/fsio.h"
#include "proc/procfs.h"
#include "common/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct agent {
	int sock;
	uid_t fsuid;	/* who owns what the target writes */
	int parent_fd;	/* O_PATH: the place, e.g. /tmp */
	int dir_fd;	/* our private directory in it */
	uint64_t dir_mnt;
	char name[32];	/* ".memsnap-0123456789abcdef" */
};

/* ---- opening without crossing anything ---------------------------------- */

/*
 * @name (one component) in @dfd, never through a symlink, never onto
 * another mount (a bind mount planted over it): -ELOOP, -EXDEV.
 */
static int open_beneath(int dfd, const char *name, int flags)
{
	if (!name[0] || strchr(name, '/') || !strcmp(name, ".") ||
	    !strcmp(name, ".."))
		return -EINVAL;
	return open_in_root(dfd, name, flags | O_NOFOLLOW,
			    FSIO_NO_SYMLINKS | FSIO_NO_XDEV);
}

/* An absolute path from our root (the target's), no symlink on the way. */
static int open_place(const char *path)
{
	int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC), fd;

	if (root < 0)
		return -errno;
	fd = open_in_root(root, path, O_PATH | O_DIRECTORY, FSIO_NO_SYMLINKS);
	close(root);
	return fd;
}

/* ---- the private directory ---------------------------------------------- */

/*
 * A place others may write to must be sticky, or they could swap our
 * directory for theirs under the path the target is told; $TMPDIR must
 * also be the target's own.
 */
static int check_place(struct agent *a, bool from_env)
{
	struct stat st;

	if (fstat(a->parent_fd, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
		return -EPERM;
	if (from_env && st.st_uid != a->fsuid)
		return -EPERM;
	return 0;
}

static int make_private(struct agent *a)
{
	struct stat st;
	int tries, rc, fd;

	for (tries = 0; tries < 8; tries++) {
		rc = random_name(a->name, sizeof(a->name), "");
		if (rc)
			return rc;
		if (mkdirat(a->parent_fd, a->name, 0700) == 0)
			break;
		if (errno != EEXIST)
			return -errno;
	}
	if (tries == 8)
		return -EEXIST;
	fd = open_beneath(a->parent_fd, a->name, O_RDONLY | O_DIRECTORY);
	if (fd < 0) {
		/* Something was put over it: leave it to its owner. */
		return fd;
	}
	a->dir_fd = fd;
	/* Held until the agent exits: an unlocked directory of ours is one
	 * a killed memsnap left behind (sweep_stale()). */
	flock(fd, LOCK_EX | LOCK_NB);
	if (fstat(fd, &st) || !S_ISDIR(st.st_mode) || st.st_uid != a->fsuid)
		return -EPERM;
	if ((st.st_mode & 07777) != 0700 && fchmod(fd, 0700))
		return -errno;
	if (fd_mount_id(fd, &a->dir_mnt))
		a->dir_mnt = 0;
	return 0;
}

/* Unlink every entry of @dfd (one level of subdirectories). */
static int empty_dir(int dfd)
{
	struct dirent *e;
	DIR *dir;
	int rc = 0, fd;

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
 * directories, the target's, nobody holding them locked, untouched for a
 * minute.  Never one on another mount (open_beneath()).
 */
static void sweep_stale(struct agent *a)
{
	time_t now = time(NULL);
	struct dirent *e;
	DIR *dir;
	int fd;

	fd = openat(a->parent_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	dir = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dir) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(dir))) {
		struct stat st;
		int sfd;

		if (!is_our_name(e->d_name) || !strcmp(e->d_name, a->name))
			continue;
		sfd = open_beneath(a->parent_fd, e->d_name,
				   O_RDONLY | O_DIRECTORY | O_NONBLOCK);
		if (sfd < 0)
			continue;
		if (!fstat(sfd, &st) && S_ISDIR(st.st_mode) &&
		    (st.st_mode & 07777) == 0700 && st.st_uid == a->fsuid &&
		    st.st_mtime + 60 < now &&
		    !flock(sfd, LOCK_EX | LOCK_NB) && !empty_dir(sfd))
			unlinkat(a->parent_fd, e->d_name, AT_REMOVEDIR);
		close(sfd);
	}
	closedir(dir);
}

/* The first place that works; else why each failed, in @why. */
static int make_dir(struct agent *a, const struct agent_places *pl,
		    char *why, size_t size)
{
	size_t i, w = 0;
	int rc = -ENOENT;

	why[0] = '\0';
	for (i = 0; i < pl->n; i++) {
		int err;

		a->parent_fd = open_place(pl->path[i]);
		err = a->parent_fd < 0 ? a->parent_fd
				       : check_place(a, pl->from_env[i]);
		if (!err)
			err = make_private(a);
		if (!err) {
			snprintf(why, size, "%s%c%s", pl->path[i], '\0',
				 a->name);
			sweep_stale(a);
			return 0;
		}
		if (w < size)
			w += (size_t)snprintf(why + w, size - w, "%s%s: %s%s",
					      w ? "; " : "", pl->path[i],
					      strerror(-err),
					      pl->from_env[i] && err == -EPERM
						      ? " ($TMPDIR not the target's own, or writable by others)"
						      : "");
		if (a->dir_fd >= 0) {
			close(a->dir_fd);
			a->dir_fd = -1;
			unlinkat(a->parent_fd, a->name, AT_REMOVEDIR);
		}
		if (a->parent_fd >= 0)
			close(a->parent_fd);
		a->parent_fd = -1;
		/* Keep the most telling error: a permission problem beats a
		 * place that does not exist. */
		if (rc == -ENOENT || err == -EPERM)
			rc = err;
	}
	return rc;
}

/* ---- serving ------------------------------------------------------------ */

static void reply(struct agent *a, const struct agent_rep *r, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = (void *)r, .iov_len = sizeof(*r) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (fd >= 0) {
		struct cmsghdr *c;

		m.msg_control = cbuf;
		m.msg_controllen = sizeof(cbuf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	while (sendmsg(a->sock, &m, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

/* What the target wrote: a regular file of the target's, opened here. */
static void serve_open(struct agent *a, const char *name, struct agent_rep *r)
{
	struct stat st;
	int fd = open_beneath(a->dir_fd, name,
			      O_RDONLY | O_NONBLOCK | O_NOCTTY);

	if (fd >= 0 && fstat(fd, &st))
		r->rc = -errno;
	else if (fd < 0)
		r->rc = fd;
	else if (!S_ISREG(st.st_mode))
		r->rc = -EINVAL;
	else if (st.st_uid != a->fsuid)
		r->rc = -EPERM;
	else
		r->size = (uint64_t)st.st_size;
	reply(a, r, r->rc ? -1 : fd);
	if (fd >= 0)
		close(fd);
}

/* Why the target could not write @name: rc 1 read-only, 2 full (size:
 * bytes free), 3 partial (size: bytes written), 0 nothing to say. */
static void serve_explain(struct agent *a, const char *name,
			  struct agent_rep *r)
{
	struct statvfs sv;
	struct stat st;

	if (!fstatvfs(a->dir_fd, &sv)) {
		if (sv.f_flag & ST_RDONLY) {
			r->rc = 1;
		} else if ((uint64_t)sv.f_bavail * sv.f_frsize < 64 * 1024) {
			r->rc = 2;
			r->size = (uint64_t)sv.f_bavail * sv.f_frsize;
		}
	}
	if (!r->rc && !fstatat(a->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW)) {
		r->rc = 3;
		r->size = (uint64_t)st.st_size;
	}
	reply(a, r, -1);
}

static int remove_dir(struct agent *a)
{
	int rc = empty_dir(a->dir_fd);

	if (unlinkat(a->parent_fd, a->name, AT_REMOVEDIR) && !rc)
		rc = -errno;
	return rc;
}

static void serve(struct agent *a)
{
	for (;;) {
		struct agent_req q;
		struct agent_rep r = { 0 };
		ssize_t n = recv(a->sock, &q, sizeof(q), 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof(q)) {
			/* memsnap is gone (or talks nonsense): clean up. */
			remove_dir(a);
			return;
		}
		q.name[sizeof(q.name) - 1] = '\0';
		switch (q.op) {
		case AGENT_OPEN:
			serve_open(a, q.name, &r);
			break;
		case AGENT_EXPLAIN:
			serve_explain(a, q.name, &r);
			break;
		case AGENT_REMOVE:
		default:
			r.rc = remove_dir(a);
			reply(a, &r, -1);
			return;
		}
	}
}

/*
 * Only @keep[0] on 3, @keep[1] on 4, ... (updated), and /dev/null on 0,
 * 1 and 2: none of memsnap's files.  0 or -1.
 */
static int close_others(int *keep, size_t n)
{
	int null, fd, top = 3 + (int)n;
	size_t i;

	/* Out of the way first: a kept one may sit where another goes,
	 * even on 0 to 2 (memsnap started with them closed). */
	for (i = 0; i < n; i++) {
		keep[i] = fcntl(keep[i], F_DUPFD_CLOEXEC, top);
		if (keep[i] < 0)
			return -1;
	}
	/* a debug container's root may have no /dev: then a descriptor
	 * nothing can be read from or written to (8 bytes at a time only,
	 * and no one ever writes) */
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0)
		null = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
	    dup2(null, 2) < 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (dup2(keep[i], 3 + (int)i) < 0)
			return -1;
		keep[i] = 3 + (int)i;
	}
	if (syscall(SYS_close_range, top, ~0U, 0))
		for (fd = top; fd < 65536; fd++)
			close(fd);
	return 0;
}

/* The target's $TMPDIR if it may be used, then the fixed places. */
static void places_of(const struct agent_who *who, struct agent_places *pl)
{
	static const char *const fixed[] = { "/tmp", "/var/tmp", "/dev/shm" };
	size_t i;

	pl->n = 0;
	if (who->tmpdir[0]) {
		pl->from_env[pl->n] = true;
		pl->path[pl->n++] = who->tmpdir;
	}
	for (i = 0; i < ARRAY_SIZE(fixed); i++)
		if (strcmp(who->tmpdir, fixed[i])) {
			pl->from_env[pl->n] = false;
			pl->path[pl->n++] = fixed[i];
		}
}

void agent_main(int sock, const struct agent_target *t)
{
	static const int ignored[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT,
				       SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU };
	struct agent a = { .sock = sock, .parent_fd = -1, .dir_fd = -1 };
	struct agent_places places;
	struct agent_who who = { 0 };
	struct agent_rep r = { 0 };
	int keep[2];
	sigset_t none;
	size_t i;

	/* memsnap's Ctrl-C is for memsnap: the agent cleans up on EOF. */
	for (i = 0; i < ARRAY_SIZE(ignored); i++)
		signal(ignored[i], SIG_IGN);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* First of all, while memsnap's pidfd is still open here. */
	r.rc = agent_pin(t, r.text, sizeof(r.text));
	if (r.rc < 0) {
		reply(&a, &r, -1);
		_exit(1);
	}
	keep[0] = sock;
	keep[1] = r.rc;
	r.rc = 0;
	if (close_others(keep, 2))
		_exit(1);
	a.sock = keep[0];
	r.rc = agent_become_target(keep[1], t, &who, r.text, sizeof(r.text));
	close(keep[1]);
	if (r.rc) {
		reply(&a, &r, -1);
		_exit(1);
	}
	a.fsuid = who.fsuid;
	places_of(&who, &places);
	r.rc = make_dir(&a, &places, r.text, sizeof(r.text));
	reply(&a, &r, -1);
	if (r.rc)
		_exit(1);
	serve(&a);
	_exit(0);
}
