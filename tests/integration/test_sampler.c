/*
 * `memsnap prof on --sampler` end to end (issue #15): memsnap's own
 * byte-sampling heap profiler, placed in a target whose allocator
 * cannot profile, on tests/fixtures/sampler_target.c (plain glibc
 * malloc, no frame pointers; sampler-target-je: the same on a jemalloc
 * without prof:true).  Proven here:
 *
 *   - the CLI's words: `prof on --sampler` twice, with --json, `info`'s
 *     sampler line, `prof off`
 *   - each allocation site's live bytes, unsampled from `dump` by
 *     `report --format folded`, within 10% of the exact count the
 *     fixture gives, under a stack that reaches main through
 *     sampler_sites (unwound by DWARF CFI: the fixture has no frame
 *     pointers)
 *   - freed blocks leave the profile; `report --base` finds the leak and
 *     nothing else
 *   - `prof off` puts every GOT slot of the malloc family back to the
 *     value it had before `prof on`, read here from /proc/PID/mem at
 *     addresses found with readelf (not with memsnap's code), and every
 *     file mapping back to its permissions (RELRO read-only again)
 *
 * The same suite, `sampler`, goes on in
 *
 *   test_sampler_robust.c  20 rounds of on, dump and off while four
 *                          threads allocate, check and free; 30 runs of
 *                          memsnap SIGKILLed at a random moment; threads
 *                          inside the bytes to patch
 *   test_sampler_linked.c  allocators linked into the program: entry
 *                          points patched with every thread stopped
 *   test_sampler_kinds.c   other allocators (a jemalloc target without
 *                          profiling gets the sampler too), C++,
 *                          dlopen, a target in its own mount namespace
 *
 * and its .init and .fini, declared here, serve all four files
 * (sampler_setup(), sampler_teardown(): tests/lib/sampler.h).
 *
 * After every test the target is alive, no thread stopped or traced,
 * and its ping says every block holds its pattern, no allocation
 * failed and its threads still make progress.
 *
 * A memsnap without `prof on --sampler` (exit 2, "unexpected argument
 * '--sampler'") has every test that needs it skipped, saying so.
 * fixture_counts_match_jemalloc_profiler needs no sampler: it
 * checks the fixture's counts and the reading of folded output
 * (tests/lib/sampler.c) against jemalloc's own profiler, recording
 * every allocation.
 */
#include "tests/lib/fault.h"
#include "tests/lib/procsnap.h"
#include "tests/lib/sampler.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(sampler, .init = sampler_setup, .fini = sampler_teardown,
	  .timeout = 300);

/* The executable's own malloc slot in @g (the sites call through it). */
static size_t exe_malloc_slot(const struct got_snap *g)
{
	char exe[64], path[PATH_MAX];
	ssize_t n;
	size_t i;

	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)fx.pid);
	n = readlink(exe, path, sizeof(path) - 1);
	cr_assert_gt(n, 0, "%s: %s", exe, strerror(errno));
	path[n] = '\0';
	for (i = 0; i < g->n; i++)
		if (!strcmp(g->v[i].obj, path) && !strcmp(g->v[i].name, "malloc"))
			return i;
	cr_assert_fail("no malloc GOT slot in %s", path);
	return 0;
}

/* ---- the tests ----------------------------------------------------------- */

/* The words: on twice, --json, info's line, off. */
Test(sampler, on_twice_json_info_off)
{
	const char *v;
	struct run r;
	bool info_line = false;
	char *line;

	start("sampler-target", NULL);
	sampler_on(16384);
	/* again: already on is not an error */
	sampler_on(16384);

	memsnap(&r, "--json", "prof", "on", "--sampler", "--sample-bytes",
		"16384", NULL);
	cr_assert_eq(r.status, 0, "--json prof on --sampler: exit %d: %s",
		     r.status, r.err);
	v = strchr(r.out, '{');
	cr_assert(v && strrchr(r.out, '}') > v, "not a JSON object: '%s'",
		  r.out);
	v = json_value(r.out, "pid");
	cr_assert(v && atoi(v) == fx.pid, "\"pid\" of pid %d: %s",
		  (int)fx.pid, r.out);
	v = json_value(r.out, "action");
	cr_assert(v && !strncmp(v, "\"sampling\"", 10),
		  "\"action\": \"sampling\" wanted: %s", r.out);
	v = json_value(r.out, "sampler");
	cr_assert(v && !strncmp(v, "true", 4), "\"sampler\": true wanted: %s",
		  r.out);
	v = json_value(r.out, "mean");
	cr_assert(v && strtoll(v, NULL, 10) == 16384,
		  "\"mean\": 16384 wanted: %s", r.out);
	run_free(&r);

	memsnap(&r, "info", NULL);
	cr_assert_eq(r.status, 0, "info: exit %d: %s", r.status, r.err);
	for (line = r.out; line; line = strchr(line, '\n')) {
		line += *line == '\n';
		if (!strncmp(line, "sampler", 7) &&
		    isspace((unsigned char)line[7]))
			info_line = true;
	}
	cr_assert(info_line, "info has no 'sampler' line with the sampler "
		  "on:\n%s", r.out);
	run_free(&r);

	sampler_off();
	assert_untouched(&fx, "after prof off");
}

