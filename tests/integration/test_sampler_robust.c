/*
 * The sampler under stress (the `sampler` suite; see test_sampler.c):
 * 20 rounds of on, dump and off while four threads allocate, check and
 * free, in a program on glibc, with jemalloc linked in and linked
 * statically; 30 runs of memsnap SIGKILLed at a random moment of
 * `prof on` or `prof off`; a thread held inside the bytes to patch,
 * stepped out of them or, when it cannot be, no safe moment to write.
 *
 *   MEMSNAP_FAULT_SEED=S   the kill delays of an earlier run (its seed is
 *                          printed)
 */
#include "tests/lib/fault.h"
#include "tests/lib/procsnap.h"
#include "tests/lib/sampler.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>

/*
 * Hooks swapped in and out under four threads that allocate, write,
 * check and free (or realloc) as fast as they can: 20 rounds of on,
 * dump, report and off.  The threads' own checks and their progress
 * are in every ping; at the end the GOT and the mappings are as they
 * were.
 */
static void threads_rounds(const char *fixture)
{
	struct got_snap *g0 = calloc(1, sizeof(*g0)), *g = calloc(1, sizeof(*g));
	struct maps_snap *m0 = calloc(1, sizeof(*m0)),
			 *m = calloc(1, sizeof(*m));
	struct folded *fo = calloc(1, sizeof(*fo));
	struct text_snap t0, t;
	char d[PATH_MAX + 32], reply[256], when[64];
	int i;

	cr_assert(g0 && g && m0 && m && fo, "calloc");
	start(fixture, NULL);
	got_take(fx.pid, g0);
	maps_take(fx.pid, m0);
	text_take(fx.pid, &t0);
	command_expect('t', "ok threads=4", reply, sizeof(reply));
	for (i = 0; i < 20; i++) {
		sampler_on(16384);
		dump_to("threads", 16384, d, sizeof(d));
		/* readable, whatever the threads were doing */
		folded_load(d, NULL, fo);
		folded_free(fo);
		sampler_off();
		snprintf(when, sizeof(when), "round %d", i);
		assert_untouched(&fx, when);
	}
	command_expect('T', "ok loops=", reply, sizeof(reply));
	cr_assert_gt(atol(reply + 9), 0, "the threads did nothing: %s",
		     reply);
	got_take(fx.pid, g);
	assert_same_got(g0, g, "after 20 rounds");
	maps_take(fx.pid, m);
	assert_same_perms(m0, m, "after 20 rounds");
	text_take(fx.pid, &t);
	assert_same_text(&t0, &t, "after 20 rounds");
	text_free(&t0);
	text_free(&t);
	/* every thread stopped, 40 times: none may see an EINTR */
	cr_assert_eq(waiter_eintr(), 0, "an epoll_wait failed with EINTR");
	free(g0);
	free(g);
	free(m0);
	free(m);
	free(fo);
	assert_untouched(&fx, "after the threads stopped");
}

Test(sampler, threads_on_dump_off_20_times)
{
	threads_rounds("sampler-target");
}

/* The same with jemalloc linked into the program: its entry points
 * patched and put back 20 times under four allocating threads. */
Test(sampler, threads_on_dump_off_20_times_linked)
{
	threads_rounds("sampler-target-je-static");
}

/* And in a program linked statically, glibc's malloc and all. */
Test(sampler, threads_on_dump_off_20_times_static)
{
	threads_rounds("sampler-target-static");
}

static long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000L + ts.tv_nsec / 1000L;
}

static void delay_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

#define KILL_TRIALS 30

/*
 * memsnap SIGKILLed at a random moment of `prof on --sampler` (even
 * trials) or `prof off` (odd ones), 30 times, while four threads
 * allocate: after each kill no thread is stopped or traced and the
 * target's checks pass.  Then a whole `prof on` and `prof off` still
 * work, and leave the GOT and the mappings as they were at the start.
 * The delays are 0 to 50 ms, and no longer than the longer of a whole
 * on and off (the median of three pairs timed once the sampler is in,
 * with the threads running):
 * at least a fifth of the runs must die before their end, or this
 * proves nothing.
 */
