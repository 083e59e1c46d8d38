/*
 * The call engine: running one call in the borrowed thread. See
 * injector/engine.h, and the protocol at the top of inject.c.
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

/* ---- running code in the thread ----------------------------------------- */

/*
 * Our thread vanished.  If another thread of the process (or ours, which
 * then takes the leader's id) called execve, the leader reports
 * PTRACE_EVENT_EXEC to us: say so and let it go.
 */
static void vanished(struct inject_session *s, const struct stop *st)
{
	struct tracee leader = { .pid = s->pid, .tid = s->pid, .seized = true,
				 .memfd = -1 };
	struct stop ls;

	s->dead = true;
	s->t.seized = false;
	if (st)
		inj_mark_dead(s, st);
	else
		inj_fail(s, -ESRCH, INJ_KIND_OF_RC,
			 "thread %d is gone (the process exited or called "
			 "execve)", (int)s->t.tid);
	if (s->t.tid == s->pid)
		return;
	if (!tracee_wait(&leader, inj_deadline_after(200), NULL, &ls) &&
	    ls.kind == STOP_EXEC) {
		inj_fail(s, -ESRCH, INJ_KIND_OF_RC,
			 "pid %d called execve during the call", (int)s->pid);
		tracee_detach(&leader, 0);
	}
}

/*
 * A ptrace request failed with ESRCH before any stop said why: the
 * thread was woken by SIGKILL, an execve or exit in another thread
 * killing it (a tracee in a stop of ours fails requests for no other
 * reason).  Its next stop is its exit (PTRACE_EVENT_EXIT, before the
 * kernel shows PF_EXITING), or it is gone: wait for that, or see it in
 * /proc, and never touch it again.  Not seen within the stop timeout:
 * leave it to the restore, which reports what it finds.
 */
static void confirm_gone(struct inject_session *s)
{
	uint64_t deadline = inj_deadline_after(STOP_TIMEOUT_MS);
	struct stop st;
	int rc;

	while (now_us() < deadline) {
		if (thread_dying(s->pid, s->t.tid) == 1) {
			vanished(s, NULL);
			return;
		}
		rc = tracee_wait(&s->t, inj_deadline_after(10), NULL, &st);
		if (rc == -ETIMEDOUT)
			continue;
		if (rc) {
			vanished(s, NULL);
			return;
		}
		if (st.kind == STOP_GONE) {
			vanished(s, &st);
			return;
		}
		if (inj_is_gone(&st)) {
			inj_mark_dead(s, &st);
			return;
		}
	}
}

/* Wait for the current step to reach a syscall stop of @want at @pc. */
int inj_wait_syscall_stop(struct inject_session *s, uint64_t deadline,
			  uint64_t pc, long want, struct arch_peek *p)
{
	struct stop st;
	int rc;

	for (;;) {
		rc = tracee_wait(&s->t, deadline, NULL, &st);
		if (rc == -ESRCH)
			vanished(s, NULL);
		if (rc)
			return rc;
		if (st.kind == STOP_GONE) {
			vanished(s, &st);
			return -ESRCH;
		}
		if (inj_is_gone(&st)) {
			inj_mark_dead(s, &st);
			return -ESRCH;
		}
		switch (st.kind) {
		case STOP_SYSCALL:
			rc = arch_peek(&s->t, p);
			if (rc)
				return rc;
			if (p->pc == pc && p->sysno == want) {
				s->where = AT_SYSCALL;
				return 0;
			}
			rc = tracee_syscall(&s->t, 0);
			break;
		case STOP_SIGNAL:
			if ((1ull << (st.sig - 1)) & sync_signals() &&
			    st.sig != SIGSTOP && st.sig != SIGKILL) {
				s->where = AT_SIGNAL;
				return -EFAULT;
			}
			rc = tracee_syscall(&s->t, st.sig);
			break;
		case STOP_GROUP:
			s->group_stopped = true;
			rc = tracee_syscall(&s->t, 0);
			break;
		default:
			rc = tracee_syscall(&s->t, 0);
			break;
		}
		if (rc == -ESRCH)
			confirm_gone(s);
		if (rc)
			return rc;
	}
}

