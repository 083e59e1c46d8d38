#ifndef MEMSNAP_SAMPLER_SAMPLER_H
#define MEMSNAP_SAMPLER_SAMPLER_H

#include "allocators/allocator.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct maps;

/*
 * memsnap's own heap sampler, for processes whose allocator cannot
 * profile (docs/DESIGN.md, "The sampler"): its code (sampler/image/) is
 * copied into the target once and stays; sampler_start() swaps the
 * GOT slots of the malloc family to its hooks, sampler_stop() puts them
 * back, and sampler_dump() reads what it recorded without stopping any
 * thread.
 *
 *   rc = sampler_find(pid, maps, &st);          once per command, nothing
 *                                               stopped; then with @st:
 *   sampler_fence(&st, &fence);                 ranges no borrowed thread
 *                                               may be in (alloc_open)
 *   p = sampler_prepare(pid, os, maps, det);    nothing stopped: symbols,
 *                                               GOT slots, entry points
 *   rc = sampler_start(s, maps, &st, p, &start); a borrowed thread
 *   sampler_prep_free(p);
 *   rc = sampler_dump(pid, maps, &st, out, &d); nothing stopped
 *   rc = sampler_stop(s, &st, &restored, ...);  a borrowed thread
 */

/* What sampler_find() reads of a sampler in a process. */
struct sampler_status {
	uint64_t image;		/* where its code starts */
	uint64_t ctl;		/* its control block */
	bool active;
	uint64_t mean;		/* bytes between samples, on average */
	uint64_t nrecs, stack_bytes;
	uint64_t samples, freed, dropped; /* since it was switched on */
	uint64_t plain;		/* samples whose stack was copied in place */
	uint64_t slots;		/* GOT slots holding its hooks */
	uint64_t started;	/* times it was switched on */
	uint64_t dlopened;	/* slots swapped in objects dlopen brought */
	bool stacks;		/* records carry a copy of the stack */
	unsigned int entries;	/* entry points holding their jump now */
	uint64_t patch_page, patch_page_len; /* their stubs, trampolines */
	uint64_t table, table_len;	/* its table of sampled blocks (0:
					   none made yet) */
	/* CLOCK_REALTIME seconds: switched on from off; the end of a
	 * watch's lease (0: none); when a sample found it past (0: not) */
	uint64_t since, lease_until, lapsed_at;
	uint64_t resident;	/* bytes of its mappings resident, once
				 * sampler_resident() has read them */
};

/*
 * The sampler memsnap loaded into process @pid earlier, found in @maps
 * (an anonymous r-x mapping holding exactly its code) and read.
 * 0, -ENOENT when there is none, -EPROTO when its control block does not
 * read as one (left by a different memsnap, or written over), or a read
 * error.
 */
int sampler_find(pid_t pid, const struct maps *maps, struct sampler_status *st);

/*
 * The memory the sampler of @st (sampler_find()) holds in process @pid,
 * as the kernel counts it: the resident bytes of every mapping it made
 * there (image, table, trampolines, mirrors), into st->resident.  Reads
 * /proc/PID/smaps; nothing is stopped.  0, -ENOENT (none), or an error.
 */
int sampler_resident(pid_t pid, struct sampler_status *st);

/* The sampler's code and trampolines of @st (sampler_find()), if it
 * found one, added to @f: a thread inside them (a dlopen hook swapping
 * slots, an allocator's first instructions run from a trampoline) is
 * never borrowed. */
void sampler_fence(const struct sampler_status *st, struct alloc_fence *f);

/*
 * The memory the sampler of @st (sampler_find()) holds in its process:
 * its image (code and control block), its table, its trampolines, as
 * [lo[i], hi[i]) for i below the count returned (at most
 * SAMPLER_RANGES; 0 when @st found none).  explain shows it as
 * memsnap's, never the program's.
 */
#define SAMPLER_RANGES 3

size_t sampler_memory(const struct sampler_status *st,
		      uint64_t lo[SAMPLER_RANGES], uint64_t hi[SAMPLER_RANGES]);

#define SAMPLER_DEFAULT_MEAN (512u * 1024)

/* Bytes of stack each sample copies, from its sp up (a power of two in
 * [MIN, MAX]; pages a shallower stack does not reach are never
 * touched).  16 KiB reaches the thread's start in 99.8% of a PostgreSQL
 * backend's samples, where 4 KiB reaches it in 5% (docs/DESIGN.md). */
#define SAMPLER_STACK_BYTES (16u << 10)
#define SAMPLER_STACK_BYTES_MIN (4u << 10)
#define SAMPLER_STACK_BYTES_MAX (64u << 10)

static inline bool sampler_stack_bytes_ok(uint64_t b)
{
	return b >= SAMPLER_STACK_BYTES_MIN && b <= SAMPLER_STACK_BYTES_MAX &&
	       !(b & (b - 1));
}

