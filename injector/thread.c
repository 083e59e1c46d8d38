/*
 * The call engine: choosing and seizing one thread, whose stack
 * injector/check.c then checks.  See injector/engine.h, and the
 * protocol at the top of inject.c.
 */
#include "injector/engine.h"

#include <errno.h>
#include <signal.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- opening: choose, seize, check, save -------------------------------- */

/* Seizures tried again when one failed with EPERM and the thread has no
 * tracer a moment later. */
#define SEIZE_TRIES 3

static int score_thread(pid_t pid, struct thread_info *ti)
{
	int score;

	if (ti->state == 'Z' || ti->state == 'X')
		return -1000;
	if (ti->syscall >= 0)
		score = syscall_score(ti->syscall);
	else if (ti->syscall == -1)
		score = 20; /* stopped in user space */
	else
		score = 10; /* running: it will stop at once too */
	if (ti->state == 'D')
		score -= 60;
	if (ti->tid == pid)
		score -= 30; /* the main thread often serves requests */
	if (ti->children)
		score -= 60; /* see parent_refused() */
	return score;
}

/*
 * While a thread is traced the kernel no longer discards an ignored
 * signal sent through it: a child's SIGCHLD (SIG_DFL ignores it) is
 * queued and wakes another thread, whose epoll_wait or sigwaitinfo then
 * fails with EINTR, which the kernel never restarts.  So a thread that
 * has children is not borrowed when memsnap chooses, unless it is the
 * only thread; --thread may still name it (the CLI warns).  Checked at
 * the stop: a stopped thread forks no more.
 */
static bool parent_refused(const struct inject_session *s,
			   const struct inject_opts *o, pid_t tid)
{
	if (o->tid || (o->pi && o->pi->threads == 1) ||
	    !triage_has_children(s->pid, tid))
		return false;
	inj_why_add(o, "tid %d has child processes: their exit signals would "
		    "interrupt other threads while it is borrowed", (int)tid);
	return true;
}

/* Put back a thread we only looked at, and let it go. */
static void let_go(struct inject_session *s)
{
	if (s->ctx) {
		arch_restore(&s->t, s->ctx);
		arch_free(s->ctx);
		s->ctx = NULL;
	}
	tracee_detach(&s->t, 0);
}

/*
 * Seize @tid and wait for its interrupt stop.  0: stopped (AT_TRAP);
 * -EAGAIN: job-stopped; -ESRCH: gone; -ETIMEDOUT: it did not stop.
 */
static int seize_stop(struct inject_session *s, pid_t tid)
{
	uint64_t deadline = inj_deadline_after(STOP_TIMEOUT_MS);
	struct stop st;
	int rc;

	rc = tracee_seize(&s->t, s->pid, tid);
	if (rc)
		return rc;
	for (;;) {
		rc = tracee_wait(&s->t, deadline, NULL, &st);
		if (rc == -ETIMEDOUT) {
			/* Cannot detach a running tracee: later. */
			struct stale *x = malloc(sizeof(*x));

			if (x) {
				x->t = s->t;
				x->next = s->stale;
				s->stale = x;
			}
			s->t.seized = false;
			return rc;
		}
		if (rc)
			return rc;
		switch (st.kind) {
		case STOP_EVENT:
			s->where = AT_TRAP;
			return 0;
		case STOP_GROUP:
			/* Leave it as it is: stopped. */
			tracee_detach(&s->t, 0);
			return -EAGAIN;
		case STOP_SIGNAL:
			/* Deliver it now; our interrupt stays pending. */
			rc = tracee_cont(&s->t, st.sig);
			break;
		case STOP_SYSCALL:
		case STOP_OTHER_EVENT:
			rc = tracee_cont(&s->t, 0);
			break;
		default:
			tracee_detach(&s->t, 0);
			return -ESRCH;
		}
		if (rc)
			return rc;
	}
}

/*
 * Another tracer on @tid (tracers attach per thread: another memsnap, an
 * strace -p TID): note who, in s->busy_by, and say so in why.
 */
static bool thread_traced(struct inject_session *s,
			  const struct inject_opts *o, pid_t tid,
			  const struct thread_status *st)
{
	char comm[32] = "?";
	pid_t tracer = st->tracer;

	if (!tracer || tracer == getpid())
		return false;
	proc_comm(tracer, comm, sizeof(comm));
	s->busy_by = tracer;
	snprintf(s->busy_comm, sizeof(s->busy_comm), "%s", comm);
	s->busy_memsnap = !strcmp(comm, "memsnap");
	/* a tracer that exited since the status was read: its hold on the
	 * thread ends with it */
	s->busy_wait |= s->busy_memsnap || (kill(tracer, 0) && errno == ESRCH);
	inj_why_add(o, "tid %d is traced by pid %d (%s)", (int)tid, (int)tracer,
		    comm);
	return true;
}

