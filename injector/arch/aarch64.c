/*
 * AArch64 half of the call engine (see injector/arch.h and the protocol
 * at the top of injector/inject.c).
 *
 * Registers come from NT_PRSTATUS (struct user_pt_regs: x0-x30, sp, pc,
 * pstate), the FP state from NT_PRFPREG (v0-v31, fpsr, fpcr) and, when
 * the thread has live SVE state, NT_ARM_SVE, put back as read.
 *
 * What differs from x86-64, and how each is met:
 *
 * - An interrupted syscall is already rewound at the stop: the kernel
 *   has put the pc back on `svc #0` and x0 back to the first argument,
 *   and forgotten the syscall number (the NT_ARM_SYSTEM_CALL regset
 *   reads -1); x8 still holds it.  So the saved registers are the
 *   healed ones: re-executing them restarts the syscall.  Two cases need
 *   what the registers no longer say, taken from /proc/PID/task/TID/
 *   syscall as read just before the stop (struct arch_syscall), and
 *   used only when pc, sp and x8 show the stop is in that same call:
 *   an epoll_pwait & co. that our stop made fail with EINTR (the kernel
 *   never restarts those; x0 holds -EINTR, and the first argument comes
 *   from /proc), and a relative nanosleep, which the exact restore
 *   resumes through restart_syscall so that it keeps its remaining
 *   time (the kernel would have done so after the stop; the healed
 *   context re-runs it from the start instead).  What is left: a thread
 *   that enters such a call between that read and the stop has lost
 *   its x0 with nothing to take it from, and sees the EINTR.  The read
 *   is made just before the seizure to keep that window to a few
 *   system calls (fences::sigwaitinfo_sees_no_eintr in the emulated
 *   guest, 200 borrows of a thread woken often: 3 EINTRs with the
 *   triage's older read, 1 with this one).
 * - A tracer's write to x7 at a syscall stop is discarded: the kernel
 *   puts back the x7 the thread had at its `svc`.  The stub therefore
 *   loads the thread's own x7 before its completion `svc`, and nothing
 *   else writes registers at a syscall stop that x7 could spoil (a call
 *   never takes x7 as an argument).
 * - Return through the link register: arch_set_call() puts the stub's
 *   address in x30; no return address on the stack, no red zone.
 * - No register is free to jump back with, so the stub cannot restore
 *   the last register and branch in user space as on x86-64.  When
 *   memsnap is alive it restores the thread at the completion stop;
 *   when memsnap is gone the stub ends with rt_sigreturn on a signal
 *   frame the call frame carries (struct k_rt_sigframe below).  Cost:
 *   rt_sigreturn resets the restart block, so a thread asleep in
 *   restart_syscall that memsnap leaves by dying mid-call sees EINTR;
 *   triage ranks such threads low.  The frame holds the FPSIMD state
 *   and, when the thread had live SVE state, an SVE record (vectors up
 *   to 512 bits fit in the frame).
 *
 * The frame of a call (F = the callee's sp, 16-byte aligned):
 *
 *   F        restore block: errno address and value, signal mask, x7
 *   F+32     struct k_rt_sigframe: siginfo (unused), ucontext with the
 *            healed registers, signal mask and an FPSIMD record
 *   hi
 */
#include "injector/arch.h"
#include "injector/arch/aarch64-kernel.h"
#include "injector/inject.h"

#include <elf.h>
#include <errno.h>
#include <libunwind.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <linux/audit.h>
#include <sys/syscall.h>

struct arch_ctx {
	struct k_regs regs;
	struct k_fpsimd fp;
	unsigned char *sve;	/* NT_ARM_SVE as read, when SVE is live */
	size_t sve_len;
	struct arch_syscall sc;	/* from /proc, before the stop */
	bool in_sleep;		/* stopped inside a relative nanosleep,
				   rewound: resumed through restart_syscall */
	char refused[96];	/* a feature that forbids calling: GCS */
};

/* The block the stub reads (RB_* in aarch64-stub.S). */
struct restore_block {
	uint64_t errno_addr, errno_val, sigmask, x7;
};

