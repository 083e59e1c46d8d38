/*
 * thread_dying() (proc/triage.c): what the engine asks after a ptrace
 * request failed with ESRCH, to tell a thread killed by an execve or an
 * exit elsewhere from one it must still restore.
 */
#include "proc/triage.h"

#include <criterion/criterion.h>

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

Test(triage, thread_dying_tells_live_zombie_and_gone)
{
	siginfo_t si;
	pid_t child;

	cr_assert_eq(thread_dying(getpid(), gettid()), 0, "this thread");
	child = fork();
	cr_assert_geq(child, 0);
	if (!child)
		_exit(0);
	/* a zombie until reaped: wait for its exit, not reaping it */
	cr_assert_eq(waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT), 0);
	cr_assert_eq(thread_dying(child, child), 1, "a zombie");
	cr_assert_eq(waitpid(child, NULL, 0), child);
	cr_assert_eq(thread_dying(child, child), 1, "a pid that is gone");
	cr_assert_eq(thread_dying(getpid(), 0x7ffffff0), 1, "no such thread");
}
