#ifndef MEMSNAP_INJECTOR_ARCH_H
#define MEMSNAP_INJECTOR_ARCH_H

#include "injector/ptrace.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * What the call engine needs from one architecture
 * (injector/arch/$(ARCH).c): the thread's saved context, the
 * self-healing signal frame, register set-ups for a call and for an
 * injected syscall, the return stub, the syscall restart rules and the
 * byte patterns of two existing code sequences.  inject.c holds the
 * protocol; nothing there knows a register name.
 */

struct arch_ctx;

/*
 * What /proc/PID/task/TID/syscall said of the thread just before it was
 * stopped (proc/triage.h): the syscall it was in (-1: none, -2:
 * running), its arguments as it entered, its stack pointer and the pc
 * after the syscall instruction.  Where the registers at the stop have
 * lost some of it (AArch64 has no orig_x0 to read), the arch code takes
 * it from here, after checking that the stop is in that same syscall.
 */
struct arch_syscall {
	long nr;
	uint64_t args[6], sp, pc;
};

/* Registers and FP/vector state of @t at its current stop; @sc as
 * above (NULL: unknown). */
int arch_save(struct tracee *t, const struct arch_syscall *sc,
	      struct arch_ctx **out);
void arch_free(struct arch_ctx *c);

/*
 * The saved registers by role, so that the engine never names one CPU's
 * registers.  ARCH_SYSCALL_NR: the syscall the thread was stopped in
 * (-1: none); ARCH_LR: the link register (0 where a call pushes the
 * return address instead).
 */
enum arch_role {
	ARCH_PC,
	ARCH_SP,
	ARCH_RET,	 /* the return-value register */
	ARCH_LR,
	ARCH_SYSCALL_NR,
};
uint64_t arch_reg(const struct arch_ctx *c, enum arch_role r);

/*
 * A thread memsnap must not call from, whatever its stack, because of
 * a CPU feature its /proc/PID/task/TID/status text @status shows on
 * (x86-64: CET shadow stacks; AArch64: GCS).  true with @why naming it.
 */
bool arch_thread_refused(const char *status, char *why, size_t why_size);

/*
 * The registers an unwind starts from, by libunwind's numbers for this
 * CPU (x86-64: the 16 general registers 0-15, the pc 16; AArch64:
 * x0..x30, sp 31, pc 32), a bit of @valid for each one known.  Plain
 * data: it crosses into the unwinder's sandbox (injector/unwind.c).
 */
#define ARCH_UNW_NREGS 33
struct arch_unw_regs {
	uint64_t v[ARCH_UNW_NREGS];
	uint64_t valid;
};

/* Those of a thread in a ptrace-stop, read now.  0 or -errno. */
int arch_unw_regs_read(struct tracee *t, struct arch_unw_regs *r);

/* The pc's and the stack pointer's numbers among them. */
extern const unsigned int arch_unw_pc, arch_unw_sp;

/* Only the pc and the stack pointer, as /proc shows them for a thread
 * asleep in a system call. */
void arch_unw_regs_pc_sp(struct arch_unw_regs *r, uint64_t pc, uint64_t sp);

/*
 * The DWARF columns libunwind keeps a rule for (its
 * DWARF_NUM_PRESERVED_REGS): libunwind 1.6 indexes its array with a
 * CIE's return-address column unchecked, so memsnap hands it no CIE
 * whose column is not below this.
 */
extern const unsigned int arch_unw_columns;

/*
 * The same for what only a regset shows, read by arch_save() (AArch64:
 * NT_ARM_GCS with the shadow stack on).  arch_ctx_refused() says it for
 * a saved context; arch_regset_refused() is the pure check on a regset
 * @note of @len bytes at @data, for tests.
 */
bool arch_ctx_refused(const struct arch_ctx *c, char *why, size_t why_size);
bool arch_regset_refused(unsigned int note, const void *data, size_t len,
			 char *why, size_t why_size);

/*
 * Our PTRACE_INTERRUPT made a syscall that the kernel never restarts
 * (epoll_wait, ...) fail with EINTR, which the thread would not have
 * seen without memsnap.  Turn that result into a restart.  Call only
 * when no signal is pending for the thread (a real one would explain
 * the EINTR).  Returns true if the context was changed.
 */
bool arch_fix_spurious_eintr(struct arch_ctx *c);

/*
 * Put the saved context back exactly, at a stop inside signal delivery
 * (PTRACE_EVENT_STOP, signal-delivery-stop): the kernel's own restart
 * logic then runs as if the thread had never stopped.
 */
int arch_restore(struct tracee *t, const struct arch_ctx *c);

/*
 * Put the context back with the syscall restart already applied (the
 * interrupted syscall is re-executed from its start), for stops where
 * the kernel will not apply it (syscall stops).  If memsnap dies after
 * this, the thread carries on by itself.
 */
int arch_restore_healed(struct tracee *t, const struct arch_ctx *c);

/*
 * The self-healing frame placed below @hi on the thread's stack: the
 * return address slot holds @ret_addr, and above it an rt_sigreturn
 * frame with the complete healed context, FP state and signal mask
 * @sigmask, plus the errno word to restore (@errno_addr 0: none).
 * Allocates *@buf (free() it) holding the bytes for [*@lo, @hi), and
 * sets *@sp: the stack pointer the callee must start with.
 */
int arch_frame_build(const struct arch_ctx *c, uint64_t hi, uint64_t ret_addr,
		     uint64_t sigmask, uint64_t errno_addr, int errno_val,
		     void **buf, uint64_t *lo, uint64_t *sp);

