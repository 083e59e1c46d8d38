#include "profile/report.h"
#include "profile/report_internal.h"

#include "common/util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- small containers ---------------------------------------------------- */

static uint64_t hash_bytes(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

static int strmap_grow(struct strmap *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 256, i;
	char **nk = calloc(ncap, sizeof(*nk));
	size_t *nv = calloc(ncap, sizeof(*nv));

	if (!nk || !nv) {
		free(nk);
		free(nv);
		return -ENOMEM;
	}
	for (i = 0; i < m->cap; i++) {
		size_t j;

		if (!m->keys[i])
			continue;
		j = hash_bytes(m->keys[i]) & (ncap - 1);
		while (nk[j])
			j = (j + 1) & (ncap - 1);
		nk[j] = m->keys[i];
		nv[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = nk;
	m->vals = nv;
	m->cap = ncap;
	return 0;
}

int strmap_get(struct strmap *m, const char *key, size_t next, size_t *val,
	       bool *added)
{
	size_t j;

	*added = false;
	if ((m->n + 1) * 2 > m->cap && strmap_grow(m))
		return -ENOMEM;
	j = hash_bytes(key) & (m->cap - 1);
	while (m->keys[j]) {
		if (!strcmp(m->keys[j], key)) {
			*val = m->vals[j];
			return 0;
		}
		j = (j + 1) & (m->cap - 1);
	}
	m->keys[j] = strdup(key);
	if (!m->keys[j])
		return -ENOMEM;
	m->vals[j] = next;
	m->n++;
	*val = next;
	*added = true;
	return 0;
}

void strmap_free(struct strmap *m)
{
	size_t i;

	for (i = 0; i < m->cap; i++)
		free(m->keys[i]);
	free(m->keys);
	free(m->vals);
	*m = (struct strmap){ 0 };
}

int sbuf_add(struct sbuf *b, const char *s)
{
	size_t n = strlen(s);

	if (array_grow((void **)&b->s, &b->cap, b->len + n + 1, 1))
		return -ENOMEM;
	memcpy(b->s + b->len, s, n + 1);
	b->len += n;
	return 0;
}

int sbuf_addf(struct sbuf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	return sbuf_add(b, tmp);
}

int frame_label(struct sbuf *b, const struct dwsym_frame *fr, bool lines)
{
	int rc = sbuf_add(b, fr->name);

	if (!rc && lines && fr->file) {
		const char *base = strrchr(fr->file, '/');

		rc = sbuf_addf(b, " %s:%u", base ? base + 1 : fr->file,
			       fr->line);
	}
	return rc;
}

/* ---- allocator frames ---------------------------------------------------- */

static const char *const alloc_entries[] = {
	"malloc", "calloc", "realloc", "free", "reallocarray", "cfree",
	"posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc",
	"mallocx", "rallocx", "xallocx", "nallocx", "dallocx", "sdallocx",
	"sdallocx_noflags", "new", "newarray", "new_nothrow",
	"newarray_nothrow",
};

static const char *const alloc_prefixes[] = {
	"je_", "_rjem_", "tc_", "mi_", "__libc_",
};

bool report_is_alloc_entry(const char *name)
{
	size_t i, len;

	if (!strncmp(name, "operator new", 12) || strstr(name, "newImpl"))
		return true;
	for (i = 0; i < ARRAY_SIZE(alloc_prefixes); i++) {
		len = strlen(alloc_prefixes[i]);
		if (!strncmp(name, alloc_prefixes[i], len)) {
			name += len;
			break;
		}
	}
	/* "malloc" but also a demangled "malloc(unsigned long)" */
	len = strcspn(name, "(");
	for (i = 0; i < ARRAY_SIZE(alloc_entries); i++)
		if (strlen(alloc_entries[i]) == len &&
		    !strncmp(name, alloc_entries[i], len))
			return true;
	return false;
}

static const char *const alloc_internal[] = {
	"je_", "_rjem_", "tc_", "mi_", "__libc_malloc", "__libc_calloc",
	"__libc_realloc", "__libc_memalign",
};

/* An entry point, or a name only an allocator's internals carry. */
static bool loc_is_alloc(const struct dwsym_loc *l,
			 const struct dwsym_module *mods, size_t nmods)
{
	unsigned int i;
	size_t k;

	if (l->module >= 0 && (size_t)l->module < nmods &&
	    mods[l->module].allocator && !mods[l->module].executable)
		return true;
	for (i = 0; i < l->nframes; i++) {
		if (!l->frames[i].resolved)
			continue;
		if (report_is_alloc_entry(l->frames[i].name))
			return true;
		for (k = 0; k < ARRAY_SIZE(alloc_internal); k++)
			if (!strncmp(l->frames[i].name, alloc_internal[k],
				     strlen(alloc_internal[k])))
				return true;
	}
	return false;
}

/*
 * How many leaf locations belong to the allocator.  Entry points are
 * often tail calls (malloc jumps to its slow path), so names alone do
 * not end the allocator's part: a location in an allocator library (one
 * that defines mallctl and kin, tc_malloc or mi_malloc) or named like
 * the allocator's internals (je_..., an entry point) is the allocator's;
 * the leading run stays in the leaf's object or in allocator locations,
 * and the cut is after the last allocator location in that run.  For an
 * allocator linked into the program the run walks through the program's
 * own frames, but only allocator names move the cut.
 */
static uint32_t alloc_cut(const struct dwsym_loc *const *l, uint32_t n,
			  const struct dwsym_module *mods, size_t nmods)
{
	uint32_t i, cut = 0;

	for (i = 0; i < n && i < 64; i++) {
		if (loc_is_alloc(l[i], mods, nmods))
			cut = i + 1;
		else if (l[i]->module != l[0]->module || l[i]->module < 0)
			break;
	}
	if (cut >= n)
		cut = n - 1;	/* keep at least the entry point */
	return cut;
}

/* ---- building ------------------------------------------------------------ */

struct ptrmap {
	const void **keys;
	uint32_t *vals;
	size_t cap, n;
};

static uint64_t hash_ptr(const void *p)
{
	uint64_t x = (uint64_t)(uintptr_t)p;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static int ptrmap_grow(struct ptrmap *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 1024, i;
	const void **nk = calloc(ncap, sizeof(*nk));
	uint32_t *nv = calloc(ncap, sizeof(*nv));

	if (!nk || !nv) {
		free(nk);
		free(nv);
		return -ENOMEM;
	}
	for (i = 0; i < m->cap; i++) {
		size_t j;

		if (!m->keys[i])
			continue;
		j = hash_ptr(m->keys[i]) & (ncap - 1);
		while (nk[j])
			j = (j + 1) & (ncap - 1);
		nk[j] = m->keys[i];
		nv[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = nk;
	m->vals = nv;
	m->cap = ncap;
	return 0;
}

static int loc_index(struct report *r, const struct dwsym_loc *l,
		     struct symbolizer *s, uint32_t *out)
{
	struct ptrmap *m = r->locmap;
	size_t j;

	if ((m->n + 1) * 2 > m->cap && ptrmap_grow(m))
		return -ENOMEM;
	j = hash_ptr(l) & (m->cap - 1);
	while (m->keys[j]) {
		if (m->keys[j] == l) {
			*out = m->vals[j];
			return 0;
		}
		j = (j + 1) & (m->cap - 1);
	}
	if (r->nlocs >= UINT32_MAX ||
	    array_grow((void **)&r->locs, &r->locs_cap, r->nlocs + 1,
		       sizeof(*r->locs)))
		return -ENOMEM;
	r->locs[r->nlocs] = (struct report_loc){ .sym = l, .symbolizer = s };
	m->keys[j] = l;
	m->vals[j] = (uint32_t)r->nlocs;
	m->n++;
	*out = (uint32_t)r->nlocs++;
	return 0;
}

static int add_profile(struct report *r, const struct profile *p,
		       struct symbolizer *s, double sign)
{
	const struct dwsym_loc *ls[PROFILE_MAX_DEPTH];
	const struct dwsym_module *mods;
	size_t i, nmods;
	uint32_t k, cut;
	int rc;

	for (i = 0; i < p->n; i++) {
		const struct profile_stack *st = &p->v[i];
		struct report_sample *smp;
		size_t start;

		if (!st->depth || st->depth > PROFILE_MAX_DEPTH)
			continue;
		for (k = 0; k < st->depth; k++) {
			/* all return addresses; jemalloc's leaf is its own
			 * and dropped, and jeprof reads it exact */
			rc = symbolizer_lookup(
				s, st->pcs[k],
				k > 0 || p->format == PROFILE_GPERFTOOLS,
				&ls[k]);
			if (rc)
				return rc;
		}
		nmods = symbolizer_modules(s, &mods);
		cut = alloc_cut(ls, st->depth, mods, nmods);
		r->dropped += cut;
		if (p == r->prof)
			r->cuts[i] = cut;
		if (array_grow((void **)&r->pool, &r->pool_cap,
			       r->pool_n + st->depth - cut,
			       sizeof(*r->pool)))
			return -ENOMEM;
		start = r->pool_n;
		for (k = cut; k < st->depth; k++) {
			rc = loc_index(r, ls[k], s, &r->pool[r->pool_n]);
			if (rc)
				return rc;
			r->pool_n++;
		}
		if (array_grow((void **)&r->samples, &r->samples_cap,
			       r->nsamples + 1, sizeof(*r->samples)))
			return -ENOMEM;
		smp = &r->samples[r->nsamples++];
		/* pool offset for now; pointers once the pool stops moving */
		smp->locs = (const uint32_t *)(uintptr_t)start;
		smp->n = st->depth - cut;
		smp->bytes = sign * st->ubytes;
		smp->objs = sign * st->uobjs;
	}
	return 0;
}

int report_build(const struct profile *prof, struct symbolizer *sym,
		 const struct profile *base, struct symbolizer *base_sym,
		 struct report **out)
{
	struct report *r = calloc(1, sizeof(*r));
	size_t i;
	int rc;

	if (!r)
		return -ENOMEM;
	r->locmap = calloc(1, sizeof(struct ptrmap));
	if (!r->locmap) {
		free(r);
		return -ENOMEM;
	}
	r->cuts = calloc(prof->n ? prof->n : 1, sizeof(*r->cuts));
	if (!r->cuts) {
		free(r->locmap);
		free(r);
		return -ENOMEM;
	}
	r->prof = prof;
	r->sym = sym;
	r->base = base;
	r->base_sym = base_sym;
	rc = add_profile(r, prof, sym, 1.0);
	if (!rc && base)
		rc = add_profile(r, base, base_sym, -1.0);
	if (rc) {
		report_free(r);
		return rc;
	}
	for (i = 0; i < r->nsamples; i++)
		r->samples[i].locs = r->pool + (uintptr_t)r->samples[i].locs;
	r->total_bytes = prof->total_bytes;
	r->total_objs = prof->total_objs;
	if (base) {
		r->base_bytes = base->total_bytes;
		r->base_objs = base->total_objs;
		r->total_bytes -= base->total_bytes;
		r->total_objs -= base->total_objs;
	}
	*out = r;
	return 0;
}

void report_free(struct report *r)
{
	struct ptrmap *m;

	if (!r)
		return;
	m = r->locmap;
	if (m) {
		free(m->keys);
		free(m->vals);
		free(m);
	}
	free(r->cuts);
	free(r->locs);
	free(r->samples);
	free(r->pool);
	free(r);
}

/* ---- merged stacks --------------------------------------------------------- */

void merged_free(struct merged *m, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(m[i].key);
	free(m);
}

/* Flame graph tools split on ';' and the count after the last space. */
static void clean_label(char *s)
{
	for (; *s; s++)
		if (*s == ';' || *s == '\n' || *s == '\r')
			*s = '_';
}

static int stack_key(const struct report *r, const struct report_sample *smp,
		     bool lines, struct sbuf *b)
{
	uint32_t i;
	int rc = 0;

	b->len = 0;
	if (b->s)
		b->s[0] = '\0';
	/* root first: outermost location, outermost inline frame */
	for (i = smp->n; i-- > 0 && !rc;) {
		const struct dwsym_loc *l = r->locs[smp->locs[i]].sym;
		unsigned int k;

		for (k = l->nframes; k-- > 0 && !rc;) {
			struct sbuf one = { 0 };

			rc = frame_label(&one, &l->frames[k], lines);
			if (!rc) {
				clean_label(one.s);
				if (b->len)
					rc = sbuf_add(b, ";");
				if (!rc)
					rc = sbuf_add(b, one.s);
			}
			free(one.s);
		}
	}
	return rc;
}

int report_merge(const struct report *r, bool lines, struct merged **out,
		 size_t *n)
{
	struct strmap map = { 0 };
	struct sbuf b = { 0 };
	struct merged *v = NULL;
	size_t cap = 0, cnt = 0, i, idx;
	bool added;
	int rc = 0;

	for (i = 0; i < r->nsamples && !rc; i++) {
		rc = stack_key(r, &r->samples[i], lines, &b);
		if (rc)
			break;
		rc = strmap_get(&map, b.s ? b.s : "", cnt, &idx, &added);
		if (rc)
			break;
		if (added) {
			if (array_grow((void **)&v, &cap, cnt + 1,
				       sizeof(*v))) {
				rc = -ENOMEM;
				break;
			}
			v[cnt] = (struct merged){ .key = strdup(b.s ? b.s : ""),
						  .sample = i };
			if (!v[cnt].key) {
				rc = -ENOMEM;
				break;
			}
			cnt++;
		}
		v[idx].bytes += r->samples[i].bytes;
		v[idx].objs += r->samples[i].objs;
	}
	free(b.s);
	strmap_free(&map);
	if (rc) {
		merged_free(v, cnt);
		return rc;
	}
	*out = v;
	*n = cnt;
	return 0;
}

/* ---- text ------------------------------------------------------------------ */

struct site {
	const char *label;	/* owned by the strmap key copy below */
	double flat_b, flat_o, cum_b, cum_o;
	size_t stamp;		/* last sample that counted it in cum */
};

struct sites {
	struct site *v;
	size_t n, cap;
	struct strmap map;
};

static void sites_free(struct sites *s)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		free((char *)s->v[i].label);
	free(s->v);
	strmap_free(&s->map);
}

static int site_of(struct sites *s, const char *label, struct site **out)
{
	size_t idx;
	bool added;
	int rc = strmap_get(&s->map, label, s->n, &idx, &added);

	if (rc)
		return rc;
	if (added) {
		if (array_grow((void **)&s->v, &s->cap, s->n + 1,
			       sizeof(*s->v)))
			return -ENOMEM;
		s->v[s->n] = (struct site){ .label = strdup(label),
					    .stamp = SIZE_MAX };
		if (!s->v[s->n].label)
			return -ENOMEM;
		s->n++;
	}
	*out = &s->v[idx];
	return 0;
}

/* Flat goes to the innermost frame of the leaf; cum to every frame of the
 * stack, once per stack even under recursion. */
static int collect_sites(const struct report *r, bool lines, struct sites *s)
{
	struct sbuf b = { 0 };
	size_t i;
	int rc = 0;

	for (i = 0; i < r->nsamples && !rc; i++) {
		const struct report_sample *smp = &r->samples[i];
		uint32_t k;

		for (k = 0; k < smp->n && !rc; k++) {
			const struct dwsym_loc *l = r->locs[smp->locs[k]].sym;
			unsigned int j;

			for (j = 0; j < l->nframes && !rc; j++) {
				struct site *st;

				b.len = 0;
				rc = frame_label(&b, &l->frames[j], lines);
				if (!rc)
					rc = site_of(s, b.s, &st);
				if (rc)
					break;
				if (k == 0 && j == 0) {
					st->flat_b += smp->bytes;
					st->flat_o += smp->objs;
				}
				if (st->stamp != i) {
					st->stamp = i;
					st->cum_b += smp->bytes;
					st->cum_o += smp->objs;
				}
			}
		}
	}
	free(b.s);
	return rc;
}

static const struct report_opts *sort_opts;

static int cmp_site(const void *a, const void *b)
{
	const struct site *x = a, *y = b;
	double fx = fabs(report_value(sort_opts, x->flat_b, x->flat_o));
	double fy = fabs(report_value(sort_opts, y->flat_b, y->flat_o));
	double cx = fabs(report_value(sort_opts, x->cum_b, x->cum_o));
	double cy = fabs(report_value(sort_opts, y->cum_b, y->cum_o));

	if (report_round(fx) != report_round(fy))
		return report_round(fx) < report_round(fy) ? 1 : -1;
	if (report_round(cx) != report_round(cy))
		return report_round(cx) < report_round(cy) ? 1 : -1;
	return strcmp(x->label, y->label);
}

static double pct(double v, double total)
{
	return total != 0.0 ? 100.0 * v / total : 0.0;
}

int report_text(const struct report *r, const struct report_opts *o, FILE *f)
{
	struct sites s = { 0 };
	const char *unit = o->objects ? "objects" : "bytes";
	bool diff = r->base != NULL;
	double total = report_value(o, r->total_bytes, r->total_objs);
	double denom, sum = 0;
	size_t i, rows;
	int rc;

	rc = collect_sites(r, o->lines, &s);
	if (rc) {
		sites_free(&s);
		return rc;
	}
	sort_opts = o;
	sort(s.v, s.n, sizeof(*s.v), cmp_site);
	/* drop rows that round to nothing */
	while (s.n && report_round(report_value(o, s.v[s.n - 1].flat_b,
					   s.v[s.n - 1].flat_o)) == 0 &&
	       report_round(report_value(o, s.v[s.n - 1].cum_b,
				    s.v[s.n - 1].cum_o)) == 0) {
		free((char *)s.v[s.n - 1].label);
		s.n--;
	}
	if (diff) {
		denom = report_value(o, r->base_bytes, r->base_objs);
		fprintf(f, "Total: %+lld %s (%lld -> %lld), %+.1f%% of base\n",
			report_round(total), unit, report_round(denom),
			report_round(denom + total), pct(total, denom));
	} else {
		denom = total;
		fprintf(f, "Total: %lld bytes in %lld objects\n",
			report_round(r->total_bytes), report_round(r->total_objs));
	}
	if (r->prof->period)
		fprintf(f, "Profile: %s, sampled every %llu bytes on average, "
			"unsampled per stack\n",
			profile_format_name(r->prof->format),
			(unsigned long long)r->prof->period);
	else
		fprintf(f, "Profile: %s, every allocation recorded\n",
			profile_format_name(r->prof->format));
	fprintf(f, "%12s %6s %6s %12s %6s  %s (%s)\n", "flat", "flat%",
		"sum%", "cum", "cum%", diff ? "growth at" : "allocated at",
		unit);
	rows = o->top && o->top < s.n ? o->top : s.n;
	for (i = 0; i < rows; i++) {
		double fl = report_value(o, s.v[i].flat_b, s.v[i].flat_o);
		double cu = report_value(o, s.v[i].cum_b, s.v[i].cum_o);

		sum += fl;
		fprintf(f, diff ? "%+12lld %5.1f%% %5.1f%% %+12lld %5.1f%%  "
				: "%12lld %5.1f%% %5.1f%% %12lld %5.1f%%  ",
			report_round(fl), pct(fl, denom), pct(sum, denom),
			report_round(cu), pct(cu, denom));
		/* names come from the dump: never raw to a terminal */
		fputs_clean(s.v[i].label, f);
		fputc('\n', f);
	}
	if (rows < s.n)
		fprintf(f, "(%zu more; --top 0 shows all)\n", s.n - rows);
	sites_free(&s);
	return ferror(f) ? -EIO : 0;
}

/* ---- folded ---------------------------------------------------------------- */

static int cmp_merged_key(const void *a, const void *b)
{
	return strcmp(((const struct merged *)a)->key,
		      ((const struct merged *)b)->key);
}

int report_folded(const struct report *r, const struct report_opts *o,
		  FILE *f)
{
	struct merged *m;
	size_t n, i;
	int rc = report_merge(r, o->lines, &m, &n);

	if (rc)
		return rc;
	sort(m, n, sizeof(*m), cmp_merged_key);
	for (i = 0; i < n; i++) {
		long long v = report_round(report_value(o, m[i].bytes, m[i].objs));

		if (v) {
			fputs_clean(m[i].key, f);
			fprintf(f, " %lld\n", v);
		}
	}
	merged_free(m, n);
	return ferror(f) ? -EIO : 0;
}
