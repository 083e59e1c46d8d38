#ifndef MEMSNAP_INJECTOR_UNWIND_H
#define MEMSNAP_INJECTOR_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "injector/unwind/core.h"

/*
 * Unwinding the target's stacks.  The unwinder parses what the target
 * wrote (its unwind tables), so it runs in a child with no rights
 * (common/sandbox.h, injector/unwind/host.c): a bug there costs the unwind,
 * never memsnap.  The CFI comes from the target's memory alone: each
 * object's PT_GNU_EH_FRAME table as loaded, found through the maps.  No
 * file is opened (a hostile process names what its maps show: a FIFO, a
 * device).  Each unwind has a budget of memory reads and of pages, and a
 * time limit.
 */

struct inject_session;
struct maps;
struct unwinder;

/*
 * The call stack of thread @tid of the session's process, in a
 * ptrace-stop, innermost first, from its registers as they are now; the
 * session keeps the unwinder (inject_close() frees it).  The walk stops
 * after @max frames, at a pc of 0, when the unwinder gives up, or at a
 * budget.  Returns the number of frames (>= 1 when the first pc was
 * readable) or -errno (-EIO, -ENOMEM, -ETIMEDOUT, -EPROTO, -E2BIG:
 * unwinder_why() says what happened).  *@whole (may be NULL) says
 * whether the walk reached the outermost frame with CFI for every frame:
 * only then are the frames all there are.
 */
int unwind_thread(struct inject_session *s, pid_t tid, uint64_t *pcs,
		  size_t max, bool *whole);

/*
 * Before a thread is stopped whose stack, as read then, the fast check
 * would send to the unwinder (injector/thread.c): the unwinder's
 * sandboxed child started and given the session's maps, so that the
 * unwind of the stopped thread waits for neither (a fork, the
 * sandbox's set-up, the maps: most of a check's time).  A failure here
 * is tried again at that unwind.
 *
 * With @top (else 0), the thread is asleep in a system call at @pc with
 * stack pointer @sp, its stack mapped up to @top: that stack, as it is
 * now, is unwound too and the result thrown away.  The child then holds
 * the CFI tables of the objects on the way and their pages, and the
 * unwind at the stop reads little but the live stack.
 */
void unwind_prepare(struct inject_session *s, uint64_t pc, uint64_t sp,
		    uint64_t top);

/*
 * Unwinding threads that are no longer where they were: registers and a
 * copy of the stack saved inside the target (the sampler's records),
 * unwound long after, many with one unwinder.  Memory is read from the
 * stack copy, and from the target's file mappings and @extra (code and
 * CFI, which do not change) through a page cache; nothing else.
 */
struct unwind_saved {
	/* the registers the unwind starts from: @regs[i] is register
	 * @regnums[i] in DWARF's numbering as libunwind extends it (the
	 * sampler's: sampler/layout.h), the pc among them */
	const uint64_t *regs;
	const unsigned char *regnums;
	unsigned int nregs;
	uint64_t stack_lo;	/* where the copy was taken */
	const unsigned char *stack;
	size_t stack_len;
};

/* One unwind's result: @pcs is the caller's room for the frames. */
struct unwind_out {
	uint64_t *pcs;
	int n;			/* frames stored, or -errno */
	bool whole;
	uint64_t *touched;	/* the words of the stack read (unwind.c) */
};

/* An unwinder of process @pid with mappings @maps (copied); @extra may
 * be NULL.  Its child starts with the first unwind.  NULL on ENOMEM. */
struct unwinder *unwinder_new(pid_t pid, const struct maps *maps,
			      const struct unwind_code *extra);
void unwinder_free(struct unwinder *uw);

/*
 * The frames of the @n stacks @sv, innermost first, at most @max each,
 * into @out[i] (several to the child at once: one round trip for up to
 * 16).  0, or -errno when the unwinder failed (every @out[i].n that it
 * did not answer is then that -errno).
 */
int unwind_saved(struct unwinder *uw, const struct unwind_saved *sv,
		 size_t n, size_t max, struct unwind_out *out);

/* Why the last unwind of @uw failed ("the unwinder killed by SIGSEGV"),
 * or NULL. */
const char *unwinder_why(const struct unwinder *uw);

/* Pages of the target served to @uw's children so far. */
uint64_t unwinder_pages(const struct unwinder *uw);

#endif
