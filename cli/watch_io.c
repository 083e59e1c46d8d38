/*
 * What a watch (cli/watch.c) writes: its directory and the series in
 * it.
 */
#include "cli/watch.h"

#include "cli/session.h"
#include "common/fsio.h"
#include "common/output.h"
#include "common/util.h"
#include "timeline/series.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int watch_open_series(const char *dir, int *dir_fd)
{
	char why[512];
	int fd;

	/* made if need be, 0700; else one of the caller's own that no one
	 * else can write into (output_open()'s rules for the path) */
	*dir_fd = outdir_open(dir, true, why, sizeof(why));
	if (*dir_fd < 0) {
		error("watch: '%s': %s", dir, why);
		return -1;
	}
	fd = openat(*dir_fd, "series.tsv",
		    O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW |
			    O_CLOEXEC,
		    0644);
	if (fd < 0) {
		error("watch: '%s/series.tsv': %s", dir,
		      errno == EEXIST ? "a series is there already; give "
					"another directory"
				      : strerror(errno));
		close(*dir_fd);
		*dir_fd = -1;
	}
	return fd;
}

int watch_append(int fd, const char *fmt, ...)
{
	char line[SERIES_LINE_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= sizeof(line)) {
		n = sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	return write_in_full(fd, line, (size_t)n);
}