_Static_assert(sizeof(struct restore_block) == 32, "restore block");
/* CH_* in aarch64-stub.S */
_Static_assert(offsetof(struct inject_chain, nz_fn) == 32, "chain");
_Static_assert(offsetof(struct inject_chain, t_a1) == 64, "chain");
_Static_assert(offsetof(struct inject_chain, flags) == 72, "chain");
_Static_assert(offsetof(struct inject_chain, abandoned) == 80, "chain");
_Static_assert(offsetof(struct inject_chain, ret) == 88, "chain");

const long arch_nr_stub_done = SYS_rt_sigprocmask;

const struct arch_desc arch_desc = {
	.name = "aarch64",
	.syscall_insn_len = 4,	/* svc #0 */
	.red_zone = 0,		/* AAPCS64 has none: signals write below sp */
	.pc_slot = 0,		/* the stub needs no slot: see above */
	.return_pop = 0,	/* ret pops nothing */
	.stack_align = 16,
	.trap_fill = 0x00,	/* 0x00000000 is udf #0 */
};

/* svc #0; ret */
const unsigned char arch_pat_syscall_ret[] = { 0x01, 0x00, 0x00, 0xd4,
					       0xc0, 0x03, 0x5f, 0xd6 };
const size_t arch_pat_syscall_ret_len = sizeof(arch_pat_syscall_ret);
/* mov x8, #139; svc #0: the vdso's __kernel_rt_sigreturn */
const unsigned char arch_pat_sigreturn[] = { 0x68, 0x11, 0x80, 0xd2,
					     0x01, 0x00, 0x00, 0xd4 };
const size_t arch_pat_sigreturn_len = sizeof(arch_pat_sigreturn);

const long arch_nr_mmap = SYS_mmap;
const long arch_nr_rt_sigreturn = SYS_rt_sigreturn;
const uint32_t arch_audit = AUDIT_ARCH_AARCH64;

/* Stopped in the syscall /proc saw, not yet past its `svc`?  (Rewound
 * by the kernel: pc on the svc, x8 its number.) */
static bool rewound_in(const struct arch_ctx *c, long nr)
{
	return c->sc.nr == nr && c->regs.pc + 4 == c->sc.pc &&
	       c->regs.sp == c->sc.sp && (long)c->regs.x[8] == nr &&
	       c->regs.x[0] == c->sc.args[0];
}

int arch_save(struct tracee *t, const struct arch_syscall *sc,
	      struct arch_ctx **out)
{
	struct arch_ctx *c = calloc(1, sizeof(*c));
	struct k_sve_header h;
	size_t len = sizeof(c->regs);
	int rc;

	if (!c)
		return -ENOMEM;
	c->sc.nr = -1;
	if (sc)
		c->sc = *sc;
	rc = tracee_getregset(t, NT_PRSTATUS, &c->regs, &len);
	if (!rc && len != sizeof(c->regs))
		rc = -EIO;
	if (rc)
		goto fail;
	len = sizeof(c->fp);
	rc = tracee_getregset(t, NT_PRFPREG, &c->fp, &len);
	if (!rc && len != sizeof(c->fp))
		rc = -EIO;
	if (rc)
		goto fail;
	/* SVE: kept only when live (its Z registers wider than V) */
	c->sve = malloc(SVE_MAX);
	if (!c->sve) {
		rc = -ENOMEM;
		goto fail;
	}
	len = SVE_MAX;
	if (!tracee_getregset(t, NT_ARM_SVE, c->sve, &len) &&
	    len >= sizeof(h)) {
		memcpy(&h, c->sve, sizeof(h));
		if ((h.flags & SVE_PT_REGS_SVE) && h.size <= len &&
		    h.size >= sizeof(h))
			c->sve_len = h.size;
	}
	if (!c->sve_len) {
		free(c->sve);
		c->sve = NULL;
	}
	{
		uint64_t gcs[3];	/* struct user_gcs */

		len = sizeof(gcs);
		if (!tracee_getregset(t, NT_ARM_GCS, gcs, &len))
			arch_regset_refused(NT_ARM_GCS, gcs, len, c->refused,
					    sizeof(c->refused));
	}
	c->in_sleep = rewound_in(c, SYS_nanosleep) ||
		      (rewound_in(c, SYS_clock_nanosleep) &&
		       !(c->sc.args[1] & TIMER_ABSTIME));
	*out = c;
	return 0;
fail:
	arch_free(c);
	return rc;
}

