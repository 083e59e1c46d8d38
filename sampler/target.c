/*
 * The sampler's code inside the target: hooks for the malloc family
 * that count bytes per thread and record every block the countdown
 * picks (sampler/sampler.h), and the two calls memsnap makes on a
 * borrowed thread to swap GOT slots to the hooks and back.  It is copied
 * into an anonymous mapping of the target, so it is freestanding: no
 * libc, no TLS, no data but the zero-filled control block (reached
 * PC-relatively), no relocations (sampler/sampler.mk checks the object
 * and the link).  The hooks never take a lock and never allocate: a
 * signal handler may call one while the thread it interrupted is inside
 * another.  Only a sampled allocation makes system calls (getpid and
 * process_vm_readv, to copy its stack without faulting), and only when
 * memsnap found them allowed.
 *
 * The fast path of every hook is a sibling call to the original, so no
 * frame of the sampler stays on the stack while the allocator runs.
 * The sampled path draws the next countdown before it calls the
 * original, so an allocator that calls a hooked function itself does
 * not sample the same bytes twice in a row.
 */
#pragma GCC visibility push(hidden)

#include "sampler/sampler.h"
#include SAMPLER_ARCH_H

#include <stdbool.h>

struct sampler_ctl sampler_ctl;

typedef void *(*size_fn)(size_t, uint64_t, uint64_t);
typedef void (*free_fn)(void *, uint64_t, uint64_t);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void *(*reallocarray_fn)(void *, size_t, size_t);
typedef int (*posix_memalign_fn)(void **, size_t, size_t);
typedef void *(*align_fn)(size_t, size_t);

/* Records are looked for this far from their hash slot, no farther: a
 * free of a pointer never sampled costs a bounded probe. */
#define PROBE_MAX 32

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define ADD(x, v) __atomic_fetch_add(&(x), (v), __ATOMIC_RELAXED)

static inline uint64_t orig(enum sampler_fn fn)
{
	return LOAD(sampler_ctl.orig[fn]);
}

static inline struct sampler_thread *this_thread(void)
{
	uint64_t h = thread_pointer() * 0x9e3779b97f4a7c15ull;

	return &sampler_ctl.threads[h >> 54 & (SAMPLER_NTHREADS - 1)];
}

/* log2(r) for r >= 1, in 32.32 fixed point, by repeated squaring. */
static uint64_t log2_q32(uint64_t r)
{
	int e = 63 - __builtin_clzll(r), i;
	uint64_t m = e >= 62 ? r >> (e - 62) : r << (62 - e); /* [1, 2) Q62 */
	uint64_t frac = 0;

	for (i = 31; i >= 0; i--) {
		m = (uint64_t)(((unsigned __int128)m * m) >> 62);
		if (m >> 63) {	/* >= 2.0 */
			m >>= 1;
			frac |= 1ull << i;
		}
	}
	return (uint64_t)e << 32 | frac;
}

/*
 * The bytes to the next sample: -mean * ln(u), u uniform in (0, 1], as
 * mean * ln2 * (53 - log2(r)) for a 53-bit draw r (xorshift64*).
 */
static int64_t next_interval(struct sampler_thread *t, uint64_t mean)
{
	uint64_t x = t->rng, r, nl2;
	unsigned __int128 v;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	t->rng = x;
	r = (x * 0x2545f4914f6cdd1dull) >> 11;
	if (!r)
		r = 1;
	nl2 = (53ull << 32) - log2_q32(r);
	v = (unsigned __int128)nl2 * 2977044472ull; /* ln 2 in Q32: Q64 */
	v = (v >> 32) * mean;			      /* Q32 */
	return (int64_t)(v >> 32) + 1;
}

static inline uint64_t slot_of(uint64_t p, uint64_t n)
{
	return ((p >> 4) * 0x9e3779b97f4a7c15ull >> 20) & (n - 1);
}

/* The table's keys, or NULL when there is none (n: its size). */
static inline uint64_t *keys_of(uint64_t *n)
{
	uint64_t *k = (uint64_t *)LOAD(sampler_ctl.table);

	*n = LOAD(sampler_ctl.nrecs);
	return k && *n && !(*n & (*n - 1)) ? k : NULL;
}

static inline struct sampler_rec *rec_of(uint64_t *keys, uint64_t n,
					 uint64_t i)
{
	return (struct sampler_rec *)((char *)keys + sampler_recs_off(n)) + i;
}

/* Copy @len bytes of this thread's stack at @sp without faulting on an
 * unmapped page: the kernel's copy stops there.  Bytes copied. */
