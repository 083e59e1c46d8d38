/*
 * Threads someone else already traces: tracers attach per thread, so
 * memsnap reads each thread's own TracerPid, passes traced ones over,
 * and waits for another memsnap rather than blaming a security module.
 *
 *   - 30 memsnaps at once on one process: all succeed
 *   - a non-main thread traced (as by strace -p TID): another is used
 *   - --thread naming a traced thread: one line naming its tracer
 *   - the only thread held by another memsnap for a moment: memsnap
 *     waits and succeeds
 */
#include "tests/lib/fault.h"
#include "tests/lib/scratch.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>

static struct fixture fx = { .pid = -1 };
static char pidstr[16];
static char scratch[PATH_MAX];

static void teardown(void);

static void setup(void)
{
	int rc;

	skip_cleanup = teardown;
	rc = scratch_make("memsnap-test-busy", scratch, sizeof(scratch));
	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
}

static void teardown(void)
{
	fixture_stop(&fx);
	scratch_cleanup(scratch);
}

TestSuite(busy, .init = setup, .fini = teardown, .timeout = 120);

static void start(const char *name, char *const env[])
{
	char path[PATH_MAX];
	char *argv[] = { path, NULL };
	int rc;

	fixture_path(name, path, sizeof(path));
	if (access(path, X_OK))
		skip_test("fixture %s not built", path);
	rc = fixture_start(&fx, argv, env, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
}

/* A thread of the fixture other than the main one. */
static pid_t other_thread(void)
{
	char dir[64];
	struct dirent *e;
	pid_t tid = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)fx.pid);
	d = opendir(dir);
	cr_assert_not_null(d);
	while ((e = readdir(d)))
		if (atoi(e->d_name) > 0 && atoi(e->d_name) != fx.pid)
			tid = atoi(e->d_name);
	closedir(d);
	cr_assert_gt(tid, 0, "no second thread");
	return tid;
}

/* Seize @tid from a child process named @comm; its pid.  The child lets
 * go after @hold_ms (0: when killed). */
static pid_t trace_from_child(pid_t tid, const char *comm, int hold_ms)
{
	int ready[2];
	pid_t tracer;
	char c;

	cr_assert_eq(pipe(ready), 0);
	tracer = fork();
	cr_assert_geq(tracer, 0);
	if (tracer == 0) {
		struct timespec ts = { hold_ms / 1000,
				       (hold_ms % 1000) * 1000000L };

		prctl(PR_SET_NAME, comm, 0, 0, 0);
		c = ptrace(PTRACE_SEIZE, tid, 0, 0) ? 'n' : 'y';
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		if (!hold_ms)
			for (;;)
				pause();
		nanosleep(&ts, NULL);
		/* Detaching needs a stopped tracee. */
		if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) ||
		    waitpid(tid, NULL, __WALL) != tid ||
		    ptrace(PTRACE_DETACH, tid, 0, 0))
			_exit(2);
		_exit(0);
	}
	close(ready[1]);
	cr_assert_eq(read(ready[0], &c, 1), 1);
	close(ready[0]);
	cr_assert_eq(c, 'y', "the tracer could not seize tid %d", (int)tid);
	return tracer;
}

static void stop_tracer(pid_t tracer)
{
	kill(tracer, SIGKILL);
	waitpid(tracer, NULL, 0);
}

