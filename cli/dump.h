#ifndef MEMSNAP_CLI_DUMP_H
#define MEMSNAP_CLI_DUMP_H

#include "cli/cli.h"
#include "sampler/sampler.h"

#include <stdbool.h>
#include <stdint.h>

/* Where a heap profile goes. */
struct dump_to {
	const char *path;	/* -o: a path, "-"; NULL: the default name */
	int dir_fd;		/* >= 0: instead, @name made new in it */
	const char *name;
};

/* What was written. */
struct dump_done {
	char final[4096];	/* its path, or @name */
	uint64_t bytes;
	bool in_place;		/* standard output, a device, a FIFO */
	bool sampler;		/* from memsnap's sampler: @sd */
	struct sampler_dump sd;
};

/*
 * One heap profile of process @opt->pid (its view loaded afresh, for
 * @opt->pin where a command holds one) to @to, as `dump` takes it: the
 * sampler's records while it is on, else the allocator's profiler on a
 * borrowed thread.  Nothing printed but errors, notes and warnings (the
 * latter two not with @opt->quiet).  The exit code.
 */
int dump_take(const struct options *opt, const struct dump_to *to,
	      struct dump_done *dd);

#endif
