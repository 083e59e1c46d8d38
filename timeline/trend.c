/*
 * Slopes and shapes of a series (timeline/trend.h).
 */
#include "timeline/trend.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

double trend_slope(const double *t, const double *v, size_t n)
{
	double mt = 0, mv = 0, sxx = 0, sxy = 0;
	size_t i;

	if (n < 2)
		return 0;
	for (i = 0; i < n; i++) {
		mt += t[i];
		mv += v[i];
	}
	mt /= (double)n;
	mv /= (double)n;
	for (i = 0; i < n; i++) {
		sxx += (t[i] - mt) * (t[i] - mt);
		sxy += (t[i] - mt) * (v[i] - mv);
	}
	return sxx > 0 ? sxy / sxx : 0;
}

/* The first point of the last third of the time span: at least two
 * points are left in it. */
static size_t last_third(const double *t, size_t n)
{
	double from = t[0] + (t[n - 1] - t[0]) * 2.0 / 3.0;
	size_t i = n - 2;

	while (i > 0 && t[i - 1] >= from)
		i--;
	return i;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Points Theil-Sen reads at most: 4560 pairs. */
#define ROBUST_POINTS 96

double trend_robust_slope(const double *t, const double *v, size_t n)
{
	size_t m = n < ROBUST_POINTS ? n : ROBUST_POINTS, i, j, k = 0;
	double *s, r;

	if (m < 2)
		return 0;
	s = malloc(m * (m - 1) / 2 * sizeof(*s));
	if (!s)
		return 0;
	for (i = 0; i < m; i++) {
		/* point a of m spread evenly over n */
		size_t a = i * (n - 1) / (m - 1);

		for (j = i + 1; j < m; j++) {
			size_t b = j * (n - 1) / (m - 1);

			if (t[b] > t[a])
				s[k++] = (v[b] - v[a]) / (t[b] - t[a]);
		}
	}
	if (!k) {
		free(s);
		return 0;
	}
	qsort(s, k, sizeof(*s), cmp_double);
	r = k % 2 ? s[k / 2] : (s[k / 2 - 1] + s[k / 2]) / 2;
	free(s);
	return isfinite(r) ? r : 0;
}

/* What the falls of a series say (descents of more than the noise,
 * step by step). */
struct falls {
	size_t n;
	double gap;		/* the mean distance between them, 0: < 2 */
	double median, largest;	/* their sizes; 0 with fewer than 2 */
};

static void falls_of(const double *t, const double *v, size_t n,
		     double noise, struct falls *f)
{
	double *size = malloc(n * sizeof(*size)), drop = 0, first = 0;
	double last = 0;
	size_t i;

	memset(f, 0, sizeof(*f));
	for (i = 1; i <= n; i++) {
		if (i < n && v[i] < v[i - 1]) {
			drop += v[i - 1] - v[i];
			continue;
		}
		/* a descent ended at i - 1 */
		if (drop > noise) {
			if (!f->n)
				first = t[i - 1];
			last = t[i - 1];
			if (size)
				size[f->n] = drop;
			f->n++;
		}
		drop = 0;
	}
	if (f->n >= 2) {
		f->gap = (last - first) / (double)(f->n - 1);
		if (size) {
			qsort(size, f->n, sizeof(*size), cmp_double);
			f->median = size[f->n / 2];
			f->largest = size[f->n - 1];
		}
	}
	free(size);
}

/* A window's lowest point: indexes in a deque, the lowest at the head. */
struct deque {
	size_t *q;
	size_t head, tail;
};

/*
 * The floor of trend.h into @ft, @fv (its points, at most @n): how
 * many, or -1 without memory.  The first stretch runs from the first
 * point to the first at @s or later, each one after it ends at a point
 * and reaches @s back; each gives its lowest point, once however many
 * stretches it is the lowest of.
 */
static long floor_points(const double *t, const double *v, size_t n,
			 double s, double *ft, double *fv)
{
	struct deque lo = { .q = malloc(n * sizeof(size_t)) };
	size_t i, m = 0, prev = SIZE_MAX;
	bool whole = false;

	if (!lo.q)
		return -1;
	for (i = 0; i < n; i++) {
		while (lo.tail > lo.head && v[lo.q[lo.tail - 1]] >= v[i])
			lo.tail--;
		lo.q[lo.tail++] = i;
		if (t[i] - s < t[0])
			continue;	/* not a whole stretch yet */
		/* the first stretch keeps its first point */
		while (whole && t[lo.q[lo.head]] < t[i] - s)
			lo.head++;
		whole = true;
		if (lo.q[lo.head] != prev) {
			prev = lo.q[lo.head];
			ft[m] = t[prev];
			fv[m++] = v[prev];
		}
	}
	free(lo.q);
	return (long)m;
}

/* The median distance between two points in time. */
static double median_step(const double *t, size_t n)
{
	double *d = malloc((n - 1) * sizeof(*d)), r;
	size_t i;

	if (!d)
		return 0;
	for (i = 1; i < n; i++)
		d[i - 1] = t[i] - t[i - 1];
	qsort(d, n - 1, sizeof(*d), cmp_double);
	r = d[(n - 1) / 2];
	free(d);
	return r;
}

/*
 * The floor's slopes and rises, the swing, and the noise the floor is
 * read against into @out.  The floor rose by its last point less its
 * first (the lowest of the last stretch, and of the first), at that
 * pace over the watch.  The swing is the median fall.  A tick catches
 * a trough late by up to the time between ticks, so where the series
 * has falls the noise is at least the largest fall times that time over
 * the distance between the falls.
 */
static void fit_floor(const double *t, const double *v, size_t n,
		      struct trend *out)
{
	double span = t[n - 1] - t[0];
	double *ft = malloc(n * sizeof(*ft)), *fv = malloc(n * sizeof(*fv));
	struct falls f;
	long m = -1;
	size_t k;

	out->floor_per_hour = out->per_hour;
	out->floor_recent_per_hour = out->recent_per_hour;
	out->floor_rise = out->per_hour / 3600.0 * span;
	falls_of(t, v, n, out->noise, &f);
	out->swing = f.median;
	/* a stretch holds a trough of what comes and goes */
	out->stretch = fmin(fmax(span / 10, 1.5 * f.gap), span / 3);
	if (f.gap > 0)
		out->noise = fmax(out->noise,
				  f.largest * median_step(t, n) / f.gap);
	if (ft && fv)
		m = floor_points(t, v, n, out->stretch, ft, fv);
	if (m >= 2) {
		out->floor_rise = fv[m - 1] - fv[0];
		out->floor_per_hour = ft[m - 1] > ft[0]
			? out->floor_rise / (ft[m - 1] - ft[0]) * 3600.0 : 0;
		/* its points in the last third, three at least */
		for (k = (size_t)m; k > 0 &&
		     ft[k - 1] >= t[0] + span * 2.0 / 3.0; k--)
			;
		if ((size_t)m - k < 3)
			k = m > 3 ? (size_t)m - 3 : 0;
		out->floor_recent_per_hour =
			trend_robust_slope(ft + k, fv + k, (size_t)m - k) *
			3600.0;
	}
	free(ft);
	free(fv);
	out->floor_recent_rise = out->floor_recent_per_hour / 3600.0 * span /
				 3.0;
}

static enum trend_shape shape_of(const struct trend *r)
{
	double noise = r->noise;

	if (r->max - r->min <= noise)
		return TREND_FLAT;
	if ((r->floor_rise > noise || r->floor_recent_rise > noise) &&
	    r->floor_recent_per_hour > 0 &&
	    r->floor_recent_per_hour >= r->floor_per_hour / 3)
		return TREND_GROWING;
	if (r->floor_rise > noise)
		return TREND_PLATEAU;
	if (r->floor_rise < -noise)
		return TREND_SHRINKING;
	if (r->swing > noise)
		return TREND_SAWTOOTH;
	return TREND_IRREGULAR;
}

void trend_fit(const double *t, const double *v, size_t n, double floor,
	       struct trend *out)
{
	size_t i, k;

	memset(out, 0, sizeof(*out));
	out->shape = TREND_FEW;
	if (!n)
		return;
	out->first = out->min = out->max = v[0];
	out->last = v[n - 1];
	for (i = 1; i < n; i++) {
		out->min = fmin(out->min, v[i]);
		out->max = fmax(out->max, v[i]);
	}
	out->noise = fmax(floor, TREND_NOISE_SHARE *
					 fmax(fabs(out->max), fabs(out->min)));
	out->per_hour = trend_slope(t, v, n) * 3600.0;
	out->floor_per_hour = out->floor_recent_per_hour = out->per_hour;
	if (n < 3)
		return;
	k = last_third(t, n);
	out->recent_per_hour = trend_slope(t + k, v + k, n - k) * 3600.0;
	if (t[n - 1] > t[0])
		fit_floor(t, v, n, out);
	else
		out->floor_per_hour = out->floor_recent_per_hour = 0;
	out->shape = shape_of(out);
}

const char *trend_shape_name(enum trend_shape s)
{
	static const char *const names[] = {
		[TREND_FEW] = "few points",	  [TREND_FLAT] = "flat",
		[TREND_GROWING] = "growing",	  [TREND_PLATEAU] = "plateau",
		[TREND_SAWTOOTH] = "saw-tooth",	  [TREND_SHRINKING] = "shrinking",
		[TREND_IRREGULAR] = "irregular",
	};

	return (size_t)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

void trend_sparkline(const double *v, size_t n, unsigned int width,
		     char *buf, size_t size)
{
	static const char *const bars[] = { "\u2581", "\u2582", "\u2583",
					    "\u2584", "\u2585", "\u2586",
					    "\u2587", "\u2588" };
	double lo = 0, hi = 0;
	size_t i, len = 0, cols;

	if (!size)
		return;
	buf[0] = '\0';
	if (!n || !width)
		return;
	cols = n < width ? n : width;
	for (i = 0; i < n; i++) {
		if (!i || v[i] < lo)
			lo = v[i];
		if (!i || v[i] > hi)
			hi = v[i];
	}
	for (i = 0; i < cols && len + 4 <= size; i++) {
		/* bucket i: values [i*n/cols, (i+1)*n/cols) */
		size_t a = i * n / cols, b = (i + 1) * n / cols, j;
		double sum = 0, m;
		int level;

		for (j = a; j < b; j++)
			sum += v[j];
		m = sum / (double)(b - a);
		level = hi > lo ? (int)((m - lo) / (hi - lo) * 7.0 + 0.5) : 0;
		if (level < 0)
			level = 0;
		if (level > 7)
			level = 7;
		memcpy(buf + len, bars[level], 3);
		len += 3;
	}
	buf[len] = '\0';
}
