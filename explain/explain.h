#ifndef MEMSNAP_EXPLAIN_EXPLAIN_H
#define MEMSNAP_EXPLAIN_EXPLAIN_H

#include "allocators/account.h"
#include "proc/runtime.h"
#include "proc/smaps.h"

#include <stdio.h>
#include <sys/types.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * `memsnap --pid N explain`: where the resident memory is, and what to
 * do about it.  Pure arithmetic over what proc/ read (struct
 * proc_memory) and what the allocator said (struct alloc_account): no
 * I/O, so the tests give it any numbers.
 *
 * The parts add up to RSS (VmRSS):
 *
 *   anonymous RSS  = heap_in_use + heap_free + allocator_metadata
 *                    + runtime + thread_stacks + anon_other
 *                    + memsnap_sampler
 *   RSS            = anonymous + file + shmem + unaccounted
 *
 * The allocator's numbers describe memory inside the anonymous private
 * mappings (the pool: every Anonymous of mappings without a file, but
 * the thread stacks), so they are bounded by it, in this order: in use,
 * metadata, free (jemalloc's metadata on transparent huge pages by the
 * huge pages it is on, as far as AnonHugePages there shows them).
 * What they claim beyond it (jemalloc's resident counts
 * pages it never touched) is cut, and said (clamped).  anon_other is
 * the rest of the anonymous memory: the program's own mmaps and the
 * copies on write of its files.  An allocator that does not count in
 * use apart from free (a mimalloc release build: in_use_with_free) gives
 * no heap_in_use, heap_free nor metadata: what it committed, bounded by
 * the pool, is one part, heap.  unaccounted is VmRSS (the kernel's
 * counters) minus the sum of parts (its page walk): signed.
 */

enum explain_part {
	PART_HEAP_IN_USE,
	PART_HEAP_FREE,
	PART_METADATA,
	PART_RUNTIME,	/* a language runtime's heap and own memory */
	PART_STACKS,
	PART_ANON_OTHER,
	PART_MEMSNAP,	/* memsnap's sampler in the process */
	PART_FILE,
	PART_SHMEM,
	PARTS,
};

/* The JSON name of part @p: "heap_in_use", ... */
const char *explain_part_name(enum explain_part p);

/* Below this, a finding has nothing worth saying (Redis's MEMORY
 * DOCTOR: 10 MB). */
#define EXPLAIN_MIN_BYTES (10ull << 20)
/* A process this small is not worth a verdict (MEMORY DOCTOR: 5 MB). */
#define EXPLAIN_SMALL_RSS (5ull << 20)
#define EXPLAIN_MAX_FINDINGS 16
/* Mappings claimed at most: memsnap's sampler, a runtime's heaps. */
#define EXPLAIN_CLAIMS_MAX 160

struct explain_input {
	pid_t pid;
	const struct proc_memory *pm;
	const struct alloc_account *acc; /* NULL: the allocator not read */
	const char *allocator;	/* "glibc", ...; NULL: none found */
	/* Why @acc is NULL, in words: "--no-attach", or what is missing
	 * ("no malloc in the process ..."); NULL when it was read. */
	const char *not_read;
	bool can_prof;		/* the allocator profiles (prof on) */
	bool sampler_on;	/* memsnap's sampler is on: dumps need no
				   prof on */
	unsigned int ncpus;
	/* Whose some mappings are (smaps_total()): memsnap's sampler,
	 * a runtime's heap. */
	const struct smap_claim *claims;
	size_t nclaims;
	/* The language runtime the process runs (NULL or RUNTIME_NONE:
	 * none), and whether it has no malloc at all (a static Go). */
	const struct runtime_info *rt;
	bool no_malloc;
	/* The process's name (its comm: the target's), for what explain
	 * knows of a few servers' own memory; NULL unknown. */
	const char *comm;
	/* Who else maps its largest shared memory (NULL: not looked). */
	const struct proc_sharers *sharers;
	/* The allocator is a jemalloc with Redis's defragmentation hint
	 * (its own build of it): CONFIG SET activedefrag works. */
	bool alloc_defrag;
	/* The object the allocator is in (its path's last part), or NULL. */
	const char *alloc_object;
};

/*
 * A cause of a finding's bytes, shown inside it rather than beside it,
 * so that no two findings count the same bytes: glibc_arenas and
 * page_size inside heap_free, huge_pages inside the finding of the part
 * its pages are most likely in.  A cause whose finding is not there is
 * a finding of its own.
 */
