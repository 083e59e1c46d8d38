#ifndef MEMSNAP_CLI_WATCH_H
#define MEMSNAP_CLI_WATCH_H

#include "cli/cli.h"

/* What a watch writes and runs (cli/watch_io.c). */

/* DIR, made if need be (0700), and series.tsv made new in it: the
 * file's descriptor (O_APPEND), or -1 after one error line; *@dir_fd
 * the directory's. */
int watch_open_series(const char *dir, int *dir_fd);

/* One line, whole, at the end of the series (O_APPEND, one write). */
int watch_append(int fd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * memsnap itself with @args after --pid and the global options: its
 * exit status, or -1 when it could not run.  Its standard output is
 * dropped (dump prints the file's name), its errors go to ours.  A
 * signal to the watch is passed on, so the child restores its thread
 * and exits too.
 */
int watch_run_self(const struct options *opt, const char *const *args);

#endif
