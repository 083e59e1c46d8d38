#ifndef MEMSNAP_INJECTOR_UNWIND_PAGES_H
#define MEMSNAP_INJECTOR_UNWIND_PAGES_H

/*
 * The unwinder's pages of the target (injector/unwind/core.c): each
 * asked for once from its source (in the sandbox: memsnap, over the
 * socket, a round trip each) and kept, 4096 of them, 16 MiB.  A page is
 * kept for one unwind (a stack: it changes while the thread runs) or,
 * of code and CFI, until the cache is cleared.
 */
#include "injector/unwind/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct page_cache;

/* A cache reading through @page(@arg, ...).  NULL on ENOMEM. */
struct page_cache *page_cache_new(unwind_page_fn page, void *arg);
void page_cache_free(struct page_cache *pc);

/* Forget every page. */
void page_cache_clear(struct page_cache *pc);

/*
 * @len bytes at @addr into @buf, the pages from the cache or the source
 * (@index passed on): kept for unwind @gen (> 0) only, or until cleared
 * (@gen 0).  0, or -1 when a page cannot be read.
 */
int page_cache_read(struct page_cache *pc, uint64_t addr, void *buf,
		    size_t len, uint64_t gen, bool index);

#endif