/*
 * The frame of a call below @hi (which must lie at least
 * arch_desc.red_zone + arch_desc.pc_slot bytes below the thread's stack
 * pointer): the callee returns into @stub, which puts the
 * healed context back by itself (errno, signal mask @sigmask, FP state,
 * registers).  *@buf (free() it) holds the bytes of [*@lo, @hi); the
 * 8 bytes *@slot_val also go to address *@slot (0: no slot).  *@sp:
 * the callee's stack pointer.
 */
int arch_call_frame_build(const struct arch_ctx *c, uint64_t hi,
			  uint64_t stub, uint64_t sigmask, uint64_t errno_addr,
			  int errno_val, void **buf, uint64_t *lo, uint64_t *sp,
			  uint64_t *slot, uint64_t *slot_val);

/*
 * Registers for calling @fn(@args...) with stack pointer @sp.  @sret
 * (0: none) is where a function returning a struct in memory writes
 * it, passed the ABI's way (x86-64: a hidden first argument; AArch64:
 * x8).  @ret_addr: where @fn returns to (x86-64: already at @sp, put
 * there by arch_call_frame_build(); AArch64: the link register).
 * -E2BIG if the arguments do not fit in registers.
 */
int arch_set_call(struct tracee *t, const struct arch_ctx *c, uint64_t fn,
		  const uint64_t *args, unsigned int nargs, uint64_t sret,
		  uint64_t sp, uint64_t ret_addr);

/* Registers for executing syscall @nr(@args...) at the syscall
 * instruction @insn, with stack pointer @sp; @ret_addr is where the
 * "return" after that instruction goes (as for arch_set_call()). */
int arch_set_syscall(struct tracee *t, const struct arch_ctx *c,
		     uint64_t insn, long nr, const uint64_t *args,
		     unsigned int nargs, uint64_t sp, uint64_t ret_addr);

/* At a stop: pc, the syscall number (syscall stops; -1 else), the return
 * value register, the first argument register and the register where
 * the stub keeps the callee's result. */
struct arch_peek {
	uint64_t pc, sp, ret, arg0, result;
	long sysno;
};
int arch_peek(struct tracee *t, struct arch_peek *p);

/*
 * Facts of the instruction set and ABI the engine needs as numbers.
 * The page size is not one of them: it is the running kernel's
 * (getauxval(AT_PAGESZ), page_size() in common/util.h).
 */
struct arch_desc {
	const char *name;	  /* as `uname -m` says: "x86_64" */
	size_t syscall_insn_len;  /* the pc after a syscall instruction
				   * minus the pc at it */
	size_t red_zone;	  /* bytes below sp a leaf function may use */
	size_t pc_slot;		  /* bytes below the red zone the stub
				   * jumps through, and alignment room */
	size_t return_pop;	  /* bytes a return pops off the stack
				   * (the return address; 0 with a link
				   * register) */
	size_t stack_align;	  /* sp at a call, a multiple of this */
	unsigned char trap_fill;  /* a byte that traps when executed, to
				   * fill the stub page's gaps */
};
extern const struct arch_desc arch_desc;

/* The return stub (see injector/inject.c): its code, and the offset of
 * the pc at the syscall-entry stop that marks the end of a call, and
 * that syscall's number. */
extern const unsigned char arch_stub_code[];
extern const size_t arch_stub_len;
extern const size_t arch_stub_done_pc;
extern const long arch_nr_stub_done;

/* Helpers placed in the same page (see injector/inject.h,
 * enum inject_helper, and the arch code for what each does). */
enum {
	ARCH_HELPER_SYSCALL,
	ARCH_HELPER_WRITE_CB,
	ARCH_HELPER_WRITE_CB_MSG_FIRST,
	ARCH_HELPER_CHAIN,
	ARCH_HELPERS
};
extern const unsigned char arch_helpers_code[];
extern const size_t arch_helpers_len;
extern const size_t arch_helper_off[ARCH_HELPERS];

/* Byte patterns: an instruction sequence "syscall; return" and one
 * "rt_sigreturn" (a libc's signal restorer). */
extern const unsigned char arch_pat_syscall_ret[];
extern const size_t arch_pat_syscall_ret_len;
extern const unsigned char arch_pat_sigreturn[];
extern const size_t arch_pat_sigreturn_len;

extern const long arch_nr_mmap;
extern const long arch_nr_rt_sigreturn;
/* EM_* of this architecture, as its ELF files say (the patch planner
 * memsnap uses: patch_native()). */
extern const unsigned int arch_e_machine;
/* AUDIT_ARCH_* of this architecture, as seccomp filters see it. */
extern const uint32_t arch_audit;

/* How good a thread asleep in restart_syscall is to borrow (a sleep
 * resumed after a stop), for syscall_score() (injector/syscalls.h),
 * whose table is the same on every CPU but for this. */
extern const int arch_restart_score;

/* Could @word on a stack be part of a signal frame (the saved cs and ss
 * of a user context)? */
bool arch_sigframe_marker(uint64_t word);

/* Do the 8 bytes @code that precede an address end with a call
 * instruction (so that the address may be a return address)? */
bool arch_may_be_call_site(const unsigned char *code);

/* @word without pointer-authentication bits (AArch64 PAC), as an
 * address to compare; x86-64: @word. */
uint64_t arch_strip_pac(uint64_t word);

/*
 * Return addresses the stopped thread holds in registers, not on its
 * stack (AArch64: the link register, stripped), into @out (at most
 * @max); how many.  x86-64: none, a call pushes its return address.
 */
size_t arch_return_addresses(const struct arch_ctx *c, uint64_t *out,
			     size_t max);

#endif
