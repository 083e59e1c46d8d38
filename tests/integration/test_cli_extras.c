/*
 * The parts of the command line that make memsnap pleasant: the progress
 * line (only on a terminal, never with -q), -V's feature list, --json
 * on dump and report.
 */
#include "../lib/fixture.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct fixture fx = { .pid = -1 };

static void teardown(void)
{
	fixture_stop(&fx);
}

TestSuite(cli_extras, .fini = teardown, .timeout = 60);

static void start(const char *name)
{
	char path[PATH_MAX];
	char *argv[] = { path, NULL };

	fixture_path(name, path, sizeof(path));
	cr_assert_eq(fixture_start(&fx, argv, NULL, 10000), 0);
}

/*
 * `memsnap ... call sleep 2` under a pseudo-terminal (util-linux
 * script): the call takes two seconds, so the progress line shows up,
 * and it is wiped before the result.  With -q, or with stderr not a
 * terminal, there is none.
 */
Test(cli_extras, progress_line_on_a_terminal_only)
{
	char cmd[PATH_MAX * 2];
	const char *bin = getenv("MEMSNAP_BIN");
	struct run r;

	if (access("/usr/bin/script", X_OK))
		cr_skip_test("script(1) from util-linux is not installed");
	start("alloc-glibc");
	snprintf(cmd, sizeof(cmd),
		 "script -qec '%s --pid %d call sleep 2' /dev/null", bin,
		 (int)fx.pid);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	cr_assert_not_null(strstr(r.out, "memsnap: calling sleep in pid"),
			   "%s", r.out);
	/* wiped: the result comes after an erase-line sequence */
	cr_assert_not_null(strstr(r.out, "\r\033[K0 (signed 0"), "%s", r.out);
	run_free(&r);

	snprintf(cmd, sizeof(cmd),
		 "script -qec '%s -q --pid %d call sleep 2' /dev/null", bin,
		 (int)fx.pid);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0);
	cr_assert_null(strstr(r.out, "calling sleep"), "%s", r.out);
	run_free(&r);

	/* not a terminal: run_memsnap captures stderr in a pipe */
	{
		char pid[16];
		const char *args[] = { "--pid", pid, "call", "sleep", "2",
				       NULL };

		snprintf(pid, sizeof(pid), "%d", (int)fx.pid);
		cr_assert_eq(run_memsnap(&r, args), 0);
		cr_assert_eq(r.status, 0, "%s", r.err);
		cr_assert_str_empty(r.err);
		run_free(&r);
	}
	fixture_assert_healthy(&fx);
}

Test(cli_extras, version_lists_features)
{
	const char *args[] = { "-V", NULL };
	struct run r;

	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0);
	cr_assert_not_null(strstr(r.out, "libdw"), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "libunwind"), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "debuginfod: "), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "glibc (stats, trim)"), "%s", r.out);
	run_free(&r);
}

/* --json before or after report, and --format json: one document. */
Test(cli_extras, report_json_spellings)
{
	const char *dir = getenv("MEMSNAP_TESTDATA");
	char dump[PATH_MAX];
	const char *a1[] = { "--json", "report", dump, NULL };
	const char *a2[] = { "report", dump, "--json", NULL };
	const char *a3[] = { "report", "--format", "json", dump, NULL };
	const char *const *all[] = { a1, a2, a3 };
	char *first = NULL;
	struct run r;
	size_t i;

	cr_assert_not_null(dir);
	snprintf(dump, sizeof(dump), "%s/profiles/chain-3.heap", dir);
	if (access(dump, R_OK))
		cr_skip_test("%s missing", dump);
	for (i = 0; i < 3; i++) {
		cr_assert_eq(run_memsnap(&r, all[i]), 0);
		cr_assert_eq(r.status, 0, "%s", r.err);
		cr_assert_eq(r.out[0], '{', "%.80s", r.out);
		if (!first)
			first = strdup(r.out);
		else
			cr_assert_str_eq(r.out, first);
		run_free(&r);
	}
	free(first);
}
