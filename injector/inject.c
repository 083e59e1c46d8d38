/*
 * The call engine: run a function inside a live process on ONE borrowed
 * thread, restore that thread exactly, and make sure it restores itself
 * if memsnap dies at any moment.
 *
 * Protocol (docs/DESIGN.md, "One call, step by step"; the arch half is
 * injector/arch/):
 *
 * 1. Triage /proc/PID/task/TID/stat and syscall: prefer a thread asleep
 *    in a restartable syscall (futex, nanosleep, read, poll, ...), not
 *    the main thread.
 * 2. PTRACE_SEIZE + PTRACE_INTERRUPT that thread only; wait for its
 *    PTRACE_EVENT_STOP.  A signal that shows up first is re-injected at
 *    once; a group-stop means the process is job-stopped: let go, leave
 *    it stopped.
 * 3. Check: no shadow stack, 64 KiB of mapped stack below the stack
 *    pointer, and no frame (unwound in a sandboxed child: unwind.c) in
 *    a forbidden range (allocator, ld.so, unwinder, fork: given by the
 *    caller).  A refused thread is put back
 *    as it was; the next candidate is tried, then all again a little
 *    later, a bounded number of times.
 * 4. Save registers, XSAVE state and signal mask.  epoll_wait() and its
 *    siblings fail with EINTR on any ptrace stop and are never restarted
 *    by the kernel: when no real signal is pending, the saved result is
 *    turned into a restart, so the thread never sees that EINTR.
 * 5. Every call returns into a stub in a one-page r-x mapping of our own
 *    (found again by its signature, so a page left behind by an earlier
 *    memsnap is reused; it is never unmapped, since a call left running
 *    by a timeout or a killed memsnap may still return into it).  The
 *    frame below the red zone holds, above the return address, a block
 *    with the thread's complete original context (syscall restart
 *    already applied: the syscall's number in its register, the pc on
 *    its syscall instruction), its errno, its signal mask and its FP and
 *    vector state.  The stub puts all of that back in user space
 *    (rt_sigprocmask, the FP state, register loads, a jump through a
 *    slot just below the red zone), so if memsnap is gone when the
 *    callee returns, the thread carries on by itself and re-enters its
 *    syscall.  No rt_sigreturn: it would
 *    reset the restart block, and a thread asleep in restart_syscall
 *    (a nanosleep resumed after an earlier stop) would get EINTR.
 *    The page is created the first time by an injected mmap() executed
 *    at an existing "syscall; ret" sequence, with an rt_sigreturn frame
 *    underneath and a libc signal restorer as return address, so that
 *    step heals itself too.  No shared code is ever patched.
 * 6. Async signals are blocked with PTRACE_SETSIGMASK for the call
 *    (never SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS); they stay
 *    pending and are delivered after the restore.  Registers are set
 *    before the mask, so dying in between runs the call, which heals.
 * 7. The call runs under PTRACE_SYSCALL; it is over at the syscall-entry
 *    stop of the stub's rt_sigprocmask (pc and syscall number checked):
 *    the result is in the register the stub saved it to.  A fault is
 *    reported with where it happened, and the thread is restored.  A
 *    timeout leaves the call running: the thread's stack is recorded
 *    and memsnap detaches; the stub heals the thread when the call
 *    returns.  A half-run call is never unwound.
 * 8. Normal restore: at that syscall-entry stop, put back the signal
 *    mask, skip the syscall and put in the healed context (so dying now
 *    is still safe), PTRACE_INTERRUPT, continue, and at the
 *    PTRACE_EVENT_STOP put back the exact original registers and FP
 *    state (the result register -ERESTART*, the syscall number intact):
 *    the kernel's restart
 *    logic then runs exactly as if nothing had happened, nanosleep
 *    keeping its remaining time.  Then errno; detach.
 */
#include "injector/engine.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int inj_fail(struct inject_session *s, int rc, int kind, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->detail, sizeof(s->detail), fmt, ap);
	va_end(ap);
	s->err_rc = rc;
	s->err_kind = kind;
	return rc;
}

void inj_why_add(const struct inject_opts *o, const char *fmt, ...)
{
	size_t len;
	va_list ap;

	if (!o->why || !o->why_size)
		return;
	len = strnlen(o->why, o->why_size);
	if (len + 2 >= o->why_size)
		return;
	if (len)
		o->why[len++] = '\n';
	va_start(ap, fmt);
	vsnprintf(o->why + len, o->why_size - len, fmt, ap);
	va_end(ap);
}

/* ---- stops ------------------------------------------------------------- */

uint64_t inj_deadline_after(int ms)
{
	return now_us() + (uint64_t)ms * 1000u;
}

