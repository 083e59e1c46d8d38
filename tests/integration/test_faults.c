/*
 * Faults around one memsnap run, each ending with the proof that the
 * target was not left stopped, traced or dead because of memsnap, and
 * that memsnap said what happened in one line with its documented exit
 * code:
 *
 *   - the target killed, exiting or exec'ing from another thread while
 *     a call runs; the borrowed thread leaving with pthread_exit()
 *   - a thread in uninterruptible sleep (a vfork parent)
 *   - a job-stopped target and an already traced one, through the
 *     allocator commands (`call` has its own in test_inject.c)
 *   - the pid reused by another process between triage and attach
 *   - seccomp filters against the syscalls memsnap has the thread make
 *   - memsnap itself short of file descriptors or address space
 *
 * Tests of bugs memsnap still has are marked with known_bug() (see
 * tests/lib/fault.h): MEMSNAP_KNOWN_BUGS=1 runs them.
 */
#include "tests/lib/fault.h"
#include "tests/lib/inject.h"
#include "tests/lib/scratch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sched.h>
#include <sched.h>
#include <stdio.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

extern char **environ;

static struct fixture fx = { .pid = -1 };
static char base[PATH_MAX];
static char tmp_dir[PATH_MAX + 8];	/* the jemalloc target's TMPDIR */
static char cwd_dir[PATH_MAX + 8];	/* and its cwd */
static char out_dir[PATH_MAX + 8];	/* where dumps go */
static char pidstr[16];
static struct fixture impostor = { .pid = -1 };

static void teardown(void);

static void setup(void)
{
	int rc;

	skip_cleanup = teardown;
	rc = scratch_make("memsnap-test-faults", base, sizeof(base));
	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	snprintf(tmp_dir, sizeof(tmp_dir), "%s/tmp", base);
	snprintf(cwd_dir, sizeof(cwd_dir), "%s/cwd", base);
	snprintf(out_dir, sizeof(out_dir), "%s/out", base);
	cr_assert_eq(mkdir(tmp_dir, 01777), 0);
	cr_assert_eq(mkdir(cwd_dir, 0755), 0);
	cr_assert_eq(mkdir(out_dir, 0755), 0);
}

static void teardown(void)
{
	fixture_stop(&fx);
	fixture_stop(&impostor);
	scratch_cleanup(base);
}

TestSuite(faults, .init = setup, .fini = teardown, .timeout = 180);

