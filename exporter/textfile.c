/*
 * node_exporter's textfile format, written atomically
 * (exporter/textfile.h).
 */
#include "exporter/textfile.h"

#include "common/fsio.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int textfile_open(const char *path, struct textfile *tf, char *why,
		  size_t size)
{
	const char *slash = strrchr(path, '/'), *base;
	char dir[PATH_MAX];
	struct stat st;
	int rc;

	tf->dir = -1;
	base = slash ? slash + 1 : path;
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else if ((size_t)(slash - path) < sizeof(dir))
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	else
		dir[0] = '\0';
	if (!dir[0]) {
		snprintf(why, size, "'%s': %s", path, strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	if (!str_ends_with(base, ".prom") || strlen(base) <= 5 ||
	    strlen(base) >= sizeof(tf->name)) {
		snprintf(why, size,
			 "'%s' is not a NAME.prom file name: node_exporter reads only *.prom files",
			 base);
		return -EINVAL;
	}
	tf->dir = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (tf->dir < 0) {
		rc = -errno;
		snprintf(why, size, "'%s': %s", dir, strerror(-rc));
		return rc;
	}
	if (fstat(tf->dir, &st)) {
		rc = -errno;
		snprintf(why, size, "'%s': %s", dir, strerror(-rc));
		goto out_dir;
	}
	if (st.st_uid != geteuid()) {
		snprintf(why, size,
			 "'%s' belongs to uid %u, not to this user (uid %u): its owner could swap what is written there",
			 dir, (unsigned)st.st_uid, (unsigned)geteuid());
		rc = -EPERM;
		goto out_dir;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(why, size,
			 "'%s' can be written by others (mode %04o): they could plant or swap what is written there",
			 dir, (unsigned)(st.st_mode & 07777));
		rc = -EPERM;
		goto out_dir;
	}
	snprintf(tf->name, sizeof(tf->name), "%s", base);
	return 0;
out_dir:
	close(tf->dir);
	tf->dir = -1;
	return rc;
}

int textfile_write(struct textfile *tf, const char *text, size_t len)
{
	char tmp[64];
	int fd, rc;

	rc = random_name(tmp, sizeof(tmp), ".tmp");
	if (rc)
		return rc;
	fd = openat(tf->dir, tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	rc = write_in_full(fd, text, len);
	/* the collector runs as a user of its own: readable, whatever the
	 * umask */
	if (!rc && fchmod(fd, 0644))
		rc = -errno;
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && renameat(tf->dir, tmp, tf->dir, tf->name))
		rc = -errno;
	if (rc)
		unlinkat(tf->dir, tmp, 0);
	return rc;
}

void textfile_close(struct textfile *tf)
{
	if (tf->dir >= 0)
		close(tf->dir);
	tf->dir = -1;
}
