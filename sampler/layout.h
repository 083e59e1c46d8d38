#ifndef MEMSNAP_SAMPLER_LAYOUT_H
#define MEMSNAP_SAMPLER_LAYOUT_H

/*
 * The sampler's control block: the layout shared by the code that runs
 * inside the target (sampler/image/, freestanding) and memsnap, which
 * fills it through the sampler's own sampler_on() and reads it with
 * process_vm_readv.  Everything is 64-bit and naturally aligned; a zero
 * block is a valid, empty, inactive sampler.
 *
 * Per thread, a byte countdown drawn from an exponential distribution of
 * mean `mean` (Poisson sampling by bytes, as tcmalloc and jemalloc do):
 * an allocation of s bytes is sampled with probability 1 - exp(-s/mean).
 *
 * The table, one mapping of its own (sampler_table_len()):
 *
 *   keys[nrecs]        a sampled block's address, 0 when the slot is
 *                      free, in buckets of SAMPLER_BUCKET: a key in its
 *                      own bucket or the next (both are searched whole,
 *                      so nothing needs a tombstone)
 *   counts[]           a byte per bucket, the keys that belong to it
 *                      (small enough to stay in the L1 cache: a free of
 *                      an unsampled block reads one byte)
 *   heads[nrecs]       each key's record: the first of its chunks
 *   kept[SAMPLER_KEPT] the reservoir of freed samples (below)
 *   next[nchunks]      the pool's free list: each free chunk's next
 *   pool               nchunks chunks of sampler_chunk_bytes() each
 *
 * A record (struct sampler_rec) and its stack copy live in chunks of the
 * pool: the record at the start of its first chunk, the stack from
 * SAMPLER_REC_BYTES on, then on through the other chunks it names.  A
 * sample takes as many chunks as its stack needs and gives them back
 * when its block is freed, so the pool's pages are touched only as far
 * as the most chunks ever held at once: the memory the sampler adds
 * follows the live samples and the reservoir's budget, not the table's
 * size, the allocation rate or the run's length.  Chunk 0 is never
 * used: a head of 0 is none.
 *
 * The reservoir of freed samples, so that what was allocated and freed
 * since prof on can be told too (churn): SAMPLER_KEPT slots in two
 * parts, small blocks (below SAMPLER_KEPT_LARGE_MEANS means, each
 * sample standing for about a mean of bytes) and large ones (each for
 * its own size), so that a few large blocks are not drawn among many
 * small ones.  A sampled block freed is offered to its part and kept
 * with probability (its slots) / (the offers to it so far), replacing
 * one at random (reservoir sampling): the records kept are a uniform
 * draw of the part's sampled blocks freed since prof on, each standing
 * for kept_seen[part] / (the part's records kept) of them.  A record
 * kept is the freed block's own, its chunks handed over, nothing
 * copied; the reservoir holds about SAMPLER_KEPT_CHUNKS chunks at most,
 * a record past that keeping the first chunks of its stack (its
 * innermost frames), its own chunk at least.
 */
#include "sampler/family.h"

#include <stddef.h>
#include <stdint.h>

#define SAMPLER_SIGNATURE "memsnap-sampler8"
#define SAMPLER_VERSION 9

/* The hooked functions, by index in ctl.orig[] (sampler/family.h);
 * then dlopen and dlmopen: objects loaded later get their slots swapped
 * as they come. */
#define SAMPLER_ENUM(sym, FN, shape, cxx, name) SAMPLER_##FN,
enum sampler_fn {
	SAMPLER_FAMILY(SAMPLER_ENUM)
	SAMPLER_DLOPEN,		/* dlopen(file, flags) */
	SAMPLER_DLMOPEN,	/* dlmopen(lmid, file, flags) */
	SAMPLER_NFN
};
#undef SAMPLER_ENUM

/*
 * A hook of the direct family, for an allocator linked into the program
 * (its entry points patched, injector/patch.h): the same function, the
 * original in ctl.direct[] (a trampoline) instead of ctl.orig[], since
 * the program's malloc and libc's may both be in use.
 */