/* A mean that samples nearly every allocation is taken, and said: one
 * warning line; with --quiet, none. */
Test(sampler, a_tiny_mean_is_taken_with_a_warning)
{
	char want[96];
	struct run r;

	start("sampler-target", NULL);
	memsnap(&r, "prof", "on", "--sampler", "--sample-bytes", "1", NULL);
	need_sampler(&r);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	snprintf(want, sizeof(want), "memsnap: warning: pid %d: one sample "
		 "every 1 byte: nearly every allocation", (int)fx.pid);
	cr_assert(!strncmp(r.err, want, strlen(want)) &&
		  count_lines(r.err) == 1, "%s", r.err);
	run_free(&r);
	memsnap(&r, "--quiet", "prof", "on", "--sampler", "--sample-bytes",
		"2", NULL);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_assert_str_eq(r.err, "");
	run_free(&r);
	sampler_off();
	assert_untouched(&fx, "after a tiny mean");
}

/* prof reset with the sampler on, on glibc: refused for what it is
 * (the sampler keeps live blocks; off then on starts afresh), not
 * with advice to switch the sampler on; nothing stopped, nothing
 * changed. */
Test(sampler, reset_with_the_sampler_on_says_what_the_sampler_is)
{
	char want[320];
	struct run r;

	start("sampler-target", NULL);
	sampler_on(0);
	memsnap(&r, "prof", "reset", NULL);
	cr_assert_eq(r.status, 5, "exit %d: %s", r.status, r.err);
	snprintf(want, sizeof(want),
		 "memsnap: prof %d: memsnap's sampler has no reset: it keeps "
		 "the blocks sampled and still live, and forgets each when it "
		 "is freed\n"
		 "memsnap: hint: `memsnap --pid %d prof off`, then `prof on "
		 "--sampler`, starts it afresh\n", (int)fx.pid, (int)fx.pid);
	cr_assert_str_eq(r.err, want);
	run_free(&r);
	sampler_off();
	assert_untouched(&fx, "after prof reset was refused");
}

/*
 * A program stripped of every symbol, its debug file nowhere: report
 * says so once, names how many of its frames have no name, and where a
 * debug file would be looked for (its build-id), instead of leaving
 * bare addresses unexplained.  libc, which has its symbols, is not
 * named.
 */
Test(sampler, a_stripped_program_is_named_with_where_its_symbols_go)
{
	const char *args[4] = { "report", NULL, NULL };
	char path[PATH_MAX + 64];
	struct run r;

	start("sampler-target-stripped", NULL);
	sampler_on(16384);
	command_counts('a');
	dump_to("stripped", 16384, path, sizeof(path));
	sampler_off();
	args[1] = path;
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "report: exit %d: %s", r.status, r.err);
	cr_assert(strstr(r.err, "sampler-target-stripped' has no symbols "
			 "(stripped) and no debug file was found: ") &&
		  strstr(r.err, "/usr/lib/debug/.build-id/"),
		  "no word on the stripped program: %s", r.err);
	cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
	cr_assert_null(strstr(r.err, "libc.so"), "%s", r.err);
	run_free(&r);
	assert_untouched(&fx, "after the dump");
}

/* The times "deep_down" occurs in @line's @n bytes. */
static unsigned int deep_frames(const char *line, size_t n)
{
	unsigned int k = 0;
	const char *p = line;

	while ((p = memmem(p, n - (size_t)(p - line), "deep_down", 9))) {
		k++;
		p += 9;
	}
	return k;
}

/*
 * deep_alloc() called 101 frames of 256 bytes below deep_down() (some
 * 27 KiB of stack), with the sampler keeping @stack_bytes of each
 * stack (NULL: its default, 16 KiB).  @cut: the stack is deeper than
 * the copy, so it ends in a [truncated] frame, its root in the folded
 * output, and the dump says how many and how much was kept; else it
 * reaches the thread's start, every deep_down() frame in it.  Either
 * way a shallow stack (leak_grow()) is whole.
 */
