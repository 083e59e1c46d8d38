/*
 * The call engine: choosing, seizing and checking one thread. See
 * injector/engine.h, and the protocol at the top of inject.c.
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

struct find_stack {
	uint64_t sp, lo, hi;
	bool writable;
};

static int find_stack_cb(void *arg, const struct mapline *m)
{
	struct find_stack *fs = arg;

	if (fs->sp < m->start || fs->sp >= m->end)
		return 0;
	fs->lo = m->start;
	fs->hi = m->end;
	fs->writable = m->perms[0] == 'r' && m->perms[1] == 'w';
	return 1;
}

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

static bool pc_forbidden(const struct inject_opts *o, uint64_t pc,
			 const struct inject_range **r)
{
	size_t i;

	for (i = 0; i < o->nforbidden; i++) {
		if (pc >= o->forbidden[i].lo && pc < o->forbidden[i].hi) {
			*r = &o->forbidden[i];
			return true;
		}
	}
	return false;
}

/*
 * The fast stack check.  Every frame's return address is a word between
 * the stack pointer and the top of the stack, or in a register at the
 * stop (arch_return_addresses(): AArch64's link register), so if none
 * of them points into a forbidden range after a call instruction
 * (arch_may_be_call_site()), no frame is in one.  A signal frame (the thread may
 * be on an alternate stack, its other frames elsewhere) or a stack too
 * deep to read sends the caller to the unwinder.  true: clean.
 */
static bool words_clean(const struct inject_session *s,
			const struct inject_opts *o, uint64_t sp, uint64_t end)
{
	const struct inject_range *r;
	uint64_t *w;
	size_t len, i;
	bool clean = true;

	sp &= ~(uint64_t)7;
	if (end <= sp || end - sp > STACK_SCAN_MAX)
		return false;
	len = (size_t)(end - sp) & ~(size_t)7;
	w = malloc(len);
	if (!w || proc_read_mem(s->pid, sp, w, len)) {
		free(w);
		return false;
	}
	for (i = 0; i < len / 8 && clean; i++) {
		uint64_t a = arch_strip_pac(w[i]);
		unsigned char code[8];

		if (arch_sigframe_marker(w[i])) {
			clean = false;
			continue;
		}
		if (!pc_forbidden(o, a, &r))
			continue;
		/* Data that points there (a function pointer) is harmless;
		 * a return address follows a call instruction. */
		if (proc_read_mem(s->pid, a - 8, code, sizeof(code)) ||
		    arch_may_be_call_site(code))
			clean = false;
	}
	free(w);
	return clean;
}

static bool stack_clean(struct inject_session *s, const struct inject_opts *o,
			uint64_t sp, uint64_t end)
{
	const struct inject_range *r;
	uint64_t ra[4];
	size_t i, nra = arch_return_addresses(s->ctx, ra, 4);

	if (pc_forbidden(o, arch_reg(s->ctx, ARCH_PC), &r))
		return false;
	for (i = 0; i < nra; i++)
		if (pc_forbidden(o, ra[i], &r))
			return false;
	return words_clean(s, o, sp, end);
}

/*
 * Would the fast check of @ti pass, judged before the seizure from the
 * pc and stack /proc last showed (a thread asleep in a system call
 * keeps both)?  The unwinder's sandbox, a fork and its start-up, is
 * made before the stop only when it would not: a check that needs it
 * finds it ready, and the usual clean stack costs nothing more.  A
 * thread outside a system call, or one whose stack changed since, is
 * judged again at the stop, where the unwinder is started if needed.
 * *@top: the end of the stack's mapping, for a thread in a system call
 * (else 0).
 */
