/*
 * explain --no-attach stops no thread.  The test itself holds every
 * thread of the fixture with PTRACE_SEIZE (which stops nothing): memsnap
 * cannot attach a thread another tracer holds, and any stop or signal
 * memsnap caused would be reported to the test by waitpid().  So an
 * --no-attach run that succeeds, gives the /proc breakdown with the
 * allocator's memory as one "heap" part and no allocator numbers, and
 * leaves waitpid() with nothing to say, stopped nothing.
 */
#include "test_explain_lib.h"
#include "../lib/fixture.h"
#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_TIDS 64

static struct fixture fx = { .pid = -1 };
static pid_t tids[MAX_TIDS];
static size_t ntids;

/* A traced thread's exit is the tracer's to reap, and the group leader
 * waits for the others: reap them all before fixture_stop()'s waitpid. */
static void teardown(void)
{
	size_t i;

	explain_free_all();
	if (fx.pid > 0 && ntids) {
		kill(fx.pid, SIGKILL);
		for (i = 0; i < ntids; i++)
			if (tids[i] != fx.pid)
				while (waitpid(tids[i], NULL, __WALL) < 0 &&
				       errno == EINTR)
					;
	}
	fixture_stop(&fx);
}

TestSuite(explain_noattach, .fini = teardown, .timeout = 120);

static void seize_all(void)
{
	char path[64];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)fx.pid);
	dir = opendir(path);
	cr_assert_not_null(dir, "%s", path);
	while ((d = readdir(dir)) && ntids < MAX_TIDS) {
		pid_t tid = (pid_t)atoi(d->d_name);

		if (tid <= 0)
			continue;
		cr_assert_eq(ptrace(PTRACE_SEIZE, tid, 0, 0), 0,
			     "PTRACE_SEIZE %d: %s", (int)tid, strerror(errno));
		tids[ntids++] = tid;
	}
	closedir(dir);
	cr_assert_eq(ntids, 5, "the fixture has %zu threads", ntids);
}

/* No thread stopped or signalled since the seize. */
static void assert_nothing_happened(const char *when)
{
	size_t i;

	for (i = 0; i < ntids; i++) {
		int st = 0;
		pid_t w = waitpid(tids[i], &st, WNOHANG | __WALL);

		cr_assert_eq(w, 0, "%s: thread %d reported status %#x "
			     "(stopped by %s)", when, (int)tids[i], st,
			     WIFSTOPPED(st) ? strsignal(WSTOPSIG(st)) : "-");
	}
}

/* Let go of every thread: interrupt, wait for that stop, detach. */
static void release_all(void)
{
	size_t i;

	for (i = 0; i < ntids; i++) {
		int st;

		cr_assert_eq(ptrace(PTRACE_INTERRUPT, tids[i], 0, 0), 0);
		cr_assert_eq(waitpid(tids[i], &st, __WALL), tids[i]);
		cr_assert_eq(ptrace(PTRACE_DETACH, tids[i], 0, 0), 0,
			     "detach %d: %s", (int)tids[i], strerror(errno));
	}
	ntids = 0;
}