static void deep_stacks(const char *stack_bytes, bool cut)
{
	const char *args[] = { "report", NULL, "--format", "folded", "-q",
			       NULL };
	char path[PATH_MAX + 64], reply[128], kept[64];
	bool deep = false, shallow = false;
	struct run r;
	char *line;

	start("sampler-target", NULL);
	if (stack_bytes) {
		memsnap(&r, "prof", "on", "--sampler", "--sample-bytes",
			"16384", "--stack-bytes", stack_bytes, NULL);
		need_sampler(&r);
		cr_assert_eq(r.status, 0, "prof on: exit %d: %s", r.status,
			     r.err);
		run_free(&r);
	} else {
		sampler_on(16384);
	}
	memsnap(&r, "info", NULL);
	snprintf(kept, sizeof(kept), "%s KiB of stack each",
		 stack_bytes ? "64" : "16");
	cr_assert(strstr(r.out, kept), "info: no '%s' in:\n%s", kept, r.out);
	run_free(&r);
	command_expect('d', "ok deep=", reply, sizeof(reply));
	command_counts('g');
	dump_try("deep", path, sizeof(path), &r);
	cr_assert_eq(r.status, 0, "dump: exit %d: %s", r.status, r.err);
	snprintf(kept, sizeof(kept), "the sampler keeps %s KiB of each",
		 stack_bytes ? "64" : "16");
	cr_assert(!cut == !strstr(r.err, kept), "dump said:\n%s", r.err);
	run_free(&r);
	sampler_off();
	args[1] = path;
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "report: exit %d: %s", r.status, r.err);
	for (line = r.out; line && *line; line = strchr(line, '\n')) {
		size_t n;

		line += *line == '\n';
		n = strcspn(line, "\n");
		if (memmem(line, n, "deep_alloc", 10)) {
			deep = true;
			if (cut)
				cr_assert(!strncmp(line, "[truncated];", 12),
					  "a cut stack not marked: %.*s",
					  (int)n, line);
			else
				cr_assert(!memmem(line, n, "[truncated]", 11) &&
						  deep_frames(line, n) == 101,
					  "not the whole stack (%u deep_down "
					  "frames): %.*s", deep_frames(line, n),
					  (int)n, line);
		}
		if (memmem(line, n, "leak_grow", 9)) {
			shallow = true;
			cr_assert(!memmem(line, n, "[truncated]", 11),
				  "a whole stack marked: %.*s", (int)n, line);
		}
	}
	cr_assert(deep && shallow, "deep_alloc %d, leak_grow %d in:\n%s",
		  deep, shallow, r.out);
	run_free(&r);
	assert_untouched(&fx, "after the deep stacks");
}

Test(sampler, a_cut_stack_is_marked_truncated)
{
	deep_stacks(NULL, true);
}

/*
 * prof on --stack-bytes 64K: the same 27 KiB deep stack whole.  The
 * table keeps its copies' size for the process's life: a later prof on
 * asking for another says so, and takes the table's.
 */
Test(sampler, a_larger_stack_copy_reaches_the_thread_start)
{
	struct run r;

	deep_stacks("64K", false);
	memsnap(&r, "prof", "on", "--sampler", "--stack-bytes", "8K", NULL);
	cr_assert_eq(r.status, 0, "prof on: exit %d: %s", r.status, r.err);
	cr_assert(strstr(r.err, "keeps its 64 KiB of stack per sample"),
		  "prof on said:\n%s", r.err);
	run_free(&r);
	memsnap(&r, "--json", "info", NULL);
	cr_assert(strstr(r.out, "\"stack_bytes\": 65536"), "%s", r.out);
	run_free(&r);
	sampler_off();
	assert_untouched(&fx, "after the second prof on");
}

/*
 * A child forked while the sampler is on keeps the hooks and a copy of
 * the table: memsnap --pid CHILD dump gives the child's own profile
 * (fork_child_alloc()'s 4 MB within 10%, not what the parent allocated
 * after the fork),
 * prof off in the child puts its slots back, and the parent's sampler
 * runs on, untouched, until its own prof off.
 */
static void forked_child_profile(const char *fixture)
{
	const char *args[] = { "report", NULL, "--format", "folded", "-q",
			       NULL };
	const char *cdump[] = { "--pid", NULL, "dump", "-o", NULL, NULL };
	const char *coff[] = { "--pid", NULL, "prof", "off", NULL };
	char path[PATH_MAX + 64], reply[128], cpid[16];
	long long got = 0, want;
	struct run r;
	char *line;
	pid_t child;

	start(fixture, NULL);
	/* 2048 blocks of 2000 bytes, each sampled with p = 0.62: the
	 * estimate's standard error near 2%, so 10% is 5 of them (at
	 * 16 KiB it was 6%, and 10% failed one run in ten) */
	sampler_on(2048);
	command_expect('k', "ok child=", reply, sizeof(reply));
	cr_assert_eq(sscanf(reply, "ok child=%d bytes=%lld", &child, &want),
		     2, "%s", reply);
	command_counts('g');	/* the parent's, after the fork */
	snprintf(cpid, sizeof(cpid), "%d", (int)child);
	snprintf(path, sizeof(path), "%s/child.heap", base);
	cdump[1] = cpid;
	cdump[4] = path;
	cr_assert_eq(run_memsnap(&r, cdump), 0);
	cr_assert_eq(r.status, 0, "dump of the child: exit %d: %s", r.status,
		     r.err);
	run_free(&r);
	args[1] = path;
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "report: exit %d: %s", r.status, r.err);
	for (line = r.out; line && *line; line = strchr(line, '\n')) {
		size_t n;
		const char *sp;

		line += *line == '\n';
		n = strcspn(line, "\n");
		sp = memrchr(line, ' ', n);
		cr_assert_null(memmem(line, n, "leak_grow", 9),
			       "the parent's later blocks in the child: %.*s",
			       (int)n, line);
		if (sp && memmem(line, n, "fork_child_alloc", 16))
			got += atoll(sp + 1);
	}
	cr_assert(near(got, want, 10), "the child's fork_child_alloc(): %lld "
		  "bytes, %lld allocated:\n%s", got, want, r.out);
	run_free(&r);
	coff[1] = cpid;
	cr_assert_eq(run_memsnap(&r, coff), 0);
	cr_assert_eq(r.status, 0, "prof off in the child: exit %d: %s",
		     r.status, r.err);
	cr_assert(strstr(r.out, "sampler off"), "%s", r.out);
	run_free(&r);
	cr_assert_eq(kill(child, 0), 0, "the child died");
	/* the parent's sampler is still on, and goes off as usual */
	memsnap(&r, "info", "--no-attach", NULL);
	cr_assert(strstr(r.out, "sampler   on"), "%s", r.out);
	run_free(&r);
	sampler_off();
	assert_untouched(&fx, "after a child's dump and prof off");
}

