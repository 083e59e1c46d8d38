/*
 * The real CLI SIGKILLed at random moments: `memsnap dump`, `info` and
 * `prof` on a live jemalloc process, killed anywhere between its start
 * and its exit, attach to detach included.  After every kill: no thread
 * of the target stopped or traced, the target answers its ping with its
 * invariants intact (no EINTR seen, leaked blocks unchanged, malloc
 * works).  At the end, memsnap still works on it and its profiler
 * state is what the commands set.
 *
 * (test_inject_kill.c kills `memsnap call` at chosen moments; this one
 * covers the allocator commands, including dump's private directory.)
 *
 *   MEMSNAP_FAULT_TRIALS=N   trials (default 200, a few seconds)
 *   MEMSNAP_FAULT_SEED=S     the delays of an earlier run (its seed is
 *                            printed)
 *
 * It found that a kill between two calls of one session crashed the
 * target (about one run in ten at 200 trials); since the thread is
 * healed after every call (injector/inject.c heal_in_place()), it runs
 * in CI.
 */
#include "tests/lib/fault.h"
#include "tests/lib/inject.h"
#include "tests/lib/scratch.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#define DEFAULT_TRIALS 200
#define TRIALS_PER_TARGET 25	/* then a fresh target: a new stub page */

static struct fixture fx = { .pid = -1 };
static char base[PATH_MAX];
static char tmp_dir[PATH_MAX + 8];
static char cwd_dir[PATH_MAX + 8];
static char out_dir[PATH_MAX + 8];
static char out[PATH_MAX + 32];
static char pidstr[16];

static void teardown(void);

static void setup(void)
{
	int rc;

	skip_cleanup = teardown;
	rc = scratch_make("memsnap-test-faults-kill", base, sizeof(base));
	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	snprintf(tmp_dir, sizeof(tmp_dir), "%s/tmp", base);
	snprintf(cwd_dir, sizeof(cwd_dir), "%s/cwd", base);
	snprintf(out_dir, sizeof(out_dir), "%s/out", base);
	snprintf(out, sizeof(out), "%s/k.heap", out_dir);
	cr_assert_eq(mkdir(tmp_dir, 01777), 0);
	cr_assert_eq(mkdir(cwd_dir, 0755), 0);
	cr_assert_eq(mkdir(out_dir, 0755), 0);
}

static void teardown(void)
{
	fixture_stop(&fx);
	scratch_cleanup(base);
}

/* 600 s: 324 s were seen in the arm64 guest on a busy host, against
 * about 60 natively; the limit catches a hang, not slowness. */
TestSuite(faults_kill, .init = setup, .fini = teardown, .timeout = 600);

static void start_target(void)
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

/* What is killed; none of them changes what the ping checks. */
static const char *const *const commands[] = {
	(const char *const[]){ "--pid", pidstr, "dump", "-o", out, NULL },
	(const char *const[]){ "--pid", pidstr, "info", NULL },
	(const char *const[]){ "--pid", pidstr, "prof", "on", NULL },
	(const char *const[]){ "--pid", pidstr, "prof", "gdump", "off", NULL },
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

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

/* Is any thread of the target traced by @m right now? */
static bool traced_by(pid_t m)
{
	char path[64];
	struct dirent *e;
	bool yes = false;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)fx.pid);
	d = opendir(path);
	if (!d)
		return false;
	while (!yes && (e = readdir(d))) {
		pid_t tid = (pid_t)atoi(e->d_name), tracer;
		char st;

		if (tid > 0 && task_state(fx.pid, tid, &st, &tracer))
			yes = tracer == m;
	}
	closedir(d);
	return yes;
}

/* The middle one of three. */
static long median3(const long t[3])
{
	if (t[0] > t[1])
		return t[1] > t[2] ? t[1] : t[0] > t[2] ? t[2] : t[0];
	return t[0] > t[2] ? t[0] : t[1] > t[2] ? t[2] : t[1];
}

