/*
 * The words every output of `report DIR` uses (timeline/timeline.h):
 * bytes and durations, a shape in words, what each part of RSS does
 * now (timeline_judge()), and the sentences made of that: the
 * headline, what RSS did, the threshold, and when RSS reaches its
 * limit.
 */
#include "timeline/timeline.h"

#include "common/util.h"

#include <math.h>
#include <stdarg.h>
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

/* ---- what each part does now --------------------------------------------- */

/* The parts of RSS the headline speaks of, in the order it names them
 * when they weigh the same. */
static const enum series_col judged[] = {
	COL_HEAP_IN_USE, COL_HEAP, COL_RUNTIME, COL_HEAP_FREE, COL_METADATA,
	COL_ANON_OTHER, COL_STACKS, COL_SAMPLER, COL_FILE, COL_SHMEM,
};

static const char *part_words(enum series_col c)
{
	switch (c) {
	case COL_HEAP_IN_USE:
		return "heap in use";
	case COL_HEAP_FREE:
		return "heap held free";
	case COL_METADATA:
		return "allocator metadata";
	case COL_HEAP:
		return "heap";
	case COL_RUNTIME:
		return "the runtime's heap";
	case COL_STACKS:
		return "thread stacks";
	case COL_ANON_OTHER:
		return "other anonymous memory";
	case COL_SAMPLER:
		return "memsnap's sampler";
	case COL_FILE:
		return "mapped files";
	case COL_SHMEM:
		return "shared memory";
	default:
		return series_col_name(c);
	}
}

bool timeline_part_judged(const struct timeline *tl, int col)
{
	size_t i;

	if (!tl->have[col] || (col == COL_HEAP && tl->have[COL_HEAP_IN_USE]))
		return false;
	for (i = 0; i < ARRAY_SIZE(judged); i++)
		if ((int)judged[i] == col)
			return true;
	return false;
}

const char *timeline_state_name(enum part_state s)
{
	static const char *const names[] = {
		[STATE_QUIET] = "quiet",
		[STATE_GROWING] = "growing",
		[STATE_CREEPING] = "creeping",
		[STATE_LEVELLED] = "levelled",
		[STATE_WORKING_SET] = "working set",
		[STATE_SHRINKING] = "shrinking",
	};

	return (size_t)s < ARRAY_SIZE(names) ? names[s] : "?";
}

/* What the part's floor rose by: over the watch, or over its last third
 * alone when that is more (growth that began late). */
static double rise_of(const struct trend *r)
{
	return fmax(r->floor_rise, r->floor_recent_rise);
}

void timeline_judge(struct timeline *tl)
{
	size_t i, n = tl->s.n;

	memset(tl->state, 0, sizeof(tl->state));
	tl->threshold = 0;
	if (!n || !tl->have[COL_RSS])
		return;
	tl->threshold = TIMELINE_GROWTH_SHARE *
			(double)tl->s.v[n - 1].v[COL_RSS];
	for (i = 0; i < ARRAY_SIZE(judged); i++) {
		enum series_col c = judged[i];
		const struct trend *r = &tl->parts[c];
		double bar = fmax(tl->threshold, r->noise);
		enum part_state *st = &tl->state[c];

		if (!timeline_part_judged(tl, c))
			continue;
		if (r->shape == TREND_GROWING)
			*st = rise_of(r) >= bar ? STATE_GROWING
						: STATE_CREEPING;
		else if (r->shape == TREND_PLATEAU && r->floor_rise >= bar)
			*st = STATE_LEVELLED;
		else if (r->shape == TREND_SHRINKING && -r->floor_rise >= bar)
			*st = STATE_SHRINKING;
		else if (r->swing >= bar && r->shape != TREND_FLAT)
			*st = STATE_WORKING_SET;
	}
}

/* Text appended at @b (of @size, @len used so far, kept NUL-ended). */
struct sbuf_fixed {
	char *b;
	size_t size, len;
};

