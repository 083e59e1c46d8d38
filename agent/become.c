/*
 * The agent becoming the target (see agent/agent.h): its
 * mount and user namespaces, its root, its ids, groups and capabilities,
 * read from /proc/PID/status (through the directory agent_pin() proved
 * to be the target's, and only if they are those memsnap saw) and
 * mapped through its uid_map/gid_map.
 */
#include "agent/agent.h"

#include "common/fsio.h"
#include "common/util.h"
#include "proc/procfs.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The target's credentials: @id as the host sees them, then mapped
 * into its own user namespace. */
struct creds {
	struct proc_creds id;
	gid_t *groups;	/* as the host sees them */
	size_t ngroups;
};

/* ---- becoming the target ----------------------------------------------- */

/* All of @fd, or -EFBIG: a file cut short (a Groups: line cut in the
 * middle of a number) would give the agent rights the target lacks. */
static int read_all(int fd, char *buf, size_t size)
{
	ssize_t n = read_in_full(fd, buf, size - 1);

	if (n < 0)
		return (int)n;
	if ((size_t)n == size - 1)
		return -EFBIG;
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

static int parse_status(const char *status, struct creds *c)
{
	const char *p;
	size_t cap = 0;

	if (proc_creds_parse(status, &c->id))
		return -EIO;
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
		d[i].effective &= (uint32_t)(c->id.cap_eff >> (32 * i));
		d[i].permitted &= (uint32_t)(c->id.cap_prm >> (32 * i));
		d[i].effective &= d[i].permitted;
		d[i].inheritable = 0;
	}
	return syscall(SYS_capset, &h, d) ? -errno : 0;
}

/*
 * Take the target's view and rights: its groups (set in the host's
 * terms, before leaving), its user namespace, mount namespace and root,
 * then its uids, gids and capabilities.  Each step is skipped where we
 * share it already (memsnap run by the target's own user).  All that is
 * read of the target is read through @proc_fd, before anything changes.
 */
/*
 * Join the target's namespaces (@same_user, @same_mnt: memsnap's own
 * already) and its root.  With privileges, the mount namespace first
 * (its owner may be an ancestor of the target's user namespace);
 * without, the user namespace first (that is where our rights over it
 * come from).  0 or -errno, *@step naming the one that failed.
 */
static int enter_views(int user_fd, int mnt_fd, int root_fd, bool same_user,
		       bool same_mnt, const char **step)
{
	bool mnt_first = geteuid() == 0;

	if (mnt_first && !same_mnt) {
		*step = "setns(CLONE_NEWNS)";
		if (setns(mnt_fd, CLONE_NEWNS))
			return -errno;
	}
	if (!same_user) {
		*step = "setns(CLONE_NEWUSER)";
		if (setns(user_fd, CLONE_NEWUSER))
			return -errno;
	}
	if (!mnt_first && !same_mnt) {
		*step = "setns(CLONE_NEWNS)";
		if (setns(mnt_fd, CLONE_NEWNS))
			return -errno;
	}
	*step = "chroot to /proc/PID/root";
	if (!same_file(root_fd, "/") && (fchdir(root_fd) || chroot(".")))
		return -errno;
	return chdir("/") ? -errno : 0;
}

/* Take the target's real, effective, saved and file-system ids @uid
 * and @gid (four each), and check the file-system ones took. */
static int take_ids(const uid_t *uid, const gid_t *gid, const char **step)
{
	*step = "setresgid";
	if (setresgid(gid[0], gid[1], gid[2]))
		return -errno;
	*step = "setresuid";
	if (setresuid(uid[0], uid[1], uid[2]))
		return -errno;
	setfsgid(gid[3]);
	setfsuid(uid[3]);
	*step = "checking the new ids";
	if ((gid_t)setfsgid((gid_t)-1) != gid[3] ||
	    (uid_t)setfsuid((uid_t)-1) != uid[3])
		return -EPERM;
	return 0;
}

static int become_target(int proc_fd, const struct agent_target *t,
			 struct creds *c, struct agent_who *who,
			 const char **step, char *why, size_t size)
{
	/* 65536 groups fit; uid_map and gid_map hold at most 340 lines */
	static char status[1 << 20], uid_map[64 * 1024], gid_map[64 * 1024];
	int user_fd = -1, mnt_fd = -1, root_fd = -1, rc;
	bool same_user, same_mnt;
	uid_t *uid = c->id.uid;
	gid_t *gid = c->id.gid;
	unsigned long id;
	size_t i;

	*step = "opening /proc/PID/ns and root";
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
	if (rc)
		goto out;
	/* Who it is now, before what it says of itself (auxv, environ):
	 * the rights memsnap saw, or none. */
	rc = agent_same_creds(t, &c->id, why, size);
	if (rc)
		goto out;
	agent_environment(proc_fd, &c->id, who);
	*step = "reading /proc/PID/uid_map and gid_map";
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
			rc = map_id(uid_map, uid[i], &id);
			if (rc)
				goto out;
			uid[i] = (uid_t)id;
			rc = map_id(gid_map, gid[i], &id);
			if (rc)
				goto out;
			gid[i] = (gid_t)id;
		}
	}
	rc = enter_views(user_fd, mnt_fd, root_fd, same_user, same_mnt, step);
	if (!rc)
		rc = take_ids(uid, gid, step);
	if (rc)
		goto out;
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
	return rc;
}

int agent_become_target(int proc_fd, const struct agent_target *t,
			struct agent_who *who, char *why, size_t size)
{
	struct creds c = { 0 };
	const char *step = "";
	int rc;

	why[0] = '\0';
	rc = become_target(proc_fd, t, &c, who, &step, why, size);
	/* In the target's namespace now, as the ids were mapped. */
	who->fsuid = c.id.uid[3];
	if (rc && !why[0])
		snprintf(why, size, "taking the target's credentials: %s: %s",
			 step, strerror(-rc));
	free(c.groups);
	return rc;
}
