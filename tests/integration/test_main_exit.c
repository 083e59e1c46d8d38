/*
 * The main thread exited (pthread_exit), the others live: not a zombie.
 * memsnap reads the process through a live thread's /proc files and
 * works with and without --thread.
 */
#include "tests/lib/fault.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

static struct fixture fx = { .pid = -1 };
static char pidstr[16];

static void teardown(void)
{
	fixture_stop(&fx);
}

TestSuite(main_exit, .fini = teardown, .timeout = 60);

/* fixture_assert_healthy() calls a zombie main thread dead: here the
 * worker must be running (not stopped) and answer "ok". */
static void assert_healthy(void)
{
	char path[64], buf[512], reply[256];
	const char *p;
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)fx.pid);
	d = opendir(path);
	cr_assert_not_null(d);
	while ((e = readdir(d))) {
		FILE *f;
		size_t n;

		if (atoi(e->d_name) <= 0 || atoi(e->d_name) == fx.pid)
			continue;
		snprintf(buf, sizeof(buf), "%s/%s/stat", path, e->d_name);
		f = fopen(buf, "re");
		cr_assert_not_null(f);
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		p = strrchr(buf, ')');
		cr_assert(p && p[2] != 'T' && p[2] != 't',
			  "thread %s is stopped: %s", e->d_name, buf);
	}
	closedir(d);
	cr_assert_eq(fixture_command(&fx, 'p', reply, sizeof(reply), 10000),
		     0);
	cr_assert_str_eq(reply, "ok");
}

static pid_t start(void)
{
	char path[PATH_MAX], st;
	char *argv[] = { path, NULL };
	struct dirent *e;
	pid_t worker = 0;
	DIR *d;
	int rc, tries;

	fixture_path("main-exit", path, sizeof(path));
	rc = fixture_start(&fx, argv, NULL, 10000);
	cr_assert_eq(rc, 0, "%s", strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
	/* The ready line comes before pthread_exit: wait for the zombie. */
	for (tries = 0; (st = fixture_state(&fx)) != 'Z' && tries < 2000;
	     tries++)
		usleep(1000);
	cr_assert_eq(st, 'Z', "the main thread did not exit (state %c)", st);
	snprintf(path, sizeof(path), "/proc/%d/task", (int)fx.pid);
	d = opendir(path);
	cr_assert_not_null(d);
	while ((e = readdir(d)))
		if (atoi(e->d_name) > 0 && atoi(e->d_name) != fx.pid)
			worker = atoi(e->d_name);
	closedir(d);
	cr_assert_gt(worker, 0);
	return worker;
}

Test(main_exit, stats_info_and_call)
{
	const char *stats[] = { "--pid", pidstr, "stats", NULL };
	const char *info[] = { "--pid", pidstr, "info", NULL };
	const char *call[] = { "--pid", pidstr, "call", "getpid", NULL };
	char want[64];
	struct run r;

	start();
	cr_assert_eq(run_memsnap(&r, stats), 0);
	cr_expect_eq(r.status, 0, "stats: exit %d: %s", r.status, r.err);
	cr_expect_not_null(strstr(r.out, "glibc malloc statistics"), "%s",
			   r.out);
	run_free(&r);
	cr_assert_eq(run_memsnap(&r, info), 0);
	cr_expect_eq(r.status, 0, "info: exit %d: %s", r.status, r.err);
	cr_expect_not_null(strstr(r.out, "runtime (read through tid"), "%s",
			   r.out);
	cr_expect_str_empty(r.err);
	run_free(&r);
	cr_assert_eq(run_memsnap(&r, call), 0);
	cr_expect_eq(r.status, 0, "call: exit %d: %s", r.status, r.err);
	snprintf(want, sizeof(want), "%s (signed %s,", pidstr, pidstr);
	cr_expect_eq(strncmp(r.out, want, strlen(want)), 0, "%s", r.out);
	run_free(&r);
	assert_healthy();
}

Test(main_exit, thread_option)
{
	char tid[16];
	const char *stats[] = { "--pid", pidstr, "--thread", tid, "stats",
				NULL };
	const char *call[] = { "--pid", pidstr, "--thread", tid, "call",
			       "getpid", NULL };
	struct run r;

	snprintf(tid, sizeof(tid), "%d", (int)start());
	cr_assert_eq(run_memsnap(&r, stats), 0);
	cr_expect_eq(r.status, 0, "stats: exit %d: %s", r.status, r.err);
	run_free(&r);
	cr_assert_eq(run_memsnap(&r, call), 0);
	cr_expect_eq(r.status, 0, "call: exit %d: %s", r.status, r.err);
	run_free(&r);
	assert_healthy();
}