#define SAMPLER_DIRECT 64

#define SAMPLER_NAME_MAX 40	/* "_ZnamSt11align_val_tRKSt9nothrow_t" */

/* Per-thread state, found by hashing the thread pointer (no TLS of the
 * target's); a collision shares a countdown, which stays unbiased. */
struct sampler_thread {
	int64_t left;		/* bytes until the next sample */
	uint64_t rng;		/* xorshift64* state; 0: not seeded */
	/* The thread pointer of a thread inside a direct hook's original:
	 * the allocator's calls to its own entry points pass through. */
	uint64_t inside;
	/* Random bits memsnap drew for this round (sampler_on()'s second
	 * argument), mixed into the first draw; slot 0's also into the
	 * reservoir's draws. */
	uint64_t seed;
	/* Counted by the threads of this slot, so that no count moves a
	 * cache line between CPUs; memsnap sums them over the slots.
	 * Blocks sampled, sampled blocks freed, samples dropped (the table
	 * or the pool full), samples whose stack was copied in place. */
	uint64_t samples, freed, dropped, plain;
};	/* one cache line each */

#define SAMPLER_NTHREADS 1024

/*
 * The registers an unwinder starts from, captured inside the sampler
 * (the frames of the sampler's own code are unwound with its CFI and
 * dropped), in struct sampler_rec.regs: slot SAMPLER_REG_X holds
 * register X.  The image stores them by these names (capture_regs() in
 * sampler/image/arch-*.h checks its order against them at compile
 * time); the host hands them to the unwinder with SAMPLER_REG_NUMS,
 * each slot's register in DWARF's numbering as libunwind extends it
 * (the pc: x86-64 16, the return-address column; AArch64 32).
 */
#define SAMPLER_NREGS 16

#if defined(__x86_64__)
enum sampler_reg {
	SAMPLER_REG_PC, SAMPLER_REG_SP, SAMPLER_REG_RBP, SAMPLER_REG_RBX,
	SAMPLER_REG_R12, SAMPLER_REG_R13, SAMPLER_REG_R14, SAMPLER_REG_R15,
	SAMPLER_REGS_SAVED
};
#define SAMPLER_REG_NUMS {						\
	[SAMPLER_REG_PC] = 16, [SAMPLER_REG_SP] = 7, [SAMPLER_REG_RBP] = 6,	\
	[SAMPLER_REG_RBX] = 3, [SAMPLER_REG_R12] = 12, [SAMPLER_REG_R13] = 13,	\
	[SAMPLER_REG_R14] = 14, [SAMPLER_REG_R15] = 15 }
#elif defined(__aarch64__)
enum sampler_reg {
	SAMPLER_REG_PC, SAMPLER_REG_SP, SAMPLER_REG_X29, SAMPLER_REG_X30,
	SAMPLER_REG_X19, SAMPLER_REG_X20, SAMPLER_REG_X21, SAMPLER_REG_X22,
	SAMPLER_REG_X23, SAMPLER_REG_X24, SAMPLER_REG_X25, SAMPLER_REG_X26,
	SAMPLER_REG_X27, SAMPLER_REG_X28,
	SAMPLER_REGS_SAVED
};
#define SAMPLER_REG_NUMS {						\
	[SAMPLER_REG_PC] = 32, [SAMPLER_REG_SP] = 31, [SAMPLER_REG_X29] = 29,	\
	[SAMPLER_REG_X30] = 30, [SAMPLER_REG_X19] = 19, [SAMPLER_REG_X20] = 20,	\
	[SAMPLER_REG_X21] = 21, [SAMPLER_REG_X22] = 22, [SAMPLER_REG_X23] = 23,	\
	[SAMPLER_REG_X24] = 24, [SAMPLER_REG_X25] = 25, [SAMPLER_REG_X26] = 26,	\
	[SAMPLER_REG_X27] = 27, [SAMPLER_REG_X28] = 28 }
#else
#error "the sampler saves the registers of x86-64 and AArch64 only"
#endif

