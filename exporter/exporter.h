#ifndef MEMSNAP_EXPORTER_EXPORTER_H
#define MEMSNAP_EXPORTER_EXPORTER_H

#include "allocators/account.h"
#include "common/diag.h"
#include "exporter/expo.h"
#include "proc/pin.h"
#include "proc/runtime.h"
#include "proc/smaps.h"
#include "sampler/sampler.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * memsnap exporter: the memory of a set of processes, broken down as
 * `explain` breaks it down, in Prometheus's text exposition.
 *
 * The model: a set of targets, each a pinned process (proc/pin.h: a
 * pidfd opened first, then its /proc/PID directory, the pin checked
 * after every read: a pid that exits and is reused is a new target,
 * never the old one).  Each scrape reads every target's /proc part (smaps, status:
 * no thread stopped) and computes the parts of RSS from it and the
 * allocator's numbers last read; the allocator's numbers are read, one
 * thread borrowed, at most every @attach_every_ms per target, by the
 * caller's reader (struct exporter_reader), never in a scrape but in
 * exporter_work().  Targets are the processes of @pids and, when any
 * filter is given, every process that passes them all, found again at
 * every scrape, at most @max_targets (the largest first; a target stays
 * one until it exits).
 *
 * Nothing here prints or exits: failures are counted by kind and
 * exported (memsnap_exporter_read_failures_total{reason}).
 */

/* What one reading of a target brings (struct exporter_reader). */
struct exporter_reading {
	enum diag_kind failed;	/* with @ok false: why */
	bool ok;
	char why[256];		/* the failure's line, for a log */
	const char *allocator;	/* alloc_kind_name() of the one serving
				   malloc, or NULL; a static string */
	bool can_prof;		/* it profiles (prof on) */
	bool attached;		/* @acc is the allocator's account */
	struct alloc_account acc;
	int sampler_rc;		/* 0: memsnap's sampler is in the process;
				   -ENOENT: it is not; else unreadable */
	bool sampler_active;
	uint64_t sampler_mean;	/* bytes between samples */
	/* the sampler's memory, memsnap's and not the program's */
	struct smap_claim claims[SAMPLER_RANGES];
	size_t nclaims;
	struct runtime_info rt;	/* the language runtime it runs, with its
				   own numbers (RUNTIME_NONE: none) */
	bool no_malloc;		/* no malloc at all (a static Go) */
	uint64_t stopped_us;	/* how long a thread was held for it */
};

/*
 * The reading of the process @p pins (and of no other: its pid may name
 * another by then): @attach says whether a thread may be borrowed (else
 * /proc and its memory only: the allocator found, the sampler's state).
 * Fills @out, @out->ok or why not.  The exporter knows no more of how:
 * today cli/exporter.c measures as `explain` does.
 */
struct exporter_reader {
	void (*read)(void *ctx, const struct proc_pin *p, bool attach,
		     struct exporter_reading *out);
	/* A line for a log (may be NULL): a target's reading failed for
	 * a reason it had not failed for before, a --pid target exited. */
	void (*note)(void *ctx, const char *line);
	void *ctx;
};

struct exporter_config {
	const pid_t *pids;	/* --pid, each a target while it lives */
	size_t npids;
	const char *match;	/* --match: an ERE on comm or executable */
	uint64_t min_rss;	/* --min-rss: bytes, 0 any */
	const char *cgroup;	/* --cgroup: this cgroup and those beneath */
	unsigned int max_targets;
	uint64_t attach_every_ms;
	bool no_attach;		/* readings never borrow a thread */
	struct exporter_reader reader;
};

#define EXPORTER_MAX_TARGETS_DEFAULT 100
#define EXPORTER_MAX_TARGETS_LIMIT 10000
#define EXPORTER_ATTACH_EVERY_DEFAULT_MS 60000
/* Readings older than this many --attach-every are no longer used. */
#define EXPORTER_STALE_READINGS 3

struct exporter;

/*
 * A new exporter for @c (copied; @c->pids too).  0, -EINVAL for a
 * --match that is not a regular expression (its error in @why), or
 * -ENOMEM.
 */
int exporter_new(const struct exporter_config *c, struct exporter **out,
		 char *why, size_t size);

void exporter_free(struct exporter *e);

/*
 * Find the targets again: end those whose process exited, pin the new
 * processes that pass the filters, up to --max-targets.  Done by
 * exporter_scrape() too.  The number of targets.
 */
size_t exporter_find(struct exporter *e);

/*
 * The readings that are due (a new target's first, the others every
 * --attach-every), for at most @budget_ms (0: all that are due), the
 * oldest first.  How many ms until the next is due (UINT64_MAX: none).
 */
uint64_t exporter_work(struct exporter *e, uint64_t budget_ms);

/*
 * One scrape into @x (appended): exporter_find(), each target's /proc
 * part read and its parts computed, every family written whole.  A
 * target appears once its first reading is done.  0, or -ENOMEM (@x
 * cut).
 */
int exporter_scrape(struct exporter *e, struct expo *x);

/* Milliseconds of CLOCK_MONOTONIC, the clock of every deadline here. */
uint64_t exporter_now_ms(void);

/* Targets now, and the pid of each (for a log), into @pids. */
size_t exporter_targets(const struct exporter *e, pid_t *pids, size_t max);

#endif