/* Its GOT slots swapped (glibc malloc). */
Test(sampler, a_child_forked_with_the_sampler_on_has_its_profile)
{
	forked_child_profile("sampler-target");
}

/* jemalloc linked into the program: its entry points patched, and put
 * back in the child by a world stop of the child's own. */
Test(sampler, a_child_forked_with_the_sampler_on_has_its_profile_linked)
{
	forked_child_profile("sampler-target-je-static");
}

/*
 * Churn: every sampled block freed leaves an empty profile, which is
 * right, and dump says why in one line instead of leaving an empty
 * report to puzzle over; --json carries the samples taken and freed.
 */
Test(sampler, an_empty_profile_of_churn_says_so)
{
	char path[PATH_MAX + 64], want[96];
	const char *v;
	long long taken;
	struct run r;

	start("sampler-target", NULL);
	sampler_on(16384);
	command_counts('a');
	command_counts('F');
	dump_try("churn", path, sizeof(path), &r);
	cr_assert_eq(r.status, 0, "dump: exit %d: %s", r.status, r.err);
	snprintf(want, sizeof(want), "memsnap: pid %d: the profile is empty: "
		 "all ", (int)fx.pid);
	cr_assert(!strncmp(r.err, want, strlen(want)) &&
		  strstr(r.err, " were freed since") &&
		  strstr(r.err, "`memsnap report --alloc` shows where") &&
		  count_lines(r.err) == 1, "%s", r.err);
	run_free(&r);
	memsnap(&r, "--json", "dump", "-o", path, NULL);
	cr_assert_eq(r.status, 0, "dump --json: exit %d: %s", r.status,
		     r.err);
	v = json_value(r.out, "samples_taken");
	cr_assert(v && (taken = atoll(v)) > 1000, "%s", r.out);
	v = json_value(r.out, "samples_freed");
	cr_assert(v && atoll(v) == taken, "%s", r.out);
	v = json_value(r.out, "samples");
	cr_assert(v && atoll(v) == 0, "%s", r.out);
	run_free(&r);
	sampler_off();
	assert_untouched(&fx, "after the churn");
}

/*
 * Churn is counted: every site allocated, freed and allocated again
 * shows its bytes in use once in the default report and twice with
 * --alloc (the freed half from the reservoir of freed samples, whose
 * draw adds its own error: 15%), and the text report says how much was
 * allocated since prof on.
 */
Test(sampler, churn_is_counted_by_alloc)
{
	static const enum site sites[] = { MALLOC_SMALL, CALLOC, LARGE };
	const char *text[] = { "report", NULL, NULL };
	char path[PATH_MAX + 32];
	struct folded *fo = calloc(1, sizeof(*fo));
	struct counts c;
	struct run r;
	size_t i;

	cr_assert_not_null(fo);
	start("sampler-target", NULL);
	sampler_on(16384);
	command_counts('a');
	command_counts('F');
	c = command_counts('a');
	dump_to("churn", 16384, path, sizeof(path));
	folded_load(path, NULL, fo);
	for (i = 0; i < sizeof(sites) / sizeof(sites[0]); i++) {
		long long v = fo->site[sites[i]], want = c.v[sites[i]];

		cr_assert(near(v, want, 10), "%s in use: %lld bytes, not "
			  "within 10%% of %lld", site_name[sites[i]], v, want);
	}
	folded_free(fo);
	folded_load_with(path, NULL, "--alloc", fo);
	for (i = 0; i < sizeof(sites) / sizeof(sites[0]); i++) {
		long long v = fo->site[sites[i]], want = 2 * c.v[sites[i]];

		cr_assert(near(v, want, 15), "%s allocated: %lld bytes, not "
			  "within 15%% of %lld", site_name[sites[i]], v, want);
	}
	folded_free(fo);
	text[1] = path;
	cr_assert_eq(run_memsnap(&r, text), 0);
	cr_assert_eq(r.status, 0, "report: exit %d: %s", r.status, r.err);
	cr_assert(strstr(r.out, "\nAllocated since profiling began: "),
		  "%s", r.out);
	run_free(&r);
	sampler_off();
	assert_untouched(&fx, "after the churn");
	free(fo);
}

/*
 * pprof reads all four of a heap profile's sample types from a churned
 * sampler's dump, and its alloc_space names the churned site although
 * nothing of it is in use.
 */
