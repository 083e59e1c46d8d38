#ifndef MEMSNAP_TIMELINE_TIMELINE_H
#define MEMSNAP_TIMELINE_TIMELINE_H

#include "common/diag.h"
#include "common/hidx.h"
#include "common/voice.h"
#include "profile/box.h"
#include "timeline/series.h"
#include "timeline/trend.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/*
 * A watch's directory read back (`memsnap report DIR`): its series, the
 * trend of each part, and its dumps (model.c), the call sites of the
 * dumps (sites.c), the sentences every output uses (words.c), printed
 * as text or JSON (text.c), drawn as an SVG chart (svg.c) and put in
 * one page (html.c).
 */

/* Dumps read for the sites: evenly spread over the series, the first
 * and the last among them. */
#define SITE_DUMPS_MAX 32
/* The folded lines of one dump memsnap takes from its report's parser. */
#define FOLDED_MAX (256u << 20)
#define SITE_NAME_MAX 256
/* Distinct sites kept; the bytes of any more go to one row, OTHER_SITES
 * (a hostile dump's every stack may end in an address of its own). */
#define SITES_MAX 65536
#define OTHER_SITES "[other sites]"

struct site {
	char name[SITE_NAME_MAX];
	double bytes[SITE_DUMPS_MAX];
	double growth;	/* what its floor rose by over the dumps */
	struct trend tr;
};

/* A site is large when its peak is at least this share of the largest
 * site's peak (and more than the noise of a site). */
#define TIMELINE_LARGE_SHARE 0.05

/*
 * What a part of RSS does now, for the headline (timeline_judge()).
 * The threshold is TIMELINE_GROWTH_SHARE of the last tick's RSS, or
 * the part's noise (timeline/trend.h) when that is more:
 *
 *   growing      its shape is growing, and its floor rose by the
 *                threshold or more (over the watch, or over the last
 *                third alone)
 *   creeping     its shape is growing, under the threshold
 *   levelled     a plateau whose floor rose by the threshold or more
 *   working set  neither, and a swing of the threshold or more
 *   shrinking    its floor fell by the threshold or more
 *   quiet        none of these
 */
enum part_state {
	STATE_QUIET,
	STATE_GROWING,
	STATE_CREEPING,
	STATE_LEVELLED,
	STATE_WORKING_SET,
	STATE_SHRINKING,
};

#define TIMELINE_GROWTH_SHARE 0.05

struct timeline {
	struct series s;
	double *t;			/* seconds since the first tick */
	struct trend parts[SERIES_COLS];
	bool have[SERIES_COLS];		/* measured at every tick */
	enum part_state state[SERIES_COLS];	/* of the parts judged */
	double threshold;		/* bytes: of "still growing" */
	/* the dumps read */
	size_t ndumps;
	size_t dump_tick[SITE_DUMPS_MAX];
	bool dump_ok[SITE_DUMPS_MAX];
	struct site *sites;		/* most growth first */
	size_t nsites, cap;
	struct hidx idx;		/* over sites, by name */
	struct wrappers *wrappers;	/* timeline_opts' */
	double limit_hours;		/* until RSS reaches the limit; <0 never */
	/* what grew from the first dump read to the last: folded lines
	 * "root;...;leaf BYTES" of the stacks that grew, or NULL */
	char *growth;
	const char *growth_from, *growth_to;	/* the two dumps' names */
	char *explain;			/* the last tick's, or NULL */
};

/* What `report DIR` asks of a directory. */
struct timeline_opts {
	const char *dir;		/* its name, for messages */
	bool sites;			/* read the dumps too */
	const char *root;		/* as report's --root */
	bool debuginfod;
	uint64_t max_size;		/* the series, and each dump */
	/* a site is the first frame past them (profile/wrappers.h);
	 * NULL: the leaf frame */
	struct wrappers *wrappers;
};

/* FNV-1a of the @len bytes at @s: sites and frames are found by it. */
uint64_t timeline_name_hash(const char *s, size_t len);

/* The state of each part of RSS, and the threshold (above), from the
 * parts' trends. */
void timeline_judge(struct timeline *tl);
/* Is column @col one of the parts judged (measured, and not the heap
 * as one part beside its parts)? */
bool timeline_part_judged(const struct timeline *tl, int col);
/* "growing", "levelled", ... (the JSON name) */
const char *timeline_state_name(enum part_state s);

/*
 * The first sentence of every output, made of the parts' states: the
 * parts still growing, at what pace now (and over the whole watch, when
 * that differs), with what comes and goes on top; the parts that
 * levelled off, the working sets, what shrinks, what creeps.  E.g.
 * "heap in use still growing at +2.0 GiB/h (leak suspect); other
 * anonymous memory levelled off at 64 MiB (+63 MiB)", or "nothing
 * still growing: heap in use: 12 MiB comes and goes (a working set)".
 * "" without a tick.
 */
