#ifndef MEMSNAP_INJECTOR_UNWIND_UNWINDER_INTERNAL_H
#define MEMSNAP_INJECTOR_UNWIND_UNWINDER_INTERNAL_H

#include "common/sandbox.h"
#include "injector/unwind.h"
#include "injector/unwind/core.h"
#include "injector/unwind/wire.h"

/*
 * Between the unwinder over its sandboxed child (host.c) and the
 * borrowed thread's unwind (live.c).
 */

/* Memory reads one unwind of a stopped thread may make, and one of a
 * saved stack of the many a dump unwinds. */
#define READ_BUDGET 200000
#define SAVED_READ_BUDGET 20000
/* Pages memsnap serves one unwind, and the time it waits for one. */
#define PAGE_BUDGET 4096
#define SAVED_PAGE_BUDGET 512
#define JOB_MS 5000
/* Children started for one unwinder, at most. */
#define STARTS_MAX 4

/*
 * The whole unwind of a thread's stack made before its stop
 * (unwind_prepare()) from its pc and stack pointer alone, reading
 * nothing live: its copy of the stack and the file mappings.  It stands
 * for the unwind at the stop when the pc, the stack pointer, the maps
 * and every word of the stack it read are the same then: an unwind that
 * needed another register or other memory would not have been whole.
 * (A thread in pselect or nanosleep has its timeout rewritten by the
 * kernel at the stop, so the words compared are those it read, not the
 * whole copy.)
 */
struct warm {
	uint64_t pc, sp, maps_gen;
	unsigned char *stack;	/* len bytes at sp */
	size_t len, n;		/* n > 0: it holds */
	uint64_t pcs[FRAMES_MAX];
	uint64_t touched[TOUCHED_BYTES / 8];
};

struct unwinder {
	pid_t pid;
	struct sandbox sb;
	unsigned int starts;
	struct mapline *maps;
	size_t nmaps;
	struct unwind_code extra;
	struct unwind_ehframe eh[UNWIND_EHFRAMES];
	size_t neh;
	uint64_t eh_pages;	/* .eh_frame pages the child may still want */
	bool maps_sent;
	uint64_t pages;		/* served, all unwinds */
	char why[160];		/* why the last unwind failed, or "" */
	unsigned char *msg;	/* a JOBS or DONE message: MSG_MAX */
	struct warm warm;
};

/* A child ready for jobs: the one there, or a new one.  0 or -errno. */
int uw_ready(struct unwinder *uw);

/*
 * Run the @n jobs @j (their stacks @stacks) in the child, the results
 * into @out.  0, or -errno for all of them with uw->why saying what went
 * wrong.
 */
int uw_run_jobs(struct unwinder *uw, const struct uw_job *j,
		const unsigned char *const *stacks, size_t n,
		unsigned long page_budget, struct unwind_out *out);

/* An unwinder of process @pid over @maps (taken), no child yet. */
struct unwinder *uw_alloc(pid_t pid, struct mapline *maps, size_t nmaps,
			  const struct unwind_code *extra);

#endif
