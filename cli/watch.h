#ifndef MEMSNAP_CLI_WATCH_H
#define MEMSNAP_CLI_WATCH_H

#include "cli/cli.h"
#include "timeline/series.h"

#include <stdbool.h>
#include <stdint.h>

/* What the user asked of a watch (cli/watch_args.c). */
struct watch_args {
	const char *dir;
	uint64_t interval_ms, for_ms, count, dump_every;
	uint64_t sample_bytes;	/* --sample-bytes, for --sampler; 0: default */
	uint64_t stack_bytes;	/* --stack-bytes, for --sampler; 0: default */
	uint64_t lease_ms;	/* --sampler-lease; 0: lease_of() */
	bool sampler, no_attach;
};

/* The arguments of `watch` into @a: EXIT_OK, or DIAG_USAGE's exit after
 * one error line. */
int watch_parse_args(int argc, char **argv, struct watch_args *a);

/* The sampler's lease in seconds: --sampler-lease, or 4 intervals and
 * a minute at least, so that late ticks (a slow dump, a loaded machine)
 * never let it lapse while the watch lives. */
uint64_t watch_lease_of(const struct watch_args *a);

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
