/*
 * stats, trim, dump and prof on every allocator backend, end to end on
 * live processes: one program (tests/fixtures/alloc_target.c) linked
 * against glibc, jemalloc, gperftools tcmalloc (full and minimal) and
 * mimalloc, and the glibc build with each of them LD_PRELOADed.  For
 * each: the statistics parse and hold the program's own 4 MiB, trim
 * keeps or lowers RSS, what an allocator cannot do is refused in one
 * line with exit 5, the target wrote nothing on its stdout/stderr, no
 * temporary directory is left, and it is healthy after every step.
 */
#include "../lib/fixture.h"
#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct fixture fx = { .pid = -1 };
static char base[PATH_MAX];
static char tmp_dir[PATH_MAX + 8];	/* the target's TMPDIR */
static char log_path[PATH_MAX + 8];	/* its stdout and stderr */
static char pidstr[16];

static void setup(void)
{
	int rc = scratch_make("memsnap-test-backends", base, sizeof(base));

	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	snprintf(tmp_dir, sizeof(tmp_dir), "%s/tmp", base);
	snprintf(log_path, sizeof(log_path), "%s/log", base);
	cr_assert_eq(mkdir(tmp_dir, 01777), 0);
}

static void teardown(void)
{
	fixture_stop(&fx);
	scratch_cleanup(base);
}

TestSuite(backends, .init = setup, .fini = teardown, .timeout = 120);

/* Start fixture @name, with @preload (a library file name, or NULL). */
static void start(const char *name, const char *preload)
{
	char path[PATH_MAX], tmp[PATH_MAX + 16], log[PATH_MAX + 32];
	char pre[PATH_MAX];
	char *argv[] = { path, NULL };
	char *env[4] = { tmp, log, NULL, NULL };
	int rc;

	snprintf(tmp, sizeof(tmp), "TMPDIR=%s", tmp_dir);
	snprintf(log, sizeof(log), "ALLOC_TARGET_LOG=%s", log_path);
	if (preload) {
		snprintf(pre, sizeof(pre),
			 "LD_PRELOAD=" LIBDIR "%s", preload);
		if (access(pre + 11, R_OK))
			cr_skip_test("%s is not installed", pre + 11);
		env[2] = pre;
	}
	fixture_path(name, path, sizeof(path));
	rc = fixture_start(&fx, argv, env, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
}

static void command(char c)
{
	char reply[64];
	int rc = fixture_command(&fx, c, reply, sizeof(reply), 10000);

	cr_assert_eq(rc, 0, "command %c: %s", c, strerror(-rc));
	cr_assert_str_eq(reply, "ok", "command %c: %s", c, reply);
}

/* memsnap --pid PID @a @b @c (NULL-ended), output in @r.  With a
 * minute for the call: an allocator's report of every arena (stats)
 * takes seconds on an emulated CPU (the arm64 guest) with the other
 * tests running, past the default 10 s. */
static void memsnap(struct run *r, const char *a, const char *b,
		    const char *c)
{
	const char *args[] = { "--pid", pidstr, "--timeout", "60", a, b, c,
			       NULL };

	cr_assert_eq(run_memsnap(r, args), 0);
}

/* The first number after "@key": in JSON text @s; -1 if none. */
static int64_t json_num(const char *s, const char *key)
{
	char pat[96];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = strstr(s, pat);
	if (!p)
		return -1;
	return strtoll(p + strlen(pat), NULL, 10);
}

/* Unharmed, silent, and nothing of memsnap's left in its TMPDIR. */
static void assert_clean(void)
{
	struct stat st;

	fixture_assert_healthy(&fx);
	cr_assert_eq(stat(log_path, &st), 0);
	cr_assert_eq(st.st_size, 0,
		     "the target wrote %lld bytes to its stdout/stderr",
		     (long long)st.st_size);
	cr_assert_eq(dir_count_entries(tmp_dir), 0,
		     "memsnap left something in the target's TMPDIR");
}

/* A refusal: exit 5, one line naming what the allocator can do. */
static void assert_refused(const char *cmd, const char *arg)
{
	struct run r;

	memsnap(&r, cmd, arg, NULL);
	cr_assert_eq(r.status, 5, "%s: exit %d: %s", cmd, r.status, r.err);
	cr_assert_str_empty(r.out);
	cr_assert_not_null(strstr(r.err, "memsnap can: stats, trim"), "%s",
			   r.err);
	cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1,
		     "more than one line: %s", r.err);
	run_free(&r);
}

