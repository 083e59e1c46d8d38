/*
 * Threads that must never be borrowed for an allocator call, and threads
 * that must not notice being borrowed, on the soak target
 * (tests/fixtures/soak_target.c): its fork thread forks every 5 ms (a
 * thread inside fork() holds the allocator's locks, so a call into the
 * allocator from there waits for ever), and its sigwait thread sits in
 * sigwaitinfo(), which the kernel never restarts after a stop.  The
 * target checks itself (no EINTR, registers, progress of every thread)
 * at every ping.  A thread with children (parent_target.c) is passed
 * over: while it is traced, its children's SIGCHLD would wake others.
 * A thread inside the allocator through a tail call (tail_target.c)
 * is refused; one asleep inside a signal handler (handler_target.c) is
 * not, and only such a stack has the unwinder started for it.
 */
#include "../lib/fault.h"
#include "../lib/fixture.h"
#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <unistd.h>

static struct fixture fx = { .pid = -1 };
static char scratch[PATH_MAX];	/* made by the test that needs one */

static void teardown(void)
{
	fixture_stop(&fx);
	scratch_cleanup(scratch);
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

static void start_with(const char *name, const char *arg, char *const env[])
{
	char path[PATH_MAX];
	char *argv[] = { path, (char *)arg, NULL };

	fixture_path(name, path, sizeof(path));
	cr_assert_eq(fixture_start(&fx, argv, env, 10000), 0);
}

static void start(const char *name, char *const env[])
{
	start_with(name, NULL, env);
}

/*
 * memsnap --pid P --thread @tid --timeout 30 @a @b: never a timeout.  A
 * call made where the thread holds the allocator's locks never returns,
 * so any bound finds it; a generous one keeps a busy machine (the load
 * stage runs these beside CPU hogs) from looking like one.
 */
static int borrow(int tid, const char *a, const char *b)
{
	char pid[16], t[16];
	const char *args[] = { "-q", "--pid", pid, "--thread", t,
			       "--timeout", "30", a, b, NULL };
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

/*
 * The fork thread has children while it waits for them, and --thread
 * makes memsnap borrow it anyway: their SIGCHLD may then wake the epoll
 * and sigwait threads (EINTR), which SOAK_SIGCHLD_WAKES tells the target
 * to count rather than report.  Everything else must hold.
 */
Test(fences, fork_thread_jemalloc)
{
	char conf[] = "MALLOC_CONF=prof:true,prof_active:false";
	char wakes[] = "SOAK_SIGCHLD_WAKES=1";
	char *env[] = { conf, wakes, NULL };
	int i, fork_tid;

	/* Seen in the arm64 guest without memsnap attached. */
	if (!strncmp(jemalloc_version(), "5.1.", 4))
		cr_skip_test("jemalloc %s: a child forked while another thread "
			     "holds one of its extent locks hangs in "
			     "extent_lock2(), with or without memsnap",
			     jemalloc_version());
	start("soak-target-je", env);
	fork_tid = tid_of("fork");
	for (i = 0; i < 60; i++)
		borrow(fork_tid, i % 2 ? "prof" : "stats", i % 2 ? "on" : NULL);
	fixture_assert_healthy(&fx);
}

Test(fences, fork_thread_glibc)
{
	char wakes[] = "SOAK_SIGCHLD_WAKES=1";
	char *env[] = { wakes, NULL };
	int i, fork_tid;

	start("soak-target", env);
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

/* memsnap --pid P [--thread @tid] --timings stats: the tid it borrowed. */
static int stats_on(int tid, char **err)
{
	char pid[16], t[16];
	const char *args[] = { "--pid", pid, "--timings", "stats", NULL, NULL,
			       NULL };
	struct run r;
	const char *p;
	int got;

	snprintf(pid, sizeof(pid), "%d", (int)fx.pid);
	if (tid) {
		snprintf(t, sizeof(t), "%d", tid);
		args[3] = "--thread";
		args[4] = t;
		args[5] = "stats";
	}
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "stats: exit %d: %s", r.status, r.err);
	p = strstr(r.err, "memsnap: timings: pid ");
	cr_assert_not_null(p, "no timings line in '%s'", r.err);
	p = strstr(p, " tid ");
	cr_assert_not_null(p, "no tid in '%s'", r.err);
	got = atoi(p + 5);
	if (err)
		*err = strdup(r.err);
	run_free(&r);
	return got;
}

/* The parent thread sits in waitpid(), which memsnap likes better than
 * the main thread's read(): unless it has children. */
Test(fences, parent_thread_passed_over)
{
	int i, parent;

	start("parent-target", NULL);
	parent = tid_of("parent");
	for (i = 0; i < 5; i++) {
		int tid = stats_on(0, NULL);

		cr_assert_neq(tid, parent, "borrowed the parent thread %d",
			      parent);
		cr_assert_eq(tid, (int)fx.pid, "borrowed %d, not the main "
			     "thread %d", tid, (int)fx.pid);
	}
	fixture_assert_healthy(&fx);
}

/* With no other thread to wake, a parent is borrowed as any thread. */
Test(fences, only_thread_may_be_a_parent)
{
	start_with("parent-target", "--single", NULL);
	cr_assert_eq(stats_on(0, NULL), (int)fx.pid);
	fixture_assert_healthy(&fx);
}

/* --thread names a parent: memsnap does it, and says what it risks. */
Test(fences, thread_option_warns_of_children)
{
	char *err = NULL;
	int parent;

	start("parent-target", NULL);
	parent = tid_of("parent");
	cr_assert_eq(stats_on(parent, &err), parent);
	cr_assert_not_null(strstr(err, "has child processes"),
			   "no warning in '%s'", err);
	free(err);
	fixture_assert_healthy(&fx);
}

/*
 * malloc_info() tail-calls a local function of glibc's malloc.c, so a
 * thread in there has no frame of a public function on its stack (the
 * same local functions take the arena locks).  The fence covers the
 * local functions around the public ones: memsnap must refuse it.
 */
Test(fences, tail_called_internals_are_fenced)
{
	char pid[16], t[16];
	const char *args[] = { "--pid", pid, "--thread", t, "stats", NULL };
	struct run r;

	start("tail-target", NULL);
	snprintf(pid, sizeof(pid), "%d", (int)fx.pid);
	snprintf(t, sizeof(t), "%d", tid_of("inside"));
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 6, "borrowed a thread inside malloc_info(): "
		     "exit %d: %s", r.status, r.err);
	cr_assert_not_null(strstr(r.err, "is in glibc"), "%s", r.err);
	run_free(&r);
	/* memsnap chooses: the main thread, in read() */
	cr_assert_eq(stats_on(0, NULL), (int)fx.pid);
	fixture_assert_healthy(&fx);
}

/*
 * A thread asleep inside a signal handler, with the address of a call
 * in malloc() in the handler's frame: the check unwinds through the
 * signal frame (x86-64: libc's restorer; AArch64: the vdso's
 * trampoline, which libunwind knows by its code) to the thread's start,
 * and borrows the thread.  The handler then returns as if nothing
 * happened.
 */
Test(fences, thread_asleep_in_a_signal_handler_is_borrowed)
{
	char reply[128];
	int tid;

	start("handler-target", NULL);
	tid = tid_of("handler");
	cr_assert_eq(stats_on(tid, NULL), tid);
	cr_assert_eq(stats_on(tid, NULL), tid);
	fixture_assert_healthy(&fx);
	cr_assert_eq(fixture_command(&fx, 'r', reply, sizeof(reply), 5000), 0);
	cr_assert_str_eq(reply, "ok", "the handler: %s", reply);
	fixture_assert_healthy(&fx);
}

/*
 * The unwinder's sandbox (a fork and its start-up) is made before the
 * stop for a thread whose stack, read then, shows a return address into
 * the allocator, and not at all for a clean one: `--timings` says which.
 */
Test(fences, unwinder_started_only_for_a_stack_that_needs_it)
{
	char reply[128], *err;

	start("handler-target", NULL);
	cr_assert_eq(stats_on(tid_of("handler"), &err), tid_of("handler"));
	cr_assert_not_null(strstr(err, "the unwinder's sandbox started before "
				       "the stop"), "%s", err);
	free(err);
	/* asleep in read() on a fresh stack: nothing to unwind */
	cr_assert_eq(stats_on(tid_of("idle"), &err), tid_of("idle"));
	cr_assert_null(strstr(err, "the unwinder's sandbox"), "%s", err);
	free(err);
	fixture_assert_healthy(&fx);
	cr_assert_eq(fixture_command(&fx, 'r', reply, sizeof(reply), 5000), 0);
	cr_assert_str_eq(reply, "ok", "the handler: %s", reply);
	fixture_assert_healthy(&fx);
}

/* unwind-trap, its only thread asleep in read() inside serve(), whose
 * stack holds the address of a call inside malloc(). */
static void start_trap(void)
{
	static char place[PATH_MAX + 16];
	char *env[] = { place, NULL };

	cr_assert_eq(scratch_make("memsnap-test-fences", scratch,
				  sizeof(scratch)), 0);
	snprintf(place, sizeof(place), "ATTACK_PLACE=%s", scratch);
	start("unwind-trap", env);
}

/*
 * Its stack pointer once its thread is back asleep in read() (it has
 * just answered a command): /proc's "NR a0 .. a5 SP PC" line, polled
 * for up to 5 s while it says "running".
 */
static uint64_t asleep_sp(void)
{
	char path[64], line[512];
	long deadline = fault_now_ms() + 5000;
	uint64_t sp;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)fx.pid);
	for (;;) {
		f = fopen(path, "r");
		cr_assert_not_null(f, "%s: %s", path, strerror(errno));
		cr_assert_not_null(fgets(line, sizeof(line), f));
		fclose(f);
		if (sscanf(line, "%*d %*x %*x %*x %*x %*x %*x %" SCNx64,
			   &sp) == 1)
			return sp;
		cr_assert_lt(fault_now_ms(), deadline, "%s", line);
		fault_sleep_ms(1);
	}
}