void inj_describe_fault(struct inject_session *s)
{
	siginfo_t si;
	struct arch_peek p = { 0 };
	const char *name;
	int n;

	memset(&si, 0, sizeof(si));
	tracee_getsiginfo(&s->t, &si);
	arch_peek(&s->t, &p);
	name = sigabbrev_np(si.si_signo);
	inj_fail(s, -EFAULT, INJ_KIND_OF_RC,
		 "%s%s in the called function at pc 0x%" PRIx64
		 " (fault address 0x%" PRIx64 ", si_code %d)",
		 name ? "SIG" : "", name ? name : "a signal", p.pc,
		 (uint64_t)(uintptr_t)si.si_addr, si.si_code);
	n = unwind_thread(s, s->t.tid, s->pcs, MAX_FRAMES, NULL);
	s->npcs = n > 0 ? (size_t)n : 0;
}

/* Write @len bytes at @addr on the borrowed stack, checking the bounds. */
int inj_stack_write(struct inject_session *s, uint64_t addr,
		    const void *buf, size_t len)
{
	if (addr < s->stack_lo || addr + len > arch_reg(s->ctx, ARCH_SP))
		return -EFAULT;
	return tracee_write(&s->t, addr, buf, len);
}

static int timeout_ms(const struct inject_session *s)
{
	return s->timeout_ms > 0 ? s->timeout_ms : DEFAULT_TIMEOUT_MS;
}

int inj_left_healing(struct inject_session *s)
{
	s->t.seized = false;
	s->abandoned = true;
	return -ETIMEDOUT;
}

/*
 * The call did not return in time: record where the thread is and let it
 * go on by itself (the stub heals it when the call returns).  If the
 * call returned just now, finish normally: 0 with *@p filled.
 */
static int abandon(struct inject_session *s, uint64_t done_pc,
		   struct arch_peek *p)
{
	uint64_t deadline = inj_deadline_after(STOP_TIMEOUT_MS);
	struct stop st;
	int rc, n;

	rc = tracee_interrupt(&s->t);
	while (!rc) {
		rc = tracee_wait(&s->t, deadline, NULL, &st);
		if (rc)
			break;
		if (inj_is_gone(&st)) {
			inj_mark_dead(s, &st);
			return -ESRCH;
		}
		if (st.kind == STOP_SYSCALL && !arch_peek(&s->t, p) &&
		    p->pc == done_pc && p->sysno == arch_nr_stub_done) {
			s->where = AT_SYSCALL;
			return 0;
		}
		if (st.kind == STOP_EVENT || st.kind == STOP_GROUP ||
		    st.kind == STOP_SYSCALL)
			break;
		/* A signal: hand it on, wait for our interrupt. */
		rc = tracee_syscall(&s->t, st.kind == STOP_SIGNAL ? st.sig : 0);
	}
	/*
	 * A chain (INJECT_HELPER_CHAIN) in the call learns that it was
	 * given up, and cleans up when it ends: written while the thread is
	 * stopped, or at once if it could not be stopped.
	 */
	if (s->chain_flag) {
		const uint64_t one = 1;

		tracee_write(&s->t, s->chain_flag, &one, sizeof(one));
	}
	if (!rc) {
		n = unwind_thread(s, s->t.tid, s->pcs, MAX_FRAMES, NULL);
		s->npcs = n > 0 ? (size_t)n : 0;
		tracee_detach(&s->t, 0);
	}
	/* else still running (uninterruptible?): detached at our exit */
	inj_fail(s, -ETIMEDOUT, INJ_KIND_OF_RC,
		 "it did not return within %d ms and goes on in thread "
		 "%d, which restores itself when it returns",
		 timeout_ms(s), (int)s->t.tid);
	return inj_left_healing(s);
}

