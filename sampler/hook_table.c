/*
 * The functions memsnap's sampler hooks (sampler/sampler.c swaps
 * their GOT slots, sampler/patch.c patches them where an allocator is
 * linked into the program): names, indexes, and their hooks' offsets
 * in the image (sampler/image/records.c).
 */
#include "sampler/internal.h"

/* ALLOC, CXX_ALLOC: with a guarded direct hook (sampler/image/records.c);
 * HOOK, CXX: without (the frees, and the throwing operator new, which
 * stay sibling calls); CXX: C++ operators. */
#define HOOK(sym, fn, name)                                                \
	{ name, fn, SAMPLER_OFF_sampler_##sym,                             \
	  SAMPLER_OFF_sampler_direct_##sym, 0, false }
#define ALLOC(sym, fn, name)                                               \
	{ name, fn, SAMPLER_OFF_sampler_##sym,                             \
	  SAMPLER_OFF_sampler_direct_##sym,                                \
	  SAMPLER_OFF_sampler_guarded_##sym, false }
#define CXX(sym, fn, name)                                                 \
	{ name, fn, SAMPLER_OFF_sampler_##sym,                             \
	  SAMPLER_OFF_sampler_direct_##sym, 0, true }
#define CXX_ALLOC(sym, fn, name)                                           \
	{ name, fn, SAMPLER_OFF_sampler_##sym,                             \
	  SAMPLER_OFF_sampler_direct_##sym,                                \
	  SAMPLER_OFF_sampler_guarded_##sym, true }

/* The C++ names are the Itanium ABI's for an LP64 size_t ('m'). */
const struct sampler_hook sampler_hooks[] = {
	ALLOC(malloc, SAMPLER_MALLOC, "malloc"),
	HOOK(free, SAMPLER_FREE, "free"),
	ALLOC(calloc, SAMPLER_CALLOC, "calloc"),
	ALLOC(realloc, SAMPLER_REALLOC, "realloc"),
	ALLOC(posix_memalign, SAMPLER_POSIX_MEMALIGN, "posix_memalign"),
	ALLOC(aligned_alloc, SAMPLER_ALIGNED_ALLOC, "aligned_alloc"),
	ALLOC(memalign, SAMPLER_MEMALIGN, "memalign"),
	ALLOC(valloc, SAMPLER_VALLOC, "valloc"),
	ALLOC(pvalloc, SAMPLER_PVALLOC, "pvalloc"),
	ALLOC(reallocarray, SAMPLER_REALLOCARRAY, "reallocarray"),
	ALLOC(mallocx, SAMPLER_MALLOCX, "mallocx"),
	HOOK(sdallocx, SAMPLER_SDALLOCX, "sdallocx"),
	HOOK(dallocx, SAMPLER_DALLOCX, "dallocx"),
	CXX(new, SAMPLER_NEW, "_Znwm"),
	CXX(new_array, SAMPLER_NEW_ARRAY, "_Znam"),
	CXX_ALLOC(new_nothrow, SAMPLER_NEW_NOTHROW, "_ZnwmRKSt9nothrow_t"),
	CXX_ALLOC(new_array_nothrow, SAMPLER_NEW_ARRAY_NOTHROW,
	    "_ZnamRKSt9nothrow_t"),
	CXX(new_aligned, SAMPLER_NEW_ALIGNED, "_ZnwmSt11align_val_t"),
	CXX(new_array_aligned, SAMPLER_NEW_ARRAY_ALIGNED,
	    "_ZnamSt11align_val_t"),
	CXX_ALLOC(new_aligned_nothrow, SAMPLER_NEW_ALIGNED_NOTHROW,
	    "_ZnwmSt11align_val_tRKSt9nothrow_t"),
	CXX_ALLOC(new_array_aligned_nothrow, SAMPLER_NEW_ARRAY_ALIGNED_NOTHROW,
	    "_ZnamSt11align_val_tRKSt9nothrow_t"),
	CXX(delete, SAMPLER_DELETE, "_ZdlPv"),
	CXX(delete_array, SAMPLER_DELETE_ARRAY, "_ZdaPv"),
	CXX(delete_sized, SAMPLER_DELETE_SIZED, "_ZdlPvm"),
	CXX(delete_array_sized, SAMPLER_DELETE_ARRAY_SIZED, "_ZdaPvm"),
	CXX(delete_aligned, SAMPLER_DELETE_ALIGNED, "_ZdlPvSt11align_val_t"),
	CXX(delete_array_aligned, SAMPLER_DELETE_ARRAY_ALIGNED,
	    "_ZdaPvSt11align_val_t"),
	CXX(delete_sized_aligned, SAMPLER_DELETE_SIZED_ALIGNED,
	    "_ZdlPvmSt11align_val_t"),
	CXX(delete_array_sized_aligned, SAMPLER_DELETE_ARRAY_SIZED_ALIGNED,
	    "_ZdaPvmSt11align_val_t"),
	CXX(delete_nothrow, SAMPLER_DELETE_NOTHROW, "_ZdlPvRKSt9nothrow_t"),
	CXX(delete_array_nothrow, SAMPLER_DELETE_ARRAY_NOTHROW,
	    "_ZdaPvRKSt9nothrow_t"),
	/* what dlopen brings later is swapped by these, as it comes */
	{ "dlopen", SAMPLER_DLOPEN, SAMPLER_OFF_sampler_dlopen, 0, 0, false },
	{ "dlmopen", SAMPLER_DLMOPEN, SAMPLER_OFF_sampler_dlmopen, 0, 0,
	  false },
};

const size_t sampler_nhooks = sizeof(sampler_hooks) / sizeof(sampler_hooks[0]);
