/*
 * Stacks by their labels: the labels of a report's frames, the keys of
 * its stacks ("root;...;leaf") hashed, compared and written label by
 * label, and identical stacks merged.
 */
#include "profile/report.h"
#include "profile/report_internal.h"

#include "common/hidx.h"
#include "common/util.h"
#include "profile/wrappers.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- labels and keys ------------------------------------------------------ */

/* Flame graph tools split on ';' and the count after the last space. */
static void clean_label(char *s)
{
	for (; *s; s++)
		if (*s == ';' || *s == '\n' || *s == '\r')
			*s = '_';
}

int labels_build(const struct report *r, bool lines, bool clean,
		 struct labels *lb)
{
	struct sbuf b = { 0 };
	size_t i, n = 0, cap = 0, id;
	bool added;
	int rc = 0;

	*lb = (struct labels){ 0 };
	lb->first = malloc((r->nlocs + 1) * sizeof(*lb->first));
	if (!lb->first)
		return -ENOMEM;
	for (i = 0; i < r->nlocs && !rc; i++) {
		const struct dwsym_loc *l = r->locs[i].sym;
		unsigned int k;

		lb->first[i] = n;
		if (array_grow((void **)&lb->ids, &cap, n + l->nframes,
			       sizeof(*lb->ids))) {
			rc = -ENOMEM;
			break;
		}
		/* root first: the outermost inline frame first */
		for (k = l->nframes; k-- > 0 && !rc;) {
			const struct dwsym_frame *fr = &l->frames[k];

			/* the name itself, which the symbolizer keeps */
			if ((!lines || !fr->file) &&
			    (!clean || !strpbrk(fr->name, ";\n\r"))) {
				rc = strmap_get_static(&lb->names, fr->name,
						       &id, &added);
			} else {
				b.len = 0;
				if (b.s)
					b.s[0] = '\0';
				rc = frame_label(&b, fr, lines);
				if (rc)
					break;
				if (clean)
					clean_label(b.s);
				rc = strmap_get(&lb->names, b.s, &id, &added);
			}
			if (!rc)
				lb->ids[n++] = (uint32_t)id;
		}
	}
	free(b.s);
	if (rc) {
		labels_free(lb);
		return rc;
	}
	lb->first[r->nlocs] = n;
	return 0;
}

int labels_wrappers(const struct report *r, const struct labels *lb,
		    struct wrappers *w, unsigned char **out)
{
	size_t i;
	unsigned int k;

	*out = NULL;
	if (!w)
		return 0;
	*out = calloc(lb->names.n ? lb->names.n : 1, 1);
	if (!*out)
		return -ENOMEM;
	for (i = 0; i < r->nlocs; i++) {
		const struct dwsym_loc *l = r->locs[i].sym;

		/* ids are root first: frames[0], the innermost, last */
		for (k = 0; k < l->nframes; k++) {
			const char *name = l->frames[k].name;
			size_t at = lb->first[i] + l->nframes - 1 - k;

			(*out)[lb->ids[at]] = wrappers_match(w, name,
							     strlen(name));
		}
	}
	return 0;
}

uint32_t sample_site(const struct labels *lb, const unsigned char *wrap,
		     const struct report_sample *smp, uint32_t *passed)
{
	uint32_t k, id = 0;
	size_t j;

	*passed = 0;
	for (k = 0; k < smp->n; k++) {
		uint32_t li = smp->locs[k];

		/* from the location's innermost frame out */
		for (j = lb->first[li + 1]; j-- > lb->first[li];) {
			id = lb->ids[j];
			if (!wrap || !wrap[id])
				return id;
			++*passed;
		}
	}
	/* every frame a wrapper's: the root's */
	if (*passed)
		--*passed;
	return id;
}

static const struct strmap *rank_names;

static int cmp_name(const void *a, const void *b)
{
	return strcmp(rank_names->v[*(const uint32_t *)a],
		      rank_names->v[*(const uint32_t *)b]);
}

int labels_rank(struct labels *lb)
{
	size_t n = lb->names.n, i;
	uint32_t *order = malloc((n ? n : 1) * sizeof(*order));

	lb->rank = malloc((n ? n : 1) * sizeof(*lb->rank));
	if (!order || !lb->rank) {
		free(order);
		free(lb->rank);
		lb->rank = NULL;
		return -ENOMEM;
	}
	for (i = 0; i < n; i++)
		order[i] = (uint32_t)i;
	rank_names = &lb->names;
	sort(order, n, sizeof(*order), cmp_name);
	for (i = 0; i < n; i++)
		lb->rank[order[i]] = (uint32_t)i;
	free(order);
	return 0;
}

void labels_free(struct labels *lb)
{
	strmap_free(&lb->names);
	free(lb->ids);
	free(lb->first);
	free(lb->rank);
	*lb = (struct labels){ 0 };
}

void keycur_init(struct keycur *c, const struct report *r,
		 const struct labels *lb, const struct report_sample *smp)
{
	*c = (struct keycur){ .r = r, .lb = lb, .smp = smp, .loc = smp->n };
}

bool keycur_next(struct keycur *c, uint32_t *id)
{
	while (!c->left) {
		uint32_t li;

		if (!c->loc)
			return false;
		li = c->smp->locs[--c->loc];
		c->ids = c->lb->ids + c->lb->first[li];
		c->left = (unsigned int)(c->lb->first[li + 1] -
					 c->lb->first[li]);
	}
	c->left--;
	*id = *c->ids++;
	return true;
}

/* Every location has a label: more labels while locations are left. */
static bool keycur_more(const struct keycur *c)
{
	return c->left || c->loc;
}