void arch_free(struct arch_ctx *c)
{
	if (!c)
		return;
	free(c->sve);
	free(c);
}

uint64_t arch_reg(const struct arch_ctx *c, enum arch_role r)
{
	switch (r) {
	case ARCH_PC:
		return c->regs.pc;
	case ARCH_SP:
		return c->regs.sp;
	case ARCH_RET:
		return c->regs.x[0];
	case ARCH_LR:
		return c->regs.x[30];
	case ARCH_SYSCALL_NR:
	default:
		/* the number the thread will re-enter, when rewound */
		return c->sc.nr >= 0 && c->regs.pc + 4 == c->sc.pc
			       ? c->regs.x[8]
			       : (uint64_t)-1;
	}
}

bool arch_regset_refused(unsigned int note, const void *data, size_t len,
			 char *why, size_t why_size)
{
	uint64_t enabled;

	/* struct user_gcs: features_enabled, features_locked, gcspr_el0 */
	if (note != NT_ARM_GCS || len < sizeof(enabled))
		return false;
	memcpy(&enabled, data, sizeof(enabled));
	if (!(enabled & GCS_ENABLE))
		return false;
	snprintf(why, why_size, "GCS shadow stack enabled");
	return true;
}

bool arch_ctx_refused(const struct arch_ctx *c, char *why, size_t why_size)
{
	if (!c->refused[0])
		return false;
	snprintf(why, why_size, "%s", c->refused);
	return true;
}

bool arch_fix_spurious_eintr(struct arch_ctx *c)
{
	long nr = c->sc.nr;

	if ((int64_t)c->regs.x[0] != -EINTR || nr < 0)
		return false;
	/* Not rewound: the pc is past the `svc` /proc saw the thread in. */
	if (c->regs.pc != c->sc.pc || c->regs.sp != c->sc.sp ||
	    (long)c->regs.x[8] != nr)
		return false;
	switch (nr) {
	case SYS_epoll_pwait:
	case SYS_epoll_pwait2:
	case SYS_rt_sigtimedwait:
	case SYS_semop:
	case SYS_semtimedop:
	case SYS_msgrcv:
	case SYS_msgsnd:
		break;
	default:
		return false;
	}
	/* Back on the svc with the first argument: it runs again. */
	c->regs.pc -= 4;
	c->regs.x[0] = c->sc.args[0];
	return true;
}

static int set_regs(struct tracee *t, const struct k_regs *r)
{
	return tracee_setregset(t, NT_PRSTATUS, r, sizeof(*r));
}

static int set_fp(struct tracee *t, const struct arch_ctx *c)
{
	if (c->sve)
		return tracee_setregset(t, NT_ARM_SVE, c->sve, c->sve_len);
	return tracee_setregset(t, NT_PRFPREG, &c->fp, sizeof(c->fp));
}

int arch_restore(struct tracee *t, const struct arch_ctx *c)
{
	struct k_regs r = c->regs;
	int rc = set_fp(t, c), rc2;

	/* What the kernel would have done after the stop: a nanosleep
	 * goes on through restart_syscall, with the time it had left. */
	if (c->in_sleep)
		r.x[8] = SYS_restart_syscall;
	rc2 = set_regs(t, &r);
	return rc ? rc : rc2;
}

/*
 * Not in a syscall any more: at a syscall stop, the syscall is skipped,
 * and on the way out the kernel's restart logic has nothing to act on
 * (it would take x0 for the syscall's result).
 */
static int no_syscall(struct tracee *t)
{
	int nr = -1;

	return tracee_setregset(t, NT_ARM_SYSTEM_CALL, &nr, sizeof(nr));
}

int arch_restore_healed(struct tracee *t, const struct arch_ctx *c)
{
	int rc = set_fp(t, c), rc2, rc3;

	rc2 = set_regs(t, &c->regs);
	rc3 = no_syscall(t);
	return rc ? rc : rc2 ? rc2 : rc3;
}