/* When each command runs, left alone (us after its spawn). */
struct timing {
	long end;		/* it has exited */
	long attach, detach;	/* a thread of the target is traced by it */
};

/*
 * Run each command three times left alone for its duration, and three
 * times watched (polling the target's TracerPid) for where its attach
 * window lies in that duration: watching slows memsnap, so the window
 * is kept as a fraction.  Middle values; measured again for every new
 * target, so the delays follow the machine's load.
 */
static void calibrate(struct timing tm[NCOMMANDS])
{
	size_t k;
	int i;

	for (k = 0; k < NCOMMANDS; k++) {
		long end[3], att[3], det[3];

		for (i = 0; i < 3; i++) {
			long t0 = now_us();
			int st = wait_status(spawn_memsnap(commands[k]));

			end[i] = now_us() - t0;
			cr_assert_eq(st, 0, "memsnap %s exited %d",
				     commands[k][2], st);
		}
		for (i = 0; i < 3; i++) {
			long t0 = now_us(), t, first = -1, last = -1;
			pid_t m = spawn_memsnap(commands[k]);
			int st;

			while (!waitpid(m, &st, WNOHANG)) {
				t = now_us() - t0;
				if (traced_by(m)) {
					if (first < 0)
						first = t;
					last = t;
				}
			}
			t = now_us() - t0;
			cr_assert(WIFEXITED(st) && !WEXITSTATUS(st),
				  "memsnap %s: status %d", commands[k][2], st);
			/* Per mille of the run; unseen: anywhere. */
			att[i] = first < 0 ? 0 : first * 1000 / t;
			det[i] = first < 0 ? 1000 : last * 1000 / t;
		}
		tm[k].end = median3(end);
		tm[k].attach = tm[k].end * median3(att) / 1000;
		tm[k].detach = tm[k].end * median3(det) / 1000;
		if (tm[k].detach < tm[k].attach)
			tm[k].detach = tm[k].attach;
	}
}

/*
 * Half the kills anywhere from exec to a little past the usual exit,
 * half within the usual attach-to-detach window, widened a little.
 */
static long draw_delay(uint64_t *s, const struct timing *t)
{
	long lo = t->attach - (t->detach - t->attach) / 4;
	long hi = t->detach + (t->detach - t->attach) / 4 + 1;

	if (prng_next(s) & 1)
		return (long)(prng_next(s) % (uint64_t)(t->end * 11 / 10 + 1));
	if (lo < 0)
		lo = 0;
	return lo + (long)(prng_next(s) % (uint64_t)(hi - lo + 1));
}

/*
 * assert_untouched(), saying how the target ended if it did: it is our
 * child, so its status is there to read.
 */
static void assert_target_untouched(const char *when)
{
	char why[256], st;
	int status;

	assert_threads_free(fx.pid, when);
	if (fixture_healthy(&fx, why, sizeof(why)))
		return;
	st = fixture_state(&fx);
	if (st != 'Z' && st != 'X')
		cr_assert_fail("%s: %s", when, why);
	cr_assert_eq(waitpid(fx.pid, &status, 0), fx.pid);
	fx.pid = -1;
	if (WIFSIGNALED(status))
		cr_assert_fail("%s: the target was killed by signal %d (%s)%s",
			       when, WTERMSIG(status), strsignal(WTERMSIG(status)),
			       WCOREDUMP(status) ? ", core dumped" : "");
	cr_assert_fail("%s: the target exited with status %d", when,
		       WEXITSTATUS(status));
}

/* Entries of @dir: all named like a dump directory memsnap made? */
static size_t count_dump_dirs(const char *dir)
{
	struct dirent *e;
	size_t n = 0;
	DIR *d = opendir(dir);

	cr_assert_not_null(d);
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		cr_assert(!strncmp(e->d_name, ".memsnap-", 9) &&
				  strlen(e->d_name) == 9 + 16,
			  "'%s' in the target's TMPDIR", e->d_name);
		n++;
	}
	closedir(d);
	return n;
}

