#ifndef MEMSNAP_SAMPLER_H
#define MEMSNAP_SAMPLER_H

/*
 * The sampler's control block: the layout shared by the code that runs
 * inside the target (sampler/target.c, freestanding) and memsnap, which
 * fills it and reads it with process_vm_readv.  Everything is 64-bit and
 * naturally aligned; a zero block is a valid, empty, inactive sampler.
 *
 * Per thread, a byte countdown drawn from an exponential distribution of
 * mean `mean` (Poisson sampling by bytes, as tcmalloc and jemalloc do):
 * an allocation of s bytes is sampled with probability 1 - exp(-s/mean).
 * A sampled block's record lives in `recs` (open addressing by address)
 * until it is freed.
 */
#include <stddef.h>
#include <stdint.h>

#define SAMPLER_SIGNATURE "memsnap-sampler1"
#define SAMPLER_VERSION 1

/* The hooked functions, by index in ctl.orig[]. */
enum sampler_fn {
	SAMPLER_MALLOC,
	SAMPLER_FREE,
	SAMPLER_CALLOC,
	SAMPLER_REALLOC,
	SAMPLER_POSIX_MEMALIGN,
	SAMPLER_ALIGNED_ALLOC,
	SAMPLER_MEMALIGN,
	SAMPLER_NFN
};

/* Per-thread state, found by hashing the thread pointer (no TLS of the
 * target's); a collision shares a countdown, which stays unbiased. */
struct sampler_thread {
	int64_t left;		/* bytes until the next sample */
	uint64_t rng;		/* xorshift64* state; 0: not seeded */
	uint64_t pad[6];	/* one cache line each */
};

#define SAMPLER_NTHREADS 1024

/* A sampled live block.  ptr 0: empty; SAMPLER_GONE: freed (a
 * tombstone, reused by later inserts). */
struct sampler_rec {
	uint64_t ptr;
	uint64_t size;		/* bytes asked for */
	uint64_t pc;		/* the caller's return address */
	uint64_t pad;
};

#define SAMPLER_GONE 1ull

struct sampler_ctl {
	char signature[16];	/* written last: the block is complete */
	uint64_t version;
	uint64_t active;	/* 0: every hook passes straight through */
	uint64_t mean;		/* bytes between samples, on average */
	uint64_t orig[SAMPLER_NFN];	/* the functions the hooks call */
	uint64_t recs;		/* struct sampler_rec[nrecs] (its own map) */
	uint64_t nrecs;		/* a power of two */
	/* counters, for memsnap and the tests */
	uint64_t samples;	/* blocks sampled */
	uint64_t freed;		/* sampled blocks freed */
	uint64_t dropped;	/* sampled, but the table was too full */
	struct sampler_thread threads[SAMPLER_NTHREADS];
};

#endif
