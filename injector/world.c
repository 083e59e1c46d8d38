/*
 * Entry-point patches written with every thread of the process stopped
 * (injector/patch.h says why the write needs that).  The borrowed thread
 * is stopped already, in the call stub: what matters of it is where it
 * goes back to, its saved context.  Every other thread is seized and
 * interrupted, those it creates meanwhile too (stop_all()), then
 * checked: a thread whose pc, or a pc saved in a signal frame on its
 * stack, lies inside the bytes a jump covers would resume in the middle
 * of that jump.  Then the bytes are written and every thread let go.
 * memsnap killed at any point: the kernel detaches its tracees (those
 * it attached by itself to a thread's clone too), which run on; each
 * patch is one write, made whole or not at all while nothing runs.
 */
#include "injector/engine.h"
#include "injector/patch.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Rounds of stop, check, let go: a thread seen inside a patched range
 * has left it a moment later. */
#define WORLD_ROUNDS 5
#define WORLD_PAUSE_NS (2 * 1000 * 1000)
/* Instructions a thread is stepped through to leave a patched range:
 * it covers 5 at most (injector/arch/x86_64-patch.c). */
#define STEP_MAX 8
/* How long a step may take before the thread is stopped again where
 * it was: the whole process waits meanwhile. */
#define STEP_TIMEOUT_MS 50

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
static void keep_stale(struct inject_session *s, struct tracee *t)
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
			keep_stale(s, &h->t);
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
			inj_set_detail(s, "pid %d called execve", (int)s->pid);
			tracee_detach(&h->t, 0);
			return -ESRCH;
		default:
			h->t.seized = false;
			return -ESRCH;
		}
	}
}

static void let_go(struct world *w)
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
		keep_stale(s, &t);
	return rc;
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
		inj_set_detail(s, "thread %d is traced by pid %d (%s)",
			       (int)tid, (int)st.tracer, comm);
		return -EBUSY;
	}
	inj_set_detail(s, "thread %d: ptrace(PTRACE_SEIZE): %s", (int)tid,
		       strerror(-rc));
	return rc;
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
static int stop_all(struct inject_session *s, struct world *w)
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
			rc = seize_one(s, w, tids[i]);
			if (rc == -ESRCH)
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

static bool busy(const struct patch_plan *v, size_t n, uint64_t pc)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (pc > v[i].busy_lo && pc < v[i].busy_hi)
			return true;
	return false;
}

/* The end of the mapping @sp is in, as the session saw the maps; 0 if
 * none (a stack mapped since). */
static uint64_t stack_end(const struct inject_session *s, uint64_t sp)
{
	size_t i;

	for (i = 0; i < s->nmaps; i++)
		if (sp >= s->maps[i].start && sp < s->maps[i].end)
			return s->maps[i].end;
	return 0;
}

/*
 * Whether a thread at @pc with stack pointer @sp is clear of every busy
 * range: its pc, and every word from @sp up to the end of its stack (a
 * signal frame saves the interrupted pc there; so may other data, which
 * only costs a round).
 */
static bool clear_of(struct inject_session *s, const struct patch_plan *v,
		     size_t n, uint64_t pc, uint64_t sp)
{
	uint64_t end, addr, w[512];
	size_t i, len;

	if (busy(v, n, pc))
		return false;
	sp &= ~(uint64_t)7;
	end = stack_end(s, sp);
	if (!end || end - sp > STACK_SCAN_MAX)
		end = sp + STACK_SCAN_MAX;
	for (addr = sp; addr < end; addr += len) {
		len = end - addr < sizeof(w) ? end - addr : sizeof(w);
		/* a page boundary at most per read: a short stack ends
		 * at its first unreadable page */
		if ((addr & (page_size() - 1)) + len > page_size())
			len = page_size() - (addr & (page_size() - 1));
		if (proc_read_mem(s->pid, addr, w, len))
			break;
		for (i = 0; i < len / 8; i++)
			if (busy(v, n, arch_strip_pac(w[i])))
				return false;
	}
	return true;
}

/* @t's pc and stack pointer: 0, -ESRCH (killed while stopped: it runs
 * no more), or -errno. */
static int pc_sp(struct tracee *t, uint64_t *pc, uint64_t *sp)
{
	struct arch_ctx *c;
	int rc = arch_save(t, NULL, &c);

	if (rc)
		return rc;
	*pc = arch_reg(c, ARCH_PC);
	*sp = arch_reg(c, ARCH_SP);
	arch_free(c);
	return 0;
}

/*
 * Step @h, stopped by our interrupt with its pc inside a busy range,
 * out of it one instruction at a time.  Preempted there on a busy
 * machine, a thread may not run again before the next round, nor the
 * one after; the instructions a jump covers hold no system call and no
 * branch back into them (the planner refuses both), so a few steps
 * leave.  Each step is one the thread was about to take.  0 when
 * stepped out (*@pc, *@sp where it stands now), 1 when still inside (a
 * signal came first: given back at detach, and the thread steps no
 * more), -ESRCH when gone, else -errno (the thread kept for
 * inject_finish() if it did not stop).
 */
