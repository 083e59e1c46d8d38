/*
 * allocators/account.c: the tables of `stats` in explain's words, from
 * what allocators really printed (tests/data/stats/).  The expected
 * numbers are read from the same text here, with sscanf.
 */
#include "allocators/account.h"
#include "allocators/allocator_internal.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *name, size_t *len)
{
	const char *dir = getenv("MEMSNAP_TESTDATA");
	char path[PATH_MAX];
	char *buf;
	FILE *f;
	long n;

	cr_assert_not_null(dir, "MEMSNAP_TESTDATA is not set");
	snprintf(path, sizeof(path), "%s/stats/%s", dir, name);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* The size="N" of the last tag starting with @tag (the totals after the
 * last heap). */
static unsigned long long last_size(const char *xml, const char *tag)
{
	const char *p = xml, *hit = NULL;
	unsigned long long v = 0;

	while ((p = strstr(p, tag))) {
		hit = p;
		p++;
	}
	cr_assert_not_null(hit, "%s", tag);
	cr_assert(sscanf(strstr(hit, "size=\""), "size=\"%llu\"", &v) == 1);
	return v;
}

Test(explain_account, glibc_from_malloc_info)
{
	struct alloc_stats st = { 0 };
	struct alloc_account acc;
	size_t len, heaps = 0;
	char *xml = slurp("malloc_info.xml", &len);
	const char *p = xml;
	unsigned long long fast = last_size(xml, "<total type=\"fast\"");
	unsigned long long rest = last_size(xml, "<total type=\"rest\"");
	unsigned long long mmap = last_size(xml, "<total type=\"mmap\"");
	unsigned long long sys = last_size(xml, "<system type=\"current\"");

	while ((p = strstr(p, "<heap nr="))) {
		heaps++;
		p++;
	}
	cr_assert_eq(glibc_parse_malloc_info(xml, len, &st), 0);
	cr_assert_eq(alloc_account_from_stats(ALLOC_GLIBC, &st, &acc), 0);
	cr_assert_eq(acc.arenas, heaps);
	cr_assert(acc.have_in_use && acc.have_free);
	cr_assert_eq(acc.free, fast + rest);
	cr_assert_eq(acc.mmap_bytes, mmap);
	cr_assert_eq(acc.in_use, sys - (fast + rest) + mmap);
	cr_assert_not(acc.have_metadata);
	alloc_stats_free(&st);
	free(xml);
}

Test(explain_account, mimalloc_without_in_use)
{
	struct alloc_stats st = { 0 };
	struct alloc_account acc;
	size_t len;
	char *text = slurp("mimalloc.txt", &len);
	double mib = 0;

	cr_assert(sscanf(strstr(text, "committed:"), "committed: %lf", &mib) == 1);
	cr_assert_eq(mimalloc_parse_stats(text, len, &st), 0);
	cr_assert_eq(alloc_account_from_stats(ALLOC_MIMALLOC, &st, &acc), 0);
	/* a release build prints what it committed, no in use */
	cr_assert(acc.in_use_with_free);
	cr_assert_eq(acc.in_use, (uint64_t)(mib * 1048576));
	cr_assert_eq(acc.committed, acc.in_use);
	cr_assert_not(acc.have_free);
	alloc_stats_free(&st);
	free(text);
}

Test(explain_account, empty_tables_are_no_account)
{
	struct alloc_stats st = { 0 };
	struct alloc_account acc;
	enum alloc_kind k;

	for (k = 0; k < ALLOC_KINDS; k++)
		cr_assert_eq(alloc_account_from_stats(k, &st, &acc), -ENOENT,
			     "%s", alloc_kind_name(k));
}

Test(explain_account, jemalloc_and_tcmalloc_tables)
{
	static const char *const je_cols[] = { "allocated", "active",
					       "metadata", "resident",
					       "mapped", "retained", NULL };
	static const char *const tc_cols[] = { "allocated", "heap_size",
					       "physical", "pageheap_free",
					       "pageheap_unmapped",
					       "central_cache_free", NULL };
	struct alloc_stats st = { 0 };
	struct alloc_stat_table *t;
	struct alloc_stat_row *r;
	struct alloc_account acc;

	t = stats_table(&st, "total", je_cols, 0x3f);
	r = stats_row(t, "total");
	stats_set(t, r, "allocated", 100);
	stats_set(t, r, "active", 150);
	stats_set(t, r, "metadata", 20);
	stats_set(t, r, "resident", 200);
	cr_assert_eq(alloc_account_from_stats(ALLOC_JEMALLOC, &st, &acc), 0);
	cr_assert_eq(acc.in_use, 100);
	cr_assert_eq(acc.metadata, 20);
	cr_assert_eq(acc.free, 80, "resident - allocated - metadata");
	/* resident below allocated + metadata: no wrap-around */
	r->v[3] = 50;
	cr_assert_eq(alloc_account_from_stats(ALLOC_JEMALLOC, &st, &acc), 0);
	cr_assert_eq(acc.free, 0);
	alloc_stats_free(&st);

	t = stats_table(&st, "total", tc_cols, 0x3f);
	r = stats_row(t, "total");
	stats_set(t, r, "allocated", 1000);
	stats_set(t, r, "heap_size", 1500);
	stats_set(t, r, "physical", 1300);	/* heap + meta - unmapped */
	stats_set(t, r, "pageheap_free", 200);
	stats_set(t, r, "pageheap_unmapped", 250);
	stats_set(t, r, "central_cache_free", 30);
	cr_assert_eq(alloc_account_from_stats(ALLOC_TCMALLOC, &st, &acc), 0);
	cr_assert_eq(acc.in_use, 1000);
	cr_assert_eq(acc.free, 230);
	cr_assert_eq(acc.metadata, 50);
	alloc_stats_free(&st);
}
