/* The json, svg and html exporters; text and folded are in report.c. */
#include "profile/report.h"
#include "profile/report_internal.h"

#include "common/html.h"
#include "common/json.h"
#include "common/util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct report_opts *sort_opts;
static const struct report *sort_r;
static const struct labels *sort_lb;

static int cmp_merged_value(const void *a, const void *b)
{
	const struct merged *x = a, *y = b;
	long long vx = llabs(report_round(report_value(sort_opts, x->bytes, x->objs)));
	long long vy = llabs(report_round(report_value(sort_opts, y->bytes, y->objs)));

	if (vx != vy)
		return vx < vy ? 1 : -1;
	return key_cmp(sort_r, sort_lb, x->sample, y->sample);
}

/* The modules of the two symbolizers, read once. */
struct mods {
	const struct dwsym_module *v, *bv;
	size_t n, bn;
};

static void json_frames(struct json *j, const struct report *r,
			const struct mods *md,
			const struct report_sample *smp)
{
	uint32_t k;

	json_array_begin(j, "frames");
	for (k = 0; k < smp->n; k++) {
		const struct report_loc *rl = &r->locs[smp->locs[k]];
		const struct dwsym_loc *l = rl->sym;
		bool base = rl->symbolizer != r->sym;
		const struct dwsym_module *mods = base ? md->bv : md->v;
		size_t nm = base ? md->bn : md->n;
		unsigned int i;

		for (i = 0; i < l->nframes; i++) {
			const struct dwsym_frame *fr = &l->frames[i];

			json_object_begin(j, NULL);
			json_string(j, "function", fr->name);
			json_bool(j, "resolved", fr->resolved);
			json_bool(j, "inlined", fr->inlined);
			json_string(j, "file", fr->file);
			if (fr->line)
				json_u64(j, "line", fr->line);
			else
				json_null(j, "line");
			json_hex(j, "address", l->pc);
			if (l->module >= 0 && (size_t)l->module < nm)
				json_string(j, "object",
					    mods[l->module].path);
			else
				json_null(j, "object");
			json_object_end(j);
		}
	}
	json_array_end(j);
}

/* The 95% interval of the total (bytes or objects, as @o counts) where
 * the profile was sampled. */
static void put_interval(struct json *j, const struct report *r,
			 const struct report_opts *o)
{
	double lo, hi;

	profile_interval(report_value(o, r->total_bytes, r->total_objs),
			 report_variance(r, o), &lo, &hi);
	json_i64(j, "low_95", report_round(lo));
	json_i64(j, "high_95", report_round(hi));
}

