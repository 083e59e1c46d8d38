/*
 * The call engine when memsnap does not see a call through: a call that
 * outlives --timeout, memsnap killed with SIGKILL at many moments, and
 * SIGINT/SIGTERM mid-call.  In every case the borrowed thread must come
 * back to exactly where it was, by itself if need be, and the fixture
 * must prove it (see test_inject.c).
 */
#include "tests/lib/inject.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>

static struct fixture fx = { .pid = -1 };

static void setup(void)
{
	inject_start(&fx);
}

static void teardown(void)
{
	fixture_stop(&fx);
}

TestSuite(inject_kill, .init = setup, .fini = teardown, .timeout = 240);

static void kill_args(const char **args, char *pid, char *tid,
		      struct gate *g, char *quoted, size_t qsize,
		      pid_t thread)
{
	snprintf(pid, 16, "%d", (int)fx.pid);
	snprintf(tid, 16, "%d", (int)thread);
	snprintf(quoted, qsize, "\"%s\"", g->dir);
	args[0] = "--pid";
	args[1] = pid;
	args[2] = "--thread";
	args[3] = tid;
	args[4] = "call";
	args[5] = "block_on";
	args[6] = quoted;
	args[7] = NULL;
}

/*
 * After memsnap is gone: if the callee runs (now or already), let it
 * return.  The thread is released by the tracer's death at once, so the
 * callee announces itself within the bound or not at all.
 */
static void settle(struct gate *g, bool started)
{
	if (!started)
		started = gate_wait_started(g, 500);
	if (started)
		gate_release(g);
}

static void delay_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * SIGKILL memsnap at spread-out moments: before it attaches, while it
 * checks and saves, while it builds the stub, while the callee runs
 * (announced through the gate), and after the callee was released.
 */
Test(inject_kill, sigkill_at_many_moments)
{
	static const char *const threads[] = { "read", "sleep", "futex_to",
					       "epoll", "redzone", "avx" };
	char pid[16], tid[16], quoted[200];
	const char *args[8];
	int i, ran = 0;

	for (i = 0; i < 48; i++) {
		const char *name = threads[i % 6];
		pid_t thread, m;
		struct gate g;
		bool started = false;
		int st;

		/*
		 * epoll_wait fails with EINTR on any stop; memsnap turns that
		 * back into a restart within microseconds of the stop, but a
		 * SIGKILL inside that window cannot be helped (SIGSTOP and
		 * SIGCONT do the same).  So epoll only sees mid-call kills.
		 */
		if (!strcmp(name, "epoll") && i % 4 != 3)
			name = "read";
		thread = thread_of(&fx, name);
		if (!thread)
			continue;
		gate_open(&g);
		kill_args(args, pid, tid, &g, quoted, sizeof(quoted), thread);
		m = spawn_memsnap(args);
		if (i % 4 == 3) {
			/* Mid-call, for certain. */
			started = gate_wait_started(&g, 10000);
			cr_assert(started, "the callee never ran (%s)", name);
		} else if (i % 4 == 2) {
			/* After the callee returned, during the restore. */
			started = gate_wait_started(&g, 10000);
			cr_assert(started, "the callee never ran (%s)", name);
			gate_release(&g);
			delay_us(50 * (i % 8));
		} else {
			/* Somewhere in attach, check, save, stub. */
			delay_us(150L * i);
		}
		kill(m, SIGKILL);
		st = wait_status(m);
		if (st != 128 + SIGKILL)
			cr_assert_eq(st, 0, "memsnap exited %d", st);
		if (i % 4 != 2)
			settle(&g, started);
		ran += started;
		gate_close(&g);
		assert_no_thread_stopped(&fx);
		{
			char why[512];

			cr_assert(fixture_healthy(&fx, why, sizeof(why)),
				  "after killing memsnap (round %d, thread %s, "
				  "memsnap status %d): %s", i, name, st, why);
		}
	}
	cr_assert_geq(ran, 24, "the callee ran only %d times", ran);
	/* Every borrowed syscall finishes with its own result. */
	assert_command_ok(&fx, 'r');
	fixture_assert_healthy(&fx);
}

