#ifndef MEMSNAP_INJECTOR_WORLD_H
#define MEMSNAP_INJECTOR_WORLD_H

/*
 * Every thread of the process stopped together, for the write of
 * entry-point patches (world_patch.c, inject_patch()): the engine's
 * one place that holds more than the borrowed thread.
 */
#include "injector/engine.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct held {
	struct tracee t;
	int sig;		/* the signal its stop took: given back */
	/* what task/TID/syscall said just before the seize: at the stop
	 * AArch64's x0 holds the result, not the call's first argument,
	 * and /proc no longer shows the call (the kernel forgets it
	 * before the stop) */
	struct arch_syscall sc;
	bool have_sc;
	/* stopped by our interrupt, nothing to give back: may be
	 * stepped (step_out()) */
	bool steppable;
	/* born traced to a held thread's clone() without CLONE_THREAD:
	 * another process, held all the same (it may share the memory),
	 * but not one of the process's threads to count */
	bool other;
};

struct world {
	struct held *v;
	size_t n, cap;
	/* threads found exiting, which cannot be seized (EPERM) and run
	 * no more code: not new when listed again */
	pid_t *dead;
	size_t ndead, dead_cap;
};

/* Seize and stop every thread of the session's process but the
 * borrowed one into @w, those created meanwhile too.  0, or -errno
 * (inj_fail() names the kind where the errno alone would mislead). */
int world_stop_all(struct inject_session *s, struct world *w);

/* Let every thread of @w go, each with the signal its stop took. */
void world_let_go(struct world *w);

/* @t, seized but not stopped in time: kept to detach later. */
void world_keep_stale(struct inject_session *s, struct tracee *t);

#endif