/*
 * Live SVE state as a signal frame's SVE record at @p (at most @room
 * bytes): the record's registers are laid out as NT_ARM_SVE's after its
 * header (both follow a 16-byte header with the same offsets).  Too big
 * for the frame (vectors over 512 bits): left out, and rt_sigreturn
 * keeps the FPSIMD part.
 */
static void sve_record(const struct arch_ctx *c, uint8_t *p, size_t room)
{
	struct k_sve_header h;
	struct {
		struct k_ctx_head head;
		uint16_t vl, flags, reserved[2];
	} rec;
	size_t vq, regs, size;

	if (!c->sve)
		return;
	memcpy(&h, c->sve, sizeof(h));
	vq = h.vl / 16;
	/* 32 Z registers, 16 P registers and FFR, each vq-sized */
	regs = 32 * vq * 16 + 16 * vq * 2 + vq * 2;
	size = (sizeof(rec) + regs + 15) & ~(size_t)15;
	if (!vq || size > room || sizeof(h) + regs > c->sve_len)
		return;
	memset(&rec, 0, sizeof(rec));
	rec.head.magic = SVE_MAGIC;
	rec.head.size = (uint32_t)size;
	rec.vl = h.vl;
	memcpy(p, &rec, sizeof(rec));
	memcpy(p + sizeof(rec), c->sve + sizeof(h), regs);
}

/* The signal frame for rt_sigreturn with the healed context. */
static void sigframe_fill(const struct arch_ctx *c, struct k_rt_sigframe *f,
			  uint64_t sigmask)
{
	struct k_sigcontext *sc = &f->uc.uc_mcontext;
	struct k_fpsimd_context fc;

	/* An invalid mode: rt_sigreturn leaves the altstack as it is. */
	f->uc.uc_stack.ss_flags = 3;
	f->uc.uc_sigmask = sigmask;
	memcpy(sc->regs, c->regs.x, sizeof(sc->regs));
	sc->sp = c->regs.sp;
	sc->pc = c->regs.pc;
	sc->pstate = c->regs.pstate;
	memset(&fc, 0, sizeof(fc));
	fc.head.magic = FPSIMD_MAGIC;
	fc.head.size = sizeof(fc);
	fc.fpsr = c->fp.fpsr;
	fc.fpcr = c->fp.fpcr;
	memcpy(fc.v, c->fp.v, sizeof(fc.v));
	memcpy(sc->reserved, &fc, sizeof(fc));
	sve_record(c, sc->reserved + sizeof(fc),
		   sizeof(sc->reserved) - sizeof(fc) - sizeof(struct k_ctx_head));
	/* then a terminator: zero magic and size (already zero) */
}

int arch_frame_build(const struct arch_ctx *c, uint64_t hi, uint64_t ret_addr,
		     uint64_t sigmask, uint64_t errno_addr, int errno_val,
		     void **buf, uint64_t *lo, uint64_t *sp)
{
	uint64_t frame = (hi - sizeof(struct k_rt_sigframe)) & ~(uint64_t)15;
	unsigned char *b = calloc(1, hi - frame);

	(void)ret_addr;		/* the link register: arch_set_syscall() */
	(void)errno_addr;	/* a raw mmap leaves errno alone */
	(void)errno_val;
	if (!b)
		return -ENOMEM;
	sigframe_fill(c, (struct k_rt_sigframe *)b, sigmask);
	*buf = b;
	*lo = frame;
	*sp = frame;
	return 0;
}

int arch_call_frame_build(const struct arch_ctx *c, uint64_t hi,
			  uint64_t stub, uint64_t sigmask, uint64_t errno_addr,
			  int errno_val, void **buf, uint64_t *lo, uint64_t *sp,
			  uint64_t *slot, uint64_t *slot_val)
{
	size_t size = sizeof(struct restore_block) +
		      sizeof(struct k_rt_sigframe);
	uint64_t frame = (hi - size) & ~(uint64_t)15;
	struct restore_block *rb;
	unsigned char *m;

	(void)stub;		/* the link register: arch_set_call() */
	if (hi > c->regs.sp)
		return -EINVAL;
	m = calloc(1, hi - frame);
	if (!m)
		return -ENOMEM;
	rb = (struct restore_block *)m;
	rb->errno_addr = errno_addr;
	rb->errno_val = (uint32_t)errno_val;
	rb->sigmask = sigmask;
	rb->x7 = c->regs.x[7];
	sigframe_fill(c, (struct k_rt_sigframe *)(m + sizeof(*rb)), sigmask);
	*buf = m;
	*lo = frame;
	*sp = frame;
	*slot = 0;
	*slot_val = 0;
	return 0;
}

