#ifndef MEMSNAP_ALLOCATORS_ACCOUNT_H
#define MEMSNAP_ALLOCATORS_ACCOUNT_H

#include "allocators/allocator.h"

#include <stdbool.h>
#include <stdint.h>

/*
 * An allocator's own account of the memory it holds, in the same words
 * for every allocator, for `explain`: what the program holds (in_use),
 * what the allocator holds free (free), and its metadata; with the
 * numbers and settings the findings quote.  Built from the tables of
 * `stats` (alloc_account_from_stats(), pure), but for jemalloc from
 * mallctl calls of its own (alloc_account()).
 *
 *   glibc     in_use = arenas' (system - free) + mmap'd chunks
 *             free   = fastbins + bins + top, every arena
 *             metadata: none apart (chunk headers are in in_use)
 *   jemalloc  in_use = stats.allocated - internal (jemalloc's own
 *             allocations, its tcaches' stacks: inside allocated and
 *             inside stats.metadata too), metadata = stats.metadata,
 *             free   = stats.resident - in_use - metadata (dirty pages,
 *             the unused part of active pages and of base blocks)
 *   tcmalloc  in_use = generic.current_allocated_bytes, free = page
 *             heap free + central, transfer and thread caches,
 *             metadata = total_physical - heap_size + unmapped
 *   mimalloc  committed as resident; in use where it prints it (a
 *             debug build's bins), else in_use_with_free
 *
 * A number the allocator did not give has its have_ flag false.
 */
struct alloc_account {
	enum alloc_kind kind;
	bool have_in_use, have_free, have_metadata, have_resident;
	uint64_t in_use, free, metadata;
	uint64_t resident;	/* what it says is resident, 0 unknown */
	bool in_use_with_free;	/* no in use nor free apart: a mimalloc
				   release build prints only what it
				   committed (committed) */
	/* glibc */
	unsigned int arenas;	/* rows of malloc_info: main + others */
	uint64_t arena_system;	/* bytes the arenas got from the kernel */
	uint64_t mmap_bytes;	/* chunks mmap'd on their own */
	uint64_t keepcost;	/* releasable from the main arena's top */
	uint64_t free_other_arenas;	/* free in arenas but the main one */
	bool have_keepcost;
	/* jemalloc */
	uint64_t allocated, active;
	bool have_active;
	uint64_t mapped, retained;	/* mapped: from the tables of `stats`
					   only; retained: there, or read
					   with want.all (have_retained) */
	bool have_retained;
	uint64_t muzzy;		/* stats.arenas.<all>.pmuzzy x the page:
				   with want.all only */
	bool have_muzzy;
	uint64_t internal;	/* stats.arenas.<all>.internal: in allocated
				   and in metadata both */
	bool have_internal;
	uint64_t tcache_bytes;	/* stats.arenas.<all>.tcache_bytes: freed
				   blocks the threads' caches keep, which
				   allocated counts as in use */
	bool have_tcache_bytes;
	uint64_t metadata_thp_pages;	/* stats.metadata_thp: huge pages
					   its metadata is on */
	bool have_metadata_thp_pages;
	uint64_t pdirty;	/* bytes: resident - active - (metadata -
				   internal) */
	bool have_pdirty;
	int64_t dirty_decay_ms, muzzy_decay_ms;
	bool have_dirty_decay, have_muzzy_decay;
	bool background_thread, have_background_thread;
	bool prof;		/* opt.prof: heap profiles can be had (false
				   too when mallctl has no opt.prof: built
				   without profiling) */
	unsigned int narenas;
	uint64_t page;		/* arenas.page: the page size it was built for */
	char metadata_thp[16];	/* "" unknown */
	char conf_var[ALLOC_MAX_PREFIX + 16];	/* MALLOC_CONF, ... */
	/* tcmalloc */
	uint64_t pageheap_free, pageheap_unmapped, caches;
	/* mimalloc */
	uint64_t reserved, committed;
};

/* The account of an allocator of @kind from the tables of
 * alloc_stats() @st.  0, or -ENOENT when they hold nothing usable. */
int alloc_account_from_stats(enum alloc_kind kind,
			     const struct alloc_stats *st,
			     struct alloc_account *acc);

/*
 * jemalloc's in use, free and dirty pages from allocated, internal,
 * metadata, active and resident of @acc (internal 0 when not read).
 * alloc_account_from_stats() and alloc_account() call it.
 */
void alloc_account_jemalloc_derive(struct alloc_account *acc);

/*
 * The bytes of jemalloc's metadata resident: stats.metadata, or the
 * huge pages it is on (stats.metadata_thp x @huge_page, the kernel's,
 * where metadata_thp put it on transparent huge pages) as far as
 * @anon_huge (AnonHugePages where it can live) shows the kernel gave
 * them, whichever is more.  A huge page is resident whole, however
 * little of it the metadata uses: the issue of jemalloc on arm64 with
 * 64 KiB pages, where they are 512 MiB.
 */
uint64_t alloc_account_metadata_resident(const struct alloc_account *acc,
					 uint64_t anon_huge,
					 uint64_t huge_page);

/* What explain knows before it borrows a thread, so that the account
 * reads a number only where it can change a part or a finding. */
struct alloc_account_want {
	uint64_t min_bytes;	/* a finding's threshold */
	uint64_t anon_huge;	/* AnonHugePages of the anonymous memory
				   the allocator can live in */
	uint64_t huge_page;	/* the kernel's huge page, 0 unknown */
	uint64_t rss;		/* VmRSS, 0 unknown */
	/* every number a dashboard shows, not only those a part or a
	 * finding needs: for jemalloc active, retained, muzzy pages,
	 * narenas and the page size, five calls more (the exporter) */
	bool all;
};

/*
 * The account of @a in session @s: alloc_stats() (its tables only; @dir
 * as for alloc_stats()), but for jemalloc calls of its own (`stats`
 * reads numbers no part needs): after an epoch, stats.allocated,
 * active, metadata and resident; stats.arenas.<all>.internal where it
 * could be a hundredth of allocated (it is at most metadata);
 * stats.metadata_thp where the huge pages of @w could hold more
 * metadata than stats.metadata; and the settings a finding would
 * quote, each only where that finding can fire (decay and background
 * thread for what it holds free; narenas and metadata_thp for its
 * metadata; arenas.page for both; opt.prof for what is in use).  The
 * thread stays stopped for 5 to 7 calls where `stats` makes 8, and up
 * to 14 when every finding is there.
 * 0, or an error of alloc_stats(), of mallctl (-EREMOTEIO: the
 * session says why) or of the engine.
 */
int alloc_account(struct alloc_session *s, const struct allocator *a,
		  struct dumpdir *dir, const struct alloc_account_want *w,
		  struct alloc_account *acc);

/*
 * A second allocator, one that does not serve malloc: its in use and
 * free, from mallinfo2() alone for glibc (one call), else from
 * alloc_state() (stats.* for jemalloc, two properties for tcmalloc;
 * mimalloc's state has none).  0, or an error of the engine; numbers it lacks have
 * their have_ flag false.
 */
int alloc_account_state(struct alloc_session *s, const struct allocator *a,
			struct alloc_account *acc);

#endif
