/*
 * The sampler's hooks for the malloc family (sampler/image/records.c keeps
 * their records).  The fast path of every hook but the guarded ones is
 * a sibling call to the original, so no frame of the sampler stays on
 * the stack while the allocator runs.  The sampled path draws the next
 * countdown before it calls the original, so an allocator that calls a
 * hooked function itself does not sample the same bytes twice in a row.
 * Freestanding, like the rest of the image.
 */
#include "sampler/image/records.h"

typedef void *(*size_fn)(size_t, uint64_t, uint64_t);
typedef void (*free_fn)(void *, uint64_t, uint64_t);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void *(*reallocarray_fn)(void *, size_t, size_t);
typedef int (*posix_memalign_fn)(void **, size_t, size_t);
typedef void *(*align_fn)(size_t, size_t);

#define CALLER() ((uint64_t)(uintptr_t)__builtin_return_address(0))
#define COLD __attribute__((noinline, cold))

/*
 * Every hook comes in two families: reached through a GOT slot (its
 * original in ctl.orig[]), and reached from a patched entry point of
 * an allocator linked into the program (SAMPLER_DIRECT: its original,
 * a trampoline, in ctl.direct[]).  A hook's body is an inline function
 * of the family (@fn, a constant) and of the caller the hook saw.
 *
 * An allocator may call its own entry points (tcmalloc's posix_memalign
 * and valloc call its memalign), and through a patched entry that call
 * would count the same bytes twice.  For the functions where memsnap
 * sees such a call, the guarded hooks mark the thread as inside the
 * original while it runs, and pass a call that finds the mark straight
 * through; they keep a frame while the original runs (it costs an
 * allocation a few nanoseconds, so only those functions get them).
 * Every other hook is a sibling call, and so are the frees and the
 * throwing operator new (an exception must not unwind through a frame
 * the target's unwinder cannot read).
 */
#define D SAMPLER_DIRECT
#define BODY static inline __attribute__((always_inline))

/* The thread's mark: false and marked, or true when it was marked
 * already (the allocator calling itself). */
static inline bool enter(struct sampler_thread **t, uint64_t *tp)
{
	*t = this_thread();
	*tp = thread_pointer();
	if (LOAD((*t)->inside) == *tp)
		return true;
	STORE((*t)->inside, *tp);
	return false;
}

/* The mark off, unless a colliding thread's has replaced it. */
static inline void leave(struct sampler_thread *t, uint64_t tp)
{
	if (LOAD(t->inside) == tp)
		STORE(t->inside, 0);
}

/*
 * The hooks of a function that allocates, around @body_call: reached
 * through a GOT slot, from a patched entry, and from a patched entry
 * of a function that calls another patched one or is called by one
 * (memsnap tells them apart by their code: sampler/direct.c), which
 * marks the thread and calls the original as @orig_call when it finds
 * the thread marked already.
 */
#define HOOKS3(ret, sym, fn, params, body_call, orig_call)               \
	ret sampler_##sym params                                         \
	{                                                                \
		uint64_t caller = CALLER();                              \
                                                                         \
		return body_call(fn, 0);                                 \
	}                                                                \
	ret sampler_direct_##sym params                                  \
	{                                                                \
		uint64_t caller = CALLER();                              \
                                                                         \
		return body_call(fn, D);                                 \
	}                                                                \
	ret sampler_guarded_##sym params                                 \
	{                                                                \
		uint64_t caller = CALLER(), tp;                          \
		struct sampler_thread *t;                                \
		ret r;                                                   \
                                                                         \
		if (enter(&t, &tp))                                      \
			return orig_call;                                \
		r = body_call(fn, D);                                    \
		leave(t, tp);                                            \
		return r;                                                \
	}

/*
 * malloc(size) and its kin: valloc, pvalloc, mallocx(size, flags), and
 * the allocator's own nothrow operator new (aligned or not: further
 * arguments pass through untouched).
 */
