/*
 * What memsnap says, and with which exit code: the one table from an
 * error's kind (common/diag.h) to an exit status (EXIT_* in cli.h,
 * documented in memsnap(1) and --help), and the texts more than one
 * command prints.
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

int fail(enum diag_kind kind, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage("memsnap: ", fmt, ap);
	va_end(ap);
	return diag_exit(kind);
}

void hint(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage("memsnap: hint: ", fmt, ap);
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
		return diag_exit(diag_kind_of(err));
	case -EACCES:
	case -EPERM:
		diagnose_access(pid, false, why, sizeof(why));
		error("pid %d: /proc/%d/%s: %s: %s", (int)pid, (int)pid, what,
		      strerror(-err), why);
		return diag_exit(diag_kind_of(err));
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
		return diag_exit(diag_kind_of(err));
	}
	default:
		error("pid %d: /proc/%d/%s: %s", (int)pid, (int)pid, what,
		      strerror(-err));
		return diag_exit(diag_kind_of(err));
	}
}

int diag_exit(enum diag_kind kind)
{
	static const int exit_of[] = {
		[DIAG_FAILED] = EXIT_FAILURE_OTHER,
		[DIAG_NO_PROCESS] = EXIT_NO_PROCESS,
		[DIAG_PERMISSION] = EXIT_PERMISSION,
		[DIAG_UNSUPPORTED] = EXIT_NO_ALLOCATOR,
		[DIAG_UNSAFE] = EXIT_UNSAFE,
		[DIAG_TIMEOUT] = EXIT_TIMEOUT,
		[DIAG_REFUSED] = EXIT_ALLOCATOR_ERROR,
		[DIAG_INTERRUPTED] = EXIT_INTERRUPTED,
		[DIAG_BAD_INPUT] = EXIT_BAD_INPUT,
		[DIAG_USAGE] = EXIT_USAGE,
	};

	return (unsigned int)kind < ARRAY_SIZE(exit_of) ? exit_of[kind]
							: EXIT_FAILURE_OTHER;
}

void dump_size_error(pid_t pid, uint64_t max)
{
	char b[32];

	human_bytes(max, b, sizeof(b));
	error("dump %d: the profile is larger than --max-size (%s); nothing was written",
	      (int)pid, b);
}