static uint64_t copy_stack(unsigned char *to, uint64_t sp, uint64_t len)
{
	struct { uint64_t base, len; } local = { (uint64_t)(uintptr_t)to, len },
				       remote = { sp, len };
	long pid, n;

	if (LOAD(sampler_ctl.copy) != SAMPLER_COPY_VM_READV || !len)
		return 0;
	/* Asked each time: a fork child has the parent's control block. */
	pid = raw_syscall6(SYS_getpid_nr, 0, 0, 0, 0, 0, 0);
	n = raw_syscall6(SYS_process_vm_readv_nr, pid, (long)&local, 1,
			 (long)&remote, 1, 0);
	return n > 0 ? (uint64_t)n : 0;
}

/*
 * Record block @p of @size from @caller: claim a key, then fill the
 * record, the registers and the stack, and publish the record's ptr
 * last.  Not inlined: its frame is where the registers are taken, and
 * memsnap unwinds out of it with the sampler's own CFI.
 */
__attribute__((noinline)) static void remember(uint64_t p, uint64_t size,
					       uint64_t caller)
{
	uint64_t n, h, i, *keys = keys_of(&n);

	if (!keys) {
		ADD(sampler_ctl.dropped, 1);
		return;
	}
	h = slot_of(p, n);
	for (i = 0; i < PROBE_MAX && i < n; i++) {
		uint64_t j = (h + i) & (n - 1), k = LOAD(keys[j]);
		struct sampler_rec *r;
		uint64_t sb;

		/* A stale record of the same address (freed where no hook
		 * saw it) is taken over. */
		if ((k != 0 && k != SAMPLER_GONE && k != p) ||
		    !__atomic_compare_exchange_n(&keys[j], &k, p, false,
						 __ATOMIC_ACQUIRE,
						 __ATOMIC_RELAXED))
			continue;
		r = rec_of(keys, n, j);
		STORE(r->ptr, 0);
		r->size = size;
		r->caller = caller;
		capture_regs(r->regs);
		sb = LOAD(sampler_ctl.stack_bytes);
		r->stack_len = copy_stack((unsigned char *)keys +
						  sampler_stacks_off(n) + j * sb,
					  r->regs[1], sb);
		__atomic_store_n(&r->ptr, p, __ATOMIC_RELEASE);
		ADD(sampler_ctl.samples, 1);
		return;
	}
	ADD(sampler_ctl.dropped, 1);
}

/* Forget @p's record, if it has one; its size into *@size.  The caller
 * frees @p afterwards: once freed, the address may be handed out and
 * sampled again. */
static bool forget(uint64_t p, uint64_t *size)
{
	uint64_t n, h, i, *keys;

	if (LOAD(sampler_ctl.samples) == LOAD(sampler_ctl.freed) ||
	    !(keys = keys_of(&n)))
		return false;
	h = slot_of(p, n);
	for (i = 0; i < PROBE_MAX && i < n; i++) {
		uint64_t j = (h + i) & (n - 1), k = LOAD(keys[j]);

		if (k == 0)
			return false;
		if (k != p)
			continue;
		*size = LOAD(rec_of(keys, n, j)->size);
		if (__atomic_compare_exchange_n(&keys[j], &k, SAMPLER_GONE,
						false, __ATOMIC_RELEASE,
						__ATOMIC_RELAXED)) {
			ADD(sampler_ctl.freed, 1);
			return true;
		}
		return false;
	}
	return false;
}

/* The countdown of @t ran out on @size bytes: draw the next one.  true
 * when the block is to be recorded. */
__attribute__((noinline)) static bool redraw(struct sampler_thread *t,
					     uint64_t size)
{
	uint64_t mean = LOAD(sampler_ctl.mean);
	int64_t left;

	if (!mean)
		return false;
	if (!t->rng) {
		/* First use of this slot: start its countdown here. */
		t->rng = thread_pointer() ^ (uint64_t)(uintptr_t)t ^
			 0x853c49e6748fea9bull;
		if (!t->rng)
			t->rng = 1;
		left = (int64_t)((uint64_t)next_interval(t, mean) - size);
		if (left > 0) {
			STORE(t->left, left);
			return false;
		}
	}
	STORE(t->left, next_interval(t, mean));
	return true;
}

/* Count @size against this thread.  true when the countdown ran out:
 * the next one is drawn already, and the block is to be recorded. */
static inline bool due(uint64_t size)
{
	struct sampler_thread *t;
	int64_t left;

	if (!LOAD(sampler_ctl.active))
		return false;
	t = this_thread();
	/* unsigned: a size past INT64_MAX wraps instead of overflowing */
	left = (int64_t)((uint64_t)LOAD(t->left) - size);
	STORE(t->left, left);
	if (__builtin_expect(left > 0, 1))
		return false;
	return redraw(t, size);
}

