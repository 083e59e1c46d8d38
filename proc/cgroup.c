/*
 * The memory limit of a process's cgroup (proc/cgroup.h).
 */
#include "proc/cgroup.h"

#include "common/fsio.h"
#include "common/util.h"
#include "proc/procfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Where each hierarchy is mounted, and its file of the limit.  A v1
 * limit at or above 2^62 is its "no limit" (PAGE_COUNTER_MAX pages). */
struct hierarchy {
	const char *root, *file;
	uint64_t none;
};

static const struct hierarchy v2 = { "/sys/fs/cgroup", "memory.max", 0 };
static const struct hierarchy v1 = { "/sys/fs/cgroup/memory",
				     "memory.limit_in_bytes", 1ull << 62 };

/* The path of a cgroup in hierarchy @h from the text of a
 * /proc/PID/cgroup file: "0::/a/b" (v2) or "4:memory:/a/b" (v1, the
 * memory controller).  @buf is cut into lines.  A path outside this
 * cgroup namespace's root ("/../../a") only when @outside. */
static int cgroup_path_in(char *buf, const struct hierarchy *h, char *path,
			  size_t size, bool outside)
{
	char *line, *save = NULL;

	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *ctl = strchr(line, ':'), *p;

		if (!ctl || !(p = strchr(ctl + 1, ':')))
			continue;
		*p++ = '\0';
		*ctl++ = '\0';
		if (h == &v2 ? strcmp(line, "0") || *ctl
			     : !strstr(ctl, "memory"))
			continue;
		/* outside this cgroup namespace's root: not ours to read */
		if (*p != '/' || (!outside && strstr(p, "/..")) ||
		    strlen(p) >= size)
			return -ENOENT;
		snprintf(path, size, "%s", p);
		return 0;
	}
	return -ENOENT;
}

/* The text of "cgroup" of @pid, or under @proc_fd when it is not -1. */
static int cgroup_read(pid_t pid, int proc_fd, char *buf, size_t size)
{
	ssize_t n;
	int fd;

	if (proc_fd < 0)
		return proc_read_small(pid, "cgroup", buf, size, NULL);
	fd = openat(proc_fd, "cgroup", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	n = read_in_full(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return (int)n;
	buf[n] = '\0';
	return 0;
}

static int cgroup_path(pid_t pid, int proc_fd, const struct hierarchy *h,
		       char *path, size_t size, bool outside)
{
	char buf[4096];
	int rc = cgroup_read(pid, proc_fd, buf, sizeof(buf));

	return rc ? rc : cgroup_path_in(buf, h, path, size, outside);
}

/* The limit in the directory @dir of @h: 0 for none, or no such file
 * (v2's root has none). */
static int read_max(int root, const struct hierarchy *h, const char *dir,
		    uint64_t *max)
{
	char rel[PATH_MAX + 32], buf[64];
	ssize_t n;
	int fd;

	*max = 0;
	snprintf(rel, sizeof(rel), "%s%s%s", dir + 1, dir[1] ? "/" : "",
		 h->file);
	fd = openat(root, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	n = read_in_full(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n ? (int)n : -EINVAL;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (!strcmp(buf, "max"))
		return 0;
	if (parse_u64(buf, 10, max))
		return -EINVAL;
	if (h->none && *max >= h->none)
		*max = 0;
	return 0;
}

/* The smallest limit from @pid's cgroup up to the root of @h. */
static int limit_in(pid_t pid, int proc_fd, const struct hierarchy *h,
		    uint64_t *limit)
{
	char path[PATH_MAX], probe[PATH_MAX + 32];
	uint64_t max;
	int root, rc;

	*limit = 0;
	/* v2 only where /sys/fs/cgroup is the unified hierarchy itself */
	snprintf(probe, sizeof(probe), "%s/%s", h->root,
		 h == &v2 ? "cgroup.controllers" : h->file);
	if (access(probe, F_OK))
		return -ENOENT;
	rc = cgroup_path(pid, proc_fd, h, path, sizeof(path), false);
	if (rc)
		return rc;
	root = open(h->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -errno;
	for (;;) {
		char *slash;

		rc = read_max(root, h, path, &max);
		if (rc)
			break;
		if (max && (!*limit || max < *limit))
			*limit = max;
		slash = strrchr(path, '/');
		if (!slash || slash == path) {
			if (path[1]) {
				path[1] = '\0';	/* then the root */
				continue;
			}
			break;
		}
		*slash = '\0';
	}
	close(root);
	return rc;
}

int proc_memory_limit(pid_t pid, uint64_t *limit)
{
	int rc = limit_in(pid, -1, &v2, limit);

	return rc == -ENOENT ? limit_in(pid, -1, &v1, limit) : rc;
}

int proc_memory_limit_at(int proc_fd, uint64_t *limit)
{
	int rc = limit_in(0, proc_fd, &v2, limit);

	return rc == -ENOENT ? limit_in(0, proc_fd, &v1, limit) : rc;
}

int proc_cgroup_at(int proc_fd, char *path, size_t size)
{
	char probe[64];
	int rc;

	snprintf(probe, sizeof(probe), "%s/cgroup.controllers", v2.root);
	rc = cgroup_path(0, proc_fd, access(probe, F_OK) ? &v1 : &v2, path,
			 size, true);
	if (rc)
		path[0] = '\0';
	return rc;
}
