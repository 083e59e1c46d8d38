/*
 * memsnap report DIR (model.c reads the watch): the text and the JSON of
 * a timeline, and the choice of output for --format (the SVG chart and
 * the HTML page are svg.c's and html.c's).
 */
#include "timeline/timeline.h"

#include "common/json.h"
#include "common/util.h"
#include "timeline/series.h"
#include "timeline/trend.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The line under the title, and the sentences every output starts
 * with: the headline, RSS, the sampler left on, the limit. */
static void print_head(const struct timeline *tl, const char *dir, FILE *f)
{
	const struct series *s = &tl->s;
	char span[40], line[1024];

	timeline_duration(s->n ? tl->t[s->n - 1] : 0, 1, span, sizeof(span));
	fprintf(f, "%s (pid %d)%s%s: %zu tick%s over %s", s->command,
		s->pid, s->allocator[0] && strcmp(s->allocator, "-") ? ", " : "",
		strcmp(s->allocator, "-") ? s->allocator : "", s->n,
		s->n == 1 ? "" : "s", span);
	if (s->interval_ms)
		fprintf(f, " (every %g s)", (double)s->interval_ms / 1000);
	fprintf(f, ", %zu dump%s; %s\n", s->dumps, s->dumps == 1 ? "" : "s",
		s->end[0] ? s->end : "the watch did not end (killed?)");
	if (timeline_sampler_sentence(tl, line, sizeof(line)))
		fprintf(f, "warning: %s\n", line);
	if (!s->n) {
		fprintf(f, "no tick in %s/series.tsv\n", dir);
		return;
	}
	if (tl->have[COL_RSS]) {
		timeline_headline(tl, line, sizeof(line));
		fprintf(f, "\n%s\n", line);
		timeline_rss_sentence(tl, line, sizeof(line));
		fprintf(f, "%s\n", line);
	}
	if (timeline_limit_sentence(tl, line, sizeof(line)))
		fprintf(f, "%s\n", line);
}

/* @a @b @c as lines of 78 columns at most, cut at spaces. */
static void wrapped(FILE *f, const char *a, const char *b, const char *c)
{
	char text[1024];
	const char *p = text, *sp, *cut;

	snprintf(text, sizeof(text), "%s%s%s", a, b, c);
	while (strlen(p) > 78) {
		for (cut = NULL, sp = p; (sp = strchr(sp, ' ')) &&
					 sp - p <= 78; sp++)
			cut = sp;
		if (!cut)
			break;
		fprintf(f, "%.*s\n", (int)(cut - p), p);
		p = cut + 1;
	}
	fprintf(f, "%s\n", p);
}

/* Is column @col a row of the parts' table? */
bool timeline_part_shown(const struct timeline *tl, int col)
{
	const struct trend *r = &tl->parts[col];

	if (!tl->have[col] || col == COL_THREADS || col == COL_SWAP)
		return false;
	if (col == COL_HEAP && tl->have[COL_HEAP_IN_USE])
		return false;	/* its parts are there */
	return col == COL_RSS || r->max != 0 || r->min != 0;
}

/* A part's state for the table: what it does now where it was judged,
 * else its shape. */
const char *timeline_part_now(const struct timeline *tl, int col)
{
	return tl->state[col] != STATE_QUIET
		? timeline_state_name(tl->state[col])
		: trend_shape_name(tl->parts[col].shape);
}

static void print_parts(const struct timeline *tl, FILE *f)
{
	const struct series *s = &tl->s;
	char a[40], c[40], spark[3 * 24 + 1], line[512];
	double *v = malloc(s->n * sizeof(*v));
	int col;

	if (!v)
		return;
	fprintf(f, "\n%-15s %11s %12s  %-12s %s\n", "part", "last",
		"per hour", "now", "over time");
	for (col = 0; col < SERIES_COLS; col++) {
		const struct trend *r = &tl->parts[col];

		if (!timeline_part_shown(tl, col))
			continue;
		timeline_column(tl, (enum series_col)col, v);
		trend_sparkline(v, s->n, 24, spark, sizeof(spark));
		human_bytes(timeline_bytes(r->last), a, sizeof(a));
		timeline_signed_bytes(timeline_part_pace(tl, col), c,
				      sizeof(c));
		fprintf(f, "%-15s %s%10s %12s  %-12s %s\n",
			series_col_name((enum series_col)col),
			r->last < 0 ? "-" : " ", a, c,
			timeline_part_now(tl, col), spark);
	}
	free(v);
	timeline_threshold_sentence(tl, line, sizeof(line));
	wrapped(f, "(per hour: the pace of the part's floor, over the last "
		"third where that differs; ", line, ")");
}