static bool looks_clean(struct inject_session *s, const struct inject_opts *o,
			const struct thread_info *ti, uint64_t *top)
{
	struct find_stack fs = { .sp = ti->sc_sp };
	const struct inject_range *r;

	*top = 0;
	if (ti->syscall < 0)
		return false;
	inj_snapshot_each(s, find_stack_cb, &fs);
	*top = fs.hi;
	if (pc_forbidden(o, ti->sc_pc, &r))
		return false;
	return fs.lo && words_clean(s, o, ti->sc_sp, fs.hi);
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
static int try_thread(struct inject_session *s, const struct inject_opts *o,
		      const struct thread_info *ti)
{
	struct find_stack fs = { 0 };
	const struct inject_range *r;
	struct thread_info now, fresh;
	struct thread_status st;
	char why[96];
	uint64_t t0, t1, top;
	bool whole;
	int rc, i, n, tries;

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
	if (!looks_clean(s, o, ti, &top))
		unwind_prepare(s, ti->sc_pc, ti->sc_sp, top);
	/* The call it is in, read again as late as can be: the triage's
	 * read may be milliseconds old, and a thread that entered a call
	 * since would lose its first argument at the stop (AArch64's x0)
	 * and see EINTR where the kernel restarts nothing. */
	if (triage_syscall(s->pid, ti->tid, &fresh)) {
		memset(&fresh, 0, sizeof(fresh));
		fresh.syscall = -1;
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
	t1 = now_us();
	s->tm.seize_us = t1 - t0;

	{
		struct arch_syscall sc = { .nr = fresh.syscall,
					   .sp = fresh.sc_sp,
					   .pc = fresh.sc_pc };

		memcpy(sc.args, fresh.sc_args, sizeof(sc.args));
		rc = arch_save(&s->t, &sc, &s->ctx);
	}
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
	if (parent_refused(s, o, ti->tid))
		goto refuse;

	fs.sp = arch_reg(s->ctx, ARCH_SP);
	inj_snapshot_each(s, find_stack_cb, &fs);
	if (!fs.lo && !inj_maps_snapshot(s))
		inj_snapshot_each(s, find_stack_cb, &fs); /* a new stack */
	if (!fs.lo || !fs.writable) {
		inj_why_add(o, "tid %d: stack pointer 0x%" PRIx64
			    " is not in a writable mapping", (int)ti->tid,
			    fs.sp);
		goto refuse;
	}
	if (fs.sp - fs.lo < STACK_HEADROOM + arch_desc.red_zone) {
		inj_why_add(o, "tid %d: only %" PRIu64 " bytes of stack left below "
			    "0x%" PRIx64 " (need %d)", (int)ti->tid,
			    fs.sp - fs.lo, fs.sp, STACK_HEADROOM);
		goto refuse;
	}
	s->stack_lo = fs.lo;
	s->stack_hi = fs.hi;

	if (stack_clean(s, o, fs.sp, fs.hi)) {
		s->tm.check_us = now_us() - t1;
		return 0;
	}
	/* Something looks like a forbidden frame: unwind to be sure. */
	n = unwind_thread(s, ti->tid, s->pcs, MAX_FRAMES, &whole);
	if (n < 0 && unwinder_why(s->uw)) {
		/* A hostile or corrupt stack or unwind table: the unwinder
		 * failed in its sandbox, memsnap goes on. */
		inj_why_add(o, "tid %d: a return address into the allocator "
			    "is on its stack, and %s", (int)ti->tid,
			    unwinder_why(s->uw));
		goto refuse;
	}
	if (n <= 0) {
		/* At least the pc itself must be checked. */
		s->pcs[0] = arch_reg(s->ctx, ARCH_PC);
		n = 1;
	}
	s->npcs = (size_t)n;
	for (i = 0; i < n; i++) {
		if (pc_forbidden(o, s->pcs[i], &r)) {
			inj_why_add(o, "tid %d: frame #%d at 0x%" PRIx64
				    " is in %s",
				    (int)ti->tid, i, s->pcs[i],
				    r->what ? r->what : "a forbidden range");
			goto refuse;
		}
	}
	/* The word the fast check saw may belong to a frame past the
	 * last one found. */
	if (!whole) {
		inj_why_add(o, "tid %d: a return address into the allocator is "
			    "on its stack and the unwinder stopped at frame #%d "
			    "(0x%" PRIx64 ") before the outermost one",
			    (int)ti->tid, n - 1, s->pcs[n - 1]);
		goto refuse;
	}
	s->npcs = 0;
	s->tm.check_us = now_us() - t1;
	return 0;
refuse:
	s->npcs = 0;
	let_go(s);
	return -EDEADLK;
}

/* The first round takes the first thread asleep where we like best. */
static bool good_enough(void *arg, struct thread_info *ti)
{
	const struct inject_session *s = arg;

	return !s->round && score_thread(s->pid, ti) >= GOOD_ENOUGH;
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
			triage_sort(&l);
		}
		rc = -EDEADLK; /* until a thread is ours */
		s->busy_by = 0;
		s->busy_wait = false;
		for (i = 0, tries = 0, traced = 0;
		     i < l.n && tries < MAX_CANDIDATES; i++) {
			const struct thread_info *ti = &l.v[i];

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