int report_json(const struct report *r, const struct report_opts *o, FILE *f)
{
	const struct dwsym_module *mods;
	struct mods md = { 0 };
	unsigned char *wrap;
	struct labels lb;
	struct merged *m;
	struct json j;
	size_t n, i, nm, rows;
	double lo, hi;
	int rc = report_stacks(r, o->lines, false, &lb, &m, &n);

	if (rc)
		return rc;
	rc = labels_wrappers(r, &lb, o->wrappers, &wrap);
	if (rc) {
		free(m);
		labels_free(&lb);
		return rc;
	}
	sort_opts = o;
	sort_r = r;
	sort_lb = &lb;
	sort(m, n, sizeof(*m), cmp_merged_value);
	md.n = symbolizer_modules(r->sym, &md.v);
	if (r->base_sym)
		md.bn = symbolizer_modules(r->base_sym, &md.bv);
	json_init(&j, f);
	json_object_begin(&j, NULL);
	json_u64(&j, "version", 1);
	json_string(&j, "dump", o->dump_name);
	json_string(&j, "format", profile_format_name(r->prof->format));
	json_u64(&j, "sample_period", r->prof->period);
	json_string(&j, "sample", r->alloc ? "alloc" : "inuse");
	json_bool(&j, "diff", r->base != NULL);
	json_object_begin(&j, "total");
	json_i64(&j, "bytes", report_round(r->total_bytes));
	json_i64(&j, "objects", report_round(r->total_objs));
	put_interval(&j, r, o);
	json_object_end(&j);
	if (!r->base && r->prof->has_alloc) {
		json_object_begin(&j, "allocated");
		json_i64(&j, "bytes", report_round(r->prof->total_abytes));
		json_i64(&j, "objects", report_round(r->prof->total_aobjs));
		json_object_end(&j);
	}
	if (r->base) {
		json_object_begin(&j, "base_total");
		json_i64(&j, "bytes", report_round(r->base_bytes));
		json_i64(&j, "objects", report_round(r->base_objs));
		json_object_end(&j);
	}
	json_u64(&j, "dropped_allocator_frames", r->dropped);
	json_array_begin(&j, "stacks");
	rows = o->top && o->top < n ? o->top : n;
	for (i = 0; i < rows; i++) {
		long long b = report_round(m[i].bytes), ob = report_round(m[i].objs);
		const struct report_sample *smp = &r->samples[m[i].sample];
		uint32_t passed, site;

		if (!b && !ob)
			continue;
		json_object_begin(&j, NULL);
		json_i64(&j, "bytes", b);
		json_i64(&j, "objects", ob);
		profile_interval(report_value(o, m[i].bytes, m[i].objs),
				 report_value(o, m[i].var_bytes, m[i].var_objs),
				 &lo, &hi);
		json_i64(&j, "low_95", report_round(lo));
		json_i64(&j, "high_95", report_round(hi));
		site = sample_site(&lb, wrap, smp, &passed);
		json_string(&j, "site", lb.names.v[site]);
		json_u64(&j, "wrapper_frames", passed);
		json_frames(&j, r, &md, smp);
		json_object_end(&j);
	}
	json_array_end(&j);
	if (!rc)
		rc = report_sites_json(r, o, &j);
	json_array_begin(&j, "objects");
	nm = symbolizer_modules(r->sym, &mods);
	for (i = 0; i < nm; i++) {
		if (!mods[i].used)
			continue;
		json_object_begin(&j, NULL);
		json_string(&j, "path", mods[i].path);
		json_string(&j, "build_id",
			    mods[i].build_id[0] ? mods[i].build_id : NULL);
		json_string(&j, "error",
			    mods[i].err ? strerror(-mods[i].err) : NULL);
		json_bool(&j, "debuginfo", mods[i].debuginfo);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_object_end(&j);
	json_finish(&j);
	free(wrap);
	free(m);
	labels_free(&lb);
	return ferror(f) ? -EIO : 0;
}

/* ---- svg flame graph ------------------------------------------------------- */

/*
 * Drawn in one pass over the stacks in tree order (key_cmp_tree()): the
 * stacks under one frame follow each other, so each frame's box is
 * complete, and written, when the next stack leaves it.  Only the
 * current path is kept, never the tree.
 */

#define SVG_WIDTH 1200.0
#define SVG_ROW 17
#define SVG_MAX_DEPTH 512


static unsigned int name_hash(const char *s)
{
	unsigned int h = 2166136261u;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h;
}

struct svg {
	FILE *f;
	double total;
	int maxdepth;
	const char *unit;
};

/* One box: @x and @value in the unit, @depth 0 for the root. */
static void svg_box(const struct svg *g, const char *name, double x,
		    double value, int depth)
{
	double w = value / g->total * SVG_WIDTH;
	unsigned int h = name_hash(name);
	FILE *f = g->f;

	if (w < 0.1)
		return;
	x = x / g->total * SVG_WIDTH;
	fprintf(f, "<g><title>");
	xml_text(f, name, 4096);
	fprintf(f, " (%lld %s, %.2f%%)</title>", report_round(value), g->unit,
		100.0 * value / g->total);
	fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
		"fill=\"rgb(%u,%u,%u)\" rx=\"2\"/>",
		x, (g->maxdepth - depth) * SVG_ROW + 30, w, SVG_ROW - 1,
		200 + h % 56, 80 + (h >> 8) % 120, 40 + (h >> 16) % 40);
	if (w > 20) {
		fprintf(f, "<text x=\"%.1f\" y=\"%d\">", x + 3,
			(g->maxdepth - depth) * SVG_ROW + 30 + 12);
		xml_text(f, name, (size_t)((w - 6) / 7));
		fputs("</text>", f);
	}
	fputs("</g>\n", f);
}

/* A frame on the current path. */
struct open_box {
	uint32_t id;
	double x, value;
};

static int cmp_merged_tree(const void *a, const void *b)
{
	return key_cmp_tree(sort_r, sort_lb, ((const struct merged *)a)->sample,
			    ((const struct merged *)b)->sample);
}

