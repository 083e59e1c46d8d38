#ifndef MEMSNAP_PROFILE_REPORT_H
#define MEMSNAP_PROFILE_REPORT_H

#include "common/hidx.h"
#include "profile/profile.h"
#include "symbols/symbolizer.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/*
 * A symbolized profile, or the difference of two (--base), ready for the
 * exporters.  Each stack of the dump becomes a sample: its program
 * counters (leaf first) as locations, each location with its inline
 * frames.  The allocator's own leaf frames are dropped: everything up to
 * and including the allocation entry point (malloc, calloc, realloc,
 * operator new, mallocx, ... with or without a je_/_rjem_/tc_ prefix),
 * together with the frames around it in the entry point's object.
 *
 * In a difference the base's samples enter with negative values; stacks
 * are compared by their symbolized names, not addresses, so two dumps of
 * two runs (different load addresses) compare.
 */

struct report_loc {
	const struct dwsym_loc *sym;
	struct symbolizer *symbolizer;	/* the one that named it */
};

struct report_sample {
	const uint32_t *locs;	/* indexes into report.locs, leaf first */
	uint32_t n;		/* >= 1 */
	double bytes, objs;	/* unsampled; negative for the base: in
				 * use, or allocated (profile.alloc) */
	/* both, whichever is counted (pprof carries all four) */
	double inuse_bytes, inuse_objs, alloc_bytes, alloc_objs;
	/* the sampling variance of bytes and of objs (profile_variance()):
	 * 0 when every allocation was recorded */
	double var_bytes, var_objs;
};

struct report {
	struct report_loc *locs;
	size_t nlocs;
	struct report_sample *samples;
	size_t nsamples;
	const struct profile *prof, *base;
	struct symbolizer *sym, *base_sym;
	bool alloc;			/* counts allocations (prof->alloc) */
	double total_bytes, total_objs;	/* of prof (minus base) */
	double base_bytes, base_objs;	/* of base, 0 without one */
	size_t dropped;			/* allocator frames dropped */
	uint32_t *cuts;		/* per stack of prof: frames dropped */
	/* private */
	uint32_t *pool;
	size_t pool_n, pool_cap, locs_cap, samples_cap;
	struct hidx locmap;	/* over locs, by their dwsym_loc */
};

/* Build from @prof named by @sym, minus @base named by @base_sym (both
 * NULL for no difference).  0 or -ENOMEM.  Here and in every exporter
 * below, work and memory are linear in the frames of the dumps: no
 * stack's "root;...;leaf" is made into a string to be kept. */
int report_build(const struct profile *prof, struct symbolizer *sym,
		 const struct profile *base, struct symbolizer *base_sym,
		 struct report **out);

void report_free(struct report *r);

/* Is @name (demangled) an allocation entry point? */
bool report_is_alloc_entry(const char *name);

struct wrappers;

struct report_opts {
	bool objects;		/* count objects rather than bytes */
	bool lines;		/* file:line in names */
	unsigned int top;	/* rows for text/json; 0 = all */
	const char *dump_name;	/* for headers */
	/* the allocator wrappers a site is found past (profile/
	 * wrappers.h), or NULL: the leaf frame is the site */
	struct wrappers *wrappers;
};

/* Text: total, then the top sites by flat value with flat/cum columns
 * (percentages of the base in a difference; "-" and "base is empty"
 * when the base has nothing).  A stack's flat value goes to its site,
 * past the allocator wrappers of @o. */
int report_text(const struct report *r, const struct report_opts *o,
		FILE *f);

/* "root;...;leaf N" per distinct stack, sorted. */
int report_folded(const struct report *r, const struct report_opts *o,
		  FILE *f);

/* The schema of docs/report-json.md: each stack whole, with its site
 * past the allocator wrappers of @o. */
int report_json(const struct report *r, const struct report_opts *o,
		FILE *f);

/* A self-contained SVG flame graph, widths by value, the frames under
 * one frame in the order of their names. */
int report_svg(const struct report *r, const struct report_opts *o,
	       FILE *f);

/* One self-contained HTML page (common/html.h): the flame graph (of
 * the growth, in a difference), clickable and searchable, of whole
 * stacks, and the sites that allocated most, past the allocator
 * wrappers of @o. */
int report_html(const struct report *r, const struct report_opts *o,
		FILE *f);

/* gzipped profile.proto (no difference: use pprof -diff_base). */
int report_pprof(const struct report *r, const struct report_opts *o,
		 FILE *f);

/* jeprof's symbolized profile: "--- symbol" section, then the dump as
 * read but for the allocator's frames, which jeprof cannot recognise by
 * name when they are unnamed (no difference: use jeprof --base). */
int report_jeprof(const struct report *r, FILE *f);

#endif