/* The highest address of a call's frame and buffers. */
static uint64_t frame_top(const struct inject_session *s)
{
	/* Below the red zone and the slot the stub jumps through. */
	return (arch_reg(s->ctx, ARCH_SP) - arch_desc.red_zone - arch_desc.pc_slot) &
	       ~(uint64_t)(arch_desc.stack_align - 1);
}

/*
 * At the stub's syscall-entry stop: put back the thread's errno, signal
 * mask and healed context now, so that the stub's restore block is no
 * longer needed.  The next call may then write its frame over that block:
 * if memsnap dies before the call's registers are set, the thread
 * resumes as itself, not in a stub reading a half-written block.
 */
static int heal_in_place(struct inject_session *s)
{
	int rc = 0;

	if (s->errno_saved &&
	    tracee_write(&s->t, s->errno_addr, &s->errno_val, sizeof(int)))
		rc = -EIO;
	if (s->mask_set) {
		if (tracee_setsigmask(&s->t, s->sigmask))
			rc = -EIO;
		else
			s->mask_set = false;
	}
	if (arch_restore_healed(&s->t, s->ctx))
		rc = -EIO;
	return rc;
}

static int run(struct inject_session *s, uint64_t fn, const uint64_t *args,
	       unsigned int nargs, uint64_t sret, uint64_t hi,
	       uint64_t errno_addr, uint64_t *ret)
{
	uint64_t done_pc = s->stub + arch_stub_done_pc;
	/* rt_sigprocmask(SIG_SETMASK, &mask, NULL, 8), as the stub makes it */
	const uint64_t done_args[6] = { 2, 0, 0, 8 };
	uint64_t lo, sp, slot, slot_val, t0;
	struct arch_peek p, at_exit;
	char act[64];
	void *frame;
	int rc;

	if (!s->stub_sc_ok) {
		if (!seccomp_check(s->sc, arch_audit, arch_nr_stub_done,
				   done_args, done_pc, act, sizeof(act))) {
			return inj_fail(s, -EOPNOTSUPP, INJ_KIND_OF_RC,
					"its seccomp filter would %s for rt_sigprocmask",
					act);
		}
		s->stub_sc_ok = true;
	}

	rc = arch_call_frame_build(s->ctx, hi, s->stub, s->sigmask, errno_addr,
				   s->errno_val, &frame, &lo, &sp, &slot,
				   &slot_val);
	if (rc)
		return rc;
	rc = inj_stack_write(s, lo, frame, hi - lo);
	free(frame);
	if (!rc && slot)
		rc = inj_stack_write(s, slot, &slot_val, sizeof(slot_val));
	if (rc)
		return rc;
	/* Registers first: dying after this runs the call, which heals. */
	rc = arch_set_call(&s->t, s->ctx, fn, args, nargs, sret, sp, s->stub);
	if (rc)
		return rc;
	if (!s->mask_set) {
		rc = tracee_setsigmask(&s->t, inj_call_mask(s->sigmask));
		if (rc)
			return rc;
		s->mask_set = true;
	}
	t0 = now_us();
	rc = tracee_syscall(&s->t, 0);
	if (rc)
		return rc;
	rc = inj_wait_syscall_stop(s, inj_deadline_after(timeout_ms(s)), done_pc,
				   arch_nr_stub_done, &p);
	if (rc == -ETIMEDOUT)
		rc = abandon(s, done_pc, &p);
	s->tm.call_us += now_us() - t0;
	if (rc == -EFAULT)
		inj_describe_fault(s);
	if (rc)
		return rc;
	*ret = p.result;
	/*
	 * Let the stub's own rt_sigprocmask run (it puts the thread's mask
	 * back) and heal at its exit stop: skipping it at the entry stop
	 * would make seccomp judge "syscall -1", which an allow-list filter
	 * punishes.  If memsnap dies in between, the stub heals the thread.
	 */
	rc = tracee_syscall(&s->t, 0);
	if (!rc)
		rc = inj_wait_syscall_stop(s, inj_deadline_after(timeout_ms(s)),
					   done_pc, arch_nr_stub_done, &at_exit);
	if (rc == -ETIMEDOUT) {
		/* a machine this busy, or a frozen cgroup */
		inj_fail(s, -ETIMEDOUT, INJ_KIND_OF_RC,
			 "thread %d did not leave memsnap's stub within %d ms "
			 "of the call's return; it restores itself when it "
			 "runs", (int)s->t.tid, timeout_ms(s));
		return inj_left_healing(s);
	}
	if (rc)
		return rc;
	return heal_in_place(s);
}

