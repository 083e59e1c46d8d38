/*
 * x86-64 half of the call engine (see injector/arch.h and the design
 * comment at the top of injector/inject.c).
 *
 * Registers come from NT_PRSTATUS (struct user_regs_struct), the FP and
 * vector state from NT_X86_XSTATE in the standard (non-compacted) XSAVE
 * format, sized by the kernel.
 *
 * The rt_sigreturn frame (only for the one injected mmap() that creates
 * the stub page), lowest address first (F = the stack pointer there):
 *
 *   F        return address: the stub (or a libc signal restorer)
 *   F+8      struct ucontext, kernel layout: uc_flags, uc_link, uc_stack,
 *            sigcontext (healed registers, fpstate pointer), uc_sigmask
 *   F+312    siginfo area, unused
 *   ...      XSAVE image, 64-byte aligned, with the sw_reserved bytes
 *            (magic1, sizes, xfeatures) and magic2 after it, exactly as
 *            the kernel expects in a signal frame
 *   hi
 *
 * The frame of a call (F = callee's rsp, F % 16 == 8 as at any function
 * entry): F holds the stub's address, F+8 the restore block the stub
 * reads, then the 64-byte aligned XSAVE image; the thread's rip sits at
 * its rsp - 136, just below the red zone.  See the stub below.
 */
#include "injector/arch.h"
#include "injector/inject.h"

#include <elf.h>
#include <errno.h>
#include <libunwind.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/audit.h>
#include <sys/syscall.h>
#include <sys/user.h>

#define ERESTARTSYS 512
#define ERESTARTNOINTR 513
#define ERESTARTNOHAND 514
#define ERESTART_RESTARTBLOCK 516

#define FX_SW_OFFSET 464	/* sw_reserved inside the FXSAVE area */
#define UC_FP_XSTATE 0x1
#define UC_SIGCONTEXT_SS 0x2
#define UC_STRICT_RESTORE_SS 0x4

#define EFLAGS_TF 0x100u
#define EFLAGS_DF 0x400u

#define XSTATE_MAX (64 * 1024)

struct arch_ctx {
	struct user_regs_struct regs;
	unsigned char *xstate;
	size_t xstate_len;
};

/* The kernel's x86-64 signal frame structures (uapi layout). */
struct k_sigcontext {
	uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
	uint64_t rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip, eflags;
	uint16_t cs, gs, fs, ss;
	uint64_t err, trapno, oldmask, cr2;
	uint64_t fpstate;
	uint64_t reserved1[8];
};

struct k_stack {
	uint64_t ss_sp;
	int32_t ss_flags;
	int32_t pad;
	uint64_t ss_size;
};

struct k_ucontext {
	uint64_t uc_flags;
	uint64_t uc_link;
	struct k_stack uc_stack;
	struct k_sigcontext uc_mcontext;
	uint64_t uc_sigmask;
};

struct k_rt_sigframe {
	uint64_t pretcode;
	struct k_ucontext uc;
	uint64_t info[16]; /* siginfo: errno address, errno value */
};

struct fx_sw_bytes {
	uint32_t magic1;
	uint32_t extended_size;
	uint64_t xfeatures;
	uint32_t xstate_size;
	uint32_t padding[7];
};

_Static_assert(sizeof(struct k_sigcontext) == 256, "sigcontext layout");
_Static_assert(sizeof(struct k_ucontext) == 304, "ucontext layout");
_Static_assert(offsetof(struct k_rt_sigframe, info) == 312, "frame layout");

/*
 * The stub and the helpers are in injector/arch/x86_64-stub.S, which
 * also defines arch_stub_len, arch_stub_done_pc, arch_helpers_len and
 * arch_helper_off[].  The stub, entered by the callee's `ret` with rsp
 * pointing at the restore block below, puts the result in rbx, errno
 * back, the signal mask back with rt_sigprocmask (memsnap's completion
 * stop), then the FP state with xrstor, the registers, rflags and rsp,
 * and jumps through the rip kept just below the thread's red zone.
 */
const long arch_nr_stub_done = SYS_rt_sigprocmask;

