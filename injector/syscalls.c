/*
 * What every CPU's half shares: lookups in its table of syscalls a
 * thread sleeps in (arch_syscalls[]), and the synchronous signals.
 */
#include "injector/arch.h"

#include <signal.h>

int arch_syscall_score(long nr)
{
	size_t i;

	for (i = 0; i < arch_nsyscalls; i++)
		if (arch_syscalls[i].nr == nr)
			return arch_syscalls[i].score;
	return 0;
}

const char *arch_syscall_name(long nr)
{
	size_t i;

	for (i = 0; i < arch_nsyscalls; i++)
		if (arch_syscalls[i].nr == nr)
			return arch_syscalls[i].name;
	return NULL;
}

uint64_t arch_sync_signals(void)
{
	static const int sync[] = { SIGTRAP, SIGSEGV, SIGBUS, SIGILL, SIGFPE,
				    SIGSYS, SIGKILL, SIGSTOP };
	uint64_t m = 0;
	size_t i;

	for (i = 0; i < sizeof(sync) / sizeof(sync[0]); i++)
		m |= 1ull << (sync[i] - 1);
	return m;
}
