/*
 * memsnap report DIR --format svg: the timeline as one self-contained
 * SVG (no script, no font, no link): RSS over time in its parts,
 * stacked (heap in use at the bottom, the files on top), the RSS line
 * over them, each dump a dashed mark, the cgroup's limit a red line when
 * it is within sight.  Each area's <title> gives its numbers (the pace
 * of its floor, what it does now); at most POINTS_MAX points a line,
 * however long the watch.
 */
#include "timeline/timeline.h"

#include "common/util.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W 960.0
#define H 420.0
#define LEFT 80.0
#define RIGHT 200.0		/* the legend: "memsnap_sampler 9.4 MiB" */
#define TOP 48.0
#define BOTTOM 40.0
#define POINTS_MAX 1000

/* Bottom to top. */
static const struct {
	enum series_col col;
	const char *color;
} layers[] = {
	{ COL_HEAP_IN_USE, "#d62728" }, { COL_HEAP_FREE, "#ff9896" },
	{ COL_METADATA, "#9467bd" },	{ COL_HEAP, "#d62728" },
	{ COL_RUNTIME, "#e377c2" },	{ COL_STACKS, "#8c564b" },
	{ COL_ANON_OTHER, "#ff7f0e" },	{ COL_SAMPLER, "#7f7f7f" },
	{ COL_SHMEM, "#17becf" },	{ COL_FILE, "#1f77b4" },
};

/* Is layer @c drawn?  The heap as one part only when its parts are not
 * known. */
static bool drawn(const struct timeline *tl, enum series_col c)
{
	/* a part that was 0 throughout has nothing to show */
	if (!tl->have[c] || (tl->parts[c].max <= 0 && c != COL_HEAP))
		return false;
	if (c == COL_HEAP)
		return !tl->have[COL_HEAP_IN_USE];
	return true;
}

static double value(const struct timeline *tl, size_t i, enum series_col c)
{
	int64_t v = tl->s.v[i].v[c];

	return v > 0 ? (double)v : 0;
}

static double x_of(const struct timeline *tl, size_t i, double span)
{
	return LEFT + (W - LEFT - RIGHT) * (span > 0 ? tl->t[i] / span : 0.5);
}

static double y_of(double v, double top)
{
	return H - BOTTOM - (H - TOP - BOTTOM) * (top > 0 ? v / top : 0);
}

/* The axis' step for values up to @v: 1, 2, 2.5 or 5 times a power of
 * ten of the largest binary unit (KiB, MiB, GiB, TiB) at or below @v,
 * the smallest that reaches @v in 5 steps at most; their number in
 * *@steps.  110 MiB of data gets 5 steps of 25 MiB, not a top at
 * 200 MiB. */
static double nice_step(double v, int *steps)
{
	static const double mult[] = { 1, 2, 2.5, 5 };
	double unit = 1, p = 1, step = 0;
	size_t i;

	if (!(v > 1024)) {
		*steps = 4;
		return 256;
	}
	while (unit * 1024 <= v && unit < 1099511627776.0)
		unit *= 1024;
	v /= unit;
	while (p * 10 <= v)
		p *= 10;
	/* from a tenth of p up: the first to reach v in five steps */
	for (p /= 10; !step; p *= 10)
		for (i = 0; i < ARRAY_SIZE(mult) && !step; i++)
			if (ceil(v / (mult[i] * p)) <= 5)
				step = mult[i] * p;
	*steps = (int)ceil(v / step);
	return step * unit;
}

/* One chart being drawn: its scale and where it stands. */
struct chart {
	const struct timeline *tl;
	FILE *f;
	size_t n, step;		/* ticks, and the step between points */
	double span, top, ystep;	/* seconds; bytes at the top, a step */
	int ysteps;
	double *below;		/* each tick's sum of the parts drawn */
	double legend_y;
};

/* The top of @ch's y-axis: the largest of the sums of the parts drawn
 * and RSS, and the limit when it is near, up to a round step. */
static void scale(struct chart *ch)
{
	const struct timeline *tl = ch->tl;
	size_t i, l;

	for (i = 0; i < ch->n; i++) {
		double sum = 0;

		for (l = 0; l < ARRAY_SIZE(layers); l++)
			if (drawn(tl, layers[l].col))
				sum += value(tl, i, layers[l].col);
		if (tl->have[COL_RSS] && value(tl, i, COL_RSS) > sum)
			sum = value(tl, i, COL_RSS);
		if (sum > ch->top)
			ch->top = sum;
	}
	if (tl->s.limit && tl->s.limit <= 2 * ch->top &&
	    (double)tl->s.limit > ch->top)
		ch->top = (double)tl->s.limit;
	ch->ystep = nice_step(ch->top * 1.02, &ch->ysteps);
	ch->top = ch->ystep * ch->ysteps;
}