Test(sampler, churn_reaches_pprof_as_alloc_space)
{
	char path[PATH_MAX + 32], cmd[12 * PATH_MAX];
	struct run r;

	cr_assert_eq(run_shell(&r, "command -v go"), 0);
	if (r.status)
		skip_test("go is not installed (Debian golang-go): cannot "
			  "read the pprof export");
	run_free(&r);
	start("sampler-target", NULL);
	sampler_on(16384);
	command_counts('a');
	command_counts('F');
	dump_to("churned", 16384, path, sizeof(path));
	snprintf(cmd, sizeof(cmd),
		 "%s report %s -q --format pprof -o %s/heap.pb.gz && "
		 "HOME=%s GOCACHE=%s/gocache go tool pprof -raw %s/heap.pb.gz "
		 "| head -n 4 && HOME=%s GOCACHE=%s/gocache go tool pprof "
		 "-top -sample_index=alloc_space %s/heap.pb.gz",
		 getenv("MEMSNAP_BIN"), path, base, base, base, base, base,
		 base, base);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
	cr_assert(strstr(r.out, "alloc_objects/count alloc_space/bytes "
			 "inuse_objects/count inuse_space/bytes"), "%s",
		  r.out);
	cr_assert(strstr(r.out, " site_malloc_small\n"), "%s", r.out);
	run_free(&r);
	sampler_off();
	assert_untouched(&fx, "after the churn");
}

/*
 * Sampling is random across rounds: the same allocations on the same
 * thread (glibc gives it the same TCB) after another prof on are
 * sampled anew, so four rounds give four sets of estimates of the
 * sites, not one four times, and the mean of site_malloc_small's is
 * nearer the truth than 5%.
 * Once the countdowns were seeded from the thread and the slot alone,
 * and every round drew the same samples.
 */
Test(sampler, rounds_draw_other_samples)
{
	char dump[PATH_MAX + 32], name[16];
	struct folded *fo = calloc(1, sizeof(*fo));
	long long est[4], sum = 0, sites[4][NSITES];
	struct counts c = { 0 };
	int i, j;

	cr_assert_not_null(fo);
	start("sampler-target", NULL);
	for (i = 0; i < 4; i++) {
		sampler_on(16384);
		c = command_counts('a');
		snprintf(name, sizeof(name), "round%d", i);
		dump_to(name, 16384, dump, sizeof(dump));
		folded_load(dump, NULL, fo);
		est[i] = fo->site[MALLOC_SMALL];
		memcpy(sites[i], fo->site, sizeof(sites[i]));
		folded_free(fo);
		command_counts('F');
		sampler_off();
		sum += est[i];
		/* a site's estimate is its number of samples times one
		 * weight: two rounds tie on one site one time in 150, on
		 * all seven never */
		for (j = 0; j < i; j++)
			cr_assert(memcmp(sites[i], sites[j], sizeof(sites[i])),
				  "rounds %d and %d drew the same samples: "
				  "%lld bytes", j, i, est[i]);
	}
	cr_assert(near(sum / 4, c.v[MALLOC_SMALL], 5), "the mean of 4 rounds, "
		  "%lld bytes, not within 5%% of %lld", sum / 4,
		  c.v[MALLOC_SMALL]);
	free(fo);
	assert_untouched(&fx, "after four rounds");
}

/* Where @pid's stack mapping starts, as /proc/PID/maps says. */
static unsigned long long stack_start(pid_t pid)
{
	char path[64], line[512];
	unsigned long long lo = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "[stack]"))
			lo = strtoull(line, NULL, 16);
	fclose(f);
	cr_assert_neq(lo, 0ull, "no [stack] in %s", path);
	return lo;
}

/*
 * The seed is random, not only of the round: the same program run twice
 * with the same addresses (no ASLR: the same thread pointer, the same
 * table) and the same allocations draws other samples each run.  Once
 * the countdowns were seeded from the thread, the table's address and
 * prof on's count alone, and both runs drew the same.
 */
Test(sampler, runs_of_the_same_program_draw_other_samples)
{
	char dump[PATH_MAX + 32], name[16];
	struct folded *fo = calloc(1, sizeof(*fo));
	unsigned long long stack[2];
	long long sites[2][NSITES];
	int i;

	cr_assert_not_null(fo);
	for (i = 0; i < 2; i++) {
		start_without_aslr("sampler-target");
		stack[i] = stack_start(fx.pid);
		sampler_on(16384);
		command_counts('a');
		snprintf(name, sizeof(name), "run%d", i);
		dump_to(name, 16384, dump, sizeof(dump));
		folded_load(dump, NULL, fo);
		memcpy(sites[i], fo->site, sizeof(sites[i]));
		folded_free(fo);
		sampler_off();
		assert_untouched(&fx, "after a run");
		fixture_stop(&fx);
	}
	/* the premise: both runs laid out alike */
	cr_assert_eq(stack[0], stack[1], "setarch -R did not fix the "
		     "layout: stacks at %#llx and %#llx", stack[0], stack[1]);
	/* every site's estimate the same: the same samples (one site may
	 * tie by chance, rounds_draw_other_samples) */
	cr_assert(memcmp(sites[0], sites[1], sizeof(sites[0])),
		  "two runs drew the same samples: %lld bytes",
		  sites[0][MALLOC_SMALL]);
	free(fo);
}

