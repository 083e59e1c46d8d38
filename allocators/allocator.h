#ifndef MEMSNAP_ALLOCATORS_ALLOCATOR_H
#define MEMSNAP_ALLOCATORS_ALLOCATOR_H

#include "agent/dumpdir.h"
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
 *   rc = alloc_open(pid, os, &det, &iopts, extra, &s); borrow ONE thread
 *   rc = alloc_dump(s, a, dir, fd, &to_fd);
 *   rc = alloc_prof(s, a, ALLOC_PROF_ON, 0, &pr);
 *   rc = alloc_state(s, a, &st);                  as many as needed
 *   rc = alloc_stats(s, a, dir, ALLOC_STATS_RAW, &stats);
 *   rc = alloc_trim(s, a, &tr);
 *   rc = alloc_close(s, &timings);                restore, detach
 *
 * All operations of one session run while the same single thread is
 * borrowed (one attach).  Each returns 0 or -errno:
 *
 *   -EOPNOTSUPP  this allocator cannot do that in this process (no
 *                backend, built without it, or switched off at start-up);
 *                alloc_diag() says why and what to do
 *   -EREMOTEIO   the call ran and the allocator refused; alloc_errno()
 *                is its own error (EFAULT, EAGAIN, ...), alloc_diag()
 *                says it in words
 *   other        from the call engine (injector/inject.h): -ESRCH,
 *                -EPERM, -ETIMEDOUT, -EINTR, ...; the target is restored
 */

enum alloc_cap {
	ALLOC_CAN_DUMP = 1u << 0,  /* heap profile written to a file */
	ALLOC_CAN_PROF = 1u << 1,  /* sampling on/off, reset, gdump */
	ALLOC_CAN_STATE = 1u << 2, /* version, settings, a few numbers */
	ALLOC_CAN_TRIM = 1u << 3,  /* give free memory back */
	ALLOC_CAN_STATS = 1u << 4, /* full statistics (`stats`) */
};

/* What the bits of @caps mean, for `info`: "dump, prof, stats, trim". */
void alloc_caps_text(unsigned int caps, char *buf, size_t size);

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

/*
 * Statistics as tables of numbers, the same shape for every allocator so
 * that `stats` prints and exports them without knowing which one it is:
 *
 *   glibc     "arenas": one row per arena and "total" (system, in_use,
 *             free, fastbin, ...), "mallinfo2": one row
 *   jemalloc  "total": allocated, active, resident, ...
 *
 * A table's name and column names are stable JSON keys.  A value a row
 * lacks has have[] false.
 */
#define ALLOC_STAT_MAX_COLS 12
#define ALLOC_STAT_MAX_TABLES 4

struct alloc_stat_row {
	char name[48];
	uint64_t v[ALLOC_STAT_MAX_COLS];
	bool have[ALLOC_STAT_MAX_COLS];
};

struct alloc_stat_table {
	const char *name;			/* static */
	const char *cols[ALLOC_STAT_MAX_COLS];	/* static */
	bool bytes[ALLOC_STAT_MAX_COLS];	/* a size, not a count */
	size_t ncols;
	struct alloc_stat_row *rows;
	size_t nrows, cap;
};

enum alloc_stats_form {
	ALLOC_STATS_TABLES,	/* the tables only */
	ALLOC_STATS_RAW,	/* and the allocator's own report as text */
	ALLOC_STATS_JSON,	/* and its own JSON report, if it has one */
};

struct alloc_stats {
	struct alloc_stat_table t[ALLOC_STAT_MAX_TABLES];
	size_t nt;
	char *raw;		/* the allocator's own report, NUL-ended, or
				   NULL; the target's bytes: untrusted */
	size_t raw_len;
	const char *raw_format;	/* "text", "xml", "json" */
	const char *source;	/* "malloc_info(0, fp) + mallinfo2()" */
	bool truncated;		/* raw was cut at a size limit */
};

void alloc_stats_free(struct alloc_stats *st);

struct alloc_trim_result {
	const char *how;	/* "malloc_trim(0)" */
	bool have_released;	/* the allocator says whether it released */
	bool released;
};

/*
 * Where no frame of a borrowed thread may be when memsnap calls into the
 * process: every allocator (a library whole; one sharing its object, as
 * glibc, by its entry points), stdio's list of FILEs, the dynamic loader,
 * the unwinder, and fork.  alloc_open() uses it; `call` too.
 */
#define ALLOC_MAX_RANGES 160

struct alloc_fence {
	struct inject_range v[ALLOC_MAX_RANGES];
	char what[ALLOC_MAX_RANGES][96];
	size_t n;
};

void alloc_fence_build(struct objects *os, const struct detection *d,
		       struct alloc_fence *f);

/* One range more, [@lo, @hi), named @what (nothing when full). */
void alloc_fence_add(struct alloc_fence *f, uint64_t lo, uint64_t hi,
		     const char *what);

struct alloc_session;

/* What allocators of @kind can do here: ALLOC_CAN_* bits (0: nothing). */
unsigned int alloc_caps(enum alloc_kind kind);

/*
 * What memsnap can do with this allocator now, given its state as read
 * (@st NULL or empty: not read, the kind's caps): a jemalloc without
 * config.prof or started without opt.prof cannot dump or profile.
 */
