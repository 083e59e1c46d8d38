/*
 * AArch64 facts the engine reads from code and status text, with no
 * thread to hand: the system calls a thread sleeps in (thread choice),
 * the instruction before a return address and pointer authentication
 * (the fast stack check).  Pure functions, unit-tested (test_arch.c).
 */
#include "injector/arch.h"

#include <libunwind.h>

#include <string.h>
#include <sys/syscall.h>

bool arch_thread_refused(const char *status, char *why, size_t why_size)
{
	/* GCS, the arm64 shadow stack, shows no line in status: its regset
	 * does (arch_ctx_refused()). */
	(void)status;
	(void)why;
	(void)why_size;
	return false;
}

/* Syscalls a thread sleeps in, best first (AArch64 has no poll, select,
 * epoll_wait, pause, fork: glibc uses ppoll, pselect6, epoll_pwait, ...). */
const struct arch_syscall_rank arch_syscalls[] = {
	{ SYS_futex, "futex", 100 },
	{ SYS_nanosleep, "nanosleep", 100 },
	{ SYS_clock_nanosleep, "clock_nanosleep", 100 },
	/* A sleep resumed after a stop: rt_sigreturn, if memsnap dies
	 * mid-call, would cut it short (see the top of aarch64.c). */
	{ SYS_restart_syscall, "restart_syscall", 30 },
	{ SYS_read, "read", 90 },
	{ SYS_readv, "readv", 90 },
	{ SYS_recvfrom, "recvfrom", 90 },
	{ SYS_recvmsg, "recvmsg", 90 },
	{ SYS_ppoll, "ppoll", 90 },
	{ SYS_pselect6, "pselect6", 90 },
	{ SYS_accept, "accept", 90 },
	{ SYS_accept4, "accept4", 90 },
	{ SYS_wait4, "wait4", 80 },
	{ SYS_waitid, "waitid", 80 },
	{ SYS_rt_sigsuspend, "rt_sigsuspend", 60 },
	/* Never restarted by the kernel: memsnap turns their EINTR back
	 * into a restart, but prefers other threads. */
	{ SYS_epoll_pwait, "epoll_pwait", 50 },
	{ SYS_epoll_pwait2, "epoll_pwait2", 50 },
	{ SYS_rt_sigtimedwait, "rt_sigtimedwait", -10 },
	{ SYS_write, "write", 40 },
	{ SYS_exit, "exit", -100 },
	{ SYS_exit_group, "exit_group", -100 },
	{ SYS_execve, "execve", -100 },
	{ SYS_clone, "clone", -50 },
	{ SYS_clone3, "clone3", -50 },
};

const size_t arch_nsyscalls = sizeof(arch_syscalls) / sizeof(arch_syscalls[0]);

bool arch_may_be_call_site(const unsigned char *code)
{
	uint32_t i;

	/* the instruction before a return address: code[4..7] */
	memcpy(&i, code + 4, sizeof(i));
	return (i & 0xfc000000u) == 0x94000000u ||	/* bl */
	       (i & 0xfffffc1fu) == 0xd63f0000u ||	/* blr */
	       (i & 0xfffffc1fu) == 0xd63f081fu ||	/* blraaz */
	       (i & 0xfffffc1fu) == 0xd63f0c1fu ||	/* blrabz */
	       (i & 0xfffff800u) == 0xd73f0800u;	/* blraa, blrab */
}

uint64_t arch_strip_pac(uint64_t word)
{
	/* a user address has bit 55 clear and at most 48 bits; above them
	 * sit the PAC and, for data, a tag byte */
	return word >> 55 & 1 ? word : word & 0x0000ffffffffffffull;
}

/* libunwind 1.6's DWARF_NUM_PRESERVED_REGS for AArch64 */
const unsigned int arch_unw_columns = 97;

/* pc, sp, x29, x30, x19-x28: sampler/image/arch-aarch64.h saves them so. */
void arch_unw_regs_saved(const uint64_t *saved, struct arch_unw_regs *r)
{
	static const int order[] = {
		UNW_AARCH64_PC, UNW_AARCH64_SP, UNW_AARCH64_X29,
		UNW_AARCH64_X30, UNW_AARCH64_X19, UNW_AARCH64_X20,
		UNW_AARCH64_X21, UNW_AARCH64_X22, UNW_AARCH64_X23,
		UNW_AARCH64_X24, UNW_AARCH64_X25, UNW_AARCH64_X26,
		UNW_AARCH64_X27, UNW_AARCH64_X28,
	};
	size_t i;

	memset(r, 0, sizeof(*r));
	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		r->v[order[i]] = arch_strip_pac(saved[i]);
		r->valid |= 1ull << order[i];
	}
}
