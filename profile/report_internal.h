#ifndef MEMSNAP_PROFILE_REPORT_INTERNAL_H
#define MEMSNAP_PROFILE_REPORT_INTERNAL_H

#include "profile/report.h"

#include <math.h>
#include <stddef.h>

/* String -> index map for the exporters; keys are copied. */
struct strmap {
	char **keys;
	size_t *vals;
	size_t cap, n;
};

/* The index of @key, adding it as @next when new (*@added set).
 * -ENOMEM or 0. */
int strmap_get(struct strmap *m, const char *key, size_t next, size_t *val,
	       bool *added);
void strmap_free(struct strmap *m);

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

/* Identical stacks merged by their labels (root first, ';'-joined). */
struct merged {
	char *key;
	double bytes, objs;
	size_t sample;		/* one sample with this stack */
};

int report_merge(const struct report *r, bool lines, struct merged **out,
		 size_t *n);
void merged_free(struct merged *m, size_t n);

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

#endif
