/*
 * Scratch directories: mkdtemp() to make one, and a removal that walks
 * the tree by directory descriptors (openat, unlinkat) instead of
 * `rm -rf` through a shell: a target may have written into the tree,
 * and what it left there is unlinked, never followed or opened.
 */
#include "scratch.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int scratch_make(const char *prefix, char *dir, size_t size)
{
	const char *top = getenv("TMPDIR");
	int n;

	if (!top || !top[0])
		top = "/tmp";
	if (prefix[0] == '/')
		n = snprintf(dir, size, "%s.XXXXXX", prefix);
	else
		n = snprintf(dir, size, "%s/%s.XXXXXX", top, prefix);
	if (n < 0 || (size_t)n >= size) {
		if (size)
			dir[0] = '\0';
		return -ENAMETOOLONG;
	}
	if (!mkdtemp(dir)) {
		int rc = -errno;

		dir[0] = '\0';
		return rc;
	}
	return 0;
}

static int remove_at(int dfd, const char *name);

/* Remove every entry of the directory open at @fd, and close it. */
static int empty_dir(int fd)
{
	struct dirent *e;
	int rc = 0, r;
	DIR *d;

	d = fdopendir(fd);
	if (!d) {
		rc = -errno;
		close(fd);
		return rc;
	}
	/* unlinking what readdir() returned moves nothing it has yet to
	 * return */
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		r = remove_at(dirfd(d), e->d_name);
		if (r && !rc)
			rc = r;
	}
	closedir(d);
	return rc;
}

/*
 * Remove @name in @dfd.  unlinkat() first: it takes anything but a
 * directory without opening it, and says EISDIR for a directory, which
 * is then opened with O_NOFOLLOW (a symlink swapped in meanwhile is
 * refused, not followed), emptied and removed.
 */
static int remove_at(int dfd, const char *name)
{
	int fd, rc;

	if (!unlinkat(dfd, name, 0) || errno == ENOENT)
		return 0;
	if (errno != EISDIR)
		return -errno;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			       O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	rc = empty_dir(fd);
	if (unlinkat(dfd, name, AT_REMOVEDIR) && errno != ENOENT && !rc)
		rc = -errno;
	return rc;
}

int scratch_remove(const char *path)
{
	return remove_at(AT_FDCWD, path);
}

void scratch_cleanup(char *dir)
{
	int rc;

	if (!dir[0])
		return;
	rc = scratch_remove(dir);
	if (rc)
		fprintf(stderr, "could not remove '%s': %s\n", dir,
			strerror(-rc));
	dir[0] = '\0';
}

void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	size_t len = strlen(text);

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(write(fd, text, len), (ssize_t)len, "%s", path);
	cr_assert_eq(fchmod(fd, mode), 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(close(fd), 0, "%s", path);
}

bool write_existing(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	bool ok;

	if (fd < 0)
		return false;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	return close(fd) == 0 && ok;
}

int series_ticks(const char *dir)
{
	char path[4096 + 32], line[1100];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/series.tsv", dir);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += line[0] >= '0' && line[0] <= '9' && strchr(line, '\n');
	fclose(f);
	return n;
}
