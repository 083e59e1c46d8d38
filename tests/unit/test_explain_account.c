/*
 * allocators/account.c: the tables of `stats` in explain's words, from
 * what allocators really printed (tests/data/stats/).  The expected
 * numbers are read from the same text here, with sscanf.
 */
#include "allocators/account.h"
#include "allocators/allocator_internal.h"

#include "../lib/testdata.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *name, size_t *len)
{
	return testdata_slurp("stats", name, len);
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
	/* a release build prints what it committed, no in use: neither
	 * in use nor free can be told */
	cr_assert(acc.in_use_with_free);
	cr_assert_eq(acc.committed, (uint64_t)(mib * 1048576));
	cr_assert_not(acc.have_in_use);
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

/*
 * jemalloc's internal allocations (tcache stacks) are inside
 * stats.allocated and inside stats.metadata: the numbers of a process
 * of 129 threads and arenas that holds 9437184 bytes, read in-process
 * after an epoch.  The program's heap in use is allocated - internal
 * (within 2.5% of what it holds; allocated alone is 42% over), and
 * internal stays in metadata.
 */
Test(explain_account, jemalloc_internal_counted_once)
{
	static const char *const cols[] = { "allocated", "active", "metadata",
					    "resident", NULL };
	const uint64_t allocated = 13366048, active = 14909440;
	const uint64_t metadata = 24622704, resident = 36179968;
	const uint64_t internal = 3698688, held = 9437184;
	struct alloc_stats st = { 0 };
	struct alloc_stat_table *t;
	struct alloc_stat_row *r;
	struct alloc_account acc;

	t = stats_table(&st, "total", cols, 0xf);
	r = stats_row(t, "total");
	stats_set(t, r, "allocated", allocated);
	stats_set(t, r, "active", active);
	stats_set(t, r, "metadata", metadata);
	stats_set(t, r, "resident", resident);
	cr_assert_eq(alloc_account_from_stats(ALLOC_JEMALLOC, &st, &acc), 0);
	/* internal not read: allocated as it is */
	cr_assert_eq(acc.in_use, allocated);
	acc.internal = internal;
	acc.have_internal = true;
	alloc_account_jemalloc_derive(&acc);
	cr_assert_eq(acc.in_use, allocated - internal);
	cr_assert_leq(acc.in_use - held, held / 40, "%llu",
		      (unsigned long long)acc.in_use);
	cr_assert_eq(acc.metadata, metadata, "internal stays in metadata");
	/* in use + metadata + free = resident: nothing counted twice */
	cr_assert_eq(acc.in_use + acc.metadata + acc.free, resident);
	/* resident = base's pages + active + dirty: internal is in active,
	 * not in the base */
	cr_assert_eq(acc.pdirty, resident - active - (metadata - internal));
	/* active not read (nothing worth splitting held free): no dirty
	 * pages made up from a zero */
	acc.have_active = false;
	acc.have_pdirty = false;
	alloc_account_jemalloc_derive(&acc);
	cr_assert_not(acc.have_pdirty);
	cr_assert_eq(acc.free, resident - acc.in_use - metadata);
	acc.have_active = true;
	/* a target's nonsense: internal above allocated */
	acc.internal = allocated * 2;
	alloc_account_jemalloc_derive(&acc);
	cr_assert_eq(acc.in_use, 0);
	alloc_stats_free(&st);
}

/*
 * jemalloc's metadata on transparent huge pages: 34 huge pages hold
 * 7 MiB of it (stats.metadata), each resident whole where the kernel
 * gave it, as far as AnonHugePages shows.
 */
Test(explain_account, jemalloc_metadata_on_huge_pages)
{
	struct alloc_account acc = { .kind = ALLOC_JEMALLOC };
	const uint64_t mib = 1 << 20;

	acc.metadata = 7 * mib;
	acc.have_metadata = true;
	cr_assert_eq(alloc_account_metadata_resident(&acc, 66 * mib, 2 * mib),
		     7 * mib, "metadata_thp not read: stats.metadata");
	acc.metadata_thp_pages = 34;
	acc.have_metadata_thp_pages = true;
	cr_assert_eq(alloc_account_metadata_resident(&acc, 66 * mib, 2 * mib),
		     66 * mib, "68 MiB asked for, 66 MiB given");
	cr_assert_eq(alloc_account_metadata_resident(&acc, 100 * mib, 2 * mib),
		     68 * mib);
	/* the kernel's huge page unknown: stats.metadata */
	cr_assert_eq(alloc_account_metadata_resident(&acc, 66 * mib, 0),
		     7 * mib);
	/* two huge pages, the rest of AnonHugePages the program's */
	acc.metadata_thp_pages = 2;
	cr_assert_eq(alloc_account_metadata_resident(&acc, 66 * mib, 2 * mib),
		     7 * mib);
	/* 512 MiB huge pages (arm64, 64 KiB pages), any count: bounded */
	acc.metadata_thp_pages = UINT64_MAX / 2;
	cr_assert_eq(alloc_account_metadata_resident(&acc, 3072 * mib,
						     512 * mib),
		     3072 * mib);
}

/*
 * 129 threads on a jemalloc of 64 KiB pages (the arm64 guest's): the
 * program holds 9 MiB, stats.allocated says 89 MiB, 7 MiB of it
 * internal and 72 MiB blocks the threads' caches keep.  Those are free
 * for the program: in use is what it holds, the cached bytes go to
 * free, and in use + metadata + free is still resident.
 */
Test(explain_account, jemalloc_tcache_is_free)
{
	const uint64_t allocated = 92905256, internal = 7528456;
	const uint64_t tcache = 76000000, metadata = 16656576;
	const uint64_t resident = 126484480, held = 9437184;
	struct alloc_account acc = { 0 };

	acc.kind = ALLOC_JEMALLOC;
	acc.allocated = allocated;
	acc.metadata = metadata;
	acc.have_metadata = true;
	acc.resident = resident;
	acc.have_resident = true;
	acc.internal = internal;
	acc.have_internal = true;
	alloc_account_jemalloc_derive(&acc);
	cr_assert_eq(acc.in_use, allocated - internal, "no cache read yet");
	acc.tcache_bytes = tcache;
	acc.have_tcache_bytes = true;
	alloc_account_jemalloc_derive(&acc);
	cr_assert_eq(acc.in_use, allocated - internal - tcache);
	cr_assert_leq(acc.in_use > held ? acc.in_use - held : held - acc.in_use,
		      held / 20, "%llu", (unsigned long long)acc.in_use);
	cr_assert_eq(acc.in_use + acc.metadata + acc.free, resident);
	/* a cache larger than what is left: nothing below zero */
	acc.tcache_bytes = allocated;
	alloc_account_jemalloc_derive(&acc);
	cr_assert_eq(acc.in_use, 0);
}
