#ifndef MEMSNAP_COMMON_DIAG_H
#define MEMSNAP_COMMON_DIAG_H

/*
 * memsnap's one error vocabulary.  Functions return 0 or -errno; what a
 * failure means to the user is a struct diag: its kind (which decides
 * the exit status, cli/message.c), one line saying what happened, and
 * what to do about it.  The layer that failed fills it, where it
 * failed, tied to the rc it returns (inj_fail() and inject_diag() in
 * the engine, alloc_fail() and alloc_diag() above it), so that no
 * caller reads a meaning into the number.
 */
#include <stdarg.h>
#include <stddef.h>

enum diag_kind {
	DIAG_FAILED,		/* an operation failed (I/O, memory, ...) */
	DIAG_NO_PROCESS,	/* no such process or thread, zombie, kernel
				   thread, or it exited */
	DIAG_PERMISSION,	/* not allowed to inspect or attach */
	DIAG_UNSUPPORTED,	/* no allocator, or it cannot do that here */
	DIAG_UNSAFE,		/* no thread was safe to call from */
	DIAG_TIMEOUT,		/* the call did not finish in time */
	DIAG_REFUSED,		/* the call ran; the allocator said no */
	DIAG_INTERRUPTED,	/* SIGINT/SIGTERM/SIGHUP; target restored */
	DIAG_BAD_INPUT,		/* an input file is unreadable */
	DIAG_USAGE,		/* a bad command line */
};

struct diag {
	enum diag_kind kind;
	char what[1024];	/* one line: what happened */
	char hint[512];		/* what to do about it, or "" */
};

/* @d is a failure of kind @kind, @fmt its line; its hint is kept. */
void diag_vset(struct diag *d, enum diag_kind kind, const char *fmt,
	       va_list ap) __attribute__((format(printf, 3, 0)));

/* What -errno @rc means when no layer gave it a meaning of its own. */
enum diag_kind diag_kind_of(int rc);

#endif
