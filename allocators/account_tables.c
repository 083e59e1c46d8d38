/*
 * The allocator's account for `explain` from the tables of `stats`
 * (allocators/account.h): pure arithmetic over what an allocator
 * printed or said, so that the tests and the fuzzer give it anything.
 */
#include "allocators/account.h"

#include "allocators/allocator_internal.h"

#include <errno.h>
#include <string.h>

static const struct alloc_stat_table *table(const struct alloc_stats *st,
					    const char *name)
{
	size_t i;

	for (i = 0; i < st->nt; i++)
		if (st->t[i].name && !strcmp(st->t[i].name, name))
			return &st->t[i];
	return NULL;
}

static const struct alloc_stat_row *row(const struct alloc_stat_table *t,
					const char *name)
{
	size_t i;

	for (i = 0; t && i < t->nrows; i++)
		if (!strcmp(t->rows[i].name, name))
			return &t->rows[i];
	return NULL;
}

/* Column @col of @r: true and *@v when the row has it. */
static bool cell(const struct alloc_stat_table *t,
		 const struct alloc_stat_row *r, const char *col, uint64_t *v)
{
	size_t c;

	if (!t || !r)
		return false;
	for (c = 0; c < t->ncols; c++)
		if (!strcmp(t->cols[c], col)) {
			if (!r->have[c])
				return false;
			*v = r->v[c];
			return true;
		}
	return false;
}