/*
 * Switching the sampler holds the borrowed thread for a handful of
 * ptrace stops, not some per GOT slot: the image reads the slots in one
 * batch and makes each run of pages writable once, so a `prof on` (the
 * image already loaded) and a `prof off` of the fixture's 15 slots in 2
 * objects wait for at most 20 stops each; once each slot cost 4 system
 * calls, 2 stops each.  And fewer than a `call getpid` (prof off no
 * more: its madvise gives the table back): the switch runs memsnap's
 * own code, which leaves errno alone, so the thread is not asked for
 * its errno (a libc call is), and the image keeps its pid instead of
 * asking the kernel (slots bound lazily after the first prof on cost a
 * mmap for their mirrors at the next: measured after).
 */
Test(sampler, switching_takes_few_ptrace_stops)
{
	struct run r;
	unsigned int n, call;
	int i;

	start("sampler-target", NULL);
	sampler_on(16384);	/* loads the image */
	sampler_off();
	/* slots bound lazily since then get their mirrors (a mmap) */
	sampler_on(16384);
	sampler_off();
	memsnap(&r, "--timings", "call", "getpid", NULL);
	cr_assert_eq(r.status, 0, "call getpid: exit %d: %s", r.status,
		     r.err);
	call = ptrace_stops(&r);
	run_free(&r);
	for (i = 0; i < 2; i++) {
		memsnap(&r, "--timings", "prof", i ? "off" : "on",
			i ? NULL : "--sampler", NULL);
		need_sampler(&r);
		cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
		n = ptrace_stops(&r);
		cr_assert_leq(n, 20u, "prof %s: %u ptrace stops: %s",
			      i ? "off" : "on", n, r.err);
		/* off makes one system call more: the madvise that gives
		 * the table's pages back */
		cr_assert_leq(n + !i, call, "prof %s: %u ptrace stops, "
			      "`call getpid` %u: %s", i ? "off" : "on", n,
			      call, r.err);
		run_free(&r);
	}
	assert_untouched(&fx, "after prof on and off");
}

/*
 * The image's last page, where it keeps the pid its stack copies use,
 * is marked MADV_WIPEONFORK (VmFlags "wf"): a fork child finds 0 there
 * and asks for its own (a_child_forked_with_the_sampler_on_has_its_
 * profile shows the copies are then the child's).
 */
Test(sampler, the_pid_page_is_wiped_in_a_fork_child)
{
	char path[64], line[512];
	bool wf = false;
	FILE *f;

	start("sampler-target", NULL);
	sampler_on(16384);
	snprintf(path, sizeof(path), "/proc/%d/smaps", (int)fx.pid);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmFlags:", 8) && strstr(line, " wf"))
			wf = true;
	fclose(f);
	cr_assert(wf, "no mapping of pid %d is wiped on fork", (int)fx.pid);
	sampler_off();
	assert_untouched(&fx, "after prof on and off");
}

/*
 * The table is address space sized for twice the samples a 1 GiB heap
 * gives (2 GiB at a 16 KiB mean) and touched where records land: it is
 * marked for small pages (VmFlags "nh"), or a kernel with transparent
 * huge pages "always" makes it resident whole (the arm64 guest's did:
 * 2.1 GB, and its OOM killer took the fixture).
 */
Test(sampler, the_table_is_made_of_small_pages)
{
	char path[64], line[512];
	unsigned long long lo = 0, hi = 0, big = 0;
	bool found = false, nh = false;
	FILE *f;

	if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK))
		cr_skip_test("this kernel has no transparent huge pages");
	start("sampler-target", NULL);
	sampler_on(16384);
	snprintf(path, sizeof(path), "/proc/%d/smaps", (int)fx.pid);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		/* a mapping's first line (no field's name is hex and a
		 * dash) */
		if (sscanf(line, "%llx-%llx ", &lo, &hi) == 2) {
			big = hi - lo;
			continue;
		}
		if (big >= (1ull << 30) && !strncmp(line, "VmFlags:", 8)) {
			cr_assert(!found, "two mappings of 1 GiB or more");
			found = true;
			nh = strstr(line, " nh") != NULL;
		}
	}
	fclose(f);
	cr_assert(found, "no mapping of 1 GiB or more: where is the table?");
	cr_assert(nh, "the table may be made of huge pages (no \"nh\")");
	sampler_off();
	assert_untouched(&fx, "after prof on and off");
}

/*
 * Each site's live bytes within 10% of the exact count.  At a mean of
 * 16 KiB the smallest blocks (1000 bytes) are sampled about 2000 times:
 * the estimate's standard error is near 2%, so 10% is 4.5 of them.
 */
Test(sampler, accuracy_per_site)
{
	char dump[PATH_MAX + 32];
	struct folded *fo = calloc(1, sizeof(*fo));
	struct counts c;

	cr_assert_not_null(fo);
	start("sampler-target", NULL);
	sampler_on(16384);
	c = command_counts('a');
	dump_to("a", 16384, dump, sizeof(dump));
	folded_load(dump, NULL, fo);
	assert_sites(fo, &c, ~0u, "after 'a'");
	/* nothing was leaked yet: no stack may claim it */
	cr_assert_eq(fo->lines[LEAK], 0, "leak_grow in the profile before "
		     "it ran:\n%.3000s", fo->text);
	folded_free(fo);
	free(fo);
	assert_untouched(&fx, "after the dump");
	sampler_off();
	assert_untouched(&fx, "after prof off");
}

