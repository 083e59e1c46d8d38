/*
 * A sampled profile's arithmetic (profile/profile.h): each stack's
 * scale back to what it stands for, and the sampling error of that.
 */
#include "profile/profile.h"

#include <math.h>
#include <stdint.h>

double profile_scale(uint64_t period, uint64_t objs, uint64_t bytes)
{
	double avg, d;

	if (!period || !objs || !bytes)
		return 1.0;
	avg = (double)bytes / (double)objs;
	d = 1.0 - exp(-avg / (double)period);
	/* avg far below the period: tiny denominators, but finite */
	if (!(d > 0.0))
		return 1.0;
	return 1.0 / d;
}

double profile_variance(uint64_t period, uint64_t objs, uint64_t bytes,
			double est)
{
	double q;

	if (!period || !objs || !bytes)
		return 0.0;
	/* the chance an allocation of the stack's average size was not
	 * sampled */
	q = exp(-((double)bytes / (double)objs) / (double)period);
	return est * est * q / (double)objs;
}

/* The 95% bounds of a Poisson count of which @n were seen. */
static double poisson_lo(double n)
{
	double t;

	if (n <= 0)
		return 0;
	t = 1.0 - 1.0 / (9.0 * n) - 1.959964 / (3.0 * sqrt(n));
	return t > 0 ? n * t * t * t : 0;
}

static double poisson_hi(double n)
{
	double m = n + 1.0, t = 1.0 - 1.0 / (9.0 * m) + 1.959964 / (3.0 * sqrt(m));

	return m * t * t * t;
}

void profile_interval(double est, double var, double *lo, double *hi)
{
	double a = fabs(est), n;

	var = fabs(var);	/* a difference's: see report.c */
	if (!(var > 0.0) || a == 0.0) {
		*lo = *hi = est;
		return;
	}
	n = a * a / var;	/* the samples the estimate rests on */
	if (est > 0) {
		*lo = est * poisson_lo(n) / n;
		*hi = est * poisson_hi(n) / n;
	} else {		/* a shrinking site of a difference */
		*lo = est * poisson_hi(n) / n;
		*hi = est * poisson_lo(n) / n;
	}
}