static inline void record(void *p, uint64_t size, uint64_t caller)
{
	if (p)
		remember((uint64_t)(uintptr_t)p, size, caller);
}

#define CALLER() ((uint64_t)(uintptr_t)__builtin_return_address(0))

/*
 * malloc(size) and its kin: valloc, pvalloc, and the allocator's own
 * operator new (nothrow and aligned forms: their further arguments
 * pass through untouched).
 */
__attribute__((noinline)) static void *
size_sampled(size_fn f, size_t size, uint64_t a1, uint64_t a2,
	     uint64_t caller)
{
	void *p = f(size, a1, a2);

	record(p, size, caller);
	return p;
}

static inline __attribute__((always_inline)) void *
size_hook(enum sampler_fn fn, size_t size, uint64_t a1, uint64_t a2,
	  uint64_t caller)
{
	size_fn f = (size_fn)orig(fn);

	if (__builtin_expect(!due(size), 1))
		return f(size, a1, a2);
	return size_sampled(f, size, a1, a2, caller);
}

/*
 * The nothrow object the throwing forms pass to their nothrow twins:
 * std::nothrow_t is empty, only its address is passed.  Zero-filled
 * like the rest of the control block's pages.
 */
static char nothrow_tag;

#define NOTHROW() ((uint64_t)(uintptr_t)&nothrow_tag)

/*
 * The throwing operator new: a sampled call goes through the nothrow
 * form @safe, so that no exception ever unwinds through the sampler's
 * frame (the target's unwinder knows nothing of this mapping); if that
 * gives NULL, the throwing form is called as a sibling and throws from
 * where the caller expects.  Without @safe it is never sampled.
 */
static inline __attribute__((always_inline)) void *
new_hook(enum sampler_fn fn, enum sampler_fn safe, size_t size,
	 uint64_t align, uint64_t caller)
{
	size_fn f = (size_fn)orig(fn), g = (size_fn)orig(safe);
	void *p;

	if (__builtin_expect(!g || !due(size), 1))
		return f(size, align, 0);
	p = g(size, align ? align : NOTHROW(), align ? NOTHROW() : 0);
	if (!p)
		return f(size, align, 0);
	record(p, size, caller);
	return p;
}

/* free(p) and every operator delete: further arguments pass through. */
static inline __attribute__((always_inline)) void
free_hook(enum sampler_fn fn, void *p, uint64_t a1, uint64_t a2)
{
	free_fn f = (free_fn)orig(fn);
	uint64_t size;

	if (p && LOAD(sampler_ctl.samples) != LOAD(sampler_ctl.freed))
		forget((uint64_t)(uintptr_t)p, &size);
	f(p, a1, a2);
}

#define SIZE_HOOK(name, fn)                                              \
	void *name(size_t size, uint64_t a1, uint64_t a2)                \
	{                                                                \
		return size_hook(fn, size, a1, a2, CALLER());            \
	}
#define FREE_HOOK(name, fn)                                              \
	void name(void *p, uint64_t a1, uint64_t a2)                     \
	{                                                                \
		free_hook(fn, p, a1, a2);                                \
	}

SIZE_HOOK(sampler_malloc, SAMPLER_MALLOC)
SIZE_HOOK(sampler_valloc, SAMPLER_VALLOC)
SIZE_HOOK(sampler_pvalloc, SAMPLER_PVALLOC)
SIZE_HOOK(sampler_new_nothrow, SAMPLER_NEW_NOTHROW)
SIZE_HOOK(sampler_new_array_nothrow, SAMPLER_NEW_ARRAY_NOTHROW)
SIZE_HOOK(sampler_new_aligned_nothrow, SAMPLER_NEW_ALIGNED_NOTHROW)
SIZE_HOOK(sampler_new_array_aligned_nothrow,
	  SAMPLER_NEW_ARRAY_ALIGNED_NOTHROW)
FREE_HOOK(sampler_free, SAMPLER_FREE)
FREE_HOOK(sampler_delete, SAMPLER_DELETE)
FREE_HOOK(sampler_delete_array, SAMPLER_DELETE_ARRAY)
FREE_HOOK(sampler_delete_sized, SAMPLER_DELETE_SIZED)
FREE_HOOK(sampler_delete_array_sized, SAMPLER_DELETE_ARRAY_SIZED)
FREE_HOOK(sampler_delete_aligned, SAMPLER_DELETE_ALIGNED)
FREE_HOOK(sampler_delete_array_aligned, SAMPLER_DELETE_ARRAY_ALIGNED)
FREE_HOOK(sampler_delete_sized_aligned, SAMPLER_DELETE_SIZED_ALIGNED)
FREE_HOOK(sampler_delete_array_sized_aligned,
	  SAMPLER_DELETE_ARRAY_SIZED_ALIGNED)
