/*
 * report DIR's call sites (timeline/timeline.h), from each dump's
 * folded lines: a stack's bytes go to its site, the first frame from
 * the leaf past the allocator's wrappers (profile/wrappers.h), and each
 * site's bytes over the dumps get a trend (timeline/trend.h): the sites
 * that grew, ranked by what their floor rose by, and the largest at
 * their peak, whatever their shape.
 */
#include "timeline/timeline.h"
#include "timeline/timeline_internal.h"

#include "common/hidx.h"
#include "common/util.h"
#include "profile/wrappers.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t timeline_name_hash(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;	/* FNV-1a */
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t site_hash(const void *ctx, size_t i)
{
	const struct timeline *tl = ctx;

	return timeline_name_hash(tl->sites[i].name,
				  strlen(tl->sites[i].name));
}

/* The site named by the @len bytes at @name (cut to SITE_NAME_MAX - 1),
 * added if new; OTHER_SITES once SITES_MAX are there.  NULL: no
 * memory. */
static struct site *site_named(struct timeline *tl, const char *name,
			       size_t len)
{
	struct site *s;
	size_t j;

	if (len >= SITE_NAME_MAX)
		len = SITE_NAME_MAX - 1;
	if (tl->nsites >= SITES_MAX) {
		name = OTHER_SITES;
		len = strlen(OTHER_SITES);
	}
	if (hidx_need(&tl->idx, tl->nsites + 1, 64, site_hash, tl))
		return NULL;
	for (j = hidx_first(&tl->idx, timeline_name_hash(name, len));
	     tl->idx.slot[j];
	     j = hidx_next(&tl->idx, j)) {
		s = &tl->sites[tl->idx.slot[j] - 1];
		if (!strncmp(s->name, name, len) && !s->name[len])
			return s;
	}
	if (array_grow((void **)&tl->sites, &tl->cap, tl->nsites + 1,
		       sizeof(*tl->sites)))
		return NULL;
	s = &tl->sites[tl->nsites];
	memset(s, 0, sizeof(*s));
	memcpy(s->name, name, len);
	tl->idx.slot[j] = (uint32_t)++tl->nsites;
	return s;
}

/*
 * The site of the frames "root;...;leaf" in the @len bytes at @stack:
 * the first frame from the leaf that is not an allocator wrapper's
 * (tl->wrappers), or the root's when every frame is.  Its length in
 * *@n.
 */
static const char *site_of(const struct timeline *tl, const char *stack,
			   size_t len, size_t *n)
{
	const char *end = stack + len, *semi;

	for (;;) {
		semi = memrchr(stack, ';', (size_t)(end - stack));
		*n = (size_t)(end - (semi ? semi + 1 : stack));
		if (!semi || !wrappers_match(tl->wrappers, semi + 1, *n))
			return semi ? semi + 1 : stack;
		end = semi;
	}
}

int timeline_add_folded(struct timeline *tl, size_t k, const char *buf)
{
	const char *line = buf;

	while (*line) {
		const char *nl = strchr(line, '\n'), *sp, *leaf;
		size_t len = nl ? (size_t)(nl - line) : strlen(line), n;
		char num[32];
		double v;
		struct site *s;

		sp = len ? memrchr(line, ' ', len) : NULL;
		if (sp && (size_t)(line + len - sp - 1) < sizeof(num)) {
			memcpy(num, sp + 1, (size_t)(line + len - sp - 1));
			num[line + len - sp - 1] = '\0';
			v = strtod(num, NULL);
			if (!isfinite(v))
				v = 0;
			leaf = site_of(tl, line, (size_t)(sp - line), &n);
			s = site_named(tl, leaf, n);
			if (!s)
				return -ENOMEM;
			s->bytes[k] += v;
		}
		line = nl ? nl + 1 : line + len;
	}
	return 0;
}

static int cmp_growth(const void *a, const void *b)
{
	const struct site *x = a, *y = b;

	return x->growth < y->growth ? 1 : x->growth > y->growth ? -1
				   : strcmp(x->name, y->name);
}

void timeline_pick_dumps(struct timeline *tl)
{
	size_t i, n = 0, total = 0;

	for (i = 0; i < tl->s.n; i++)
		total += tl->s.v[i].dump[0] != '\0';
	for (i = 0; i < tl->s.n && tl->ndumps < SITE_DUMPS_MAX; i++) {
		if (!tl->s.v[i].dump[0])
			continue;
		/* the n-th dump of total: taken where it lands on a new
		 * slot of SITE_DUMPS_MAX, and always the last */
		if (total <= SITE_DUMPS_MAX || n == total - 1 ||
		    n * (SITE_DUMPS_MAX - 1) / (total - 1) >= tl->ndumps)
			tl->dump_tick[tl->ndumps++] = i;
		n++;
	}
}

int timeline_fit_sites(struct timeline *tl)
{
	size_t k, i, m;
	double *t, *v;

	t = calloc(tl->ndumps ? tl->ndumps : 1, sizeof(*t));
	v = calloc(tl->ndumps ? tl->ndumps : 1, sizeof(*v));
	if (!t || !v) {
		free(t);
		free(v);
		return -ENOMEM;
	}
	for (i = 0; i < tl->nsites; i++) {
		struct site *s = &tl->sites[i];

		for (k = 0, m = 0; k < tl->ndumps; k++) {
			if (!tl->dump_ok[k])
				continue;
			t[m] = tl->t[tl->dump_tick[k]];
			v[m++] = s->bytes[k];
		}
		/* what its floor rose by over the dumps read (timeline/
		 * trend.h): a working set caught high in its last dump and
		 * low in its first does not pass for a leak; from two
		 * dumps, the difference */
		trend_fit(t, v, m, TREND_NOISE_SITE, &s->tr);
		s->growth = m >= 3 ? s->tr.floor_rise
			  : m == 2 ? v[1] - v[0] : 0;
	}
	free(t);
	free(v);
	sort(tl->sites, tl->nsites, sizeof(*tl->sites), cmp_growth);
	return 0;
}

bool timeline_site_grew(const struct site *s)
{
	return s->growth > s->tr.noise && (s->tr.shape == TREND_GROWING ||
					   s->tr.shape == TREND_PLATEAU ||
					   s->tr.shape == TREND_FEW);
}

static const struct site *peak_sites;

static int cmp_peak(const void *a, const void *b)
{
	const struct site *x = &peak_sites[*(const size_t *)a];
	const struct site *y = &peak_sites[*(const size_t *)b];

	return x->tr.max < y->tr.max ? 1 : x->tr.max > y->tr.max ? -1
		: strcmp(x->name, y->name);
}

size_t timeline_largest(const struct timeline *tl, unsigned int top,
			size_t shown, size_t **out)
{
	double biggest = 0;
	size_t i, n = 0;

	*out = malloc((tl->nsites ? tl->nsites : 1) * sizeof(**out));
	if (!*out)
		return 0;
	for (i = 0; i < tl->nsites; i++)
		biggest = fmax(biggest, tl->sites[i].tr.max);
	for (i = 0; i < tl->nsites; i++) {
		const struct site *s = &tl->sites[i];

		/* the first @shown are in the table of growth already */
		if (i < shown && timeline_site_grew(s))
			continue;
		if (s->tr.max > TREND_NOISE_SITE &&
		    s->tr.max >= TIMELINE_LARGE_SHARE * biggest)
			(*out)[n++] = i;
	}
	peak_sites = tl->sites;
	sort(*out, n, sizeof(**out), cmp_peak);
	return top && n > top ? top : n;
}