/*
 * stats three ways and trim for the allocator named @kind (as in
 * --json's "allocator"); @inuse_key is a column that must hold at least
 * the fixture's 4 MiB after it grew; @raw_mark a string of the
 * allocator's own report.
 */
static void check_stats_and_trim(const char *kind, const char *inuse_key,
				 const char *raw_mark)
{
	char want[64];
	struct run r;
	int64_t before, after;

	command('g');
	memsnap(&r, "stats", NULL, NULL);
	cr_assert_eq(r.status, 0, "stats: %s", r.err);
	cr_assert_not_null(strstr(r.out, "statistics"), "%s", r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);

	memsnap(&r, "stats", "--json", NULL);
	cr_assert_eq(r.status, 0, "stats --json: %s", r.err);
	snprintf(want, sizeof(want), "\"allocator\": \"%s\"", kind);
	cr_assert_not_null(strstr(r.out, want), "%s", r.out);
	cr_assert_geq(json_num(r.out, inuse_key), 4 << 20,
		      "%s below the 4 MiB the fixture holds:\n%s", inuse_key,
		      r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);

	memsnap(&r, "stats", "--raw", NULL);
	cr_assert_eq(r.status, 0, "stats --raw: %s", r.err);
	cr_assert_not_null(strstr(r.out, raw_mark), "no '%s' in:\n%.500s",
			   raw_mark, r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);

	command('f');
	memsnap(&r, "trim", "--json", NULL);
	cr_assert_eq(r.status, 0, "trim: %s", r.err);
	before = json_num(r.out, "rss_before");
	after = json_num(r.out, "rss_after");
	cr_assert_gt(before, 0, "%s", r.out);
	cr_assert_gt(after, 0, "%s", r.out);
	run_free(&r);
	/* The program holds 4 KiB now; RSS never grows by a trim beyond
	 * noise of a few pages. */
	cr_assert_leq(after, before + 64 * 1024, "trim grew RSS: %" PRId64
		      " -> %" PRId64, before, after);
	assert_clean();
}

Test(backends, glibc_stats_trim_and_refusals)
{
	struct run r;

	start("alloc-glibc", NULL);
	check_stats_and_trim("glibc", "in_use", "<malloc version=\"1\">");
	memsnap(&r, "stats", NULL, NULL);
	cr_assert_not_null(strstr(r.out, "arena 0"), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "mallinfo2"), "%s", r.out);
	run_free(&r);
	assert_refused("dump", NULL);
	assert_refused("prof", "on");
	assert_clean();
}

/* glibc's stats make and free a FILE in the target each time: in use
 * memory must not creep up over many calls. */
Test(backends, glibc_stats_leave_nothing_allocated)
{
	struct run r;
	int64_t first = -1, last = -1;
	int i;

	start("alloc-glibc", NULL);
	for (i = 0; i < 20; i++) {
		memsnap(&r, "stats", "--json", NULL);
		cr_assert_eq(r.status, 0, "%s", r.err);
		last = json_num(strstr(r.out, "\"mallinfo2\""), "uordblks");
		if (first < 0)
			first = last;
		run_free(&r);
	}
	cr_assert_gt(first, 0);
	cr_assert_eq(last, first, "in-use bytes %" PRId64 " -> %" PRId64
		     " after 20 stats", first, last);
	assert_clean();
}

