/*
 * Every thread of the process stopped for a moment (world.h): the
 * borrowed thread is stopped already, in the call stub; every other
 * thread is seized and interrupted, those it creates meanwhile too,
 * until a listing shows no thread that is not held.  memsnap killed at
 * any point: the kernel detaches its tracees (those it attached by
 * itself to a thread's clone too), which run on.
 */
#include "injector/world.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static bool holds(const struct world *w, pid_t tid)
{
	size_t i;

	for (i = 0; i < w->n; i++)
		if (w->v[i].t.tid == tid)
			return true;
	for (i = 0; i < w->ndead; i++)
		if (w->dead[i] == tid)
			return true;
	return false;
}

/* Keep a thread that never stopped for inject_finish(), which lets it
 * go once it does (a running tracee cannot be detached). */
void world_keep_stale(struct inject_session *s, struct tracee *t)
{
	struct stale *x = malloc(sizeof(*x));

	if (x) {
		x->t = *t;
		x->next = s->stale;
		s->stale = x;
	}
	t->seized = false;
}

/*
 * Our interrupt made a system call the kernel never restarts
 * (epoll_wait, sigtimedwait) fail with EINTR, which the thread would
 * not have seen without memsnap: turn that into a restart, as the
 * engine does for the thread it borrows.  Not where a signal is
 * pending: a real one explains the EINTR.
 */
static void heal(struct inject_session *s, struct held *h)
{
	struct thread_status st;
	struct arch_ctx *c;

	/* the arch code checks that the stop is in the call /proc saw */
	if (arch_save(&h->t, h->have_sc ? &h->sc : NULL, &c))
		return;
	if (arch_fix_spurious_eintr(c) &&
	    !thread_status_read(s->pid, h->t.tid, &st) &&
	    !(st.pending & ~st.blocked))
		arch_restore(&h->t, c);
	arch_free(c);
}

/*
 * Wait for the first stop of a thread just seized (its interrupt) or
 * just born traced.  0: stopped (the stop's signal in h->sig), with
 * *@born set when it stopped in clone() and the new thread is ours to
 * hold too; -ESRCH: gone; else an error.
 */
static int wait_stopped(struct inject_session *s, struct held *h,
			uint64_t deadline, pid_t *born)
{
	unsigned long msg;
	struct stop st;
	int rc;

	*born = 0;
	for (;;) {
		rc = tracee_wait(&h->t, deadline, s->interrupted, &st);
		if (rc == -ETIMEDOUT) {
			world_keep_stale(s, &h->t);
			return inj_fail(s, -EBUSY, DIAG_UNSAFE,
					"thread %d did not stop within %d ms "
					"(uninterruptible sleep?)",
					(int)h->t.tid, STOP_TIMEOUT_MS);
		}
		if (rc)
			return rc;
		switch (st.kind) {
		case STOP_EVENT:
			heal(s, h);
			h->steppable = true;
			return 0;
		case STOP_GROUP:	/* job-stopped: stays so at detach */
		case STOP_EXIT:		/* exiting: runs no more user code */
			return 0;
		case STOP_CLONE:
			/* Stopped in clone() (the stop takes the place of
			 * the interrupt's), which has made a thread: born
			 * traced, it stops before its first instruction. */
			rc = tracee_eventmsg(&h->t, &msg);
			if (rc)
				return rc;
			*born = (pid_t)msg;
			return 0;
		case STOP_SIGNAL:
			/* Stopped all the same; the signal goes back at
			 * detach, and the pending interrupt goes with it. */
			h->sig = st.sig;
			return 0;
		case STOP_SYSCALL:
		case STOP_OTHER_EVENT:
			rc = tracee_cont(&h->t, 0);
			if (rc)
				return rc;
			break;
		case STOP_EXEC:
			tracee_detach(&h->t, 0);
			return inj_fail(s, -ESRCH, INJ_KIND_OF_RC,
					"pid %d called execve", (int)s->pid);
		default:
			h->t.seized = false;
			return -ESRCH;
		}
	}
}