/* The svg element, and the title lines: the command, RSS, the ticks. */
static void put_head(const struct chart *ch, bool standalone)
{
	const struct timeline *tl = ch->tl;
	const struct series *s = &tl->s;
	size_t n = ch->n, step = ch->step;
	char a[40], b[40], c[40];
	FILE *f = ch->f;

	if (standalone)
		fputs("<?xml version=\"1.0\" standalone=\"no\"?>\n", f);
	/* data-points: the ticks the RSS line goes through */
	fprintf(f, "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" "
		"id=\"timeline\" data-points=\"%zu\" "
		"width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
		"font-family=\"sans-serif\" font-size=\"12\">\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
		tl->have[COL_RSS] && n ? (n + step - 1) / step +
						 ((n - 1) % step != 0)
				       : 0, W, H, W, H);
	fprintf(f, "<text x=\"%.0f\" y=\"20\" font-size=\"15\">", LEFT);
	xml_text(f, s->command, 64);
	fprintf(f, " (pid %d)", s->pid);
	if (tl->have[COL_RSS] && n) {
		human_bytes(timeline_bytes(tl->parts[COL_RSS].last), a,
			    sizeof(a));
		timeline_signed_bytes(timeline_part_pace(tl, COL_RSS), b,
				      sizeof(b));
		fprintf(f, ": RSS %s, its floor %s/h", a, b);
	}
	timeline_duration(ch->span, 0, c, sizeof(c));
	fprintf(f, "</text>\n<text x=\"%.0f\" y=\"36\" fill=\"#555\">%zu "
		"tick%s over %s, %zu dump%s; ", LEFT, n, n == 1 ? "" : "s", c,
		s->dumps, s->dumps == 1 ? "" : "s");
	xml_text(f, s->end[0] ? s->end : "the watch did not end", 80);
	fputs("</text>\n", f);
}

/* The axes: the steps of bytes, 5 of time. */
static void put_axes(const struct chart *ch)
{
	char a[40];
	size_t k;

	for (k = 0; k <= (size_t)ch->ysteps; k++) {
		double y = y_of(ch->ystep * (double)k, ch->top);

		human_bytes(timeline_bytes(ch->ystep * (double)k), a,
			    sizeof(a));
		fprintf(ch->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
			"y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n<text x=\"%.1f\" "
			"y=\"%.1f\" text-anchor=\"end\" fill=\"#555\">%s</text>\n",
			LEFT, y, W - RIGHT, y, LEFT - 6, y + 4, a);
	}
	for (k = 0; k <= 5; k++) {
		timeline_duration(ch->span * (double)k / 5, 0, a, sizeof(a));
		fprintf(ch->f, "<text x=\"%.1f\" y=\"%.1f\" "
			"text-anchor=\"middle\" fill=\"#555\">%s</text>\n",
			LEFT + (W - LEFT - RIGHT) * (double)k / 5,
			H - BOTTOM + 18, a);
	}
}

/* Layer @l of the parts, stacked: its area from the sum below it to the
 * sum with it, and its line of the legend. */
static void put_layer(struct chart *ch, size_t l)
{
	const struct timeline *tl = ch->tl;
	enum series_col col = layers[l].col;
	const struct trend *tr = &tl->parts[col];
	size_t i, k, n = ch->n, step = ch->step;
	double span = ch->span, top = ch->top, *below = ch->below;
	char a[40], b[40], c[40];
	FILE *f = ch->f;

	fprintf(f, "<path class=\"part\" data-part=\"%s\" fill=\"%s\" "
		"fill-opacity=\"0.8\" d=\"M",
		series_col_name(col), layers[l].color);
	for (i = 0; i < n; i += step)
		fprintf(f, " %.1f,%.1f", x_of(tl, i, span),
			y_of(below[i] + value(tl, i, col), top));
	fprintf(f, " %.1f,%.1f", x_of(tl, n - 1, span),
		y_of(below[n - 1] + value(tl, n - 1, col), top));
	fprintf(f, " L %.1f,%.1f", x_of(tl, n - 1, span),
		y_of(below[n - 1], top));
	for (k = n; k-- > 0;)
		if (k % step == 0 || k == n - 1)
			fprintf(f, " %.1f,%.1f", x_of(tl, k, span),
				y_of(below[k], top));
	human_bytes(timeline_bytes(tr->first), a, sizeof(a));
	human_bytes(timeline_bytes(tr->last), b, sizeof(b));
	timeline_signed_bytes(timeline_part_pace(tl, col), c, sizeof(c));
	fprintf(f, " Z\"><title>%s: %s -> %s, %s/h, %s</title></path>\n",
		series_col_name(col), a, b, c, timeline_part_now(tl, col));
	for (i = 0; i < n; i++)
		below[i] += value(tl, i, col);
	fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" "
		"height=\"12\" fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\">"
		"%s %s</text>\n", W - RIGHT + 16, ch->legend_y, layers[l].color,
		W - RIGHT + 34, ch->legend_y + 10, series_col_name(col), b);
	ch->legend_y += 18;
}