Test(backends, trim_gives_glibc_memory_back)
{
	struct run r;
	int64_t before, after;
	int i;

	start("alloc-glibc", NULL);
	/* 64 MiB in 16 KiB blocks inside the main arena, all freed but the
	 * last: the top stays in use, so free() cannot shrink the heap and
	 * the 64 MiB stay resident until malloc_trim(0) gives the free
	 * pages in the middle back. */
	for (i = 0; i < 16; i++)
		command('g');
	command('h');
	memsnap(&r, "trim", "--json", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	before = json_num(r.out, "rss_before");
	after = json_num(r.out, "rss_after");
	cr_assert_not_null(strstr(r.out, "\"call\": \"malloc_trim(0)\""));
	cr_assert_not_null(strstr(r.out, "\"released\": true"), "%s", r.out);
	run_free(&r);
	cr_assert_gt(before, 48 << 20, "the freed heap was not resident: %"
		     PRId64, before);
	cr_assert_lt(after, before - (32 << 20), "RSS after trim: %" PRId64
		     " (before %" PRId64 ")", after, before);
	assert_clean();
}

Test(backends, jemalloc_stats_native_json_and_trim)
{
	struct run r;

	start("alloc-jemalloc", NULL);
	check_stats_and_trim("jemalloc", "allocated",
			     "Begin jemalloc statistics");
	memsnap(&r, "stats", "--json", NULL);
	cr_assert_not_null(strstr(r.out, "\"native\": {"), "%.300s", r.out);
	cr_assert_not_null(strstr(r.out, "\"jemalloc\""));
	run_free(&r);
	assert_clean();
}

static void tcmalloc_profile_round_trip(void)
{
	char heap[PATH_MAX + 16], cmd[PATH_MAX * 2 + 64];
	struct run r;

	snprintf(heap, sizeof(heap), "%s/tc.heap", base);
	/* Not running yet: dump says how to start it. */
	memsnap(&r, "dump", "-o", heap);
	cr_assert_eq(r.status, 5, "%s", r.err);
	cr_assert_not_null(strstr(r.err, "prof on"), "%s", r.err);
	run_free(&r);

	memsnap(&r, "prof", "on", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_not_null(strstr(r.out, "on (was off)"), "%s", r.out);
	run_free(&r);
	memsnap(&r, "info", NULL, NULL);
	cr_assert_not_null(strstr(r.out, "heap_profiler.running            true"),
			   "%s", r.out);
	run_free(&r);

	command('g');
	memsnap(&r, "dump", "-o", heap);
	cr_assert_eq(r.status, 0, "dump: %s", r.err);
	run_free(&r);
	fixture_assert_healthy(&fx);

	/* memsnap's report names the fixture's function ... */
	{
		const char *args[] = { "report", heap, NULL };

		cr_assert_eq(run_memsnap(&r, args), 0);
	}
	cr_assert_eq(r.status, 0, "report: %s", r.err);
	cr_assert_not_null(strstr(r.out, "alloc_target_grow"), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "gperftools"), "%s", r.out);
	/* ... and memsnap's own GetHeapProfile() buffer is not there. */
	cr_assert_null(strstr(r.out, "GetHeapProfile"), "%s", r.out);
	run_free(&r);

	/* So does gperftools' own pprof, from the same file. */
	if (!access("/usr/bin/google-pprof", X_OK)) {
		snprintf(cmd, sizeof(cmd),
			 "google-pprof --text /proc/%d/exe '%s' 2>/dev/null",
			 (int)fx.pid, heap);
		cr_assert_eq(run_shell(&r, cmd), 0);
		cr_assert_eq(r.status, 0, "pprof: %s", r.err);
		cr_assert_not_null(strstr(r.out, "alloc_target_grow"), "%s",
				   r.out);
		run_free(&r);
	} else {
		fprintf(stderr, "backends: google-pprof not installed: "
			"pprof check skipped\n");
	}

	memsnap(&r, "prof", "off", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_not_null(strstr(r.out, "off (was on)"), "%s", r.out);
	run_free(&r);
	memsnap(&r, "info", NULL, NULL);
	cr_assert_not_null(strstr(r.out, "heap_profiler.running            false"),
			   "%s", r.out);
	run_free(&r);
	assert_clean();
}

Test(backends, tcmalloc_stats_trim_and_heap_profile)
{
	start("alloc-tcmalloc", NULL);
	check_stats_and_trim("tcmalloc", "allocated", "MALLOC:");
	tcmalloc_profile_round_trip();
}

Test(backends, tcmalloc_preloaded)
{
	start("alloc-glibc", "libtcmalloc.so.4");
	check_stats_and_trim("tcmalloc", "allocated", "MALLOC:");
	tcmalloc_profile_round_trip();
}

Test(backends, tcmalloc_minimal_has_no_profiler)
{
	start("alloc-tcmalloc-minimal", NULL);
	check_stats_and_trim("tcmalloc_minimal", "allocated", "MALLOC:");
	assert_refused("prof", "on");
	assert_refused("dump", NULL);
	assert_clean();
}

Test(backends, tcmalloc_minimal_preloaded)
{
	start("alloc-glibc", "libtcmalloc_minimal.so.4");
	check_stats_and_trim("tcmalloc_minimal", "allocated", "MALLOC:");
	assert_refused("prof", "on");
}

/*
 * tcmalloc and tcmalloc_minimal in one process: the C entry points of
 * both go through the one MallocExtension::instance() the dynamic
 * linker bound, the first copy's.  The second copy's stats and trim
 * would be the first one's: refused in one line naming both; the first
 * copy works.
 */
Test(backends, tcmalloc_second_copy_is_refused)
{
	static const char dir[] = LIBDIR "";
	char path[PATH_MAX], tmp[PATH_MAX + 16], log[PATH_MAX + 32];
	char pre[3 * PATH_MAX];
	char *argv[] = { path, NULL };
	char *env[] = { tmp, log, pre, NULL };
	const char *args[] = { "--pid", pidstr, "--allocator",
			       "tcmalloc_minimal", "stats", NULL };
	const char *cmds[] = { "stats", "trim" };
	struct run r;
	size_t i;
	int rc;

	snprintf(pre, sizeof(pre), "LD_PRELOAD=%slibtcmalloc.so.4 %slibtcmalloc_minimal.so.4",
		 dir, dir);
	if (access(LIBDIR "libtcmalloc.so.4", R_OK) ||
	    access(LIBDIR "libtcmalloc_minimal.so.4", R_OK))
		cr_skip_test("libtcmalloc.so.4 or libtcmalloc_minimal.so.4 is not installed");
	snprintf(tmp, sizeof(tmp), "TMPDIR=%s", tmp_dir);
	snprintf(log, sizeof(log), "ALLOC_TARGET_LOG=%s", log_path);
	fixture_path("alloc-glibc", path, sizeof(path));
	rc = fixture_start(&fx, argv, env, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);

	for (i = 0; i < 2; i++) {
		args[4] = cmds[i];
		cr_assert_eq(run_memsnap(&r, args), 0);
		cr_assert_eq(r.status, 5, "%s: exit %d: %s", cmds[i], r.status,
			     r.err);
		cr_assert_not_null(strstr(r.err, "the tcmalloc_minimal in " LIBDIR "libtcmalloc_minimal.so.4"),
				   "%s", r.err);
		cr_assert_not_null(strstr(r.err, "through the copy in " LIBDIR "libtcmalloc.so.4"),
				   "%s", r.err);
		cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1,
			     "more than one line: %s", r.err);
		run_free(&r);
		command('p');
	}
	args[3] = "tcmalloc";
	args[4] = "stats";
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_not_null(strstr(r.out, "tcmalloc (full) statistics"), "%s",
			   r.out);
	run_free(&r);
	command('p');
}

Test(backends, mimalloc_stats_trim_and_refusals)
{
	struct run r;

	start("alloc-mimalloc", NULL);
	check_stats_and_trim("mimalloc", "peak", "heap stats:");
	memsnap(&r, "info", NULL, NULL);
	cr_assert_not_null(strstr(r.out, "mimalloc"), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "version"), "%s", r.out);
	run_free(&r);
	assert_refused("dump", NULL);
	assert_refused("prof", "on");
	assert_clean();
}

