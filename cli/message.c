/*
 * What memsnap says, and with which exit code: the one place that maps
 * an error (-errno from the modules) to an exit status (EXIT_* in
 * cli.h, documented in memsnap(1) and --help), and the texts more than
 * one command prints.
 */
#include "cli/cli.h"

#include "cli/progress.h"
#include "common/util.h"
#include "proc/diagnose.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

const char msg_no_syscall_code[] =
	"no code to borrow for a system call in the process (\"syscall; ret\" and a signal restorer; a static program without signal handlers has none)";

/* Messages carry names from the target (paths, process names): printed
 * through fputs_clean(), never raw to the terminal. */
static void vmessage(const char *head, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0), noinline, nonnull(2)));

static void vmessage(const char *head, const char *fmt, va_list ap)
{
	char buf[4096];

	progress_clear();
	vsnprintf(buf, sizeof(buf), fmt, ap);
	fputs(head, stderr);
	fputs_clean(buf, stderr);
	fputc('\n', stderr);
}

void error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage("memsnap: ", fmt, ap);
	va_end(ap);
}

void warning(const struct options *opt, const char *fmt, ...)
{
	va_list ap;

	if (opt->quiet)
		return;
	va_start(ap, fmt);
	vmessage("memsnap: warning: ", fmt, ap);
	va_end(ap);
}

int report_proc_error(pid_t pid, const char *what, int err)
{
	char why[512];

	switch (err) {
	case -ENOENT:
	case -ESRCH:
		error("pid %d: no such process", (int)pid);
		return exit_for(err, false);
	case -EACCES:
	case -EPERM:
		diagnose_access(pid, false, why, sizeof(why));
		error("pid %d: /proc/%d/%s: %s: %s", (int)pid, (int)pid, what,
		      strerror(-err), why);
		return exit_for(err, false);
	case -EMFILE:
	case -ENFILE: {
		struct rlimit rl = { 0 };

		getrlimit(RLIMIT_NOFILE, &rl);
		if (err == -ENFILE)
			error("pid %d: %s: the system is out of open files",
			      (int)pid, strerror(-err));
		else
			error("pid %d: %s in memsnap (ulimit -n is %llu; memsnap keeps one open per object file the process maps)",
			      (int)pid, strerror(-err),
			      (unsigned long long)rl.rlim_cur);
		return exit_for(err, false);
	}
	default:
		error("pid %d: /proc/%d/%s: %s", (int)pid, (int)pid, what,
		      strerror(-err));
		return exit_for(err, false);
	}
}

int exit_for(int rc, bool attaching)
{
	if (attaching && rc == -EOPNOTSUPP)
		return EXIT_UNSAFE; /* a thread refused: seccomp, shadow stack */
	switch (rc) {
	case -EOPNOTSUPP:
	case -ENOEXEC:
		return EXIT_NO_ALLOCATOR;
	case -EREMOTEIO:
		return EXIT_ALLOCATOR_ERROR;
	case -ESRCH:
	case -ENOENT:
	case -ECHILD:
		return EXIT_NO_PROCESS;
	case -EPERM:
	case -EACCES:
	case -EBUSY:
		return EXIT_PERMISSION;
	case -ETIMEDOUT:
		return EXIT_TIMEOUT;
	case -EINTR:
		return EXIT_INTERRUPTED;
	case -EAGAIN:
	case -EDEADLK:
		return EXIT_UNSAFE;
	default:
		return EXIT_FAILURE_OTHER;
	}
}
