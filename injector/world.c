/*
 * Entry-point patches written with every thread of the process stopped
 * (injector/patch.h says why the write needs that).  The borrowed thread
 * is stopped already, in the call stub: what matters of it is where it
 * goes back to, its saved context.  Every other thread is seized and
 * interrupted, then checked: a thread whose pc, or a pc saved in a
 * signal frame on its stack, lies inside the bytes a jump covers would
 * resume in the middle of that jump.  Then the bytes are written and
 * every thread let go.  memsnap killed at any point: the kernel detaches
 * its tracees, which run on; each patch is one write, made whole or not
 * at all while nothing runs.
 */
#include "injector/engine.h"
#include "injector/patch.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Rounds of stop, check, let go: a thread seen inside a patched range
 * has left it a moment later. */
#define WORLD_ROUNDS 5
#define WORLD_PAUSE_NS (2 * 1000 * 1000)

struct held {
	struct tracee t;
	int sig;		/* the signal its stop took: given back */
	/* what task/TID/syscall said just before the seize: at the stop
	 * AArch64's x0 holds the result, not the call's first argument,
	 * and /proc no longer shows the call (the kernel forgets it
	 * before the stop) */
	struct arch_syscall sc;
	bool have_sc;
};

struct world {
	struct held *v;
	size_t n, cap;
};

static bool holds(const struct world *w, pid_t tid)
{
	size_t i;

	for (i = 0; i < w->n; i++)
		if (w->v[i].t.tid == tid)
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

/* Wait for the interrupt stop of a thread just seized.  0: stopped (the
 * stop's signal in h->sig), -ESRCH: gone, else an error. */
static int wait_stopped(struct inject_session *s, struct held *h,
			uint64_t deadline)
{
	struct stop st;
	int rc;

	for (;;) {
		rc = tracee_wait(&h->t, deadline, s->interrupted, &st);
		if (rc == -ETIMEDOUT) {
			inj_set_detail(s, "thread %d did not stop within %d ms "
				       "(uninterruptible sleep?)",
				       (int)h->t.tid, STOP_TIMEOUT_MS);
			keep_stale(s, &h->t);
			return -EBUSY;
		}
		if (rc)
			return rc;
		switch (st.kind) {
		case STOP_EVENT:
			heal(s, h);
			return 0;
		case STOP_GROUP:	/* job-stopped: stays so at detach */
		case STOP_EXIT:		/* exiting: runs no more user code */
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
	memset(w, 0, sizeof(*w));
}

/*
 * Stop every thread but the borrowed one, and any created meanwhile:
 * list, seize, wait, list again until no thread is new (a stopped
 * thread creates none).
 */
static int stop_all(struct inject_session *s, struct world *w)
{
	uint64_t deadline = inj_deadline_after(STOP_TIMEOUT_MS);
	size_t first, i, n;
	pid_t *tids;
	int rc;

	for (;;) {
		rc = triage_tids(s->pid, &tids, &n);
		if (rc)
			return rc;
		first = w->n;
		for (i = 0; i < n && !rc; i++) {
			struct thread_info ti;
			struct held *h;

			if (tids[i] == s->t.tid || holds(w, tids[i]))
				continue;
			rc = array_grow((void **)&w->v, &w->cap, w->n + 1,
					sizeof(*w->v));
			if (rc)
				break;
			h = &w->v[w->n];
			h->sig = 0;
			h->have_sc = false;
			if (!triage_syscall(s->pid, tids[i], &ti) &&
			    ti.syscall >= 0) {
				h->sc = (struct arch_syscall){
					.nr = ti.syscall, .sp = ti.sc_sp,
					.pc = ti.sc_pc };
				memcpy(h->sc.args, ti.sc_args,
				       sizeof(h->sc.args));
				h->have_sc = true;
			}
			rc = tracee_seize(&h->t, s->pid, tids[i]);
			if (rc == -ESRCH) {
				rc = 0;	/* exited meanwhile */
				continue;
			}
			if (rc) {
				struct thread_status st;
				char comm[32] = "?";

				if (h->t.seized)
					tracee_detach(&h->t, 0);
				if (rc == -EPERM &&
				    !thread_status_read(s->pid, tids[i], &st) &&
				    st.tracer && st.tracer != getpid()) {
					/* strace -p, gdb: every thread must
					 * stop for the write */
					proc_comm(st.tracer, comm, sizeof(comm));
					inj_set_detail(s, "thread %d is traced "
						       "by pid %d (%s)",
						       (int)tids[i],
						       (int)st.tracer, comm);
					rc = -EBUSY;
				} else {
					inj_set_detail(s, "thread %d: "
						       "ptrace(PTRACE_SEIZE): %s",
						       (int)tids[i],
						       strerror(-rc));
				}
				break;
			}
			w->n++;
		}
		free(tids);
		/* Wait for the ones seized in this pass, even after a
		 * failure: each is healed, and only a stopped thread can be
		 * let go (one that never stops is kept for later). */
		for (i = first; i < w->n; i++) {
			int wrc = wait_stopped(s, &w->v[i], deadline);

			if (wrc == -ESRCH) {
				/* gone: forget it */
				w->v[i] = w->v[--w->n];
				i--;
			} else if (wrc && !rc) {
				rc = wrc;
			}
		}
		if (rc || w->n == first)
			return rc;
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
		if ((addr & 4095) + len > 4096)
			len = 4096 - (addr & 4095);
		if (proc_read_mem(s->pid, addr, w, len))
			break;
		for (i = 0; i < len / 8; i++)
			if (busy(v, n, arch_strip_pac(w[i])))
				return false;
	}
	return true;
}

/* Which thread, if any, is in a busy range: its tid, 0 when none, or a
 * negative error. */
static int who_is_busy(struct inject_session *s, struct world *w,
		       const struct patch_plan *v, size_t n)
{
	size_t i;

	if (!clear_of(s, v, n, arch_reg(s->ctx, ARCH_PC),
		      arch_reg(s->ctx, ARCH_SP)))
		return (int)s->t.tid;
	for (i = 0; i < w->n; i++) {
		struct arch_ctx *c;
		bool clear;
		int rc = arch_save(&w->v[i].t, NULL, &c);

		if (rc == -ESRCH)
			continue;	/* killed while stopped: runs no more */
		if (rc)
			return rc;
		clear = clear_of(s, v, n, arch_reg(c, ARCH_PC),
				 arch_reg(c, ARCH_SP));
		arch_free(c);
		if (!clear)
			return (int)w->v[i].t.tid;
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
	inj_set_detail(s, "thread %d stayed inside the first bytes of a "
		       "function to patch, %d times", who, WORLD_ROUNDS);
	return -EBUSY;
}