static void killed_at_random(const char *fixture)
{
	const char *env_seed = getenv("MEMSNAP_FAULT_SEED");
	const char *const on_args[] = { "--pid", pidstr, "prof", "on",
					"--sampler", NULL };
	const char *const off_args[] = { "--pid", pidstr, "prof", "off",
					 NULL };
	struct got_snap *g0 = calloc(1, sizeof(*g0)), *g = calloc(1, sizeof(*g));
	struct maps_snap *m0 = calloc(1, sizeof(*m0)),
			 *m = calloc(1, sizeof(*m));
	struct text_snap x0, x;
	char reply[256];
	uint64_t seed, s;
	long t0, t_on, t_off, span, pair[3];
	int i, killed = 0;

	cr_assert(g0 && g && m0 && m, "calloc");
	start(fixture, NULL);
	got_take(fx.pid, g0);
	maps_take(fx.pid, m0);
	text_take(fx.pid, &x0);
	command_expect('t', "ok threads=4", reply, sizeof(reply));
	/* the feature is there (else skip) and works whole; then how long
	 * an on and an off take once the sampler is in (the first on also
	 * copies it in: timed, it made the delays too long for most runs
	 * to be killed) */
	sampler_on(0);
	sampler_off();
	for (i = 0; i < 3; i++) {
		t0 = now_us();
		sampler_on(0);
		t_on = now_us() - t0;
		t0 = now_us();
		sampler_off();
		t_off = now_us() - t0;
		pair[i] = t_on > t_off ? t_on : t_off;
	}
	/* the median of three: one slow pair on a busy machine must not
	 * set delays most runs finish before */
	span = pair[0] < pair[1] ? pair[0] : pair[1];
	if (pair[2] < (pair[0] > pair[1] ? pair[0] : pair[1]))
		span = pair[2] > span ? pair[2] : span;
	else
		span = pair[0] > pair[1] ? pair[0] : pair[1];
	if (span > 50000)
		span = 50000;

	seed = env_seed ? strtoull(env_seed, NULL, 0)
			: (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid();
	if (!seed)
		seed = 1;
	s = seed;
	fprintf(stderr, "sampler: kills within %ld us (on %ld us, off %ld "
		"us), seed %llu (MEMSNAP_FAULT_SEED=%llu repeats the "
		"delays)\n", span, t_on, t_off, (unsigned long long)seed,
		(unsigned long long)seed);
	for (i = 0; i < KILL_TRIALS; i++) {
		bool on = !(i & 1);
		long delay = (long)(prng_next(&s) % (uint64_t)(span + 1));
		char when[600];
		struct bg b;
		struct run r;

		bg_start(&b, on ? on_args : off_args);
		delay_us(delay);
		kill(b.pid, SIGKILL);
		bg_finish(&b, &r);
		snprintf(when, sizeof(when),
			 "trial %d (seed %llu): prof %s killed after %ld us, "
			 "exit %d: %s", i, (unsigned long long)seed,
			 on ? "on --sampler" : "off", delay, r.status, r.err);
		killed += r.status == 128 + SIGKILL;
		/* on: done or killed; off: whatever it says when the
		 * sampler is not (all) on, but never a usage error or a
		 * crash */
		if (on)
			cr_assert(r.status == 0 || r.status == 128 + SIGKILL,
				  "%s", when);
		else
			cr_assert(r.status == 128 + SIGKILL ||
					  (r.status < 128 && r.status != 2),
				  "%s", when);
		run_free(&r);
		assert_untouched(&fx, when);
	}
	fprintf(stderr, "sampler: %d of %d runs killed before their end, "
		"%ld EINTRs seen by the waiter\n", killed, KILL_TRIALS,
		waiter_eintr());
	/* a kill between stopping the waiter and putting its call back
	 * leaves it one, and only a kill does */
	cr_assert_leq(waiter_eintr(), killed, "more EINTRs than kills");
	cr_assert_geq(killed * 5, KILL_TRIALS, "only %d of %d runs were "
		      "killed before their end (delays up to %ld us)", killed,
		      KILL_TRIALS, span);

	sampler_on(0);
	sampler_off();
	command_expect('T', "ok loops=", reply, sizeof(reply));
	got_take(fx.pid, g);
	assert_same_got(g0, g, "after the kills and a whole on and off");
	maps_take(fx.pid, m);
	assert_same_perms(m0, m, "after the kills and a whole on and off");
	text_take(fx.pid, &x);
	assert_same_text(&x0, &x, "after the kills and a whole on and off");
	text_free(&x0);
	text_free(&x);
	free(g0);
	free(g);
	free(m0);
	free(m);
	assert_untouched(&fx, "at the end");
}

Test(sampler, memsnap_killed_at_random_moments, .timeout = 600)
{
	killed_at_random("sampler-target");
}

/* The same with jemalloc linked into the program: killed while its
 * entry points are planned, logged, written with every thread stopped,
 * or put back. */
Test(sampler, memsnap_killed_at_random_moments_linked, .timeout = 600)
{
	killed_at_random("sampler-target-je-static");
}

/* The pc of thread @tid of the fixture, stopped or waiting outside a
 * system call ("-1 SP PC" in its syscall file): 0 when it is in one. */
static unsigned long long pc_outside_syscall(pid_t tid)
{
	char path[64], line[256];
	unsigned long long sp, pc;
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)fx.pid,
		 (int)tid);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	n = fgets(line, sizeof(line), f) ? sscanf(line, "-1 %llx %llx", &sp,
						   &pc)
					 : 0;
	fclose(f);
	return n == 2 ? pc : 0;
}