void world_let_go(struct world *w)
{
	size_t i;

	for (i = 0; i < w->n; i++)
		tracee_detach(&w->v[i].t, w->v[i].sig);
	free(w->v);
	free(w->dead);
	memset(w, 0, sizeof(*w));
}

/*
 * Hold thread @tid, which @tid's parent just created traced: it joins
 * the world, to be waited for.  Without the room for it, wait for its
 * first stop and let it go now, and fail: nothing is written then.
 */
static int adopt(struct inject_session *s, struct world *w, pid_t tid,
		 uint64_t deadline)
{
	struct tracee t;
	struct stop st;
	int rc;

	rc = array_grow((void **)&w->v, &w->cap, w->n + 1, sizeof(*w->v));
	if (!rc) {
		memset(&w->v[w->n], 0, sizeof(w->v[w->n]));
		tracee_adopt(&w->v[w->n].t, s->pid, tid);
		w->v[w->n].other = !triage_tid_exists(s->pid, tid);
		w->n++;
		return 0;
	}
	tracee_adopt(&t, s->pid, tid);
	if (!tracee_wait(&t, deadline, NULL, &st) && !inj_is_gone(&st))
		tracee_detach(&t, 0);
	else if (t.seized)
		world_keep_stale(s, &t);
	return rc;
}

/*
 * Thread @tid is the session's already: seized earlier (as a candidate
 * to borrow, or in a world stop) and kept because it did not stop in
 * time.  Its interrupt is still pending: it joins the world, to be
 * waited for again, and is let go with it.  1 when so, 0 when @tid is
 * not one of those, -ENOMEM.  (Seized again, it would fail with EPERM,
 * traced by memsnap itself.)
 */
static int hold_stale(struct inject_session *s, struct world *w, pid_t tid)
{
	struct stale **p, *x;
	int rc;

	for (p = &s->stale; *p && (*p)->t.tid != tid; p = &(*p)->next)
		;
	if (!*p)
		return 0;
	rc = array_grow((void **)&w->v, &w->cap, w->n + 1, sizeof(*w->v));
	if (rc)
		return rc;
	x = *p;
	*p = x->next;
	memset(&w->v[w->n], 0, sizeof(w->v[w->n]));
	w->v[w->n].t = x->t;
	w->v[w->n].t.seized = true;
	w->n++;
	free(x);
	return 1;
}

/*
 * Seize thread @tid into the world, with what task/TID/syscall says of
 * it first.  0: seized; -ESRCH: gone, or exiting (PTRACE_SEIZE fails
 * with EPERM on a thread past its exit: it runs no more code, and is
 * remembered so that a listing that shows it again finds nothing new);
 * else an error, said in the detail.
 */
static int seize_one(struct inject_session *s, struct world *w, pid_t tid)
{
	struct thread_status st;
	struct thread_info ti;
	char comm[32] = "?";
	struct held *h;
	int rc;

	rc = array_grow((void **)&w->v, &w->cap, w->n + 1, sizeof(*w->v));
	if (rc)
		return rc;
	h = &w->v[w->n];
	memset(h, 0, sizeof(*h));
	if (!triage_syscall(s->pid, tid, &ti) && ti.syscall >= 0) {
		h->sc = (struct arch_syscall){ .nr = ti.syscall,
					       .sp = ti.sc_sp,
					       .pc = ti.sc_pc };
		memcpy(h->sc.args, ti.sc_args, sizeof(h->sc.args));
		h->have_sc = true;
	}
	rc = tracee_seize_clones(&h->t, s->pid, tid);
	if (!rc) {
		w->n++;
		return 0;
	}
	if (h->t.seized)
		tracee_detach(&h->t, 0);
	if (rc == -ESRCH)
		return rc;
	if (rc == -EPERM && thread_dying(s->pid, tid) == 1) {
		if (array_grow((void **)&w->dead, &w->dead_cap, w->ndead + 1,
			       sizeof(*w->dead)))
			return -ENOMEM;
		w->dead[w->ndead++] = tid;
		return -ESRCH;
	}
	if (rc == -EPERM && !thread_status_read(s->pid, tid, &st) &&
	    st.tracer && st.tracer != getpid()) {
		/* strace -p, gdb: every thread must stop for the write */
		proc_comm(st.tracer, comm, sizeof(comm));
		return inj_fail(s, -EBUSY, INJ_KIND_OF_RC,
				"thread %d is traced by pid %d (%s)", (int)tid,
				(int)st.tracer, comm);
	}
	return inj_fail(s, rc, INJ_KIND_OF_RC,
			"thread %d: ptrace(PTRACE_SEIZE): %s", (int)tid,
			strerror(-rc));
}

