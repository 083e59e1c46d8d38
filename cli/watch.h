#ifndef MEMSNAP_CLI_WATCH_H
#define MEMSNAP_CLI_WATCH_H

#include "cli/cli.h"

/* What a watch writes and runs (cli/watch_io.c). */

/* DIR, made if need be (0700), else one of the caller's that no one else
 * can write into (outdir_open()), and series.tsv made new in it: the
 * file's descriptor (O_APPEND), or -1 after one error line; *@dir_fd
 * the directory's. */
int watch_open_series(const char *dir, int *dir_fd);

/* One line, whole, at the end of the series (O_APPEND, one write). */
int watch_append(int fd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
