#ifndef MEMSNAP_TIMELINE_TREND_H
#define MEMSNAP_TIMELINE_TREND_H

#include <stddef.h>
#include <stdint.h>

/*
 * The trend of one quantity over a watch (a part of RSS, a call site's
 * bytes): its slope and its shape.  Pure arithmetic: the tests give it
 * any series.
 *
 * The slope is the least-squares line through every point, in bytes
 * per hour.  The shape is read off the steps between points, against
 * the series' range (max - min):
 *
 *   flat       the range is within the noise: @noise bytes (256 KiB
 *              for a part of RSS, jitter of pages; 64 KiB for a call
 *              site, whose bytes are sampled estimates), or 1% of the
 *              largest value, whichever is more
 *   saw-tooth  it gave back at least half its range, and took it again:
 *              the falls add up to half the range or more, and so do
 *              the rises (a working set that comes and goes)
 *   shrinking  it ends at least half its range below where it began
 *   growing    it ends at least half its range above where it began,
 *              and its last third still climbs at a third of the
 *              average pace or more (a leak goes on)
 *   plateau    the same growth, but the last third climbs slower than
 *              that (a cache that filled, a pool that reached its size)
 *   irregular  none of these
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
	double per_hour;	/* the fitted slope, bytes per hour */
	double first, last, min, max;
	double recent_per_hour;	/* the slope of the last third */
};

#define TREND_NOISE_PART (256.0 * 1024.0)
#define TREND_NOISE_SITE (64.0 * 1024.0)
#define TREND_NOISE_SHARE 0.01

/* The trend of the @n values @v at @t seconds (ascending), with
 * @noise bytes of noise at least. */
void trend_fit(const double *t, const double *v, size_t n, double noise,
	       struct trend *out);

/* "growing", "plateau", ... (the JSON name); "few points" for TREND_FEW. */
const char *trend_shape_name(enum trend_shape s);

/* Least squares through (@t, @v): the slope per unit of @t; 0 with
 * fewer than 2 points or no spread in @t. */
double trend_slope(const double *t, const double *v, size_t n);

/*
 * @v as a line of at most @width block characters (U+2581..U+2588, 3
 * bytes each in UTF-8), lowest to highest between the series' min and
 * max; more values than @width are averaged in @width buckets.  NUL
 * terminated; "" for no values.  @buf holds 3 * @width + 1 bytes.
 */
void trend_sparkline(const double *v, size_t n, unsigned int width,
		     char *buf, size_t size);

#endif