Test(backends, mimalloc_preloaded)
{
	start("alloc-glibc", "libmimalloc.so.2");
	check_stats_and_trim("mimalloc", "peak", "heap stats:");
}

Test(backends, jemalloc_preloaded)
{
	start("alloc-glibc", "libjemalloc.so.2");
	check_stats_and_trim("jemalloc", "allocated",
			     "Begin jemalloc statistics");
}

/* The "can" line of info's jemalloc section in @out ("" if none). */
static const char *je_can(const char *out)
{
	static char can[64];
	const char *p = strstr(out, "\njemalloc"), *q;
	size_t n;

	can[0] = '\0';
	if (p && (p = strstr(p, "\n  can       ")) && (q = strchr(p + 1, '\n'))) {
		p += strlen("\n  can       ");
		n = (size_t)(q - p) < sizeof(can) ? (size_t)(q - p)
						  : sizeof(can) - 1;
		memcpy(can, p, n);
		can[n] = '\0';
	}
	return can;
}

/* A jemalloc started without prof:true cannot dump: info says so once it
 * has read opt.prof; --no-attach (state unread) gives the kind's. */
Test(backends, info_can_follows_the_live_state)
{
	struct run r;

	start("alloc-glibc", "libjemalloc.so.2");
	memsnap(&r, "info", NULL, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_str_eq(je_can(r.out), "stats, trim", "%s", r.out);
	cr_assert_not_null(strstr(r.out, "opt.prof"), "%s", r.out);
	run_free(&r);
	memsnap(&r, "info", "--no-attach", NULL);
	cr_assert_str_eq(je_can(r.out), "dump, prof, stats, trim", "%s", r.out);
	run_free(&r);
	assert_clean();
}

/* info says what memsnap can do with each allocator. */
Test(backends, info_lists_what_each_can_do)
{
	struct run r;

	start("alloc-tcmalloc-minimal", NULL);
	memsnap(&r, "info", NULL, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_not_null(strstr(r.out, "can       stats, trim\n"), "%s",
			   r.out);
	run_free(&r);
	memsnap(&r, "--json", "info", NULL);
	cr_assert_not_null(strstr(r.out, "\"can\": ["), "%s", r.out);
	run_free(&r);
	assert_clean();
}
