/*
 * The seccomp filter evaluator (injector/seccomp.c) on hand-written
 * classic BPF programs, the way libseccomp and systemd write them: check
 * the architecture, dispatch on the syscall number, look at an argument,
 * and return an action.  The integration suite (faults::seccomp_*) runs
 * the same kinds of filters in a real target.
 */
#include "injector/seccomp.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/syscall.h>

#define N(p) (sizeof(p) / sizeof((p)[0]))

static uint32_t run_nr(const struct sock_filter *f, size_t n, uint32_t arch,
		       int nr, uint64_t arg2)
{
	struct seccomp_data d = { .nr = nr, .arch = arch };

	d.args[2] = arg2;
	return seccomp_run(f, n, &d);
}

/* Wrong arch: kill; mmap with PROT_EXEC: EPERM; unknown: kill; else allow. */
static const struct sock_filter allow_list[] = {
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 0, 3),
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		 offsetof(struct seccomp_data, args[2])),
	BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x4, 0, 5),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_read, 3, 0),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_rt_sigprocmask, 2, 0),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_write, 1, 0),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};

Test(seccomp, allow_list_actions)
{
	const size_t n = N(allow_list);

	cr_assert_eq(run_nr(allow_list, n, AUDIT_ARCH_X86_64, SYS_read, 0),
		     SECCOMP_RET_ALLOW);
	cr_assert_eq(run_nr(allow_list, n, AUDIT_ARCH_X86_64, SYS_write, 0),
		     SECCOMP_RET_ALLOW);
	cr_assert_eq(run_nr(allow_list, n, AUDIT_ARCH_X86_64, SYS_mmap, 0x3),
		     SECCOMP_RET_ALLOW, "mmap without PROT_EXEC");
	cr_assert_eq(run_nr(allow_list, n, AUDIT_ARCH_X86_64, SYS_mmap, 0x5),
		     SECCOMP_RET_ERRNO | EPERM, "mmap(PROT_READ|PROT_EXEC)");
	cr_assert_eq(run_nr(allow_list, n, AUDIT_ARCH_X86_64, SYS_openat, 0),
		     SECCOMP_RET_KILL_PROCESS);
	cr_assert_eq(run_nr(allow_list, n, AUDIT_ARCH_X86_64, -1, 0),
		     SECCOMP_RET_KILL_PROCESS, "syscall -1");
	cr_assert_eq(run_nr(allow_list, n, AUDIT_ARCH_I386, SYS_read, 0),
		     SECCOMP_RET_KILL_PROCESS, "another arch");
}

Test(seccomp, scratch_memory_alu_and_x)
{
	/* A = nr; M[0] = A; A = (A + 1) & 0xff; X = A; A = M[0]; A == X-1 */
	static const struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_STMT(BPF_ST, 0),
		BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, 1),
		BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xff),
		BPF_STMT(BPF_MISC | BPF_TAX, 0),
		BPF_STMT(BPF_LD | BPF_MEM, 0),
		BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, 1),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_X, 0, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_STMT(BPF_RET | BPF_A, 0),
	};

	/* nr 7: A ends as 8, returned as the action (not ALLOW). */
	cr_assert_eq(run_nr(f, N(f), 0, 7, 0), 8);
	/* nr 255: X = 0 after the AND, A = 256: not equal -> TRAP */
	cr_assert_eq(run_nr(f, N(f), 0, 255, 0), SECCOMP_RET_TRAP);
}

Test(seccomp, what_the_kernel_would_refuse_is_answered_with_kill)
{
	static const struct sock_filter off_end[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0),
	};
	static const struct sock_filter bad_load[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 200),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	static const struct sock_filter div0[] = {
		BPF_STMT(BPF_ALU | BPF_DIV | BPF_K, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};

	cr_assert_eq(run_nr(off_end, 1, 0, 0, 0), SECCOMP_RET_KILL_PROCESS);
	cr_assert_eq(run_nr(bad_load, 2, 0, 0, 0), SECCOMP_RET_KILL_PROCESS);
	cr_assert_eq(run_nr(div0, 2, 0, 0, 0), SECCOMP_RET_KILL_PROCESS);
}
