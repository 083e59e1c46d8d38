#ifndef MEMSNAP_SAMPLER_TARGET_H
#define MEMSNAP_SAMPLER_TARGET_H

/*
 * Between the two halves of the sampler's in-target code: target.c (the
 * hooks, the records) and slots.c (the GOT slots: memsnap's switch on
 * and off, and objects dlopen brings).  Freestanding, like them.
 */
#pragma GCC visibility push(hidden)

#include "sampler/sampler.h"
#include SAMPLER_ARCH_H

#include <stdbool.h>

extern struct sampler_ctl sampler_ctl;

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define ADD(x, v) __atomic_fetch_add(&(x), (v), __ATOMIC_RELAXED)

static inline uint64_t orig(enum sampler_fn fn)
{
	return LOAD(sampler_ctl.orig[fn]);
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

/* Copy @len bytes at @addr of this process into @to without faulting
 * (process_vm_readv on itself: the kernel's copy stops at an unmapped
 * page).  The bytes copied; 0 when memsnap found the call forbidden. */
uint64_t copy_self(void *to, uint64_t addr, uint64_t len);

#endif