const struct arch_desc arch_desc = {
	.name = "x86_64",
	.syscall_insn_len = 2,	/* 0f 05 */
	.red_zone = 128,
	.pc_slot = 16,		/* the rip at -136, rounded to 16 */
	.return_pop = 8,	/* ret pops the return address */
	.stack_align = 16,
	.trap_fill = 0xcc,	/* int3 */
};

/* The block the stub reads (RB_* in x86_64-stub.S). */
struct restore_block {
	uint64_t errno_addr, errno_val, sigmask, xsave;
	uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
	uint64_t rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rflags;
};

_Static_assert(sizeof(struct restore_block) == 168, "restore block");
_Static_assert(offsetof(struct restore_block, rflags) == 160, "block");
_Static_assert(offsetof(struct restore_block, rax) == 136, "block");
_Static_assert(offsetof(struct restore_block, rdi) == 96, "block");
/* CH_* in x86_64-stub.S */
_Static_assert(offsetof(struct inject_chain, nz_fn) == 32, "chain");
_Static_assert(offsetof(struct inject_chain, t_a1) == 64, "chain");
_Static_assert(offsetof(struct inject_chain, flags) == 72, "chain");
_Static_assert(offsetof(struct inject_chain, abandoned) == 80, "chain");
_Static_assert(offsetof(struct inject_chain, ret) == 88, "chain");

#define RIP_SLOT 136 /* below the thread's rsp */

const unsigned char arch_pat_syscall_ret[] = { 0x0f, 0x05, 0xc3 };
const size_t arch_pat_syscall_ret_len = sizeof(arch_pat_syscall_ret);
/* mov $0xf, %rax; syscall: glibc's and musl's __restore_rt */
const unsigned char arch_pat_sigreturn[] = {
	0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05,
};
const size_t arch_pat_sigreturn_len = sizeof(arch_pat_sigreturn);

const long arch_nr_mmap = SYS_mmap;
const long arch_nr_rt_sigreturn = SYS_rt_sigreturn;
const uint32_t arch_audit = AUDIT_ARCH_X86_64;

int arch_save(struct tracee *t, const struct arch_syscall *sc,
	      struct arch_ctx **out)
{
	struct arch_ctx *c = calloc(1, sizeof(*c));
	size_t len = sizeof(c->regs);
	int rc;

	(void)sc;	/* orig_rax keeps the number and rdi the argument */
	if (!c)
		return -ENOMEM;
	rc = tracee_getregset(t, NT_PRSTATUS, &c->regs, &len);
	if (!rc && len != sizeof(c->regs))
		rc = -EIO;
	if (rc)
		goto fail;
	/* Room for any XSAVE layout, not zeroed: zeroing 64 KiB of new
	 * pages cost the stopped thread 150 us.  Only the kernel's bytes
	 * (2.5 KiB with AVX-512) are kept and ever read. */
	c->xstate = malloc(XSTATE_MAX);
	if (!c->xstate) {
		rc = -ENOMEM;
		goto fail;
	}
	len = XSTATE_MAX;
	rc = tracee_getregset(t, NT_X86_XSTATE, c->xstate, &len);
	if (!rc && len < 512 + 64)
		rc = -EIO;
	if (rc)
		goto fail;
	c->xstate_len = len;
	{
		unsigned char *fit = realloc(c->xstate, len);

		if (fit)
			c->xstate = fit;
	}
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
	free(c->xstate);
	free(c);
}

uint64_t arch_reg(const struct arch_ctx *c, enum arch_role r)
{
	switch (r) {
	case ARCH_PC:
		return c->regs.rip;
	case ARCH_SP:
		return c->regs.rsp;
	case ARCH_RET:
		return c->regs.rax;
	case ARCH_SYSCALL_NR:
		return c->regs.orig_rax;
	case ARCH_LR:
	default:
		return 0;	/* call pushes the return address */
	}
}

bool arch_ctx_refused(const struct arch_ctx *c, char *why, size_t why_size)
{
	/* CET is in the status text: arch_thread_refused() */
	(void)c;
	(void)why;
	(void)why_size;
	return false;
}

