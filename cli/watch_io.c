/*
 * What a watch (cli/watch.c) writes: its directory, the series in it,
 * a tick's line from what explain measured, and the last tick's
 * explain.
 */
#include "cli/watch.h"

#include "cli/explain.h"
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
#include <stdlib.h>
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

static void set(struct series_tick *t, enum series_col c, int64_t v)
{
	t->v[c] = v;
	t->known |= 1u << c;
}

void watch_tick_from(const struct explain_run *r, struct series_tick *t)
{
	const struct explain *e = r->e;

	set(t, COL_RSS, (int64_t)e->rss);
	if (e->attached && e->heap_parts) {
		set(t, COL_HEAP_IN_USE, (int64_t)e->part[PART_HEAP_IN_USE]);
		set(t, COL_HEAP_FREE, (int64_t)e->part[PART_HEAP_FREE]);
		set(t, COL_METADATA, (int64_t)e->part[PART_METADATA]);
		set(t, COL_HEAP, (int64_t)(e->part[PART_HEAP_IN_USE] +
					   e->part[PART_HEAP_FREE] +
					   e->part[PART_METADATA]));
	} else {
		set(t, COL_HEAP, (int64_t)e->heap);
	}
	if (r->rt.kind != RUNTIME_NONE)
		set(t, COL_RUNTIME, (int64_t)e->part[PART_RUNTIME]);
	set(t, COL_STACKS, (int64_t)e->part[PART_STACKS]);
	set(t, COL_ANON_OTHER, (int64_t)e->part[PART_ANON_OTHER]);
	set(t, COL_SAMPLER, (int64_t)e->part[PART_MEMSNAP]);
	set(t, COL_FILE, (int64_t)e->part[PART_FILE]);
	set(t, COL_SHMEM, (int64_t)e->part[PART_SHMEM]);
	set(t, COL_UNACCOUNTED, e->unaccounted);
	set(t, COL_SWAP, (int64_t)e->swap);
	set(t, COL_THREADS, (int64_t)e->threads);
}

void watch_keep_explain(int dir_fd, const struct explain_run *r)
{
	char *text = explain_text(&r->who, &r->in, r->e, &r->others);
	int fd;

	if (!text)
		return;
	/* made new, never opened: DIR may be shared, and a FIFO or a
	 * hard link put there must not be written through */
	unlinkat(dir_fd, SERIES_EXPLAIN ".new", 0);
	fd = openat(dir_fd, SERIES_EXPLAIN ".new", O_WRONLY | O_CREAT | O_EXCL |
					       O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd >= 0) {
		if (write_in_full(fd, text, strlen(text)) | close(fd) ||
		    renameat(dir_fd, SERIES_EXPLAIN ".new", dir_fd, SERIES_EXPLAIN))
			unlinkat(dir_fd, SERIES_EXPLAIN ".new", 0);
	}
	free(text);
}
