/*
 * 32-bit targets are refused before anything is read or injected
 * (proc/procinfo.c, used by every command).  This machine's kernel runs
 * no ia32 or x32 program ("Exec format error"), so the check is tested
 * on the ELF class and machine, and on this process as read from /proc.
 */
#include "proc/procinfo.h"

#include <criterion/criterion.h>
#include <elf.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

Test(abi, classes_and_machines)
{
	cr_assert_null(procinfo_foreign_abi(ELFCLASS64, EM_X86_64));
	cr_assert_null(procinfo_foreign_abi(ELFCLASS64, EM_AARCH64));
	cr_assert_null(procinfo_foreign_abi(0, 0), "unknown is not refused");
	cr_assert_str_eq(procinfo_foreign_abi(ELFCLASS32, EM_386),
			 "a 32-bit x86 (ia32) process");
	cr_assert_str_eq(procinfo_foreign_abi(ELFCLASS32, EM_X86_64),
			 "an x32 process");
	cr_assert_str_eq(procinfo_foreign_abi(ELFCLASS32, EM_ARM),
			 "a 32-bit process");
}

/* procinfo_read() of this (64-bit) test process fills class and machine. */
Test(abi, this_process_is_read_as_64_bit)
{
	struct procinfo pi;

	cr_assert_eq(procinfo_read(getpid(), &pi), 0);
	cr_assert_eq(pi.elf_class, ELFCLASS64);
	cr_assert_neq(pi.elf_machine, 0);
	cr_assert_null(procinfo_foreign_abi(pi.elf_class, pi.elf_machine));
}

/*
 * The main thread's stack pointer when this program began
 * (proc_start_stack()) is where the kernel put argc: every frame of the
 * main thread lies below it, the arguments and environment above.
 */
Test(abi, start_stack_is_where_argc_is)
{
	char cmdline[4096];
	uint64_t top = 0, here = (uint64_t)(uintptr_t)&top;
	size_t len = 0, i;
	long argc = 0;
	FILE *f = fopen("/proc/self/cmdline", "re");

	cr_assert_not_null(f);
	len = fread(cmdline, 1, sizeof(cmdline), f);
	fclose(f);
	cr_assert_lt(len, sizeof(cmdline), "a command line past 4 KiB");
	for (i = 0; i < len; i++)
		argc += !cmdline[i];
	cr_assert_eq(proc_start_stack(getpid(), &top), 0);
	/* criterion's workers are forks of its main: the same stack */
	cr_assert_gt(top, here, "start %#" PRIx64 " below a frame at %#"
		     PRIx64, top, here);
	cr_assert_eq(*(const long *)(uintptr_t)top, argc,
		     "the word at %#" PRIx64 " is not argc (%ld)", top, argc);
}
