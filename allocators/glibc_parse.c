/*
 * glibc's malloc_info() XML into the table "arenas" (allocators/glibc.c
 * captures it).  The text is the target's: a hostile one can make its
 * malloc_info print anything, so this is bounded by @len and trusts
 * nothing it reads.
 */
#include "allocators/allocator_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *const arena_cols[] = {
	"system", "system_max", "in_use", "free", "fastbin", "free_chunks",
	"mmap",	  "mmap_chunks", NULL,
};
#define ARENA_BYTES 0x5fu	/* all but the two chunk counts */

struct xml_row {
	struct alloc_stat_row *row;
	uint64_t fast, rest, system;
	bool have_fast, have_rest, have_system;
};

/* Fill in the derived columns of a finished row: free from both of
 * its parts (one that is missing is not 0), never one that wrapped
 * around (fast + rest past 2^64 is not a size). */
static void finish_row(const struct alloc_stat_table *t, struct xml_row *x)
{
	uint64_t free = x->fast + x->rest;

	if (!x->row)
		return;
	if (x->have_fast)
		stats_set(t, x->row, "fastbin", x->fast);
	if (x->have_fast && x->have_rest && free >= x->fast) {
		stats_set(t, x->row, "free", free);
		if (x->have_system && x->system >= free)
			stats_set(t, x->row, "in_use", x->system - free);
	}
	memset(x, 0, sizeof(*x));
}

static bool tag_is(const char *p, const char *end, const char *name)
{
	size_t n = strlen(name);

	return (size_t)(end - p) > n + 1 && p[0] == '<' &&
	       !memcmp(p + 1, name, n) &&
	       (p[n + 1] == ' ' || p[n + 1] == '>' || p[n + 1] == '/');
}

/* Which of @types the tag's type="..." is: its index, or -1. */
static int tag_type(const char *p, const char *end, const char *const *types)
{
	size_t max = (size_t)(end - p) < XML_TAG_MAX ? (size_t)(end - p)
						     : XML_TAG_MAX;
	const char *close = memchr(p, '>', max);
	const char *q;
	size_t i;

	if (!close)
		return -1;
	q = memmem(p, (size_t)(close - p), " type=\"", 7);
	if (!q)
		return -1;
	q += 7;
	for (i = 0; types[i]; i++) {
		size_t n = strlen(types[i]);

		if ((size_t)(close - q) > n && !memcmp(q, types[i], n) &&
		    q[n] == '"')
			return (int)i;
	}
	return -1;
}

/*
 * <malloc version="1">
 *   <heap nr="0"> <sizes>...</sizes>
 *     <total type="fast" count= size=/> <total type="rest" .../>
 *     <system type="current" size=/> <system type="max" size=/> ...
 *   </heap> ...
 *   <total type="fast"/> <total type="rest"/> <total type="mmap"/>
 *   <system type="current"/> <system type="max"/> ...
 * </malloc>
 *
 * "rest" holds the free chunks in bins and the top chunk: free = fast +
 * rest, in use = system current - free.  The totals after the last heap
 * make the row "total".
 */
int glibc_parse_malloc_info(const char *xml, size_t len,
			    struct alloc_stats *st)
{
	static const char *const total_types[] = { "fast", "rest", "mmap",
						   NULL };
	static const char *const system_types[] = { "current", "max", NULL };
	const char *p = xml, *end = xml + len;
	struct alloc_stat_table *t;
	struct xml_row x = { 0 };
	bool in_heap = false, seen_malloc = false, have_count;
	uint64_t v, count;

	t = stats_table(st, "arenas", arena_cols, ARENA_BYTES);
	if (!t)
		return -ENOMEM;
	while ((p = memchr(p, '<', (size_t)(end - p)))) {
		if (tag_is(p, end, "malloc")) {
			seen_malloc = true;
		} else if (tag_is(p, end, "heap")) {
			finish_row(t, &x);
			if (xml_attr_u64(p, end, "nr", &v))
				return -EINVAL;
			x.row = stats_row(t, "arena %" PRIu64, v);
			if (!x.row)
				return -ENOMEM;
			in_heap = true;
		} else if (!strncmp(p, "</heap>", (size_t)(end - p) < 7
							   ? (size_t)(end - p)
							   : 7)) {
			finish_row(t, &x);
			in_heap = false;
		} else if (tag_is(p, end, "total") || tag_is(p, end, "system")) {
			bool total = p[1] == 't';
			int ty = tag_type(p, end,
					  total ? total_types : system_types);

			if (!in_heap && !x.row) {
				x.row = stats_row(t, "total");
				if (!x.row)
					return -ENOMEM;
			}
			if (ty < 0 || xml_attr_u64(p, end, "size", &v)) {
				p++;
				continue;
			}
			/* a count that is not there is not 0 */
			have_count = total &&
				     !xml_attr_u64(p, end, "count", &count);
			if (total && ty == 0) {
				x.fast = v;
				x.have_fast = true;
			} else if (total && ty == 1) {
				x.rest = v;
				x.have_rest = true;
				if (have_count)
					stats_set(t, x.row, "free_chunks", count);
			} else if (total && ty == 2) {
				stats_set(t, x.row, "mmap", v);
				if (have_count)
					stats_set(t, x.row, "mmap_chunks", count);
			} else if (!total && ty == 0) {
				x.system = v;
				x.have_system = true;
				stats_set(t, x.row, "system", v);
			} else {
				stats_set(t, x.row, "system_max", v);
			}
		}
		p++;
	}
	finish_row(t, &x);
	return seen_malloc ? 0 : -EINVAL;
}