Test(inject_kill, timeout_leaves_the_call_running)
{
	char pid[16], tid[16], quoted[200];
	const char *args[10];
	struct gate g;
	struct run r;
	pid_t thread = thread_of(&fx, "read");
	int rc;

	gate_open(&g);
	kill_args(args + 2, pid, tid, &g, quoted, sizeof(quoted), thread);
	args[0] = "--timeout";
	args[1] = "0.3";
	rc = run_memsnap(&r, args);
	cr_assert_eq(rc, 0);
	cr_assert_eq(r.status, 7, "exit %d: %s", r.status, r.err);
	cr_assert_not_null(strstr(r.err, "did not return within 300 ms"),
			   "%s", r.err);
	/* Its stack at that moment, the callee among the frames. */
	cr_assert_not_null(strstr(r.err, "block_on"), "%s", r.err);
	run_free(&r);
	cr_assert(gate_wait_started(&g, 1000));
	/* Still inside the call, and not stopped by anyone. */
	assert_no_thread_stopped(&fx);
	gate_release(&g);
	/* The stub's rt_sigreturn puts the thread back by itself. */
	assert_command_ok(&fx, 'r');
	fixture_assert_healthy(&fx);
	gate_close(&g);
}

static void interrupt_mid_call(int sig)
{
	char pid[16], tid[16], quoted[200];
	const char *args[8];
	struct gate g;
	pid_t m;
	int st;

	gate_open(&g);
	kill_args(args, pid, tid, &g, quoted, sizeof(quoted),
		  thread_of(&fx, "sleep"));
	m = spawn_memsnap(args);
	cr_assert(gate_wait_started(&g, 10000));
	kill(m, sig);
	/* memsnap finishes the call first: it is still waiting. */
	gate_release(&g);
	st = wait_status(m);
	cr_assert_eq(st, 9, "memsnap exited %d after signal %d", st, sig);
	gate_close(&g);
	assert_no_thread_stopped(&fx);
	assert_command_ok(&fx, 'r');
	fixture_assert_healthy(&fx);
}

Test(inject_kill, sigint_mid_call)
{
	interrupt_mid_call(SIGINT);
}

Test(inject_kill, sigterm_mid_call)
{
	interrupt_mid_call(SIGTERM);
}

/*
 * SIGSTOP for the process while a call runs: memsnap finishes the call
 * and restores the thread, and the process is still stopped afterwards.
 */
Test(inject_kill, job_stop_mid_call_stays_stopped)
{
	char pid[16], tid[16], quoted[200], reply[512];
	const char *args[8];
	struct gate g;
	pid_t m;
	int st, i;

	gate_open(&g);
	kill_args(args, pid, tid, &g, quoted, sizeof(quoted),
		  thread_of(&fx, "read"));
	m = spawn_memsnap(args);
	cr_assert(gate_wait_started(&g, 10000));
	cr_assert_eq(kill(fx.pid, SIGSTOP), 0);
	gate_release(&g);
	st = wait_status(m);
	cr_assert_eq(st, 0, "memsnap exited %d", st);
	for (i = 0; i < 100000 && fixture_state(&fx) != 'T'; i++)
		sched_yield();
	cr_assert_eq(fixture_state(&fx), 'T', "state %c", fixture_state(&fx));
	cr_assert_eq(kill(fx.pid, SIGCONT), 0);
	gate_close(&g);
	/* SIGSTOP/SIGCONT alone make epoll_wait fail with EINTR. */
	cr_assert_eq(fixture_command(&fx, 'r', reply, sizeof(reply), 20000), 0);
	cr_assert(!strcmp(reply, "ok") ||
			  !strcmp(reply, "bad epoll_wait: returned -4"),
		  "%s", reply);
}