/*
 * Still the process that was triaged: its pidfd has not seen it exit (a
 * zombie keeps its pid too), else the same start time.
 */
bool inj_same_process(const struct inject_session *s)
{
	uint64_t t;

	if (s->pidfd >= 0)
		return syscall(SYS_pidfd_send_signal, s->pidfd, 0, NULL, 0) == 0;
	return !s->start_time ||
	       (!proc_start_time(s->pid, &t) && t == s->start_time);
}

/* A thread we seized that never stopped (uninterruptible sleep): ours
 * until it stops, so never seized again by this session. */
static bool held_stale(const struct inject_session *s, pid_t tid)
{
	const struct stale *x;

	for (x = s->stale; x; x = x->next)
		if (x->t.tid == tid)
			return true;
	return false;
}

/*
 * 0: @tid is ours and safe; -EDEADLK: refused (reason added to why);
 * -EALREADY: another tracer has it; -ETIMEDOUT: it did not stop.
 */
/*
 * Seize @ti and wait for its stop, after what can be known before it:
 * its status (a shadow stack, a tracer), whether its stack will need
 * the unwinder, and the system call it is in, read again as late as can
 * be (*@fresh).  0: stopped, with the time it took in s->tm.seize_us;
 * else what keeps it from being borrowed.
 */
static int seize_candidate(struct inject_session *s,
			   const struct inject_opts *o,
			   const struct thread_info *ti,
			   struct thread_info *fresh)
{
	struct thread_info now;
	struct thread_status st;
	char why[96];
	uint64_t t0, top;
	int rc, tries;

	/* One read before the seizure (shadow stack, tracer), one after it
	 * (signals pending at the stop, seccomp): each is needed then. */
	if (thread_status_read(s->pid, ti->tid, &st))
		memset(&st, 0, sizeof(st));	/* seize_stop will say */
	if (arch_thread_refused(st.text, why, sizeof(why))) {
		inj_why_add(o, "tid %d: %s", (int)ti->tid, why);
		return -EOPNOTSUPP;
	}
	if (held_stale(s, ti->tid))
		return -ETIMEDOUT;	/* said so the first time */
	if (thread_traced(s, o, ti->tid, &st))
		return -EALREADY;
	if (!inj_looks_clean(s, o, ti, &top))
		unwind_prepare(s, ti->sc_pc, ti->sc_sp, top);
	/* The call it is in, read again as late as can be: the triage's
	 * read may be milliseconds old, and a thread that entered a call
	 * since would lose its first argument at the stop (AArch64's x0)
	 * and see EINTR where the kernel restarts nothing. */
	if (triage_syscall(s->pid, ti->tid, fresh)) {
		memset(fresh, 0, sizeof(*fresh));
		fresh->syscall = -1;
	}
	/* the stop's time from here: what came before ran beside the
	 * thread, not while it waited */
	t0 = now_us();
	rc = seize_stop(s, ti->tid);
	for (tries = 0; rc == -EPERM; tries++) {
		/* Past its exit a thread cannot be seized (EPERM, which
		 * would otherwise blame a security module): gone, as far
		 * as borrowing it goes. */
		if (thread_dying(s->pid, ti->tid) == 1)
			return -ESRCH;
		/* Seized by someone else just now: the same as above. */
		if (thread_status_read(s->pid, ti->tid, &st))
			break;
		if (thread_traced(s, o, ti->tid, &st))
			return -EALREADY;
		/* Traced by nobody now: a tracer came and went between the
		 * check and the seizure (another memsnap's whole session
		 * fits there), so again; a security module refuses each
		 * time. */
		if (tries == SEIZE_TRIES)
			break;
		rc = seize_stop(s, ti->tid);
	}
	if (rc == -ETIMEDOUT && triage_one(s->pid, ti->tid, &now) == 0 &&
	    now.state == 'D')
		inj_why_add(o, "thread %d is in uninterruptible sleep (state D): "
			    "it did not stop within %d ms",
			    (int)ti->tid, STOP_TIMEOUT_MS);
	else if (rc == -ETIMEDOUT)
		inj_why_add(o, "tid %d: did not stop within %d ms (state %c)",
			    (int)ti->tid, STOP_TIMEOUT_MS, ti->state);
	if (rc)
		return rc;
	/* The pid may have been reused since it was triaged: never touch
	 * the process that has it now. */
	if (!inj_same_process(s)) {
		let_go(s);
		inj_why_add(o, "pid %d exited; the pid now names another process",
			    (int)s->pid);
		return -ESRCH;
	}
	s->tm.seize_us = now_us() - t0;
	return 0;
}

