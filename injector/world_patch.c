/*
 * Entry-point patches written with every thread of the process stopped
 * (injector/patch.h says why the write needs that; world.c stops them).
 * What matters of the borrowed thread is where it goes back to, its
 * saved context.  Every thread is checked: one whose pc, or a pc saved
 * in a signal frame on its stack, lies inside the bytes a jump covers
 * would resume in the middle of that jump.  Then the bytes are written
 * and every thread let go; each patch is one write, made whole or not
 * at all while nothing runs.
 */
#include "injector/world.h"
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
			world_keep_stale(s, &h->t);
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
		rc = world_stop_all(s, &w);
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
		world_let_go(&w);
		s->tm.world_us += now_us() - t0;
		if (rc <= 0)
			return rc;
	}
	return inj_fail(s, -EBUSY, DIAG_UNSAFE,
			"thread %d stayed inside the first bytes of a "
			"function to patch, %d times", who, WORLD_ROUNDS);
}