/* stats_on(0) on it, asleep: the check unwound it; its --timings
 * lines. */
static char *stats_unwound(void)
{
	char *err = NULL;

	asleep_sp();
	cr_assert_eq(stats_on(0, &err), (int)fx.pid);
	cr_assert_not_null(strstr(err, "the unwinder's sandbox started "
				       "before the stop"), "%s", err);
	return err;
}

/*
 * A thread asleep in a system call with a return address into malloc()
 * in a live frame (unwind-trap: main -> trap_through -> serve) must be
 * unwound at the stop.  Its stack as /proc shows it before the stop is
 * unwound first, while it runs, so the unwinder holds the CFI of every
 * object on the way; at the stop, nothing the unwind read has changed,
 * and it stands.  No page of the target is read for it while the
 * thread is held (before: 16 to 24, a few milliseconds of the stop).
 * On AArch64 it cannot stand (UNWIND_BEFORE_STOP_STANDS): the first
 * frames need the link register or the frame pointer, which /proc
 * does not show, so the unwind is made again at the stop, from pages
 * the child already holds.
 */
#ifdef __aarch64__
#define UNWIND_BEFORE_STOP_STANDS 0
#else
#define UNWIND_BEFORE_STOP_STANDS 1
#endif

Test(fences, unwind_at_the_stop_reads_nothing_more)
{
	char *err;
	int i;

	start_trap();
	for (i = 0; i < 2; i++) {
		err = stats_unwound();
		cr_assert_not_null(strstr(err, "; 0 pages of the target read "
					       "for it while the thread was "
					       "held"), "%s", err);
		cr_assert_eq(strstr(err, "; the unwind of its stack made "
					 "before the stop held") != NULL,
			     UNWIND_BEFORE_STOP_STANDS, "%s", err);
		free(err);
		fixture_assert_healthy(&fx);
	}
}