int inj_save_errno(struct inject_session *s, uint64_t errno_location)
{
	uint64_t addr;
	int32_t val;
	int rc;

	rc = run(s, errno_location, NULL, 0, 0, frame_top(s), 0, &addr);
	if (rc)
		return rc;
	rc = tracee_read(&s->t, addr, &val, sizeof(val));
	if (rc)
		return rc;
	s->errno_addr = addr;
	s->errno_val = val;
	s->errno_saved = true;
	return 0;
}

int inject_call(struct inject_session *s, struct inject_call *call,
		struct inject_result *res)
{
	uint64_t args[INJECT_MAX_ARGS], hi;
	size_t total = 0;
	unsigned int i;
	int rc;

	if (s->dead)
		return -ESRCH;
	if (s->abandoned)
		return -ETIMEDOUT;
	if (!inj_same_process(s)) {
		return inj_fail(s, -ESRCH, INJ_KIND_OF_RC, "pid %d exited",
				(int)s->pid);
	}
	if (call->nargs > INJECT_MAX_ARGS || call->nbufs > INJECT_MAX_BUFS ||
	    call->nrelocs > INJECT_MAX_RELOCS || call->chain_buf > call->nbufs ||
	    call->sret_buf > call->nbufs)
		return -EINVAL;
	for (i = 0; i < call->nrelocs; i++) {
		const struct inject_reloc *x = &call->relocs[i];

		if (x->buf >= call->nbufs || x->target >= call->nbufs ||
		    x->off > call->bufs[x->buf].len ||
		    call->bufs[x->buf].len - x->off < sizeof(uint64_t))
			return -EINVAL;
	}
	if (call->chain_buf &&
	    call->bufs[call->chain_buf - 1].len < sizeof(struct inject_chain))
		return -EINVAL;
	for (i = 0; i < call->nbufs; i++) {
		if (call->bufs[i].len > INJECT_MAX_BUF_BYTES)
			return -EINVAL;
		total += (call->bufs[i].len + 15) & ~(size_t)15;
	}
	if (total > INJECT_MAX_BUF_BYTES)
		return -EINVAL;
	if (s->interrupted && *s->interrupted)
		return -EINTR;
	/* errno asked for once, before the first call that may change it
	 * (its address is the thread's own, and so is its value) */
	if (!s->errno_saved && s->errno_location && !call->errno_kept) {
		rc = inj_save_errno(s, s->errno_location);
		if (rc)
			return rc;
	}

