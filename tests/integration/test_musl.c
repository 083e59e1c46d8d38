/*
 * musl programs (tests/fixtures/musl.mk).  musl's libc is also its
 * dynamic loader, where every blocked thread sits: only its dl* entry
 * points are fenced, so `call` works.  musl malloc has no control
 * functions: info and the allocator commands say so in one line.  A
 * static musl program without signal handlers has no signal restorer to
 * borrow: `call` refuses in one line.
 */
#include "tests/lib/fault.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

static struct fixture fx = { .pid = -1 };
static char pidstr[16];

static void teardown(void)
{
	fixture_stop(&fx);
}

TestSuite(musl, .fini = teardown, .timeout = 60);

static void start(const char *name)
{
	char path[PATH_MAX];
	char *argv[] = { path, NULL };
	int rc;

	fixture_path(name, path, sizeof(path));
	if (access(path, X_OK))
		cr_skip_test("fixture %s not built (musl-gcc missing: Debian's "
			     "musl-tools)", path);
	rc = fixture_start(&fx, argv, NULL, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
}

static void run3(struct run *r, const char *a, const char *b, const char *c)
{
	const char *args[] = { "--pid", pidstr, a, b, c, NULL };

	cr_assert_eq(run_memsnap(r, args), 0);
}

static void run(struct run *r, const char *a, const char *b)
{
	const char *args[] = { "--pid", pidstr, a, b, NULL };

	cr_assert_eq(run_memsnap(r, args), 0);
}

static void info_and_stats(void)
{
	char want[160];
	struct run r;

	run(&r, "info", NULL);
	cr_expect_eq(r.status, 5, "exit %d: %s", r.status, r.err);
	cr_expect_not_null(strstr(r.out, "malloc    musl malloc (no control functions)"),
			   "%s", r.out);
	snprintf(want, sizeof(want),
		 "memsnap: pid %s: musl malloc: no control functions (no statistics, trim or heap profile; `memsnap call` works)\n",
		 pidstr);
	cr_expect_str_eq(r.err, want);
	run_free(&r);
	run(&r, "stats", NULL);
	cr_expect_eq(r.status, 5, "exit %d: %s", r.status, r.err);
	snprintf(want, sizeof(want),
		 "memsnap: stats %s: musl malloc: no control functions (`memsnap call` works)\n",
		 pidstr);
	cr_expect_str_eq(r.err, want);
	run_free(&r);
}

Test(musl, dynamic_info_stats_and_call)
{
	char want[64];
	struct run r;

	start("musl-dyn");
	info_and_stats();
	run(&r, "call", "getpid");
	cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	snprintf(want, sizeof(want), "%s (signed %s, ", pidstr, pidstr);
	cr_expect_eq(strncmp(r.out, want, strlen(want)), 0, "%s", r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

Test(musl, static_info_stats_and_a_clear_refusal)
{
	struct run r;

	start("musl-static");
	info_and_stats();
	run3(&r, "call", "malloc", "0");
#if defined(__aarch64__)
	/* Every arm64 process has a signal restorer: the vdso's. */
	cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
#else
	/* Refused before anything runs: malloc(0) is never called. */
	cr_expect_eq(r.status, 5, "exit %d: %s", r.status, r.err);
	cr_expect_eq(count_lines(r.err), 1, "%s", r.err);
	cr_expect_not_null(strstr(r.err, "no code to borrow for a system call"),
			   "%s", r.err);
	cr_expect_null(strstr(r.err, "Exec format error"), "%s", r.err);
#endif
	run_free(&r);
	fixture_assert_healthy(&fx);
}
