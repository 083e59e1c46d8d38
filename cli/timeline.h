#ifndef MEMSNAP_CLI_TIMELINE_H
#define MEMSNAP_CLI_TIMELINE_H

#include "common/hidx.h"
#include "timeline/series.h"
#include "timeline/trend.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/*
 * memsnap report DIR (cli/timeline.c): a watch's series read back, its
 * trends, and the call sites of its dumps; printed as text or JSON
 * there, drawn as an SVG chart by timeline_svg().
 */

/* Dumps read for the sites: evenly spread over the series, the first
 * and the last among them. */
#define SITE_DUMPS_MAX 32
/* The folded lines of one dump memsnap takes from its report child. */
#define FOLDED_MAX (256u << 20)
#define SITE_NAME_MAX 256
/* Distinct sites kept; the bytes of any more go to one row, OTHER_SITES
 * (a hostile dump's every stack may end in an address of its own). */
#define SITES_MAX 65536
#define OTHER_SITES "[other sites]"

struct site {
	char name[SITE_NAME_MAX];
	double bytes[SITE_DUMPS_MAX];
	double growth;
	struct trend tr;
};

struct timeline {
	struct series s;
	double *t;			/* seconds since the first tick */
	struct trend parts[SERIES_COLS];
	bool have[SERIES_COLS];		/* measured at every tick */
	/* the dumps read */
	size_t ndumps;
	size_t dump_tick[SITE_DUMPS_MAX];
	bool dump_ok[SITE_DUMPS_MAX];
	struct site *sites;
	size_t nsites, cap;
	struct hidx idx;		/* over sites, by name */
	double limit_hours;		/* until RSS reaches the limit; <0 never */
};

/* @s seconds as "12.5 s", "3.0 min", "2.5 h" or "1.5 days" (@digits
 * after the point for seconds and minutes). */
void timeline_duration(double s, int digits, char *buf, size_t size);

/* The timeline as one self-contained SVG: RSS over time in its parts,
 * stacked, the dumps marked; the target's strings escaped. */
void timeline_svg(const struct timeline *tl, FILE *f);

#endif