	/* Buffers right below the red zone, 16-byte aligned. */
	hi = frame_top(s);
	for (i = 0; i < call->nbufs; i++) {
		hi -= (call->bufs[i].len + 15) & ~(size_t)15;
		call->bufs[i].remote = hi;
	}
	for (i = 0; i < call->nbufs; i++) {
		struct inject_buf *b = &call->bufs[i];
		unsigned char *img;
		unsigned int k;

		if (!b->len)
			continue;
		img = b->in ? malloc(b->len) : calloc(1, b->len);
		if (!img)
			return -ENOMEM;
		if (b->in)
			memcpy(img, b->in, b->len);
		for (k = 0; k < call->nrelocs; k++)
			if (call->relocs[k].buf == i)
				memcpy(img + call->relocs[k].off,
				       &call->bufs[call->relocs[k].target].remote,
				       sizeof(uint64_t));
		rc = inj_stack_write(s, b->remote, img, b->len);
		free(img);
		if (rc)
			return rc;
	}
	s->chain_flag = call->chain_buf
		? call->bufs[call->chain_buf - 1].remote +
			  offsetof(struct inject_chain, abandoned)
		: 0;
	for (i = 0; i < call->nargs; i++) {
		const struct inject_arg *a = &call->args[i];

		if (a->kind == INJECT_ARG_BUF) {
			if (a->buf >= call->nbufs)
				return -EINVAL;
			args[i] = call->bufs[a->buf].remote;
		} else {
			args[i] = a->value;
		}
	}
	rc = run(s, call->fn, args, call->nargs,
		 call->sret_buf ? call->bufs[call->sret_buf - 1].remote : 0, hi,
		 s->errno_addr, &res->ret);
	if (rc == -ESRCH && !s->dead)
		confirm_gone(s);
	if (rc == -ESRCH && s->err_rc != -ESRCH)
		inj_fail(s, -ESRCH, INJ_KIND_OF_RC,
			 "thread %d is gone (the process exited or called "
			 "execve)", (int)s->t.tid);
	if (rc)
		return rc;
	for (i = 0; i < call->nbufs; i++) {
		struct inject_buf *b = &call->bufs[i];

		if (b->out && b->len) {
			rc = tracee_read(&s->t, b->remote, b->out, b->len);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* Does the filter let @nr with @args through?  If not, @act says what
 * it would do. */
static bool syscall_allowed(struct inject_session *s, long nr,
			    const uint64_t *args, unsigned int nargs,
			    char *act, size_t act_size)
{
	uint64_t all[6] = { 0 };
	unsigned int i;

	for (i = 0; i < nargs && i < 6; i++)
		all[i] = args[i];
	return seccomp_check(s->sc, arch_audit, nr, all,
			     inject_helper(s, INJECT_HELPER_SYSCALL), act,
			     act_size);
}

bool inject_syscall_allowed(struct inject_session *s, long nr,
			    const uint64_t *args, unsigned int nargs)
{
	char act[64];

	return syscall_allowed(s, nr, args, nargs, act, sizeof(act));
}

int inject_check_syscall(struct inject_session *s, long nr,
			 const uint64_t *args, unsigned int nargs)
{
	char act[64];

	if (syscall_allowed(s, nr, args, nargs, act, sizeof(act)))
		return 0;
	return inj_fail(s, -EOPNOTSUPP, INJ_KIND_OF_RC,
			"its seccomp filter would %s for system call %ld", act,
			nr);
}

int inject_syscall(struct inject_session *s, long nr, const uint64_t *args,
		   unsigned int nargs, int64_t *ret)
{
	struct inject_call c = { .fn = inject_helper(s, INJECT_HELPER_SYSCALL),
				 .errno_kept = true };
	struct inject_result r;
	unsigned int i;
	int rc;

	if (nargs > INJECT_MAX_ARGS - 1)
		return -EINVAL;
	if (!c.fn)
		return -ENOEXEC;
	rc = inject_check_syscall(s, nr, args, nargs);
	if (rc)
		return rc;
	c.args[0] = (struct inject_arg){ .value = (uint64_t)nr };
	for (i = 0; i < nargs; i++)
		c.args[i + 1] = (struct inject_arg){ .value = args[i] };
	c.nargs = nargs + 1;
	rc = inject_call(s, &c, &r);
	if (!rc)
		*ret = (int64_t)r.ret;
	return rc;
}

int inject_write(struct inject_session *s, uint64_t addr, const void *buf,
		 size_t len)
{
	if (s->dead)
		return -ESRCH;
	if (s->abandoned)
		return -ETIMEDOUT;
	return tracee_write(&s->t, addr, buf, len);
}
