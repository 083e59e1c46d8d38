/*
 * The world stop (injector/world.c) under threads that are born and end
 * all the time: tests/fixtures/world_target.c, with its allocator linked
 * in (jemalloc; glibc in a static program), so that `prof on --sampler`
 * and `prof off` write malloc's entry point with every thread stopped.
 * Its chain of threads, each of which starts its successor and ends,
 * leaves memsnap a thread it has just listed and that is gone before it
 * is seized, and a successor it has not listed yet.  Proven here:
 *
 *   - at the moment memsnap writes malloc's first bytes, every thread
 *     of the process is in a ptrace stop, traced by that memsnap, and
 *     the process counts no other: seen in /proc while this test holds
 *     memsnap at its pwrite64 into /proc/PID/mem at malloc's address
 *     (memsnap runs under this test's ptrace, every system call of it
 *     slowed, which widens the moment between listing a thread and
 *     seizing it), 20 times each for on and off
 *   - 50 rounds of on and off at full speed: no thread of the target saw
 *     malloc's bytes change while it had not stopped (its own witness,
 *     from its voluntary context switches), and the watcher thread did
 *     see the writes, so the witness works
 *   - the same, 10 rounds, in a process whose main thread has ended (a
 *     zombie that cannot be seized and runs no more code)
 *
 * After every round no thread is stopped or traced, and the target's
 * ping says every allocation came back right and every thread, chain and
 * spawner still moves on.
 */
#include "tests/lib/fault.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static struct fixture fx = { .pid = -1 };
static char pidstr[16];
static uint64_t malloc_at;	/* the fixture's malloc, from its ready line */

static void teardown(void)
{
	fixture_stop(&fx);
}

static void setup(void)
{
	skip_cleanup = teardown;
}

TestSuite(world, .init = setup, .fini = teardown, .timeout = 600);

/* Start fixture @name (with its main thread ended: @main_exits) and its
 * threads. */
static void start(const char *name, bool main_exits)
{
	char path[PATH_MAX], reply[128], arg[] = "main-exits", st;
	char *argv[] = { path, main_exits ? arg : NULL, NULL };
	const char *p;
	int rc, tries;

	fixture_path(name, path, sizeof(path));
	if (access(path, X_OK))
		skip_test("fixture %s not built", path);
	rc = fixture_start(&fx, argv, NULL, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
	p = strstr(fx.ready, " malloc=0x");
	cr_assert_not_null(p, "ready line: %s", fx.ready);
	malloc_at = strtoull(p + 8, NULL, 16);
	cr_assert_neq(malloc_at, 0, "ready line: %s", fx.ready);
	/* The ready line comes before pthread_exit: wait for the zombie. */
	for (tries = 0; main_exits && (st = fixture_state(&fx)) != 'Z' &&
			tries < 2000;
	     tries++)
		fault_sleep_ms(1);
	cr_assert(!main_exits || fixture_state(&fx) == 'Z',
		  "the main thread did not exit (state %c)",
		  fixture_state(&fx));
	rc = fixture_command(&fx, 't', reply, sizeof(reply), 10000);
	cr_assert_eq(rc, 0, "command t: %s", strerror(-rc));
	cr_assert(!strncmp(reply, "ok threads=", 11), "command t: %s", reply);
}

/* Thread @tid of the fixture, seen by task_state(): false with why in
 * @why if it is stopped or traced.  Read again when its status had no
 * TracerPid: a thread that exits between the two reads of task_state()
 * gives none, and is gone, not traced. */
static bool thread_free(pid_t tid, char *why, size_t size)
{
	pid_t tracer;
	char st;
	int tries;

	for (tries = 0; tries < 2; tries++) {
		if (!task_state(fx.pid, tid, &st, &tracer))
			return true;	/* gone */
		if (tracer != -1)
			break;
	}
	if (st == 't' || st == 'T' || (tracer && (tracer != -1 ||
						   (st != 'Z' && st != 'X')))) {
		snprintf(why, size, "thread %d: state %c, traced by %d",
			 (int)tid, st, (int)tracer);
		return false;
	}
	return true;
}

static bool world_free(char *why, size_t size)
{
	char path[64];
	struct dirent *e;
	bool ok = true;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)fx.pid);
	d = opendir(path);
	if (!d) {
		snprintf(why, size, "%s: %s", path, strerror(errno));
		return false;
	}
	while (ok && (e = readdir(d)))
		if (atoi(e->d_name) > 0)
			ok = thread_free((pid_t)atoi(e->d_name), why, size);
	closedir(d);
	return ok;
}

/*
 * assert_untouched() for a process whose threads come and go: every
 * thread free (polled for up to 2 s: one just let go may take a moment
 * to leave its stop), and the fixture says it is well (asked directly:
 * fixture_healthy() takes a zombie main thread for a dead process).
 */
