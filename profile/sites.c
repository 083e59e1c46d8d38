/*
 * The sites of a report (profile/report_internal.h): each label's flat
 * and cum, the largest first, and their sampling error.
 */
#include "profile/report.h"
#include "profile/report_internal.h"

#include "common/json.h"
#include "common/util.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>


/* Flat goes to the stack's site (the innermost frame of the leaf, or the
 * first past the allocator wrappers of @o); cum to every frame of the
 * stack, once per stack even under recursion. */
struct site *report_collect_sites(const struct report *r,
				  const struct labels *lb,
				  const struct report_opts *o, long *wrapper)
{
	struct site *v = malloc((lb->names.n ? lb->names.n : 1) * sizeof(*v));
	unsigned char *wrap;
	size_t i;

	if (!v || labels_wrappers(r, lb, o->wrappers, &wrap)) {
		free(v);
		return NULL;
	}
	for (i = 0; i < lb->names.n; i++)
		v[i] = (struct site){ .stamp = SIZE_MAX };
	for (i = 0; i < r->nsamples; i++) {
		const struct report_sample *smp = &r->samples[i];
		double val = report_value(o, smp->bytes, smp->objs);
		uint32_t k, passed, at;

		at = sample_site(lb, wrap, smp, &passed);
		v[at].flat += val;
		v[at].var += report_value(o, smp->var_bytes, smp->var_objs);
		/* one of them, for the note: the leaf's innermost frame */
		if (passed && *wrapper < 0)
			*wrapper = (long)lb->ids[lb->first[smp->locs[0] + 1] -
						 1];
		for (k = 0; k < smp->n; k++) {
			uint32_t li = smp->locs[k];
			const uint32_t *ids = lb->ids + lb->first[li];
			size_t nf = lb->first[li + 1] - lb->first[li], j;

			for (j = 0; j < nf; j++) {
				struct site *st = &v[ids[j]];

				if (st->stamp != i) {
					st->stamp = i;
					st->cum += val;
				}
			}
		}
	}
	free(wrap);
	return v;
}

static const struct site *site_v;
static const struct labels *site_lb;

/* Largest flat first, then largest cum, then by name. */
/* Largest flat first, then largest cum, then by name. */
static int cmp_site(uint32_t a, uint32_t b)
{
	const struct site *x = &site_v[a], *y = &site_v[b];
	long long fx = llabs(report_round(x->flat));
	long long fy = llabs(report_round(y->flat));
	long long cx, cy;

	if (fx != fy)
		return fx < fy ? 1 : -1;
	cx = llabs(report_round(x->cum));
	cy = llabs(report_round(y->cum));
	if (cx != cy)
		return cx < cy ? 1 : -1;
	return strcmp(site_lb->names.v[a], site_lb->names.v[b]);
}

static int cmp_site_id(const void *a, const void *b)
{
	return cmp_site(*(const uint32_t *)a, *(const uint32_t *)b);
}

/* Sift @h[@i] down the heap @h of @n sites, the one that sorts last on
 * top. */
static void heap_down(uint32_t *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		uint32_t t;

		if (l < n && cmp_site(h[l], h[m]) > 0)
			m = l;
		if (l + 1 < n && cmp_site(h[l + 1], h[m]) > 0)
			m = l + 1;
		if (m == i)
			return;
		t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

/*
 * The rows of the text report: the sites that show a value, the first
 * @top of them (0: all) in order, into *@rows (*@nrows); *@shown is
 * how many show a value.  A heap of @top, not a sort of all the sites.
 */
static int top_sites(const struct site *v, size_t n, size_t top,
		     uint32_t **rows, size_t *nrows, size_t *shown)
{
	uint32_t *h;
	size_t i, j, cnt = 0, k = 0;

	for (i = 0; i < n; i++)
		if (report_round(v[i].flat) || report_round(v[i].cum))
			cnt++;
	if (!top || top > cnt)
		top = cnt;
	h = malloc((top ? top : 1) * sizeof(*h));
	if (!h)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		if (!report_round(v[i].flat) && !report_round(v[i].cum))
			continue;
		if (k < top) {
			h[k++] = (uint32_t)i;
			if (k == top)
				for (j = top / 2; j-- > 0;)
					heap_down(h, top, j);
		} else if (top && cmp_site((uint32_t)i, h[0]) < 0) {
			h[0] = (uint32_t)i;
			heap_down(h, top, 0);
		}
	}
	sort(h, k, sizeof(*h), cmp_site_id);
	*rows = h;
	*nrows = k;
	*shown = cnt;
	return 0;
}

int report_top_sites(const struct site *v, const struct labels *lb,
		     size_t top, uint32_t **row, size_t *rows, size_t *shown)
{
	site_v = v;
	site_lb = lb;
	return top_sites(v, lb->names.n, top, row, rows, shown);
}

bool report_sampled(const struct report *r, const struct report_opts *o)
{
	double total = report_value(o, r->total_bytes, r->total_objs);
	double var = report_variance(r, o);

	/* a total known to 0.1%: a sample period far below the sizes, as
	 * good as every allocation recorded */
	return var > 0 && (total == 0 || sqrt(var) > 0.0005 * fabs(total));
}

double report_variance(const struct report *r, const struct report_opts *o)
{
	double var = 0;
	size_t i;

	for (i = 0; i < r->nsamples; i++)
		var += report_value(o, r->samples[i].var_bytes,
				    r->samples[i].var_objs);
	return fabs(var);
}

/* The half-width of @v's 95% interval, as a share of @v: "±12%", or
 * blanks when it is exact. */