static COLD void *size_sampled(unsigned int fn, size_t size, uint64_t a1,
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

BODY void *size_body(unsigned int fn, size_t size, uint64_t a1, uint64_t a2,
		     uint64_t caller)
{
	if (__builtin_expect(!ran_out(size), 1))
		return ((size_fn)orig(fn))(size, a1, a2);
	return size_sampled(fn, size, a1, a2, caller);
}

#define SIZE_BODY(fn, fam) \
	size_body((fn) | (fam), size, a1, a2, caller)
#define SIZE_HOOKS(sym, FN)                                              \
	HOOKS3(void *, sym, SAMPLER_##FN,                                \
	       (size_t size, uint64_t a1, uint64_t a2), SIZE_BODY,       \
	       ((size_fn)orig(SAMPLER_##FN | D))(size, a1, a2))

/* free(p) and every operator delete, sdallocx, dallocx: further
 * arguments pass through. */
static COLD void free_sampled(unsigned int fn, void *p, uint64_t a1,
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

#define FREE_HOOKS(sym, FN)                                              \
	FREE_HOOK(sampler_##sym, SAMPLER_##FN)                           \
	FREE_HOOK(sampler_direct_##sym, SAMPLER_##FN | D)

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
static COLD void *new_sampled(unsigned int fn, unsigned int safe,
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

/* @FN's nothrow twin is FN_NOTHROW. */
#define NEW_HOOKS(sym, FN)                                               \
	NEW_HOOK(sampler_##sym, SAMPLER_##FN, SAMPLER_##FN##_NOTHROW)    \
	NEW_HOOK(sampler_direct_##sym, SAMPLER_##FN | D,                 \
		 SAMPLER_##FN##_NOTHROW | D)

static COLD void *calloc_sampled(unsigned int fn, size_t n, size_t size,
				 uint64_t caller)
{
	calloc_fn f = (calloc_fn)orig(fn);
	void *p;

	if (!take(n * size))
		return f(n, size);
	p = f(n, size);
	record(fn, p, n * size, caller);
	return p;
}

/* An overflow is the allocator's to refuse, and never a sample. */
BODY void *calloc_body(unsigned int fn, size_t n, size_t size,
		       uint64_t caller)
{
	size_t bytes;

	if (__builtin_expect(__builtin_mul_overflow(n, size, &bytes) ||
				     !ran_out(bytes),
			     1))
		return ((calloc_fn)orig(fn))(n, size);
	return calloc_sampled(fn, n, size, caller);
}

#define CALLOC_BODY(fn, fam) \
	calloc_body((fn) | (fam), n, size, caller)
#define CALLOC_HOOKS(sym, FN)                                            \
	HOOKS3(void *, sym, SAMPLER_##FN, (size_t n, size_t size),       \
	       CALLOC_BODY,                                              \
	       ((calloc_fn)orig(SAMPLER_##FN | D))(n, size))

/*
 * realloc(old, size) of @size: the old block is forgotten first (the
 * call may free it), and remembered again if the call failed; the new
 * one is recorded if its countdown ran out (@counted).  @fn: realloc or
 * reallocarray, of either family; the call is to that family's realloc.
 */
static COLD void *realloc_sampled(unsigned int fn, void *old, size_t size,
				  bool counted, uint64_t caller)
{
	uint64_t old_size = 0;
	bool had, sampled;
	void *p;

	had = old && forget((uint64_t)(uintptr_t)old, &old_size);
	sampled = counted && take(size);
	p = ((realloc_fn)orig(SAMPLER_REALLOC | (fn & D)))(old, size);
	/* Failed: the old block lives on, and so does a record of it. */
	if (had && !p && size)
		record(fn, old, old_size, caller);
	if (sampled)
		record(fn, p, size, caller);
	return p;
}

BODY void *realloc_body(unsigned int fam, void *old, size_t size,
			uint64_t caller)
{
	bool counted = size && ran_out(size);

	if (__builtin_expect(!counted && !(old && maybe_sampled(
						  (uint64_t)(uintptr_t)old)),
			     1))
		return ((realloc_fn)orig(SAMPLER_REALLOC | fam))(old, size);
	return realloc_sampled(SAMPLER_REALLOC | fam, old, size, counted,
			       caller);
}

#define REALLOC_BODY(fn, fam) \
	realloc_body(fam, old, size, caller)
#define REALLOC_HOOKS(sym, FN)                                           \
	HOOKS3(void *, sym, SAMPLER_##FN, (void *old, size_t size),      \
	       REALLOC_BODY,                                             \
	       ((realloc_fn)orig(SAMPLER_##FN | D))(old, size))

/*
 * reallocarray(old, n, size) is realloc(old, n * size) once the product
 * is known not to overflow, and so it is done here: glibc's own calls
 * realloc through its GOT, whose slot is hooked too, and its bytes
 * would be counted twice.  An overflow goes to the original, which
 * says ENOMEM as it should.
 */
BODY void *reallocarray_body(unsigned int fam, void *old, size_t n,
			     size_t size, uint64_t caller)
{
	size_t bytes;
	bool counted;

	if (__builtin_mul_overflow(n, size, &bytes))
		return ((reallocarray_fn)orig(SAMPLER_REALLOCARRAY | fam))(
			old, n, size);
	counted = bytes && ran_out(bytes);
	if (__builtin_expect(!counted && !(old && maybe_sampled(
						  (uint64_t)(uintptr_t)old)),
			     1))
		return ((realloc_fn)orig(SAMPLER_REALLOC | fam))(old, bytes);
	return realloc_sampled(SAMPLER_REALLOCARRAY | fam, old, bytes,
			       counted, caller);
}

#define REALLOCARRAY_BODY(fn, fam) \
	reallocarray_body(fam, old, n, size, caller)
#define REALLOCARRAY_HOOKS(sym, FN)                                      \
	HOOKS3(void *, sym, SAMPLER_##FN,                                \
	       (void *old, size_t n, size_t size), REALLOCARRAY_BODY,    \
	       ((reallocarray_fn)orig(SAMPLER_##FN | D))(old, n, size))

static COLD int memalign_sampled(unsigned int fn, void **out, size_t align,
				 size_t size, uint64_t caller)
{
	posix_memalign_fn f = (posix_memalign_fn)orig(fn);
	int rc;

	if (!take(size))
		return f(out, align, size);
	rc = f(out, align, size);
	record(fn, rc ? NULL : *out, size, caller);
	return rc;
}

BODY int posix_memalign_body(unsigned int fn, void **out, size_t align,
			     size_t size, uint64_t caller)
{
	if (__builtin_expect(!ran_out(size), 1))
		return ((posix_memalign_fn)orig(fn))(out, align, size);
	return memalign_sampled(fn, out, align, size, caller);
}

#define POSIX_MEMALIGN_BODY(fn, fam) \
	posix_memalign_body((fn) | (fam), out, align, size, caller)
#define POSIX_MEMALIGN_HOOKS(sym, FN)                                    \
	HOOKS3(int, sym, SAMPLER_##FN,                                   \
	       (void **out, size_t align, size_t size),                  \
	       POSIX_MEMALIGN_BODY,                                      \
	       ((posix_memalign_fn)orig(SAMPLER_##FN | D))(out, align,   \
							   size))

/* aligned_alloc() and memalign(): the same arguments, two originals. */
static COLD void *aligned_sampled(unsigned int fn, size_t align,
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

BODY void *aligned_body(unsigned int fn, size_t align, size_t size,
			uint64_t caller)
{
	if (__builtin_expect(!ran_out(size), 1))
		return ((align_fn)orig(fn))(align, size);
	return aligned_sampled(fn, align, size, caller);
}

#define ALIGNED_BODY(fn, fam) \
	aligned_body((fn) | (fam), align, size, caller)
#define ALIGNED_HOOKS(sym, FN)                                           \
	HOOKS3(void *, sym, SAMPLER_##FN, (size_t align, size_t size),   \
	       ALIGNED_BODY,                                             \
	       ((align_fn)orig(SAMPLER_##FN | D))(align, size))

/* The hooks of every function of the family (sampler/family.h), by
 * its shape. */
#define HOOKS_OF(sym, FN, SHAPE, cxx, name) SHAPE##_HOOKS(sym, FN)
SAMPLER_FAMILY(HOOKS_OF)
