/*
 * common/sandbox.h's options: the calls one user of the sandbox allows
 * beside the fixed list (report's parser reads the files memsnap hands
 * it), each whatever its arguments, only with listed values of one
 * argument, or failing with an errno; its limits; and the wait for its
 * end.  The fixed list itself is test_sandbox.c's.
 */
#include "common/sandbox.h"
#include "common/seqpacket.h"

#include "injector/arch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

static int start(struct sandbox *sb, const struct sandbox_opts *o,
		 int (*serve)(int, void *), void *arg)
{
	int rc = sandbox_start_with(sb, arch_audit, o, NULL, serve, arg);

	cr_assert_eq(rc, 0, "sandbox_start_with: %s", strerror(-rc));
	return sb->fd;
}

/* How the child ended (it must end within 10 s). */
static int end_of(struct sandbox *sb)
{
	cr_assert(sandbox_wait(sb, 10000), "the child did not end");
	return sb->status;
}

static void assert_exit(struct sandbox *sb, int code, const char *what)
{
	int st = end_of(sb);

	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == code,
		  "%s: status 0x%x, not exit %d", what, st, code);
	sandbox_stop(sb);
}

static void assert_killed(struct sandbox *sb, int sig, const char *what)
{
	int st = end_of(sb);

	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == sig,
		  "%s: status 0x%x, not killed by %d", what, st, sig);
	sandbox_stop(sb);
}

/* ---- calls --------------------------------------------------------------- */

static int call_getppid(int fd, void *arg)
{
	(void)fd;
	(void)arg;
	return syscall(SYS_getppid) > 0 ? 0 : 9;
}

/* Listed: allowed; the fixed list alone still kills it. */
Test(sandbox_calls, a_listed_call_is_allowed_and_only_there)
{
	static const struct sandbox_call calls[] = {
		{ .nr = SYS_getppid, .arg = -1 },
	};
	struct sandbox_opts o = { .calls = calls, .ncalls = LEN(calls) };
	struct sandbox sb;

	start(&sb, &o, call_getppid, NULL);
	assert_exit(&sb, 0, "getppid listed");
	start(&sb, NULL, call_getppid, NULL);
	assert_killed(&sb, SIGSYS, "getppid, with the fixed list");
}

static int fcntl_cmd(int fd, void *arg)
{
	return fcntl(fd, *(int *)arg) >= 0 ? 0 : 9;
}

/* fcntl(F_GETFD) listed: F_GETFD runs, F_SETOWN kills. */
Test(sandbox_calls, an_argument_value_not_listed_kills)
{
	static const struct sandbox_call calls[] = {
		{ .nr = SYS_fcntl, .arg = 1, .nok = 2,
		  .ok = { F_DUPFD_CLOEXEC, F_GETFD } },
	};
	struct sandbox_opts o = { .calls = calls, .ncalls = LEN(calls) };
	struct sandbox sb;
	int getfd = F_GETFD, getown = F_GETOWN;

	start(&sb, &o, fcntl_cmd, &getfd);
	assert_exit(&sb, 0, "fcntl(F_GETFD)");
	start(&sb, &o, fcntl_cmd, &getown);
	assert_killed(&sb, SIGSYS, "fcntl(F_GETOWN)");
}

static int try_readlink(int fd, void *arg)
{
	char buf[64];
	int e;

	(void)arg;
	if (readlink("/proc/self/exe", buf, sizeof(buf)) >= 0)
		return 8;
	e = errno;
	return write(fd, &e, sizeof(e)) == sizeof(e) ? 0 : 9;
}

/* A call that fails instead: the child learns the errno and goes on. */
Test(sandbox_calls, a_failing_call_fails_with_its_errno)
{
	static const struct sandbox_call calls[] = {
#ifdef SYS_readlink
		{ .nr = SYS_readlink, .fail = EACCES },
#endif
		{ .nr = SYS_readlinkat, .fail = EACCES },
	};
	struct sandbox_opts o = { .calls = calls, .ncalls = LEN(calls) };
	struct sandbox sb;
	int e = 0;
	int fd = start(&sb, &o, try_readlink, NULL);

	cr_assert_eq(read(fd, &e, sizeof(e)), (ssize_t)sizeof(e));
	cr_assert_eq(e, EACCES, "errno %d", e);
	assert_exit(&sb, 0, "readlink");
}

/* Calls of the kind report's parser is given (cli/report_box.c). */
static const struct sandbox_call reader_calls[] = {
	{ .nr = SYS_close, .arg = -1 },
	{ .nr = SYS_newfstatat, .arg = -1 },
	{ .nr = SYS_pread64, .arg = -1 },
	{ .nr = SYS_recvmsg, .arg = -1 },
	{ .nr = SYS_sendmsg, .arg = -1 },
	{ .nr = SYS_getrandom, .arg = -1 },
	{ .nr = SYS_sysinfo, .arg = -1 },
	{ .nr = SYS_fcntl, .arg = 1, .nok = 2,
	  .ok = { F_DUPFD_CLOEXEC, F_GETFD } },
#ifdef SYS_readlink
	{ .nr = SYS_readlink, .fail = EACCES },
#endif
	{ .nr = SYS_readlinkat, .fail = EACCES },
};

static int try_open(int fd, void *arg)
{
	(void)fd;
	(void)arg;
	return open("/etc/hostname", O_RDONLY) >= 0 ? 0 : 9;
}

static int try_openat(int fd, void *arg)
{
	(void)fd;
	(void)arg;
	return syscall(SYS_openat, AT_FDCWD, "/etc/hostname", O_RDONLY) >= 0
		       ? 0 : 9;
}

