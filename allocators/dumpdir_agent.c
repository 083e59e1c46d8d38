#include "allocators/dumpdir_agent.h"

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
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The target's credentials, as its own user namespace sees them. */
struct creds {
	uid_t uid[4];	/* real, effective, saved, fs */
	gid_t gid[4];
	gid_t *groups;	/* as the host sees them */
	size_t ngroups;
	uint64_t cap_eff, cap_prm;
};

struct agent {
	int sock;
	uid_t fsuid;	/* who owns what the target writes */
	int parent_fd;	/* O_PATH: the place, e.g. /tmp */
	int dir_fd;	/* our private directory in it */
	uint64_t dir_mnt;
	char name[32];	/* ".memsnap-0123456789abcdef" */
};

/* ---- becoming the target ----------------------------------------------- */

static int read_all(int fd, char *buf, size_t size)
{
	ssize_t n = read_in_full(fd, buf, size - 1);

	if (n < 0)
		return (int)n;
	buf[n] = '\0';
	return 0;
}

static int read_proc(int proc_fd, const char *rel, char *buf, size_t size)
{
	int fd = openat(proc_fd, rel, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return -errno;
	rc = read_all(fd, buf, size);
	close(fd);
	return rc;
}

/* "Uid:\t1000\t1000\t1000\t1000" -> the four ids. */
static int status_ids(const char *status, const char *key, unsigned long v[4])
{
	const char *p = strstr(status, key);

	if (!p || sscanf(p + strlen(key), "%lu %lu %lu %lu", &v[0], &v[1],
			 &v[2], &v[3]) != 4)
		return -EIO;
	return 0;
}

static int status_caps(const char *status, const char *key, uint64_t *out)
{
	const char *p = strstr(status, key);

	if (!p || sscanf(p + strlen(key), "%" SCNx64, out) != 1)
		return -EIO;
	return 0;
}

static int parse_status(const char *status, struct creds *c)
{
	unsigned long u[4], g[4];
	const char *p;
	size_t i, cap = 0;

	if (status_ids(status, "\nUid:", u) || status_ids(status, "\nGid:", g) ||
	    status_caps(status, "\nCapPrm:", &c->cap_prm) ||
	    status_caps(status, "\nCapEff:", &c->cap_eff))
		return -EIO;
	for (i = 0; i < 4; i++) {
		c->uid[i] = (uid_t)u[i];
		c->gid[i] = (gid_t)g[i];
	}
	p = strstr(status, "\nGroups:");
	if (!p)
		return -EIO;
	p += strlen("\nGroups:");
	while (*p && *p != '\n') {
		char *end;
		unsigned long v = strtoul(p, &end, 10);

		if (end == p) {
			p++;
			continue;
		}
		if (array_grow((void **)&c->groups, &cap, c->ngroups + 1,
			       sizeof(*c->groups)))
			return -ENOMEM;
		c->groups[c->ngroups++] = (gid_t)v;
		p = end;
	}
	return 0;
}

/*
 * @id as seen in the host (the namespace that opened @map) -> as seen in
 * the target's namespace, through /proc/PID/uid_map or gid_map lines
 * "inside outside count".  -ERANGE if unmapped.
 */
static int map_id(const char *map, unsigned long id, unsigned long *out)
{
	unsigned long in, outside, count;
	const char *p = map;
	int n;

	while (sscanf(p, "%lu %lu %lu%n", &in, &outside, &count, &n) == 3) {
		if (id >= outside && id - outside < count) {
			*out = in + (id - outside);
			return 0;
		}
		p += n;
	}
	return -ERANGE;
}

static bool same_file(int fd, const char *path)
{
	struct stat a, b;

	return !fstat(fd, &a) && !stat(path, &b) && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

/* Keep only the capabilities the target has too (never gain one). */
static int limit_caps(const struct creds *c)
{
	struct __user_cap_header_struct h = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct d[2];
	int i;

	if (syscall(SYS_capget, &h, d))
		return -errno;
	for (i = 0; i < 2; i++) {
		d[i].effective &= (uint32_t)(c->cap_eff >> (32 * i));
		d[i].permitted &= (uint32_t)(c->cap_prm >> (32 * i));
		d[i].effective &= d[i].permitted;
		d[i].inheritable = 0;
	}
	return syscall(SYS_capset, &h, d) ? -errno : 0;
}

/*
 * Take the target's view and rights: its groups (set in the host's
 * terms, before leaving), its user namespace, mount namespace and root,
 * then its uids, gids and capabilities.  Each step is skipped where we
 * share it already (memsnap run by the target's own user).
 */
static int become_target(pid_t pid, struct creds *c, const char **step)
{
	static char status[64 * 1024], uid_map[4096], gid_map[4096];
	char path[96];
	int proc_fd, user_fd = -1, mnt_fd = -1, root_fd = -1, rc;
	bool same_user, same_mnt, mnt_first;
	unsigned long id;
	size_t i;

	proc_path(pid, "", path, sizeof(path));
	*step = "opening /proc/PID";
	proc_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (proc_fd < 0)
		return -errno;
	user_fd = openat(proc_fd, "ns/user", O_RDONLY | O_CLOEXEC);
	mnt_fd = openat(proc_fd, "ns/mnt", O_RDONLY | O_CLOEXEC);
	root_fd = openat(proc_fd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
	rc = -errno;
	if (user_fd < 0 || mnt_fd < 0 || root_fd < 0)
		goto out;
	*step = "reading /proc/PID/status";
	rc = read_proc(proc_fd, "status", status, sizeof(status));
	if (!rc)
		rc = parse_status(status, c);
	if (!rc)
		rc = read_proc(proc_fd, "uid_map", uid_map, sizeof(uid_map));
	if (!rc)
		rc = read_proc(proc_fd, "gid_map", gid_map, sizeof(gid_map));
	if (rc)
		goto out;
	same_user = same_file(user_fd, "/proc/self/ns/user");
	same_mnt = same_file(mnt_fd, "/proc/self/ns/mnt");

	/* Groups first: a user namespace may deny setgroups() inside. */
	*step = "setgroups";
	if (setgroups(c->ngroups, c->groups) && (errno != EPERM || !geteuid())) {
		rc = -errno;
		goto out;
	}
	if (!same_user) {
		*step = "mapping the target's ids into its user namespace";
		for (i = 0; i < 4; i++) {
			rc = map_id(uid_map, c->uid[i], &id);
			if (rc)
				goto out;
			c->uid[i] = (uid_t)id;
			rc = map_id(gid_map, c->gid[i], &id);
			if (rc)
				goto out;
			c->gid[i] = (gid_t)id;
		}
	}
	/*
	 * With privileges, the mount namespace first (its owner may be an
	 * ancestor of the target's user namespace); without, the user
	 * namespace first (that is where our rights over it come from).
	 */
	mnt_first = geteuid() == 0;
	if (mnt_first && !same_mnt) {
		*step = "setns(CLONE_NEWNS)";
		if (setns(mnt_fd, CLONE_NEWNS)) {
			rc = -errno;
			goto out;
		}
	}
	if (!same_user) {
		*step = "setns(CLONE_NEWUSER)";
		if (setns(user_fd, CLONE_NEWUSER)) {
			rc = -errno;
			goto out;
		}
	}
	if (!mnt_first && !same_mnt) {
		*step = "setns(CLONE_NEWNS)";
		if (setns(mnt_fd, CLONE_NEWNS)) {
			rc = -errno;
			goto out;
		}
	}
	*step = "chroot to /proc/PID/root";
	if (!same_file(root_fd, "/") && (fchdir(root_fd) || chroot("."))) {
		rc = -errno;
		goto out;
	}
	if (chdir("/")) {
		rc = -errno;
		goto out;
	}
	*step = "setresgid";
	if (setresgid(c->gid[0], c->gid[1], c->gid[2])) {
		rc = -errno;
		goto out;
	}
	*step = "setresuid";
	if (setresuid(c->uid[0], c->uid[1], c->uid[2])) {
		rc = -errno;
		goto out;
	}
	setfsgid(c->gid[3]);
	setfsuid(c->uid[3]);
	*step = "checking the new ids";
	if ((gid_t)setfsgid((gid_t)-1) != c->gid[3] ||
	    (uid_t)setfsuid((uid_t)-1) != c->uid[3]) {
		rc = -EPERM;
		goto out;
	}
	*step = "capset";
	rc = limit_caps(c);
	/* Nobody of the target's uid may trace or read us. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
out:
	if (root_fd >= 0)
		close(root_fd);
	if (mnt_fd >= 0)
		close(mnt_fd);
	if (user_fd >= 0)
		close(user_fd);
	close(proc_fd);
	return rc;
}

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
		rc = random_name(a->name, sizeof(a->name));
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

/* Only @keep and /dev/null on 0, 1, 2: none of memsnap's files. */
static int close_others(int keep)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC), fd;

	if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
	    dup2(null, 2) < 0)
		return -1;
	if (keep != 3 && dup2(keep, 3) < 0)
		return -1;
	if (syscall(SYS_close_range, 4, ~0U, 0))
		for (fd = 4; fd < 65536; fd++)
			close(fd);
	return 3;
}

void agent_main(int sock, pid_t pid, const struct agent_places *places)
{
	static const int ignored[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT,
				       SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU };
	struct agent a = { .parent_fd = -1, .dir_fd = -1 };
	struct agent_rep r = { 0 };
	struct creds c = { 0 };
	const char *step = "";
	sigset_t none;
	size_t i;

	/* memsnap's Ctrl-C is for memsnap: the agent cleans up on EOF. */
	for (i = 0; i < ARRAY_SIZE(ignored); i++)
		signal(ignored[i], SIG_IGN);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	a.sock = close_others(sock);
	if (a.sock < 0)
		_exit(1);
	r.rc = become_target(pid, &c, &step);
	if (r.rc) {
		snprintf(r.text, sizeof(r.text),
			 "taking the target's credentials: %s: %s", step,
			 strerror(-r.rc));
		reply(&a, &r, -1);
		_exit(1);
	}
	a.fsuid = c.uid[3];
	r.rc = make_dir(&a, places, r.text, sizeof(r.text));
	reply(&a, &r, -1);
	if (r.rc)
		_exit(1);
	serve(&a);
	_exit(0);
}
