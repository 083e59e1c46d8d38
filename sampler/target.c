/*
 * The sampler's code inside the target: hooks for the malloc family
 * that count bytes per thread and record every block the countdown
 * picks (sampler/sampler.h); sampler/slots.c has the calls memsnap makes
 * on a borrowed thread to swap GOT slots to the hooks and back.  It is copied
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
#include "sampler/target.h"

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

static inline struct sampler_rec *rec_of(uint64_t *keys, uint64_t n,
					 uint64_t i)
{
	return (struct sampler_rec *)((char *)keys + sampler_recs_off(n)) + i;
}

uint64_t copy_self(void *to, uint64_t addr, uint64_t len)
{
	struct { uint64_t base, len; } local = { (uint64_t)(uintptr_t)to, len },
				       remote = { addr, len };
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
		r->stack_len = copy_self((unsigned char *)keys +
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