void inj_mark_dead(struct inject_session *s, const struct stop *st)
{
	s->dead = true;
	switch (st->kind) {
	case STOP_EXEC:
		inj_fail(s, -ESRCH, INJ_KIND_OF_RC,
			 "pid %d called execve during the call", (int)s->pid);
		break;
	case STOP_EXIT:
		inj_fail(s, -ESRCH, INJ_KIND_OF_RC,
			 "thread %d is exiting (the process exits or was "
			 "killed) during the call", (int)s->t.tid);
		break;
	default:
		if (WIFSIGNALED(st->status))
			inj_fail(s, -ESRCH, INJ_KIND_OF_RC,
				 "thread %d was killed by signal %d (%s)",
				 (int)s->t.tid, WTERMSIG(st->status),
				 strsignal(WTERMSIG(st->status)));
		else
			inj_fail(s, -ESRCH, INJ_KIND_OF_RC, "thread %d exited",
				 (int)s->t.tid);
		break;
	}
}

bool inj_is_gone(const struct stop *st)
{
	return st->kind == STOP_EXIT || st->kind == STOP_EXEC ||
	       st->kind == STOP_GONE;
}

/* Async signals to block during a call. */
uint64_t inj_call_mask(uint64_t orig)
{
	return orig | ~sync_signals();
}

/* ---- the contract -------------------------------------------------------- */

int inject_open(pid_t pid, const struct inject_opts *opts,
		struct inject_session **out)
{
	struct inject_session *s;
	uint64_t t0;
	int rc;

	*out = NULL;
	if (opts->why && opts->why_size)
		opts->why[0] = '\0';
	s = calloc(1, sizeof(*s));
	if (!s) {
		inj_open_diag(pid, opts, -ENOMEM);
		return -ENOMEM;
	}
	s->pid = pid;
	s->t.memfd = -1;
	s->timeout_ms = opts->timeout_ms;
	s->start_time = opts->start_time;
	/* Pin the process first, then check it is the one triaged: the
	 * caller's pidfd, opened before it read anything, already is. */
	if (opts->pidfd > 0) {
		s->pidfd = fcntl(opts->pidfd, F_DUPFD_CLOEXEC, 0);
		if (s->pidfd >= 0)
			s->start_time = 0;
	} else {
		s->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	}
	s->interrupted = opts->interrupted;
	s->tm.threads_stopped = 1;
	tracee_hold(&s->oldmask);

	rc = inj_preflight(pid, opts);
	if (!rc && s->start_time) {
		uint64_t t;

		rc = proc_start_time(pid, &t);
		if (!rc && t != opts->start_time) {
			inj_why_add(opts, "pid %d exited; the pid now names another process",
				    (int)pid);
			rc = -ESRCH;
		}
	}
	if (!rc && s->pidfd >= 0 && !inj_same_process(s))
		rc = -ESRCH;
	if (!rc)
		rc = opts->maps ? inj_maps_take(s, opts->maps)
				: inj_maps_snapshot(s);
	if (rc == -ENOENT)
		rc = -ESRCH;
	if (!rc)
		rc = inj_choose_thread(s, opts);
	if (!rc) {
		char why[256] = "";

		rc = seccomp_load(&s->t, s->tstat.seccomp,
				  s->tstat.seccomp_filters, &s->sc, why,
				  sizeof(why));
		if (rc == -EPERM) {
			inj_why_add(opts, "%s; memsnap cannot prove its system calls are allowed",
				    why);
			rc = -EOPNOTSUPP;
		}
	}
	if (rc) {
		inj_open_diag(pid, opts, rc);
		inject_close(s);
		return rc;
	}
	t0 = now_us();
	rc = inj_ensure_stub(s);
	s->errno_location = opts->errno_location;
	if (!rc && s->interrupted && *s->interrupted)
		rc = -EINTR;
	s->tm.save_us = now_us() - t0;
	if (rc) {
		if (opts->why && s->detail[0])
			inj_why_add(opts, "tid %d: %s", (int)s->t.tid, s->detail);
		inj_open_diag(pid, opts, rc);
		inject_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

const char *inject_arch_name(void)
{
	return arch_desc.name;
}

pid_t inject_tid(const struct inject_session *s)
{
	return s->t.tid;
}

int inject_take_fd(struct inject_session *s, int fd)
{
	int got;

	if (s->pidfd < 0)
		return -ENOSYS;
	got = (int)syscall(SYS_pidfd_getfd, s->pidfd, fd, 0);
	return got < 0 ? -errno : got;
}

void inject_timings(const struct inject_session *s, struct inject_timings *t)
{
	*t = s->tm;
	t->stops = s->t.stops;
}

size_t inject_backtrace(const struct inject_session *s, uint64_t *pcs,
			size_t max)
{
	size_t n = s->npcs < max ? s->npcs : max;

	memcpy(pcs, s->pcs, n * sizeof(*pcs));
	return n;
}