static void assert_free(const char *when)
{
	long deadline = fault_now_ms() + 2000;
	char why[256], reply[256];
	int rc;

	while (!world_free(why, sizeof(why)) && fault_now_ms() < deadline)
		fault_sleep_ms(1);
	cr_assert(world_free(why, sizeof(why)), "%s: pid %d: %s", when,
		  (int)fx.pid, why);
	/* as long as fixture_healthy() waits: its check polls for 20 s */
	rc = fixture_command(&fx, 'p', reply, sizeof(reply), 90000);
	cr_assert_eq(rc, 0, "%s: fixture %d did not answer a ping: %s", when,
		     (int)fx.pid, strerror(-rc));
	cr_assert_str_eq(reply, "ok", "%s: fixture %d says: %s", when,
			 (int)fx.pid, reply);
}

/* The fixture's 'w' counts: threads born, writes seen stopped and
 * running. */
static void witness(unsigned long *born, unsigned long *stopped,
		    unsigned long *running)
{
	char reply[128];
	int rc = fixture_command(&fx, 'w', reply, sizeof(reply), 10000);

	cr_assert_eq(rc, 0, "command w: %s", strerror(-rc));
	cr_assert_eq(sscanf(reply, "ok born=%lu stopped=%lu running=%lu",
			    born, stopped, running), 3, "command w: %s",
		     reply);
}

/* malloc's first 16 bytes in the fixture, read through /proc/PID/mem. */
static void malloc_bytes(unsigned char *b)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)fx.pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(pread(fd, b, 16, (off_t)malloc_at), 16, "%s: %s", path,
		     strerror(errno));
	close(fd);
}

static const char *chomp(char *s)
{
	size_t n = strlen(s);

	while (n && s[n - 1] == '\n')
		s[--n] = '\0';
	return s;
}

/* A memsnap without `prof on --sampler`: nothing to test. */
static void need_sampler(struct run *r)
{
	if (r->status == 2 && strstr(r->err, "--sampler"))
		skip_test("this memsnap has no `prof on --sampler` (exit 2: "
			  "%s)", chomp(r->err));
}

/* `prof on --sampler` (@on) or `prof off` ended well, in @r. */
static void assert_prof(struct run *r, bool on)
{
	if (on)
		need_sampler(r);
	cr_assert_eq(r->status, 0, "prof %s: exit %d: %s", on ? "on" : "off",
		     r->status, r->err);
	cr_assert(strstr(r->out, on ? "sampler on" : "sampler off"),
		  "prof %s printed '%s'", on ? "on" : "off", r->out);
}

/* `prof on --sampler` (@on) or `prof off`, ended well. */
static void prof(bool on)
{
	const char *const args_on[] = { "--pid", pidstr, "prof", "on",
					"--sampler", NULL };
	const char *const args_off[] = { "--pid", pidstr, "prof", "off",
					 NULL };
	struct run r;
	int rc = run_memsnap(&r, on ? args_on : args_off);

	cr_assert_eq(rc, 0, "run_memsnap: %s", strerror(-rc));
	assert_prof(&r, on);
	run_free(&r);
}

/* ---- every thread stopped at the write ---------------------------------- */

static char offender[256];	/* the first thread found running */
static unsigned int held;	/* threads found stopped */

/* memsnap's pwrite64 into malloc's first bytes: the patch, or its undo. */
static bool writes_malloc(const struct sc_entry *e)
{
	return e->nr == SYS_pwrite64 && e->args[3] >= malloc_at &&
	       e->args[3] < malloc_at + 16;
}

/* The Threads: line of /proc/PID/status: every thread of the process,
 * as one count (-1: unreadable). */
static long threads_of(pid_t pid)
{
	char path[64], buf[4096];
	const char *p;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strstr(buf, "\nThreads:");
	return p ? atol(p + 9) : -1;
}

/*
 * With memsnap (@m) held at that write: every thread of the fixture in
 * a ptrace stop of @m's (or dead), and as many as the process counts
 * before and after the look (a running thread that exits as it is read
 * can pass unseen, and a listing of task/ can miss one; the count
 * cannot).  Then memsnap goes on.
 */
static bool check_world(pid_t m)
{
	char path[64];
	struct dirent *e;
	long before, after;
	DIR *d;

	before = threads_of(fx.pid);
	snprintf(path, sizeof(path), "/proc/%d/task", (int)fx.pid);
	d = opendir(path);
	if (!d) {
		snprintf(offender, sizeof(offender), "%s: %s", path,
			 strerror(errno));
		return false;
	}
	while ((e = readdir(d))) {
		pid_t tid = (pid_t)atoi(e->d_name), tracer;
		char st;

		if (tid <= 0 || !task_state(fx.pid, tid, &st, &tracer))
			continue;	/* gone meanwhile */
		if ((st == 't' && tracer == m) || st == 'Z' || st == 'X') {
			held++;
			continue;
		}
		if (!offender[0])
			snprintf(offender, sizeof(offender),
				 "thread %d in state %c, traced by %d",
				 (int)tid, st, (int)tracer);
	}
	closedir(d);
	after = threads_of(fx.pid);
	if (!offender[0] && (before != held || after != held))
		snprintf(offender, sizeof(offender),
			 "%ld then %ld threads in the process, %u of them "
			 "stopped", before, after, held);
	return false;
}

