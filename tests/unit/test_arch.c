/*
 * The pure functions of the arch half (injector/arch/$(ARCH).c): what
 * they say about status texts, syscall numbers, code bytes and stack
 * words, with no process involved.  The expected values are the build
 * architecture's; another architecture's build skips what it does not
 * describe.
 */
#include "injector/arch.h"
#include "injector/syscalls.h"
#include "injector/unwind/core.h"
#include "sampler/layout.h"

#include <criterion/criterion.h>
#include <libunwind.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>

static bool is_aarch64(void)
{
	return !strcmp(arch_desc.name, "aarch64");
}

static void x86_64_only(void)
{
	if (strcmp(arch_desc.name, "x86_64"))
		cr_skip_test("expected values for x86_64; this build is %s",
			     arch_desc.name);
}

Test(arch, desc_is_consistent)
{
	cr_assert_not_null(arch_desc.name);
	cr_assert_gt(arch_desc.syscall_insn_len, 0);
	cr_assert_gt(arch_desc.stack_align, 0);
	cr_assert_eq(arch_desc.stack_align & (arch_desc.stack_align - 1), 0,
		     "a power of two");
	cr_assert_eq((arch_desc.red_zone + arch_desc.pc_slot) %
			     arch_desc.stack_align, 0,
		     "frame_top() keeps the stack aligned");
	cr_assert_leq(arch_stub_done_pc, arch_stub_len);
	cr_assert_gt(arch_helpers_len, arch_helper_off[ARCH_HELPER_CHAIN]);
}

/* /proc/PID/task/TID/status as kernels print it, around one line. */
static const char *status_with(const char *line)
{
	static char buf[512];

	snprintf(buf, sizeof(buf),
		 "Name:\tredis-server\nState:\tS (sleeping)\nTgid:\t42\n%s"
		 "SigBlk:\t0000000000000000\nSeccomp:\t0\n", line);
	return buf;
}

Test(arch, shadow_stack_is_refused_only_when_on)
{
	char why[96] = "";

	x86_64_only();
	cr_assert(arch_thread_refused(
		status_with("x86_Thread_features:\tshstk wrss\n"), why,
		sizeof(why)));
	cr_assert_str_eq(why, "CET shadow stack enabled");
	cr_assert_not(arch_thread_refused(status_with(""), why, sizeof(why)),
		      "no feature line: a kernel without CET");
	cr_assert_not(arch_thread_refused(
		status_with("x86_Thread_features:\t\n"
			    "x86_Thread_features_locked:\tshstk\n"),
		why, sizeof(why)),
		      "locked, not enabled");
	cr_assert_not(arch_thread_refused(
		status_with("x86_Thread_features:\twrss\n"), why,
		sizeof(why)));
}

/* epoll_wait, or epoll_pwait where the CPU has no epoll_wait */
#ifdef SYS_epoll_wait
#define SYS_EPOLL SYS_epoll_wait
#else
#define SYS_EPOLL SYS_epoll_pwait
#endif

Test(arch, syscall_scores_prefer_restartable_sleeps)
{
	cr_assert_gt(syscall_score(SYS_futex),
		     syscall_score(SYS_EPOLL),
		     "epoll_wait needs memsnap's own restart");
	cr_assert_gt(syscall_score(SYS_EPOLL), 0);
	cr_assert_lt(syscall_score(SYS_rt_sigtimedwait), 0);
	cr_assert_eq(syscall_score(99999), 0, "unknown");
	cr_assert_str_eq(syscall_name(SYS_futex), "futex");
}