bool arch_regset_refused(unsigned int note, const void *data, size_t len,
			 char *why, size_t why_size)
{
	(void)note;
	(void)data;
	(void)len;
	(void)why;
	(void)why_size;
	return false;
}

bool arch_fix_spurious_eintr(struct arch_ctx *c)
{
	long nr = (long)c->regs.orig_rax;

	if ((long)c->regs.rax != -EINTR)
		return false;
	/* signal(7): interfaces that fail with EINTR after a stop even
	 * without a handler, and that the kernel never restarts. */
	switch (nr) {
	case SYS_epoll_wait:
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
	/* The kernel restarts -ERESTARTNOHAND when no handler runs. */
	c->regs.rax = (uint64_t)-ERESTARTNOHAND;
	return true;
}

/* The registers as the thread will have them once restarted. */
static void healed_regs(const struct arch_ctx *c, struct user_regs_struct *r)
{
	*r = c->regs;
	if ((long)r->orig_rax >= 0) {
		switch ((long)r->rax) {
		case -ERESTARTSYS:
		case -ERESTARTNOINTR:
		case -ERESTARTNOHAND:
			r->rax = r->orig_rax;
			r->rip -= 2;
			break;
		case -ERESTART_RESTARTBLOCK:
			/*
			 * Re-run the syscall from its start (a relative sleep
			 * sleeps its full time again): the restart block may
			 * have been reused by the time this context is put
			 * back.  Only restart_syscall itself cannot be re-run
			 * from the start; it needs its restart block intact.
			 */
			if ((long)r->orig_rax != SYS_restart_syscall)
				r->rax = r->orig_rax;
			else
				r->rax = SYS_restart_syscall;
			r->rip -= 2;
			break;
		}
	}
	r->orig_rax = (uint64_t)-1;
}

static int set_regs(struct tracee *t, const struct user_regs_struct *r)
{
	return tracee_setregset(t, NT_PRSTATUS, r, sizeof(*r));
}

int arch_restore(struct tracee *t, const struct arch_ctx *c)
{
	int rc = tracee_setregset(t, NT_X86_XSTATE, c->xstate, c->xstate_len);
	int rc2 = set_regs(t, &c->regs);

	return rc ? rc : rc2;
}

int arch_restore_healed(struct tracee *t, const struct arch_ctx *c)
{
	struct user_regs_struct r;
	int rc = tracee_setregset(t, NT_X86_XSTATE, c->xstate, c->xstate_len);
	int rc2;

	healed_regs(c, &r);
	rc2 = set_regs(t, &r);
	return rc ? rc : rc2;
}

int arch_frame_build(const struct arch_ctx *c, uint64_t hi, uint64_t ret_addr,
		     uint64_t sigmask, uint64_t errno_addr, int errno_val,
		     void **buf, uint64_t *lo, uint64_t *sp)
{
	struct user_regs_struct r;
	struct k_rt_sigframe *f;
	struct k_sigcontext *sc;
	struct fx_sw_bytes sw;
	uint64_t fp, frame, xcr0;
	unsigned char *b;
	size_t xlen = c->xstate_len;

	fp = (hi - (xlen + 4)) & ~(uint64_t)63;
	frame = ((fp - sizeof(*f)) & ~(uint64_t)15) - 8;
	b = calloc(1, hi - frame);
	if (!b)
		return -ENOMEM;

	/* The XSAVE image with the signal-frame software bytes. */
	memcpy(b + (fp - frame), c->xstate, xlen);
	memcpy(&xcr0, c->xstate + FX_SW_OFFSET, sizeof(xcr0));
	memset(&sw, 0, sizeof(sw));
	sw.magic1 = FP_XSTATE_MAGIC1;
	sw.extended_size = (uint32_t)(xlen + 4);
	sw.xfeatures = xcr0;
	sw.xstate_size = (uint32_t)xlen;
	memcpy(b + (fp - frame) + FX_SW_OFFSET, &sw, sizeof(sw));
	{
		uint32_t m2 = FP_XSTATE_MAGIC2;

		memcpy(b + (fp - frame) + xlen, &m2, sizeof(m2));
	}

	healed_regs(c, &r);
	f = (struct k_rt_sigframe *)b;
	f->pretcode = ret_addr;
	f->uc.uc_flags = UC_FP_XSTATE | UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS;
	/*
	 * rt_sigreturn also sets the alternate signal stack from uc_stack,
	 * and we do not know the thread's.  An invalid mode makes that step
	 * fail with EINVAL, which the kernel ignores: the altstack is left
	 * as it is.
	 */
	f->uc.uc_stack.ss_flags = 3;
	sc = &f->uc.uc_mcontext;
	sc->r8 = r.r8;
	sc->r9 = r.r9;
	sc->r10 = r.r10;
	sc->r11 = r.r11;
	sc->r12 = r.r12;
	sc->r13 = r.r13;
	sc->r14 = r.r14;
	sc->r15 = r.r15;
	sc->rdi = r.rdi;
	sc->rsi = r.rsi;
	sc->rbp = r.rbp;
	sc->rbx = r.rbx;
	sc->rdx = r.rdx;
	sc->rax = r.rax;
	sc->rcx = r.rcx;
	sc->rsp = r.rsp;
	sc->rip = r.rip;
	sc->eflags = r.eflags;
	sc->cs = (uint16_t)r.cs;
	sc->ss = (uint16_t)r.ss;
	sc->fpstate = fp;
	f->uc.uc_sigmask = sigmask;
	f->info[0] = errno_addr;
	f->info[1] = (uint32_t)errno_val;

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
	struct user_regs_struct r;
	struct restore_block *b;
	uint64_t fp, frame;
	unsigned char *m;
	size_t xlen = c->xstate_len;

	if (hi > c->regs.rsp - RIP_SLOT)
		return -EINVAL;
	fp = (hi - xlen) & ~(uint64_t)63;
	frame = ((fp - 8 - sizeof(*b)) & ~(uint64_t)15) - 8;
	m = calloc(1, hi - frame);
	if (!m)
		return -ENOMEM;
	memcpy(m + (fp - frame), c->xstate, xlen);
	healed_regs(c, &r);
	memcpy(m, &stub, sizeof(stub));
	b = (struct restore_block *)(m + 8);
	b->errno_addr = errno_addr;
	b->errno_val = (uint32_t)errno_val;
	b->sigmask = sigmask;
	b->xsave = fp;
	b->r8 = r.r8;
	b->r9 = r.r9;
	b->r10 = r.r10;
	b->r11 = r.r11;
	b->r12 = r.r12;
	b->r13 = r.r13;
	b->r14 = r.r14;
	b->r15 = r.r15;
	b->rdi = r.rdi;
	b->rsi = r.rsi;
	b->rbp = r.rbp;
	b->rbx = r.rbx;
	b->rdx = r.rdx;
	b->rax = r.rax;
	b->rcx = r.rcx;
	b->rsp = r.rsp;
	b->rflags = r.eflags;
	*buf = m;
	*lo = frame;
	*sp = frame;
	*slot = r.rsp - RIP_SLOT;
	*slot_val = r.rip;
	return 0;
}

static void base_regs(const struct arch_ctx *c, struct user_regs_struct *r,
		      uint64_t sp)
{
	*r = c->regs;
	r->rsp = sp;
	r->rax = 0; /* AL = 0: no vector registers for a variadic callee */
	r->eflags &= ~(unsigned long long)(EFLAGS_DF | EFLAGS_TF);
	/* Not in a syscall: the kernel must not restart anything. */
	r->orig_rax = (uint64_t)-1;
}

int arch_set_call(struct tracee *t, const struct arch_ctx *c, uint64_t fn,
		  const uint64_t *args, unsigned int nargs, uint64_t sret,
		  uint64_t sp, uint64_t ret_addr)
{
	unsigned long long *slot[6];
	struct user_regs_struct r;
	unsigned int i, first = sret ? 1 : 0;

	(void)ret_addr;	/* on the stack at @sp */
	if (nargs + first > 6)
		return -E2BIG;
	base_regs(c, &r, sp);
	slot[0] = &r.rdi;
	slot[1] = &r.rsi;
	slot[2] = &r.rdx;
	slot[3] = &r.rcx;
	slot[4] = &r.r8;
	slot[5] = &r.r9;
	/* a struct returned in memory: its address first, in rdi */
	if (sret)
		r.rdi = sret;
	for (i = first; i < 6; i++)
		*slot[i] = i - first < nargs ? args[i - first] : 0;
	r.rip = fn;
	return set_regs(t, &r);
}

int arch_set_syscall(struct tracee *t, const struct arch_ctx *c,
		     uint64_t insn, long nr, const uint64_t *args,
		     unsigned int nargs, uint64_t sp, uint64_t ret_addr)
{
	unsigned long long *slot[6];
	struct user_regs_struct r;
	unsigned int i;

	(void)ret_addr;	/* on the stack at @sp */
	base_regs(c, &r, sp);
	slot[0] = &r.rdi;
	slot[1] = &r.rsi;
	slot[2] = &r.rdx;
	slot[3] = &r.r10;
	slot[4] = &r.r8;
	slot[5] = &r.r9;
	for (i = 0; i < 6; i++)
		*slot[i] = i < nargs ? args[i] : 0;
	r.rax = (uint64_t)nr;
	r.rip = insn;
	return set_regs(t, &r);
}

int arch_peek(struct tracee *t, struct arch_peek *p)
{
	struct user_regs_struct r;
	size_t len = sizeof(r);
	int rc = tracee_getregset(t, NT_PRSTATUS, &r, &len);

	if (rc)
		return rc;
	p->pc = r.rip;
	p->sp = r.rsp;
	p->ret = r.rax;
	p->arg0 = r.rdi;
	p->result = r.rbx;
	p->sysno = (long)r.orig_rax;
	return 0;
}

int arch_unw_regs_read(struct tracee *t, struct arch_unw_regs *u)
{
	struct user_regs_struct r;
	size_t len = sizeof(r);
	int rc = tracee_getregset(t, NT_PRSTATUS, &r, &len);

	if (rc)
		return rc;
	memset(u, 0, sizeof(*u));
	u->v[UNW_X86_64_RAX] = r.rax;
	u->v[UNW_X86_64_RDX] = r.rdx;
	u->v[UNW_X86_64_RCX] = r.rcx;
	u->v[UNW_X86_64_RBX] = r.rbx;
	u->v[UNW_X86_64_RSI] = r.rsi;
	u->v[UNW_X86_64_RDI] = r.rdi;
	u->v[UNW_X86_64_RBP] = r.rbp;
	u->v[UNW_X86_64_RSP] = r.rsp;
	u->v[UNW_X86_64_R8] = r.r8;
	u->v[UNW_X86_64_R9] = r.r9;
	u->v[UNW_X86_64_R10] = r.r10;
	u->v[UNW_X86_64_R11] = r.r11;
	u->v[UNW_X86_64_R12] = r.r12;
	u->v[UNW_X86_64_R13] = r.r13;
	u->v[UNW_X86_64_R14] = r.r14;
	u->v[UNW_X86_64_R15] = r.r15;
	u->v[UNW_X86_64_RIP] = r.rip;
	u->valid = (1ull << (UNW_X86_64_RIP + 1)) - 1;
	return 0;
}

void arch_unw_regs_pc_sp(struct arch_unw_regs *u, uint64_t pc, uint64_t sp)
{
	memset(u, 0, sizeof(*u));
	u->v[UNW_X86_64_RIP] = pc;
	u->v[UNW_X86_64_RSP] = sp;
	u->valid = 1ull << UNW_X86_64_RIP | 1ull << UNW_X86_64_RSP;
}

bool arch_sigframe_marker(uint64_t word)
{
	/* sigcontext's cs, gs, fs, ss: 0x33, 0, 0, 0x2b (__USER_CS/DS) */
	return word == 0x002b000000000033ull;
}

size_t arch_return_addresses(const struct arch_ctx *c, uint64_t *out,
			     size_t max)
{
	(void)c;
	(void)out;
	(void)max;
	return 0;
}
