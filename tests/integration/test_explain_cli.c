/*
 * explain fails as stats does: the same exit code and one line on
 * stderr, nothing on stdout, for a process that is gone, a bad option,
 * and a process another tracer holds (where --no-attach still works).
 */
#include "test_explain_lib.h"
#include "../lib/fixture.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

static struct fixture fx = { .pid = -1 };
static bool seized;

static void teardown(void)
{
	explain_free_all();
	if (fx.pid > 0 && seized) {
		kill(fx.pid, SIGKILL);
		/* single-threaded: the leader's exit is ours to reap */
	}
	fixture_stop(&fx);
}

TestSuite(explain_cli, .fini = teardown, .timeout = 60);

/* `memsnap --pid @pid @cmd [@opt]`: exit code and stderr. */
static int run_cmd(const char *pid, const char *cmd, const char *opt,
		   char *err, size_t size)
{
	const char *args[] = { "--pid", pid, cmd, opt, NULL };
	struct run r;
	int status;

	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_str_empty(r.out, "%s %s printed on stdout:\n%s", cmd,
			    opt ? opt : "", r.out);
	cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1,
		     "%s %s: not one line on stderr: %s", cmd, opt ? opt : "",
		     r.err);
	snprintf(err, size, "%s", r.err);
	status = r.status;
	run_free(&r);
	return status;
}

/* explain and explain @opt fail as `stats` does, in the same words but
 * the command's name. */
static void fails_as_stats(const char *pid, const char *opt)
{
	char serr[512], eerr[512], want[600];
	const char *p;
	int s, e;

	s = run_cmd(pid, "stats", opt, serr, sizeof(serr));
	e = run_cmd(pid, "explain", opt, eerr, sizeof(eerr));
	cr_assert_neq(s, 0);
	cr_assert_eq(e, s, "explain exits %d, stats %d: %s", e, s, eerr);
	p = strstr(serr, "stats");
	if (p)
		snprintf(want, sizeof(want), "%.*sexplain%s", (int)(p - serr),
			 serr, p + 5);
	else
		snprintf(want, sizeof(want), "%s", serr);
	cr_assert_str_eq(eerr, want);
}

Test(explain_cli, gone_pid_and_bad_option)
{
	char pid[16];
	pid_t child = fork();

	cr_assert_geq(child, 0);
	if (!child)
		_exit(0);
	cr_assert_eq(waitpid(child, NULL, 0), child);
	snprintf(pid, sizeof(pid), "%d", (int)child);
	fails_as_stats(pid, NULL);
	fails_as_stats(pid, "--json");
	fails_as_stats("1", "--bogus");
}

Test(explain_cli, traced_target_refused_as_stats_but_no_attach_works)
{
	char path[PATH_MAX], pid[16];
	char *argv[] = { path, NULL };
	struct explain e;
	int64_t lo, hi;
	int rc, st;

	fixture_path("explain-heap-glibc", path, sizeof(path));
	rc = fixture_start(&fx, argv, NULL, 30000);
	cr_assert_eq(rc, 0, "%s", strerror(-rc));
	snprintf(pid, sizeof(pid), "%d", (int)fx.pid);
	cr_assert_eq(ptrace(PTRACE_SEIZE, fx.pid, 0, 0), 0, "%s",
		     strerror(errno));
	seized = true;

	fails_as_stats(pid, NULL);
	fails_as_stats(pid, "--json");
	explain_run(fx.pid, "--no-attach", &e, &lo, &hi);
	explain_assert_sound(&e, lo, hi, false);
	cr_assert_eq(waitpid(fx.pid, &st, WNOHANG | __WALL), 0,
		     "the fixture stopped: %#x", st);
	fixture_assert_healthy(&fx);

	cr_assert_eq(ptrace(PTRACE_INTERRUPT, fx.pid, 0, 0), 0);
	cr_assert_eq(waitpid(fx.pid, &st, __WALL), fx.pid);
	cr_assert_eq(ptrace(PTRACE_DETACH, fx.pid, 0, 0), 0);
	seized = false;
	fixture_assert_healthy(&fx);
	explain_free(&e);
}