static uint64_t ra_slot, ra_was;

static void poke(uint64_t addr, uint64_t *old, uint64_t val)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)fx.pid);
	fd = open(path, O_RDWR | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	if (old)
		cr_assert_eq(pread(fd, old, 8, (off_t)addr), 8);
	cr_assert_eq(pwrite(fd, &val, 8, (off_t)addr), 8);
	close(fd);
}

/* Where the asleep thread's stack holds @value first, from its stack
 * pointer up (the fixture waits in read(): its stack stays). */
static uint64_t stack_word(uint64_t value)
{
	char path[64];
	uint64_t sp = asleep_sp(), w[512], at;
	int fd, i;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)fx.pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	for (at = sp; pread(fd, w, sizeof(w), (off_t)at) == sizeof(w);
	     at += sizeof(w))
		for (i = 0; i < 512; i++)
			if (w[i] == value) {
				close(fd);
				return at + 8 * (uint64_t)i;
			}
	close(fd);
	cr_assert_fail("%#" PRIx64 " is not on the stack above %#" PRIx64,
		       value, sp);
	return 0;
}

static bool seizes(const struct sc_entry *e)
{
	return e->nr == SYS_ptrace && e->args[0] == PTRACE_SEIZE;
}

/* After memsnap's unwind before the stop: serve()'s return address one
 * byte on (still inside trap_through(), the same frame for the CFI). */
static bool move_return_address(pid_t m)
{
	(void)m;
	poke(ra_slot, NULL, ra_was + 1);
	return false;
}

/*
 * The same stack, but a word the unwind read before the stop changes
 * before the seizure: that unwind must not stand for the one at the
 * stop, which is made again from the live stack.
 */
Test(fences, unwind_before_the_stop_yields_to_a_changed_stack)
{
	const char *args[] = { "--pid", NULL, "--timings", "stats", NULL };
	char pid[16], reply[64], *err;
	uint64_t now;
	struct run r;

	if (!UNWIND_BEFORE_STOP_STANDS)
		cr_skip_test("on this CPU the unwind before the stop needs the "
			     "link register and never stands");
	start_trap();
	cr_assert_eq(fixture_command(&fx, 'a', reply, sizeof(reply), 5000), 0);
	ra_was = strtoull(reply, NULL, 16);
	cr_assert_neq(ra_was, 0, "%s", reply);
	ra_slot = stack_word(ra_was);
	/* as it is, an unwind before the stop stands */
	err = stats_unwound();
	cr_assert_not_null(strstr(err, "made before the stop held"), "%s", err);
	free(err);

	snprintf(pid, sizeof(pid), "%d", (int)fx.pid);
	args[1] = pid;
	asleep_sp();
	cr_assert(run_traced(args, seizes, move_return_address, &r),
		  "memsnap never seized: exit %d: %s", r.status, r.err);
	poke(ra_slot, &now, ra_was);
	cr_assert_eq(now, ra_was + 1, "the word was %#" PRIx64, now);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_assert_not_null(strstr(r.err, "the unwinder's sandbox started "
					 "before the stop"), "%s", r.err);
	cr_assert_null(strstr(r.err, "made before the stop held"), "%s",
		       r.err);
	run_free(&r);
	fixture_assert_healthy(&fx);
}
