/*
 * memsnap report DIR --format html: the whole answer in one page
 * (common/html.h says what the page may do).  From the top: a sampler
 * the watch may have left on, the headline (timeline_headline()), RSS
 * and the memory limit, the chart (timeline_svg()), the last tick's
 * `explain` (DIR/explain.txt, which watch replaces at every tick), the
 * parts with what each does now, the call sites that grew and the other
 * large ones with a sparkline each, and a flame graph of the growth:
 * the stacks that grew from the first dump read to the last
 * (timeline_load()), whole, its table of sites past the allocator's
 * wrappers.
 */
#include "timeline/timeline.h"

#include "common/fsio.h"
#include "common/hidx.h"
#include "common/html.h"
#include "common/util.h"
#include "profile/wrappers.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Frames kept of one stack of the flame graph. */
#define FLAME_DEPTH 512

/* A sparkline of @n values, @w by 22 pixels. */
static void spark_svg(FILE *f, const double *v, size_t n, int w)
{
	double lo = INFINITY, hi = -INFINITY;
	size_t i;

	for (i = 0; i < n; i++) {
		lo = fmin(lo, v[i]);
		hi = fmax(hi, v[i]);
	}
	fprintf(f, "<svg class=\"spark\" width=\"%d\" height=\"22\" "
		"viewBox=\"0 0 %d 22\"><polyline fill=\"none\" "
		"stroke=\"#c03\" stroke-width=\"1.5\" points=\"", w, w);
	for (i = 0; i < n; i++)
		fprintf(f, "%.1f,%.1f ",
			n > 1 ? (double)i * (w - 2) / (double)(n - 1) + 1 : w / 2.0,
			hi > lo ? 20 - 18 * (v[i] - lo) / (hi - lo) : 11.0);
	fputs("\"/></svg>", f);
}

static void parts_table(const struct timeline *tl, FILE *f)
{
	const struct series *s = &tl->s;
	const struct series_tick *last = &s->v[s->n - 1];
	double *v = malloc(s->n * sizeof(*v));
	char a[40], b[40], line[512];
	int col;

	if (!v)
		return;
	fputs("<h2>The parts of RSS</h2>\n<table><thead><tr>"
	      "<th class=\"name\">part</th><th>last tick</th><th>of RSS</th>"
	      "<th>per hour</th><th class=\"name\">now</th>"
	      "<th>over time</th></tr></thead><tbody>\n", f);
	for (col = 0; col < SERIES_COLS; col++) {

		if (!timeline_part_shown(tl, col))
			continue;
		human_bytes(timeline_bytes((double)last->v[col]), a, sizeof(a));
		timeline_signed_bytes(timeline_part_pace(tl, col), b,
				      sizeof(b));
		fprintf(f, "<tr data-part=\"%s\"><td class=\"name\">%s</td>"
			"<td>%s%s</td>", series_col_name((enum series_col)col),
			series_col_name((enum series_col)col),
			last->v[col] < 0 ? "-" : "", a);
		if (last->v[COL_RSS] > 0 && col != COL_RSS)
			fprintf(f, "<td>%.1f%%</td>", 100.0 *
				(double)last->v[col] / (double)last->v[COL_RSS]);
		else
			fputs("<td></td>", f);
		fprintf(f, "<td>%s</td><td class=\"name\">%s</td><td>", b,
			timeline_part_now(tl, col));
		timeline_column(tl, (enum series_col)col, v);
		spark_svg(f, v, s->n, 160);
		fputs("</td></tr>\n", f);
	}
	fputs("</tbody></table>\n<p class=\"sub\">Per hour: the pace of the "
	      "part's floor, over the last third of the watch where that "
	      "differs.  ", f);
	timeline_threshold_sentence(tl, line, sizeof(line));
	xml_text(f, line, sizeof(line));
	fputs(".</p>\n", f);
	free(v);
}

/* One row of a table of sites: @grew, its growth first, else its
 * peak. */
static void site_row(const struct timeline *tl, const struct site *st,
		     bool grew, const char *id, FILE *f)
{
	double sv[SITE_DUMPS_MAX];
	size_t m = timeline_site_bytes(tl, st, sv);
	char a[40], b[40];

	if (grew)
		timeline_signed_bytes(st->growth, a, sizeof(a));
	else
		human_bytes(timeline_bytes(st->tr.max), a, sizeof(a));
	human_bytes(timeline_bytes(st->tr.last), b, sizeof(b));
	fprintf(f, "<tr><td>%s</td><td>%s</td><td class=\"name\">%s"
		"</td><td>", a, b, trend_shape_name(st->tr.shape));
	spark_svg(f, sv, m, 120);
	fprintf(f, "</td><td class=\"name\"%s%s%s>", id ? " id=\"" : "",
		id ? id : "", id ? "\"" : "");
	xml_text(f, st->name, SITE_NAME_MAX);
	fputs("</td></tr>\n", f);
}

