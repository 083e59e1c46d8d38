#ifndef MEMSNAP_COMMON_HIDX_H
#define MEMSNAP_COMMON_HIDX_H

#include <stddef.h>
#include <stdint.h>

/*
 * An open-addressing hash index over an array the caller owns: each
 * slot holds 1 + the position of an entry (0: empty), so the table
 * costs 4 bytes a slot and the entries stay in insertion order.  The
 * caller hashes and compares; this keeps the slots.
 *
 *   for (j = hidx_first(&h, hash); h.slot[j]; j = hidx_next(&h, j))
 *           if (equal(entries[h.slot[j] - 1], key)) ...found...
 *   if (!h.slot[j]) { add entry n; h.slot[j] = n + 1; }
 *
 * Grow before adding (hidx_need()), so a probe always ends on an empty
 * slot.
 */
struct hidx {
	uint32_t *slot;
	size_t cap;	/* a power of two, 0 before the first hidx_need() */
};

/*
 * Room for @n entries at most half full: when it is short, a table
 * twice as big (at least @min slots) into which entries [0, @n - 1)
 * are placed again by @hash_of(@ctx, i).  0 or -ENOMEM (the old table
 * kept).
 */
int hidx_need(struct hidx *h, size_t n, size_t min,
	      uint64_t (*hash_of)(const void *ctx, size_t i), const void *ctx);

static inline size_t hidx_first(const struct hidx *h, uint64_t hash)
{
	return (size_t)hash & (h->cap - 1);
}

static inline size_t hidx_next(const struct hidx *h, size_t j)
{
	return (j + 1) & (h->cap - 1);
}

void hidx_free(struct hidx *h);

#endif
