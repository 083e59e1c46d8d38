/*
 * What the engine knows of system calls on every CPU (syscalls.h): one
 * table of those a thread sleeps in, by this build's numbers, and the
 * synchronous signals.  A call a CPU lacks (AArch64 has no poll,
 * select, epoll_wait, pause or fork: glibc uses ppoll, pselect6,
 * epoll_pwait, clone) is left out by its #ifdef; what differs by CPU is
 * the arch's (arch_restart_score).
 */
#include "injector/syscalls.h"
#include "injector/arch.h"

#include <signal.h>
#include <stddef.h>
#include <sys/syscall.h>

struct rank {
	long nr;
	const char *name;
	int score;
};

/* Best first; the kernel restarts those above epoll's. */
static const struct rank ranks[] = {
	{ SYS_futex, "futex", 100 },
	{ SYS_nanosleep, "nanosleep", 100 },
	{ SYS_clock_nanosleep, "clock_nanosleep", 100 },
	/* scored by the arch: see syscall_score() */
	{ SYS_restart_syscall, "restart_syscall", 0 },
	{ SYS_read, "read", 90 },
	{ SYS_readv, "readv", 90 },
	{ SYS_recvfrom, "recvfrom", 90 },
	{ SYS_recvmsg, "recvmsg", 90 },
#ifdef SYS_poll
	{ SYS_poll, "poll", 90 },
#endif
	{ SYS_ppoll, "ppoll", 90 },
#ifdef SYS_select
	{ SYS_select, "select", 90 },
#endif
	{ SYS_pselect6, "pselect6", 90 },
	{ SYS_accept, "accept", 90 },
	{ SYS_accept4, "accept4", 90 },
	{ SYS_wait4, "wait4", 80 },
	{ SYS_waitid, "waitid", 80 },
#ifdef SYS_pause
	{ SYS_pause, "pause", 80 },
#endif
	{ SYS_rt_sigsuspend, "rt_sigsuspend", 60 },
	/* Never restarted by the kernel: memsnap turns their EINTR back
	 * into a restart, but prefers other threads. */
#ifdef SYS_epoll_wait
	{ SYS_epoll_wait, "epoll_wait", 50 },
#endif
	{ SYS_epoll_pwait, "epoll_pwait", 50 },
	{ SYS_epoll_pwait2, "epoll_pwait2", 50 },
	{ SYS_rt_sigtimedwait, "rt_sigtimedwait", -10 },
	{ SYS_write, "write", 40 },
	{ SYS_exit, "exit", -100 },
	{ SYS_exit_group, "exit_group", -100 },
	{ SYS_execve, "execve", -100 },
	{ SYS_clone, "clone", -50 },
	{ SYS_clone3, "clone3", -50 },
#ifdef SYS_fork
	{ SYS_fork, "fork", -50 },
#endif
#ifdef SYS_vfork
	{ SYS_vfork, "vfork", -100 },
#endif
};

static const struct rank *find(long nr)
{
	size_t i;

	for (i = 0; i < sizeof(ranks) / sizeof(ranks[0]); i++)
		if (ranks[i].nr == nr)
			return &ranks[i];
	return NULL;
}

int syscall_score(long nr)
{
	const struct rank *r = find(nr);

	if (nr == SYS_restart_syscall)
		return arch_restart_score;
	return r ? r->score : 0;
}

const char *syscall_name(long nr)
{
	const struct rank *r = find(nr);

	return r ? r->name : NULL;
}

uint64_t sync_signals(void)
{
	static const int sync[] = { SIGTRAP, SIGSEGV, SIGBUS, SIGILL, SIGFPE,
				    SIGSYS, SIGKILL, SIGSTOP };
	uint64_t m = 0;
	size_t i;

	for (i = 0; i < sizeof(sync) / sizeof(sync[0]); i++)
		m |= 1ull << (sync[i] - 1);
	return m;
}
