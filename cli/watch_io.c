/*
 * What a watch (cli/watch.c) writes and runs: its directory and the
 * series in it, and memsnap itself as a child for each dump and each
 * switch of the sampler.
 */
#include "cli/watch.h"

#include "cli/session.h"
#include "common/fsio.h"
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
	int fd;

	if (mkdir(dir, 0700) && errno != EEXIST) {
		error("watch: making '%s': %s", dir, strerror(errno));
		return -1;
	}
	*dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*dir_fd < 0) {
		error("watch: '%s': %s", dir,
		      errno == ELOOP ? "a symlink; memsnap writes into a "
				       "directory it names itself only"
				     : strerror(errno));
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

int watch_run_self(const struct options *opt, const char *const *args)
{
	char pid[16], timeout[32];
	const char *argv[16];
	size_t n = 0, i;
	int status, null;
	bool passed = false;
	pid_t child;

	snprintf(pid, sizeof(pid), "%d", (int)opt->pid);
	argv[n++] = "memsnap";
	argv[n++] = "--pid";
	argv[n++] = pid;
	if (opt->timeout_ms) {
		snprintf(timeout, sizeof(timeout), "%.3f",
			 opt->timeout_ms / 1000.0);
		argv[n++] = "--timeout";
		argv[n++] = timeout;
	}
	if (opt->quiet)
		argv[n++] = "--quiet";
	if (opt->allocator) {
		argv[n++] = "--allocator";
		argv[n++] = opt->allocator;
	}
	for (i = 0; args[i] && n + 1 < ARRAY_SIZE(argv); i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	child = fork();
	if (child < 0)
		return -1;
	if (child == 0) {
		null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (null >= 0)
			dup2(null, STDOUT_FILENO);
		execv("/proc/self/exe", (char *const *)argv);
		_exit(127);
	}
	while (waitpid(child, &status, 0) < 0) {
		if (errno != EINTR)
			return -1;
		if (target_interrupted() && !passed) {
			kill(child, SIGTERM);
			passed = true;
		}
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return -1;
}