static int step_out(struct inject_session *s, struct held *h,
		    const struct patch_plan *v, size_t n, uint64_t *pc,
		    uint64_t *sp)
{
	uint64_t deadline = inj_deadline_after(STEP_TIMEOUT_MS);
	struct stop st;
	siginfo_t si;
	int i, rc;

	for (i = 0; i < STEP_MAX; i++) {
		rc = tracee_step(&h->t);
		if (rc)
			return rc;
		rc = tracee_wait(&h->t, deadline, s->interrupted, &st);
		if (rc == -ETIMEDOUT) {
			/* the instruction waits (a page fault served
			 * slowly, or by a thread stopped here): stop it
			 * again, where it was */
			rc = tracee_interrupt(&h->t);
			if (!rc)
				rc = tracee_wait(&h->t, inj_deadline_after(
						 STOP_TIMEOUT_MS),
						 s->interrupted, &st);
		}
		if (rc) {
			keep_stale(s, &h->t);
			if (rc == -ETIMEDOUT)
				return inj_fail(s, -EBUSY, DIAG_UNSAFE,
						"thread %d did not stop after "
						"one instruction",
						(int)h->t.tid);
			return rc;
		}
		if (inj_is_gone(&st))
			return -ESRCH;
		if (st.kind != STOP_SIGNAL || st.sig != SIGTRAP ||
		    tracee_getsiginfo(&h->t, &si) || si.si_code != TRAP_TRACE) {
			/* a signal came first, or the interrupt: the
			 * signal goes back at detach */
			if (st.kind == STOP_SIGNAL)
				h->sig = st.sig;
			h->steppable = false;
			return 1;
		}
		rc = pc_sp(&h->t, pc, sp);
		if (rc)
			return rc;
		if (!busy(v, n, *pc)) {
			s->tm.world_stepped++;
			return 0;
		}
	}
	return 1;
}

/* Which thread, if any, is in a busy range: its tid, 0 when none, or a
 * negative error.  A held thread whose pc alone is in one is stepped
 * out of it first. */
static int who_is_busy(struct inject_session *s, struct world *w,
		       const struct patch_plan *v, size_t n)
{
	size_t i;

	if (!clear_of(s, v, n, arch_reg(s->ctx, ARCH_PC),
		      arch_reg(s->ctx, ARCH_SP)))
		return (int)s->t.tid;
	for (i = 0; i < w->n; i++) {
		struct held *h = &w->v[i];
		uint64_t pc, sp;
		int rc = pc_sp(&h->t, &pc, &sp);

		if (!rc && busy(v, n, pc) && h->steppable)
			rc = step_out(s, h, v, n, &pc, &sp);
		if (rc == -ESRCH)
			continue;
		if (rc < 0)
			return rc;
		if (rc || !clear_of(s, v, n, pc, sp))
			return (int)h->t.tid;
	}
	return 0;
}

/* Write each plan whose bytes hold @from as @to; count the writes. */
static int write_all(struct inject_session *s, const struct patch_plan *v,
		     size_t n, bool undo, unsigned int *changed)
{
	unsigned char cur[PATCH_MAX];
	size_t i;
	int rc;

	for (i = 0; i < n; i++) {
		const unsigned char *from = undo ? v[i].new : v[i].old;
		const unsigned char *to = undo ? v[i].old : v[i].new;

		rc = tracee_read(&s->t, v[i].at, cur, v[i].len);
		if (rc)
			return rc;
		/* holding what it is to hold already, or something else
		 * (another tool's patch): not ours to write */
		if (memcmp(cur, from, v[i].len))
			continue;
		rc = tracee_write(&s->t, v[i].at, to, v[i].len);
		if (rc)
			return rc;
		(*changed)++;
	}
	return 0;
}

/* Whether some plan's bytes hold what it replaces (a read error counts
 * as yes: the round will say). */
static bool to_write(struct inject_session *s, const struct patch_plan *v,
		     size_t n, bool undo)
{
	unsigned char cur[PATCH_MAX];
	size_t i;

	for (i = 0; i < n; i++)
		if (tracee_read(&s->t, v[i].at, cur, v[i].len) ||
		    !memcmp(cur, undo ? v[i].new : v[i].old, v[i].len))
			return true;
	return false;
}

int inject_patch(struct inject_session *s, const struct patch_plan *v,
		 size_t n, bool undo, unsigned int *changed)
{
	struct timespec pause = { 0, WORLD_PAUSE_NS };
	struct world w = { 0 };
	int round, rc = 0, who = 0;
	uint64_t t0;

	*changed = 0;
	if (!s->t.seized || s->dead || !s->ctx)
		return -ESRCH;
	/* nothing to write (on again, off of what never went on): no
	 * thread is stopped */
	if (!to_write(s, v, n, undo))
		return 0;
	for (round = 0; round < WORLD_ROUNDS; round++) {
		if (round)
			nanosleep(&pause, NULL);
		t0 = now_us();
		rc = stop_all(s, &w);
		/* undoing needs no check: the old bytes are whole
		 * instructions wherever a thread may stand */
		if (!rc && !undo)
			rc = who = who_is_busy(s, &w, v, n);
		if (!rc)
			rc = write_all(s, v, n, undo, changed);
		if (w.n + 1 > s->tm.world_threads)
			s->tm.world_threads = (unsigned int)w.n + 1;
		if (s->tm.world_threads > s->tm.threads_stopped)
			s->tm.threads_stopped = s->tm.world_threads;
		let_go(&w);
		s->tm.world_us += now_us() - t0;
		if (rc <= 0)
			return rc;
	}
	return inj_fail(s, -EBUSY, DIAG_UNSAFE,
			"thread %d stayed inside the first bytes of a "
			"function to patch, %d times", who, WORLD_ROUNDS);
}
