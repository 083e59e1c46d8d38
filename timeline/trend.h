#ifndef MEMSNAP_TIMELINE_TREND_H
#define MEMSNAP_TIMELINE_TREND_H

#include <stddef.h>
#include <stdint.h>

/*
 * The trend of one quantity over a watch (a part of RSS, a call site's
 * bytes): its slopes and its shape.  Pure arithmetic: the tests give it
 * any series.
 *
 * A rising baseline under a wave is growth, and a wave over a level
 * baseline is not, so the shape is read off the series' floor rather
 * than its ends or its least-squares line.  The floor is made of the
 * points that are the lowest of some stretch of the watch (every point
 * of a stretch of length S, S sliding over the whole series):
 *
 *   S  a tenth of the watch, or one and a half times the distance
 *      between the series' falls (descents of more than the noise)
 *      when that is longer, so that every stretch holds a trough of a
 *      working set that comes and goes; a third of the watch at most
 *
 * It rose by its last point less its first (the lowest of the last
 * stretch, less the lowest of the first), at that pace over the watch;
 * over the last third, its pace is the median of the slopes between
 * every two of its points there (Theil-Sen: the teeth of a wave, or a
 * spike, do not move it).  The swing, what comes and goes, is the
 * median of the falls (0 with fewer than two).
 *
 * The noise is @noise bytes (256 KiB for a part of RSS, jitter of
 * pages; 64 KiB for a call site, whose bytes are sampled estimates), or
 * 1% of the largest value, whichever is more; where the series has
 * falls, at least the largest fall times the time between points over
 * the distance between falls (a tick catches a trough late by up to
 * that time).  Against it:
 *
 *   flat       the range (max - min) is within the noise
 *   growing    the floor still rises: over the watch by more than the
 *              noise (or over its last third by more than half of it),
 *              and over the last third at a third of its pace over the
 *              whole or more (a leak goes on); a wave on top or not
 *   plateau    the floor rose by more than the noise, but its last
 *              third climbs slower than that (a cache that filled, a
 *              pool that reached its size)
 *   shrinking  the floor fell by more than the noise
 *   saw-tooth  the floor did neither, and the swing is more than the
 *              noise (a working set that comes and goes)
 *   irregular  none of these (one step up, then down)
 *
 * With fewer than 3 points there is no shape (TREND_FEW).
 */

enum trend_shape {
	TREND_FEW,
	TREND_FLAT,
	TREND_GROWING,
	TREND_PLATEAU,
	TREND_SAWTOOTH,
	TREND_SHRINKING,
	TREND_IRREGULAR,
};

struct trend {
	enum trend_shape shape;
	double per_hour;	/* least squares through every point */
	double first, last, min, max;
	double recent_per_hour;	/* least squares, the last third */
	/* the floor (above), bytes per hour: over the whole watch, and
	 * Theil-Sen over its last third */
	double floor_per_hour;
	double floor_recent_per_hour;
	/* what the floor rose by: floor_per_hour over the watch, and
	 * floor_recent_per_hour over its last third (negative: fell) */
	double floor_rise, floor_recent_rise;
	double swing;		/* what comes and goes: the median fall */
	double noise;		/* what the shape was read against */
	double stretch;		/* S, seconds */
};

#define TREND_NOISE_PART (256.0 * 1024.0)
#define TREND_NOISE_SITE (64.0 * 1024.0)
#define TREND_NOISE_SHARE 0.01

/* The trend of the @n values @v at @t seconds (ascending), with
 * @noise bytes of noise at least.  Every member finite, whatever the
 * values (a series is untrusted input); without memory for the floor,
 * its slopes are the least-squares ones and the swing is 0. */
void trend_fit(const double *t, const double *v, size_t n, double noise,
	       struct trend *out);

/* "growing", "plateau", ... (the JSON name); "few points" for TREND_FEW. */
const char *trend_shape_name(enum trend_shape s);

/* Least squares through (@t, @v): the slope per unit of @t; 0 with
 * fewer than 2 points or no spread in @t. */
double trend_slope(const double *t, const double *v, size_t n);

/* Theil-Sen through (@t, @v): the median of the slopes between every
 * two points at different times (of at most 96 points spread evenly
 * over them, when there are more), per unit of @t; 0 with no such
 * pair, or without memory. */
double trend_robust_slope(const double *t, const double *v, size_t n);

/*
 * @v as a line of at most @width block characters (U+2581..U+2588, 3
 * bytes each in UTF-8), lowest to highest between the series' min and
 * max; more values than @width are averaged in @width buckets.  NUL
 * terminated; "" for no values.  @buf holds 3 * @width + 1 bytes.
 */
void trend_sparkline(const double *v, size_t n, unsigned int width,
		     char *buf, size_t size);

#endif
