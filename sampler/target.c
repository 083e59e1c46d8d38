/*
 * The sampler's code inside the target: hooks for the malloc family
 * that count bytes per thread and record every block the countdown
 * picks (sampler/sampler.h).  It is copied into an anonymous mapping of
 * the target, so it is freestanding: no libc, no TLS, no data but the
 * zero-filled control block (reached PC-relatively), no relocations
 * (sampler/sampler.mk checks the object and the link).  It never takes
 * a lock, never allocates, and makes no system call: a signal handler
 * may call a hook while the thread it interrupted is inside another.
 *
 * The fast path of every hook is a sibling call to the original, so no
 * frame of the sampler stays on the stack while the allocator runs.
 */
#pragma GCC visibility push(hidden)

#include "sampler/sampler.h"

#include <stdbool.h>

struct sampler_ctl sampler_ctl;

typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
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

static inline uint64_t thread_pointer(void)
{
	uint64_t tp;

#if defined(__x86_64__)
	__asm__("mov %%fs:0, %0" : "=r"(tp));
#elif defined(__aarch64__)
	__asm__("mrs %0, tpidr_el0" : "=r"(tp));
#else
#error "sampler: no thread pointer for this CPU"
#endif
	return tp;
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

static void remember(uint64_t p, uint64_t size, uint64_t pc)
{
	struct sampler_rec *v = (struct sampler_rec *)LOAD(sampler_ctl.recs);
	uint64_t n = LOAD(sampler_ctl.nrecs), h, i;

	if (!v || !n || (n & (n - 1))) {
		ADD(sampler_ctl.dropped, 1);
		return;
	}
	h = slot_of(p, n);
	for (i = 0; i < PROBE_MAX && i < n; i++) {
		struct sampler_rec *e = &v[(h + i) & (n - 1)];
		uint64_t k = LOAD(e->ptr);

		/* A stale record of the same address (freed where no hook
		 * saw it) is taken over. */
		if ((k == 0 || k == SAMPLER_GONE || k == p) &&
		    __atomic_compare_exchange_n(&e->ptr, &k, p, false,
						__ATOMIC_RELAXED,
						__ATOMIC_RELAXED)) {
			STORE(e->size, size);
			STORE(e->pc, pc);
			ADD(sampler_ctl.samples, 1);
			return;
		}
	}
	ADD(sampler_ctl.dropped, 1);
}

/* Forget @p's record, if it has one.  The caller frees @p afterwards:
 * once freed, the address may be handed out and sampled again. */
static bool forget(uint64_t p, struct sampler_rec *out)
{
	struct sampler_rec *v = (struct sampler_rec *)LOAD(sampler_ctl.recs);
	uint64_t n = LOAD(sampler_ctl.nrecs), h, i;

	if (!v || !n || (n & (n - 1)))
		return false;
	h = slot_of(p, n);
	for (i = 0; i < PROBE_MAX && i < n; i++) {
		struct sampler_rec *e = &v[(h + i) & (n - 1)];
		uint64_t k = LOAD(e->ptr);

		if (k == 0)
			return false;
		if (k != p)
			continue;
		out->size = LOAD(e->size);
		out->pc = LOAD(e->pc);
		if (__atomic_compare_exchange_n(&e->ptr, &k, SAMPLER_GONE,
						false, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED)) {
			ADD(sampler_ctl.freed, 1);
			return true;
		}
		return false;
	}
	return false;
}

/* The countdown ran out (or was never drawn) on an allocation of @size
 * at @pc that gave @p. */
__attribute__((noinline)) static void sample(struct sampler_thread *t,
					     void *p, uint64_t size,
					     uint64_t pc)
{
	uint64_t mean = LOAD(sampler_ctl.mean);
	int64_t left;

	if (!mean)
		return;
	if (!t->rng) {
		/* First use of this slot: start its countdown here. */
		t->rng = thread_pointer() ^ (uint64_t)(uintptr_t)t ^
			 0x853c49e6748fea9bull;
		if (!t->rng)
			t->rng = 1;
		left = (int64_t)((uint64_t)next_interval(t, mean) - size);
		if (left > 0) {
			STORE(t->left, left);
			return;
		}
	}
	if (p)
		remember((uint64_t)(uintptr_t)p, size, pc);
	STORE(t->left, next_interval(t, mean));
}

/* Count @size against this thread; true when the countdown ran out. */
static inline bool due(struct sampler_thread **tp, uint64_t size)
{
	struct sampler_thread *t = NULL;
	int64_t left;

	if (!LOAD(sampler_ctl.active))
		return false;
	t = this_thread();
	*tp = t;
	/* unsigned: a size past INT64_MAX wraps instead of overflowing */
	left = (int64_t)((uint64_t)LOAD(t->left) - size);
	STORE(t->left, left);
	return left <= 0;
}

#define CALLER() ((uint64_t)(uintptr_t)__builtin_return_address(0))

void *sampler_malloc(size_t size)
{
	malloc_fn f = (malloc_fn)orig(SAMPLER_MALLOC);
	struct sampler_thread *t = NULL;
	void *p;

	if (__builtin_expect(!due(&t, size), 1))
		return f(size);
	p = f(size);
	sample(t, p, size, CALLER());
	return p;
}

void sampler_free(void *p)
{
	free_fn f = (free_fn)orig(SAMPLER_FREE);
	struct sampler_rec r;

	if (p && LOAD(sampler_ctl.samples) != LOAD(sampler_ctl.freed))
		forget((uint64_t)(uintptr_t)p, &r);
	f(p);
}

void *sampler_calloc(size_t n, size_t size)
{
	calloc_fn f = (calloc_fn)orig(SAMPLER_CALLOC);
	struct sampler_thread *t = NULL;
	size_t bytes;
	void *p;

	/* An overflow is the allocator's to refuse, and never a sample. */
	if (__builtin_mul_overflow(n, size, &bytes) ||
	    __builtin_expect(!due(&t, bytes), 1))
		return f(n, size);
	p = f(n, size);
	sample(t, p, bytes, CALLER());
	return p;
}

void *sampler_realloc(void *old, size_t size)
{
	realloc_fn f = (realloc_fn)orig(SAMPLER_REALLOC);
	struct sampler_thread *t = NULL;
	struct sampler_rec r;
	bool had, sampled;
	void *p;

	/* The call may free the old block: forget it first. */
	had = old && LOAD(sampler_ctl.samples) != LOAD(sampler_ctl.freed) &&
	      forget((uint64_t)(uintptr_t)old, &r);
	sampled = size && due(&t, size);
	if (__builtin_expect(!had && !sampled, 1))
		return f(old, size);
	p = f(old, size);
	/* Failed: the old block lives on, and so does its record. */
	if (had && !p && size)
		remember((uint64_t)(uintptr_t)old, r.size, r.pc);
	if (sampled)
		sample(t, p, size, CALLER());
	return p;
}

int sampler_posix_memalign(void **out, size_t align, size_t size)
{
	posix_memalign_fn f = (posix_memalign_fn)orig(SAMPLER_POSIX_MEMALIGN);
	struct sampler_thread *t = NULL;
	int rc;

	if (__builtin_expect(!due(&t, size), 1))
		return f(out, align, size);
	rc = f(out, align, size);
	sample(t, rc ? NULL : *out, size, CALLER());
	return rc;
}

/* aligned_alloc() and memalign(): the same arguments, two originals. */
static inline __attribute__((always_inline)) void *
aligned(enum sampler_fn fn, size_t align, size_t size, uint64_t caller)
{
	align_fn f = (align_fn)orig(fn);
	struct sampler_thread *t = NULL;
	void *p;

	if (__builtin_expect(!due(&t, size), 1))
		return f(align, size);
	p = f(align, size);
	sample(t, p, size, caller);
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
