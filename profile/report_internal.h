#ifndef MEMSNAP_PROFILE_REPORT_INTERNAL_H
#define MEMSNAP_PROFILE_REPORT_INTERNAL_H

#include "common/hidx.h"
#include "profile/report.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The exporters' containers.  Their keys come from the dump (names such
 * as "0x7f3a00001234" or "lib.so+0x1a2b" are made of its addresses), so
 * they are hashed with SipHash-1-3 under a key drawn once per process:
 * a dump cannot be written to make the tables collide.
 */

/* SipHash-1-3 of @len bytes at @p under the process's key. */
uint64_t report_hash(const void *p, size_t len);

/* The same over 64-bit words, for a key that is not one string:
 * hash_start(), hash_word() for each, then the hash from hash_end(). */
struct hasher {
	uint64_t v0, v1, v2, v3;
};

void hash_start(struct hasher *s);
void hash_word(struct hasher *s, uint64_t m);
uint64_t hash_end(struct hasher *s);

/*
 * Strings by id: each string is stored once, and ids count up from 0 in
 * the order the strings were first added ("" is a string like another).
 * Copies are packed in chunks of a megabyte.
 */
struct strmap {
	const char **v;		/* the strings, by id */
	uint64_t *hash;		/* their hashes, by id */
	size_t n, vcap;
	struct hidx idx;	/* over the ids */
	struct strmap_chunk *chunks;
	char *free;
	size_t left;
};

/* The id of @key, copied in when new (*@added set).  0 or -ENOMEM. */
int strmap_get(struct strmap *m, const char *key, size_t *id, bool *added);
/* The same for a @key that outlives @m: kept, not copied. */
int strmap_get_static(struct strmap *m, const char *key, size_t *id,
		      bool *added);
void strmap_free(struct strmap *m);

/* 64-bit numbers to ids, counting up from 0 in the order added. */
struct u64map {
	uint64_t *keys;		/* by id */
	size_t cap, n;
	struct hidx idx;
};

/* The id of @key, added when new (*@added set).  0 or -ENOMEM. */
int u64map_get(struct u64map *m, uint64_t key, uint32_t *id, bool *added);
void u64map_free(struct u64map *m);

/* A growing string. */
struct sbuf {
	char *s;
	size_t len, cap;
};

