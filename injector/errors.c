/*
 * What the engine's errors mean to the user: for each -errno the engine
 * returns, its kind (common/diag.h, which decides the exit status) and
 * the line that says what happened.  The engine chose those errnos, so
 * it states their meaning, once, here; a failure understood where it
 * happened (inj_fail()) carries its own kind and line, and no caller
 * reads a meaning into a number.
 */
#include "injector/engine.h"

#include "proc/diagnose.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char no_syscall_code[] =
	"no code to borrow for a system call in the process (\"syscall; ret\" and a signal restorer; a static program without signal handlers has none)";

static enum diag_kind kind_of(int rc)
{
	switch (rc) {
	case -EDEADLK:
	case -EAGAIN:
	case -EOPNOTSUPP:	/* a seccomp filter or a shadow stack */
		return DIAG_UNSAFE;
	case -ENOEXEC:
		return DIAG_UNSUPPORTED;
	case -EBUSY:		/* traced by another */
		return DIAG_PERMISSION;
	default:
		return diag_kind_of(rc);
	}
}

/*
 * @rc as @d: for the session of thread @tid (0: none yet) of @pid, whose
 * last circumstance is @detail ("" if none), and @line, the first reason
 * inject_open() gave ("" if none).
 */
static void compose(pid_t pid, pid_t tid, const char *detail,
		    const char *line, int rc, struct diag *d)
{
	char why[512];
	size_t size = sizeof(d->what);
	char *buf = d->what;

	d->kind = kind_of(rc);
	d->hint[0] = '\0';
	switch (rc) {
	case -EOPNOTSUPP:
		snprintf(buf, size, "%s; memsnap cannot call into this process safely",
			 line[0] ? line : detail[0] ? detail
				 : "CET shadow stacks are on");
		return;
	case -ESRCH:
	case -ENOENT:
		snprintf(buf, size, "%s",
			 detail[0] ? detail : "the process exited");
		return;
	case -EPERM:
	case -EACCES:
		if (diagnose_access(pid, true, why, sizeof(why)))
			snprintf(buf, size, "ptrace: %s: %s", strerror(-rc),
				 why);
		else
			snprintf(buf, size, "ptrace: %s%s%s", strerror(-rc),
				 line[0] ? ": " : "", line);
		return;
	case -EBUSY:
		snprintf(buf, size, "%s",
			 line[0]     ? line
			 : detail[0] ? detail
				     : "already traced");
		return;
	case -ETIMEDOUT:
		snprintf(buf, size, "the call did not finish in time: %s",
			 detail[0] ? detail
				   : "it goes on in the target, whose thread restores itself when the call returns");
		return;
	case -EINTR:
		snprintf(buf, size, "interrupted; the target is restored");
		return;
	case -EAGAIN:
		snprintf(buf, size,
			 "the process is stopped (job control); left stopped (`kill -CONT %d` resumes it)",
			 (int)pid);
		return;
	case -EDEADLK:
		snprintf(buf, size, "no thread was safe to call from%s%s",
			 line[0] ? ": " : "", line);
		return;
	case -ENOEXEC:
		snprintf(buf, size, "%s", no_syscall_code);
		return;
	case -EFAULT:
		snprintf(buf, size,
			 "the call faulted: %s; thread %d was restored, but what the function changed (an allocator's state) may be inconsistent",
			 detail[0] ? detail : "no detail", (int)tid);
		return;
	default:
		snprintf(buf, size, "%s%s%s", strerror(-rc),
			 detail[0] || line[0] ? ": " : "",
			 detail[0] ? detail : line);
		return;
	}
}

void inj_open_diag(pid_t pid, const struct inject_opts *o, int rc)
{
	char line[512] = "";

	if (!o->diag)
		return;
	if (o->why)
		snprintf(line, sizeof(line), "%.*s",
			 (int)strcspn(o->why, "\n"), o->why);
	compose(pid, 0, "", line, rc, o->diag);
}

void inject_diag_of(pid_t pid, int rc, struct diag *d)
{
	compose(pid, 0, "", "", rc, d);
}

void inject_diag(const struct inject_session *s, int rc, struct diag *d)
{
	if (rc && s->err_rc == rc && s->err_kind != INJ_KIND_OF_RC) {
		d->kind = (enum diag_kind)s->err_kind;
		snprintf(d->what, sizeof(d->what), "%s", s->detail);
		d->hint[0] = '\0';
		return;
	}
	compose(s->pid, s->t.tid, s->detail, "", rc, d);
}