void timeline_headline(const struct timeline *tl, char *buf, size_t size);
/*
 * The pace of column @col's floor, bytes per hour: over the watch, or
 * over its last third where the two differ by more than twice the
 * noise over that third (a tick may catch a trough late at either end
 * of it: a few troughs give a rough pace); 0 when the floor rose or
 * fell by no more than the noise, over the watch and over its last
 * third.  Every output quotes this one.
 */
double timeline_part_pace(const struct timeline *tl, int col);
/* Do they differ so? */
bool timeline_pace_differs(const struct timeline *tl, int col);
/* "RSS 10 MiB -> 14 MiB over 2.0 min; its floor +2.0 MiB/h" */
void timeline_rss_sentence(const struct timeline *tl, char *buf,
			   size_t size);
/* What "still growing" means, with the threshold in bytes. */
void timeline_threshold_sentence(const struct timeline *tl, char *buf,
				 size_t size);
/* A watch that switched memsnap's sampler on and did not switch it off
 * (killed, or the switch failed): that it may still be on, and the
 * command that switches it off; false: nothing to say. */
bool timeline_sampler_sentence(const struct timeline *tl, char *buf,
			       size_t size);
/* What the memory limit means at the slope; false: no limit known. */
bool timeline_limit_sentence(const struct timeline *tl, char *buf,
			     size_t size);
/* A shape in words: "still growing", "grew, then levelled off", ... */
const char *timeline_shape_words(enum trend_shape s);
/* @v as "+1.5 MiB" or "-20 KiB". */
void timeline_signed_bytes(double v, char *buf, size_t size);
/* |@v| as bytes, UINT64_MAX beyond (a hostile series' numbers). */
uint64_t timeline_bytes(double v);

/* The page of `report DIR --format html` (html.c): the chart, the last
 * tick's breakdown and findings, the sites that grew with their
 * sparklines, and a flame graph of the growth from the first dump read
 * to the last; at most @top sites (0: all). */
void timeline_html(const struct timeline *tl, unsigned int top, FILE *f);

/*
 * Read the watch's directory @dir_fd (opened by outdir_open(): the
 * caller's own): its series, the parts' trends, the last tick's
 * explain, and with @o->sites the call sites of its dumps, each dump
 * opened here (a regular file, no link followed) and parsed by the
 * report's sandbox (profile/box.h), one dump after another.  A dump
 * that cannot be read is left out with a warning.  0, or -1 with the
 * failure's kind in *@kind after its line through @v; timeline_free()
 * either way.
 */
int timeline_load(int dir_fd, const struct timeline_opts *o,
		  const struct voice *v, struct timeline *tl,
		  enum diag_kind *kind);
void timeline_free(struct timeline *tl);

/* Did site @s grow: its floor rose by more than its noise, and it is
 * growing or a plateau (two dumps: it rose by more than the noise). */
bool timeline_site_grew(const struct site *s);
/*
 * The large sites (TIMELINE_LARGE_SHARE) by their peak, largest first,
 * but the first @shown of tl->sites when they grew (a table of growth
 * has them): at most @top (0: all) indexes into tl->sites in *@out
 * (free() it), how many.
 */
size_t timeline_largest(const struct timeline *tl, unsigned int top,
			size_t shown, size_t **out);
/* The bytes of site @st at each dump read, into @sv: how many. */
size_t timeline_site_bytes(const struct timeline *tl, const struct site *st,
			   double *sv);
/* Is column @col a row of the parts' table (text and HTML)? */
bool timeline_part_shown(const struct timeline *tl, int col);
/* Column @col's state where it was judged (timeline_state_name()), else
 * its shape's name. */
const char *timeline_part_now(const struct timeline *tl, int col);

/* The values of column @c over the ticks, in @v (tl->s.n of them). */
void timeline_column(const struct timeline *tl, enum series_col c, double *v);

/* The timeline of directory @dir in format @fmt (text, JSON, SVG or
 * HTML), at most @top sites (0: all), on @f (text.c). */
void timeline_print(const struct timeline *tl, const char *dir,
		    enum report_fmt fmt, unsigned int top, FILE *f);

/* @s seconds as "12.5 s", "3.0 min", "2.5 h" or "1.5 days" (@digits
 * after the point for seconds and minutes). */
void timeline_duration(double s, int digits, char *buf, size_t size);

/* The timeline as one self-contained SVG: RSS over time in its parts,
 * stacked, the dumps marked; the target's strings escaped.  Without
 * @standalone, the <svg> element alone, for a page. */
void timeline_svg(const struct timeline *tl, bool standalone, FILE *f);

#endif