/*
 * A freed block leaves the profile: after 'f' frees every second block
 * of site_malloc_small, a new dump holds half of it, and the difference
 * of the two dumps is minus that half.  Mean 8 KiB: the 16384 blocks
 * left are sampled about 1900 times (standard error near 2%).
 */
Test(sampler, frees_are_forgotten)
{
	char d1[PATH_MAX + 32], d2[PATH_MAX + 32];
	struct folded *fo = calloc(1, sizeof(*fo));
	struct counts c0, c1;
	long long freed;

	cr_assert_not_null(fo);
	start("sampler-target", NULL);
	sampler_on(8192);
	c0 = command_counts('a');
	dump_to("before", 8192, d1, sizeof(d1));
	folded_load(d1, NULL, fo);
	assert_sites(fo, &c0, 1u << MALLOC_SMALL, "before 'f'");
	folded_free(fo);

	c1 = command_counts('f');
	freed = c0.v[MALLOC_SMALL] - c1.v[MALLOC_SMALL];
	cr_assert_eq(freed * 2, c0.v[MALLOC_SMALL],
		     "'f' freed %lld of %lld bytes", freed,
		     c0.v[MALLOC_SMALL]);
	dump_to("after", 8192, d2, sizeof(d2));
	folded_load(d2, NULL, fo);
	/* half of site_malloc_small, every other site untouched */
	assert_sites(fo, &c1, ~0u, "after 'f'");
	folded_free(fo);

	folded_load(d2, d1, fo);
	cr_assert(near(fo->site[MALLOC_SMALL], -freed, 10),
		  "site_malloc_small grew by %lld bytes, want -%lld within "
		  "10%%:\n%.3000s", fo->site[MALLOC_SMALL], freed, fo->text);
	folded_free(fo);
	free(fo);
	assert_untouched(&fx, "after the dumps");
	sampler_off();
	assert_untouched(&fx, "after prof off");
}

/*
 * The leak hunt of the README, on glibc: dump, leak 4 x 4 MiB, dump,
 * `report --base`.  leak_grow is the largest growth of any stack, about
 * 16 MiB; every other site, live all along, grows by less than 10% of
 * its size (the same blocks, sampled once: in fact by nothing).  Mean
 * 8 KiB: 8388 blocks of 2000 bytes are sampled about 1800 times.
 */
Test(sampler, leak_found_by_base)
{
	char d1[PATH_MAX + 32], d2[PATH_MAX + 32];
	struct folded *fo = calloc(1, sizeof(*fo));
	struct counts c0, c1 = { { 0 } };
	size_t i, top = 0;
	int s, k;

	cr_assert_not_null(fo);
	start("sampler-target", NULL);
	sampler_on(8192);
	c0 = command_counts('a');
	dump_to("old", 8192, d1, sizeof(d1));
	for (k = 0; k < 4; k++)
		c1 = command_counts('g');
	cr_assert_eq(c1.v[LEAK], 4 * 4194000LL, "leaked %lld bytes",
		     c1.v[LEAK]);
	dump_to("new", 8192, d2, sizeof(d2));
	folded_load(d2, d1, fo);

	cr_assert_gt(fo->nleaves, 0, "report --base printed nothing");
	for (i = 1; i < fo->nleaves; i++)
		if (fo->leaf[i].bytes > fo->leaf[top].bytes)
			top = i;
	cr_assert_str_eq(fo->leaf[top].name, "leak_grow",
			 "the top growth is %s (%lld bytes), not leak_grow "
			 "(%lld):\n%.3000s", fo->leaf[top].name,
			 fo->leaf[top].bytes, fo->site[LEAK], fo->text);
	cr_assert(near(fo->site[LEAK], c1.v[LEAK], 10),
		  "leak_grow grew by %lld bytes, %lld leaked (more than 10%% "
		  "off):\n%.3000s", fo->site[LEAK], c1.v[LEAK], fo->text);
	cr_assert(!fo->wrong[LEAK][0], "leak_grow's stack does not reach "
		  "main through sampler_sites: '%s'", fo->wrong[LEAK]);
	for (s = 0; s < LEAK; s++)
		cr_assert_lt(llabs(fo->site[s]) * 10, c0.v[s],
			     "%s, untouched, grew by %lld bytes (of %lld):\n"
			     "%.3000s", site_name[s], fo->site[s], c0.v[s],
			     fo->text);
	folded_free(fo);
	free(fo);
	assert_untouched(&fx, "after the dumps");
	sampler_off();
	assert_untouched(&fx, "after prof off");
}

/* The fixture's frames in @fo: at most 1% of @made bytes. */
static void assert_sites_empty(const struct folded *fo, long long made,
			       const char *what)
{
	cr_assert_leq(llabs(fo->fixture_bytes) * 100, made,
		      "%s: %lld bytes at the sites in the profile (of %lld "
		      "allocated):\n%.3000s",
		      what, fo->fixture_bytes, made, fo->text);
}

