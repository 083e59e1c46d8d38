#ifndef MEMSNAP_ALLOCATORS_ALLOCATOR_H
#define MEMSNAP_ALLOCATORS_ALLOCATOR_H

#include "injector/inject.h"
#include "symbols/detect.h"
#include "symbols/objects.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * What an allocator can do for memsnap, behind one interface, so that
 * cli/ asks "can it dump?" and never "is it jemalloc?".
 *
 *   struct alloc_session *s;
 *   rc = alloc_open(pid, os, &det, &iopts, &s);   borrow ONE thread
 *   rc = alloc_dump(s, a, "/tmp/.memsnap-.../dump.heap");
 *   rc = alloc_prof(s, a, ALLOC_PROF_ON, 0, &pr);
 *   rc = alloc_state(s, a, &st);                  as many as needed
 *   rc = alloc_close(s, &timings);                restore, detach
 *
 * All operations of one session run while the same single thread is
 * borrowed (one attach).  Each returns 0 or -errno:
 *
 *   -EOPNOTSUPP  this allocator cannot do that in this process (no
 *                backend, built without it, or switched off at start-up);
 *                alloc_why() and alloc_hint() say why and what to do
 *   -EREMOTEIO   the call ran and the allocator refused; alloc_errno()
 *                is its own error (EFAULT, EAGAIN, ...), alloc_why()
 *                says it in words
 *   other        from the call engine (injector/inject.h): -ESRCH,
 *                -EPERM, -ETIMEDOUT, -EINTR, ...; the target is restored
 */

enum alloc_cap {
	ALLOC_CAN_DUMP = 1u << 0,  /* heap profile written to a file */
	ALLOC_CAN_PROF = 1u << 1,  /* sampling on/off, reset, gdump */
	ALLOC_CAN_STATE = 1u << 2, /* version, settings, statistics */
	ALLOC_CAN_TRIM = 1u << 3,  /* give free memory back */
};

enum alloc_prof_op {
	ALLOC_PROF_ON,
	ALLOC_PROF_OFF,
	ALLOC_PROF_RESET,	/* arg: new lg_sample, or ALLOC_PROF_KEEP */
	ALLOC_PROF_GDUMP_ON,
	ALLOC_PROF_GDUMP_OFF,
};

#define ALLOC_PROF_KEEP UINT64_MAX

struct alloc_prof_result {
	bool was, now;		/* the switch before and after */
	uint64_t lg_sample;	/* after a reset */
};

/*
 * Runtime state as a list of named values, in the allocator's own
 * names ("version", "opt.prof", "stats.allocated"), so that `info` can
 * print any allocator's state without knowing it.
 */
enum alloc_item_type {
	ALLOC_ITEM_BOOL,
	ALLOC_ITEM_U64,
	ALLOC_ITEM_BYTES,	/* a u64 that is a size in bytes */
	ALLOC_ITEM_STR,
};

struct alloc_item {
	const char *key;	/* static */
	enum alloc_item_type type;
	int err;		/* 0, or why the value is unknown (-errno,
				   or a positive allocator error) */
	bool b;
	uint64_t u;
	char s[256];
};

#define ALLOC_MAX_ITEMS 24

struct alloc_state {
	struct alloc_item v[ALLOC_MAX_ITEMS];
	size_t n;
};

struct alloc_session;

/* What allocators of @kind can do here: ALLOC_CAN_* bits (0: nothing). */
unsigned int alloc_caps(enum alloc_kind kind);

/*
 * Borrow one thread of @pid for calls into the allocators of @det (found
 * in @os, both outliving the session).  @iopts gives the thread, timeout
 * and interrupt flag; the forbidden ranges are filled in here: a thread
 * with a frame inside any allocator of @det is never used.  0 or -errno
 * from inject_open(); @iopts->why then says why.
 */
int alloc_open(pid_t pid, struct objects *os, const struct detection *det,
	       const struct inject_opts *iopts, struct alloc_session **out);

/* Write @a's heap profile to @path, absolute in the target's view. */
int alloc_dump(struct alloc_session *s, const struct allocator *a,
	       const char *path);

int alloc_prof(struct alloc_session *s, const struct allocator *a,
	       enum alloc_prof_op op, uint64_t arg,
	       struct alloc_prof_result *res);

/* Refresh and read @a's state (statistics after an epoch refresh). */
int alloc_state(struct alloc_session *s, const struct allocator *a,
		struct alloc_state *st);

/* After a failed operation: the error as a clause, "" if none. */
const char *alloc_why(const struct alloc_session *s);
/* ... and what to do about it, "" if nothing. */
const char *alloc_hint(const struct alloc_session *s);
/* ... and the allocator's own errno after -EREMOTEIO. */
int alloc_errno(const struct alloc_session *s);

/* After an engine error: what happened to the call ("SIGSEGV at ..."). */
const char *alloc_detail(const struct alloc_session *s);

/* After a timeout or a fault: the borrowed thread's stack at that
 * moment, innermost first; the number of pcs stored. */
size_t alloc_backtrace(const struct alloc_session *s, uint64_t *pcs,
		       size_t max);

/* The borrowed thread. */
pid_t alloc_tid(const struct alloc_session *s);

/*
 * Restore and detach; @t (if not NULL) receives the timings of the
 * whole session.  0 or -errno; @s is freed either way.
 */
int alloc_close(struct alloc_session *s, struct inject_timings *t);

#endif
