/*
 * `memsnap call` end to end on tests/fixtures/inject_target: each test
 * borrows a thread in a given state, calls functions that disturb what
 * they can (vector registers, MXCSR, errno), and then has the fixture
 * prove that the thread carried on exactly: its interrupted syscall
 * completed with the right result and no EINTR, its red zone, vector
 * registers and errno are unchanged, no signal was lost.
 */
#include "tests/lib/fault.h"
#include "tests/lib/inject.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

static struct fixture fx = { .pid = -1 };

static void setup(void)
{
	inject_start(&fx);
}

static void teardown(void)
{
	fixture_stop(&fx);
}

TestSuite(inject, .init = setup, .fini = teardown, .timeout = 120);

/* Borrow thread @name for a few calls, then release and check it. */
static void borrow_and_check(const char *name)
{
	pid_t tid = thread_of(&fx, name);

	cr_assert_gt(tid, 0);
	assert_call(&fx, tid, "add3", "40", 40);
	assert_call(&fx, tid, "clobber_vectors", NULL, 1);
	assert_call(&fx, tid, "set_errno", "77", 77);
	assert_call(&fx, tid, "check_alignment", NULL, 1);
	assert_no_thread_stopped(&fx);
	/* Every blocked syscall completes once, with the right result. */
	assert_command_ok(&fx, 'r');
	fixture_assert_healthy(&fx);
}

Test(inject, blocked_in_read)
{
	borrow_and_check("read");
}

Test(inject, blocked_in_nanosleep)
{
	int i;

	/* The sleeper checks each 200 ms sleep: no EINTR, never shorter. */
	for (i = 0; i < 5; i++)
		assert_call(&fx, thread_of(&fx, "sleep"), "clobber_vectors",
			    NULL, 1);
	borrow_and_check("sleep");
}

Test(inject, blocked_in_futex)
{
	borrow_and_check("futex");
}

/* A futex wait with a timeout restarts through the restart block. */
Test(inject, blocked_in_futex_with_timeout)
{
	borrow_and_check("futex_to");
}

/* epoll_wait is never restarted by the kernel: memsnap must hide the
 * EINTR its own stop causes. */
Test(inject, blocked_in_epoll_wait)
{
	borrow_and_check("epoll");
}

Test(inject, blocked_in_poll_with_timeout)
{
	borrow_and_check("poll");
}

/* redzone_read keeps 128 bytes below its rsp across a blocking read. */
Test(inject, red_zone_intact)
{
	borrow_and_check("redzone");
}

Test(inject, busy_thread_keeps_avx_and_mxcsr)
{
	pid_t tid = thread_of(&fx, "avx");
	int i;

	if (!tid)
		cr_skip_test("no AVX on this machine");
	/* clobber_vectors overwrites ymm8-15 and MXCSR on that thread. */
	for (i = 0; i < 10; i++)
		assert_call(&fx, tid, "clobber_vectors", NULL, 1);
	fixture_assert_healthy(&fx);
}

/* The read thread's errno is 4242 across its read; the callee sets 77. */
Test(inject, errno_intact)
{
	assert_call(&fx, thread_of(&fx, "read"), "set_errno", "77", 77);
	{
		struct run r;
		int st = call_on(&fx, &r, thread_of(&fx, "read"), "set_errno",
				 "--", "-5");

		cr_assert_eq(st, 0, "exit %d: %s", st, r.err);
		cr_assert_eq(call_value(&r), -5, "printed '%s'", r.out);
		run_free(&r);
	}
	assert_command_ok(&fx, 'r');
	fixture_assert_healthy(&fx);
}

Test(inject, stack_aligned_for_movaps)
{
	const char *names[] = { "read", "sleep", "avx", "redzone", "epoll" };
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (thread_of(&fx, names[i]))
			assert_call(&fx, thread_of(&fx, names[i]),
				    "check_alignment", NULL, 1);
	fixture_assert_healthy(&fx);
}

/* Queued real-time signals at the borrowed thread: none may be lost. */
Test(inject, signal_storm_loses_nothing)
{
	pid_t tid = thread_of(&fx, "read");
	int i;

	assert_command_ok(&fx, 's');
	for (i = 0; i < 15; i++)
		assert_call(&fx, tid, "add3", "1", 1);
	assert_command_ok(&fx, 'w');
	assert_command_ok(&fx, 'r');
	fixture_assert_healthy(&fx);
}