/* RSS over the parts, and its line of the legend. */
static void put_rss(const struct chart *ch)
{
	const struct timeline *tl = ch->tl;
	size_t i, n = ch->n, step = ch->step;
	FILE *f = ch->f;
	char b[40];

	fputs("<polyline class=\"rss\" fill=\"none\" stroke=\"#000\" "
	      "stroke-width=\"1.5\" points=\"", f);
	for (i = 0; i < n; i += step)
		fprintf(f, "%.1f,%.1f ", x_of(tl, i, ch->span),
			y_of(value(tl, i, COL_RSS), ch->top));
	if ((n - 1) % step)
		fprintf(f, "%.1f,%.1f", x_of(tl, n - 1, ch->span),
			y_of(value(tl, n - 1, COL_RSS), ch->top));
	fputs("\"><title>rss</title></polyline>\n", f);
	human_bytes(timeline_bytes(tl->parts[COL_RSS].last), b, sizeof(b));
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
		"y2=\"%.1f\" stroke=\"#000\" stroke-width=\"1.5\"/>"
		"<text x=\"%.1f\" y=\"%.1f\">rss %s</text>\n",
		W - RIGHT + 16, ch->legend_y + 6, W - RIGHT + 28,
		ch->legend_y + 6, W - RIGHT + 34, ch->legend_y + 10, b);
}

/* The dumps, and the limit when it is within sight. */
static void put_marks(const struct chart *ch)
{
	const struct series *s = &ch->tl->s;
	FILE *f = ch->f;
	char a[40];
	size_t i;

	for (i = 0; i < ch->n; i++) {
		double x = x_of(ch->tl, i, ch->span);

		if (!s->v[i].dump[0])
			continue;
		fprintf(f, "<line class=\"dump\" x1=\"%.1f\" y1=\"%.1f\" "
			"x2=\"%.1f\" y2=\"%.1f\" stroke=\"#777\" "
			"stroke-dasharray=\"3,3\"><title>", x, TOP, x,
			H - BOTTOM);
		xml_text(f, s->v[i].dump, SERIES_NAME_MAX);
		fputs("</title></line>\n", f);
	}
	if (s->limit && (double)s->limit <= ch->top) {
		double y = y_of((double)s->limit, ch->top);

		human_bytes(s->limit, a, sizeof(a));
		fprintf(f, "<line class=\"limit\" x1=\"%.1f\" y1=\"%.1f\" "
			"x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c00\" "
			"stroke-dasharray=\"6,3\"/><text x=\"%.1f\" y=\"%.1f\" "
			"fill=\"#c00\">memory limit %s</text>\n",
			LEFT, y, W - RIGHT, y, LEFT + 4, y - 4, a);
	}
}

void timeline_svg(const struct timeline *tl, bool standalone, FILE *f)
{
	size_t n = tl->s.n, l;
	struct chart ch = {
		.tl = tl, .f = f, .n = n,
		.step = n > POINTS_MAX ? (n + POINTS_MAX - 1) / POINTS_MAX : 1,
		.span = n ? tl->t[n - 1] : 0, .legend_y = TOP,
	};

	ch.below = calloc(n ? n : 1, sizeof(*ch.below));
	if (!ch.below)
		return;
	scale(&ch);
	put_head(&ch, standalone);
	put_axes(&ch);
	for (l = 0; l < ARRAY_SIZE(layers) && n; l++)
		if (drawn(tl, layers[l].col))
			put_layer(&ch, l);
	if (tl->have[COL_RSS] && n)
		put_rss(&ch);
	put_marks(&ch);
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
		"stroke=\"#555\"/>\n</svg>\n", LEFT, H - BOTTOM, W - RIGHT,
		H - BOTTOM);
	free(ch.below);
}