void report_put_error(FILE *f, double v, double var)
{
	double lo, hi, w;

	profile_interval(v, var, &lo, &hi);
	w = fabs(v) > 0 ? fmax(fabs(hi - v), fabs(v - lo)) / fabs(v) : 0;
	if (!(w > 0.0005))
		fprintf(f, " %6s", "");
	else if (w < 10)
		fprintf(f, " %5.0f%%", 100 * w + 0.5 < 1 ? 1 : 100 * w);
	else
		fprintf(f, " %6s", ">999%");
}

/* log2 of an eighth of @period, for jemalloc's lg_prof_sample (at
 * least 10). */
static unsigned int lg_eighth(uint64_t period)
{
	unsigned int lg = 0;

	while (lg < 63 && (2ull << lg) <= period / 8)
		lg++;
	return lg < 10 ? 10 : lg;
}

/*
 * Where the sites shown are too close for their sampling error: the
 * first of @rows whose 95% interval overlaps the next one's, said once
 * with what would tell them apart.
 */
void report_put_ranking_note(FILE *f, const struct report *r,
			     const struct site *v, const struct labels *lb,
			     const uint32_t *row, size_t rows)
{
	double lo0, hi0, lo1, hi1;
	size_t i;

	for (i = 0; i + 1 < rows && i < 5; i++) {
		profile_interval(v[row[i]].flat, v[row[i]].var, &lo0, &hi0);
		profile_interval(v[row[i + 1]].flat, v[row[i + 1]].var, &lo1,
				 &hi1);
		if (v[row[i + 1]].flat > 0 && lo0 <= hi1)
			break;
	}
	if (i + 1 >= rows || i >= 5)
		return;
	fputs("(± is the 95% sampling error of flat; ", f);
	write_clean(lb->names.v[row[i]], f);
	fputs(" and ", f);
	write_clean(lb->names.v[row[i + 1]], f);
	fprintf(f, " are within it of each other, so their order may be "
		"chance: a sample period smaller than %llu bytes tells them "
		"apart (memsnap's sampler: prof on --sampler --sample-bytes "
		"%lluK; jemalloc's: prof reset --lg-sample %u))\n",
		(unsigned long long)r->prof->period,
		(unsigned long long)(r->prof->period / 8 >= 1024
					     ? r->prof->period / 8 / 1024
					     : 1),
		lg_eighth(r->prof->period));
}

/* The sites of @r, the @top largest (0: all), for a table of them. */
struct shown {
	struct labels lb;
	struct site *v;
	uint32_t *row;
	size_t rows;
};

static int shown_open(const struct report *r, const struct report_opts *o,
		      size_t top, struct shown *t)
{
	long wrapper = -1;
	size_t all;
	int rc = labels_build(r, o->lines, false, &t->lb);

	t->v = NULL;
	t->row = NULL;
	if (rc)
		return rc;
	t->v = report_collect_sites(r, &t->lb, o, &wrapper);
	rc = t->v ? report_top_sites(t->v, &t->lb, top, &t->row, &t->rows,
				     &all)
		  : -ENOMEM;
	if (rc) {
		free(t->v);
		labels_free(&t->lb);
	}
	return rc;
}

static void shown_close(struct shown *t)
{
	free(t->row);
	free(t->v);
	labels_free(&t->lb);
}

int report_sites_json(const struct report *r, const struct report_opts *o,
		      struct json *j)
{
	struct shown t;
	double lo, hi;
	size_t i;
	int rc = shown_open(r, o, o->top, &t);

	if (rc)
		return rc;
	json_array_begin(j, "sites");
	for (i = 0; i < t.rows; i++) {
		const struct site *st = &t.v[t.row[i]];

		profile_interval(st->flat, st->var, &lo, &hi);
		json_object_begin(j, NULL);
		json_string(j, "name", t.lb.names.v[t.row[i]]);
		json_i64(j, "flat", report_round(st->flat));
		json_i64(j, "cum", report_round(st->cum));
		json_i64(j, "flat_low_95", report_round(lo));
		json_i64(j, "flat_high_95", report_round(hi));
		json_object_end(j);
	}
	json_array_end(j);
	shown_close(&t);
	return 0;
}

int report_sites_html(const struct report *r, const struct report_opts *o,
		      FILE *f)
{
	struct shown t;
	double lo, hi;
	size_t i;
	int rc = shown_open(r, o, 10, &t);

	if (rc)
		return rc;
	profile_interval(report_value(o, r->total_bytes, r->total_objs),
			 report_variance(r, o), &lo, &hi);
	fprintf(f, "<p class=\"sub\" id=\"sampling-error\">Sampled: each "
		"figure is an estimate; the total is within %lld to %lld "
		"(95%%).</p>\n<table id=\"sites\"><tr><th>allocated at</th>"
		"<th>%s</th><th>95%% within</th></tr>\n", report_round(lo),
		report_round(hi), o->objects ? "objects" : "bytes");
	for (i = 0; i < t.rows; i++) {
		const struct site *st = &t.v[t.row[i]];

		if (st->flat == 0)
			continue;
		profile_interval(st->flat, st->var, &lo, &hi);
		fputs("<tr><td>", f);
		xml_text(f, t.lb.names.v[t.row[i]], 400);
		fprintf(f, "</td><td>%lld</td><td>%lld to %lld</td></tr>\n",
			report_round(st->flat), report_round(lo),
			report_round(hi));
	}
	fputs("</table>\n", f);
	shown_close(&t);
	return 0;
}