/*
 * `prof off` undoes `prof on`: every hooked GOT slot holds what it held
 * before (while on, the executable's malloc slot did not: the check
 * can see a swap), every file mapping has its permissions back (RELRO
 * read-only), and allocations are no longer sampled.  The sampled
 * blocks are freed while the sampler is on (so their records go) and
 * the set made again after `prof off`: the dump then holds nothing of
 * them.
 */
Test(sampler, prof_off_restores_got_and_relro)
{
	struct got_snap *g0 = calloc(1, sizeof(*g0)), *g = calloc(1, sizeof(*g));
	struct maps_snap *m0 = calloc(1, sizeof(*m0)),
			 *m = calloc(1, sizeof(*m));
	struct folded *fo = calloc(1, sizeof(*fo));
	char d[PATH_MAX + 32];
	struct counts c;
	long long want = 0;
	struct run r;
	size_t k;
	int s;

	cr_assert(g0 && g && m0 && m && fo, "calloc");
	start("sampler-target", NULL);
	got_take(fx.pid, g0);
	maps_take(fx.pid, m0);
	k = exe_malloc_slot(g0);

	sampler_on(16384);
	got_take(fx.pid, g);
	cr_assert_eq(g->n, g0->n, "the hooked GOT slots changed in number");
	cr_assert_neq(g->v[k].value, g0->v[k].value,
		      "prof on left the executable's malloc slot (0x%" PRIx64
		      ") at 0x%" PRIx64, g0->v[k].addr, g0->v[k].value);
	/* it samples: much of what 'a' makes is in the profile, at the
	 * sites (how exactly, and under which leaf, is for
	 * accuracy_per_site to check) */
	c = command_counts('a');
	dump_to("on", 16384, d, sizeof(d));
	folded_load(d, NULL, fo);
	for (s = 0; s < LEAK; s++)
		want += c.v[s];
	cr_assert_geq(fo->fixture_bytes * 2, want, "with the sampler on, "
		      "%lld of %lld bytes at the sites:\n%.3000s",
		      fo->fixture_bytes, want, fo->text);
	folded_free(fo);
	/* freed while on: forgotten */
	command_counts('F');
	dump_to("freed", 16384, d, sizeof(d));
	folded_load(d, NULL, fo);
	assert_sites_empty(fo, want, "after 'F' with the sampler on");
	folded_free(fo);

	sampler_off();
	got_take(fx.pid, g);
	assert_same_got(g0, g, "after prof off");
	maps_take(fx.pid, m);
	assert_same_perms(m0, m, "after prof off");

	/*
	 * Made after prof off: not sampled.  What dump does with the
	 * sampler off is not settled: a profile of what it still holds
	 * (nothing at the sites), or glibc's own refusal (exit 5).
	 */
	command_counts('a');
	if (dump_try("off", d, sizeof(d), &r) == 0) {
		assert_heap_v2(d, 0);
		folded_load(d, NULL, fo);
		assert_sites_empty(fo, want, "allocated after prof off");
		folded_free(fo);
	} else {
		cr_assert_eq(r.status, 5, "dump after prof off: exit %d: %s",
			     r.status, r.err);
		cr_log_info("dump after prof off: exit 5: %s", r.err);
	}
	run_free(&r);
	/* On again, the blocks made while off still live: the first
	 * round's records went at 'F', so none may be at the sites. */
	sampler_on(16384);
	dump_to("again", 16384, d, sizeof(d));
	folded_load(d, NULL, fo);
	assert_sites_empty(fo, want, "allocated while off, dumped on again");
	folded_free(fo);
	command_counts('F');
	sampler_off();
	got_take(fx.pid, g);
	assert_same_got(g0, g, "after a second prof off");
	maps_take(fx.pid, m);
	assert_same_perms(m0, m, "after a second prof off");
	free(g0);
	free(g);
	free(m0);
	free(m);
	free(fo);
	assert_untouched(&fx, "after prof off");
}

/*
 * No sampler needed: the fixture's counts and this file's reading of
 * folded reports, checked against jemalloc's own profiler recording
 * every allocation (lg_prof_sample:0).  jemalloc records usable sizes
 * (1000 bytes count as 1024): within 2.4% here.  Its stacks come from
 * libgcc's unwinder, so the fixture's CFI is checked too.
 */
Test(sampler, fixture_counts_match_jemalloc_profiler)
{
	char d[PATH_MAX + 32];
	struct folded *fo = calloc(1, sizeof(*fo));
	struct counts c;

	cr_assert_not_null(fo);
	need_jemalloc_profiling();
	if (!strncmp(jemalloc_version(), "5.1.", 4)) {
		free(fo);
		skip_test("jemalloc %s: its profiler recording every "
			  "allocation dies in this fixture (the arm64 "
			  "guest's cross-built 5.1)", jemalloc_version());
	}
	start("sampler-target-je", "MALLOC_CONF=prof:true,lg_prof_sample:0");
	command_counts('a');
	c = command_counts('g');
	dump_to("native", 1, d, sizeof(d));
	folded_load(d, NULL, fo);
	assert_sites(fo, &c, ~0u, "jemalloc's own profile");
	folded_free(fo);
	free(fo);
	assert_untouched(&fx, "after the dump");
}
