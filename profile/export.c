/* The json and svg exporters; text and folded are in report.c. */
#include "profile/report.h"
#include "profile/report_internal.h"

#include "common/json.h"
#include "common/util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct report_opts *sort_opts;

static int cmp_merged_value(const void *a, const void *b)
{
	const struct merged *x = a, *y = b;
	long long vx = llabs(report_round(report_value(sort_opts, x->bytes, x->objs)));
	long long vy = llabs(report_round(report_value(sort_opts, y->bytes, y->objs)));

	if (vx != vy)
		return vx < vy ? 1 : -1;
	return strcmp(x->key, y->key);
}

static void json_frames(struct json *j, const struct report *r,
			const struct report_sample *smp)
{
	const struct dwsym_module *mods;
	uint32_t k;

	json_array_begin(j, "frames");
	for (k = 0; k < smp->n; k++) {
		const struct report_loc *rl = &r->locs[smp->locs[k]];
		const struct dwsym_loc *l = rl->sym;
		size_t nm = symbolizer_modules(rl->symbolizer, &mods);
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

int report_json(const struct report *r, const struct report_opts *o, FILE *f)
{
	const struct dwsym_module *mods;
	struct merged *m;
	struct json j;
	size_t n, i, nm, rows;
	int rc = report_merge(r, o->lines, &m, &n);

	if (rc)
		return rc;
	sort_opts = o;
	sort(m, n, sizeof(*m), cmp_merged_value);
	json_init(&j, f);
	json_object_begin(&j, NULL);
	json_u64(&j, "version", 1);
	json_string(&j, "dump", o->dump_name);
	json_string(&j, "format", profile_format_name(r->prof->format));
	json_u64(&j, "sample_period", r->prof->period);
	json_bool(&j, "diff", r->base != NULL);
	json_object_begin(&j, "total");
	json_i64(&j, "bytes", report_round(r->total_bytes));
	json_i64(&j, "objects", report_round(r->total_objs));
	json_object_end(&j);
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

		if (!b && !ob)
			continue;
		json_object_begin(&j, NULL);
		json_i64(&j, "bytes", b);
		json_i64(&j, "objects", ob);
		json_frames(&j, r, &r->samples[m[i].sample]);
		json_object_end(&j);
	}
	json_array_end(&j);
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
	merged_free(m, n);
	return ferror(f) ? -EIO : 0;
}

/* ---- svg flame graph ------------------------------------------------------- */

struct node {
	const char *name;	/* points into a merged key copy */
	double value;
	struct node *child, *next;
};

#define SVG_WIDTH 1200.0
#define SVG_ROW 17
#define SVG_MAX_DEPTH 512

static struct node *child_of(struct node *p, const char *name)
{
	struct node *c;

	for (c = p->child; c; c = c->next)
		if (!strcmp(c->name, name))
			return c;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->name = name;
	c->next = p->child;
	p->child = c;
	return c;
}

static void tree_free(struct node *n)
{
	while (n) {
		struct node *next = n->next;

		tree_free(n->child);
		free(n);
		n = next;
	}
}

static int tree_depth(const struct node *n)
{
	int d = 0;
	const struct node *c;

	for (c = n->child; c; c = c->next) {
		int cd = tree_depth(c);

		if (cd > d)
			d = cd;
	}
	return d + 1;
}

static void xml_text(FILE *f, const char *s, size_t max)
{
	size_t n = 0;

	for (; *s && n < max; s++, n++) {
		unsigned char c = (unsigned char)*s;
		size_t len;

		switch (c) {
		case '<': fputs("&lt;", f); continue;
		case '>': fputs("&gt;", f); continue;
		case '&': fputs("&amp;", f); continue;
		case '"': fputs("&quot;", f); continue;
		}
		if (c < 0x20 || c == 0x7f) {
			/* control bytes are not XML */
			fputc('?', f);
			continue;
		}
		/* XML is UTF-8: a byte that is not becomes U+FFFD */
		len = utf8_len((const unsigned char *)s);
		if (!len) {
			fputs("\xef\xbf\xbd", f);
			continue;
		}
		fwrite(s, 1, len, f);
		s += len - 1;
	}
	if (*s)
		fputs("..", f);
}

static unsigned int name_hash(const char *s)
{
	unsigned int h = 2166136261u;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h;
}

static void svg_node(FILE *f, const struct node *n, double x, int depth,
		     int maxdepth, double total, const char *unit)
{
	double w = n->value / total * SVG_WIDTH;
	const struct node *c;
	unsigned int h = name_hash(n->name);
	double cx = x;

	if (w < 0.1 || depth > SVG_MAX_DEPTH)
		return;
	fprintf(f, "<g><title>");
	xml_text(f, n->name, 4096);
	fprintf(f, " (%lld %s, %.2f%%)</title>", report_round(n->value), unit,
		100.0 * n->value / total);
	fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
		"fill=\"rgb(%u,%u,%u)\" rx=\"2\"/>",
		x, (maxdepth - depth) * SVG_ROW + 30, w, SVG_ROW - 1,
		200 + h % 56, 80 + (h >> 8) % 120, 40 + (h >> 16) % 40);
	if (w > 20) {
		fprintf(f, "<text x=\"%.1f\" y=\"%d\">", x + 3,
			(maxdepth - depth) * SVG_ROW + 30 + 12);
		xml_text(f, n->name, (size_t)((w - 6) / 7));
		fputs("</text>", f);
	}
	fputs("</g>\n", f);
	for (c = n->child; c; c = c->next) {
		svg_node(f, c, cx, depth + 1, maxdepth, total, unit);
		cx += c->value / total * SVG_WIDTH;
	}
}

int report_svg(const struct report *r, const struct report_opts *o, FILE *f)
{
	struct node root = { .name = "all" };
	struct merged *m;
	size_t n, i;
	int rc = report_merge(r, o->lines, &m, &n), depth;
	const char *unit = o->objects ? "objects" : "bytes";

	if (rc)
		return rc;
	sort_opts = o;
	sort(m, n, sizeof(*m), cmp_merged_value);
	for (i = 0; i < n && !rc; i++) {
		/* a difference shows growth only */
		double v = report_value(o, m[i].bytes, m[i].objs);
		struct node *cur = &root;
		char *p = m[i].key;
		int d = 0;

		if (v <= 0)
			continue;
		root.value += v;
		while (p && *p && d < SVG_MAX_DEPTH) {
			char *semi = strchr(p, ';');

			if (semi)
				*semi = '\0';
			cur = child_of(cur, p);
			if (!cur) {
				rc = -ENOMEM;
				break;
			}
			cur->value += v;
			p = semi ? semi + 1 : NULL;
			d++;
		}
	}
	if (rc)
		goto out;
	depth = tree_depth(&root);
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
		report_round(root.value), unit, r->base ? " of growth" : "");
	if (root.value > 0)
		svg_node(f, &root, 0, 0, depth - 1, root.value, unit);
	fputs("</svg>\n", f);
out:
	tree_free(root.child);
	merged_free(m, n);
	if (!rc && ferror(f))
		rc = -EIO;
	return rc;
}
