/*
 * The words every output of `report DIR` uses (timeline/timeline.h):
 * bytes and durations, a shape in words, and the sentences that say
 * what RSS does and when it reaches its limit.
 */
#include "timeline/timeline.h"

#include "common/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t timeline_bytes(double v)
{
	v = fabs(v);
	/* a hostile series' numbers: no conversion out of range */
	return !(v < 1.8e19) ? UINT64_MAX : (uint64_t)v;
}

void timeline_signed_bytes(double v, char *buf, size_t size)
{
	if (size < 2)
		return;
	buf[0] = v < 0 ? '-' : '+';
	human_bytes(timeline_bytes(v), buf + 1, size - 1);
}

void timeline_duration(double s, int digits, char *buf, size_t size)
{
	if (s < 120)
		snprintf(buf, size, "%.*f s", digits, s);
	else if (s < 7200)
		snprintf(buf, size, "%.*f min", digits, s / 60);
	else if (s < 172800)
		snprintf(buf, size, "%.1f h", s / 3600);
	else
		snprintf(buf, size, "%.1f days", s / 86400);
}

void timeline_column(const struct timeline *tl, enum series_col c, double *v)
{
	size_t i;

	for (i = 0; i < tl->s.n; i++)
		v[i] = (double)tl->s.v[i].v[c];
}

/* The part (but RSS, and the heap as a whole when its parts are known)
 * with the steepest slope, or -1. */
static int steepest(const struct timeline *tl)
{
	int c, best = -1;

	for (c = COL_HEAP_IN_USE; c < COL_UNACCOUNTED; c++) {
		if (!tl->have[c] || (c == COL_HEAP && tl->have[COL_HEAP_IN_USE]))
			continue;
		if (best < 0 || tl->parts[c].per_hour > tl->parts[best].per_hour)
			best = c;
	}
	return best;
}

const char *timeline_shape_words(enum trend_shape s)
{
	switch (s) {
	case TREND_GROWING:
		return "still growing";
	case TREND_PLATEAU:
		return "grew, then levelled off";
	case TREND_SAWTOOTH:
		return "rises and falls (saw-tooth)";
	case TREND_SHRINKING:
		return "shrinking";
	case TREND_FLAT:
		return "flat";
	case TREND_IRREGULAR:
		return "irregular";
	case TREND_FEW:
		break;
	}
	return "too few ticks for a shape";
}

/* "RSS 10 MiB -> 14 MiB, +2.0 MiB/h: still growing; most of it heap in
 * use (+1.8 MiB/h)" */
void timeline_rss_sentence(const struct timeline *tl, char *buf, size_t size)
{
	const struct trend *r = &tl->parts[COL_RSS];
	char a[40], b[40], c[40];
	int steep = steepest(tl);
	size_t n;

	human_bytes((uint64_t)r->first, a, sizeof(a));
	human_bytes((uint64_t)r->last, b, sizeof(b));
	timeline_signed_bytes(r->per_hour, c, sizeof(c));
	n = (size_t)snprintf(buf, size, "RSS %s -> %s, %s/h: %s", a, b, c,
			     timeline_shape_words(r->shape));
	if (n < size && steep >= 0 && r->shape != TREND_FLAT &&
	    tl->parts[steep].per_hour > 0) {
		timeline_signed_bytes(tl->parts[steep].per_hour, c, sizeof(c));
		snprintf(buf + n, size - n, "; most of it %s (%s/h)",
			 series_col_name((enum series_col)steep), c);
	}
}

/* What the memory limit means at this slope; false when there is
 * none. */
bool timeline_limit_sentence(const struct timeline *tl, char *buf,
			   size_t size)
{
	char a[40], b[40];

	if (!tl->s.limit)
		return false;
	human_bytes(tl->s.limit, a, sizeof(a));
	if (tl->limit_hours == 0) {
		snprintf(buf, size, "the memory limit (%s) is reached", a);
	} else if (tl->limit_hours > 0) {
		timeline_duration(tl->limit_hours * 3600, 1, b, sizeof(b));
		snprintf(buf, size, "at this slope RSS reaches the memory "
			 "limit (%s) in %s", a, b);
	} else {
		snprintf(buf, size, "memory limit %s; RSS is not growing "
			 "towards it", a);
	}
	return true;
}

bool timeline_sampler_sentence(const struct timeline *tl, char *buf,
			       size_t size)
{
	const struct series *s = &tl->s;
	char pid[16] = "PID";

	if (!s->sampler_on || s->sampler_off ||
	    !strcmp(s->end, "target exited"))
		return false;
	if (s->pid > 0)
		snprintf(pid, sizeof(pid), "%d", s->pid);
	snprintf(buf, size, "the watch switched memsnap's sampler on and %s: "
		 "it may still be on in pid %s (%s), costing it every "
		 "sample; `memsnap --pid %s prof off` switches it off",
		 s->end[0] ? "did not switch it off"
			   : "did not end (killed?) to switch it off",
		 pid, s->command[0] ? s->command : "?", pid);
	return true;
}