_Static_assert(SAMPLER_REGS_SAVED <= SAMPLER_NREGS, "room for the registers");

/* Chunks one record may hold: its own, then its stack's. */
#define SAMPLER_REC_CHUNKS 17

/*
 * A sampled block, at the start of its first chunk; in the reservoir, a
 * freed one.  The stack copy follows at SAMPLER_REC_BYTES, then fills
 * chunk[1], chunk[2], ... whole.
 */
struct sampler_rec {
	/* the block, written last: a record whose ptr is not its key's
	 * is not (or no longer) that block's.  0 once freed */
	uint64_t ptr;
	uint64_t size;		/* bytes asked for */
	uint64_t caller;	/* the hook's return address */
	uint64_t stack_len;	/* bytes of stack copied from the sp on */
	uint64_t fn;		/* the hooked function: enum sampler_fn */
	uint64_t regs[SAMPLER_NREGS];
	uint64_t epoch;		/* ctl.round when it was taken */
	uint32_t nchunks;	/* chunk[0..nchunks) hold it */
	uint32_t chunk[SAMPLER_REC_CHUNKS];
};

/* The record, rounded: where the stack starts in its first chunk. */
#define SAMPLER_REC_BYTES 256
_Static_assert(sizeof(struct sampler_rec) <= SAMPLER_REC_BYTES,
	       "a record fits before its stack");

#define SAMPLER_BUCKET 8	/* keys per bucket: one cache line */

/* A slot of the reservoir: the record of a freed sample. */
struct sampler_kept {
	uint64_t seq;		/* 0 empty, odd while written, even
				 * once whole */
	uint64_t head;		/* its record's first chunk */
};

/* Freed samples kept in the reservoir: a stack with a tenth of the
 * small allocations is estimated within about 11%.  Slots [0,
 * SAMPLER_KEPT_SMALL) for small blocks, the rest for large; their
 * records and stacks hold about SAMPLER_KEPT_CHUNKS chunks (2 MiB with
 * the default 16 KiB stacks). */
#define SAMPLER_KEPT 1024
#define SAMPLER_KEPT_SMALL 768
#define SAMPLER_KEPT_LARGE_MEANS 4
#define SAMPLER_KEPT_CHUNKS (2 * SAMPLER_KEPT)

/* Chunks in the pool per record of the table (address space: pages
 * are touched only as chunks are used). */
#define SAMPLER_CHUNKS_PER_REC 8

/*
 * One GOT slot to swap (sampler_on()'s argument, and the log in the
 * control block that sampler_off() undoes).  @page/@page_len: the
 * read-only pages (RELRO) around the slot, made writable for the swap
 * and given back @prot; page_len 0: the slot is writable as it is.
 */
struct sampler_slot {
	uint64_t slot;
	uint64_t from;		/* what the slot held: put back by off */
	uint64_t to;		/* the hook */
	uint64_t page, page_len, prot;
	uint64_t result;	/* out: SAMPLER_SLOT_* or -errno */
};

enum {
	SAMPLER_SLOT_SWAPPED = 1,
	SAMPLER_SLOT_CHANGED = 2,	/* held something else: not touched */
	SAMPLER_SLOT_KNOWN = 3,		/* already in the log */
	/* logged, left to memsnap: @to is the hook's mirror, one byte
	 * away from @from, and memsnap writes that byte (in and out) */
	SAMPLER_SLOT_POKE = 4,
};

#define SAMPLER_MAXSLOTS 2048

/*
 * sampler_on()'s argument: the settings, then the slots to swap.  For
 * objects a dlopen brings later, the names of the hooked functions and
 * the hooks (0: not hooked), and whether mprotect is allowed.
 */
