/*
 * What memsnap says, and with which exit code: the one table from an
 * error's kind (common/diag.h) to an exit status (EXIT_* in cli.h,
 * documented in memsnap(1) and --help), the texts more than one
 * command prints, and the one place where the error of a session
 * (cli/session.h), which the layer that failed named (inject_diag(),
 * alloc_diag()), is printed: target_diag(), target_error().
 */
#include "cli/cli.h"

#include "cli/progress.h"
#include "cli/session.h"
#include "common/util.h"
#include "proc/diagnose.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Messages carry names from the target (paths, process names): printed
 * through fputs_clean(), never raw to the terminal. */
static void vmessage(const char *head, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0), noinline, nonnull(2)));

static char *captured;
static size_t captured_size;

void messages_capture(char *buf, size_t size)
{
	captured = size ? buf : NULL;
	captured_size = size;
	if (captured)
		captured[0] = '\0';
}

static void vmessage(const char *head, const char *fmt, va_list ap)
{
	char buf[4096];

	if (captured) {
		if (!captured[0])
			vsnprintf(captured, captured_size, fmt, ap);
		return;
	}
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

/* "memsnap: " + the message + ": " + what @err means. */
static void verror(int err, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

static void verror(int err, const char *fmt, va_list ap)
{
	char buf[4096];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	error("%s: %s", buf, strerror(err < 0 ? -err : err));
}

void error_errno(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verror(err, fmt, ap);
	va_end(ap);
}

int fail_errno(enum diag_kind kind, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verror(err, fmt, ap);
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

static void voice_warning_line(void *arg, const char *line)
{
	warning(arg, "%s", line);
}

static void voice_error_line(void *arg, const char *line)
{
	(void)arg;
	error("%s", line);
}

static void voice_progress_line(void *arg, const char *line)
{
	(void)arg;
	if (line)
		progress_set("%s", line);
	else
		progress_clear();
}

struct voice cli_voice(const struct options *opt)
{
	return (struct voice){
		.warning = voice_warning_line,
		.error = voice_error_line,
		.progress = voice_progress_line,
		.arg = (void *)opt,
	};
}

void note(const struct options *opt, const char *fmt, ...)
{
	va_list ap;

	if (opt->quiet)
		return;
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
	struct diag d;

	diagnose_proc_read(pid, what, err, &d);
	return fail(d.kind, "%s", d.what);
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

/* Has the line [@p, @p + @len) come before @p in @text? */
static bool seen_line(const char *text, const char *p, size_t len)
{
	const char *q = text;

	while (q < p) {
		size_t n = strcspn(q, "\n");

		if (n == len && !strncmp(q, p, len))
			return true;
		q += n + (q[n] == '\n');
	}
	return false;
}

/* "name+0xoff (libfoo.so)", "libfoo.so+0xoff", "[memsnap-stub]" or
 * "" for @pc. */
static void describe_pc(const struct target *t, uint64_t pc, char *buf,
			size_t size)
{
	struct symbol sym;
	const char *base = NULL;

	/* first: the page may sit in a hole of an object's range (between
	 * ld.so's 64 KiB-aligned segments on arm64) */
	if (t->s && alloc_pc_in_stub(t->s, pc)) {
		snprintf(buf, size, "[memsnap-stub]");
		return;
	}
	if (!objects_symbolize(t->os, pc, &sym))
		base = path_base(sym.obj->path);
	if (base && sym.name)
		snprintf(buf, size, "%s+0x%" PRIx64 " (%s)", sym.name,
			 sym.offset, base);
	else if (base)
		snprintf(buf, size, "%s+0x%" PRIx64, base, sym.offset);
	else
		buf[0] = '\0';
}

/* Line @p (@n bytes) of the engine's reasons into @buf; one that names
 * an address ("... at 0x7f...") is followed by what is there. */
static void reason_line(const struct target *t, const char *p, size_t n,
			char *buf, size_t size)
{
	const char *at = memmem(p, n, " at 0x", 6);
	char sym[300] = "";

	if (at)
		describe_pc(t, strtoull(at + 4, NULL, 16), sym, sizeof(sym));
	snprintf(buf, size, "%.*s%s%s", (int)n, p, sym[0] ? ": " : "", sym);
}

/* The lines of @text (inject_open's reasons) after the first, which the
 * error line already holds, each once, indented. */
static void print_reasons(const struct target *t, const char *text)
{
	const char *p = text;

	while (*p) {
		size_t n = strcspn(p, "\n");
		char line[600];

		if (p != text && n && !seen_line(text, p, n)) {
			reason_line(t, p, n, line, sizeof(line));
			error("  %s", line);
		}
		p += n + (p[n] == '\n');
	}
}

void target_diag(const struct target *t, int rc, struct diag *d)
{
	char line[sizeof(d->what)];

	if (t->s) {
		alloc_diag(t->s, rc, d);
	} else if (rc && rc == t->open_rc) {
		*d = t->open_diag;
	} else {
		inject_diag_of(t->pi.pid, rc, d);	/* after the session */
	}
	/* what is at the address the line names, which only the session's
	 * symbols know */
	reason_line(t, d->what, strlen(d->what), line, sizeof(line));
	snprintf(d->what, sizeof(d->what), "%s", line);
}

/* The borrowed thread's stack after a timeout or a fault. */
static void print_stack(const struct target *t)
{
	uint64_t pcs[32];
	size_t n, i;

	if (!t->s)
		return;
	n = alloc_backtrace(t->s, pcs, 32);
	if (n)
		error("thread %d was at:", (int)t->tid);
	for (i = 0; i < n; i++) {
		char sym[300];

		describe_pc(t, pcs[i], sym, sizeof(sym));
		error("  #%zu 0x%" PRIx64 "%s%s", i, pcs[i], sym[0] ? " " : "",
		      sym);
	}
}

int target_error(const struct target *t, const char *cmd, int rc)
{
	struct diag d;

	target_diag(t, rc, &d);
	error("%s %d: %s", cmd, (int)t->pi.pid, d.what);
	if (d.hint[0])
		hint("%s", d.hint);
	/* Every refused thread, or where the call was stuck; not after a
	 * world stop found no safe moment (-EBUSY): the threads refused
	 * before the borrow are not why. */
	if ((rc == -ETIMEDOUT || (d.kind == DIAG_UNSAFE && rc != -EBUSY)) &&
	    strchr(t->why, '\n'))
		print_reasons(t, t->why);
	if (rc == -ETIMEDOUT || rc == -EFAULT)
		print_stack(t);
	return diag_exit(d.kind);
}