/* The bytes of site @st at each dump read, into @sv: how many. */
size_t timeline_site_bytes(const struct timeline *tl, const struct site *st,
			   double *sv)
{
	size_t k, m = 0;

	for (k = 0; k < tl->ndumps; k++)
		if (tl->dump_ok[k])
			sv[m++] = st->bytes[k];
	return m;
}

static void site_row(const struct timeline *tl, const struct site *st,
		     bool grew, FILE *f)
{
	char a[40], b[40], spark[3 * 12 + 1];
	double sv[SITE_DUMPS_MAX];
	size_t m = timeline_site_bytes(tl, st, sv);

	trend_sparkline(sv, m, 12, spark, sizeof(spark));
	if (grew)
		timeline_signed_bytes(st->growth, a, sizeof(a));
	else
		human_bytes(timeline_bytes(st->tr.max), a, sizeof(a));
	human_bytes(timeline_bytes(st->tr.last), b, sizeof(b));
	/* 3 bytes a column: padded by columns */
	fprintf(f, "%11s %11s  %-10s %s%*s ", a, b,
		trend_shape_name(st->tr.shape), spark,
		(int)(12 - strlen(spark) / 3), "");
	fputs_clean(st->name, f);
	fputc('\n', f);
}

static void print_sites(const struct timeline *tl, unsigned int top,
			FILE *f)
{
	const struct series *s = &tl->s;
	size_t i, shown, n, *big;

	for (i = 0, shown = 0; i < tl->ndumps; i++)
		shown += tl->dump_ok[i];
	if (shown < 2) {
		fprintf(f, "\n%s: growth needs two dumps\n",
			shown ? "one dump read" : "no dump could be read");
		return;
	}
	fprintf(f, "\ncall sites that grew, from %s to %s:\n",
		s->v[tl->dump_tick[0]].dump,
		s->v[tl->dump_tick[tl->ndumps - 1]].dump);
	fprintf(f, "%11s %11s  %-10s %-12s %s\n", "growth", "last", "shape",
		"over dumps", "site");
	for (i = 0, shown = 0; i < tl->nsites && (!top || shown < top); i++) {
		if (!timeline_site_grew(&tl->sites[i]))
			break;
		site_row(tl, &tl->sites[i], true, f);
		shown++;
	}
	if (!shown)
		fprintf(f, "  none: no site's bytes rose over the dumps\n");
	n = timeline_largest(tl, top, shown, &big);
	if (n) {
		fprintf(f, "\nthe other large call sites, by their peak:\n");
		fprintf(f, "%11s %11s  %-10s %-12s %s\n", "peak", "last",
			"shape", "over dumps", "site");
		for (i = 0; i < n; i++)
			site_row(tl, &tl->sites[big[i]], false, f);
	}
	free(big);
	wrapped(f, "(growing: a leak suspect; plateau: a cache that filled; ",
		"saw-tooth: a working set that comes and goes)", "");
}

static void print_text(const struct timeline *tl, const char *dir,
		       unsigned int top, FILE *f)
{
	const struct series *s = &tl->s;

	print_head(tl, dir, f);
	if (!s->n)
		return;
	print_parts(tl, f);
	if (s->notes)
		fprintf(f, "\n%zu note%s in the series; the last: %s\n",
			s->notes, s->notes == 1 ? "" : "s", s->last_note);
	if (s->bad)
		fprintf(f, "%zu line%s of the series unreadable, left out\n",
			s->bad, s->bad == 1 ? "" : "s");
	if (!tl->ndumps) {
		fprintf(f, "\nno heap dump in the series: no call sites (watch "
			"--sampler, or an allocator that profiles, gives "
			"them)\n");
		return;
	}
	print_sites(tl, top, f);
}

static void json_trend(struct json *j, const struct trend *r)
{
	json_double(j, "first", r->first);
	json_double(j, "last", r->last);
	json_double(j, "min", r->min);
	json_double(j, "max", r->max);
	json_double(j, "per_hour", r->per_hour);
	json_double(j, "recent_per_hour", r->recent_per_hour);
	json_double(j, "floor_per_hour", r->floor_per_hour);
	json_double(j, "floor_recent_per_hour", r->floor_recent_per_hour);
	json_double(j, "floor_rise", r->floor_rise);
	json_double(j, "swing", r->swing);
	json_double(j, "noise", r->noise);
	json_string(j, "shape", trend_shape_name(r->shape));
}

static void json_site(struct json *j, const struct timeline *tl,
		      const struct site *st)
{
	double sv[SITE_DUMPS_MAX];
	size_t k, m = timeline_site_bytes(tl, st, sv);

	json_object_begin(j, NULL);
	json_string(j, "name", st->name);
	json_double(j, "growth", st->growth);
	json_bool(j, "grew", timeline_site_grew(st));
	json_trend(j, &st->tr);
	json_array_begin(j, "bytes");
	for (k = 0; k < m; k++)
		json_double(j, NULL, sv[k]);
	json_array_end(j);
	json_object_end(j);
}