/*
 * 0 when the process counts no thread beyond those held, the borrowed
 * one and the exiting ones still there; 1 when it does (a thread no
 * listing showed); -errno.  The count comes first: an exiting thread
 * that goes meanwhile leaves it too high, never too low.
 */
static int uncounted(struct inject_session *s, const struct world *w)
{
	unsigned long nr, known = 1;
	size_t i;
	int rc;

	rc = triage_nr_threads(s->pid, &nr);
	if (rc)
		return rc;
	for (i = 0; i < w->n; i++)
		known += !w->v[i].other;
	for (i = 0; i < w->ndead; i++)
		known += triage_tid_exists(s->pid, w->dead[i]);
	return nr != known;
}

/*
 * Stop every thread but the borrowed one, and every one created
 * meanwhile: list the threads, seize each one not held yet, wait for
 * their stops, and list again, until a listing names no thread that is
 * not held and the process counts no other.
 *
 * Only a running thread that is not ours can create a thread that is
 * not: one seized is asked to report its clones (tracee_seize_clones()),
 * so a thread it creates even before its stop is born held; one stopped
 * creates none.  A thread listed but gone, or exiting, by the time it
 * is seized may have created one first, which no listing has shown
 * yet: it counts as new, as one seized does.  And a listing may miss a
 * live thread (the kernel's walk of task/ ends at a thread that exits
 * under it), the count of threads may not.  (A pass that merely added
 * nothing once ended the stop, and a thread such a one had created ran
 * through the write.)  Threads that keep appearing faster than they
 * are seized: -EBUSY at the deadline.
 */
int world_stop_all(struct inject_session *s, struct world *w)
{
	uint64_t deadline = inj_deadline_after(STOP_TIMEOUT_MS);
	size_t first, i, n;
	bool fresh;
	pid_t *tids;
	int rc;

	for (;;) {
		if (now_us() >= deadline) {
			return inj_fail(s, -EBUSY, DIAG_UNSAFE,
					"threads of pid %d kept appearing for "
					"%d ms: not all could be stopped",
					(int)s->pid, STOP_TIMEOUT_MS);
		}
		rc = triage_tids(s->pid, &tids, &n);
		if (rc)
			return rc;
		first = w->n;
		fresh = false;
		for (i = 0; i < n && !rc; i++) {
			if (tids[i] == s->t.tid || holds(w, tids[i]))
				continue;
			fresh = true;
			rc = hold_stale(s, w, tids[i]);
			if (!rc)
				rc = seize_one(s, w, tids[i]);
			if (rc == -ESRCH || rc == 1)
				rc = 0;
		}
		free(tids);
		/* Wait for the ones seized in this pass, and those they
		 * created, even after a failure: each is healed, and only a
		 * stopped thread can be let go (one that never stops is
		 * kept for later). */
		for (i = first; i < w->n; i++) {
			pid_t born;
			int wrc = wait_stopped(s, &w->v[i], deadline, &born);

			if (!wrc && born)
				wrc = adopt(s, w, born, deadline);
			if (wrc == -ESRCH) {
				/* gone: forget it */
				w->v[i] = w->v[--w->n];
				i--;
			} else if (wrc && !rc) {
				rc = wrc;
			}
		}
		if (rc)
			return rc;
		if (fresh)
			continue;
		rc = uncounted(s, w);
		if (rc <= 0)
			return rc;
		/* a thread no listing showed: list again */
	}
}