/* @n bytes of the fixture's memory at @addr. */
static void read_target(unsigned long long addr, void *buf, size_t n)
{
	struct iovec l = { buf, n }, r = { (void *)(uintptr_t)addr, n };

	cr_assert_eq(process_vm_readv(fx.pid, &l, 1, &r, 1, 0), (ssize_t)n,
		     "process_vm_readv at %#llx: %s", addr, strerror(errno));
}

/* The fixture's thread held at realloc's second push by @cmd ('z', or
 * 'y' for a page served only after a quiet second): its tid, and
 * realloc's address in *@fn. */
static pid_t hold_in_realloc(char cmd, unsigned long long *fn)
{
	char reply[256];
	const char *v;

	command_expect(cmd, "ok realloc=", reply, sizeof(reply));
	*fn = strtoull(reply + 11, NULL, 16);
	v = strstr(reply, "tid=");
	cr_assert(*fn && v, "reply: %s", reply);
	return (pid_t)atoi(v + 4);
}

/* Thread @tid's pc, skipping the test unless it waits inside the first
 * bytes of realloc at @fn (the bytes a jump replaces). */
static unsigned long long held_pc(pid_t tid, unsigned long long fn)
{
	unsigned long long pc = pc_outside_syscall(tid);

	if (pc <= fn || pc >= fn + 16)
		skip_test("this realloc does not make its second stack write "
			  "within its first bytes: the thread waits at %#llx, "
			  "realloc is at %#llx", pc, fn);
	return pc;
}

/*
 * A thread stopped between the first instructions of a function, which
 * the jump replaces, is stepped out of them, not waited for: on a busy
 * machine a thread preempted there may not run again for all the rounds
 * of stop and check, and `prof on` was refused ("stayed inside the
 * first bytes of a function to patch").  The fixture holds a thread
 * there for certain: its realloc's second push waits on a page that
 * userfaultfd serves only once the thread has been stopped and has
 * tried again (or after a second).  Each `prof on` must step it out and
 * say so in its timings; the thread goes on calling realloc, patched or
 * not, and the process is unharmed.
 */
Test(sampler, threads_inside_the_bytes_to_patch_are_stepped_out)
{
	char reply[256];
	unsigned long long fn, pc;
	unsigned long calls;
	const char *v;
	pid_t tid;
	int i;

#if !defined(__x86_64__)
	skip_test("one instruction is replaced on this CPU: no pc can be "
		  "inside the bytes to patch");
#endif
	start("sampler-target-static", NULL);
	tid = hold_in_realloc('z', &fn);
	for (i = 0; i < 5; i++) {
		struct run r;

		pc = held_pc(tid, fn);
		memsnap(&r, "--timings", "prof", "on", "--sampler", NULL);
		need_sampler(&r);
		cr_assert_eq(r.status, 0, "prof on %d, a thread at "
			     "realloc+%llu: exit %d: %s", i, pc - fn,
			     r.status, r.err);
		v = strstr(r.err, " stepped out of them");
		cr_assert(v && v[-1] != '0' && v[-2] == ' ',
			  "prof on %d, a thread at realloc+%llu: not one "
			  "thread stepped out: %s", i, pc - fn, r.err);
		run_free(&r);
		sampler_off();
		command_expect('Z', "ok calls=", reply, sizeof(reply));
		calls = strtoul(reply + 9, NULL, 10);
		cr_assert_geq(calls, (unsigned long)i + 1, "%s", reply);
	}
	assert_untouched(&fx, "after the thread was stepped");
}

