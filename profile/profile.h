#ifndef MEMSNAP_PROFILE_PROFILE_H
#define MEMSNAP_PROFILE_PROFILE_H

#include "proc/maps.h"

#include <stddef.h>
#include <stdint.h>

/*
 * A heap profile as an allocator wrote it: stacks of program counters,
 * each with the objects and bytes still in use, and the memory map of the
 * process.  Two text formats are read:
 *
 *   jemalloc (5.x, memsnap's dumps are jemalloc's):
 *
 *     heap_v2/524288                      sample period R (2^lg_prof_sample)
 *       t*: 28106: 56637512 [0: 0]        totals
 *       t3: 352: 16777344 [0: 0]          per thread (ignored)
 *     @ 0x7f717b4a2630 0x5645f6cd7162     one stack, leaf first
 *       t*: 13: 6688 [0: 0]               its objects: bytes in use
 *                                         [allocated since: prof_accum]
 *
 *     MAPPED_LIBRARIES:
 *     5645f6cd6000-5645f6cd7000 r--p 00000000 fe:00 10953095  /usr/bin/x
 *
 *   gperftools:
 *
 *     heap profile:    3:   262144 [    7:  1048576] @ heapprofile
 *          1:   262144 [     1:   262144] @ 0x4005c5 0x7f2a1c021d0a
 *     (in use [allocated since the profiler started])
 *
 *   where "@ heapprofile" means every allocation was recorded and
 *   "@ heap_v2/R" means sampled with period R.
 *
 * Sampled values are unsampled per stack, as jemalloc and pprof do:
 *
 *   scale = 1 / (1 - exp(-(bytes / objects) / R))
 *
 * The dump comes from the target and is untrusted: sizes and depths are
 * bounded (PROFILE_MAX_*), every number is checked, nothing is trusted to
 * be terminated, and an error names the line it stopped at.
 */

#define PROFILE_MAX_SIZE (1ull << 30)	/* bytes in a dump, by default */
#define PROFILE_MAX_DEPTH 1024u		/* frames in one stack */

enum profile_format {
	PROFILE_JEMALLOC,	/* heap_v2/R */
	PROFILE_GPERFTOOLS,	/* heap profile: ... @ heapprofile | heap_v2/R */
};

struct profile_stack {
	const uint64_t *pcs;	/* leaf first; points into the profile */
	uint32_t depth;
	uint64_t objs, bytes;	/* in use, as written in the dump */
	double uobjs, ubytes;	/* unsampled */
	/* allocated since profiling began, freed or not (the "[N: B]"
	 * pair; 0 where the dump does not count them) */
	uint64_t aobjs, abytes;
	double uaobjs, uabytes;
};

struct profile {
	enum profile_format format;
	uint64_t period;	/* sample period R in bytes; 0 = not sampled */
	struct profile_stack *v;
	size_t n;
	struct maps *maps;	/* MAPPED_LIBRARIES:, never NULL */
	double total_objs, total_bytes;	/* sum of the unsampled stacks */
	double total_aobjs, total_abytes; /* ... of what they allocated */
	bool has_alloc;		/* a stack counts its allocations */
	bool alloc;		/* reports count those (profile_select()) */
	/* the text as read, for the jeprof export */
	char *text;
	size_t text_len;
	/* private */
	uint64_t *pool;
	size_t pool_n, pool_cap, cap;
};

/*
 * Parse @len bytes at @buf (not necessarily NUL-terminated; copied).
 * 0, -ENOMEM, or -EINVAL with a reason ("line 12: bad stack line") in
 * @why.
 */
int profile_parse(const char *buf, size_t len, struct profile **out,
		  char *why, size_t whylen);

/*
 * Read and parse the file at @path, a regular file or a pipe.  -errno of
 * open/read, -EISDIR, -EINVAL for anything else (a device), -EFBIG
 * beyond @max bytes (a regular file by its size, before a byte is read;
 * a pipe once it has given more), or what profile_parse() returns.
 * Memory: the file's size once for its text, then about 8 bytes per
 * frame and 80 per stack.
 */
int profile_load_max(const char *path, uint64_t max, struct profile **out,
		     char *why, size_t whylen);

/*
 * profile_load_max() in two steps, for a reader that may not open
 * files (report's sandbox): profile_open() checks and opens @path as
 * profile_load_max() does (a regular file of at most @max bytes, or a
 * pipe), an fd or -errno; profile_read() reads and parses @fd (taken,
 * and closed) with the same bounds and returns what profile_load_max()
 * would.
 */
int profile_open(const char *path, uint64_t max);
int profile_read(int fd, uint64_t max, struct profile **out, char *why,
		 size_t whylen);

/* profile_load_max() with @max PROFILE_MAX_SIZE. */
int profile_load(const char *path, struct profile **out, char *why,
		 size_t whylen);

/*
 * Which pair a report of @p counts: what is in use (the default), or,
 * with @alloc, everything allocated since profiling began, freed or not
 * (gperftools' profiles and memsnap's sampler always count it, jemalloc
 * with prof_accum:true).  -ENODATA when @alloc is asked of a profile
 * with stacks but no such counts.
 */
int profile_select(struct profile *p, bool alloc);

/* The scale of one stack: 1 when not sampled. */
double profile_scale(uint64_t period, uint64_t objs, uint64_t bytes);

/*
 * The sampling variance of @est, the unsampled bytes (or objects) of a
 * stack of @objs samples holding @bytes as written, sampled every
 * @period bytes on average: each allocation of the stack's average size
 * a was sampled with probability p = 1 - exp(-a / period), and the
 * estimate's relative variance is (1 - p) / objs.  0 when not sampled
 * (or every allocation was: a >> period).
 */
double profile_variance(uint64_t period, uint64_t objs, uint64_t bytes,
			double est);

/*
 * A 95% interval [*lo, *hi] around @est, of variance @var: a Poisson
 * count's interval (Wilson and Hilferty's approximation of Garwood's)
 * for the samples it rests on, est^2 / var of them, scaled to @est, so
 * that a site of 3 samples gets the wide, lopsided interval it has, and
 * one of 10 000 a narrow one.  @est itself when @var is 0; a negative
 * @var (a difference's, summed with signs) counts by its size.
 */
void profile_interval(double est, double var, double *lo, double *hi);

/* "jemalloc" or "gperftools". */
const char *profile_format_name(enum profile_format f);
/* The same for a person: "heap_v2 (jemalloc's format)"; it names the
 * format, not the allocator (the sampler writes heap_v2 for any). */
const char *profile_format_label(enum profile_format f);

/*
 * Memory back early, for a report that does not export to jeprof (the
 * only reader of both): the text as read (text NULL, text_len 0), and,
 * once the report is built, the stacks (v and pool NULL, n 0; the
 * totals stay).
 */
void profile_drop_text(struct profile *p);
void profile_drop_stacks(struct profile *p);

void profile_free(struct profile *p);

#endif