int sbuf_add(struct sbuf *b, const char *s);
int sbuf_addf(struct sbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Name of one frame for display: "f2", with @lines "f2 prof_f2.c:12". */
int frame_label(struct sbuf *b, const struct dwsym_frame *fr, bool lines);

/*
 * The labels of a report's frames, each distinct label stored once.
 * For location i, its labels are ids[first[i]] to ids[first[i + 1] - 1],
 * one for each of its frames, root first
 * (outermost inline frame first): a stack's key, "root;...;leaf" as
 * folded prints it, is the labels of its locations from the last (the
 * root) to the first, joined by ';'.  Keys are never built as strings:
 * stacks are hashed, compared and written label by label.
 *
 * @clean: ';', '\n' and '\r' become '_' (flame graph tools split on
 * them), so that no label holds a ';' and two keys are equal exactly
 * when their labels are.
 */
struct labels {
	struct strmap names;	/* label -> id */
	uint32_t *ids;
	size_t *first;		/* per location, and one more */
	uint32_t *rank;		/* per id: its place in strcmp order, or
				 * NULL until labels_rank() */
};

int labels_build(const struct report *r, bool lines, bool clean,
		 struct labels *lb);
/* Fill lb->rank. 0 or -ENOMEM. */
int labels_rank(struct labels *lb);
void labels_free(struct labels *lb);

struct wrappers;

/* Per label of @lb: 1 when its frame is an allocator wrapper's
 * (profile/wrappers.h), into *@out (NULL when @w is NULL: none is).  0
 * or -ENOMEM. */
int labels_wrappers(const struct report *r, const struct labels *lb,
		    struct wrappers *w, unsigned char **out);

/* The site of sample @smp: the label of its first frame from the leaf
 * that is no wrapper's (@wrap from labels_wrappers(), or NULL), or of
 * its root frame when every one is; the wrapper frames passed in
 * *@passed. */
uint32_t sample_site(const struct labels *lb, const unsigned char *wrap,
		     const struct report_sample *smp, uint32_t *passed);

/* Walks the labels of one sample, root first. */
struct keycur {
	const struct report *r;
	const struct labels *lb;
	const struct report_sample *smp;
	uint32_t loc;		/* locations left */
	const uint32_t *ids;	/* labels left in the current one */
	unsigned int left;
};

void keycur_init(struct keycur *c, const struct report *r,
		 const struct labels *lb, const struct report_sample *smp);
/* The next label's id; false at the end. */
bool keycur_next(struct keycur *c, uint32_t *id);

/* Identical stacks (equal labels) merged. */
struct merged {
	size_t sample;		/* the first sample with this stack */
	double bytes, objs;
	double var_bytes, var_objs;	/* their sampling variances */
};

/* In the order of their first samples.  0 or -ENOMEM. */
int report_merge(const struct report *r, const struct labels *lb,
		 struct merged **out, size_t *n);

/* labels_build() (@lines, labels_rank() too when @rank), then
 * report_merge(); on failure nothing is left to free.  0 or -errno. */
int report_stacks(const struct report *r, bool lines, bool rank,
		  struct labels *lb, struct merged **out, size_t *n);

/* The keys of two samples compared as strcmp() compares them. */
int key_cmp(const struct report *r, const struct labels *lb, size_t a,
	    size_t b);
/* ... label by label, each label by its rank (labels_rank()): a stack
 * comes right before those it is a prefix of, as in a tree. */
int key_cmp_tree(const struct report *r, const struct labels *lb,
		 size_t a, size_t b);
/* fputs_clean(), faster. */
void write_clean(const char *s, FILE *f);

/* Write the key of sample @smp, for a terminal (fputs_clean()). */
void key_write(const struct report *r, const struct labels *lb,
	       size_t smp, FILE *f);

/* A value rounded for output, saturated: hostile counts make doubles
 * that llround() cannot represent. */
static inline long long report_round(double v)
{
	if (!(v == v))
		return 0;
	if (v >= 9.2e18)
		return 9200000000000000000ll;
	if (v <= -9.2e18)
		return -9200000000000000000ll;
	return llround(v);
}

/* The value a report shows: bytes, or objects with --objects. */
static inline double report_value(const struct report_opts *o, double bytes,
				  double objs)
{
	return o->objects ? objs : bytes;
}

/* One per distinct label (sites[id]), of the value shown. */
struct site {
	double flat, cum;
	double var;		/* flat's sampling variance */
	size_t stamp;		/* last sample that counted it in cum */
};

/* The sites of @r by the labels @lb (sites[id]): flat goes to a stack's
 * site (the innermost frame of the leaf, or the first past the
 * allocator wrappers of @o), cum to every frame of the stack, once per
 * stack even under recursion; *@wrapper, when not -1 already, one
 * wrapper passed (the leaf's innermost frame), for the note.  NULL on
 * ENOMEM. */
struct site *report_collect_sites(const struct report *r,
				  const struct labels *lb,
				  const struct report_opts *o, long *wrapper);

/* The sites to show, in *@row (free it): the @top largest (0: all), of
 * *@shown that hold anything; largest flat first, then cum, then by
 * name.  0 or -ENOMEM. */
int report_top_sites(const struct site *v, const struct labels *lb,
		     size_t top, uint32_t **row, size_t *rows, size_t *shown);

/* The column of flat's 95% sampling error (profile_interval()), as a
 * share of it ("    12%"), blank when exact. */
void report_put_error(FILE *f, double v, double var);

/* The note under the sites when two of the first shown are within each
 * other's 95% interval: their order may be chance, and what would tell
 * them apart. */
void report_put_ranking_note(FILE *f, const struct report *r,
			     const struct site *v, const struct labels *lb,
			     const uint32_t *row, size_t rows);

/* Is the sampling error of @r's total worth saying (over 0.1% of it)?
 * Not for a profile that recorded every allocation, nor for one whose
 * sample period is far below its sizes. */
bool report_sampled(const struct report *r, const struct report_opts *o);

/* The sampling variance of the whole report's value (bytes or objects,
 * as @o counts): its samples' summed. */
double report_variance(const struct report *r, const struct report_opts *o);

/* The "sites" array of --format json: the sites the text shows (flat
 * at the first frame past the wrappers), each with flat, cum and the
 * 95% interval of flat.  0 or -ENOMEM. */
/* The same as an HTML table, the 10 largest, with the total's
 * interval: for a sampled profile's page. */
int report_sites_html(const struct report *r, const struct report_opts *o,
		      FILE *f);

struct json;
int report_sites_json(const struct report *r, const struct report_opts *o,
		      struct json *j);

#endif