static int try_socket(int fd, void *arg)
{
	(void)fd;
	(void)arg;
	return socket(AF_UNIX, SOCK_STREAM, 0) >= 0 ? 0 : 9;
}

static int try_kill(int fd, void *arg)
{
	(void)fd;
	return syscall(SYS_kill, *(pid_t *)arg, 0) ? 9 : 0;
}

static int try_exec(int fd, void *arg)
{
	char *argv[] = { (char *)"/bin/true", NULL };

	(void)fd;
	(void)arg;
	execv(argv[0], argv);
	return 9;
}

/* With the reader's calls the child still opens, connects, signals and
 * runs nothing. */
Test(sandbox_calls, a_reader_opens_connects_signals_runs_nothing)
{
	static int (*const tries[])(int, void *) = {
		try_open, try_openat, try_socket, try_kill, try_exec,
	};
	struct sandbox_opts o = { .calls = reader_calls,
				  .ncalls = LEN(reader_calls) };
	struct sandbox sb;
	pid_t me = getpid();
	size_t i;

	for (i = 0; i < LEN(tries); i++) {
		start(&sb, &o, tries[i], &me);
		assert_killed(&sb, SIGSYS, "a forbidden call");
	}
}

Test(sandbox_calls, too_many_calls_or_values_are_refused)
{
	static struct sandbox_call many[SANDBOX_CALLS_MAX + 1];
	static const struct sandbox_call five[] = {
		{ .nr = SYS_fcntl, .arg = 1, .nok = 5 },
	};
	struct sandbox_opts o = { .calls = many, .ncalls = LEN(many) };
	struct sandbox sb;
	size_t i;

	for (i = 0; i < LEN(many); i++)
		many[i] = (struct sandbox_call){ .nr = SYS_getppid, .arg = -1 };
	cr_assert_eq(sandbox_start_with(&sb, arch_audit, &o, NULL,
					call_getppid, NULL), -EINVAL);
	cr_assert_eq(sb.pid, 0);
	o = (struct sandbox_opts){ .calls = five, .ncalls = 1 };
	cr_assert_eq(sandbox_start_with(&sb, arch_audit, &o, NULL,
					call_getppid, NULL), -EINVAL);
	/* the most there may be: accepted, and the filter holds them */
	o = (struct sandbox_opts){ .calls = many,
				   .ncalls = SANDBOX_CALLS_MAX };
	start(&sb, &o, call_getppid, NULL);
	assert_exit(&sb, 0, "getppid listed 32 times");
}

/* ---- limits -------------------------------------------------------------- */

#define PASSED 32

/* Take PASSED descriptors and keep them all: how many came. */
static int hold(int fd, void *arg)
{
	int n = 0, i;

	(void)arg;
	for (i = 0; i < PASSED; i++) {
		char c;
		int got;

		if (seqpacket_recv(fd, &c, 1, &got) == 1 && got >= 0)
			n++;
	}
	return write(fd, &n, sizeof(n)) == sizeof(n) ? 0 : 9;
}

/* @files makes room for the descriptors memsnap hands the child. */
Test(sandbox_calls, the_child_holds_the_files_it_is_given)
{
	struct sandbox_opts o = { .calls = reader_calls,
				  .ncalls = LEN(reader_calls), .files = 256 };
	struct sandbox sb;
	int fd = start(&sb, &o, hold, NULL), i, n = 0;
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

	cr_assert_geq(null, 0);
	for (i = 0; i < PASSED; i++)
		cr_assert_eq(seqpacket_send(fd, "x", 1, null, 0), 0);
	close(null);
	cr_assert_eq(read(fd, &n, sizeof(n)), (ssize_t)sizeof(n));
	cr_assert_eq(n, PASSED, "the child could hold %d of %d", n, PASSED);
	assert_exit(&sb, 0, "holding");
}

static int hog(int fd, void *arg)
{
	char *p = malloc(2 * SANDBOX_MEMORY);

	(void)arg;
	return write(fd, p ? "got" : "nomem", p ? 3 : 5) > 0 ? 0 : 3;
}

/* SANDBOX_NO_LIMIT: no RLIMIT_AS (report's libdw maps whole files). */
Test(sandbox_calls, no_address_space_limit_when_asked)
{
	struct sandbox_opts o = { .memory = SANDBOX_NO_LIMIT };
	struct sandbox sb;
	char buf[16] = "";
	int fd;

#if defined(__SANITIZE_ADDRESS__)
	cr_skip_test("AddressSanitizer needs terabytes of address space: "
		     "the child has no RLIMIT_AS in this build anyway");
#endif
	fd = start(&sb, &o, hog, NULL);
	cr_assert_gt(read(fd, buf, sizeof(buf) - 1), 0);
	cr_assert_str_eq(buf, "got");
	assert_exit(&sb, 0, "hog");
}

/* ---- its end ------------------------------------------------------------- */

static int wait_for_eof(int fd, void *arg)
{
	char c;

	(void)arg;
	while (read(fd, &c, 1) > 0)
		;
	return 5;
}

/* sandbox_wait(): false while it runs, true and the status once it has
 * ended. */
Test(sandbox_calls, wait_gives_the_end_or_gives_up)
{
	struct sandbox sb;

	start(&sb, NULL, wait_for_eof, NULL);
	cr_assert_not(sandbox_wait(&sb, 50), "it ended by itself");
	shutdown(sb.fd, SHUT_WR);
	assert_exit(&sb, 5, "after EOF");
}