/* The verdict's members: the headline, the threshold, the sampler. */
static void json_verdict(struct json *j, const struct timeline *tl)
{
	const struct series *s = &tl->s;
	char line[1024];

	timeline_headline(tl, line, sizeof(line));
	json_string(j, "headline", line);
	json_double(j, "threshold", tl->threshold);
	json_double(j, "threshold_share_of_rss", TIMELINE_GROWTH_SHARE);
	if (!s->sampler_on && !s->sampler_found) {
		json_null(j, "sampler");
		return;
	}
	json_object_begin(j, "sampler");
	json_bool(j, "by_the_watch", s->sampler_on);
	json_bool(j, "switched_off", s->sampler_off);
	if (timeline_sampler_sentence(tl, line, sizeof(line))) {
		json_bool(j, "may_still_be_on", true);
		snprintf(line, sizeof(line), "memsnap --pid %d prof off",
			 s->pid);
		json_string(j, "switch_off", line);
	} else {
		json_bool(j, "may_still_be_on", false);
	}
	json_object_end(j);
}

static void json_parts(struct json *j, const struct timeline *tl)
{
	const struct series *s = &tl->s;
	size_t i;
	int col;

	json_array_begin(j, "parts");
	for (col = 0; col < SERIES_COLS; col++) {
		if (!tl->have[col])
			continue;
		json_object_begin(j, NULL);
		json_string(j, "name", series_col_name((enum series_col)col));
		json_trend(j, &tl->parts[col]);
		if (timeline_part_judged(tl, col))
			json_string(j, "state",
				    timeline_state_name(tl->state[col]));
		json_array_begin(j, "values");
		for (i = 0; i < s->n; i++)
			json_i64(j, NULL, s->v[i].v[col]);
		json_array_end(j);
		json_object_end(j);
	}
	json_array_end(j);
}

static void print_json(const struct timeline *tl, unsigned int top, FILE *f)
{
	const struct series *s = &tl->s;
	struct json j;
	size_t i, k, n, *big;

	json_init(&j, f);
	json_object_begin(&j, NULL);
	json_u64(&j, "pid", (uint64_t)s->pid);
	json_string(&j, "command", s->command);
	json_string(&j, "allocator", s->allocator);
	json_u64(&j, "started_ms", s->started_ms);
	json_u64(&j, "interval_ms", s->interval_ms);
	json_u64(&j, "ticks", s->n);
	if (s->end[0])
		json_string(&j, "end", s->end);
	else
		json_null(&j, "end");
	json_u64(&j, "notes", s->notes);
	json_u64(&j, "lines_skipped", s->bad);
	if (s->limit) {
		json_u64(&j, "limit", s->limit);
		if (tl->limit_hours >= 0)
			json_double(&j, "limit_in_hours", tl->limit_hours);
		else
			json_null(&j, "limit_in_hours");
	} else {
		json_null(&j, "limit");
	}
	json_verdict(&j, tl);
	json_array_begin(&j, "t_s");
	for (i = 0; i < s->n; i++)
		json_double(&j, NULL, tl->t[i]);
	json_array_end(&j);
	json_parts(&j, tl);
	json_array_begin(&j, "dumps");
	for (k = 0; k < tl->ndumps; k++) {
		json_object_begin(&j, NULL);
		json_string(&j, "name", s->v[tl->dump_tick[k]].dump);
		json_double(&j, "t_s", tl->t[tl->dump_tick[k]]);
		json_bool(&j, "read", tl->dump_ok[k]);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_array_begin(&j, "sites");
	for (i = 0; i < tl->nsites && (!top || i < top); i++)
		json_site(&j, tl, &tl->sites[i]);
	json_array_end(&j);
	json_array_begin(&j, "largest_sites");
	n = timeline_largest(tl, top, 0, &big);
	for (i = 0; i < n; i++)
		json_site(&j, tl, &tl->sites[big[i]]);
	free(big);
	json_array_end(&j);
	json_object_end(&j);
	json_finish(&j);
}

void timeline_print(const struct timeline *tl, const char *dir,
		    enum report_fmt fmt, unsigned int top, FILE *f)
{
	if (fmt == F_JSON)
		print_json(tl, top, f);
	else if (fmt == F_SVG)
		timeline_svg(tl, true, f);
	else if (fmt == F_HTML)
		timeline_html(tl, top, f);
	else
		print_text(tl, dir, top, f);
}