Test(inject, strings_go_through_the_stack)
{
	struct run r;
	char pid[16];
	const char *args[] = { "--pid", pid, "call", "strlen",
			       "\"hello, world\"", NULL };

	snprintf(pid, sizeof(pid), "%d", (int)fx.pid);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(call_value(&r), 12, "printed '%s'", r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

Test(inject, chooses_an_idle_thread_not_main)
{
	char pid[16], want[64];
	const char *args[] = { "--pid", pid, "--timings", "call", "add3", "5",
			       NULL };
	struct run r;

	snprintf(pid, sizeof(pid), "%d", (int)fx.pid);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(call_value(&r), 5);
	snprintf(want, sizeof(want), "tid %d stopped", (int)fx.pid);
	cr_assert_null(strstr(r.err, want), "borrowed the main thread: %s",
		       r.err);
	cr_assert_not_null(strstr(r.err, "; 1 of "), "%s", r.err);
	run_free(&r);
	assert_command_ok(&fx, 'r');
	fixture_assert_healthy(&fx);
}

Test(inject, fault_in_callee_is_reported_and_restored)
{
	struct run r;
	int st = call_on(&fx, &r, thread_of(&fx, "read"), "0x8", NULL, NULL);

	cr_assert_eq(st, 1, "exit %d: %s", st, r.err);
	cr_assert_not_null(strstr(r.err, "SIGSEGV in the called function"), "%s",
			   r.err);
	cr_assert_not_null(strstr(r.err, "may be inconsistent"), "%s", r.err);
	run_free(&r);
	assert_no_thread_stopped(&fx);
	assert_command_ok(&fx, 'r');
	fixture_assert_healthy(&fx);
}

Test(inject, unknown_function)
{
	struct run r;
	int st = call_on(&fx, &r, 0, "no_such_function_here", NULL, NULL);

	cr_assert_eq(st, 1, "exit %d: %s", st, r.err);
	cr_assert_not_null(strstr(r.err, "no function 'no_such_function_here'"),
			   "%s", r.err);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

Test(inject, job_stopped_target_stays_stopped)
{
	struct run r;
	int st, i;

	cr_assert_eq(kill(fx.pid, SIGSTOP), 0);
	for (i = 0; i < 100000 && fixture_state(&fx) != 'T'; i++)
		sched_yield();
	cr_assert_eq(fixture_state(&fx), 'T');
	st = call_on(&fx, &r, 0, "add3", "1", NULL);
	cr_assert_eq(st, 6, "exit %d: %s", st, r.err);
	cr_assert_not_null(strstr(r.err, "stopped (job control)"), "%s", r.err);
	run_free(&r);
	cr_assert_eq(fixture_state(&fx), 'T', "no longer stopped");
	cr_assert_eq(kill(fx.pid, SIGCONT), 0);
	/*
	 * SIGSTOP/SIGCONT by themselves make epoll_wait fail with EINTR
	 * (signal(7)); that one complaint is the kernel's, not memsnap's.
	 */
	{
		char reply[512];

		cr_assert_eq(fixture_command(&fx, 'r', reply, sizeof(reply),
					     20000), 0);
		cr_assert(!strcmp(reply, "ok") ||
				  !strcmp(reply, "bad epoll_wait: returned -4"),
			  "%s", reply);
	}
}

/* Another tracer on the main thread: the named thread is still ours,
 * the traced one is refused with its tracer named. */
Test(inject, existing_tracer)
{
	pid_t tid = thread_of(&fx, "read");
	struct run r;
	int st, status;

	cr_assert_eq(ptrace(PTRACE_SEIZE, fx.pid, 0, 0), 0, "seize: %s",
		     strerror(errno));
	st = call_on(&fx, &r, tid, "add3", "1", NULL);
	cr_assert_eq(st, 0, "exit %d: %s", st, r.err);
	run_free(&r);
	st = call_on(&fx, &r, fx.pid, "add3", "1", NULL);
	cr_assert_eq(st, 4, "exit %d: %s", st, r.err);
	cr_assert_not_null(strstr(r.err, "is already traced by pid"), "%s",
			   r.err);
	run_free(&r);
	cr_assert_eq(ptrace(PTRACE_INTERRUPT, fx.pid, 0, 0), 0);
	cr_assert_eq(waitpid(fx.pid, &status, __WALL), fx.pid);
	cr_assert_eq(ptrace(PTRACE_DETACH, fx.pid, 0, 0), 0);
	assert_command_ok(&fx, 'r');
	fixture_assert_healthy(&fx);
}

Test(inject, zombie)
{
	pid_t z = fork();
	char pid[16];
	const char *args[] = { "--pid", pid, "call", "getpid", NULL };
	struct run r;

	cr_assert_geq(z, 0);
	if (z == 0)
		_exit(0);
	/* Not reaped: it stays a zombie until we wait for it. */
	snprintf(pid, sizeof(pid), "%d", (int)z);
	{
		char path[64], buf[256] = "";
		int i;

		snprintf(path, sizeof(path), "/proc/%d/stat", (int)z);
		for (i = 0; i < 100000 && !strstr(buf, ") Z"); i++) {
			FILE *f = fopen(path, "r");

			if (f) {
				if (!fgets(buf, sizeof(buf), f))
					buf[0] = '\0';
				fclose(f);
			}
			sched_yield();
		}
		cr_assert_not_null(strstr(buf, ") Z"), "not a zombie: %s", buf);
	}
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 3, "exit %d: %s", r.status, r.err);
	cr_assert_not_null(strstr(r.err, "a zombie"), "%s", r.err);
	run_free(&r);
	waitpid(z, NULL, 0);
}

Test(inject, target_exits_during_the_call)
{
	struct run r;
	int st = call_on(&fx, &r, thread_of(&fx, "read"), "exit_now", NULL,
			 NULL);

	cr_assert_eq(st, 3, "exit %d: %s", st, r.err);
	cr_assert_not_null(strstr(r.err, "during the call"), "%s", r.err);
	run_free(&r);
	cr_assert_eq(wait_status(fx.pid), 7);
	fx.pid = -1;
}

Test(inject, target_execs_during_the_call)
{
	struct run r;
	int st = call_on(&fx, &r, thread_of(&fx, "read"), "do_exec", NULL,
			 NULL);

	cr_assert_eq(st, 3, "exit %d: %s", st, r.err);
	cr_assert_not_null(strstr(r.err, "execve"), "%s", r.err);
	run_free(&r);
	/* The fixture became /bin/true and exits 0. */
	cr_assert_eq(wait_status(fx.pid), 0);
	fx.pid = -1;
}

/* A thread inside dlopen() (ld.so on its stack) is never borrowed. */
Test(inject, refuses_a_thread_inside_the_loader)
{
	struct run r;
	int st = call_on(&fx, &r, thread_of(&fx, "dlopen"), "add3", "1", NULL);

	cr_assert_eq(st, 6, "exit %d: %s", st, r.err);
	cr_assert_not_null(strstr(r.err, "is in the dynamic loader"), "%s",
			   r.err);
	/* The blocking frame, named. */
	cr_assert_not_null(strstr(r.err, "ld-linux"), "%s", r.err);
	run_free(&r);
	/* Without --thread, memsnap picks another one. */
	assert_call(&fx, 0, "add3", "2", 2);
	assert_no_thread_stopped(&fx);
	assert_command_ok(&fx, 'r');
	fixture_assert_healthy(&fx);
}

/* One stub page, made by the first call, found and reused by the others. */
Test(inject, stub_page_made_once_and_reused)
{
	int i;

	cr_assert_eq(stub_pages(fx.pid), 0);
	for (i = 0; i < 4; i++)
		assert_call(&fx, i % 2 ? thread_of(&fx, "read") : 0, "add3",
			    "3", 3);
	cr_assert_eq(stub_pages(fx.pid), 1);
	fixture_assert_healthy(&fx);
}

Test(inject, thread_of_another_process)
{
	struct run r;
	int st = call_on(&fx, &r, 1, "add3", "1", NULL);

	cr_assert_eq(st, 3, "exit %d: %s", st, r.err);
	cr_assert_not_null(strstr(r.err, "thread 1 is not a thread of pid"),
			   "%s", r.err);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

/* Less than 64 KiB of stack below rsp: refused, the thread untouched. */
Test(inject, refuses_a_thread_short_of_stack)
{
	struct run r;
	int st = call_on(&fx, &r, thread_of(&fx, "small"), "add3", "1", NULL);

	cr_assert_eq(st, 6, "exit %d: %s", st, r.err);
	cr_assert_not_null(strstr(r.err, "bytes of stack left"), "%s", r.err);
	run_free(&r);
	fixture_assert_healthy(&fx);
}
