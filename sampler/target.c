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

#include <elf.h>
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

/* The bucket of block @p among @n / SAMPLER_BUCKET. */
static inline uint64_t bucket_of(uint64_t p, uint64_t n)
{
	return ((p >> 4) * 0x9e3779b97f4a7c15ull >> 20) &
	       (n / SAMPLER_BUCKET - 1);
}

/* The table's keys, or NULL when there is none (n: its size). */
static inline uint64_t *keys_of(uint64_t *n)
{
	uint64_t *k = (uint64_t *)LOAD(sampler_ctl.table);

	*n = LOAD(sampler_ctl.nrecs);
	return k && *n >= SAMPLER_BUCKET && !(*n & (*n - 1)) ? k : NULL;
}

static inline unsigned char *counts_of(uint64_t *keys, uint64_t n)
{
	return (unsigned char *)keys + sampler_counts_off(n);
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
 * Record block @p of @size from @caller: claim a free key of its
 * bucket or the next one (a stale key of the same address, freed where
 * no hook saw it, is taken over), count it in its own bucket's byte,
 * then fill the record, the registers and the
 * stack, and publish the record's ptr last.  Not inlined: its frame is
 * where the registers are taken, and memsnap unwinds out of it with the
 * sampler's own CFI.
 */
__attribute__((noinline)) static void remember(uint64_t p, uint64_t size,
					       uint64_t caller, uint64_t fn)
{
	uint64_t n, b, i, *keys = keys_of(&n);

	if (!keys) {
		ADD(sampler_ctl.dropped, 1);
		return;
	}
	b = bucket_of(p, n);
	for (i = 0; i < 2 * SAMPLER_BUCKET; i++) {
		uint64_t j = (b * SAMPLER_BUCKET + i) & (n - 1), sb;
		uint64_t k = LOAD(keys[j]);
		struct sampler_rec *r;

		if ((k != 0 && k != p) ||
		    !__atomic_compare_exchange_n(&keys[j], &k, p, false,
						 __ATOMIC_ACQUIRE,
						 __ATOMIC_RELAXED))
			continue;
		if (!k)
			__atomic_fetch_add(&counts_of(keys, n)[b], 1,
					   __ATOMIC_RELAXED);
		r = rec_of(keys, n, j);
		STORE(r->ptr, 0);
		r->size = size;
		r->caller = caller;
		r->fn = fn;
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
__attribute__((noinline)) static bool forget(uint64_t p, uint64_t *size)
{
	uint64_t n, b, i, *keys = keys_of(&n);

	if (!keys)
		return false;
	b = bucket_of(p, n);
	for (i = 0; i < 2 * SAMPLER_BUCKET; i++) {
		uint64_t j = (b * SAMPLER_BUCKET + i) & (n - 1), k = p;

		if (LOAD(keys[j]) != p)
			continue;
		*size = LOAD(rec_of(keys, n, j)->size);
		if (!__atomic_compare_exchange_n(&keys[j], &k, 0, false,
						 __ATOMIC_RELEASE,
						 __ATOMIC_RELAXED))
			return false;
		__atomic_fetch_sub(&counts_of(keys, n)[b], 1,
				   __ATOMIC_RELAXED);
		ADD(sampler_ctl.freed, 1);
		return true;
	}
	return false;
}

/* May @p have a record?  One byte, read from a small array: the free
 * of an unsampled block costs no more.  (sampler_on() sets both words
 * from a table keys_of() accepts, or leaves them 0.) */
static inline bool maybe_sampled(uint64_t p)
{
	const unsigned char *counts =
		(const unsigned char *)LOAD(sampler_ctl.counts);

	return counts &&
	       LOAD(counts[((p >> 4) * 0x9e3779b97f4a7c15ull >> 20) &
			   LOAD(sampler_ctl.bucket_mask)]);
}

/* The countdown of @t ran out on @size bytes: draw the next one.  true
 * when the block is to be recorded. */
static bool redraw(struct sampler_thread *t, uint64_t size)
{
	uint64_t mean = LOAD(sampler_ctl.mean);
	int64_t left;

	if (!mean || !LOAD(sampler_ctl.active)) {
		/* a countdown that ticks on while off: seldom here */
		STORE(t->left, INT64_MAX / 2);
		return false;
	}
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

/* The countdown ran out on @size: is this block to be recorded?  The
 * next countdown is drawn before the original is called, so an
 * allocator calling a hooked function does not sample the same bytes
 * twice in a row. */
static inline bool take(uint64_t size)
{
	return redraw(this_thread(), size);
}

static inline void record(enum sampler_fn fn, void *p, uint64_t size,
			  uint64_t caller)
{
	if (p)
		remember((uint64_t)(uintptr_t)p, size, caller, fn);
}

#define CALLER() ((uint64_t)(uintptr_t)__builtin_return_address(0))
#define COLD __attribute__((noinline, cold))

/*
 * malloc(size) and its kin: valloc, pvalloc, and the allocator's own
 * nothrow operator new (aligned or not: further arguments pass through
 * untouched).
 */
static COLD void *size_sampled(enum sampler_fn fn, size_t size, uint64_t a1,
			       uint64_t a2, uint64_t caller)
{
	size_fn f = (size_fn)orig(fn);
	void *p;

	if (!take(size))
		return f(size, a1, a2);
	p = f(size, a1, a2);
	record(fn, p, size, caller);
	return p;
}

#define SIZE_HOOK(name, fn)                                              \
	void *name(size_t size, uint64_t a1, uint64_t a2)                \
	{                                                                \
		if (__builtin_expect(!ran_out(size), 1))                 \
			return ((size_fn)orig(fn))(size, a1, a2);        \
		return size_sampled(fn, size, a1, a2, CALLER());         \
	}

SIZE_HOOK(sampler_malloc, SAMPLER_MALLOC)
SIZE_HOOK(sampler_valloc, SAMPLER_VALLOC)
SIZE_HOOK(sampler_pvalloc, SAMPLER_PVALLOC)
SIZE_HOOK(sampler_new_nothrow, SAMPLER_NEW_NOTHROW)
SIZE_HOOK(sampler_new_array_nothrow, SAMPLER_NEW_ARRAY_NOTHROW)
SIZE_HOOK(sampler_new_aligned_nothrow, SAMPLER_NEW_ALIGNED_NOTHROW)
SIZE_HOOK(sampler_new_array_aligned_nothrow,
	  SAMPLER_NEW_ARRAY_ALIGNED_NOTHROW)

/* free(p) and every operator delete: further arguments pass through. */
static COLD void free_sampled(enum sampler_fn fn, void *p, uint64_t a1,
			      uint64_t a2)
{
	uint64_t size;

	forget((uint64_t)(uintptr_t)p, &size);
	((free_fn)orig(fn))(p, a1, a2);
}

#define FREE_HOOK(name, fn)                                              \
	void name(void *p, uint64_t a1, uint64_t a2)                     \
	{                                                                \
		if (__builtin_expect(                                    \
			    !maybe_sampled((uint64_t)(uintptr_t)p), 1))  \
			return ((free_fn)orig(fn))(p, a1, a2);           \
		free_sampled(fn, p, a1, a2);                             \
	}

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

/*
 * The nothrow object the throwing forms pass to their nothrow twins:
 * std::nothrow_t is empty, only its address is passed.  Zero-filled
 * like the rest of the control block's pages.
 */
static char nothrow_tag;

#define NOTHROW() ((uint64_t)(uintptr_t)&nothrow_tag)

/*
 * The throwing operator new (size) and its aligned form (size, align):
 * a sampled call goes through the nothrow twin @safe, so that no
 * exception ever unwinds through the sampler's frame (the target's
 * unwinder knows nothing of this mapping); if that gives NULL, the
 * throwing form is called again, as a sibling, and throws from where
 * the caller expects.  Without a twin it is never sampled.
 */
static COLD void *new_sampled(enum sampler_fn fn, enum sampler_fn safe,
			      size_t size, uint64_t align, uint64_t caller)
{
	size_fn f = (size_fn)orig(fn), g = (size_fn)orig(safe);
	void *p;

	if (!g || !take(size))
		return f(size, align, 0);
	p = g(size, align ? align : NOTHROW(), align ? NOTHROW() : 0);
	if (!p)
		return f(size, align, 0);
	record(fn, p, size, caller);
	return p;
}

#define NEW_HOOK(name, fn, safe)                                         \
	void *name(size_t size, uint64_t align)                          \
	{                                                                \
		if (__builtin_expect(!ran_out(size), 1))                 \
			return ((size_fn)orig(fn))(size, align, 0);      \
		return new_sampled(fn, safe, size, align, CALLER());     \
	}

NEW_HOOK(sampler_new, SAMPLER_NEW, SAMPLER_NEW_NOTHROW)
NEW_HOOK(sampler_new_array, SAMPLER_NEW_ARRAY, SAMPLER_NEW_ARRAY_NOTHROW)
NEW_HOOK(sampler_new_aligned, SAMPLER_NEW_ALIGNED,
	 SAMPLER_NEW_ALIGNED_NOTHROW)
NEW_HOOK(sampler_new_array_aligned, SAMPLER_NEW_ARRAY_ALIGNED,
	 SAMPLER_NEW_ARRAY_ALIGNED_NOTHROW)

static COLD void *calloc_sampled(size_t n, size_t size, uint64_t caller)
{
	calloc_fn f = (calloc_fn)orig(SAMPLER_CALLOC);
	void *p;

	if (!take(n * size))
		return f(n, size);
	p = f(n, size);
	record(SAMPLER_CALLOC, p, n * size, caller);
	return p;
}

void *sampler_calloc(size_t n, size_t size)
{
	size_t bytes;

	/* An overflow is the allocator's to refuse, and never a sample. */
	if (__builtin_expect(__builtin_mul_overflow(n, size, &bytes) ||
				     !ran_out(bytes),
			     1))
		return ((calloc_fn)orig(SAMPLER_CALLOC))(n, size);
	return calloc_sampled(n, size, CALLER());
}

/*
 * realloc(old, size) of @size: the old block is forgotten first (the
 * call may free it), and remembered again if the call failed; the new
 * one is recorded if its countdown ran out (@counted).
 */
static COLD void *realloc_sampled(enum sampler_fn fn, void *old, size_t size,
				  bool counted, uint64_t caller)
{
	uint64_t old_size = 0;
	bool had, sampled;
	void *p;

	had = old && forget((uint64_t)(uintptr_t)old, &old_size);
	sampled = counted && take(size);
	p = ((realloc_fn)orig(SAMPLER_REALLOC))(old, size);
	/* Failed: the old block lives on, and so does a record of it. */
	if (had && !p && size)
		record(fn, old, old_size, caller);
	if (sampled)
		record(fn, p, size, caller);
	return p;
}

void *sampler_realloc(void *old, size_t size)
{
	bool counted = size && ran_out(size);

	if (__builtin_expect(!counted && !(old && maybe_sampled(
						  (uint64_t)(uintptr_t)old)),
			     1))
		return ((realloc_fn)orig(SAMPLER_REALLOC))(old, size);
	return realloc_sampled(SAMPLER_REALLOC, old, size, counted, CALLER());
}

/*
 * reallocarray(old, n, size) is realloc(old, n * size) once the product
 * is known not to overflow, and so it is done here: glibc's own calls
 * realloc through its GOT, whose slot is hooked too, and its bytes
 * would be counted twice.  An overflow goes to the original, which
 * says ENOMEM as it should.
 */
void *sampler_reallocarray(void *old, size_t n, size_t size)
{
	size_t bytes;
	bool counted;

	if (__builtin_mul_overflow(n, size, &bytes))
		return ((reallocarray_fn)orig(SAMPLER_REALLOCARRAY))(old, n,
								      size);
	counted = bytes && ran_out(bytes);
	if (__builtin_expect(!counted && !(old && maybe_sampled(
						  (uint64_t)(uintptr_t)old)),
			     1))
		return ((realloc_fn)orig(SAMPLER_REALLOC))(old, bytes);
	return realloc_sampled(SAMPLER_REALLOCARRAY, old, bytes, counted,
			       CALLER());
}

static COLD int memalign_sampled(void **out, size_t align, size_t size,
				 uint64_t caller)
{
	posix_memalign_fn f = (posix_memalign_fn)orig(SAMPLER_POSIX_MEMALIGN);
	int rc;

	if (!take(size))
		return f(out, align, size);
	rc = f(out, align, size);
	record(SAMPLER_POSIX_MEMALIGN, rc ? NULL : *out, size, caller);
	return rc;
}

int sampler_posix_memalign(void **out, size_t align, size_t size)
{
	if (__builtin_expect(!ran_out(size), 1))
		return ((posix_memalign_fn)orig(SAMPLER_POSIX_MEMALIGN))(
			out, align, size);
	return memalign_sampled(out, align, size, CALLER());
}

/* aligned_alloc() and memalign(): the same arguments, two originals. */
static COLD void *aligned_sampled(enum sampler_fn fn, size_t align,
				  size_t size, uint64_t caller)
{
	align_fn f = (align_fn)orig(fn);
	void *p;

	if (!take(size))
		return f(align, size);
	p = f(align, size);
	record(fn, p, size, caller);
	return p;
}

void *sampler_aligned_alloc(size_t align, size_t size)
{
	if (__builtin_expect(!ran_out(size), 1))
		return ((align_fn)orig(SAMPLER_ALIGNED_ALLOC))(align, size);
	return aligned_sampled(SAMPLER_ALIGNED_ALLOC, align, size, CALLER());
}

void *sampler_memalign(size_t align, size_t size)
{
	if (__builtin_expect(!ran_out(size), 1))
		return ((align_fn)orig(SAMPLER_MEMALIGN))(align, size);
	return aligned_sampled(SAMPLER_MEMALIGN, align, size, CALLER());
}

/* ---- memsnap's calls, on a borrowed thread ------------------------------ */

static long set_prot(uint64_t page, uint64_t len, uint64_t prot)
{
	return raw_syscall6(SYS_mprotect_nr, (long)page, (long)len,
			    (long)prot, 0, 0, 0);
}

/* Read @len bytes at @addr of this process without faulting. */
static bool read_self(void *to, uint64_t addr, uint64_t len)
{
	struct { uint64_t base, len; } local = { (uint64_t)(uintptr_t)to, len },
				       remote = { addr, len };
	long pid;

	if (LOAD(sampler_ctl.copy) != SAMPLER_COPY_VM_READV)
		return false;
	pid = raw_syscall6(SYS_getpid_nr, 0, 0, 0, 0, 0, 0);
	return raw_syscall6(SYS_process_vm_readv_nr, pid, (long)&local, 1,
			    (long)&remote, 1, 0) == (long)len;
}

/*
 * Swap @slot from @from to @to, the page made writable around it.  The
 * slot is read without faulting first: a library dlclosed since memsnap
 * read it is unmapped now (-EFAULT), or another is mapped there.
 */
static uint64_t swap_slot(const struct sampler_slot *s, uint64_t from,
			  uint64_t to)
{
	uint64_t *slot = (uint64_t *)(uintptr_t)s->slot, seen = from;
	long rc;

	if (LOAD(sampler_ctl.copy) == SAMPLER_COPY_VM_READV) {
		if (!read_self(&seen, s->slot, sizeof(seen)))
			return (uint64_t)-14; /* -EFAULT */
		if (seen != from)
			return SAMPLER_SLOT_CHANGED;
	}
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
 * Log @s, then swap it: whatever happens next, sampler_off() finds it
 * (an entry whose swap failed is harmless there: its slot does not hold
 * the hook).  Entries are reserved atomically, for a dlopen hook may
 * log from another thread at the same time.
 */
static uint64_t log_and_swap(const struct sampler_slot *s)
{
	struct sampler_ctl *c = &sampler_ctl;
	uint64_t i = __atomic_fetch_add(&c->nslots, 1, __ATOMIC_SEQ_CST), r;

	if (i >= SAMPLER_MAXSLOTS) {
		__atomic_fetch_sub(&c->nslots, 1, __ATOMIC_SEQ_CST);
		return (uint64_t)-28; /* -ENOSPC */
	}
	c->log[i] = *s;
	c->log[i].result = 0;
	r = swap_slot(s, s->from, s->to);
	c->log[i].result = r;
	return r;
}

/* ---- objects loaded later ------------------------------------------------ */

/* The loader's link_map, the part every libc shares (<link.h>). */
struct lmap {
	uint64_t l_addr, l_name, l_ld, l_next, l_prev;
};

/* What swap_new() needs of an object: where it is, and its RELRO. */
struct obj {
	uint64_t bias, lo, hi, relro_lo, relro_hi;
	const Elf64_Sym *sym;
	const char *str;
	uint64_t strsz;
};

static bool same_name(const char *a, const char *b)
{
	uint64_t i;

	for (i = 0; i < SAMPLER_NAME_MAX; i++) {
		if (a[i] != b[i])
			return false;
		if (!a[i])
			return true;
	}
	return false;
}

/* A dynamic entry's address: glibc relocates them in place, musl does
 * not; an object's own addresses are never below its bias. */
static uint64_t dyn_ptr(const struct obj *o, uint64_t p)
{
	return p < o->bias ? p + o->bias : p;
}

/* The span and RELRO of the object at bias @l->l_addr, from its program
 * headers (read safely: a bias with no ELF header behind it is skipped). */
static bool obj_of(const struct lmap *l, struct obj *o)
{
	Elf64_Ehdr e;
	Elf64_Phdr ph[32];
	uint64_t i, ps = LOAD(sampler_ctl.page_size);

	o->bias = l->l_addr;
	o->lo = ~0ull;
	o->hi = o->relro_lo = o->relro_hi = 0;
	if (!o->bias || !ps ||
	    !read_self(&e, o->bias, sizeof(e)) || e.e_ident[0] != 0x7f ||
	    e.e_ident[1] != 'E' || e.e_ident[2] != 'L' ||
	    e.e_ident[3] != 'F' || e.e_phentsize != sizeof(Elf64_Phdr) ||
	    !e.e_phnum || e.e_phnum > 32 ||
	    !read_self(ph, o->bias + e.e_phoff, e.e_phnum * sizeof(ph[0])))
		return false;
	for (i = 0; i < e.e_phnum; i++) {
		uint64_t a = o->bias + ph[i].p_vaddr, z = a + ph[i].p_memsz;

		if (ph[i].p_type == PT_LOAD) {
			if (a < o->lo)
				o->lo = a;
			if (z > o->hi)
				o->hi = z;
		} else if (ph[i].p_type == PT_GNU_RELRO) {
			o->relro_lo = a & ~(ps - 1);
			o->relro_hi = z & ~(ps - 1); /* the loader rounds down */
		}
	}
	return o->lo < o->hi;
}

/* One relocation of @o: swap its slot to the hook if it reaches the
 * function the process binds, or the object's own lazy stub. */
static uint64_t swap_rela(const struct obj *o, const Elf64_Rela *r)
{
	struct sampler_ctl *c = &sampler_ctl;
	uint32_t type = ELF64_R_TYPE(r->r_info), si = ELF64_R_SYM(r->r_info);
	struct sampler_slot s;
	const char *name;
	uint64_t fn, cur, ps = LOAD(c->page_size);

	if (type != SAMPLER_R_JUMP_SLOT && type != SAMPLER_R_GLOB_DAT)
		return 0;
	if (!si || o->sym[si].st_name >= o->strsz)
		return 0;
	name = o->str + o->sym[si].st_name;
	for (fn = 0; fn < SAMPLER_NFN; fn++)
		if (c->hook[fn] && same_name(name, c->names[fn]))
			break;
	if (fn == SAMPLER_NFN)
		return 0;
	/* field by field: an aggregate zeroing may become a memset call */
	s.slot = o->bias + r->r_offset;
	s.page = s.page_len = s.prot = s.result = 0;
	if ((s.slot & 7) || s.slot < o->lo || s.slot + 8 > o->hi)
		return 0;
	cur = LOAD(*(uint64_t *)(uintptr_t)s.slot);
	if (cur != c->orig[fn] &&
	    !(type == SAMPLER_R_JUMP_SLOT && cur >= o->lo && cur < o->hi))
		return 0;
	if (s.slot >= o->relro_lo && s.slot < o->relro_hi) {
		if (!LOAD(c->can_mprotect))
			return 0;
		s.page = s.slot & ~(ps - 1);
		s.page_len = ps;
		s.prot = 1; /* PROT_READ, as the loader left RELRO */
	}
	s.from = cur;
	s.to = c->hook[fn];
	return log_and_swap(&s) == SAMPLER_SLOT_SWAPPED;
}

/* Every GOT slot of the object @l that reaches the malloc family. */
static void swap_object(const struct lmap *l)
{
	const Elf64_Dyn *d = (const Elf64_Dyn *)(uintptr_t)l->l_ld;
	uint64_t rela = 0, relasz = 0, jmprel = 0, pltsz = 0, i, n = 0;
	struct obj o;

	if (!d || !obj_of(l, &o))
		return;
	o.sym = NULL;
	o.str = NULL;
	o.strsz = 0;
	for (i = 0; d[i].d_tag != DT_NULL && i < 256; i++) {
		uint64_t v = d[i].d_un.d_val;

		switch (d[i].d_tag) {
		case DT_SYMTAB:
			o.sym = (const Elf64_Sym *)(uintptr_t)dyn_ptr(&o, v);
			break;
		case DT_STRTAB:
			o.str = (const char *)(uintptr_t)dyn_ptr(&o, v);
			break;
		case DT_STRSZ:
			o.strsz = v;
			break;
		case DT_RELA:
			rela = dyn_ptr(&o, v);
			break;
		case DT_RELASZ:
			relasz = v;
			break;
		case DT_JMPREL:
			jmprel = dyn_ptr(&o, v);
			break;
		case DT_PLTRELSZ:
			pltsz = v;
			break;
		}
	}
	if (!o.sym || !o.str)
		return;
	for (i = 0; rela && i < relasz / sizeof(Elf64_Rela); i++)
		n += swap_rela(&o, (const Elf64_Rela *)(uintptr_t)rela + i);
	for (i = 0; jmprel && i < pltsz / sizeof(Elf64_Rela); i++)
		n += swap_rela(&o, (const Elf64_Rela *)(uintptr_t)jmprel + i);
	ADD(sampler_ctl.dlopened, n);
}

/*
 * After a dlopen: every object on the new handle's chain (the library
 * and what it brought along; objects swapped before hold hooks already
 * and are passed over slot by slot).  Only while sampling is on, and
 * counted in busy so that sampler_off() waits for it.
 */
static void swap_new(uint64_t handle)
{
	struct sampler_ctl *c = &sampler_ctl;
	const struct lmap *l = (const struct lmap *)(uintptr_t)handle;
	uint64_t i;

	if (!l)
		return;
	__atomic_fetch_add(&c->busy, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&c->active, __ATOMIC_SEQ_CST)) {
		for (i = 0; l->l_prev && i < 65536; i++)
			l = (const struct lmap *)(uintptr_t)l->l_prev;
		for (i = 0; l && i < 65536; i++) {
			swap_object(l);
			l = (const struct lmap *)(uintptr_t)l->l_next;
		}
	}
	__atomic_fetch_sub(&c->busy, 1, __ATOMIC_SEQ_CST);
}

typedef uint64_t (*dlopen_fn)(uint64_t, uint64_t, uint64_t);

uint64_t sampler_dlopen(uint64_t file, uint64_t flags)
{
	uint64_t h = ((dlopen_fn)orig(SAMPLER_DLOPEN))(file, flags, 0);

	swap_new(h);
	return h;
}

uint64_t sampler_dlmopen(uint64_t lmid, uint64_t file, uint64_t flags)
{
	uint64_t h = ((dlopen_fn)orig(SAMPLER_DLMOPEN))(lmid, file, flags);

	swap_new(h);
	return h;
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
	uint64_t i, j, n, *keys, swapped = 0, nlog;

	for (i = 0; i < SAMPLER_NFN; i++) {
		if (!c->orig[i])
			c->orig[i] = a->orig[i];
		if (!c->hook[i])
			c->hook[i] = a->hook[i];
		for (j = 0; j < SAMPLER_NAME_MAX; j++)
			c->names[i][j] = a->names[i][j];
	}
	c->page_size = a->page_size;
	c->can_mprotect = a->can_mprotect;
	if (a->table) {
		c->table = a->table;
		c->table_len = a->table_len;
		c->nrecs = a->nrecs;
		c->stack_bytes = a->stack_bytes;
		if ((keys = keys_of(&n))) {
			c->bucket_mask = n / SAMPLER_BUCKET - 1;
			c->counts = (uint64_t)(uintptr_t)counts_of(keys, n);
		}
	}
	c->copy = a->copy;
	STORE(c->mean, a->mean);
	if (!LOAD(c->active)) {
		/* Countdowns parked while off start afresh (a first draw,
		 * not a sample at the next allocation). */
		for (i = 0; i < SAMPLER_NTHREADS; i++) {
			STORE(c->threads[i].left, 0);
			c->threads[i].rng = 0;
		}
	}
	if (!LOAD(c->active) && (keys = keys_of(&n))) {
		for (i = 0; i < n; i++)
			STORE(keys[i], 0);
		for (i = 0; i < n / SAMPLER_BUCKET; i++)
			STORE(counts_of(keys, n)[i], 0);
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

		nlog = __atomic_load_n(&c->nslots, __ATOMIC_SEQ_CST);
		for (j = 0; j < nlog; j++)
			if (c->log[j].slot == s->slot &&
			    c->log[j].result == SAMPLER_SLOT_SWAPPED)
				break;
		if (j < nlog) {
			s->result = SAMPLER_SLOT_KNOWN;
			continue;
		}
		s->result = log_and_swap(s);
		if (s->result == SAMPLER_SLOT_SWAPPED)
			swapped++;
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

	__atomic_store_n(&c->active, 0, __ATOMIC_SEQ_CST);
	/* A dlopen hook that saw it on finishes its swaps first (bounded:
	 * a thread stopped in one cannot hold this up for ever). */
	for (i = 0; __atomic_load_n(&c->busy, __ATOMIC_SEQ_CST) &&
		    i < (1ull << 30); i++)
		__asm__ volatile("" ::: "memory");
	for (i = __atomic_load_n(&c->nslots, __ATOMIC_SEQ_CST); i-- > 0;) {
		struct sampler_slot *s = &c->log[i];

		/* An entry whose swap failed never held the hook. */
		if (s->result == SAMPLER_SLOT_SWAPPED &&
		    swap_slot(s, s->to, s->from) == SAMPLER_SLOT_SWAPPED)
			restored++;
		__atomic_store_n(&c->nslots, i, __ATOMIC_RELEASE);
	}
	return (long)restored;
}