struct sampler_start {
	uint64_t mean;		/* in: bytes between samples (0: default) */
	uint64_t rss;		/* in: the process's RSS, read before the
				 * attach (0: unknown): sizes a new table */
	uint64_t stack_bytes;	/* in: of stack per sample, for a new table
				 * (0: the default); out: the table's, which
				 * a table made earlier keeps */
	uint64_t lease;		/* in: seconds without a renewal after which
				 * no sample is taken (0: none, and any
				 * earlier lease ends) */
	/* out */
	uint64_t image;		/* where the sampler is, for renewals */
	bool leased;		/* the lease is set (its thread may read the
				 * clock: seccomp) */
	bool loaded;		/* the code was copied in by this call */
	bool stacks;		/* stacks are copied (process_vm_readv allowed) */
	unsigned int swapped;	/* slots swapped by this call */
	unsigned int known;	/* slots that held a hook already */
	unsigned int other;	/* slots bound elsewhere: left alone */
	unsigned int readonly;	/* RELRO slots left: mprotect not allowed */
	unsigned int objects;	/* objects with a swapped or known slot */
	bool cxx;		/* operator new/delete are hooked too */
	/* An allocator linked into the program: its kind (NULL: none), its
	 * entry points patched now (0: none, and @unpatched says why), and
	 * how many of those this call wrote. */
	const char *linked;
	unsigned int entries, entries_written;
	char unpatched[512];
};

struct sampler_prep;
struct objects;
struct detection;

/*
 * What switching the sampler on needs and can learn before any thread
 * is stopped, in process @pid's objects @os, maps @maps and allocators
 * @det (the view's): the malloc family as the process binds it, the
 * GOT slots named for it, the entry points of an allocator linked into
 * the program, their code read, and the stacks a sample may copy in
 * place.  NULL on ENOMEM.
 */
struct sampler_prep *sampler_prepare(pid_t pid, struct objects *os,
				     const struct maps *maps,
				     const struct detection *det);
void sampler_prep_free(struct sampler_prep *p);

/*
 * Load the sampler into the session's process if @st found none, and
 * switch it on with @p (sampler_prepare()): every GOT slot of @p that
 * still reaches the malloc family goes to a hook, and the entry points of an allocator
 * linked into the program jump to hooks too (every thread stopped for
 * that moment).  0, -EOPNOTSUPP (no malloc to hook; alloc_diag() says
 * why), -EBUSY (a thread stayed inside an entry point's first bytes,
 * or would not stop: alloc_diag() says "unsafe";
 * nothing of them written), or the engine's error.
 */
int sampler_start(struct alloc_session *s, const struct maps *maps,
		  const struct sampler_status *st, const struct sampler_prep *p,
		  struct sampler_start *r);

/*
 * Renew the lease of the sampler at @image in the pinned process @pin
 * (struct sampler_start.lease): no sample is taken past @lease seconds
 * from now until the next renewal.  Nothing is stopped: one word of the
 * sampler's control block is stored while the process runs
 * (inject_store_word()).  0; -ENOENT when it is off or has no lease
 * (switched off, or on again by a prof on without one: nothing is
 * written); -EPROTO when no sampler of this memsnap is at @image; or
 * -errno (-ESRCH: the pinned process is gone).
 */
struct proc_pin;
int sampler_renew(const struct proc_pin *pin, uint64_t image,
		  uint64_t lease);

/* Switch the sampler of @st off: every slot and entry point back to
 * what it held.  0 (*@restored: slots, *@entries: entry points),
 * -ENOENT when @st found none, or the engine's error. */
int sampler_stop(struct alloc_session *s, const struct sampler_status *st,
		 unsigned int *restored, unsigned int *entries);

struct sampler_dump {
	uint64_t live;		/* sampled blocks alive */
	uint64_t freed_kept[2];	/* freed ones read from the reservoir's
				 * parts (small, large blocks) */
	uint64_t stacks;	/* distinct stacks written */
	uint64_t unwound;	/* records unwound past their first frame */
	uint64_t frames;	/* frames unwound, all records */
	uint64_t kept;		/* frames of the distinct stacks */
	uint64_t lost;		/* records the unwinder failed on */
	char why[160];		/* ... and why */
	const char *spent;	/* a budget spent, in words, or NULL */
	uint64_t cut;		/* records left with their caller alone */
	uint64_t truncated;	/* live records whose stack stops short of
				 * the thread's start ([truncated]) */
	uint64_t truncated_kept; /* the same of the reservoir's, whose
				  * stacks it cuts to its budget */
	struct sampler_status st;
};

/*
 * Write a jemalloc heap_v2 profile of the live sampled blocks of process
 * @pid (its mappings @maps) to @out: every record's stack unwound here
 * from its registers and stack copy, with the CFI of the target's
 * objects as loaded.  The target wrote the table: a geometry memsnap
 * does not make is -EPROTO; past a dump's budget of work the records
 * left keep their caller alone (d->spent names it, d->cut counts them);
 * a profile past @max_bytes is -EFBIG.  Its control block is read
 * again where @st (sampler_find()) found it.  0, -ENOENT (no sampler),
 * or an error.
 */
int sampler_dump(pid_t pid, const struct maps *maps,
		 const struct sampler_status *st, FILE *out,
		 uint64_t max_bytes, struct sampler_dump *d);

#endif