Test(arch, return_addresses_follow_calls)
{
	/* the 8 bytes before a return address */
	static const unsigned char rel32[8] = { 0x90, 0x90, 0x90, 0xe8,
						0x10, 0x20, 0x30, 0x40 };
	static const unsigned char via_rax[8] = { 0x90, 0x90, 0x90, 0x90,
						  0x90, 0x90, 0xff, 0xd0 };
	static const unsigned char via_mem[8] = { 0x90, 0x90, 0x90, 0x90,
						  0x90, 0xff, 0x50, 0x08 };
	static const unsigned char no_call[8] = { 0x48, 0x89, 0xc7, 0x48,
						  0x89, 0xde, 0x31, 0xc0 };

	x86_64_only();
	cr_assert(arch_may_be_call_site(rel32), "call rel32");
	cr_assert(arch_may_be_call_site(via_rax), "call *%%rax");
	cr_assert(arch_may_be_call_site(via_mem), "call *8(%%rax)");
	cr_assert_not(arch_may_be_call_site(no_call));
}

/* AArch64's shadow stack shows in its regset, not in status. */
Test(arch, gcs_is_refused_only_when_on)
{
	uint64_t on[3] = { 1, 0, 0x7fff0000 }, off[3] = { 0, 1, 0 };
	char why[96] = "";

	if (strcmp(arch_desc.name, "aarch64")) {
		cr_assert_not(arch_regset_refused(0x410, on, sizeof(on), why,
						  sizeof(why)),
			      "no GCS on %s", arch_desc.name);
		return;
	}
	cr_assert(arch_regset_refused(0x410, on, sizeof(on), why,
				      sizeof(why)));
	cr_assert_str_eq(why, "GCS shadow stack enabled");
	cr_assert_not(arch_regset_refused(0x410, off, sizeof(off), why,
					  sizeof(why)), "locked, not enabled");
	cr_assert_not(arch_regset_refused(0x410, on, 4, why, sizeof(why)),
		      "short regset");
	cr_assert_not(arch_regset_refused(0x405, on, sizeof(on), why,
					  sizeof(why)), "another regset");
}

/* Stack words compare as addresses without pointer-authentication bits. */
Test(arch, pac_bits_are_stripped)
{
	uint64_t user = 0x00007fff12345678ull;

	cr_assert_eq(arch_strip_pac(user), user, "a plain address stays");
	if (!strcmp(arch_desc.name, "aarch64")) {
		cr_assert_eq(arch_strip_pac(0x002a7fff12345678ull), user);
		cr_assert_eq(arch_strip_pac(0x7f2a7fff12345678ull), user,
			     "with a top byte too");
	} else {
		cr_assert_eq(arch_strip_pac(0x002a7fff12345678ull),
			     0x002a7fff12345678ull, "no PAC on %s",
			     arch_desc.name);
	}
}

Test(arch, signal_frames_and_signals)
{
	uint64_t sync = sync_signals();

	x86_64_only();
	cr_assert(arch_sigframe_marker(0x002b000000000033ull));
	cr_assert_not(arch_sigframe_marker(0x33));
	cr_assert(sync & (1ull << (SIGSEGV - 1)));
	cr_assert(sync & (1ull << (SIGSYS - 1)));
	cr_assert_not(sync & (1ull << (SIGINT - 1)));
}

/* The AArch64 half's pure functions, on an AArch64 build. */
Test(arch, aarch64_call_sites_scores_and_frames)
{
	/* the 8 bytes before a return address: the last 4 the call */
	static const unsigned char bl[8] = { 0x1f, 0x20, 0x03, 0xd5,
					     0x10, 0x00, 0x00, 0x94 };
	static const unsigned char blr_x3[8] = { 0x1f, 0x20, 0x03, 0xd5,
						 0x60, 0x00, 0x3f, 0xd6 };
	static const unsigned char blraaz_x9[8] = { 0x1f, 0x20, 0x03, 0xd5,
						    0x3f, 0x09, 0x3f, 0xd6 };
	static const unsigned char add[8] = { 0x1f, 0x20, 0x03, 0xd5,
					      0x00, 0x04, 0x00, 0x91 };
	uint64_t fpsimd_head = 528ull << 32 | 0x46508001u;

	if (!is_aarch64())
		cr_skip_test("expected values for aarch64; this build is %s",
			     arch_desc.name);
	cr_assert(arch_may_be_call_site(bl), "bl");
	cr_assert(arch_may_be_call_site(blr_x3), "blr x3");
	cr_assert(arch_may_be_call_site(blraaz_x9), "blraaz x9");
	cr_assert_not(arch_may_be_call_site(add), "add x0, x0, #1");
	cr_assert(arch_sigframe_marker(fpsimd_head), "an FPSIMD record");
	cr_assert_not(arch_sigframe_marker(0x46508001u));
	cr_assert_gt(syscall_score(SYS_futex),
		     syscall_score(SYS_epoll_pwait));
	cr_assert_gt(syscall_score(SYS_ppoll), 0);
	cr_assert_lt(syscall_score(SYS_restart_syscall),
		     syscall_score(SYS_nanosleep),
		     "rt_sigreturn would cut a restarted sleep short");
	cr_assert_eq(arch_desc.red_zone, 0);
	cr_assert_eq(arch_desc.return_pop, 0);
	cr_assert_eq(arch_desc.syscall_insn_len, 4);
}