Test(explain_noattach, stops_no_thread_and_reads_no_allocator)
{
	static char hold[] = "--hold", mib[] = "16M", threads[] = "--threads",
		    four[] = "4";
	char path[PATH_MAX], pidstr[16];
	char *argv[] = { path, hold, mib, threads, four, NULL };
	const char *text[] = { "--pid", pidstr, "explain", "--no-attach",
			       NULL };
	struct explain e;
	struct run r;
	int64_t lo, hi, held;
	int rc;

	fixture_path("explain-heap-glibc", path, sizeof(path));
	rc = fixture_start(&fx, argv, NULL, 30000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	held = ready_num(fx.ready, "held");
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
	seize_all();

	explain_run(fx.pid, "--no-attach", &e, &lo, &hi);
	assert_nothing_happened("explain --no-attach --json");
	explain_assert_sound(&e, lo, hi, false);
	/* The allocator unread, its memory is still all there, as one. */
	cr_assert_geq(e.part[P_HEAP], held, "heap %" PRId64 " < %" PRId64
		      " the fixture holds\n%s", e.part[P_HEAP], held, e.json);
	cr_assert_null(explain_finding(&e, "heap_free"), "%s", e.json);

	cr_assert_eq(run_memsnap(&r, text), 0);
	assert_nothing_happened("explain --no-attach");
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(!strncmp(r.out, e.verdict, strlen(e.verdict)) ||
			  memmem(r.out, strcspn(r.out, "\n"), e.verdict,
				 strlen(e.verdict)),
		  "the first line is not the verdict \"%s\":\n%s", e.verdict,
		  r.out);
	/* Marked: the reader is told the allocator was not read. */
	cr_assert(strstr(r.out, "no-attach") || strstr(r.out, "not attached") ||
			  strstr(r.out, "not read"),
		  "--no-attach is not marked in:\n%s", r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
	release_all();
	fixture_assert_healthy(&fx);
	explain_free(&e);
}

/*
 * A process with no allocator memsnap can call (a static musl program:
 * musl's malloc has no control functions) is no error for explain: the
 * /proc breakdown, exit 0, nothing on stderr, and one line that says
 * what is missing, in the text and in the JSON.
 */
Test(explain_noattach, no_allocator_to_call_is_not_an_error)
{
	char path[PATH_MAX], pidstr[16];
	char *argv[] = { path, NULL };
	const char *text[] = { "--pid", pidstr, "explain", NULL };
	const char *why = "musl's malloc has no control functions to call";
	const char *not_read;
	struct explain e;
	struct run r;
	int64_t lo, hi;
	int rc;

	fixture_path("musl-static", path, sizeof(path));
	if (access(path, X_OK))
		cr_skip_test("fixture %s not built (musl-gcc missing: Debian's "
			     "musl-tools)", path);
	rc = fixture_start(&fx, argv, NULL, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);

	explain_run(fx.pid, NULL, &e, &lo, &hi);
	explain_assert_sound(&e, lo, hi, false);
	fixture_assert_healthy(&fx);
	cr_assert_eq(e.attached, 0, "%s", e.json);
	not_read = explain_str(&e, "not_read");
	cr_assert_not_null(not_read, "%s", e.json);
	cr_assert_str_eq(not_read, why, "%s", e.json);

	cr_assert_eq(run_memsnap(&r, text), 0);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_assert_str_eq(r.err, "");
	cr_assert_not_null(strstr(r.out, why), "%s", r.out);
	cr_assert(!strncmp(r.out, "pid ", 4) && strstr(r.out, e.verdict),
		  "%s", r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
	explain_free(&e);
}

/* The file @path whole, NUL-ended (free() it), or fail. */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	char *buf;
	long n;

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	cr_assert_not_null(buf);
	*len = fread(buf, 1, (size_t)n, f);
	fclose(f);
	return buf;
}

/* watch on it too: every tick measures /proc, one note says what is
 * missing, no dump is tried, nothing on stderr, exit 0. */
Test(explain_noattach, watch_without_an_allocator_to_call)
{
	char path[PATH_MAX], pidstr[16], base[PATH_MAX], wdir[PATH_MAX + 8];
	char series[PATH_MAX + 32], *text;
	char *argv[] = { path, NULL };
	const char *args[] = { "--pid", pidstr, "watch", "-o", wdir,
			       "--interval", "0.2s", "--count", "3", NULL };
	struct run r;
	size_t len;
	int rc, ticks = 0;
	const char *p;

	fixture_path("musl-static", path, sizeof(path));
	if (access(path, X_OK))
		cr_skip_test("fixture %s not built (musl-gcc missing: Debian's "
			     "musl-tools)", path);
	rc = fixture_start(&fx, argv, NULL, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
	rc = scratch_make("memsnap-test-noalloc", base, sizeof(base));
	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	snprintf(wdir, sizeof(wdir), "%s/w", base);

	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_assert_str_eq(r.err, "");
	cr_assert_not_null(strstr(r.out, "3 ticks, 0 dumps"), "%s", r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
	snprintf(series, sizeof(series), "%s/series.tsv", wdir);
	text = slurp(series, &len);
	/* the note at the first tick, whatever its time (0 or 1 ms, or more
	 * on an emulated CPU) */
	p = strstr(text, "\n# note\t");
	cr_assert(p && strstr(p, "\tallocator not read: musl's malloc has no "
			      "control functions to call") ==
			       strchr(p + 9, '\t'),
		  "%s", text);
	cr_assert_null(strstr(text, "dump-"), "a dump was taken:\n%s", text);
	cr_assert_null(strstr(text, "heap profile"), "a dump was tried:\n%s",
		       text);
	for (p = text; (p = strchr(p, '\n')); p++)
		ticks += p[1] >= '0' && p[1] <= '9';
	cr_assert_eq(ticks, 3, "%s", text);
	free(text);
	scratch_cleanup(base);
}