struct sampler_on_args {
	uint64_t mean, table, table_len, nrecs, stack_bytes, copy, wiped;
	uint64_t page_size, can_mprotect, can_madvise;
	uint64_t main_lo, main_hi, block_off;	/* as in the control block */
	uint64_t since, lease_until;		/* as in the control block */
	uint64_t orig[SAMPLER_NFN];
	uint64_t hook[SAMPLER_NFN];
	uint64_t direct[SAMPLER_NFN];	/* trampolines (0: none) */
	char names[SAMPLER_NFN][SAMPLER_NAME_MAX];
	uint64_t mirror[SAMPLER_NFN], mirror_of[SAMPLER_NFN];
	uint64_t nslots;
	struct sampler_slot slots[];
};

/*
 * An entry point of the program's own allocator patched to jump to its
 * hook (the log memsnap keeps for prof off and for a later prof on; the
 * code in the target never reads it).  @at..@at+@len held @old and, while
 * patched, hold @new; @stub and @tramp are in the mapping at
 * ctl.patch_page.
 */
struct sampler_patch {
	uint64_t entry, at, len;
	uint64_t busy_lo, busy_hi;
	uint64_t stub, tramp;
	uint64_t fn;		/* enum sampler_fn */
	unsigned char old[16], new[16];
};

#define SAMPLER_MAXPATCH 48

/* Stack copy: none (no system call allowed), or process_vm_readv. */
enum { SAMPLER_COPY_NONE, SAMPLER_COPY_VM_READV };

struct sampler_ctl {
	char signature[16];	/* written last: the block is complete */
	uint64_t version;
	uint64_t active;	/* 0: every hook passes straight through */
	uint64_t mean;		/* bytes between samples, on average */
	uint64_t orig[SAMPLER_NFN]; /* the functions the hooks call */
	uint64_t table;		/* keys, recs, stacks (its own mapping) */
	uint64_t table_len;
	uint64_t nrecs;		/* a power of two, >= SAMPLER_BUCKET */
	uint64_t stack_bytes;	/* per record; a multiple of 16 */
	uint64_t counts;	/* the bucket counts, in the table */
	uint64_t bucket_mask;	/* nrecs / SAMPLER_BUCKET - 1 */
	uint64_t copy;		/* SAMPLER_COPY_* */
	/* 1: the image's last page (sampler_pid) is MADV_WIPEONFORK, so
	 * the pid cached there is this process's: a fork child finds 0
	 * and asks.  0: the pid is asked at every copy. */
	uint64_t wiped;
	uint64_t page_size, can_mprotect;
	/* 1: sampler_off() gives the table's pages back (MADV_DONTNEED) */
	uint64_t can_madvise;
	/* The pool's free list: a tag, counted up at every change so that
	 * a thread that read it before another took and gave back the same
	 * chunk fails its compare-and-swap, << 32 | its first chunk. */
	uint64_t pool_head;
	uint64_t pool_fresh;	/* chunks never handed out: 1 + this on */
	uint64_t kept_chunks;	/* the reservoir's chunks past each
				 * record's first, about */
	/* Counted up each time the pool starts afresh (a switch-on from
	 * off, a release by sampler_off()): a record of an earlier round
	 * (struct sampler_rec.epoch), given back by a thread that was
	 * inside a hook all that time, is not put on the new round's list. */
	uint64_t round;
	/*
	 * Stacks a sample may copy with plain loads, no system call
	 * (sampler/image/records.c, plain_end()): the main thread's,
	 * [main_lo, main_hi), and each thread's own stack mapping, whose
	 * start and size its libc keeps at block_off from the thread
	 * pointer (0: not known).  memsnap finds both before prof on
	 * (sampler/stack_bounds.c).
	 */
	uint64_t main_lo, main_hi, block_off;
	uint64_t started;	/* sampler_on() calls that switched it on */
	uint64_t busy;		/* dlopen hooks swapping slots right now */
	uint64_t dlopened;	/* slots swapped after a dlopen */
	/*
	 * In seconds of CLOCK_REALTIME (the one clock a time namespace
	 * does not shift): when memsnap switched it on from off; the end
	 * of the lease of the watch that did (0: none), past which no
	 * sample is taken until memsnap renews it (sampler_renew()) or a
	 * prof on without a lease clears it; and when a sample first found
	 * the lease past (0: not yet).
	 */
	uint64_t since, lease_until, lapsed_at;
	uint64_t hook[SAMPLER_NFN];
	uint64_t direct[SAMPLER_NFN]; /* the originals of the direct hooks */
	char names[SAMPLER_NFN][SAMPLER_NAME_MAX];
	/* A jump to hook[f] at mirror[f], an address that differs from
	 * mirror_of[f] (the function the slots hold) in one byte: a
	 * read-only slot is swapped by writing that byte, which no
	 * reader can see half-written, with no system call in the target
	 * (sampler/mirror.c).  0: none. */
	uint64_t mirror[SAMPLER_NFN], mirror_of[SAMPLER_NFN];
	/* entry points patched, memsnap's log: prof off undoes them */
	uint64_t patch_page, patch_page_len;
	uint64_t npatches;
	struct sampler_patch patches[SAMPLER_MAXPATCH];
	/* counted here, where every thread must see the same count (the
	 * others are each thread slot's) */
	uint64_t kept_seen[2];	/* freed samples offered to the reservoir:
				 * small, large */
	uint64_t nslots;	/* log[0..nslots): the swapped slots */
	struct sampler_slot log[SAMPLER_MAXSLOTS];
	struct sampler_thread threads[SAMPLER_NTHREADS]
		__attribute__((aligned(64)));
};