static void sites_table(const struct timeline *tl, unsigned int top,
			FILE *f)
{
	size_t i, n, shown = 0, *big;

	fputs("<h2>Call sites that grew</h2>\n", f);
	fputs("<p class=\"sub\">A call site is the frame that called the "
	      "allocator, past its wrappers.  Ranked by what the floor of "
	      "each site's bytes rose by over the dumps.  A site that grows "
	      "at every dump is a leak suspect; one that fills and stops, a "
	      "cache; one that comes and goes, a working set.</p>\n", f);
	fputs("<table><thead><tr><th>growth</th><th>last dump</th>"
	      "<th class=\"name\">shape</th><th>over the dumps</th>"
	      "<th class=\"name\">site</th></tr></thead><tbody>\n", f);
	for (i = 0; i < tl->nsites && (!top || shown < top); i++) {
		if (!timeline_site_grew(&tl->sites[i]))
			break;
		site_row(tl, &tl->sites[i], true, shown ? NULL : "top-site",
			 f);
		shown++;
	}
	if (!shown)
		fputs("<tr><td colspan=\"5\" class=\"name\">none: no site's "
		      "bytes rose over the dumps</td></tr>\n", f);
	fputs("</tbody></table>\n", f);
	n = timeline_largest(tl, top, shown, &big);
	if (n) {
		fputs("<h2>The other large call sites, by their peak</h2>\n"
		      "<table id=\"large-sites\"><thead><tr><th>peak</th>"
		      "<th>last dump</th><th class=\"name\">shape</th>"
		      "<th>over the dumps</th><th class=\"name\">site</th></tr>"
		      "</thead><tbody>\n", f);
		for (i = 0; i < n; i++)
			site_row(tl, &tl->sites[big[i]], false, NULL, f);
		fputs("</tbody></table>\n", f);
	}
	free(big);
}

/* Frame names of the flame graph, each once. */
struct frames {
	char **v;
	size_t n, cap;
	struct hidx idx;
};

static uint64_t frame_hash(const void *ctx, size_t i)
{
	const struct frames *fr = ctx;

	return timeline_name_hash(fr->v[i], strlen(fr->v[i]));
}

/* The id of the @len bytes at @s, added when new; -1: no memory. */
static long frame_id(struct frames *fr, const char *s, size_t len)
{
	size_t j;

	if (hidx_need(&fr->idx, fr->n + 1, 64, frame_hash, fr))
		return -1;
	for (j = hidx_first(&fr->idx, timeline_name_hash(s, len));
	     fr->idx.slot[j];
	     j = hidx_next(&fr->idx, j)) {
		const char *t = fr->v[fr->idx.slot[j] - 1];

		if (!strncmp(t, s, len) && !t[len])
			return (long)fr->idx.slot[j] - 1;
	}
	if (array_grow((void **)&fr->v, &fr->cap, fr->n + 1, sizeof(*fr->v)))
		return -1;
	fr->v[fr->n] = strndup(s, len);
	if (!fr->v[fr->n])
		return -1;
	fr->idx.slot[j] = (uint32_t)++fr->n;
	return (long)fr->n - 1;
}

/* One stack of the growth: its value and where its ids start. */
struct grown {
	double value;
	size_t at, n;
};

/*
 * The flame graph's data from the folded lines of a difference: the
 * stacks whose value is positive, their frames named once, those of
 * @wrappers marked.  Written only whole: on a lack of memory the page
 * says so instead.
 */
static int flame_from_folded(const char *buf, struct wrappers *wrappers,
			     FILE *f)
{
	struct frames fr = { 0 };
	struct grown *g = NULL;
	uint32_t *ids = NULL;
	size_t ng = 0, gcap = 0, nids = 0, icap = 0, i;
	const char *line = buf;
	int rc = 0, first = 1;

	while (*line && !rc) {
		const char *nl = strchr(line, '\n'), *sp, *p, *end;
		size_t len = nl ? (size_t)(nl - line) : strlen(line), d = 0;
		double v;

		sp = len ? memrchr(line, ' ', len) : NULL;
		v = sp ? strtod(sp + 1, NULL) : 0;
		if (sp && v > 0 && isfinite(v) &&
		    !array_grow((void **)&g, &gcap, ng + 1, sizeof(*g))) {
			g[ng] = (struct grown){ .value = v, .at = nids };
			for (p = line; p < sp && d < FLAME_DEPTH; p = end + 1) {
				long id;

				end = memchr(p, ';', (size_t)(sp - p));
				if (!end)
					end = sp;
				id = frame_id(&fr, p, (size_t)(end - p));
				if (id < 0 || array_grow((void **)&ids, &icap,
							 nids + 1,
							 sizeof(*ids))) {
					rc = -ENOMEM;
					break;
				}
				ids[nids++] = (uint32_t)id;
				d++;
			}
			g[ng++].n = d;
		} else if (sp && v > 0 && isfinite(v)) {
			rc = -ENOMEM;
		}
		line = nl ? nl + 1 : line + len;
	}
	if (!rc) {
		for (i = 0; i < fr.n; i++) {
			if (!wrappers_match(wrappers, fr.v[i], strlen(fr.v[i])))
				continue;
			fprintf(f, "%s%zu", first ? "" : ",", i);
			first = 0;
		}
		first = 1;
		html_flame_names(f);
		for (i = 0; i < fr.n; i++) {
			if (i)
				fputc(',', f);
			html_js_string(f, fr.v[i], 4096);
		}
		html_flame_stacks(f);
		for (i = 0; i < ng; i++)
			html_flame_stack(f, g[i].value, ids + g[i].at, g[i].n,
					 &first);
	}
	for (i = 0; i < fr.n; i++)
		free(fr.v[i]);
	free(fr.v);
	hidx_free(&fr.idx);
	free(g);
	free(ids);
	return rc;
}