FREE_HOOK(sampler_delete_nothrow, SAMPLER_DELETE_NOTHROW)
FREE_HOOK(sampler_delete_array_nothrow, SAMPLER_DELETE_ARRAY_NOTHROW)

void *sampler_new(size_t size)
{
	return new_hook(SAMPLER_NEW, SAMPLER_NEW_NOTHROW, size, 0, CALLER());
}

void *sampler_new_array(size_t size)
{
	return new_hook(SAMPLER_NEW_ARRAY, SAMPLER_NEW_ARRAY_NOTHROW, size, 0,
			CALLER());
}

/* The aligned forms: (size, align); their nothrow twins (size, align,
 * nothrow).  An alignment is never 0. */
void *sampler_new_aligned(size_t size, uint64_t align)
{
	return new_hook(SAMPLER_NEW_ALIGNED, SAMPLER_NEW_ALIGNED_NOTHROW, size,
			align, CALLER());
}

void *sampler_new_array_aligned(size_t size, uint64_t align)
{
	return new_hook(SAMPLER_NEW_ARRAY_ALIGNED,
			SAMPLER_NEW_ARRAY_ALIGNED_NOTHROW, size, align,
			CALLER());
}

void *sampler_calloc(size_t n, size_t size)
{
	calloc_fn f = (calloc_fn)orig(SAMPLER_CALLOC);
	size_t bytes;
	void *p;

	/* An overflow is the allocator's to refuse, and never a sample. */
	if (__builtin_mul_overflow(n, size, &bytes) ||
	    __builtin_expect(!due(bytes), 1))
		return f(n, size);
	p = f(n, size);
	record(p, bytes, CALLER());
	return p;
}

/* realloc(old, size) of @bytes; @f calls the original. */
static inline __attribute__((always_inline)) void *
realloc_hook(void *old, size_t bytes, void *(*call)(void *, size_t, size_t,
						     uint64_t),
	     size_t a, size_t b, uint64_t fn, uint64_t caller)
{
	uint64_t old_size = 0;
	bool had, sampled;
	void *p;

	/* The call may free the old block: forget it first. */
	had = old && forget((uint64_t)(uintptr_t)old, &old_size);
	sampled = bytes && due(bytes);
	if (__builtin_expect(!had && !sampled, 1))
		return call(old, a, b, fn);
	p = call(old, a, b, fn);
	/* Failed: the old block lives on, and so does a record of it. */
	if (had && !p && bytes)
		record(old, old_size, caller);
	if (sampled)
		record(p, bytes, caller);
	return p;
}

static inline __attribute__((always_inline)) void *
call_realloc(void *old, size_t size, size_t unused, uint64_t fn)
{
	(void)unused;
	return ((realloc_fn)fn)(old, size);
}

static inline __attribute__((always_inline)) void *
call_reallocarray(void *old, size_t n, size_t size, uint64_t fn)
{
	return ((reallocarray_fn)fn)(old, n, size);
}

void *sampler_realloc(void *old, size_t size)
{
	return realloc_hook(old, size, call_realloc, size, 0,
			    orig(SAMPLER_REALLOC), CALLER());
}

void *sampler_reallocarray(void *old, size_t n, size_t size)
{
	reallocarray_fn f = (reallocarray_fn)orig(SAMPLER_REALLOCARRAY);
	size_t bytes;

	if (__builtin_mul_overflow(n, size, &bytes))
		return f(old, n, size);
	return realloc_hook(old, bytes, call_reallocarray, n, size,
			    (uint64_t)(uintptr_t)f, CALLER());
}

int sampler_posix_memalign(void **out, size_t align, size_t size)
{
	posix_memalign_fn f = (posix_memalign_fn)orig(SAMPLER_POSIX_MEMALIGN);
	int rc;

	if (__builtin_expect(!due(size), 1))
		return f(out, align, size);
	rc = f(out, align, size);
	record(rc ? NULL : *out, size, CALLER());
	return rc;
}

/* aligned_alloc() and memalign(): the same arguments, two originals. */
static inline __attribute__((always_inline)) void *
aligned(enum sampler_fn fn, size_t align, size_t size, uint64_t caller)
{
	align_fn f = (align_fn)orig(fn);
	void *p;

	if (__builtin_expect(!due(size), 1))
		return f(align, size);
	p = f(align, size);
	record(p, size, caller);
	return p;
}