/*
 * A sampler record's registers reach the unwinder as the registers they
 * are: the slots the image stores by name (sampler/layout.h) and the
 * numbers the host gives them are libunwind's for those registers; a
 * number past the unwinder's is left out.
 */
Test(arch, sampler_registers_reach_the_unwinder_by_name)
{
	static const unsigned char nums[SAMPLER_REGS_SAVED] = SAMPLER_REG_NUMS;
	static const struct { int slot, unw; } want[] = {
#if defined(__x86_64__)
		{ SAMPLER_REG_PC, UNW_X86_64_RIP }, { SAMPLER_REG_SP, UNW_X86_64_RSP },
		{ SAMPLER_REG_RBP, UNW_X86_64_RBP }, { SAMPLER_REG_RBX, UNW_X86_64_RBX },
		{ SAMPLER_REG_R12, UNW_X86_64_R12 }, { SAMPLER_REG_R13, UNW_X86_64_R13 },
		{ SAMPLER_REG_R14, UNW_X86_64_R14 }, { SAMPLER_REG_R15, UNW_X86_64_R15 },
#elif defined(__aarch64__)
		{ SAMPLER_REG_PC, UNW_AARCH64_PC }, { SAMPLER_REG_SP, UNW_AARCH64_SP },
		{ SAMPLER_REG_X29, UNW_AARCH64_X29 }, { SAMPLER_REG_X30, UNW_AARCH64_X30 },
		{ SAMPLER_REG_X19, UNW_AARCH64_X19 }, { SAMPLER_REG_X20, UNW_AARCH64_X20 },
		{ SAMPLER_REG_X21, UNW_AARCH64_X21 }, { SAMPLER_REG_X22, UNW_AARCH64_X22 },
		{ SAMPLER_REG_X23, UNW_AARCH64_X23 }, { SAMPLER_REG_X24, UNW_AARCH64_X24 },
		{ SAMPLER_REG_X25, UNW_AARCH64_X25 }, { SAMPLER_REG_X26, UNW_AARCH64_X26 },
		{ SAMPLER_REG_X27, UNW_AARCH64_X27 }, { SAMPLER_REG_X28, UNW_AARCH64_X28 },
#endif
	};
	const unsigned char past[1] = { ARCH_UNW_NREGS };
	uint64_t v[SAMPLER_NREGS];
	struct arch_unw_regs r;
	size_t i;

	cr_assert_eq(sizeof(want) / sizeof(want[0]), SAMPLER_REGS_SAVED);
	for (i = 0; i < SAMPLER_NREGS; i++)
		v[i] = 0x1000 + i;
	unwind_regs_numbered(v, nums, SAMPLER_REGS_SAVED, &r);
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		cr_assert(r.valid >> want[i].unw & 1, "slot %d not given",
			  want[i].slot);
		cr_assert_eq(r.v[want[i].unw], 0x1000u + (unsigned)want[i].slot,
			     "slot %d given as register %d", want[i].slot,
			     want[i].unw);
	}
	cr_assert_eq(__builtin_popcountll(r.valid), SAMPLER_REGS_SAVED);
	unwind_regs_numbered(v, past, 1, &r);
	cr_assert_eq(r.valid, 0);
}
