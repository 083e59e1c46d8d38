/*
 * The call engine: putting the thread back exactly, and letting it go.
 * See injector/engine.h, and the protocol at the top of inject.c.
 */
#include "injector/engine.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- restoring ----------------------------------------------------------- */

/* At a trap stop (inside get_signal): everything back exactly. */
static int restore_at_trap(struct inject_session *s)
{
	int rc = 0;

	if (s->mask_set && tracee_setsigmask(&s->t, s->sigmask))
		rc = -EIO;
	if (arch_restore(&s->t, s->ctx) && !rc)
		rc = -EIO;
	return rc;
}

static int restore(struct inject_session *s)
{
	uint64_t deadline;
	struct stop st;
	int rc = 0;

	if (s->errno_saved &&
	    tracee_write(&s->t, s->errno_addr, &s->errno_val, sizeof(int)))
		rc = -EIO;
	if (s->where != AT_SYSCALL)
		return restore_at_trap(s) ?: rc;

	/*
	 * A syscall stop: the kernel's restart logic does not run from
	 * here.  Put in the healed context (safe if we die now), then get
	 * a trap stop and put in the exact one.
	 */
	if (s->mask_set && !tracee_setsigmask(&s->t, s->sigmask))
		s->mask_set = false;
	if (arch_restore_healed(&s->t, s->ctx))
		rc = -EIO;
	if (tracee_interrupt(&s->t) || tracee_cont(&s->t, 0))
		return -EIO;
	deadline = inj_deadline_after(STOP_TIMEOUT_MS);
	for (;;) {
		int wrc = tracee_wait(&s->t, deadline, NULL, &st);

		if (wrc) {
			/* It runs healed; we can only detach at our exit. */
			s->t.seized = false;
			return wrc == -ETIMEDOUT ? rc : wrc;
		}
		if (inj_is_gone(&st)) {
			inj_mark_dead(s, &st);
			return -ESRCH;
		}
		if (st.kind == STOP_EVENT || st.kind == STOP_GROUP) {
			if (st.kind == STOP_GROUP)
				s->group_stopped = true;
			s->where = AT_TRAP;
			return restore_at_trap(s) ?: rc;
		}
		/* A pending signal now unblocked: deliver it as is. */
		if (tracee_cont(&s->t, st.kind == STOP_SIGNAL ? st.sig : 0))
			return -EIO;
	}
}

int inject_finish(struct inject_session *s)
{
	struct stale *x;
	uint64_t t0;
	int rc = 0;

	if (!s || s->finished)
		return s ? s->finish_rc : 0;
	t0 = now_us();
	if (s->t.seized && s->ctx && !s->dead && !s->abandoned)
		rc = restore(s);
	s->tm.restore_us = now_us() - t0;
	t0 = now_us();
	if (s->t.seized && tracee_detach(&s->t, 0) && !rc && !s->dead)
		rc = -EIO;
	s->tm.detach_us = now_us() - t0;
	while ((x = s->stale)) {
		struct stop st;

		/* Stopped by now? Then let it go; else at our exit. */
		x->t.seized = true;
		if (!tracee_wait(&x->t, 1, NULL, &st) && !inj_is_gone(&st))
			tracee_detach(&x->t, 0);
		s->stale = x->next;
		free(x);
	}
	tracee_release(&s->oldmask);
	s->finished = true;
	s->finish_rc = rc;
	return rc;
}

int inject_close(struct inject_session *s)
{
	int rc;

	if (!s)
		return 0;
	rc = inject_finish(s);
	arch_free(s->ctx);
	unwinder_free(s->uw);
	free(s->maps);
	seccomp_free(s->sc);
	if (s->pidfd >= 0)
		close(s->pidfd);
	free(s);
	return rc;
}
