/*
 * The unwinder's page cache (injector/unwind/pages.h).
 */
#include "injector/unwind/pages.h"

#include <stdlib.h>
#include <string.h>

/* Sets of WAYS, the least recently used one replaced (the pages of two
 * objects at the same offset in their 2 MiB must both stay: one slot
 * each would make them take turns). */
#define CACHE_SETS 1024
#define CACHE_WAYS 4

struct page_slot {
	uint64_t tag;			/* page address + 1; 0: empty */
	uint64_t gen;			/* 0: kept; else its unwind */
	uint64_t used;			/* tick of the last use */
};

struct page_cache {
	unwind_page_fn page;
	void *arg;
	struct page_slot slot[CACHE_SETS][CACHE_WAYS];
	uint64_t tick;
	unsigned char data[CACHE_SETS][CACHE_WAYS][UNWIND_PAGE];
};

struct page_cache *page_cache_new(unwind_page_fn page, void *arg)
{
	struct page_cache *pc = calloc(1, sizeof(*pc));

	if (pc) {
		pc->page = page;
		pc->arg = arg;
	}
	return pc;
}

void page_cache_free(struct page_cache *pc)
{
	free(pc);
}

void page_cache_clear(struct page_cache *pc)
{
	memset(pc->slot, 0, sizeof(pc->slot));
}

int page_cache_read(struct page_cache *pc, uint64_t addr, void *buf,
		    size_t len, uint64_t gen, bool index)
{
	unsigned char *out = buf;

	while (len) {
		uint64_t page = addr & ~(uint64_t)(UNWIND_PAGE - 1);
		size_t off = (size_t)(addr - page), n = UNWIND_PAGE - off;
		/* Fibonacci hashing: neighbouring pages, different sets */
		size_t set = (size_t)((page / UNWIND_PAGE *
				       0x9e3779b97f4a7c15ull) >> 54);
		struct page_slot *w = pc->slot[set], *s = NULL;
		size_t i, victim = 0;

		if (n > len)
			n = len;
		for (i = 0; i < CACHE_WAYS && !s; i++)
			if (w[i].tag == page + 1 &&
			    (!w[i].gen || w[i].gen == gen))
				s = &w[i];
			else if (w[i].used < w[victim].used)
				victim = i;
		if (!s) {
			s = &w[victim];
			s->tag = 0;
			if (pc->page(pc->arg, page, pc->data[set][s - w],
				     index))
				return -1;
			s->tag = page + 1;
			s->gen = gen;
		}
		s->used = ++pc->tick;
		memcpy(out, pc->data[set][s - w] + off, n);
		out += n;
		addr += n;
		len -= n;
	}
	return 0;
}