unsigned int alloc_caps_now(enum alloc_kind kind, const struct alloc_state *st);

/*
 * Borrow one thread of @pid for calls into the allocators of @det (found
 * in @os, both outliving the session).  @iopts gives the thread, timeout
 * and interrupt flag; the forbidden ranges are filled in here: a thread
 * with a frame inside any allocator of @det, or inside a range of @extra
 * (NULL: none; the caller's own, such as memsnap's sampler), is never
 * used.  0 or -errno from inject_open(); @iopts->why then says why, and
 * @iopts->diag what it means.
 */
int alloc_open(pid_t pid, struct objects *os, const struct detection *det,
	       const struct inject_opts *iopts, const struct alloc_fence *extra,
	       struct alloc_session **out);

/*
 * Write @a's heap profile.  An allocator that writes files itself
 * (jemalloc) writes a memfd of the target's by a name in its view, and
 * memsnap's descriptor for that memfd is put at @fd; where that way is
 * closed, it writes the file of @dir (started now if it was deferred).
 * One that hands its profile back in memory (gperftools'
 * GetHeapProfile) has it copied to @fd.  *@to_fd: the profile is at @fd.
 */
int alloc_dump(struct alloc_session *s, const struct allocator *a,
	       struct dumpdir *dir, int fd, bool *to_fd);

/*
 * Switch @a's profiling.  @dir (may be NULL) is a private directory of
 * the target's view, for an allocator that wants a file name prefix
 * (gperftools' HeapProfilerStart).
 */
int alloc_prof(struct alloc_session *s, const struct allocator *a,
	       enum alloc_prof_op op, uint64_t arg, struct dumpdir *dir,
	       struct alloc_prof_result *res);

/* Refresh and read @a's state (statistics after an epoch refresh). */
int alloc_state(struct alloc_session *s, const struct allocator *a,
		struct alloc_state *st);

/*
 * Full statistics of @a.  A report the allocator prints goes to a file in
 * @dir (the target writes it; nothing reaches its stdout or stderr).
 * @st is filled (free with alloc_stats_free(), also on error).
 */
int alloc_stats(struct alloc_session *s, const struct allocator *a,
		struct dumpdir *dir, enum alloc_stats_form form,
		struct alloc_stats *st);

/*
 * Call any function @c on the borrowed thread (`memsnap call`), with
 * the session's fences and errno kept: inject_call().
 */
int alloc_call_function(struct alloc_session *s, struct inject_call *c,
			struct inject_result *r);

/* Give free memory back to the system. */
int alloc_trim(struct alloc_session *s, const struct allocator *a,
	       struct alloc_trim_result *res);

/*
 * What error @rc of an operation of @s means (common/diag.h): its kind,
 * one line, and what to do about it.  Named where the failure happened
 * when it was understood there; else -EOPNOTSUPP unsupported,
 * -EREMOTEIO refused, the rest the engine's (inject_diag()).  A failed
 * alloc_open() says it in @iopts->diag.
 */
void alloc_diag(const struct alloc_session *s, int rc, struct diag *d);
/* The allocator's own errno after -EREMOTEIO. */
int alloc_errno(const struct alloc_session *s);

/* After a timeout or a fault: the borrowed thread's stack at that
 * moment, innermost first; the number of pcs stored. */
/* @pc is in memsnap's stub page: "[memsnap-stub]" in a stack. */
bool alloc_pc_in_stub(const struct alloc_session *s, uint64_t pc);

size_t alloc_backtrace(const struct alloc_session *s, uint64_t *pcs,
		       size_t max);

/* The borrowed thread. */
pid_t alloc_tid(const struct alloc_session *s);

/* ---- for what borrows a session's thread (the sampler) --------------------- */

/* The process, and the engine's session that holds its thread: what
 * the sampler writes and calls through. */
pid_t alloc_pid(const struct alloc_session *s);
struct inject_session *alloc_inject(struct alloc_session *s);

/* A new operation: no failure yet (one that failed was said or was not
 * the command's). */
void alloc_clear_error(struct alloc_session *s);

/* @name as the target's dynamic linker binds it: the first object of
 * the search order that defines it (0: none). */
uint64_t alloc_bound_symbol(struct alloc_session *s, const char *name);

/* The same in objects @os with @det's search order, no session needed
 * (what is resolved before any thread is stopped). */
int alloc_bound_in(struct objects *os, const struct detection *det,
		   const char *name, struct symbol *out);

/* Call @fn with integer arguments; its return register in *@ret. */
int alloc_call(struct alloc_session *s, uint64_t fn, const uint64_t *args,
	       unsigned int nargs, uint64_t *ret);

/* Fail with @rc, which means @kind (common/diag.h), saying what
 * happened in one line: the kind is named here, where the failure is
 * understood, not guessed from the errno by the caller.  Returns @rc. */
int alloc_fail(struct alloc_session *s, int rc, enum diag_kind kind,
	       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Fail with the engine's error @rc (inject_diag()), its line after
 * what @fmt says was under way: "patching malloc's entry points: ...".
 * Returns @rc. */
int alloc_fail_in(struct alloc_session *s, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));


/*
 * Restore and detach; @t (if not NULL) receives the timings of the
 * whole session.  0 or -errno; @s is freed either way.
 */
int alloc_close(struct alloc_session *s, struct inject_timings *t);

#endif