/*
 * Whether memsnap, run traced in @r, refused to write: the threads of
 * the fixture kept appearing faster than it could stop them.  Under
 * this test's ptrace every system call of memsnap waits for the test to
 * be scheduled, and on a loaded machine a pass over the threads can
 * take longer than a chain thread lives, until the stop gives up: no
 * write then, nothing changed, which is correct.
 */
static bool refused(const struct run *r)
{
	return r->status == 6 && strstr(r->err, "kept appearing") &&
	       count_lines(r->err) == 1;
}

/*
 * memsnap traced, held at its write of malloc's entry for `prof on`
 * (@on) or `prof off`: every thread stopped then.  false if it refused
 * instead (refused()): then nothing was written.
 */
static bool checked_write(bool on, int round)
{
	const char *const args_on[] = { "--pid", pidstr, "prof", "on",
					"--sampler", NULL };
	const char *const args_off[] = { "--pid", pidstr, "prof", "off",
					 NULL };
	const char *what = on ? "on" : "off";
	bool matched;
	struct run r;

	offender[0] = '\0';
	held = 0;
	matched = run_traced(on ? args_on : args_off, writes_malloc,
			     check_world, &r);
	if (!matched && refused(&r)) {
		run_free(&r);
		return false;
	}
	assert_prof(&r, on);
	cr_assert(matched, "round %d: prof %s never wrote malloc's entry at "
		  "%#" PRIx64, round, what, malloc_at);
	cr_assert(!offender[0], "round %d, prof %s: while malloc's entry was "
		  "written, %s (memsnap: %s)", round, what, offender, r.err);
	/* the main thread, the watcher, the spawner */
	cr_assert_geq(held, 3, "round %d: %u threads seen", round, held);
	run_free(&r);
	return true;
}

static void stopped_at_every_write(const char *fixture)
{
	unsigned long born0, born, stopped, running;
	unsigned char b0[16], b[16];
	int i, checked = 0, refusals = 0;
	char when[64];

	start(fixture, false);
	malloc_bytes(b0);
	witness(&born0, &stopped, &running);
	for (i = 0; i < 20; i++) {
		if (checked_write(true, i)) {
			checked++;
			snprintf(when, sizeof(when), "round %d, after prof on",
				 i);
			assert_free(when);
			if (checked_write(false, i)) {
				checked++;
			} else {
				refusals++;
				prof(false);	/* untraced, it gets through */
			}
		} else {
			refusals++;
		}
		snprintf(when, sizeof(when), "round %d, after prof off", i);
		assert_free(when);
		malloc_bytes(b);
		cr_assert(!memcmp(b, b0, sizeof(b)),
			  "round %d: malloc's first bytes not as they were", i);
	}
	if (refusals)
		fprintf(stderr, "world: %d of 40 writes refused: threads "
			"kept appearing under the test's ptrace\n", refusals);
	/* refusals only where this machine is loaded far beyond its CPUs */
	cr_assert_geq(checked, 10, "only %d writes seen (%d refused)",
		      checked, refusals);
	witness(&born, &stopped, &running);
	cr_assert_gt(born, born0, "no thread was born during the rounds");
	cr_assert_eq(running, 0, "%lu writes seen by a running thread",
		     running);
}

Test(world, every_thread_stopped_at_the_write_linked)
{
	stopped_at_every_write("world-target-je-static");
}

Test(world, every_thread_stopped_at_the_write_static)
{
	stopped_at_every_write("world-target-static");
}

/* memsnap is SIGKILLed where it stands. */
static bool kill_here(pid_t m)
{
	(void)m;
	return true;
}

/*
 * memsnap SIGKILLed at its write of malloc's entry, every thread held
 * (those born to a clone meanwhile too, traced by memsnap without ever
 * having been seized): the kernel lets them all go, and the next `prof
 * off` finds the sampler and puts everything back, 10 times.  A run
 * that refused instead (refused(): most of them on an emulated CPU,
 * where the chain outruns a traced memsnap) is not a kill: the rounds
 * go on until 10 kills or 60 runs, and 3 kills are the least.
 */