/*
 * The stopped thread's context saved (registers from @fresh's system
 * call, its signal mask, its status at the stop).  0, or an error with
 * the thread let go.
 */
static int save_stopped(struct inject_session *s, const struct inject_opts *o,
			const struct thread_info *ti,
			const struct thread_info *fresh)
{
	struct arch_syscall sc = { .nr = fresh->syscall, .sp = fresh->sc_sp,
				   .pc = fresh->sc_pc };
	char why[96];
	int rc;

	memcpy(sc.args, fresh->sc_args, sizeof(sc.args));
	rc = arch_save(&s->t, &sc, &s->ctx);
	if (!rc)
		rc = tracee_getsigmask(&s->t, &s->sigmask);
	if (rc) {
		let_go(s);
		return rc;
	}
	if (arch_ctx_refused(s->ctx, why, sizeof(why))) {
		inj_why_add(o, "tid %d: %s", (int)ti->tid, why);
		let_go(s);
		return -EOPNOTSUPP;
	}
	/* At once: if memsnap dies from here on, the thread restarts. */
	rc = thread_status_read(s->pid, ti->tid, &s->tstat);
	if (rc) {
		let_go(s);
		return rc;
	}
	if (!(s->tstat.pending & ~s->tstat.blocked) &&
	    arch_fix_spurious_eintr(s->ctx) && arch_restore(&s->t, s->ctx)) {
		let_go(s);
		return -EIO;
	}
	return 0;
}

/*
 * Borrow @ti if it is safe: seized and stopped, its context saved, its
 * stack checked (injector/check.c).  0: borrowed; -EDEADLK: refused
 * (the reason added to why); another error from the seizure.
 */
static int try_thread(struct inject_session *s, const struct inject_opts *o,
		      const struct thread_info *ti)
{
	struct thread_info fresh;
	uint64_t t1;
	int rc;

	rc = seize_candidate(s, o, ti, &fresh);
	if (!rc)
		rc = save_stopped(s, o, ti, &fresh);
	if (rc)
		return rc;
	t1 = now_us();
	if (parent_refused(s, o, ti->tid) || !inj_stack_safe(s, o, ti->tid)) {
		s->npcs = 0;
		let_go(s);
		return -EDEADLK;
	}
	s->tm.check_us = now_us() - t1;
	return 0;
}

static bool good_enough(void *arg, struct thread_info *ti)
{
	const struct inject_session *s = arg;

	return !s->round && !s->list_all &&
	       score_thread(s->pid, ti) >= GOOD_ENOUGH;
}

/*
 * While every thread we try is another memsnap's, wait for one: a call
 * takes milliseconds.  Up to this long, then "another memsnap is working
 * on PID N".
 */
#define BUSY_WAIT_MS 10000