int report_svg(const struct report *r, const struct report_opts *o, FILE *f)
{
	struct svg g = { .f = f, .unit = o->objects ? "objects" : "bytes" };
	struct open_box *path = NULL;
	struct labels lb;
	struct merged *m;
	size_t n, i, k = 0;
	int rc, depth = 0, npath = 0;
	double x = 0;

	rc = report_stacks(r, o->lines, true, &lb, &m, &n);
	if (rc)
		return rc;
	path = malloc(SVG_MAX_DEPTH * sizeof(*path));
	if (!path) {
		rc = -ENOMEM;
		goto out;
	}
	/* a difference shows growth only */
	for (i = 0; i < n; i++) {
		double v = report_value(o, m[i].bytes, m[i].objs);
		struct keycur c;
		uint32_t id;
		int d = 0;

		if (!(v > 0))
			continue;
		m[k++] = m[i];
		g.total += v;
		keycur_init(&c, r, &lb, &r->samples[m[i].sample]);
		while (d < SVG_MAX_DEPTH && keycur_next(&c, &id))
			d++;
		if (d > depth)
			depth = d;
	}
	n = k;
	sort_r = r;
	sort_lb = &lb;
	sort(m, n, sizeof(*m), cmp_merged_tree);
	/* the root's row, then one per frame */
	depth++;
	g.maxdepth = depth - 1;
	fprintf(f, "<?xml version=\"1.0\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" "
		"width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n"
		"<style>text{font:12px monospace;fill:#000}"
		"rect:hover{stroke:#000}</style>\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"#f8f8f0\"/>\n"
		"<text x=\"10\" y=\"20\">",
		(int)SVG_WIDTH, depth * SVG_ROW + 40, (int)SVG_WIDTH,
		depth * SVG_ROW + 40);
	xml_text(f, o->dump_name ? o->dump_name : "heap profile", 200);
	fprintf(f, ": %lld %s%s (hover for values)</text>\n",
		report_round(g.total), g.unit, r->base ? " of growth" : "");
	if (g.total > 0)
		svg_box(&g, "all", 0, g.total, 0);
	for (i = 0; i < n && g.total > 0; i++) {
		double v = report_value(o, m[i].bytes, m[i].objs);
		struct keycur c;
		uint32_t id;
		bool more;
		int d = 0, e;

		keycur_init(&c, r, &lb, &r->samples[m[i].sample]);
		/* the frames this stack shares with the path stay open */
		while ((more = d < SVG_MAX_DEPTH && keycur_next(&c, &id)) &&
		       d < npath && path[d].id == id)
			d++;
		for (e = npath; e-- > d;)
			svg_box(&g, lb.names.v[path[e].id], path[e].x,
				path[e].value, e + 1);
		npath = d;
		while (more) {
			path[npath++] = (struct open_box){ .id = id, .x = x };
			more = npath < SVG_MAX_DEPTH && keycur_next(&c, &id);
		}
		for (e = 0; e < npath; e++)
			path[e].value += v;
		x += v;
	}
	while (npath-- > 0)
		svg_box(&g, lb.names.v[path[npath].id], path[npath].x,
			path[npath].value, npath + 1);
	fputs("</svg>\n", f);
out:
	free(path);
	free(m);
	labels_free(&lb);
	if (!rc && ferror(f))
		rc = -EIO;
	return rc;
}

/* ---- html: the flame graph, drawn by the page ----------------------------- */

int report_html(const struct report *r, const struct report_opts *o, FILE *f)
{
	const char *name = o->dump_name ? o->dump_name : "heap profile";
	const char *unit = o->objects ? "objects" : "bytes";
	uint32_t *ids = malloc(SVG_MAX_DEPTH * sizeof(*ids));
	unsigned char *wrap = NULL;
	struct labels lb;
	struct merged *m;
	size_t n, i;
	int rc, first = 1;
	double pos = 0;

	if (!ids)
		return -ENOMEM;
	rc = report_stacks(r, o->lines, false, &lb, &m, &n);
	if (!rc && (rc = labels_wrappers(r, &lb, o->wrappers, &wrap))) {
		free(m);
		labels_free(&lb);
	}
	if (rc) {
		free(ids);
		return rc;
	}
	for (i = 0; i < n; i++) {
		double v = report_value(o, m[i].bytes, m[i].objs);

		if (v > 0)
			pos += v;
	}
	html_begin(f, name);
	fputs("<h1>", f);
	xml_text(f, name, 400);
	fprintf(f, "</h1>\n<p class=\"sub\">A heap profile in %s, one sample "
		"every %llu bytes on average; %zu stacks</p>\n"
		"<p class=\"verdict\">",
		profile_format_label(r->prof->format),
		(unsigned long long)r->prof->period, n);
	if (r->base)
		fprintf(f, "%lld %s more than the base (%lld %s); the stacks "
			"that grew hold %lld %s of growth", report_round(
			o->objects ? r->total_objs : r->total_bytes), unit,
			report_round(o->objects ? r->base_objs : r->base_bytes),
			unit, report_round(pos), unit);
	else
		fprintf(f, "%lld %s %s", report_round(pos), unit,
			r->alloc ? "allocated since profiling began, freed "
				   "or not" : "in use");
	fputs("</p>\n", f);
	if (report_sampled(r, o) && (rc = report_sites_html(r, o, f))) {
		free(wrap);
		free(ids);
		free(m);
		labels_free(&lb);
		return rc;
	}
	html_flame_section(f, r->base ? "What grew since the base"
			      : r->alloc ? "Where the bytes were allocated "
					   "(freed or not)"
					 : "Where the bytes in use were allocated");
	html_flame_begin(f, unit, name);
	for (i = 0, first = 1; wrap && i < lb.names.n; i++)
		if (wrap[i]) {
			fprintf(f, "%s%zu", first ? "" : ",", i);
			first = 0;
		}
	first = 1;
	html_flame_names(f);
	for (i = 0; i < lb.names.n; i++) {
		if (i)
			fputc(',', f);
		html_js_string(f, lb.names.v[i], 4096);
	}
	html_flame_stacks(f);
	for (i = 0; i < n; i++) {
		double v = report_value(o, m[i].bytes, m[i].objs);
		struct keycur c;
		size_t d = 0;
		uint32_t id;

		if (!(v > 0))
			continue;
		keycur_init(&c, r, &lb, &r->samples[m[i].sample]);
		while (d < SVG_MAX_DEPTH && keycur_next(&c, &id))
			ids[d++] = id;
		html_flame_stack(f, v, ids, d, &first);
	}
	html_flame_finish(f);
	html_end(f);
	free(wrap);
	free(ids);
	free(m);
	labels_free(&lb);
	return ferror(f) ? -EIO : 0;
}