void *sampler_aligned_alloc(size_t align, size_t size)
{
	return aligned(SAMPLER_ALIGNED_ALLOC, align, size, CALLER());
}

void *sampler_memalign(size_t align, size_t size)
{
	return aligned(SAMPLER_MEMALIGN, align, size, CALLER());
}

/* ---- memsnap's calls, on a borrowed thread ------------------------------ */

static long set_prot(uint64_t page, uint64_t len, uint64_t prot)
{
	return raw_syscall6(SYS_mprotect_nr, (long)page, (long)len,
			    (long)prot, 0, 0, 0);
}

/* Swap @slot from @from to @to, the page made writable around it. */
static uint64_t swap_slot(const struct sampler_slot *s, uint64_t from,
			  uint64_t to)
{
	uint64_t *slot = (uint64_t *)(uintptr_t)s->slot, seen = from;
	long rc;

	if (s->page_len) {
		rc = set_prot(s->page, s->page_len, 3 /* PROT_READ|WRITE */);
		if (rc)
			return (uint64_t)rc;
	}
	if (!__atomic_compare_exchange_n(slot, &seen, to, false,
					 __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		rc = SAMPLER_SLOT_CHANGED;
	else
		rc = SAMPLER_SLOT_SWAPPED;
	if (s->page_len)
		set_prot(s->page, s->page_len, s->prot);
	return (uint64_t)rc;
}

/*
 * Switch sampling on: adopt the settings and the table of @a (a table
 * of 0 keeps the current one; originals already set stay), forget every
 * record when it was off, then swap each slot of @a to its hook and log
 * it for sampler_off().  The number of slots swapped; each slot's
 * result says what happened to it.
 */
long sampler_on(struct sampler_on_args *a)
{
	struct sampler_ctl *c = &sampler_ctl;
	uint64_t i, j, n, *keys, swapped = 0;

	for (i = 0; i < SAMPLER_NFN; i++)
		if (!c->orig[i])
			c->orig[i] = a->orig[i];
	if (a->table) {
		c->table = a->table;
		c->table_len = a->table_len;
		c->nrecs = a->nrecs;
		c->stack_bytes = a->stack_bytes;
	}
	c->copy = a->copy;
	STORE(c->mean, a->mean);
	if (!LOAD(c->active) && (keys = keys_of(&n))) {
		for (i = 0; i < n; i++)
			STORE(keys[i], 0);
		STORE(c->samples, 0);
		STORE(c->freed, 0);
		STORE(c->dropped, 0);
	}
	c->version = SAMPLER_VERSION;
	for (i = 0; i < sizeof(c->signature); i++)
		c->signature[i] = SAMPLER_SIGNATURE[i];
	STORE(c->active, 1);
	for (i = 0; i < a->nslots; i++) {
		struct sampler_slot *s = &a->slots[i];

		for (j = 0; j < c->nslots; j++)
			if (c->log[j].slot == s->slot)
				break;
		if (j < c->nslots) {
			s->result = SAMPLER_SLOT_KNOWN;
			continue;
		}
		if (c->nslots == SAMPLER_MAXSLOTS) {
			s->result = (uint64_t)-28; /* -ENOSPC */
			continue;
		}
		/* Logged before the swap: whatever happens next, off finds
		 * it (a slot that was never swapped is left alone there). */
		c->log[c->nslots] = *s;
		c->log[c->nslots].result = 0;
		__atomic_store_n(&c->nslots, c->nslots + 1, __ATOMIC_RELEASE);
		s->result = swap_slot(s, s->from, s->to);
		c->log[c->nslots - 1].result = s->result;
		if (s->result == SAMPLER_SLOT_SWAPPED)
			swapped++;
		else
			c->nslots--;
	}
	STORE(c->started, c->started + 1);
	return (long)swapped;
}

/*
 * Switch sampling off: every logged slot that still holds its hook gets
 * back what it held; one that was changed since is left as it is.  The
 * records stay readable until the next sampler_on().  The number of
 * slots put back.
 */
long sampler_off(void)
{
	struct sampler_ctl *c = &sampler_ctl;
	uint64_t i, restored = 0;

	STORE(c->active, 0);
	for (i = c->nslots; i-- > 0;) {
		struct sampler_slot *s = &c->log[i];

		if (swap_slot(s, s->to, s->from) == SAMPLER_SLOT_SWAPPED)
			restored++;
		__atomic_store_n(&c->nslots, i, __ATOMIC_RELEASE);
	}
	return (long)restored;
}
