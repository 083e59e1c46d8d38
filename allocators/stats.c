/*
 * Statistics tables (allocators/allocator.h) and the little parsing the
 * backends need for what allocators print.  Everything parsed here came
 * from the target: bounded, never trusted.
 */
#include "allocators/allocator_internal.h"

#include "common/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An allocator with more arenas than this is printing nonsense. */
#define MAX_ROWS 65536

void alloc_stats_free(struct alloc_stats *st)
{
	size_t i;

	for (i = 0; i < st->nt; i++)
		free(st->t[i].rows);
	free(st->raw);
	memset(st, 0, sizeof(*st));
}

struct alloc_stat_table *stats_table(struct alloc_stats *st,
				     const char *name,
				     const char *const *cols,
				     unsigned int bytes_mask)
{
	struct alloc_stat_table *t;
	size_t i;

	if (st->nt >= ALLOC_STAT_MAX_TABLES)
		return NULL;
	t = &st->t[st->nt++];
	memset(t, 0, sizeof(*t));
	t->name = name;
	for (i = 0; cols[i] && i < ALLOC_STAT_MAX_COLS; i++) {
		t->cols[i] = cols[i];
		t->bytes[i] = bytes_mask & (1u << i);
	}
	t->ncols = i;
	return t;
}

struct alloc_stat_row *stats_row(struct alloc_stat_table *t,
				 const char *fmt, ...)
{
	struct alloc_stat_row *r;
	va_list ap;

	if (!t || t->nrows >= MAX_ROWS)
		return NULL;
	if (t->nrows == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 8;
		struct alloc_stat_row *nr = realloc(t->rows, cap * sizeof(*nr));

		if (!nr)
			return NULL;
		t->rows = nr;
		t->cap = cap;
	}
	r = &t->rows[t->nrows++];
	memset(r, 0, sizeof(*r));
	va_start(ap, fmt);
	vsnprintf(r->name, sizeof(r->name), fmt, ap);
	va_end(ap);
	return r;
}

void stats_set(const struct alloc_stat_table *t, struct alloc_stat_row *r,
	       const char *col, uint64_t v)
{
	size_t i;

	if (!t || !r)
		return;
	for (i = 0; i < t->ncols; i++)
		if (!strcmp(t->cols[i], col)) {
			r->v[i] = v;
			r->have[i] = true;
			return;
		}
}

int xml_attr_u64(const char *tag, const char *end, const char *attr,
		 uint64_t *out)
{
	size_t alen = strlen(attr);
	size_t max = (size_t)(end - tag) < XML_TAG_MAX ? (size_t)(end - tag)
						       : XML_TAG_MAX;
	const char *p = tag, *close = memchr(tag, '>', max);
	char num[24];
	size_t n;

	if (!close)
		return -EINVAL;
	while (p < close) {
		p = memmem(p, (size_t)(close - p), attr, alen);
		if (!p)
			return -ENOENT;
		/* A whole attribute name: preceded by a blank, then ="...". */
		if (p > tag && (p[-1] == ' ' || p[-1] == '\t') &&
		    close - p > (ptrdiff_t)alen + 1 && p[alen] == '=' &&
		    p[alen + 1] == '"') {
			const char *v = p + alen + 2;
			const char *q = memchr(v, '"', (size_t)(close - v));

			if (!q)
				return -EINVAL;
			n = (size_t)(q - v);
			/* a NUL would end the number early: "0\0" is no 0 */
			if (!n || n >= sizeof(num) || memchr(v, '\0', n))
				return -EINVAL;
			memcpy(num, v, n);
			num[n] = '\0';
			return parse_u64(num, 10, out) ? -EINVAL : 0;
		}
		p += alen;
	}
	return -ENOENT;
}