static uint64_t key_hash(const struct report *r, const struct labels *lb,
			 const struct report_sample *smp)
{
	struct keycur c;
	struct hasher s;
	uint32_t id;
	uint64_t n = 0;

	keycur_init(&c, r, lb, smp);
	hash_start(&s);
	while (keycur_next(&c, &id)) {
		hash_word(&s, id);
		n++;
	}
	hash_word(&s, n);
	return hash_end(&s);
}

static bool key_equal(const struct report *r, const struct labels *lb,
		      const struct report_sample *a,
		      const struct report_sample *b)
{
	struct keycur ca, cb;
	uint32_t ia, ib;

	keycur_init(&ca, r, lb, a);
	keycur_init(&cb, r, lb, b);
	for (;;) {
		bool ha = keycur_next(&ca, &ia), hb = keycur_next(&cb, &ib);

		if (ha != hb)
			return false;
		if (!ha)
			return true;
		if (ia != ib)
			return false;
	}
}

/*
 * As strcmp() of the two keys: equal up to the first label that differs,
 * and decided there, each label followed by ';' or, the last, by the end
 * of the string (a clean label holds neither).
 */
int key_cmp(const struct report *r, const struct labels *lb, size_t a,
	    size_t b)
{
	struct keycur ca, cb;
	uint32_t ia, ib;

	keycur_init(&ca, r, lb, &r->samples[a]);
	keycur_init(&cb, r, lb, &r->samples[b]);
	for (;;) {
		bool ha = keycur_next(&ca, &ia), hb = keycur_next(&cb, &ib);
		const unsigned char *sa, *sb;
		unsigned char ea, eb;

		if (!ha || !hb)
			return (int)ha - (int)hb;
		if (ia == ib)
			continue;
		sa = (const unsigned char *)lb->names.v[ia];
		sb = (const unsigned char *)lb->names.v[ib];
		while (*sa && *sa == *sb) {
			sa++;
			sb++;
		}
		ea = *sa ? *sa : keycur_more(&ca) ? ';' : '\0';
		eb = *sb ? *sb : keycur_more(&cb) ? ';' : '\0';
		return (int)ea - (int)eb;
	}
}

int key_cmp_tree(const struct report *r, const struct labels *lb, size_t a,
		 size_t b)
{
	struct keycur ca, cb;
	uint32_t ia, ib;

	keycur_init(&ca, r, lb, &r->samples[a]);
	keycur_init(&cb, r, lb, &r->samples[b]);
	for (;;) {
		bool ha = keycur_next(&ca, &ia), hb = keycur_next(&cb, &ib);

		if (!ha || !hb)
			return (int)ha - (int)hb;
		if (ia != ib)
			return lb->rank[ia] < lb->rank[ib] ? -1 : 1;
	}
}

/* Printable ASCII, most names, at once; fputs_clean() for the others. */
void write_clean(const char *s, FILE *f)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p >= 0x20 && *p < 0x7f)
		p++;
	if (*p)
		fputs_clean(s, f);
	else
		fwrite(s, 1, (size_t)(p - (const unsigned char *)s), f);
}

void key_write(const struct report *r, const struct labels *lb, size_t smp,
	       FILE *f)
{
	struct keycur c;
	uint32_t id;
	bool first = true;

	keycur_init(&c, r, lb, &r->samples[smp]);
	while (keycur_next(&c, &id)) {
		if (!first)
			fputc(';', f);
		first = false;
		write_clean(lb->names.v[id], f);
	}
}

/* ---- merged stacks --------------------------------------------------------- */

static uint64_t merged_hash_of(const void *ctx, size_t i)
{
	return ((const uint64_t *)ctx)[i];
}

int report_merge(const struct report *r, const struct labels *lb,
		 struct merged **out, size_t *n)
{
	struct merged *v = NULL;
	uint64_t *hash = NULL;
	struct hidx idx = { 0 };
	uint32_t *slots;
	size_t cap = 0, hcap = 0, cnt = 0, i, j;
	int rc = 0;

	for (i = 0; i < r->nsamples; i++) {
		const struct report_sample *smp = &r->samples[i];
		uint64_t h = key_hash(r, lb, smp);

		if (hidx_need(&idx, cnt + 1, 1024, merged_hash_of, hash)) {
			rc = -ENOMEM;
			break;
		}
		slots = idx.slot;
		for (j = hidx_first(&idx, h); slots[j]; j = hidx_next(&idx, j)) {
			size_t k = slots[j] - 1;

			if (hash[k] == h &&
			    key_equal(r, lb, &r->samples[v[k].sample], smp))
				break;
		}
		if (!slots[j]) {
			if (cnt >= UINT32_MAX - 1 ||
			    array_grow((void **)&v, &cap, cnt + 1,
				       sizeof(*v)) ||
			    array_grow((void **)&hash, &hcap, cnt + 1,
				       sizeof(*hash))) {
				rc = -ENOMEM;
				break;
			}
			v[cnt] = (struct merged){ .sample = i };
			hash[cnt] = h;
			slots[j] = (uint32_t)++cnt;
		}
		v[slots[j] - 1].bytes += smp->bytes;
		v[slots[j] - 1].objs += smp->objs;
		v[slots[j] - 1].var_bytes += smp->var_bytes;
		v[slots[j] - 1].var_objs += smp->var_objs;
	}
	free(hash);
	hidx_free(&idx);
	if (rc) {
		free(v);
		return rc;
	}
	*out = v;
	*n = cnt;
	return 0;
}

int report_stacks(const struct report *r, bool lines, bool rank,
		  struct labels *lb, struct merged **out, size_t *n)
{
	int rc = labels_build(r, lines, true, lb);

	if (!rc && rank)
		rc = labels_rank(lb);
	if (!rc)
		rc = report_merge(r, lb, out, n);
	if (rc)
		labels_free(lb);
	return rc;
}
