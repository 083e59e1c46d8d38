#include "profile/report.h"
#include "profile/report_internal.h"

#include "common/json.h"
#include "common/util.h"
#include "symbols/detect.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- allocator frames ---------------------------------------------------- */

bool report_is_alloc_entry(const char *name)
{
	return !strncmp(name, "operator new", 12) || strstr(name, "newImpl") ||
	       alloc_is_entry_point(name);
}

/* An entry point, or a name only an allocator's internals carry. */
static bool loc_is_alloc(const struct dwsym_loc *l,
			 const struct dwsym_module *mods, size_t nmods)
{
	unsigned int i;

	if (l->module >= 0 && (size_t)l->module < nmods &&
	    mods[l->module].allocator && !mods[l->module].executable)
		return true;
	for (i = 0; i < l->nframes; i++) {
		if (!l->frames[i].resolved)
			continue;
		if (report_is_alloc_entry(l->frames[i].name) ||
		    alloc_is_internal(l->frames[i].name))
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

static uint64_t hash_ptr(const void *p)
{
	uint64_t x = (uint64_t)(uintptr_t)p;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

/* The location map holds index + 1 into r->locs: 4 bytes a slot. */
static uint64_t loc_hash_of(const void *ctx, size_t i)
{
	return hash_ptr(((const struct report *)ctx)->locs[i].sym);
}

static int loc_index(struct report *r, const struct dwsym_loc *l,
		     struct symbolizer *s, uint32_t *out)
{
	size_t j;

	if (hidx_need(&r->locmap, r->nlocs + 1, 1024, loc_hash_of, r))
		return -ENOMEM;
	for (j = hidx_first(&r->locmap, hash_ptr(l)); r->locmap.slot[j];
	     j = hidx_next(&r->locmap, j)) {
		if (r->locs[r->locmap.slot[j] - 1].sym == l) {
			*out = r->locmap.slot[j] - 1;
			return 0;
		}
	}
	if (r->nlocs >= UINT32_MAX - 1 ||
	    array_grow((void **)&r->locs, &r->locs_cap, r->nlocs + 1,
		       sizeof(*r->locs)))
		return -ENOMEM;
	r->locs[r->nlocs] = (struct report_loc){ .sym = l, .symbolizer = s };
	r->locmap.slot[j] = (uint32_t)r->nlocs + 1;
	*out = (uint32_t)r->nlocs++;
	return 0;
}

/*
 * Where the stack really ends: nothing calls the program's entry, so
 * frames past `_start` are a frame-pointer walk that ran off the stack
 * (gperftools on arm64: "0x0", "0xffffffffffff0000", a stale "f1").
 */
static uint32_t root_end(const struct dwsym_loc *const *l, uint32_t n)
{
	uint32_t k;

	for (k = 0; k < n; k++) {
		const struct dwsym_frame *f;

		if (!l[k]->nframes)
			continue;
		f = &l[k]->frames[l[k]->nframes - 1];
		if (f->resolved && !strcmp(f->name, "_start"))
			return k + 1;
	}
	return n;
}

/*
 * @smp's sampling variance, of stack @st of @p, with the sign of the
 * profile (@sign: -1 for a base).  A live sample stays in every dump
 * until its block is freed, so the dumps of one process share most of
 * their samples: what a difference rests on are the samples one has
 * and the other not.  Summed with their signs over a stack or a site,
 * the variances leave those (for a stack of the same average size in
 * both, exactly the variance of the samples added or gone), where
 * adding them would count the shared ones twice.  Its size is the
 * variance (profile_interval()).
 */
static void set_variance(struct report_sample *smp, const struct profile *p,
			 const struct profile_stack *st, double sign)
{
	uint64_t n = p->alloc ? st->aobjs : st->objs;
	uint64_t b = p->alloc ? st->abytes : st->bytes;

	smp->var_bytes = sign * profile_variance(p->period, n, b, smp->bytes);
	smp->var_objs = sign * profile_variance(p->period, n, b, smp->objs);
}

static int add_profile(struct report *r, const struct profile *p,
		       struct symbolizer *s, double sign)
{
	const struct dwsym_loc *ls[PROFILE_MAX_DEPTH];
	const struct dwsym_module *mods;
	size_t i, nmods;
	uint32_t k, cut, end;
	int rc;

	/* what alloc_cut() reads of the modules is fixed once the
	 * symbolizer is made: one copy for all stacks */
	nmods = symbolizer_modules(s, &mods);
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
		cut = alloc_cut(ls, st->depth, mods, nmods);
		end = root_end(ls, st->depth);
		if (end <= cut)
			end = st->depth;
		r->dropped += cut;
		if (p == r->prof)
			r->cuts[i] = cut;
		if (array_grow((void **)&r->pool, &r->pool_cap,
			       r->pool_n + end - cut, sizeof(*r->pool)))
			return -ENOMEM;
		start = r->pool_n;
		for (k = cut; k < end; k++) {
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
		smp->n = end - cut;
		smp->inuse_bytes = sign * st->ubytes;
		smp->inuse_objs = sign * st->uobjs;
		smp->alloc_bytes = sign * st->uabytes;
		smp->alloc_objs = sign * st->uaobjs;
		smp->bytes = p->alloc ? smp->alloc_bytes : smp->inuse_bytes;
		smp->objs = p->alloc ? smp->alloc_objs : smp->inuse_objs;
		set_variance(smp, p, st, sign);
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
	/* the sizes are known: no array grows, none is copied */
	r->samples_cap = prof->n + (base ? base->n : 0);
	r->pool_cap = prof->pool_n + (base ? base->pool_n : 0);
	r->cuts = calloc(prof->n ? prof->n : 1, sizeof(*r->cuts));
	r->samples = malloc((r->samples_cap ? r->samples_cap : 1) *
			    sizeof(*r->samples));
	r->pool = malloc((r->pool_cap ? r->pool_cap : 1) * sizeof(*r->pool));
	if (!r->cuts || !r->samples || !r->pool) {
		report_free(r);
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
	r->alloc = prof->alloc;
	r->total_bytes = prof->alloc ? prof->total_abytes : prof->total_bytes;
	r->total_objs = prof->alloc ? prof->total_aobjs : prof->total_objs;
	if (base) {
		r->base_bytes = base->alloc ? base->total_abytes
					    : base->total_bytes;
		r->base_objs = base->alloc ? base->total_aobjs
					   : base->total_objs;
		r->total_bytes -= r->base_bytes;
		r->total_objs -= r->base_objs;
	}
	*out = r;
	return 0;
}

void report_free(struct report *r)
{
	if (!r)
		return;
	hidx_free(&r->locmap);
	free(r->cuts);
	free(r->locs);
	free(r->samples);
	free(r->pool);
	free(r);
}

/* ---- text ------------------------------------------------------------------ */

static double pct(double v, double total)
{
	return total != 0.0 ? 100.0 * v / total : 0.0;
}

/* A percentage column; "-" where there is nothing to be a part of (an
 * empty base). */
static void put_pct(FILE *f, double v, double total, bool none)
{
	if (none)
		fprintf(f, " %6s", "-");
	else
		fprintf(f, " %5.1f%%", pct(v, total));
}

int report_text(const struct report *r, const struct report_opts *o, FILE *f)
{
	struct labels lb;
	struct site *v;
	uint32_t *row;
	const char *unit = o->objects ? "objects" : "bytes";
	bool diff = r->base != NULL, none = false;
	bool sampled = report_sampled(r, o);
	double total = report_value(o, r->total_bytes, r->total_objs);
	long wrapper = -1;
	double denom, sum = 0;
	size_t i, rows, shown;
	int rc;

	rc = labels_build(r, o->lines, false, &lb);
	if (rc)
		return rc;
	v = report_collect_sites(r, &lb, o, &wrapper);
	if (!v) {
		labels_free(&lb);
		return -ENOMEM;
	}
	rc = report_top_sites(v, &lb, o->top, &row, &rows, &shown);
	if (rc) {
		free(v);
		labels_free(&lb);
		return rc;
	}
	if (diff) {
		denom = report_value(o, r->base_bytes, r->base_objs);
		/* growth from nothing is no percentage of it */
		none = denom == 0.0;
		fprintf(f, "Total: %+lld %s (%lld -> %lld), ",
			report_round(total), unit, report_round(denom),
			report_round(denom + total));
		if (none)
			fputs("base is empty\n", f);
		else
			fprintf(f, "%+.1f%% of base\n", pct(total, denom));
	} else {
		const struct profile *p = r->prof;

		denom = total;
		fprintf(f, "Total: %lld bytes in %lld objects",
			report_round(r->total_bytes), report_round(r->total_objs));
		if (r->alloc)
			fprintf(f, " allocated since profiling began, freed "
				"or not (%lld bytes in %lld objects in use)",
				report_round(p->total_bytes),
				report_round(p->total_objs));
		fputc('\n', f);
		if (!r->alloc && p->has_alloc)
			fprintf(f, "Allocated since profiling began: %lld bytes "
				"in %lld objects, freed or not (--alloc: where)"
				"\n", report_round(p->total_abytes),
				report_round(p->total_aobjs));
	}
	if (r->prof->period && sampled) {
		double lo, hi;

		profile_interval(total, report_variance(r, o), &lo, &hi);
		fprintf(f, "Profile: %s, sampled every %llu bytes on average, "
			"unsampled per stack; the total within %lld to %lld "
			"(95%%)\n", profile_format_label(r->prof->format),
			(unsigned long long)r->prof->period,
			report_round(lo), report_round(hi));
	} else if (r->prof->period) {
		fprintf(f, "Profile: %s, sampled every %llu bytes on average, "
			"unsampled per stack\n",
			profile_format_label(r->prof->format),
			(unsigned long long)r->prof->period);
	}
	else
		fprintf(f, "Profile: %s, every allocation recorded\n",
			profile_format_label(r->prof->format));
	fprintf(f, "%12s%s %6s %6s %12s %6s  %s (%s)\n", "flat",
		sampled ? "    ±95" : "", "flat%", "sum%", "cum", "cum%",
		diff ? "growth at" : "allocated at", unit);
	for (i = 0; i < rows; i++) {
		double fl = v[row[i]].flat, cu = v[row[i]].cum;

		sum += fl;
		fprintf(f, diff ? "%+12lld" : "%12lld", report_round(fl));
		if (sampled)
			report_put_error(f, fl, v[row[i]].var);
		put_pct(f, fl, denom, none);
		put_pct(f, sum, denom, none);
		fprintf(f, diff ? " %+12lld" : " %12lld", report_round(cu));
		put_pct(f, cu, denom, none);
		fputs("  ", f);
		/* names come from the dump: never raw to a terminal */
		write_clean(lb.names.v[row[i]], f);
		fputc('\n', f);
	}
	if (rows < shown)
		fprintf(f, "(%zu more; --top 0 shows all)\n", shown - rows);
	if (sampled)
		report_put_ranking_note(f, r, v, &lb, row, rows);
	if (wrapper >= 0) {
		fputs("(flat: at the first frame past the allocator's "
		      "wrappers, such as ", f);
		write_clean(lb.names.v[wrapper], f);
		fputs("; --drop-frames names more)\n", f);
	}
	free(row);
	free(v);
	labels_free(&lb);
	return ferror(f) ? -EIO : 0;
}

/* ---- folded ---------------------------------------------------------------- */

static const struct report *key_r;
static const struct labels *key_lb;

static int cmp_merged_key(const void *a, const void *b)
{
	return key_cmp(key_r, key_lb, ((const struct merged *)a)->sample,
		       ((const struct merged *)b)->sample);
}

int report_folded(const struct report *r, const struct report_opts *o,
		  FILE *f)
{
	struct labels lb;
	struct merged *m;
	size_t n, i;
	int rc = report_stacks(r, o->lines, false, &lb, &m, &n);

	if (rc)
		return rc;
	key_r = r;
	key_lb = &lb;
	sort(m, n, sizeof(*m), cmp_merged_key);
	for (i = 0; i < n; i++) {
		long long v = report_round(report_value(o, m[i].bytes, m[i].objs));

		if (v) {
			key_write(r, &lb, m[i].sample, f);
			fprintf(f, " %lld\n", v);
		}
	}
	free(m);
	labels_free(&lb);
	return ferror(f) ? -EIO : 0;
}