static void killed_at_the_write(const char *fixture)
{
	const char *const on[] = { "--pid", pidstr, "prof", "on",
				   "--sampler", NULL };
	unsigned char b0[16], b[16];
	int i, kills = 0, refusals = 0;
	char when[64];
	struct run r;

	start(fixture, false);
	malloc_bytes(b0);
	for (i = 0; i < 60 && kills < 10; i++) {
		if (!run_traced(on, writes_malloc, kill_here, &r) &&
		    refused(&r)) {
			run_free(&r);	/* no write: see refused() */
			refusals++;
			continue;
		}
		need_sampler(&r);
		cr_assert_eq(r.status, 128 + SIGKILL,
			     "round %d: memsnap was not killed: exit %d: %s",
			     i, r.status, r.err);
		kills++;
		run_free(&r);
		snprintf(when, sizeof(when), "round %d, memsnap killed", i);
		assert_free(when);
		prof(false);
		snprintf(when, sizeof(when), "round %d, after prof off", i);
		assert_free(when);
		malloc_bytes(b);
		cr_assert(!memcmp(b, b0, sizeof(b)),
			  "round %d: malloc's first bytes changed", i);
	}
	if (refusals)
		fprintf(stderr, "world: %d of %d runs refused: threads kept "
			"appearing under the test's ptrace\n", refusals, i);
	cr_assert_geq(kills, 3, "only %d of %d runs reached the write", kills,
		      i);
}

Test(world, killed_at_the_write_linked)
{
	killed_at_the_write("world-target-je-static");
}

/* ---- at full speed: the target's own witness ----------------------------- */

static void no_thread_runs_through(const char *fixture, bool main_exits,
				   int rounds)
{
	unsigned long born0, born, stopped0, stopped, running;
	char when[64];
	int i;

	start(fixture, main_exits);
	witness(&born0, &stopped0, &running);
	for (i = 0; i < rounds; i++) {
		prof(true);
		snprintf(when, sizeof(when), "round %d, after prof on", i);
		assert_free(when);
		prof(false);
		snprintf(when, sizeof(when), "round %d, after prof off", i);
		assert_free(when);
	}
	witness(&born, &stopped, &running);
	cr_assert_eq(running, 0, "%lu writes seen by a running thread",
		     running);
	/* the witness works: the watcher (at least) saw the writes */
	cr_assert_gt(stopped, stopped0, "no thread saw malloc's bytes change");
	cr_assert_gt(born, born0, "no thread was born during the rounds");
}

Test(world, no_thread_runs_through_the_write_linked)
{
	no_thread_runs_through("world-target-je-static", false, 50);
}

Test(world, no_thread_runs_through_the_write_static)
{
	no_thread_runs_through("world-target-static", false, 50);
}

/*
 * A process whose main thread has ended (pthread_exit): a zombie, listed
 * in task/ while the process lives on, which PTRACE_SEIZE refuses
 * (EPERM) and which runs no more code.  Not a thread to stop, nor a
 * reason to fail: prof on once failed there, naming memsnap itself as
 * the tracer in the way.
 */
Test(world, main_thread_exited_linked)
{
	no_thread_runs_through("world-target-je-static", true, 10);
}

/*
 * Threads that create processes sharing the memory (clone(CLONE_VM)
 * without CLONE_THREAD), one after another: one created by a thread
 * seized but not yet stopped is born traced to memsnap and held too,
 * though the process does not count it among its threads (once, the
 * world stop waited for the count to agree until it gave up).  50
 * rounds of on and off succeed.
 */
Test(world, processes_sharing_the_memory_linked)
{
	unsigned long cloned0, cloned;
	char reply[128], when[64];
	int i, rc;

	start("world-target-je-static", false);
	rc = fixture_command(&fx, 'v', reply, sizeof(reply), 10000);
	cr_assert_eq(rc, 0, "command v: %s", strerror(-rc));
	cr_assert_str_eq(reply, "ok", "command v: %s", reply);
	rc = fixture_command(&fx, 'c', reply, sizeof(reply), 10000);
	cr_assert_eq(rc, 0, "command c: %s", strerror(-rc));
	cr_assert_eq(sscanf(reply, "ok cloned=%lu", &cloned0), 1,
		     "command c: %s", reply);
	for (i = 0; i < 50; i++) {
		prof(true);
		snprintf(when, sizeof(when), "round %d, after prof on", i);
		assert_free(when);
		prof(false);
		snprintf(when, sizeof(when), "round %d, after prof off", i);
		assert_free(when);
	}
	rc = fixture_command(&fx, 'c', reply, sizeof(reply), 10000);
	cr_assert_eq(rc, 0, "command c: %s", strerror(-rc));
	cr_assert_eq(sscanf(reply, "ok cloned=%lu", &cloned), 1,
		     "command c: %s", reply);
	cr_assert_gt(cloned, cloned0, "the cloner made no process");
}
