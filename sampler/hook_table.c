/*
 * The functions memsnap's sampler hooks (sampler/sampler.c swaps
 * their GOT slots, sampler/direct.c patches them where an allocator is
 * linked into the program): names, indexes, and their hooks' offsets
 * in the image (sampler/image/hooks.c).
 */
#include "sampler/internal.h"

/* Every function of the family (sampler/family.h): its hooks'
 * offsets, the guarded one's where its shape allocates. */
#define GUARDED(sym) SAMPLER_OFF_sampler_guarded_##sym
#define ROW(sym, FN, SHAPE, cxx, name)                                     \
	{ name, SAMPLER_##FN, SAMPLER_OFF_sampler_##sym,                   \
	  SAMPLER_OFF_sampler_direct_##sym,                                \
	  0 SAMPLER_GUARDED_SHAPE(SHAPE)(+GUARDED(sym)), cxx },

const struct sampler_hook sampler_hooks[] = {
	SAMPLER_FAMILY(ROW)
	/* what dlopen brings later is swapped by these, as it comes */
	{ "dlopen", SAMPLER_DLOPEN, SAMPLER_OFF_sampler_dlopen, 0, 0, false },
	{ "dlmopen", SAMPLER_DLMOPEN, SAMPLER_OFF_sampler_dlmopen, 0, 0,
	  false },
};

const size_t sampler_nhooks = sizeof(sampler_hooks) / sizeof(sampler_hooks[0]);
