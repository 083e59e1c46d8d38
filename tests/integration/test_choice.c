/*
 * Which thread memsnap borrows (DESIGN.md, "A dump, end to end", 6): an
 * idle thread before the main one, which often runs a server's main
 * loop, even when the first idle thread listed cannot be borrowed
 * (tests/fixtures/choice_target.c: its stack too small to call from).
 * The thread borrowed is read from --timings; the fixture is checked
 * unharmed after each call.
 */
#include "tests/lib/fault.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

static struct fixture fx = { .pid = -1 };

static void teardown(void)
{
	fixture_stop(&fx);
}

TestSuite(choice, .fini = teardown, .timeout = 120);

/* The tid of "tid N" in @r's --timings line, or 0. */
static int borrowed(const struct run *r)
{
	const char *p = strstr(r->err, "timings: pid ");
	int pid, tid;

	if (!p || sscanf(p, "timings: pid %d tid %d", &pid, &tid) != 2)
		return 0;
	return tid;
}

Test(choice, an_idle_thread_before_the_main_one)
{
	char path[PATH_MAX], pidstr[16];
	char *argv[] = { path, NULL };
	const char *args[] = { "--pid", pidstr, "--timings", "stats", NULL };
	int cramped, idle, i, rc;
	struct run r;

	fixture_path("choice-target", path, sizeof(path));
	rc = fixture_start(&fx, argv, NULL, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	cr_assert_eq(sscanf(fx.ready, "cramped=%d idle=%d", &cramped, &idle),
		     2, "%s", fx.ready);
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
	for (i = 0; i < 3; i++) {
		cr_assert_eq(run_memsnap(&r, args), 0);
		cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
		cr_expect_neq(borrowed(&r), (int)fx.pid,
			      "the main thread was borrowed: %s", r.err);
		cr_expect_neq(borrowed(&r), cramped, "%s", r.err);
		cr_expect_eq(borrowed(&r), idle, "%s", r.err);
		run_free(&r);
		assert_untouched(&fx, "after stats");
	}
}