/* The bucket of block @p's key, before the mask of the table's buckets
 * (a multiplier that fits an instruction's 32-bit immediate: the free
 * hook's filter needs no register for it). */
static inline uint64_t sampler_bucket_hash(uint64_t p)
{
	return (p >> 4) * 0xffffffff9e3779b1ull >> 20;
}

/* The bytes of one chunk of the pool for stacks of @stack_bytes: a
 * sixteenth of the stack, 512 at least, so that a record and its whole
 * stack fit in SAMPLER_REC_CHUNKS chunks. */
static inline uint64_t sampler_chunk_bytes(uint64_t stack_bytes)
{
	return stack_bytes / 16 > 512 ? stack_bytes / 16 : 512;
}

static inline uint64_t sampler_nchunks(uint64_t nrecs)
{
	return nrecs * SAMPLER_CHUNKS_PER_REC;
}

/* Where the parts of the table start, for @nrecs records. */
static inline uint64_t sampler_counts_off(uint64_t nrecs)
{
	return nrecs * 8;
}

static inline uint64_t sampler_heads_off(uint64_t nrecs)
{
	/* a byte per bucket, rounded to a cache line */
	return sampler_counts_off(nrecs) +
	       ((nrecs / SAMPLER_BUCKET + 63) & ~(uint64_t)63);
}

static inline uint64_t sampler_kept_off(uint64_t nrecs)
{
	return sampler_heads_off(nrecs) + ((nrecs * 4 + 63) & ~(uint64_t)63);
}

static inline uint64_t sampler_next_off(uint64_t nrecs)
{
	return sampler_kept_off(nrecs) +
	       SAMPLER_KEPT * sizeof(struct sampler_kept);
}

/* The chunks, on a boundary of 64 KiB: a page on every CPU memsnap
 * knows, so that no chunk shares a page with the arrays. */
static inline uint64_t sampler_pool_off(uint64_t nrecs)
{
	return (sampler_next_off(nrecs) + sampler_nchunks(nrecs) * 4 +
		65535) & ~(uint64_t)65535;
}

/* The whole table. */
static inline uint64_t sampler_table_len(uint64_t nrecs, uint64_t stack_bytes)
{
	return sampler_pool_off(nrecs) +
	       sampler_nchunks(nrecs) * sampler_chunk_bytes(stack_bytes);
}

/* Chunks a record with @len bytes of stack takes: its own, then one per
 * chunk of stack past what its own holds. */
static inline uint64_t sampler_rec_chunks(uint64_t len, uint64_t chunk_bytes)
{
	uint64_t first = chunk_bytes - SAMPLER_REC_BYTES;

	return len <= first ? 1
			    : 1 + (len - first + chunk_bytes - 1) / chunk_bytes;
}

#endif