static void base_regs(const struct arch_ctx *c, struct k_regs *r,
		      uint64_t sp, uint64_t pc, uint64_t lr)
{
	*r = c->regs;
	r->sp = sp;
	r->pc = pc;
	r->x[30] = lr;
	/* no branch type pending, no single step */
	r->pstate &= ~(PSR_BTYPE_MASK | PSR_SS);
}

int arch_set_call(struct tracee *t, const struct arch_ctx *c, uint64_t fn,
		  const uint64_t *args, unsigned int nargs, uint64_t sret,
		  uint64_t sp, uint64_t ret_addr)
{
	struct k_regs r;
	unsigned int i;

	if (nargs > 8)
		return -E2BIG;
	base_regs(c, &r, sp, fn, ret_addr);
	for (i = 0; i < 8; i++)
		r.x[i] = i < nargs ? args[i] : 0;
	/* x7 stays the thread's unless it is an argument: a tracer's
	 * write to it at a syscall stop would not hold anyway */
	if (nargs < 8)
		r.x[7] = c->regs.x[7];
	/* a struct returned in memory: its address in x8 */
	r.x[8] = sret;
	return set_regs(t, &r) ?: no_syscall(t);
}

int arch_set_syscall(struct tracee *t, const struct arch_ctx *c,
		     uint64_t insn, long nr, const uint64_t *args,
		     unsigned int nargs, uint64_t sp, uint64_t ret_addr)
{
	struct k_regs r;
	unsigned int i;

	base_regs(c, &r, sp, insn, ret_addr);
	for (i = 0; i < 6; i++)
		r.x[i] = i < nargs ? args[i] : 0;
	r.x[8] = (uint64_t)nr;
	return set_regs(t, &r);
}

int arch_peek(struct tracee *t, struct arch_peek *p)
{
	struct k_regs r;
	size_t len = sizeof(r);
	int rc = tracee_getregset(t, NT_PRSTATUS, &r, &len);

	if (rc)
		return rc;
	p->pc = r.pc;
	p->sp = r.sp;
	p->ret = r.x[0];
	p->arg0 = r.x[0];
	p->result = r.x[19];	/* where the stub keeps it */
	p->sysno = (long)r.x[8];
	return 0;
}

int arch_unw_regs_read(struct tracee *t, struct arch_unw_regs *u)
{
	struct k_regs r;
	size_t len = sizeof(r);
	int rc = tracee_getregset(t, NT_PRSTATUS, &r, &len);
	int i;

	if (rc)
		return rc;
	memset(u, 0, sizeof(*u));
	for (i = 0; i <= 30; i++)
		u->v[UNW_AARCH64_X0 + i] = r.x[i];
	u->v[UNW_AARCH64_SP] = r.sp;
	u->v[UNW_AARCH64_PC] = r.pc;
	u->valid = (1ull << (UNW_AARCH64_PC + 1)) - 1;
	return 0;
}

void arch_unw_regs_pc_sp(struct arch_unw_regs *u, uint64_t pc, uint64_t sp)
{
	memset(u, 0, sizeof(*u));
	u->v[UNW_AARCH64_PC] = pc;
	u->v[UNW_AARCH64_SP] = sp;
	u->valid = 1ull << UNW_AARCH64_PC | 1ull << UNW_AARCH64_SP;
}

bool arch_sigframe_marker(uint64_t word)
{
	/* the head of the FPSIMD record every signal frame carries */
	return word == ((uint64_t)sizeof(struct k_fpsimd_context) << 32 |
			FPSIMD_MAGIC);
}

size_t arch_return_addresses(const struct arch_ctx *c, uint64_t *out,
			     size_t max)
{
	uint64_t lr = arch_strip_pac(c->regs.x[30]);

	if (!max || !lr)
		return 0;
	out[0] = lr;
	return 1;
}
