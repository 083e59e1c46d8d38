#ifndef MEMSNAP_CLI_WATCH_H
#define MEMSNAP_CLI_WATCH_H

#include "cli/cli.h"
#include "timeline/series.h"

/* What a watch writes and runs (cli/watch_io.c). */

/* DIR, made if need be (0700), else one of the caller's that no one else
 * can write into (outdir_open()), and series.tsv made new in it: the
 * file's descriptor (O_APPEND), or -1 after one error line; *@dir_fd
 * the directory's. */
int watch_open_series(const char *dir, int *dir_fd);

/* One line, whole, at the end of the series (O_APPEND, one write). */
int watch_append(int fd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

struct explain_run;

/* What explain measured (@r) into tick @t. */
void watch_tick_from(const struct explain_run *r, struct series_tick *t);

/*
 * The tick's whole `explain` answer as DIR/explain.txt, for the HTML
 * report's page: a new file renamed over the last, so that a reader
 * never sees half of one.  Failing costs that page its text only.
 */
void watch_keep_explain(int dir_fd, const struct explain_run *r);

#endif
