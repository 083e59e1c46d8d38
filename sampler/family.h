#ifndef MEMSNAP_SAMPLER_FAMILY_H
#define MEMSNAP_SAMPLER_FAMILY_H

/*
 * The malloc family memsnap's sampler hooks: the one list.  The index
 * enum (sampler/layout.h), the image's hooks (sampler/image/hooks.c),
 * the host's table of names and offsets (sampler/hook_table.c) and the
 * build's list of symbols to cut out of the image (image.mk, through
 * the C preprocessor) are all made from it.  Only the preprocessor
 * reads this file: no includes, no declarations.
 *
 *   X(sym, FN, SHAPE, cxx, "symbol")
 *
 *   sym     the hooks in the image: sampler_SYM (through a GOT slot) and
 *           sampler_direct_SYM (from a patched entry point); a SHAPE that
 *           allocates has sampler_guarded_SYM too
 *   FN      its index: SAMPLER_FN
 *   SHAPE   what the hook does with its arguments (hooks.c, SHAPE_HOOKS)
 *   cxx     1: a C++ operator, hooked only where the allocator defines
 *           it (an operator new on top of malloc is seen at its malloc)
 *   symbol  the name whose slot or entry point it takes; C++: the
 *           Itanium ABI's for an LP64 size_t ('m')
 *
 * The order is the control block's (ctl.orig[], ctl.hook[]): a change
 * is a new SAMPLER_VERSION.
 */
#define SAMPLER_FAMILY(X)                                                  \
	X(malloc, MALLOC, SIZE, 0, "malloc")                               \
	X(free, FREE, FREE, 0, "free")                                     \
	X(calloc, CALLOC, CALLOC, 0, "calloc")                             \
	X(realloc, REALLOC, REALLOC, 0, "realloc")                         \
	X(posix_memalign, POSIX_MEMALIGN, POSIX_MEMALIGN, 0,               \
	  "posix_memalign")                                                \
	X(aligned_alloc, ALIGNED_ALLOC, ALIGNED, 0, "aligned_alloc")       \
	X(memalign, MEMALIGN, ALIGNED, 0, "memalign")                      \
	X(valloc, VALLOC, SIZE, 0, "valloc")                               \
	X(pvalloc, PVALLOC, SIZE, 0, "pvalloc")                            \
	X(reallocarray, REALLOCARRAY, REALLOCARRAY, 0, "reallocarray")     \
	X(new, NEW, NEW, 1, "_Znwm")                                       \
	X(new_array, NEW_ARRAY, NEW, 1, "_Znam")                           \
	X(new_nothrow, NEW_NOTHROW, SIZE, 1, "_ZnwmRKSt9nothrow_t")        \
	X(new_array_nothrow, NEW_ARRAY_NOTHROW, SIZE, 1,                   \
	  "_ZnamRKSt9nothrow_t")                                           \
	X(new_aligned, NEW_ALIGNED, NEW, 1, "_ZnwmSt11align_val_t")        \
	X(new_array_aligned, NEW_ARRAY_ALIGNED, NEW, 1,                    \
	  "_ZnamSt11align_val_t")                                          \
	X(new_aligned_nothrow, NEW_ALIGNED_NOTHROW, SIZE, 1,               \
	  "_ZnwmSt11align_val_tRKSt9nothrow_t")                            \
	X(new_array_aligned_nothrow, NEW_ARRAY_ALIGNED_NOTHROW, SIZE, 1,   \
	  "_ZnamSt11align_val_tRKSt9nothrow_t")                            \
	X(delete, DELETE, FREE, 1, "_ZdlPv")                               \
	X(delete_array, DELETE_ARRAY, FREE, 1, "_ZdaPv")                   \
	X(delete_sized, DELETE_SIZED, FREE, 1, "_ZdlPvm")                  \
	X(delete_array_sized, DELETE_ARRAY_SIZED, FREE, 1, "_ZdaPvm")      \
	X(delete_aligned, DELETE_ALIGNED, FREE, 1, "_ZdlPvSt11align_val_t") \
	X(delete_array_aligned, DELETE_ARRAY_ALIGNED, FREE, 1,             \
	  "_ZdaPvSt11align_val_t")                                         \
	X(delete_sized_aligned, DELETE_SIZED_ALIGNED, FREE, 1,             \
	  "_ZdlPvmSt11align_val_t")                                        \
	X(delete_array_sized_aligned, DELETE_ARRAY_SIZED_ALIGNED, FREE, 1, \
	  "_ZdaPvmSt11align_val_t")                                        \
	X(delete_nothrow, DELETE_NOTHROW, FREE, 1, "_ZdlPvRKSt9nothrow_t") \
	X(delete_array_nothrow, DELETE_ARRAY_NOTHROW, FREE, 1,             \
	  "_ZdaPvRKSt9nothrow_t")                                          \
	/* jemalloc's own API (what Rust's jemallocator calls) */          \
	X(mallocx, MALLOCX, SIZE, 0, "mallocx")                            \
	X(sdallocx, SDALLOCX, FREE, 0, "sdallocx")                         \
	X(dallocx, DALLOCX, FREE, 0, "dallocx")

/*
 * Whether a SHAPE allocates, and so has a guarded direct hook: all but
 * the frees and the throwing operator new, which stay sibling calls
 * (an exception must not unwind through a frame of the sampler's).
 * SAMPLER_GUARDED_SHAPE(S)(x) is x when it does, nothing otherwise.
 */
#define SAMPLER_GUARDED_SHAPE(S) SAMPLER_GUARDED_##S
#define SAMPLER_GUARDED_SIZE(x) x
#define SAMPLER_GUARDED_CALLOC(x) x
#define SAMPLER_GUARDED_REALLOC(x) x
#define SAMPLER_GUARDED_REALLOCARRAY(x) x
#define SAMPLER_GUARDED_POSIX_MEMALIGN(x) x
#define SAMPLER_GUARDED_ALIGNED(x) x
#define SAMPLER_GUARDED_FREE(x)
#define SAMPLER_GUARDED_NEW(x)

/* Whether a SHAPE frees (1) or allocates (0). */
#define SAMPLER_FREES_SHAPE(S) SAMPLER_FREES_##S
#define SAMPLER_FREES_SIZE 0
#define SAMPLER_FREES_CALLOC 0
#define SAMPLER_FREES_REALLOC 0
#define SAMPLER_FREES_REALLOCARRAY 0
#define SAMPLER_FREES_POSIX_MEMALIGN 0
#define SAMPLER_FREES_ALIGNED 0
#define SAMPLER_FREES_NEW 0
#define SAMPLER_FREES_FREE 1

#endif
