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
 * `stats` (alloc_account_from_stats(), pure), plus for jemalloc a few
 * settings read in the same session (alloc_account()).
 *
 *   glibc     in_use = arenas' (system - free) + mmap'd chunks
 *             free   = fastbins + bins + top, every arena
 *             metadata: none apart (chunk headers are in in_use)
 *   jemalloc  in_use = stats.allocated, metadata = stats.metadata,
 *             free   = stats.resident - allocated - metadata (dirty and
 *             muzzy pages, and the unused part of active pages)
 *   tcmalloc  in_use = generic.current_allocated_bytes, free = page
 *             heap free + central, transfer and thread caches,
 *             metadata = total_physical - heap_size + unmapped
 *   mimalloc  committed as resident; in use where it prints it
 *
 * A number the allocator did not give has its have_ flag false.
 */
struct alloc_account {
	enum alloc_kind kind;
	bool have_in_use, have_free, have_metadata, have_resident;
	uint64_t in_use, free, metadata;
	uint64_t resident;	/* what it says is resident, 0 unknown */
	bool in_use_with_free;	/* in_use holds its free memory too: a
				   mimalloc release build prints no in
				   use, only what it committed */
	/* glibc */
	unsigned int arenas;	/* rows of malloc_info: main + others */
	uint64_t arena_system;	/* bytes the arenas got from the kernel */
	uint64_t mmap_bytes;	/* chunks mmap'd on their own */
	uint64_t keepcost;	/* releasable from the main arena's top */
	uint64_t free_other_arenas;	/* free in arenas but the main one */
	bool have_keepcost;
	/* jemalloc */
	uint64_t allocated, active, mapped, retained;
	uint64_t pdirty;	/* bytes: resident - active - metadata */
	bool have_pdirty;
	int64_t dirty_decay_ms, muzzy_decay_ms;
	bool have_dirty_decay, have_muzzy_decay;
	bool background_thread, have_background_thread;
	bool prof;		/* opt.prof: heap profiles can be had */
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
 * alloc_stats() of @a (its tables only; @dir as for alloc_stats()),
 * then for jemalloc the settings a finding would quote, each only when
 * the numbers it explains reach @min_bytes (decay and background thread
 * for what it holds free, metadata_thp for its metadata, arenas.page
 * for both, opt.prof for what is in use), all in session @s: the
 * thread stays stopped for the calls of `stats` and at most five more.
 * 0 or an error of alloc_stats() or of the engine.
 */
int alloc_account(struct alloc_session *s, const struct allocator *a,
		  struct dumpdir *dir, uint64_t min_bytes,
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
