/*
 * Slopes and shapes of a series (timeline/trend.h).
 */
#include "timeline/trend.h"

#include <math.h>
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

void trend_fit(const double *t, const double *v, size_t n, double floor,
	       struct trend *out)
{
	double span, noise, up = 0, down = 0, pace;
	size_t i, k;

	memset(out, 0, sizeof(*out));
	out->shape = TREND_FEW;
	if (!n)
		return;
	out->first = out->min = out->max = v[0];
	out->last = v[n - 1];
	for (i = 1; i < n; i++) {
		double d = v[i] - v[i - 1];

		if (v[i] < out->min)
			out->min = v[i];
		if (v[i] > out->max)
			out->max = v[i];
		if (d > 0)
			up += d;
		else
			down -= d;
	}
	out->per_hour = trend_slope(t, v, n) * 3600.0;
	if (n < 3)
		return;
	k = last_third(t, n);
	out->recent_per_hour = trend_slope(t + k, v + k, n - k) * 3600.0;

	span = out->max - out->min;
	noise = fmax(floor, TREND_NOISE_SHARE * fmax(fabs(out->max),
						     fabs(out->min)));
	if (span <= noise) {
		out->shape = TREND_FLAT;
	} else if (down >= span / 2 && up >= span / 2) {
		/* came and went, wherever it ends: a working set over a
		 * trend still shows its teeth */
		out->shape = TREND_SAWTOOTH;
	} else if (out->last - out->first <= -span / 2) {
		out->shape = TREND_SHRINKING;
	} else if (out->last - out->first >= span / 2) {
		pace = t[n - 1] > t[0] ? (out->last - out->first) /
						 (t[n - 1] - t[0]) * 3600.0
				       : 0;
		out->shape = out->recent_per_hour >= pace / 3 ? TREND_GROWING
							      : TREND_PLATEAU;
	} else {
		out->shape = TREND_IRREGULAR;
	}
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