/* fault-target with @arg1 @arg2 (either NULL). */
static void start_fault(const char *arg1, const char *arg2)
{
	char path[PATH_MAX];
	char *argv[] = { path, (char *)arg1, (char *)arg2, NULL };
	int rc;

	fixture_path("fault-target", path, sizeof(path));
	if (access(path, X_OK))
		skip_test("fixture %s not built", path);
	rc = fixture_start(&fx, argv, NULL, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
}

/* jemalloc-target, profiling on, with its own TMPDIR and cwd. */
static void start_je(void)
{
	char path[PATH_MAX], tmp[PATH_MAX + 16], cwd[PATH_MAX + 32];
	char conf[] = "MALLOC_CONF=prof:true";
	char *argv[] = { path, NULL };
	char *env[] = { conf, tmp, cwd, NULL };
	int rc;

	snprintf(tmp, sizeof(tmp), "TMPDIR=%s", tmp_dir);
	snprintf(cwd, sizeof(cwd), "JE_FIXTURE_CWD=%s", cwd_dir);
	fixture_path("jemalloc-target", path, sizeof(path));
	rc = fixture_start(&fx, argv, env, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
}

static void assert_nothing_left(void)
{
	cr_assert_eq(dir_count_entries(tmp_dir), 0,
		     "something was left in the target's TMPDIR");
	cr_assert_eq(dir_count_entries(cwd_dir), 0,
		     "something was left in the target's cwd");
}

/* Exactly one line on stderr, and it holds @what. */
static void assert_one_line(const struct run *r, const char *what)
{
	cr_assert_eq(count_lines(r->err), 1, "not one line on stderr:\n%s",
		     r->err);
	cr_assert_not_null(strstr(r->err, what), "no '%s' in: %s", what,
			   r->err);
}

/* ---- the target changes under a running call ---------------------------- */

/*
 * memsnap calls block_on() on the idle thread; once the callee runs,
 * @act does something to the target.  memsnap's result in @r.
 */
static void during_call(void (*act)(void), struct run *r)
{
	char quoted[200], tid[16];
	const char *args[] = { "--pid", pidstr, "--thread", tid, "call",
			       "block_on", quoted, NULL };
	struct gate g;
	struct bg b;

	gate_open(&g);
	snprintf(quoted, sizeof(quoted), "\"%s\"", g.dir);
	snprintf(tid, sizeof(tid), "%d", (int)thread_of(&fx, "idle"));
	bg_start(&b, args);
	cr_assert(gate_wait_started(&g, 10000), "the callee never ran");
	act();
	bg_finish(&b, r);
	gate_close(&g);
}

/* "thread TID " of the idle thread: how memsnap names the thread it lost,
 * whether the kernel reports its exit or the signal that ended it. */
static const char *idle_named(void)
{
	static char buf[32];

	snprintf(buf, sizeof(buf), "thread %d ", (int)thread_of(&fx, "idle"));
	return buf;
}

static void kill_target(void)
{
	cr_assert_eq(kill(fx.pid, SIGKILL), 0);
}

static void exit_target(void)
{
	/* 'x': exit(0) from the main thread; no answer comes. */
	cr_assert_eq(write(fx.to_fd, "x", 1), 1);
}

static void exec_target(void)
{
	/* 'e': execve("/bin/true") from the main thread. */
	cr_assert_eq(write(fx.to_fd, "e", 1), 1);
}

Test(faults, target_killed_mid_call)
{
	struct run r;

	start_fault(NULL, NULL);
	during_call(kill_target, &r);
	cr_assert_eq(r.status, 3, "exit %d: %s", r.status, r.err);
	assert_one_line(&r, idle_named());
	cr_assert_str_empty(r.out);
	run_free(&r);
	cr_assert_eq(wait_status(fx.pid), 128 + SIGKILL);
	fx.pid = -1;
}

Test(faults, target_exits_from_another_thread_mid_call)
{
	struct run r;

	start_fault(NULL, NULL);
	during_call(exit_target, &r);
	cr_assert_eq(r.status, 3, "exit %d: %s", r.status, r.err);
	assert_one_line(&r, idle_named());
	cr_assert_str_empty(r.out);
	run_free(&r);
	/* Its own exit code: memsnap did not kill it. */
	cr_assert_eq(wait_status(fx.pid), 0);
	fx.pid = -1;
}

/* The exec kills every other thread: to memsnap, its thread was killed. */
Test(faults, target_execs_from_another_thread_mid_call)
{
	struct run r;

	start_fault(NULL, NULL);
	during_call(exec_target, &r);
	cr_assert_eq(r.status, 3, "exit %d: %s", r.status, r.err);
	assert_one_line(&r, idle_named());
	cr_assert_str_empty(r.out);
	run_free(&r);
	/* It became /bin/true, which exits 0. */
	cr_assert_eq(wait_status(fx.pid), 0);
	fx.pid = -1;
}

/* The borrowed thread calls pthread_exit() inside the call. */
Test(faults, borrowed_thread_leaves_mid_call)
{
	char want[64];
	struct run r;
	pid_t idle;
	int st;

	start_fault(NULL, NULL);
	idle = thread_of(&fx, "idle");
	st = call_on(&fx, &r, idle, "leave_thread", NULL, NULL);
	cr_assert_eq(st, 3, "exit %d: %s", st, r.err);
	snprintf(want, sizeof(want), "thread %d ", (int)idle);
	assert_one_line(&r, want);
	cr_assert_str_empty(r.out);
	run_free(&r);
	/* Gone (once the kernel has finished its exit), and the rest of
	 * the process carries on, free. */
	{
		long deadline = fault_now_ms() + 5000;
		pid_t tracer;
		char s = '?';

		while (task_state(fx.pid, idle, &s, &tracer) && s != 'Z' &&
		       s != 'X' && fault_now_ms() < deadline)
			fault_sleep_ms(1);
		cr_assert(!task_state(fx.pid, idle, &s, &tracer) || s == 'Z' ||
				  s == 'X',
			  "thread %d is still there, state %c", (int)idle, s);
	}
	assert_untouched(&fx, "after the borrowed thread left");
	/* And memsnap can borrow another. */
	assert_call(&fx, 0, "add3", "2", 2);
	assert_untouched(&fx, "after another call");
}

/* ---- a thread in uninterruptible sleep ----------------------------------- */

/*
 * The vfork parent waits in the kernel in TASK_KILLABLE (state D): no
 * ptrace interrupt stops it.  memsnap must give up on it, and leave it
 * as it was: not traced, and free to go on once its child exits.
 */
Test(faults, uninterruptible_thread_is_left_as_it_was)
{
	char tid[16];
	const char *args[] = { "--pid", pidstr, "--thread", tid, "call",
			       "add3", "1", NULL };
	char st;
	pid_t tracer, vf;
	struct run r;

	start_fault("--vfork", NULL);
	vf = thread_of(&fx, "vfork");
	cr_assert(task_state(fx.pid, vf, &st, &tracer) && st == 'D',
		  "the vfork thread is in state %c, not D", st);
	snprintf(tid, sizeof(tid), "%d", (int)vf);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_neq(r.status, 0, "a call on a thread in D state succeeded");
	cr_assert_str_empty(r.out);
	cr_assert_leq(count_lines(r.err), 3, "%s", r.err);
	run_free(&r);
	assert_threads_free(fx.pid, "after giving up on the D thread");
	/* Released, the vfork parent comes back and nothing stops it. */
	assert_command_ok(&fx, 'v');
	assert_untouched(&fx, "after the vfork child exited");
	assert_command_ok(&fx, 'r');
}

/* Without --thread, memsnap passes the D thread over. */
Test(faults, uninterruptible_thread_is_passed_over)
{
	start_fault("--vfork", NULL);
	assert_call(&fx, 0, "add3", "5", 5);
	assert_threads_free(fx.pid, "after the call");
	assert_command_ok(&fx, 'v');
	assert_untouched(&fx, "after the vfork child exited");
}

Test(faults, uninterruptible_thread_gets_a_clear_report)
{
	char tid[16];
	const char *args[] = { "--pid", pidstr, "--thread", tid, "call",
			       "add3", "1", NULL };
	struct run r;

	start_fault("--vfork", NULL);
	snprintf(tid, sizeof(tid), "%d", (int)thread_of(&fx, "vfork"));
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_expect(r.status == 6 || r.status == 7,
		  "exit %d, not 6 (no thread safe) or 7 (timeout): %s",
		  r.status, r.err);
	cr_expect_null(strstr(r.err, "already traced"),
		       "memsnap blames a tracer (itself): %s", r.err);
	cr_expect_not_null(strstr(r.err, "did not stop"), "%s", r.err);
	cr_expect_not_null(strstr(r.err, "uninterruptible sleep"), "%s",
			   r.err);
	cr_expect_not_null(strstr(r.err, tid), "the thread is not named: %s",
			   r.err);
	run_free(&r);
	assert_command_ok(&fx, 'v');
	assert_untouched(&fx, "after the vfork child exited");
}

/* ---- job-stopped, already traced: the allocator commands ---------------- */

static void wait_state(char want)
{
	long deadline = fault_now_ms() + 5000;

	while (fixture_state(&fx) != want && fault_now_ms() < deadline)
		fault_sleep_ms(1);
	cr_assert_eq(fixture_state(&fx), want, "state %c, not %c",
		     fixture_state(&fx), want);
}

Test(faults, job_stopped_target_stays_stopped)
{
	char out[PATH_MAX + 16], want[128];
	const char *dump[] = { "--pid", pidstr, "dump", "-o", out, NULL };
	const char *prof[] = { "--pid", pidstr, "prof", "on", NULL };
	const char *info[] = { "--pid", pidstr, "info", NULL };
	struct run r;

	start_je();
	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	cr_assert_eq(kill(fx.pid, SIGSTOP), 0);
	wait_state('T');

	cr_assert_eq(run_memsnap(&r, dump), 0);
	cr_assert_eq(r.status, 6, "dump: exit %d: %s", r.status, r.err);
	snprintf(want, sizeof(want),
		 "memsnap: dump %s: the process is stopped (job control); left stopped (`kill -CONT %s` resumes it)\n",
		 pidstr, pidstr);
	cr_assert_str_eq(r.err, want);
	cr_assert_str_empty(r.out);
	run_free(&r);
	cr_assert_eq(access(out, F_OK), -1, "a dump was written");
	cr_assert_eq(fixture_state(&fx), 'T', "no longer stopped");

	cr_assert_eq(run_memsnap(&r, prof), 0);
	cr_assert_eq(r.status, 6, "prof: exit %d: %s", r.status, r.err);
	snprintf(want, sizeof(want),
		 "memsnap: prof %s: the process is stopped (job control); left stopped (`kill -CONT %s` resumes it)\n",
		 pidstr, pidstr);
	cr_assert_str_eq(r.err, want);
	run_free(&r);
	cr_assert_eq(fixture_state(&fx), 'T', "no longer stopped");

	/* info keeps what it can read without a thread, and warns. */
	cr_assert_eq(run_memsnap(&r, info), 0);
	cr_assert_eq(r.status, 0, "info: exit %d: %s", r.status, r.err);
	assert_one_line(&r, "stopped (job control)");
	cr_assert_not_null(strstr(r.out, "jemalloc"), "%s", r.out);
	run_free(&r);
	cr_assert_eq(fixture_state(&fx), 'T', "no longer stopped");

	assert_nothing_left();
	cr_assert_eq(kill(fx.pid, SIGCONT), 0);
	assert_untouched(&fx, "after SIGCONT");
}

/* --thread naming a thread another tracer has: that tracer, named. */
Test(faults, traced_target_names_its_tracer)
{
	const char *prof[] = { "--pid", pidstr, "--thread", pidstr, "prof",
			       "on", NULL };
	const char *any[] = { "--pid", pidstr, "prof", "on", NULL };
	char want[160], comm[32] = "";
	struct run r;
	FILE *f;

	start_je();
	cr_assert_eq(ptrace(PTRACE_SEIZE, fx.pid, 0, 0), 0, "seize: %s",
		     strerror(errno));
	f = fopen("/proc/self/comm", "re");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(comm, sizeof(comm), f));
	fclose(f);
	comm[strcspn(comm, "\n")] = '\0';
	cr_assert_eq(run_memsnap(&r, prof), 0);
	cr_expect_eq(r.status, 4, "exit %d: %s", r.status, r.err);
	snprintf(want, sizeof(want),
		 "thread %s is already traced by pid %d (%s)", pidstr,
		 (int)getpid(), comm);
	cr_expect_eq(count_lines(r.err), 1, "%s", r.err);
	cr_expect_not_null(strstr(r.err, want), "no '%s' in: %s", want, r.err);
	run_free(&r);
	/* Without --thread, another thread is used. */
	cr_assert_eq(run_memsnap(&r, any), 0);
	cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	run_free(&r);
	/* Let go: detaching needs a stopped tracee. */
	cr_assert_eq(ptrace(PTRACE_INTERRUPT, fx.pid, 0, 0), 0);
	cr_assert_eq(waitpid(fx.pid, NULL, __WALL), fx.pid);
	cr_assert_eq(ptrace(PTRACE_DETACH, fx.pid, 0, 0), 0);
	assert_untouched(&fx, "after the other tracer left");
}

/* ---- the pid reused between triage and attach ---------------------------- */

/* Start cli_plain as @f with exactly the pid @want. */
static void start_with_pid(struct fixture *f, pid_t want)
{
	char path[PATH_MAX];
	char *argv[] = { path, NULL };
	int rc;

	fixture_path("cli_plain", path, sizeof(path));
	rc = fixture_start_at_pid(f, argv, NULL, 10000, want);
	if (rc)
		skip_test("clone3 with set_tid: %s (needs root and Linux 5.5)",
			  strerror(-rc));
}

static pid_t reused_pid;

/* memsnap's PTRACE_SEIZE of the pid it triaged. */
static bool seizes_it(const struct sc_entry *e)
{
	return e->nr == SYS_ptrace && e->args[0] == PTRACE_SEIZE &&
	       (pid_t)e->args[1] == reused_pid;
}

/* Another process gets the pid; memsnap goes on (false: not killed). */
static bool replace_the_target(pid_t m)
{
	(void)m;
	fixture_stop(&fx);
	start_with_pid(&impostor, reused_pid);
	return false;
}

Test(faults, pid_reused_between_triage_and_attach)
{
	const char *args[] = { "--pid", pidstr, "call", "getpid", NULL };
	char path[PATH_MAX], want[64];
	char *argv[] = { path, NULL };
	struct run r;
	int rc;

	fixture_path("cli_plain", path, sizeof(path));
	rc = fixture_start(&fx, argv, NULL, 10000);
	cr_assert_eq(rc, 0, "%s", strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
	reused_pid = fx.pid;
	cr_assert(run_traced(args, seizes_it, replace_the_target, &r),
		  "memsnap never seized pid %d: exit %d: %s", (int)reused_pid,
		  r.status, r.err);
	cr_assert_eq(impostor.pid, reused_pid);
	/* The process memsnap looked at is gone: say so, touch nothing. */
	cr_expect_eq(r.status, 3, "exit %d: %s", r.status, r.err);
	snprintf(want, sizeof(want), "%d", (int)reused_pid);
	cr_expect_eq(count_lines(r.err), 1, "%s", r.err);
	cr_expect_not_null(strstr(r.err, want), "%s", r.err);
	cr_expect_str_empty(r.out, "a result from another process: %s",
			    r.out);
	run_free(&r);
	cr_expect_eq(stub_pages(impostor.pid), 0,
		     "memsnap mapped its stub into the new process");
	assert_untouched(&impostor, "the process that got the pid");
}

/*
 * The engine's first look at the pidfd the CLI opened before its own
 * look (procinfo, maps, objects): after every read of the process,
 * before any thread is touched.
 */
static bool checks_it(const struct sc_entry *e)
{
	return e->nr == SYS_pidfd_send_signal;
}

/* The same between the CLI's look and the engine: the pidfd, opened
 * before the look, tells the new process from the old. */
Test(faults, pid_reused_between_load_and_attach)
{
	const char *args[] = { "--pid", pidstr, "stats", NULL };
	char path[PATH_MAX], want[64];
	char *argv[] = { path, NULL };
	struct run r;
	int rc;

	fixture_path("cli_plain", path, sizeof(path));
	rc = fixture_start(&fx, argv, NULL, 10000);
	cr_assert_eq(rc, 0, "%s", strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
	reused_pid = fx.pid;
	cr_assert(run_traced(args, checks_it, replace_the_target, &r),
		  "memsnap never called pidfd_send_signal: exit %d: %s",
		  r.status, r.err);
	cr_assert_eq(impostor.pid, reused_pid);
	cr_expect_eq(r.status, 3, "exit %d: %s", r.status, r.err);
	snprintf(want, sizeof(want), "%d", (int)reused_pid);
	cr_expect_eq(count_lines(r.err), 1, "%s", r.err);
	cr_expect_not_null(strstr(r.err, want), "%s", r.err);
	cr_expect_str_empty(r.out, "a result from another process: %s",
			    r.out);
	run_free(&r);
	cr_expect_eq(stub_pages(impostor.pid), 0,
		     "memsnap mapped its stub into the new process");
	assert_untouched(&impostor, "the process that got the pid");
}

/* ---- memsnap killed between two calls of one session --------------------- */

/*
 * Where memsnap is: it has written a call's buffers and frame to the
 * thread's stack (pwrite64 on /proc/PID/task/TID/mem) and now sets the
 * registers for it (PTRACE_SETREGSET, NT_PRSTATUS).  The @kill_at'th
 * time it gets there, it is killed.
 */
static long last_syscall = -1;
static int frames_written, kill_at;

static bool about_to_start_a_call(const struct sc_entry *e)
{
	bool after_write = last_syscall == SYS_pwrite64;

	last_syscall = e->nr;
	if (e->nr != SYS_ptrace || e->args[0] != PTRACE_SETREGSET ||
	    e->args[2] != 1 /* NT_PRSTATUS */ || !after_write)
		return false;
	return ++frames_written == kill_at;
}

static bool kill_memsnap(pid_t m)
{
	(void)m;
	return true;
}

/* Killed with its first frame written, registers not set yet: the thread
 * is still in its own syscall, untouched. */
Test(faults, killed_before_its_first_call)
{
	char tid[16];
	const char *args[] = { "--pid", pidstr, "--thread", tid, "call",
			       "add3", "1", NULL };
	struct run r;

	start_fault(NULL, NULL);
	snprintf(tid, sizeof(tid), "%d", (int)thread_of(&fx, "idle"));
	assert_call(&fx, thread_of(&fx, "idle"), "add3", "1", 1);
	last_syscall = -1;
	frames_written = 0;
	kill_at = 1;
	cr_assert(run_traced(args, about_to_start_a_call, kill_memsnap, &r),
		  "memsnap never started a call: exit %d: %s", r.status, r.err);
	cr_assert_eq(r.status, 128 + SIGKILL);
	run_free(&r);
	assert_untouched(&fx, "after memsnap died before its first call");
	assert_command_ok(&fx, 'r');
}

/*
 * Between two calls the borrowed thread sits at the end of the first
 * one, inside memsnap's stub, whose context block (the thread's whole
 * state) lies just below the red zone.  The second call's buffers go to
 * the same place.  SIGKILLed after writing them, memsnap leaves the
 * stub to put back a context that is no longer there: the target
 * crashes (SIGSEGV or #GP at the stub's xrstor).  The random kills of
 * test_faults_kill.c find this about once in 1500 kills.
 */
Test(faults, killed_between_two_calls_of_a_session)
{
	char tid[16], arg[1100];
	const char *args[] = { "--pid", pidstr, "--thread", tid, "call",
			       "getenv", arg, NULL };
	struct run r;

	start_fault(NULL, NULL);
	snprintf(tid, sizeof(tid), "%d", (int)thread_of(&fx, "idle"));
	/* The stub page first: its making writes and sets registers too. */
	assert_call(&fx, thread_of(&fx, "idle"), "add3", "1", 1);
	/* A string long enough to cover the whole context block. */
	memset(arg, 'A', sizeof(arg) - 1);
	arg[0] = arg[sizeof(arg) - 2] = '"';
	arg[sizeof(arg) - 1] = '\0';
	/* Call 1 saves errno (__errno_location), call 2 is getenv(). */
	last_syscall = -1;
	frames_written = 0;
	kill_at = 2;
	cr_assert(run_traced(args, about_to_start_a_call, kill_memsnap, &r),
		  "memsnap never started a second call: exit %d: %s", r.status,
		  r.err);
	cr_assert_eq(r.status, 128 + SIGKILL);
	run_free(&r);
	assert_untouched(&fx, "after memsnap died between two calls");
	assert_command_ok(&fx, 'r');
}

/* ---- seccomp ------------------------------------------------------------- */

/* fault-target under filter @mode; memsnap calls add3 on its idle thread. */
static void call_under_seccomp(const char *mode, struct run *r)
{
	start_fault("--seccomp", mode);
	cr_assert_not_null(strstr(fx.ready, mode), "%s", fx.ready);
	call_on(&fx, r, thread_of(&fx, "idle"), "add3", "1", NULL);
}

static void assert_survived(const struct run *r, const char *mode)
{
	char st = fixture_state(&fx);

	cr_assert(st != '?' && st != 'Z' && st != 'X', "seccomp %s: the "
		  "target died (memsnap exit %d: %s)", mode, r->status,
		  r->err);
	cr_assert(r->status == 0 || count_lines(r->err) == 1,
		  "seccomp %s: exit %d with: %s", mode, r->status, r->err);
	if (r->status == 0)
		cr_assert_eq(call_value(r), 1, "%s", r->out);
	assert_untouched(&fx, mode);
	assert_command_ok(&fx, 'r');
}

/* Filters that make a syscall fail: memsnap succeeds or refuses cleanly. */
Test(faults, seccomp_errno_filters)
{
	static const char *const modes[] = { "errno-exec", "allow-errno" };
	size_t i;

	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		struct run r;

		call_under_seccomp(modes[i], &r);
		assert_survived(&r, modes[i]);
		if (r.status)
			cr_assert_not_null(strstr(r.err, "mmap"), "%s", r.err);
		run_free(&r);
		fixture_stop(&fx);
	}
}

static void seccomp_must_not_kill(const char *mode)
{
	struct run r;

	call_under_seccomp(mode, &r);
	assert_survived(&r, mode);
	run_free(&r);
}

Test(faults, seccomp_kill_on_exec_mapping)
{
	seccomp_must_not_kill("kill-exec");
}

Test(faults, seccomp_trap_on_exec_mapping)
{
	seccomp_must_not_kill("trap-exec");
}

Test(faults, seccomp_allowlist_that_kills)
{
	seccomp_must_not_kill("allow-kill");
}

/* `stats --raw` under filter @mode: malloc_info()'s XML, through the
 * way the filter leaves (a memfd, else the agent's file). */
static void stats_through_the_way_left(const char *mode)
{
	const char *const args[] = { "--pid", pidstr, "stats", "--raw", NULL };
	struct run r;

	start_fault("--seccomp", mode);
	cr_assert_not_null(strstr(fx.ready, mode), "%s", fx.ready);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "%s: exit %d: %s", mode, r.status, r.err);
	cr_assert_not_null(strstr(r.out, "<malloc version="), "%s: %s", mode,
			   r.out);
	run_free(&r);
	assert_untouched(&fx, mode);
	assert_command_ok(&fx, 'r');
}

/* The capture's memfd would kill: its file in the agent's directory. */
Test(faults, seccomp_that_would_kill_for_the_memfd_takes_the_file)
{
	stats_through_the_way_left("kill-memfd");
}

/* The capture's file would kill: the memfd needs none. */
Test(faults, seccomp_that_would_kill_for_the_file_takes_the_memfd)
{
	stats_through_the_way_left("kill-creat");
}

/*
 * A filter that lets the stub page be made but would kill the process
 * for both the capture's memfd and its file's openat (O_CREAT): `stats`,
 * whose malloc_info() writes into one of them, refuses before the call
 * in one line naming the filter's action, exit 6 as for a filter found
 * at the attach (memsnap(1)).  It once exited 5, "the allocator cannot
 * do that".
 */
Test(faults, seccomp_that_would_kill_for_the_capture_file_is_unsafe)
{
	const char *const args[] = { "--pid", pidstr, "stats", NULL };
	struct run r;

	start_fault("--seccomp", "kill-both");
	cr_assert_not_null(strstr(fx.ready, "kill-both"), "%s", fx.ready);
	cr_assert_eq(run_memsnap(&r, args), 0);
	assert_survived(&r, "kill-both");
	cr_assert_eq(r.status, 6, "exit %d, not 6 (unsafe): %s", r.status,
		     r.err);
	cr_assert(strstr(r.err, "seccomp filter would kill the process"),
		  "the filter's action is not named: %s", r.err);
	run_free(&r);
}

/*
 * The same filter behind a status file of 15 KiB: 2000 supplementary
 * groups push "Seccomp:" (and Threads:, VmRSS:) far past the first page,
 * and a status read cut short must not look like "no filter" (the old
 * memsnap mapped its stub and the filter killed the target).
 */
Test(faults, seccomp_behind_a_long_status)
{
	char path[PATH_MAX], status[64];
	char *argv[] = { path, (char *)"--groups", (char *)"2000",
			 (char *)"--seccomp", (char *)"kill-exec", NULL };
	struct stat st;
	struct run r;
	int rc;

	fixture_path("fault-target", path, sizeof(path));
	rc = fixture_start(&fx, argv, NULL, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
	snprintf(status, sizeof(status), "/proc/%d/status", (int)fx.pid);
	cr_assert_eq(stat(status, &st), 0);
	call_on(&fx, &r, thread_of(&fx, "idle"), "add3", "1", NULL);
	assert_survived(&r, "kill-exec behind 2000 groups");
	cr_assert_neq(r.status, 0, "the filter kills on an executable mmap: memsnap must refuse");
	cr_assert_not_null(strstr(r.err, "seccomp"), "%s", r.err);
	run_free(&r);
	/* and the process's own facts, after its Groups: line, are read */
	{
		const char *info[] = { "--pid", pidstr, "info", "--no-attach",
				       NULL };

		cr_assert_eq(run_memsnap(&r, info), 0);
		cr_assert_eq(r.status, 0, "%s", r.err);
		cr_assert_not_null(strstr(r.out, "\nthreads   3\n"), "%s",
				   r.out);
		run_free(&r);
	}
}

/* ---- memsnap short of file descriptors or memory ------------------------ */

/* The commands of the resource tests, on the jemalloc target. */
static void limited_commands(const char **cmds[4], char *out, size_t size)
{
	static const char *info[] = { "--pid", pidstr, "info", NULL };
	static const char *dump[] = { "--pid", pidstr, "dump", "-o", NULL,
				      NULL };
	static const char *prof[] = { "--pid", pidstr, "prof", "on", NULL };
	static const char *call[] = { "--pid", pidstr, "call",
				      "malloc_usable_size", "0", NULL };

	snprintf(out, size, "%s/limited.heap", out_dir);
	dump[4] = out;
	cmds[0] = info;
	cmds[1] = dump;
	cmds[2] = prof;
	cmds[3] = call;
}

/*
 * memsnap under shell limit @pre: whatever it manages, it exits with a
 * documented code, one line (plus warnings for info), writes no output
 * on failure, and leaves the target untouched.
 */
static void limited_run(const char *pre, const char *const args[],
			const char *out, struct run *r)
{
	char when[128];

	unlink(out);
	cr_assert_eq(run_memsnap_after(r, pre, args), 0);
	snprintf(when, sizeof(when), "'%s' memsnap %s", pre, args[2]);
	cr_assert(r->status <= 10, "%s: exit %d: %s", when, r->status, r->err);
	if (r->status) {
		/* The error, and at most one warning before it. */
		cr_assert(count_lines(r->err) == 1 || count_lines(r->err) == 2,
			  "%s: %s", when, r->err);
		/* info prints what it found before it failed; the others
		 * print nothing. */
		if (strcmp(args[2], "info"))
			cr_assert_str_empty(r->out, "%s", when);
		cr_assert_eq(access(out, F_OK), -1, "%s: output written", when);
	} else {
		cr_assert_leq(count_lines(r->err), 2, "%s: %s", when, r->err);
	}
	assert_untouched(&fx, when);
	assert_nothing_left();
}

Test(faults, few_file_descriptors)
{
	const char **cmds[4];
	char out[PATH_MAX + 32], pre[64];
	int n, k, failed = 0;

	start_je();
	limited_commands(cmds, out, sizeof(out));
	/* Below 4, the dynamic loader cannot open memsnap's libraries. */
	for (n = 4; n <= 24; n++) {
		snprintf(pre, sizeof(pre), "ulimit -n %d", n);
		for (k = 0; k < 4; k++) {
			struct run r;

			limited_run(pre, cmds[k], out, &r);
			failed += r.status != 0;
			run_free(&r);
		}
	}
	/* Those limits must have bitten somewhere. */
	cr_assert_gt(failed, 0, "no run failed: the limit did nothing");
}

/*
 * A process that maps more object files than memsnap may open: every
 * command fails with the reason (memsnap's limit), never "no allocator"
 * or "no such function" or "the process exited"; with the limit the
 * shell gave, the same commands work.
 */
Test(faults, more_objects_than_descriptors)
{
	static const char *const cmds[][5] = {
		{ "info", NULL }, { "stats", NULL }, { "trim", NULL },
		{ "call", "malloc_usable_size", "0", NULL },
	};
	char path[PATH_MAX], lib[PATH_MAX], count[] = "150";
	char *argv[] = { path, count, lib, NULL };
	size_t k;
	int rc;

	fixture_path("many-objects", path, sizeof(path));
	fixture_path("libmany.so", lib, sizeof(lib));
	rc = fixture_start(&fx, argv, NULL, 20000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
	for (k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++) {
		const char *argv_m[8] = { "--pid", pidstr };
		struct run r;
		size_t i;

		for (i = 0; cmds[k][i]; i++)
			argv_m[2 + i] = cmds[k][i];
		cr_assert_eq(run_memsnap_after(&r, "ulimit -n 100", argv_m), 0);
		cr_expect_eq(r.status, 1, "%s: exit %d: %s", cmds[k][0],
			     r.status, r.err);
		cr_expect_not_null(strstr(r.err, "Too many open files in memsnap (ulimit -n is 100;"),
				   "%s: %s", cmds[k][0], r.err);
		cr_expect_eq(count_lines(r.err), 1, "%s: %s", cmds[k][0],
			     r.err);
		run_free(&r);
		assert_untouched(&fx, cmds[k][0]);

		cr_assert_eq(run_memsnap(&r, argv_m), 0);
		cr_expect_eq(r.status, 0, "%s without the limit: exit %d: %s",
			     cmds[k][0], r.status, r.err);
		run_free(&r);
		assert_untouched(&fx, cmds[k][0]);
	}
}

/*
 * Short of descriptors, memsnap must say so: not blame the target
 * (no allocator, no such function, the process exited).
 */
Test(faults, few_file_descriptors_are_named)
{
	const char **cmds[4];
	char out[PATH_MAX + 32], pre[64];
	int n, k;

	start_je();
	limited_commands(cmds, out, sizeof(out));
	for (n = 4; n <= 24; n++) {
		snprintf(pre, sizeof(pre), "ulimit -n %d", n);
		for (k = 0; k < 4; k++) {
			struct run r;

			cr_assert_eq(run_memsnap_after(&r, pre, cmds[k]), 0);
			if (r.status) {
				cr_expect_not_null(strstr(r.err,
							  "Too many open files"),
						   "ulimit -n %d, %s: exit %d: %s",
						   n, cmds[k][2], r.status, r.err);
				cr_expect(r.status != 3 && r.status != 5,
					  "ulimit -n %d, %s: exit %d: %s", n,
					  cmds[k][2], r.status, r.err);
			}
			run_free(&r);
		}
	}
	unlink(out);
	assert_untouched(&fx, "after the runs");
}

/* The smallest RLIMIT_AS (KiB, to 64 KiB) under which memsnap starts. */
static long memsnap_floor_kib(void)
{
	static const char *const version[] = { "--version", NULL };
	long lo = 1024, hi = 64 * 1024;

	while (hi - lo > 64) {
		long mid = (lo + hi) / 2;
		char pre[64];
		struct run r;

		snprintf(pre, sizeof(pre), "ulimit -v %ld", mid);
		cr_assert_eq(run_memsnap_after(&r, pre, version), 0);
		if (r.status == 0)
			hi = mid;
		else
			lo = mid;
		run_free(&r);
	}
	return hi;
}

/*
 * RLIMIT_AS from where memsnap barely starts to 4 MiB above, in 32 KiB
 * steps: every allocation in memsnap fails somewhere along the way.
 */
Test(faults, small_address_space)
{
	const char **cmds[4];
	char out[PATH_MAX + 32], pre[64];
	long floor_kib, kib;
	int k, failed = 0, ok = 0;

	if (memsnap_sanitized())
		skip_test("memsnap is built with ASan, which needs far more "
			     "address space than any limit tested here");
	start_je();
	limited_commands(cmds, out, sizeof(out));
	floor_kib = memsnap_floor_kib();
	for (kib = floor_kib; kib <= floor_kib + 4096; kib += 32) {
		snprintf(pre, sizeof(pre), "ulimit -v %ld", kib);
		for (k = 0; k < 4; k++) {
			struct run r;

			limited_run(pre, cmds[k], out, &r);
			if (r.status) {
				failed++;
				/* ENOMEM named, or taken for unreadable
				 * objects (the bug of
				 * few_file_descriptors_are_named). */
				cr_assert(strstr(r.err, "memory") ||
						  strstr(r.err, "no allocator") ||
						  strstr(r.err, "no function"),
					  "%s, %s: %s", pre, cmds[k][2], r.err);
			} else {
				ok++;
			}
			run_free(&r);
		}
	}
	cr_log_info("RLIMIT_AS %ld..%ld KiB: %d runs failed cleanly, %d "
		    "succeeded", floor_kib, floor_kib + 4096, failed, ok);
	cr_assert_gt(failed, 0, "no run failed: the limit did nothing");
	cr_assert_gt(ok, 0, "no run succeeded even with 4 MiB to spare");
}