Test(faults_kill, cli_killed_at_random_moments)
{
	const char *env_trials = getenv("MEMSNAP_FAULT_TRIALS");
	const char *env_seed = getenv("MEMSNAP_FAULT_SEED");
	int trials = env_trials ? atoi(env_trials) : DEFAULT_TRIALS;
	uint64_t seed, s;
	struct timing tm[NCOMMANDS];
	int i, finished = 0, killed = 0, attached = 0;
	struct run r;

	seed = env_seed ? strtoull(env_seed, NULL, 0)
			: (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid();
	if (!seed)
		seed = 1;
	s = seed;
	fprintf(stderr, "faults_kill: %d trials, seed %llu "
		"(MEMSNAP_FAULT_SEED=%llu repeats the delays)\n", trials,
		(unsigned long long)seed, (unsigned long long)seed);
	cr_assert_gt(trials, 0);
	for (i = 0; i < trials; i++) {
		char when[160];
		size_t k;
		long delay;
		pid_t m;
		int st;

		if (i % TRIALS_PER_TARGET == 0) {
			fixture_stop(&fx);
			start_target();
			/* Also makes its stub: the kills that follow see both
			 * a fresh stub and one found again. */
			calibrate(tm);
		}
		k = (size_t)(prng_next(&s) % NCOMMANDS);
		delay = draw_delay(&s, &tm[k]);
		m = spawn_memsnap(commands[k]);
		delay_us(delay);
		if (traced_by(m))
			attached++;
		kill(m, SIGKILL);
		st = wait_status(m);
		snprintf(when, sizeof(when),
			 "trial %d (seed %llu): memsnap %s killed after %ld us, "
			 "status %d", i, (unsigned long long)seed,
			 commands[k][2], delay, st);
		cr_assert(st == 0 || st == 128 + SIGKILL, "%s", when);
		finished += st == 0;
		killed += st != 0;
		assert_target_untouched(when);
	}
	fprintf(stderr, "faults_kill: %d killed (%d while attached), %d had "
		"finished\n", killed, attached, finished);
	cr_log_info("%d trials: %d killed, %d of them while attached, %d "
		    "finished first", trials, killed, attached, finished);
	/*
	 * The delays must reach into the attach window, or this proves
	 * nothing.  That window is about 1 ms of a 5 ms run, and seeing a
	 * kill land in it takes a racy look at /proc: 1 in 40 is far below
	 * what a run gives (1 in 5 to 1 in 8 here).
	 */
	cr_assert_geq(attached * 40, trials, "only %d of %d kills landed "
		      "while memsnap was attached", attached, trials);

	/* Still served, and the switches are as the commands set them. */
	cr_assert_eq(run_memsnap(&r, (const char *const[]){ "--pid", pidstr,
				 "--json", "info", NULL }), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_not_null(strstr(r.out, "\"prof.active\": true"), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "\"prof.gdump\": false"), "%s", r.out);
	run_free(&r);
	cr_assert_eq(run_memsnap(&r, commands[0]), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	{
		char head[8] = "";
		FILE *f = fopen(out, "re");

		cr_assert_not_null(f);
		cr_assert_eq(fread(head, 1, 7, f), 7);
		fclose(f);
		cr_assert_str_eq(head, "heap_v2");
	}
	/* Nothing in its cwd; in its TMPDIR only the directories of killed
	 * dumps, which a later dump sweeps once they are a minute old. */
	cr_assert_eq(dir_count_entries(cwd_dir), 0);
	fprintf(stderr, "faults_kill: %zu dump directories of killed runs "
		"left in the target's TMPDIR, %zu entries beside -o\n",
		count_dump_dirs(tmp_dir), dir_count_entries(out_dir) - 1);
	assert_untouched(&fx, "at the end");
}