static uint64_t sub0(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static int from_glibc(const struct alloc_stats *st, struct alloc_account *acc)
{
	const struct alloc_stat_table *t = table(st, "arenas");
	const struct alloc_stat_table *mi = table(st, "mallinfo2");
	const struct alloc_stat_row *total = row(t, "total");
	const struct alloc_stat_row *mr = row(mi, "process");
	uint64_t in_use = 0, v;
	size_t i;

	if (!t)
		return -ENOENT;
	for (i = 0; i < t->nrows; i++) {
		if (strncmp(t->rows[i].name, "arena ", 6))
			continue;
		acc->arenas++;
		/* free in the arenas of other threads than the main one */
		if (strcmp(t->rows[i].name, "arena 0") &&
		    cell(t, &t->rows[i], "free", &v))
			acc->free_other_arenas = add_sat(acc->free_other_arenas,
							 v);
	}
	if (cell(t, total, "in_use", &in_use) &&
	    cell(t, total, "free", &acc->free)) {
		acc->have_in_use = acc->have_free = true;
	} else if (cell(mi, mr, "uordblks", &in_use) &&
		   cell(mi, mr, "fordblks", &acc->free)) {
		acc->have_in_use = acc->have_free = true;
	} else {
		return -ENOENT;
	}
	if (!cell(t, total, "system", &acc->arena_system))
		cell(mi, mr, "arena", &acc->arena_system);
	if (!cell(t, total, "mmap", &acc->mmap_bytes))
		cell(mi, mr, "hblkhd", &acc->mmap_bytes);
	acc->in_use = add_sat(in_use, acc->mmap_bytes);
	acc->have_keepcost = cell(mi, mr, "keepcost", &acc->keepcost);
	return 0;
}

void alloc_account_jemalloc_derive(struct alloc_account *acc)
{
	uint64_t internal = acc->have_internal ? acc->internal : 0;
	uint64_t cached = acc->have_tcache_bytes ? acc->tcache_bytes : 0;

	/*
	 * jemalloc's internal allocations (each thread's tcache stacks,
	 * about 29 KiB a thread) are in stats.allocated and in
	 * stats.metadata ("base + internal"): counted once, as metadata.
	 */
	if (internal > acc->allocated)
		internal = acc->allocated;
	acc->in_use = acc->allocated - internal;
	/* freed blocks the threads' caches keep are in allocated too:
	 * free, for the program (they go into free below) */
	acc->in_use = sub0(acc->in_use, cached);
	acc->have_in_use = true;
	if (!acc->have_resident)
		return;
	/* resident = the base's resident pages + active + dirty pages */
	acc->free = sub0(sub0(acc->resident, acc->in_use), acc->metadata);
	acc->have_free = true;
	if (!acc->have_active)
		return;
	acc->pdirty = sub0(sub0(acc->resident, acc->active),
			   sub0(acc->metadata, internal));
	acc->have_pdirty = true;
}

uint64_t alloc_account_metadata_resident(const struct alloc_account *acc,
					 uint64_t anon_huge,
					 uint64_t huge_page)
{
	uint64_t thp = 0;

	/* without the kernel's huge page size, stats.metadata alone */
	if (acc->have_metadata_thp_pages && huge_page)
		thp = acc->metadata_thp_pages > UINT64_MAX / huge_page
			      ? UINT64_MAX
			      : acc->metadata_thp_pages * huge_page;
	/* the huge pages it asked for that the kernel gave */
	if (thp > anon_huge)
		thp = anon_huge;
	return thp > acc->metadata ? thp : acc->metadata;
}

static int from_jemalloc(const struct alloc_stats *st,
			 struct alloc_account *acc)
{
	const struct alloc_stat_table *t = table(st, "total");
	const struct alloc_stat_row *r = row(t, "total");
	uint64_t v;

	if (!cell(t, r, "allocated", &acc->allocated))
		return -ENOENT;
	acc->have_metadata = cell(t, r, "metadata", &acc->metadata);
	acc->have_active = cell(t, r, "active", &acc->active);
	cell(t, r, "mapped", &acc->mapped);
	cell(t, r, "retained", &acc->retained);
	if (cell(t, r, "arenas", &v))
		acc->narenas = v > 1u << 20 ? 1u << 20 : (unsigned int)v;
	acc->have_resident = cell(t, r, "resident", &acc->resident);
	alloc_account_jemalloc_derive(acc);
	return 0;
}

static int from_tcmalloc(const struct alloc_stats *st,
			 struct alloc_account *acc)
{
	static const char *const caches[] = { "central_cache_free",
					      "transfer_cache_free",
					      "thread_cache_free" };
	const struct alloc_stat_table *t = table(st, "total");
	const struct alloc_stat_row *r = row(t, "total");
	uint64_t heap = 0, v;
	size_t i;

	if (!cell(t, r, "allocated", &acc->in_use))
		return -ENOENT;
	acc->have_in_use = true;
	acc->have_free = cell(t, r, "pageheap_free", &acc->pageheap_free);
	cell(t, r, "pageheap_unmapped", &acc->pageheap_unmapped);
	for (i = 0; i < sizeof(caches) / sizeof(caches[0]); i++)
		if (cell(t, r, caches[i], &v))
			acc->caches = add_sat(acc->caches, v);
	acc->free = add_sat(acc->pageheap_free, acc->caches);
	acc->have_free = acc->have_free || acc->caches;
	/* total_physical_bytes = heap_size + metadata - unmapped */
	if (cell(t, r, "heap_size", &heap) &&
	    cell(t, r, "physical", &acc->resident)) {
		acc->have_resident = true;
		acc->metadata = sub0(add_sat(acc->resident,
					     acc->pageheap_unmapped), heap);
		acc->have_metadata = true;
	}
	return 0;
}

static int from_mimalloc(const struct alloc_stats *st,
			 struct alloc_account *acc)
{
	static const char *const bins[] = { "normal", "large", "huge",
					    "giant" };
	const struct alloc_stat_table *t = table(st, "memory");
	uint64_t v;
	size_t i;

	if (!cell(t, row(t, "committed"), "current", &acc->committed))
		return -ENOENT;
	cell(t, row(t, "reserved"), "current", &acc->reserved);
	acc->resident = acc->committed;
	acc->have_resident = true;
	for (i = 0; i < sizeof(bins) / sizeof(bins[0]); i++)
		if (cell(t, row(t, bins[i]), "current", &v)) {
			acc->in_use = add_sat(acc->in_use, v);
			acc->have_in_use = true;
		}
	if (acc->have_in_use) {
		acc->free = sub0(acc->committed, acc->in_use);
		acc->have_free = true;
	} else {
		/*
		 * A release build counts no blocks: what it committed holds
		 * what the program holds and the pages it keeps free, and
		 * nothing tells them apart (mi_heap_visit_blocks() would
		 * reach the borrowed thread's heap only, block by block).
		 */
		acc->in_use_with_free = true;
	}
	return 0;
}

int alloc_account_from_stats(enum alloc_kind kind,
			     const struct alloc_stats *st,
			     struct alloc_account *acc)
{
	memset(acc, 0, sizeof(*acc));
	acc->kind = kind;
	switch (kind) {
	case ALLOC_GLIBC:
		return from_glibc(st, acc);
	case ALLOC_JEMALLOC:
		return from_jemalloc(st, acc);
	case ALLOC_TCMALLOC:
	case ALLOC_TCMALLOC_MINIMAL:
		return from_tcmalloc(st, acc);
	case ALLOC_MIMALLOC:
		return from_mimalloc(st, acc);
	default:
		return -ENOENT;
	}
}