Test(busy, thirty_at_once_all_succeed)
{
	char cmd[PATH_MAX * 4], path[PATH_MAX + 32];
	int i, ok = 0;
	struct run r;

	start("jemalloc-target", NULL);
	snprintf(cmd, sizeof(cmd),
		 "for i in $(seq 30); do ('%s' --pid %s stats >/dev/null "
		 "2>'%s'/$i.err; echo $? >'%s'/$i.rc) & done; wait",
		 getenv("MEMSNAP_BIN"), pidstr, scratch, scratch);
	cr_assert_eq(run_shell(&r, cmd), 0);
	run_free(&r);
	for (i = 1; i <= 30; i++) {
		FILE *f;
		int rc = -1;
		char err[512] = "";

		snprintf(path, sizeof(path), "%s/%d.rc", scratch, i);
		f = fopen(path, "re");
		cr_assert_not_null(f, "%s", path);
		cr_assert_eq(fscanf(f, "%d", &rc), 1);
		fclose(f);
		snprintf(path, sizeof(path), "%s/%d.err", scratch, i);
		f = fopen(path, "re");
		if (f) {
			size_t n = fread(err, 1, sizeof(err) - 1, f);

			err[n] = '\0';
			fclose(f);
		}
		cr_expect_eq(rc, 0, "run %d: exit %d: %s", i, rc, err);
		ok += rc == 0;
	}
	cr_assert_eq(ok, 30);
	fixture_assert_healthy(&fx);
}

Test(busy, traced_thread_is_passed_over)
{
	const char *args[] = { "--pid", pidstr, "stats", NULL };
	pid_t tid, tracer;
	char used[64];
	struct run r;

	start("jemalloc-target", NULL);
	tid = other_thread();
	tracer = trace_from_child(tid, "strace", 0);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	snprintf(used, sizeof(used), "through tid %d)", (int)tid);
	cr_expect_null(strstr(r.out, used), "borrowed the traced thread: %s",
		       r.out);
	run_free(&r);
	stop_tracer(tracer);
	fixture_assert_healthy(&fx);
}

Test(busy, thread_option_on_a_traced_thread_names_the_tracer)
{
	char tid_s[16], want[128];
	const char *args[] = { "--pid", pidstr, "--thread", tid_s, "stats",
			       NULL };
	pid_t tid, tracer;
	struct run r;

	start("jemalloc-target", NULL);
	tid = other_thread();
	snprintf(tid_s, sizeof(tid_s), "%d", (int)tid);
	tracer = trace_from_child(tid, "strace", 0);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_expect_eq(r.status, 4, "exit %d: %s", r.status, r.err);
	snprintf(want, sizeof(want),
		 "memsnap: stats %s: thread %d is already traced by pid %d (strace)\n",
		 pidstr, (int)tid, (int)tracer);
	cr_expect_str_eq(r.err, want);
	cr_expect_null(strstr(r.err, "security module"), "%s", r.err);
	run_free(&r);
	stop_tracer(tracer);
	fixture_assert_healthy(&fx);
}

/* The fake jemalloc of fault-hostile has one thread: the main one. */
Test(busy, another_memsnap_on_the_only_thread_is_waited_for)
{
	char conf[] = "MALLOC_CONF=prof:true";
	char *env[] = { conf, NULL };
	const char *args[] = { "--pid", pidstr, "call", "getpid", NULL };
	pid_t tracer;
	struct run r;
	int st;

	start("fault-hostile", env);
	tracer = trace_from_child(fx.pid, "memsnap", 700);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	run_free(&r);
	cr_assert_eq(waitpid(tracer, &st, 0), tracer);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "the other tracer could not let go: %#x", st);
	fixture_assert_healthy(&fx);
}

Test(busy, another_memsnap_that_never_lets_go_is_named)
{
	char want[160];
	const char *args[] = { "--pid", pidstr, "call", "getpid", NULL };
	pid_t tracer;
	struct run r;

	start("fault-hostile", NULL);
	tracer = trace_from_child(fx.pid, "memsnap", 0);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_expect_eq(r.status, 4, "exit %d: %s", r.status, r.err);
	snprintf(want, sizeof(want),
		 "another memsnap (pid %d) is working on pid %s\n",
		 (int)tracer, pidstr);
	cr_expect(strlen(r.err) >= strlen(want) &&
			  !strcmp(r.err + strlen(r.err) - strlen(want), want),
		  "'%s' does not end with '%s'", r.err, want);
	cr_expect_eq(count_lines(r.err), 1, "%s", r.err);
	run_free(&r);
	stop_tracer(tracer);
	fixture_assert_healthy(&fx);
}