static void add(struct sbuf_fixed *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void add(struct sbuf_fixed *s, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (s->len + 1 >= s->size)
		return;
	va_start(ap, fmt);
	n = vsnprintf(s->b + s->len, s->size - s->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		s->len += (size_t)n < s->size - s->len ? (size_t)n
						       : s->size - 1 - s->len;
}

/* What orders the parts of one state: how much each rose (or swung);
 * memsnap's own sampler after the program's parts, whatever it did. */
static double weight(const struct timeline *tl, enum series_col c,
		     enum part_state st)
{
	const struct trend *r = &tl->parts[c];

	if (c == COL_SAMPLER)
		return -1;
	return st == STATE_WORKING_SET ? r->swing : fabs(rise_of(r));
}

/* The parts in state @st, the one that weighs most first: how many,
 * into @out. */
static size_t parts_in(const struct timeline *tl, enum part_state st,
		       enum series_col *out)
{
	size_t i, j, n = 0;

	for (i = 0; i < ARRAY_SIZE(judged); i++) {
		enum series_col c = judged[i];

		if (tl->state[c] != st)
			continue;
		for (j = n; j > 0; j--) {
			if (weight(tl, out[j - 1], st) >= weight(tl, c, st))
				break;
			out[j] = out[j - 1];
		}
		out[j] = c;
		n++;
	}
	return n;
}

bool timeline_pace_differs(const struct timeline *tl, int col)
{
	const struct trend *r = &tl->parts[col];
	double third = tl->s.n ? tl->t[tl->s.n - 1] / 3 : 0;

	return fabs(r->floor_recent_per_hour - r->floor_per_hour) / 3600.0 *
		       third > 2 * r->noise;
}

double timeline_part_pace(const struct timeline *tl, int col)
{
	const struct trend *r = &tl->parts[col];

	/* a few pages over a short watch are no pace */
	if (fabs(r->floor_rise) <= r->noise &&
	    fabs(r->floor_recent_rise) <= r->noise)
		return 0;
	return timeline_pace_differs(tl, col) ? r->floor_recent_per_hour
					      : r->floor_per_hour;
}

/* "heap in use still growing at +2.0 GiB/h (leak suspect), 12 MiB on
 * top comes and goes" */
static void growing_clause(const struct timeline *tl, enum series_col c,
			   struct sbuf_fixed *s)
{
	const struct trend *r = &tl->parts[c];
	char a[40], b[40];

	timeline_signed_bytes(timeline_part_pace(tl, c), a, sizeof(a));
	add(s, "%s still growing at %s/h", part_words(c), a);
	if (c == COL_HEAP_IN_USE)
		add(s, " (leak suspect)");
	else if (c == COL_HEAP)
		add(s, " (leak suspect, or memory held free)");
	else if (c == COL_RUNTIME)
		add(s, " (leak suspect, or the runtime's collector behind)");
	else if (c == COL_SAMPLER)
		add(s, " (a copy of each live sample's stack, not the "
		    "program's: prof off frees it)");
	timeline_signed_bytes(r->floor_per_hour, b, sizeof(b));
	if (timeline_pace_differs(tl, c))
		add(s, ", %s lately (%s/h over the watch)",
		    r->floor_recent_per_hour > r->floor_per_hour ? "faster"
								 : "slower", b);
	if (r->swing >= fmax(tl->threshold, r->noise)) {
		human_bytes(timeline_bytes(r->swing), a, sizeof(a));
		add(s, ", %s on top comes and goes", a);
	}
}

static void state_clause(const struct timeline *tl, enum series_col c,
			 struct sbuf_fixed *s)
{
	const struct trend *r = &tl->parts[c];
	char a[40], b[40];

	switch (tl->state[c]) {
	case STATE_GROWING:
		growing_clause(tl, c, s);
		break;
	case STATE_CREEPING:
		timeline_signed_bytes(timeline_part_pace(tl, c), a, sizeof(a));
		timeline_signed_bytes(rise_of(r), b, sizeof(b));
		add(s, "%s creeping at %s/h (%s over the watch, under %.0f%% "
		    "of RSS)", part_words(c), a, b,
		    100 * TIMELINE_GROWTH_SHARE);
		break;
	case STATE_LEVELLED:
		human_bytes(timeline_bytes(r->last), a, sizeof(a));
		timeline_signed_bytes(r->floor_rise, b, sizeof(b));
		add(s, "%s levelled off at %s (%s)", part_words(c), a, b);
		break;
	case STATE_WORKING_SET:
		human_bytes(timeline_bytes(r->swing), a, sizeof(a));
		add(s, "%s: %s comes and goes (a working set)", part_words(c),
		    a);
		break;
	case STATE_SHRINKING:
		timeline_signed_bytes(r->floor_rise, a, sizeof(a));
		add(s, "%s shrinking (%s)", part_words(c), a);
		break;
	case STATE_QUIET:
		break;
	}
}

void timeline_headline(const struct timeline *tl, char *buf, size_t size)
{
	static const enum part_state order[] = {
		STATE_GROWING, STATE_LEVELLED, STATE_WORKING_SET,
		STATE_SHRINKING, STATE_CREEPING,
	};
	struct sbuf_fixed s = { buf, size, 0 };
	enum series_col cols[ARRAY_SIZE(judged)];
	const struct trend *rss = &tl->parts[COL_RSS];
	size_t i, j, n, said = 0;
	char a[40];

	if (size)
		buf[0] = '\0';
	if (!tl->s.n || !tl->have[COL_RSS])
		return;
	if (rss->shape == TREND_FEW) {
		human_bytes(timeline_bytes(rss->last), a, sizeof(a));
		add(&s, "RSS %s: %s", a, timeline_shape_words(rss->shape));
		return;
	}
	if (!parts_in(tl, STATE_GROWING, cols))
		add(&s, "nothing still growing");
	for (i = 0; i < ARRAY_SIZE(order); i++) {
		n = parts_in(tl, order[i], cols);
		for (j = 0; j < n; j++) {
			/* the first clause after "nothing ..." follows a
			 * colon */
			add(&s, "%s", said ? "; " : s.len ? ": " : "");
			state_clause(tl, cols[j], &s);
			said++;
		}
	}
	if (!said) {
		human_bytes(timeline_bytes(rss->last), a, sizeof(a));
		add(&s, ": RSS %s at %s", rss->shape == TREND_FLAT
			? "flat" : "steady within the threshold", a);
	}
}

/* "RSS 10 MiB -> 14 MiB over 20 s; its floor +2.0 MiB/h" */
void timeline_rss_sentence(const struct timeline *tl, char *buf, size_t size)
{
	const struct trend *r = &tl->parts[COL_RSS];
	char a[40], b[40], c[40], d[40];

	human_bytes(timeline_bytes(r->first), a, sizeof(a));
	human_bytes(timeline_bytes(r->last), b, sizeof(b));
	timeline_signed_bytes(timeline_part_pace(tl, COL_RSS), c, sizeof(c));
	timeline_duration(tl->s.n ? tl->t[tl->s.n - 1] : 0, 1, d, sizeof(d));
	snprintf(buf, size, "RSS %s -> %s over %s; its floor %s/h", a, b, d,
		 c);
}

void timeline_threshold_sentence(const struct timeline *tl, char *buf,
				 size_t size)
{
	char a[40];

	human_bytes(timeline_bytes(tl->threshold), a, sizeof(a));
	snprintf(buf, size, "still growing: a part whose floor (its lowest "
		 "points, which what comes and goes does not lift) rose by "
		 "%.0f%% of RSS (%s) or more over the watch, and by more "
		 "than its noise, and still rises; creeping: the same, under "
		 "%s", 100 * TIMELINE_GROWTH_SHARE, a, a);
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
		 "it may still be on in pid %s (%s), its hooks in every "
		 "allocation, though it takes no sample once the watch's "
		 "lease lapses; `memsnap --pid %s prof off` switches it off",
		 s->end[0] ? "did not switch it off"
			   : "did not end (killed?) to switch it off",
		 pid, s->command[0] ? s->command : "?", pid);
	return true;
}