int inj_choose_thread(struct inject_session *s, const struct inject_opts *o)
{
	struct thread_list l = { 0 };
	struct thread_info one;
	int rc = -EDEADLK, worst = 0, round;
	uint64_t busy_until = inj_deadline_after(BUSY_WAIT_MS);
	size_t i, tries, traced;
	bool partial = false;

	for (round = 0; round < MAX_ROUNDS; round++) {
		s->round = round;
		if (round)
			usleep(20000u * (unsigned int)round);
		if (o->interrupted && *o->interrupted)
			return -EINTR;
		if (o->tid) {
			rc = triage_one(s->pid, o->tid, &one);
			if (rc)
				return rc == -ENOENT ? -ESRCH : rc;
			l.v = &one;
			l.n = 1;
		} else {
			rc = triage_list_until(s->pid, good_enough, s, &l);
			if (rc)
				return rc == -ENOENT ? -ESRCH : rc;
			for (i = 0; i < l.n; i++)
				l.v[i].score = score_thread(s->pid, &l.v[i]);
			/* the listing stopped at a good thread: the others
			 * are not known yet */
			partial = !round && !s->list_all &&
				  l.v[l.n - 1].score >= GOOD_ENOUGH;
			triage_sort(&l);
		}
		rc = -EDEADLK; /* until a thread is ours */
		s->busy_by = 0;
		s->busy_wait = false;
		for (i = 0, tries = 0, traced = 0;
		     i < l.n && tries < MAX_CANDIDATES; i++) {
			const struct thread_info *ti = &l.v[i];

			/* A lesser thread (the main one, which often serves
			 * the program's requests) only once every thread
			 * has been seen: another may sleep better. */
			if (partial && ti->score < GOOD_ENOUGH)
				break;
			if (ti->state == 'Z' || ti->state == 'X') {
				if (!o->tid)
					continue;
				inj_why_add(o, "tid %d is exiting (state %c)",
					    (int)ti->tid, ti->state);
				return -ESRCH;
			}
			tries++;
			rc = try_thread(s, o, ti);
			if (!rc)
				break;
			if (rc == -ESRCH && !inj_same_process(s)) {
				if (!o->tid)
					triage_free(&l);
				return -ESRCH;
			}
			if (rc == -EALREADY) {
				traced++;
				continue;
			}
			if (rc == -EAGAIN || rc == -EPERM || rc == -EACCES ||
			    rc == -EBUSY || rc == -ENOMEM)
				break;
			if (rc == -EOPNOTSUPP && !worst)
				worst = rc;
		}
		if (!o->tid)
			triage_free(&l);
		/* The good threads listed first were refused: every thread
		 * now, at once, before settling for a lesser one. */
		if (rc && partial && rc != -EAGAIN && rc != -EPERM &&
		    rc != -EACCES && rc != -EBUSY && rc != -ENOMEM &&
		    !(traced && traced == tries)) {
			s->list_all = true;
			round--;
			continue;
		}
		/* Only other tracers in the way: another memsnap lets go
		 * soon, so wait (a short random while: many may wait). */
		if (rc && traced && traced == tries && s->busy_wait &&
		    now_us() < busy_until) {
			usleep(2000u + (unsigned int)(now_us() % 8000u));
			round--;
			continue;
		}
		if (rc && traced && traced == tries)
			rc = -EBUSY;
		if (!rc || rc == -EAGAIN || rc == -EPERM || rc == -EACCES ||
		    rc == -EBUSY || rc == -ENOMEM)
			break;
		/* A shadow stack will not go away by waiting. */
		if (worst)
			break;
		/* A thread of ours that did not stop keeps a trap pending. */
	}
	if (rc && worst)
		rc = worst;
	if (rc == -EBUSY && s->busy_by && o->why && o->why_size) {
		/* The one line the caller prints first. */
		o->why[0] = '\0';
		if (s->busy_memsnap)
			inj_why_add(o, "another memsnap (pid %d) is working on pid %d",
				    (int)s->busy_by, (int)s->pid);
		else
			inj_why_add(o, "%s %d is already traced by pid %d (%s)",
				    o->tid ? "thread" : "every thread tried of pid",
				    o->tid ? (int)o->tid : (int)s->pid,
				    (int)s->busy_by, s->busy_comm);
	}
	if (rc && rc != -EAGAIN && rc != -EPERM && rc != -EACCES &&
	    rc != -EBUSY && rc != -ENOMEM && rc != -EOPNOTSUPP && rc != -EINTR)
		rc = o->tid && rc == -ESRCH ? -ESRCH : -EDEADLK;
	return rc;
}

/* Refuse before attaching when /proc already tells. */
int inj_preflight(pid_t pid, const struct inject_opts *o)
{
	struct procinfo pi;
	int rc = o->pi ? 0 : procinfo_read(pid, &pi);

	if (rc)
		return rc == -ENOENT ? -ESRCH : rc;
	if (o->pi)
		pi = *o->pi;
	/* A leader that called pthread_exit() is 'Z' with threads alive. */
	if (pi.kernel_thread ||
	    ((pi.state == 'Z' || pi.state == 'X') && pi.threads <= 1)) {
		inj_why_add(o, "pid %d is %s", (int)pid,
			    pi.kernel_thread ? "a kernel thread" : "a zombie");
		return -ESRCH;
	}
	if (pi.state == 'T') {
		inj_why_add(o, "pid %d is stopped (job control); memsnap leaves it "
			    "stopped", (int)pid);
		return -EAGAIN;
	}
	/* Tracers attach per thread: inj_choose_thread() passes them over. */
	return 0;
}
