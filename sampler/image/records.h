#ifndef MEMSNAP_SAMPLER_IMAGE_RECORDS_H
#define MEMSNAP_SAMPLER_IMAGE_RECORDS_H

/*
 * Between the two halves of the sampler's in-target code: records.c (the
 * hooks, the records) and slots.c (the GOT slots: memsnap's switch on
 * and off, and objects dlopen brings).  Freestanding, like them.
 */
#pragma GCC visibility push(hidden)

#include "sampler/layout.h"
#include SAMPLER_ARCH_H

#include <stdbool.h>

extern struct sampler_ctl sampler_ctl;

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define ADD(x, v) __atomic_fetch_add(&(x), (v), __ATOMIC_RELAXED)

/* The original of hook @fn (an enum sampler_fn, | SAMPLER_DIRECT for
 * the direct family: a constant in every hook, so the test folds). */
static inline uint64_t orig(unsigned int fn)
{
	return fn & SAMPLER_DIRECT
		       ? LOAD(sampler_ctl.direct[fn & ~SAMPLER_DIRECT])
		       : LOAD(sampler_ctl.orig[fn]);
}

/* This process's pid, for process_vm_readv on itself: cached in a page
 * a fork child gets zeroed (ctl.wiped), else asked every time. */
long self_pid(void);

struct iov { uint64_t base, len; };

/* process_vm_readv of this process, @nl local pieces from @nr remote
 * ones: the bytes copied (a partial copy ends at a piece that failed),
 * or -errno.  A cached pid of a process that is gone is asked again,
 * once. */
long remote_read(const struct iov *local, long nl, const struct iov *remote,
		 long nr);

/* Copy @len bytes at @addr of this process into @to without faulting
 * (process_vm_readv on itself: the kernel's copy stops at an unmapped
 * page).  The bytes copied; 0 when memsnap found the call forbidden. */
uint64_t copy_self(void *to, uint64_t addr, uint64_t len);

/*
 * The table's parts (sampler/layout.h), from the geometry memsnap set:
 * false when there is none, or when the length does not match it (a
 * table the process wrote over must not send a hook past its mapping).
 */
struct geo {
	uint64_t *keys;
	unsigned char *counts;
	uint32_t *heads;
	struct sampler_kept *kept;
	uint32_t *next;
	unsigned char *pool;
	uint64_t n, nchunks, chunk_bytes, stack_bytes;
};

bool geo_of(struct geo *g);

/* The record in chunk @c, or NULL for a chunk outside the pool (0, or
 * an index the process wrote). */
static inline struct sampler_rec *rec_at(const struct geo *g, uint64_t c)
{
	return c && c < g->nchunks
		       ? (struct sampler_rec *)(g->pool + c * g->chunk_bytes)
		       : NULL;
}

/* Between pool.c (the chunks and the reservoir) and records.c. */

/* Up to @want chunks into @chain, first from the free list, then never
 * used ones: how many (0: the pool is spent). */
uint32_t chunks_take(const struct geo *g, uint32_t want, uint32_t *chain);

/* The @n chunks of @chain back to the pool. */
void chunks_give(const struct geo *g, const uint32_t *chain, uint32_t n);

/* Record @r's chunks back to the pool, unless it was taken before the
 * last switch-on (its chunks are the new round's now). */
void rec_give(const struct geo *g, struct sampler_rec *r);

/* Offer the record @r at chunk @head, its block just freed, to the
 * reservoir, which keeps it or gives its chunks back. */
void keep(const struct geo *g, uint64_t head, struct sampler_rec *r);

/* splitmix64's finalizer: every bit of @x reaches every bit. */
static inline uint64_t mix64(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Between slots.c and dlopen.c: log @s, then swap it (a dlopen hook's
 * slot, one at a time): its result, SAMPLER_SLOT_* or -errno. */
uint64_t log_and_swap(const struct sampler_slot *s);

/* Between records.c (the records) and hooks.c (the hooks). */

/*
 * The slot of the calling thread: its thread pointer hashed by a
 * multiplier that fits an instruction's 32-bit immediate (sign-
 * extended, 0x9e3779b1 is still an odd 64-bit multiplier), so that a
 * hook's fast path needs no register for a 64-bit constant.
 */
static inline struct sampler_thread *this_thread(void)
{
	uint64_t h = thread_pointer() * 0xffffffff9e3779b1ull;

	/* the top 10 bits, as a byte offset of a slot: no shift back */
	_Static_assert(sizeof(struct sampler_thread) == 64 &&
			       SAMPLER_NTHREADS == 1024,
		       "a slot is 1 << 6 bytes, and 1 << 10 of them");
	return (struct sampler_thread *)((char *)sampler_ctl.threads +
					 (h >> 48 & 0xffc0));
}

/* May @p have a record?  One byte, read from a small array: the free
 * of an unsampled block costs no more.  (sampler_on() sets both words
 * before any hook is in: from a table geo_of() accepts, else to a zero
 * byte of its own and a mask of 0.) */
static inline bool maybe_sampled(uint64_t p)
{
	const unsigned char *counts =
		(const unsigned char *)LOAD(sampler_ctl.counts);

	return LOAD(counts[sampler_bucket_hash(p) &
			   LOAD(sampler_ctl.bucket_mask)]);
}

/* The countdown of @t ran out on @size bytes: draw the next one.  true
 * when the block is to be recorded. */
bool redraw(struct sampler_thread *t, uint64_t size);

/*
 * Count @size against this thread: true when its countdown ran out.
 * This and a sibling call are all an unsampled allocation costs: the
 * rest (redraw(), the original, the record) is in the hooks' out-of-line
 * halves.
 */
static inline bool ran_out(uint64_t size)
{
	struct sampler_thread *t;
	int64_t left;

	/* Whether sampling is on is asked only when a countdown runs out
	 * (redraw()): switched off, the hooks are out of every slot. */
	t = this_thread();
	/* unsigned: a size past INT64_MAX wraps instead of overflowing */
	left = (int64_t)((uint64_t)LOAD(t->left) - size);
	STORE(t->left, left);
	return __builtin_expect(left <= 0, 0);
}

/* Record block @p of @size from @caller, by hook @fn (no-op: dropped
 * when the table is full); forget @p's record, if it has one, its size
 * into *@size. */
void remember(uint64_t p, uint64_t size, uint64_t caller, uint64_t fn);
bool forget(uint64_t p, uint64_t *size);

/* The countdown ran out on @size: is this block to be recorded?  The
 * next countdown is drawn before the original is called, so an
 * allocator calling a hooked function does not sample the same bytes
 * twice in a row. */
static inline bool take(uint64_t size)
{
	return redraw(this_thread(), size);
}

static inline void record(unsigned int fn, void *p, uint64_t size,
			  uint64_t caller)
{
	if (p)
		remember((uint64_t)(uintptr_t)p, size, caller, fn);
}

#endif