#define EXPLAIN_MAX_CAUSES 3

struct explain_cause {
	const char *id;
	uint64_t bytes;		/* of the finding's, that it explains */
	char text[512];
	char remedy[512];
};

struct explain_finding {
	const char *id;		/* "heap_free", ... */
	uint64_t bytes;		/* at stake */
	char text[512];		/* the numbers that show it */
	char remedy[512];	/* what to do, now or at the next start */
	struct explain_cause causes[EXPLAIN_MAX_CAUSES];
	size_t ncauses;
};

/* One of the largest anonymous or shared mappings, and the part its
 * memory went to. */
#define EXPLAIN_TOP_MAPPINGS 8

struct explain_mapping {
	uint64_t start, end, rss;
	char name[SMAP_NAME_MAX + 1];	/* the kernel's, "" none */
	const char *as;		/* "heap", "runtime", "thread stack", ... */
};

struct explain {
	uint64_t rss;		/* the page walk: the Rss of every mapping */
	uint64_t vm_rss;	/* status' VmRSS, the kernel's counter (0:
				   unknown); before Linux 6.2 it is brought
				   up to date in batches of a thread's page
				   faults, and lags the walk */
	uint64_t part[PARTS];
	int64_t unaccounted;	/* rss - sum(part) */
	uint64_t swap;
	bool attached;		/* the allocator's account is in the parts */
	/* heap_in_use, heap_free and metadata known apart; else heap: with
	 * --no-attach the pool (allocator and the program's own mmaps) as
	 * one part, attached to an allocator that counts in use and free
	 * together what it committed */
	bool heap_parts;
	uint64_t heap;
	uint64_t clamped;	/* what the allocator claimed beyond the pool */
	uint64_t cut[PARTS];	/* ... by part */
	uint64_t pool;		/* anonymous private RSS but stacks */
	uint64_t shmem_pss;	/* this process's share of its shared memory */
	uint64_t runtime_mapped;	/* of the runtime part, in mappings
					   known to be its heap's */
	unsigned long threads;
	size_t nstacks;
	uint64_t largest_stack;
	uint64_t anon_huge, page_size, vm_hwm;
	uint64_t huge_page;	/* the kernel's THP size, 0 unknown */
	uint64_t metadata_huge;	/* the metadata part from the huge pages
				   jemalloc's metadata is on, when more
				   than stats.metadata; else 0 */
	char thp[16];
	struct explain_finding f[EXPLAIN_MAX_FINDINGS];
	size_t nf;
	struct explain_mapping top[EXPLAIN_TOP_MAPPINGS];	/* most Rss first */
	size_t ntop;
	char verdict[384];
};

/* The parts of @in into @e (and its findings and verdict). */
void explain_compute(const struct explain_input *in, struct explain *e);

/* The findings of @e (explain_compute() calls it), most bytes first. */
void explain_findings(const struct explain_input *in, struct explain *e);

/* Part @p as a percent of @e->rss (0 when rss is 0). */
double explain_pct(const struct explain *e, uint64_t bytes);

/* The finding @id of @e, or NULL. */
const struct explain_finding *explain_find(const struct explain *e,
					   const char *id);

/* ---- the replies (print.c) ---------------------------------------------- */

/* The other allocators in the process (those that do not serve
 * malloc, unless --allocator chose one of them), as
 * alloc_account_state() read them. */
#define EXPLAIN_OTHERS_MAX 4

struct explain_others {
	struct alloc_account acc[EXPLAIN_OTHERS_MAX];
	bool serves_malloc[EXPLAIN_OTHERS_MAX];	/* --allocator chose
						   another one */
	size_t n;
};

/* Who was measured, for the replies. */
struct explain_who {
	pid_t pid;
	const char *comm;	/* the target's: printed as it is */
	pid_t tid;		/* the thread borrowed, 0: none */
	const char *allocator;	/* the one read (alloc_kind_name()), or NULL */
	bool serves_malloc;	/* that one serves malloc */
};

/* `explain`'s reply for a person: the verdict, the parts, the
 * findings, malloc'ed (NULL: no memory); the target's strings as they
 * are (the caller cleans them for a terminal). */
char *explain_text(const struct explain_who *w, const struct explain_input *in,
		   const struct explain *e, const struct explain_others *o);

/* `explain --json`: one object (docs/json.md) on @f. */
void explain_json(const struct explain_who *w, const struct explain_input *in,
		  const struct explain *e, const struct explain_others *o,
		  FILE *f);

#endif