/*
 * A thread that cannot be stepped out of the bytes to patch (its next
 * instruction waits on a page nobody serves while memsnap waits) is no
 * safe moment to write: `prof on --sampler` gives up with the "no safe
 * thread" status, 6, not 4 "permission denied" as the bare -EBUSY it
 * travelled as once said; nothing of realloc's first bytes is written,
 * and the thread runs on once the page is served.
 */
Test(sampler, a_thread_held_inside_the_bytes_to_patch_is_no_safe_moment)
{
	unsigned char before[16], after[16];
	unsigned long long fn, pc;
	char reply[256];
	struct run r;
	pid_t tid;

#if !defined(__x86_64__)
	skip_test("one instruction is replaced on this CPU: no pc can be "
		  "inside the bytes to patch");
#endif
	start("sampler-target-static", NULL);
	tid = hold_in_realloc('y', &fn);
	pc = held_pc(tid, fn);
	read_target(fn, before, sizeof(before));
	memsnap(&r, "prof", "on", "--sampler", NULL);
	need_sampler(&r);
	cr_assert_eq(r.status, 6, "prof on, a thread held at realloc+%llu: "
		     "exit %d, not 6 (no safe thread): %s", pc - fn, r.status,
		     r.err);
	cr_assert(strstr(r.err, "stayed inside the first bytes of a function "
			 "to patch"), "prof on: %s", r.err);
	cr_assert_eq(count_lines(r.err), 1, "not one line: %s", r.err);
	run_free(&r);
	read_target(fn, after, sizeof(after));
	cr_assert(!memcmp(before, after, sizeof(before)),
		  "realloc's first bytes changed though prof on failed");
	command_expect('Z', "ok calls=", reply, sizeof(reply));
	cr_assert_geq(strtoul(reply + 9, NULL, 10), 1ul, "%s", reply);
	assert_untouched(&fx, "after prof on found no safe moment");
}

/* ---- an error named where it happened ------------------------------------ */

/* VmSize of @pid in bytes (0: unreadable). */
static unsigned long long vm_size(pid_t pid)
{
	char path[64], line[256];
	unsigned long long kb = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

/*
 * The target's address space limited to what it maps now plus 64 KiB:
 * memsnap's stub page fits, the sampler's image does not.  `prof on
 * --sampler` fails with the line of the step that failed, the mmap in
 * the target, where memsnap once printed the bare errno ("Cannot
 * allocate memory"); exit 1, one line, and the target as it was.
 * With room again, the sampler goes on and off as usual.
 */
Test(sampler, a_failed_mmap_in_the_target_is_named_as_such)
{
	struct rlimit lim, old;
	unsigned long long vm;
	struct run r;

	start("sampler-target", NULL);
	vm = vm_size(fx.pid);
	cr_assert_gt(vm, 0ull, "VmSize of %d", (int)fx.pid);
	/* the soft limit only: without CAP_SYS_RESOURCE a lowered hard
	 * limit could not be raised back */
	cr_assert_eq(prlimit(fx.pid, RLIMIT_AS, NULL, &old), 0, "prlimit: %s",
		     strerror(errno));
	lim = old;
	lim.rlim_cur = vm + (64 << 10);
	cr_assert_eq(prlimit(fx.pid, RLIMIT_AS, &lim, NULL), 0, "prlimit: %s",
		     strerror(errno));
	memsnap(&r, "prof", "on", "--sampler", NULL);
	cr_assert_eq(prlimit(fx.pid, RLIMIT_AS, &old, NULL), 0, "prlimit: %s",
		     strerror(errno));
	need_sampler(&r);
	cr_assert_eq(r.status, 1, "prof on under RLIMIT_AS: exit %d: %s",
		     r.status, r.err);
	cr_assert(strstr(r.err, "bytes in the target failed"),
		  "the failed step is not named: %s", r.err);
	cr_assert_eq(count_lines(r.err), 1, "not one line: %s", r.err);
	run_free(&r);
	assert_untouched(&fx, "after prof on failed to map the sampler");
	/* nothing half-loaded: with room again, on and off as usual */
	sampler_on(0);
	sampler_off();
	assert_untouched(&fx, "after prof on and off with room again");
}