/* The growth's flame graph, from the first dump read to the last. */
static void growth_flame(const struct timeline *tl, FILE *f)
{
	char heading[200];

	if (!tl->growth_from)
		return;
	if (!tl->growth) {
		fputs("<p class=\"warn\">No flame graph of the growth: "
		      "out of memory.</p>\n", f);
		return;
	}
	snprintf(heading, sizeof(heading), "What grew from %s to %s",
		 tl->growth_from, tl->growth_to);
	html_flame_section(f, heading);
	html_flame_begin(f, "bytes", heading);
	if (flame_from_folded(tl->growth, tl->wrappers, f)) {
		/* an empty graph, whole */
		html_flame_names(f);
		html_flame_stacks(f);
	}
	html_flame_finish(f);
}

void timeline_html(const struct timeline *tl, unsigned int top, FILE *f)
{
	const struct series *s = &tl->s;
	char title[128], span[40], line[1024];
	const char *ex = tl->explain;

	snprintf(title, sizeof(title), "memsnap: %s (pid %d)", s->command,
		 s->pid);
	html_begin(f, title);
	fputs("<h1>", f);
	xml_text(f, s->command, sizeof(s->command));
	timeline_duration(s->n ? tl->t[s->n - 1] : 0, 1, span, sizeof(span));
	fprintf(f, " (pid %d)</h1>\n<p class=\"sub\">", s->pid);
	if (strcmp(s->allocator, "-")) {
		xml_text(f, s->allocator, sizeof(s->allocator));
		fputs("; ", f);
	}
	fprintf(f, "%zu tick%s over %s", s->n, s->n == 1 ? "" : "s", span);
	if (s->interval_ms)
		fprintf(f, " (every %g s)", (double)s->interval_ms / 1000);
	fprintf(f, ", %zu dump%s; ", s->dumps, s->dumps == 1 ? "" : "s");
	xml_text(f, s->end[0] ? s->end : "the watch did not end (killed?)",
		 sizeof(s->end));
	fputs("</p>\n", f);
	if (timeline_sampler_sentence(tl, line, sizeof(line))) {
		fputs("<p class=\"warn\" id=\"sampler-left\">", f);
		xml_text(f, line, sizeof(line));
		fputs("</p>\n", f);
	}
	if (s->n && tl->have[COL_RSS]) {
		timeline_headline(tl, line, sizeof(line));
		fputs("<p class=\"verdict\" id=\"headline\">", f);
		xml_text(f, line, sizeof(line));
		fputs("</p>\n<p class=\"sub\">", f);
		timeline_rss_sentence(tl, line, sizeof(line));
		xml_text(f, line, sizeof(line));
		fputs("</p>\n", f);
	}
	if (timeline_limit_sentence(tl, line, sizeof(line))) {
		fprintf(f, "<p%s>", tl->limit_hours >= 0 ? " class=\"warn\""
							 : "");
		xml_text(f, line, sizeof(line));
		fputs("</p>\n", f);
	}
	if (s->notes) {
		fprintf(f, "<p class=\"sub\">%zu note%s in the series; the "
			"last: ", s->notes, s->notes == 1 ? "" : "s");
		xml_text(f, s->last_note, sizeof(s->last_note));
		fputs("</p>\n", f);
	}
	if (!s->n) {
		fputs("<p>No tick in the series yet.</p>\n", f);
		html_end(f);
		return;
	}
	fputs("<h2>Resident memory over time</h2>\n", f);
	timeline_svg(tl, false, f);
	if (ex) {
		const char *p = ex, *nl;

		fputs("<h2>At the last tick: memsnap explain</h2>\n<pre>", f);
		for (; *p; p = nl + 1) {
			char *one;

			nl = strchrnul(p, '\n');
			/* a line whole: xml_text() marks a cut one ".." */
			one = strndup(p, (size_t)(nl - p));
			if (one)
				xml_text(f, one, SERIES_EXPLAIN_MAX);
			free(one);
			fputc('\n', f);
			if (!*nl)
				break;
		}
		fputs("</pre>\n", f);
	}
	parts_table(tl, f);
	if (!tl->ndumps)
		fputs("<p>No heap dump in the series: no call sites (watch "
		      "--sampler, or an allocator that profiles, gives them)."
		      "</p>\n", f);
	else
		sites_table(tl, top, f);
	growth_flame(tl, f);
	html_end(f);
}
