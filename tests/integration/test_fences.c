/*
 * Threads that must never be borrowed for an allocator call, and threads
 * that must not notice being borrowed, on the soak target
 * (tests/fixtures/soak_target.c): its fork thread forks every 5 ms (a
 * thread inside fork() holds the allocator's locks, so a call into the
 * allocator from there waits for ever), and its sigwait thread sits in
 * sigwaitinfo(), which the kernel never restarts after a stop.  The
 * target checks itself (no EINTR, registers, progress of every thread)
 * at every ping.
 */
#include "../lib/fixture.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct fixture fx = { .pid = -1 };

static void teardown(void)
{
	fixture_stop(&fx);
}

TestSuite(fences, .fini = teardown, .timeout = 180);

/* The tid named @role in the ready line ("... fork=1234 ..."). */
static int tid_of(const char *role)
{
	char key[32];
	const char *p;

	snprintf(key, sizeof(key), " %s=", role);
	p = strstr(fx.ready, key);
	cr_assert_not_null(p, "no %s in '%s'", role, fx.ready);
	return atoi(p + strlen(key));
}

static void start(const char *name, char *const env[])
{
	char path[PATH_MAX];
	char *argv[] = { path, NULL };

	fixture_path(name, path, sizeof(path));
	cr_assert_eq(fixture_start(&fx, argv, env, 10000), 0);
}

/* memsnap --pid P --thread @tid --timeout 3 @a @b: never a timeout. */
static int borrow(int tid, const char *a, const char *b)
{
	char pid[16], t[16];
	const char *args[] = { "-q", "--pid", pid, "--thread", t,
			       "--timeout", "3", a, b, NULL };
	struct run r;
	int status;

	snprintf(pid, sizeof(pid), "%d", (int)fx.pid);
	snprintf(t, sizeof(t), "%d", tid);
	cr_assert_eq(run_memsnap(&r, args), 0);
	status = r.status;
	cr_assert(status == 0 || status == 6,
		  "%s %s on thread %d: exit %d: %s", a, b ? b : "", tid,
		  status, r.err);
	run_free(&r);
	return status;
}

Test(fences, fork_thread_jemalloc)
{
	char conf[] = "MALLOC_CONF=prof:true,prof_active:false";
	char *env[] = { conf, NULL };
	int i, fork_tid;

	start("soak-target-je", env);
	fork_tid = tid_of("fork");
	for (i = 0; i < 60; i++)
		borrow(fork_tid, i % 2 ? "prof" : "stats", i % 2 ? "on" : NULL);
	fixture_assert_healthy(&fx);
}

Test(fences, fork_thread_glibc)
{
	int i, fork_tid;

	start("soak-target", NULL);
	fork_tid = tid_of("fork");
	for (i = 0; i < 60; i++)
		borrow(fork_tid, i % 2 ? "trim" : "stats", NULL);
	fixture_assert_healthy(&fx);
}

Test(fences, sigwaitinfo_sees_no_eintr)
{
	int i, tid;

	start("soak-target", NULL);
	tid = tid_of("sigwait");
	for (i = 0; i < 10; i++)
		borrow(tid, "stats", NULL);
	/* the thread reports an EINTR from sigwaitinfo as a violation */
	fixture_assert_healthy(&fx);
}
