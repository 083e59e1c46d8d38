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

struct report_args;

/* `memsnap report DIR/@name --format folded` (--base DIR/@base unless
 * NULL), its standard output into *@out (NUL-terminated, at most
 * FOLDED_MAX bytes).  0 or -errno; *@status its exit status (-1:
 * killed). */
int timeline_folded(const struct report_args *a, const char *dir,
		    const char *name, const char *base, char **out,
		    size_t *len, int *status);

/* FNV-1a of the @len bytes at @s: sites and frames are found by it. */
uint64_t timeline_name_hash(const char *s, size_t len);

/* "RSS 10 MiB -> 14 MiB, +2.0 MiB/h: still growing; most of it ..." */
void timeline_rss_sentence(const struct timeline *tl, char *buf,
			   size_t size);
/* What the memory limit means at the slope; false: no limit known. */
bool timeline_limit_sentence(const struct timeline *tl, char *buf,
			     size_t size);
/* A shape in words: "still growing", "grew, then levelled off", ... */
const char *timeline_shape_words(enum trend_shape s);
/* @v as "+1.5 MiB" or "-20 KiB". */
void timeline_signed_bytes(double v, char *buf, size_t size);

/* The page of `report DIR --format html` (cli/timeline_html.c): the
 * chart, the last tick's breakdown and findings, the sites that grew
 * with their sparklines, and a flame graph of the growth from the first
 * dump read to the last. */
void timeline_html(const struct timeline *tl, const struct report_args *a,
		   FILE *f);

/* Read the watch's directory @a->dump: its series, the parts' trends,
 * and (but for --format svg) the sites of its dumps.  EXIT_OK, or the
 * exit status after one error line; timeline_free() either way. */
int timeline_load(const struct report_args *a, bool quiet, struct timeline *tl);
void timeline_free(struct timeline *tl);

/* The values of column @c over the ticks, in @v (tl->s.n of them). */
void timeline_column(const struct timeline *tl, enum series_col c, double *v);

/* The timeline in the format @a asks (text, JSON, SVG or HTML) on @f
 * (cli/timeline_text.c). */
void timeline_print(const struct timeline *tl, const struct report_args *a,
		    FILE *f);

/* @s seconds as "12.5 s", "3.0 min", "2.5 h" or "1.5 days" (@digits
 * after the point for seconds and minutes). */
void timeline_duration(double s, int digits, char *buf, size_t size);

/* The timeline as one self-contained SVG: RSS over time in its parts,
 * stacked, the dumps marked; the target's strings escaped.  Without
 * @standalone, the <svg> element alone, for a page. */
void timeline_svg(const struct timeline *tl, bool standalone, FILE *f);

#endif
