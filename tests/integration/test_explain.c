/*
 * explain on fixtures that know their own truth (tests/fixtures/
 * explain_*.c, explain.mk): each holds, frees, touches or maps a known
 * amount and says so in its ready line; explain must find it, in the
 * right part and finding, with the breakdown adding up to RSS within
 * 2% and the heap in use within 5% of what the program holds.  After
 * every run the fixture must answer a ping (its memory unchanged, its
 * threads where they were).
 */
#include "test_explain_lib.h"
#include "../lib/fixture.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#define MiB (1024 * 1024LL)

static struct fixture fx = { .pid = -1 };
static char file_path[PATH_MAX];

static void teardown(void)
{
	explain_free_all();
	fixture_stop(&fx);
	if (file_path[0])
		unlink(file_path);
}

TestSuite(explain, .fini = teardown, .timeout = 120);

/* Start fixture @name with @env (NULL-ended or NULL) and the arguments
 * after it (NULL-ended). */
static void start(const char *name, char *const env[], ...)
{
	char path[PATH_MAX];
	char *argv[16] = { path };
	size_t n = 1;
	va_list ap;
	int rc;

	va_start(ap, env);
	while (n + 1 < 16 && (argv[n] = va_arg(ap, char *)))
		n++;
	va_end(ap);
	argv[n] = NULL;
	fixture_path(name, path, sizeof(path));
	rc = fixture_start(&fx, argv, env, 60000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
}

/* explain --json on the fixture, sound and healthy after; its text form
 * starts with the same verdict. */
static void explain(struct explain *e)
{
	int64_t lo, hi;

	explain_run(fx.pid, NULL, e, &lo, &hi);
	explain_assert_sound(e, lo, hi, true);
	fixture_assert_healthy(&fx);
	explain_assert_text_verdict(fx.pid, e);
	fixture_assert_healthy(&fx);
}

/* Finding @id is there with @lo <= bytes <= @hi. */
static const struct explain_finding *
assert_finding(const struct explain *e, const char *id, int64_t lo, int64_t hi)
{
	const struct explain_finding *f = explain_finding(e, id);

	cr_assert_not_null(f, "no %s finding\n%s", id, e->json);
	cr_assert(f->bytes >= lo && f->bytes <= hi,
		  "finding %s: %" PRId64 " bytes, want %" PRId64 "..%" PRId64
		  "\n%s", id, f->bytes, lo, hi, e->json);
	return f;
}

static bool larger_pages(const struct explain *e);
static void assert_heap_in_use(const struct explain *e, int64_t held);
static void assert_heap_in_use_pages(const struct explain *e, int64_t held,
				     bool other_pages);

/*
 * `memsnap trim`, then explain again: the heap_free finding's bytes
 * (parts.heap_free, which stays when the finding goes under its
 * threshold) shrank by about what RSS fell (RSS read here from /proc,
 * not by memsnap); at least @min_fall fell.  @before is the explain
 * before the trim, with a heap_free finding.
 */
static void trim_and_compare(const struct explain *before, int64_t min_fall,
			     int64_t held)
{
	char pidstr[16];
	const char *trim[] = { "--pid", pidstr, "trim", NULL };
	struct explain after;
	struct run r;
	int64_t rss_a, rss_b, free_a, free_b, fell, shrank;

	cr_assert_not_null(explain_finding(before, "heap_free"), "%s",
			   before->json);
	free_a = before->part[P_HEAP_FREE];
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
	rss_a = proc_rss(fx.pid);
	cr_assert_eq(run_memsnap(&r, trim), 0);
	cr_assert_eq(r.status, 0, "trim: %s", r.err);
	run_free(&r);
	fixture_assert_healthy(&fx);
	rss_b = proc_rss(fx.pid);

	explain(&after);
	free_b = after.part[P_HEAP_FREE];
	fell = rss_a - rss_b;
	shrank = free_a - free_b;
	cr_assert_geq(fell, min_fall, "trim returned only %" PRId64 " bytes",
		      fell);
	/* "about": a tenth of what fell, and a MiB for what stays on the
	 * free lists in partial pages. */
	cr_assert_leq(llabs(shrank - fell), fell / 10 + MiB,
		      "heap_free shrank by %" PRId64 " but RSS fell by %" PRId64
		      "\nbefore:\n%s\nafter:\n%s", shrank, fell, before->json,
		      after.json);
	/* the page size the first explain read, which this one, with
	 * less free, may not have asked */
	assert_heap_in_use_pages(&after, held,
				 larger_pages(before) || larger_pages(&after));
	explain_free(&after);
}

/* Whether the allocator says it was built for larger pages than the
 * kernel's (jemalloc's arenas.page, read where a finding may quote
 * it). */
static bool larger_pages(const struct explain *e)
{
	int64_t built = 0, kernel = 0;

	return explain_num(e, "account.page", &built) &&
	       explain_num(e, "page_size", &kernel) && built > kernel;
}

static void assert_heap_in_use_pages(const struct explain *e, int64_t held,
				     bool other_pages)
{
	cr_assert(e->known[P_HEAP_IN_USE],
		  "heap_in_use is null: explain does not count what the "
		  "program holds (%" PRId64 " bytes)\n%s", held, e->json);
	/* An allocator built for larger pages than the kernel's (the
	 * arm64 guest's jemalloc of 64 KiB pages) rounds each block to
	 * size classes of those pages: a quarter at most, which it counts
	 * as in use. */
	assert_within_pct(e->part[P_HEAP_IN_USE], held, other_pages ? 25 : 5,
			  "heap_in_use against the bytes the fixture holds", e);
}

static void assert_heap_in_use(const struct explain *e, int64_t held)
{
	assert_heap_in_use_pages(e, held, larger_pages(e));
}

/*
 * glibc, 64 threads that each wrote 1 MiB and freed it, keeping a pin:
 * their arenas are mostly free but resident.  explain counts that as
 * heap_free; `trim` gives it back, and explain afterwards finds less
 * free memory by about what RSS fell (RSS read here, not by memsnap).
 */
Test(explain, glibc_arenas_free_memory_and_trim)
{
	const struct explain_finding *f;
	const char *remedy = NULL;
	struct explain a;
	int64_t held, cause = 0;

	start("explain-heap-glibc", NULL, "--hold", "8M", "--threads", "64",
	      "--thread-churn", "1M", NULL);
	held = ready_num(fx.ready, "held");

	explain(&a);
	assert_heap_in_use(&a, held);
	cr_assert_eq(a.threads, ready_num(fx.ready, "threads"), "%s", a.json);
	if (a.allocator)
		cr_assert_str_eq(a.allocator, "glibc");
	f = assert_finding(&a, "heap_free", 16 * MiB, 80 * MiB);
	cr_assert(f->remedy && (strstr(f->remedy, "trim") ||
				strstr(f->remedy, "MALLOC_ARENA_MAX")),
		  "heap_free's remedy names neither trim nor MALLOC_ARENA_MAX\n%s",
		  a.json);
	/* The 64 MiB were freed in the threads' arenas, not the main one:
	 * too many arenas for 2 CPUs' worth of work, a cause of heap_free,
	 * shown inside it (its bytes are heap_free's, not more). */
	cr_assert_null(explain_finding(&a, "glibc_arenas"), "%s", a.json);
	cr_assert(explain_cause(&a, "heap_free", "glibc_arenas", &cause,
				&remedy), "no glibc_arenas in heap_free\n%s",
		  a.json);
	cr_assert(cause >= 10 * MiB && cause <= a.part[P_HEAP_FREE], "%s",
		  a.json);
	cr_assert(remedy && strstr(remedy, "MALLOC_ARENA_MAX"),
		  "glibc_arenas' remedy does not name MALLOC_ARENA_MAX\n%s",
		  a.json);
	trim_and_compare(&a, 16 * MiB, held);
	explain_free(&a);
}

/* The same program with MALLOC_ARENA_MAX=1: one arena, so no
 * glibc_arenas finding, and its threads' freed memory still counted as
 * heap_free (the main arena's middle stays resident). */
Test(explain, glibc_one_arena_has_no_arena_finding)
{
	static char max[] = "MALLOC_ARENA_MAX=1";
	char *env[] = { max, NULL };
	struct explain e;

	start("explain-heap-glibc", env, "--hold", "8M", "--threads", "64",
	      "--thread-churn", "1M", NULL);
	explain(&e);
	assert_heap_in_use(&e, ready_num(fx.ready, "held"));
	cr_assert_null(explain_finding(&e, "glibc_arenas"), "%s", e.json);
	cr_assert_not(explain_cause(&e, "heap_free", "glibc_arenas", NULL,
				    NULL), "%s", e.json);
	cr_assert_geq(e.part[P_HEAP_FREE], 16 * MiB, "%s", e.json);
	cr_assert_eq(e.threads, ready_num(fx.ready, "threads"), "%s", e.json);
	explain_free(&e);
}

/* jemalloc keeping 200 MiB of dirty pages (dirty_decay_ms:-1). */
Test(explain, jemalloc_dirty_pages_are_heap_free)
{
	static char conf[] = "MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1";
	char *env[] = { conf, NULL };
	const struct explain_finding *f;
	struct explain e;
	int64_t freed;

	start("explain-heap-jemalloc", env, "--hold", "8M", "--churn", "200M",
	      NULL);
	freed = ready_num(fx.ready, "freed");
	explain(&e);
	if (e.allocator)
		cr_assert_str_eq(e.allocator, "jemalloc");
	assert_heap_in_use(&e, ready_num(fx.ready, "held"));
	assert_within_pct(e.part[P_HEAP_FREE], freed, 10,
			  "parts.heap_free against the 200 MiB freed", &e);
	f = assert_finding(&e, "heap_free", freed * 9 / 10, freed * 11 / 10);
	cr_assert(f->remedy && strstr(f->remedy, "dirty_decay_ms"),
		  "heap_free's remedy does not name dirty_decay_ms\n%s", e.json);
	cr_assert_str_eq(e.f[0].id, "heap_free", "%s", e.json);
	/* trim purges every arena: the dirty pages go. */
	trim_and_compare(&e, freed * 8 / 10, ready_num(fx.ready, "held"));
	explain_free(&e);
}

/*
 * jemalloc with 128 arenas, one per thread: its metadata is a large
 * share of a small process.  The truth is jemalloc's own stats.metadata,
 * read by the fixture itself: explain's resident metadata is at most
 * that and at least a third of it.
 */
Test(explain, jemalloc_many_arenas_metadata)
{
	static char conf[] = "MALLOC_CONF=narenas:128";
	char *env[] = { conf, NULL };
	struct explain e;
	int64_t meta;

	start("explain-heap-jemalloc", env, "--hold", "1M", "--threads", "128",
	      NULL);
	cr_assert_geq(ready_num(fx.ready, "je_narenas"), 128, "%s", fx.ready);
	meta = ready_num(fx.ready, "je_metadata");
	explain(&e);
	assert_heap_in_use(&e, ready_num(fx.ready, "held"));
	cr_assert(e.known[P_ALLOCATOR_METADATA], "%s", e.json);
	cr_assert(e.part[P_ALLOCATOR_METADATA] >= meta / 3 &&
			  e.part[P_ALLOCATOR_METADATA] <= meta + meta / 20,
		  "allocator_metadata %" PRId64 ", jemalloc's stats.metadata %"
		  PRId64 "\n%s", e.part[P_ALLOCATOR_METADATA], meta, e.json);
	assert_finding(&e, "allocator_metadata", meta / 3, meta + meta / 20);
	cr_assert_eq(e.threads, 129, "%s", e.json);
	explain_free(&e);
}

/* Whether transparent huge pages can be had here at all; "" if so. */
static const char *thp_unavailable(void)
{
	char buf[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");

	if (!f)
		return "this kernel has no transparent huge pages";
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	if (strstr(buf, "[never]"))
		return "transparent huge pages are [never] here";
	return "";
}

/*
 * 64 MiB on a 2 MiB boundary with MADV_HUGEPAGE, one byte written per
 * 2 MiB: 32 bytes written, 64 MiB resident as huge pages (read from
 * smaps here).  explain reports the huge pages and the region as memory
 * outside the allocator.
 */
Test(explain, thp_inflates_a_sparse_region)
{
	const char *why = thp_unavailable();
	struct explain e;
	unsigned long at;
	int64_t region, huge, got = 0;

	if (why[0])
		cr_skip_test("%s", why);
	start("explain-mapped", NULL, "--thp", "64M", NULL);
	at = (unsigned long)ready_num(fx.ready, "thp_at");
	region = ready_num(fx.ready, "thp");
	huge = smaps_field_at(fx.pid, at, "AnonHugePages");
	cr_assert_geq(huge, 0, "no mapping at %#lx", at);
	if (huge == 0)
		cr_skip_test("the kernel gave no huge page to a MADV_HUGEPAGE "
			     "region (none free, or defrag off)");
	explain(&e);
	/* a cause of the region's bytes: inside the finding of the part
	 * they are in, the program's own mapping */
	cr_assert_null(explain_finding(&e, "huge_pages"), "%s", e.json);
	cr_assert(explain_cause(&e, "anon_other", "huge_pages", &got, NULL),
		  "%s", e.json);
	cr_assert(got >= huge / 2 && got <= huge + 4 * MiB, "%s", e.json);
	cr_assert_geq(e.part[P_ANON_OTHER],
		      smaps_field_at(fx.pid, at, "Rss") * 95 / 100, "%s",
		      e.json);
	cr_assert_leq(e.part[P_ANON_OTHER], region + 8 * MiB, "%s", e.json);
	explain_free(&e);
}

/* AnonHugePages of smaps_rollup, in bytes. */
static int64_t anon_huge_total(pid_t pid)
{
	char path[64], line[256];
	long long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	f = fopen(path, "re");
	cr_assert_not_null(f, "%s", path);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "AnonHugePages: %lld kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

/*
 * The arm64 case on x86-64: jemalloc's metadata on huge pages
 * (metadata_thp:always), 32 arenas, each base block a whole 2 MiB page.
 * jemalloc itself says how many huge pages its metadata is on
 * (stats.metadata_thp, read by the fixture): that much is the
 * allocator's metadata, not memory outside the allocator.
 */
Test(explain, jemalloc_metadata_on_huge_pages)
{
	static char conf[] = "MALLOC_CONF=metadata_thp:always,narenas:32";
	char *env[] = { conf, NULL };
	const char *why = thp_unavailable();
	const struct explain_finding *f;
	struct explain e;
	int64_t thp_meta;

	if (why[0])
		cr_skip_test("%s", why);
	start("explain-heap-jemalloc", env, "--hold", "1M", "--threads", "32",
	      NULL);
	thp_meta = ready_num(fx.ready, "je_metadata_thp") * 2 * MiB;
	if (!thp_meta || !anon_huge_total(fx.pid))
		cr_skip_test("the kernel gave jemalloc's metadata no huge page");
	/* The huge pages jemalloc asked for and the kernel gave. */
	if (anon_huge_total(fx.pid) < thp_meta)
		thp_meta = anon_huge_total(fx.pid);
	explain(&e);
	cr_assert_geq(e.part[P_ALLOCATOR_METADATA], thp_meta * 8 / 10,
		      "allocator_metadata %" PRId64 ", jemalloc has %" PRId64
		      " of metadata on huge pages\n%s",
		      e.part[P_ALLOCATOR_METADATA], thp_meta, e.json);
	f = assert_finding(&e, "allocator_metadata", thp_meta * 8 / 10, e.rss);
	cr_assert(f->remedy && strstr(f->remedy, "metadata_thp"),
		  "allocator_metadata's remedy does not name metadata_thp\n%s",
		  e.json);
	cr_assert_lt(e.part[P_ANON_OTHER], 10 * MiB,
		     "jemalloc's metadata counted outside the allocator\n%s",
		     e.json);
	explain_free(&e);
}

/* 200 threads, each 256 KiB deep, one 1 MiB deep. */
Test(explain, thread_stacks_of_200_deep_threads)
{
	struct explain e;
	int64_t touched, threads, deepest, huge;

	start("explain-stacks", NULL, "--threads", "200", "--depth", "256K",
	      "--deepest", "1M", NULL);
	touched = ready_num(fx.ready, "touched");
	threads = ready_num(fx.ready, "threads");
	deepest = ready_num(fx.ready, "deepest");
	explain(&e);
	/* Each thread also has its TLS, guard-side and startup pages: up
	 * to 64 KiB each beyond what it wrote, and the main thread's; and
	 * under THP "always" the huge pages the kernel gave the stacks,
	 * resident whole (at most all of AnonHugePages). */
	if (!explain_num(&e, "anon_huge", &huge) ||
	    !explain_str(&e, "thp") || strcmp(explain_str(&e, "thp"), "always"))
		huge = 0;
	cr_assert(e.part[P_THREAD_STACKS] >= touched &&
			  e.part[P_THREAD_STACKS] <=
				  touched + threads * 64 * 1024 + 2 * MiB + huge,
		  "thread_stacks %" PRId64 ", the threads wrote %" PRId64
		  "\n%s", e.part[P_THREAD_STACKS], touched, e.json);
	assert_finding(&e, "thread_stacks", touched,
		       touched + threads * 64 * 1024 + 2 * MiB + huge);
	cr_assert_eq(e.threads, threads, "%s", e.json);
	if (e.largest_stack >= 0)
		cr_assert(e.largest_stack >= deepest &&
				  e.largest_stack <= deepest + 256 * 1024 +
							     (huge ? 2 * MiB : 0),
			  "largest_stack %" PRId64 ", the deepest thread wrote %"
			  PRId64 "\n%s", e.largest_stack, deepest, e.json);
	explain_free(&e);
}

/*
 * A thread's stack and a 64 MiB buffer right above it in one mapping
 * (what Linux before 6.7, Debian 12's 6.1 among them, makes of any
 * anonymous read-write mapping there): the stack is its block, the
 * buffer the program's own memory, not a 72 MiB stack.  With @spin
 * ("--spin"), the thread of that stack runs: it gives no stack pointer.
 */
static void merged_stack(const char *spin)
{
	struct explain e, na;
	int64_t touched, threads, deepest, beside, lo, hi, huge = 0, slack;
	const char *thp;

	start("explain-stacks", NULL, "--threads", "4", "--depth", "256K",
	      "--deepest", "1M", "--beside", "64M", spin, NULL);
	if (!ready_num(fx.ready, "merged"))
		cr_skip_test("the kernel did not make the stack and the "
			     "mapping above it one mapping: %s", fx.ready);
	touched = ready_num(fx.ready, "touched");
	threads = ready_num(fx.ready, "threads");
	deepest = ready_num(fx.ready, "deepest");
	beside = ready_num(fx.ready, "beside");
	explain(&e);
	/* Under THP "always" (before 6.7 a stack gets huge pages too) a
	 * thread's stack may be resident in two whole huge pages; the
	 * buffer beside is still far more than all of them. */
	thp = explain_str(&e, "thp");
	if (thp && !strcmp(thp, "always"))
		cr_assert(explain_num(&e, "huge_page", &huge), "%s", e.json);
	slack = threads * (64 * 1024 + 2 * huge) + 2 * MiB;
	cr_assert_lt(touched + slack, beside, "the test tells nothing");
	cr_assert(e.part[P_THREAD_STACKS] >= touched &&
			  e.part[P_THREAD_STACKS] <= touched + slack,
		  "thread_stacks %" PRId64 ", the threads wrote %" PRId64
		  "\n%s", e.part[P_THREAD_STACKS], touched, e.json);
	cr_assert(e.largest_stack >= deepest &&
			  e.largest_stack <= deepest + 256 * 1024 + 2 * huge,
		  "largest_stack %" PRId64 ", the deepest thread wrote %" PRId64
		  "\n%s", e.largest_stack, deepest, e.json);
	cr_assert(e.part[P_ANON_OTHER] >= beside - 2 * huge &&
			  e.part[P_ANON_OTHER] <= beside + 4 * MiB,
		  "anon_other %" PRId64 ", the buffer %" PRId64 "\n%s",
		  e.part[P_ANON_OTHER], beside, e.json);
	if (explain_finding(&e, "thread_stacks"))
		assert_finding(&e, "thread_stacks", touched, touched + slack);
	explain_free(&e);

	/* without stopping a thread, the same: the buffer is then among
	 * the heap and the program's own mmaps */
	explain_run(fx.pid, "--no-attach", &na, &lo, &hi);
	explain_assert_sound(&na, lo, hi, false);
	cr_assert(na.part[P_THREAD_STACKS] >= touched &&
			  na.part[P_THREAD_STACKS] <= touched + slack,
		  "--no-attach: thread_stacks %" PRId64 "\n%s",
		  na.part[P_THREAD_STACKS], na.json);
	cr_assert_geq(na.part[P_HEAP], beside - 2 * huge, "%s", na.json);
	explain_free(&na);
	fixture_assert_healthy(&fx);
}

Test(explain, a_stack_merged_with_the_mapping_above_it)
{
	merged_stack(NULL);
}

/* The same with the thread running: its stack is found from the
 * deepest page it touched, explain after explain. */
Test(explain, a_running_threads_stack_merged_with_the_mapping_above_it)
{
	merged_stack("--spin");
}

/* A 200 MiB file mapped and read through: file memory, not heap. */
Test(explain, mapped_file_read_through)
{
	struct statfs sf;
	struct explain e;
	int64_t size;

	if (statfs("/var/tmp", &sf))
		cr_skip_test("/var/tmp: %s", strerror(errno));
	/* On tmpfs the file's pages would be shared memory. */
	if (sf.f_type == 0x01021994)
		cr_skip_test("/var/tmp is a tmpfs: a file there is shmem");
	snprintf(file_path, sizeof(file_path),
		 "/var/tmp/memsnap-explain-file.%d", (int)getpid());
	start("explain-mapped", NULL, "--file", file_path, "--size", "200M",
	      NULL);
	size = ready_num(fx.ready, "file");
	explain(&e);
	cr_assert(e.part[P_FILE] >= size && e.part[P_FILE] <= size + 16 * MiB,
		  "file %" PRId64 " for a %" PRId64 "-byte file\n%s",
		  e.part[P_FILE], size, e.json);
	assert_finding(&e, "file", size * 98 / 100, size + 16 * MiB);
	cr_assert_str_eq(e.f[0].id, "file", "%s", e.json);
	cr_assert_lt(e.part[P_HEAP_IN_USE], 4 * MiB, "%s", e.json);
	explain_free(&e);
}

/* Everything held, nothing freed: the heap in use is the RSS, and the
 * next step is a profile. */
Test(explain, plain_leak_is_heap_in_use)
{
	const struct explain_finding *f;
	struct explain e;
	int64_t held;

	start("explain-heap-glibc", NULL, "--hold", "64M", NULL);
	held = ready_num(fx.ready, "held");
	explain(&e);
	assert_heap_in_use(&e, held);
	cr_assert_geq(e.part[P_HEAP_IN_USE], e.rss * 9 / 10,
		      "heap in use is not nearly all of RSS\n%s", e.json);
	f = assert_finding(&e, "heap_in_use", held * 95 / 100,
			   held * 105 / 100);
	cr_assert_str_eq(e.f[0].id, "heap_in_use", "%s", e.json);
	/* glibc cannot profile: the sampler is the way. */
	cr_assert(f->remedy && strstr(f->remedy, "prof on") &&
			  strstr(f->remedy, "--sampler"),
		  "heap_in_use's remedy is not `prof on --sampler`\n%s",
		  e.json);
	explain_free(&e);
}

/* A 96 MiB anonymous mapping written through, as a buffer pool: memory
 * outside the allocator, not heap. */
Test(explain, anonymous_buffer_pool_is_anon_other)
{
	struct explain e;
	int64_t pool;

	start("explain-mapped", NULL, "--anon", "96M", NULL);
	pool = ready_num(fx.ready, "anon");
	explain(&e);
	/* One thread, no block over 128 KiB: glibc's every byte is in
	 * [heap], and what is not resident there is in no part. */
	cr_assert_leq(e.part[P_HEAP_IN_USE] + e.part[P_HEAP_FREE],
		      smaps_rss_named(fx.pid, "[heap]"),
		      "heap_in_use + heap_free above the resident [heap] (%"
		      PRId64 ")\n%s", smaps_rss_named(fx.pid, "[heap]"),
		      e.json);
	cr_assert(e.part[P_ANON_OTHER] >= pool &&
			  e.part[P_ANON_OTHER] <= pool + 4 * MiB,
		  "anon_other %" PRId64 " for a %" PRId64 "-byte mapping\n%s",
		  e.part[P_ANON_OTHER], pool, e.json);
	assert_finding(&e, "anon_other", pool, pool + 4 * MiB);
	cr_assert_str_eq(e.f[0].id, "anon_other", "%s", e.json);
	cr_assert_lt(e.part[P_HEAP_IN_USE], 4 * MiB, "%s", e.json);
	explain_free(&e);
}

/*
 * 12288 pages each in a mapping of its own above a PROT_NONE fence, as
 * a guard-page allocator keeps them: the shape of a thread's stack over
 * its guard, but no thread's.  They are the program's own memory, in
 * anon_other, and the one thread has one stack, attached or not.  A
 * memfd beside them is among the largest mappings by its kernel name.
 */
Test(explain, fenced_mappings_are_not_stacks)
{
	struct explain e, na;
	int64_t fenced, lo, hi, stacks = -1;
	const char *named;
	size_t i;

	start("explain-mapped", NULL, "--fenced", "48M", "--memfd", "4M",
	      NULL);
	fenced = ready_num(fx.ready, "fenced");
	cr_assert_eq(fenced, 48 * MiB, "%s", fx.ready);
	explain(&e);
	cr_assert(explain_num(&e, "threads.stacks", &stacks), "%s", e.json);
	cr_assert_eq(stacks, 1, "one thread, %" PRId64 " stacks\n%s", stacks,
		     e.json);
	cr_assert_lt(e.part[P_THREAD_STACKS], MiB, "%s", e.json);
	cr_assert(e.part[P_ANON_OTHER] >= fenced &&
			  e.part[P_ANON_OTHER] <= fenced + 4 * MiB,
		  "anon_other %" PRId64 " for %" PRId64 " fenced bytes\n%s",
		  e.part[P_ANON_OTHER], fenced, e.json);
	cr_assert_str_eq(e.f[0].id, "anon_other", "%s", e.json);
	assert_finding(&e, "anon_other", fenced, fenced + 4 * MiB);
	cr_assert_null(explain_finding(&e, "thread_stacks"), "%s", e.json);
	/* the memfd, among the largest mappings, by its kernel name */
	for (i = 0, named = NULL; i < 8 && !named; i++) {
		char path[48];
		const char *name;

		snprintf(path, sizeof(path), "mappings[%zu].name", i);
		name = explain_str(&e, path);
		if (name && !strcmp(name, "/memfd:explain-pool")) {
			snprintf(path, sizeof(path), "mappings[%zu].part", i);
			named = explain_str(&e, path);
		}
	}
	cr_assert_not_null(named, "the memfd is not named\n%s", e.json);
	cr_assert_str_eq(named, "shared memory", "%s", e.json);
	cr_assert_geq(e.part[P_SHMEM], 4 * MiB, "%s", e.json);

	explain_run(fx.pid, "--no-attach", &na, &lo, &hi);
	explain_assert_sound(&na, lo, hi, false);
	fixture_assert_healthy(&fx);
	cr_assert(explain_num(&na, "threads.stacks", &stacks), "%s", na.json);
	cr_assert_eq(stacks, 1, "%s", na.json);
	cr_assert_lt(na.part[P_THREAD_STACKS], MiB, "%s", na.json);
	cr_assert_geq(na.part[P_HEAP], fenced, "%s", na.json);
	explain_free(&na);
	explain_free(&e);
}

/* tcmalloc keeping 64 MiB freed in its page heap: heap_free, and trim
 * (ReleaseFreeMemory) gives it back. */
Test(explain, tcmalloc_free_pages_and_trim)
{
	const struct explain_finding *f;
	struct explain e;
	int64_t freed;

	start("explain-heap-tcmalloc", NULL, "--hold", "8M", "--churn", "64M",
	      NULL);
	freed = ready_num(fx.ready, "freed");
	explain(&e);
	assert_heap_in_use(&e, ready_num(fx.ready, "held"));
	f = assert_finding(&e, "heap_free", freed * 9 / 10, freed * 11 / 10);
	cr_assert(f->remedy && strstr(f->remedy, "TCMALLOC_RELEASE_RATE"),
		  "heap_free's remedy does not name TCMALLOC_RELEASE_RATE\n%s",
		  e.json);
	trim_and_compare(&e, freed * 7 / 10, ready_num(fx.ready, "held"));
	explain_free(&e);
}

static void holds_known_bytes(const char *fixture, const char *allocator)
{
	struct explain e;
	char path[PATH_MAX];

	fixture_path(fixture, path, sizeof(path));
	if (access(path, X_OK))
		cr_skip_test("%s was not built", path);
	start(fixture, NULL, "--hold", "32M", NULL);
	explain(&e);
	if (e.allocator)
		cr_assert_str_eq(e.allocator, allocator, "%s", e.json);
	assert_heap_in_use(&e, ready_num(fx.ready, "held"));
	explain_free(&e);
}

/*
 * mimalloc holding 32 MiB and having freed nothing.  Debian's build (a
 * release build) counts no in use apart from what it committed, and
 * the other threads' heaps cannot be walked from one borrowed thread:
 * explain says so (heap_in_use null, no heap_in_use finding) and gives
 * the committed memory as one part, "heap", which here is what the
 * program holds.  A mimalloc that does count in use is held to 5%.
 */
Test(explain, mimalloc_heap_in_use)
{
	struct explain e;
	int64_t held;

	start("explain-heap-mimalloc", NULL, "--hold", "32M", NULL);
	held = ready_num(fx.ready, "held");
	explain(&e);
	if (e.allocator)
		cr_assert_str_eq(e.allocator, "mimalloc", "%s", e.json);
	if (e.known[P_HEAP_IN_USE]) {
		assert_heap_in_use(&e, held);
	} else {
		cr_assert_null(explain_finding(&e, "heap_in_use"), "%s",
			       e.json);
		cr_assert(e.known[P_HEAP], "no heap part: %s", e.json);
		cr_assert_geq(e.part[P_HEAP], held, "%s", e.json);
		cr_assert_leq(e.part[P_HEAP], held + held / 20 + (1 << 20),
			      "%s", e.json);
	}
	explain_free(&e);
}

/*
 * mimalloc (Debian's release build, which counts no in use apart from
 * what it committed) after 64 MiB were freed: the program holds 8 MiB,
 * and the 64 MiB mimalloc keeps are not a leak.  Either explain knows
 * the 8 MiB, or it says it cannot tell (heap_in_use null, all of it in
 * "heap") and names no heap_in_use finding: never 72 MiB "held by the
 * program".
 */
Test(explain, mimalloc_freed_pages_are_not_heap_in_use)
{
	struct explain e;
	int64_t held, freed;

	start("explain-heap-mimalloc", NULL, "--hold", "8M", "--churn", "64M",
	      NULL);
	held = ready_num(fx.ready, "held");
	freed = ready_num(fx.ready, "freed");
	explain(&e);
	if (e.known[P_HEAP_IN_USE]) {
		assert_heap_in_use(&e, held);
	} else {
		cr_assert_null(explain_finding(&e, "heap_in_use"), "%s",
			       e.json);
		cr_assert_geq(e.part[P_HEAP], held + freed * 9 / 10, "%s",
			      e.json);
	}
	explain_free(&e);
}

Test(explain, tcmalloc_heap_in_use)
{
	holds_known_bytes("explain-heap-tcmalloc", "tcmalloc");
}

Test(explain, jemalloc_heap_in_use)
{
	holds_known_bytes("explain-heap-jemalloc", "jemalloc");
}

/* memsnap @a0 @a1 ... on the fixture: its exit status, its stderr in
 * @err (@size bytes). */
static int memsnap_on_fixture(char *err, size_t size, const char *a0,
			      const char *a1, const char *a2)
{
	char pidstr[16];
	const char *args[] = { "--pid", pidstr, a0, a1, a2, NULL };
	struct run r;
	int status;

	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
	cr_assert_eq(run_memsnap(&r, args), 0);
	snprintf(err, size, "%s", r.err);
	status = r.status;
	run_free(&r);
	return status;
}

/*
 * A jemalloc built without profiling (Debian's on arm64, or one built
 * so by explain.mk): its mallctl has no opt.prof, and `prof on`
 * refuses.  The next step explain gives for 32 MiB in use, in its
 * verdict and in its finding, is the sampler, and the sampler works
 * there.
 */
Test(explain, jemalloc_without_profiling_proposes_the_sampler)
{
	const struct explain_finding *f;
	struct explain e;
	char path[PATH_MAX], err[1024];
	int64_t held;
	int status;

	fixture_path("explain-heap-jemalloc-noprof", path, sizeof(path));
	if (access(path, X_OK))
		cr_skip_test("%s was not built: it needs the jemalloc sources "
			     "of librust-jemalloc-sys-dev and autoconf, or "
			     "JE_NOPROF_LIB", path);
	start("explain-heap-jemalloc-noprof", NULL, "--hold", "32M", NULL);
	cr_assert_eq(ready_num(fx.ready, "je_config_prof"), 0,
		     "the fixture's jemalloc has profiling: %s", fx.ready);
	held = ready_num(fx.ready, "held");
	explain(&e);
	cr_assert_str_eq(e.allocator ? e.allocator : "?", "jemalloc", "%s",
			 e.json);
	assert_heap_in_use(&e, held);
	f = assert_finding(&e, "heap_in_use", held * 95 / 100,
			   held * 105 / 100);
	cr_assert(f->remedy && strstr(f->remedy, "prof on --sampler`"),
		  "heap_in_use's remedy is not `prof on --sampler`\n%s",
		  e.json);
	/* the verdict's first step is a watch; no step there nor in the
	 * remedy is the profiler this jemalloc lacks */
	cr_assert(e.verdict && strstr(e.verdict, " watch`"),
		  "the verdict's first step is not a watch\n%s", e.json);
	cr_assert(!strstr(e.verdict, "prof on`, `dump") &&
		  !strstr(f->remedy, "prof on`, `dump"),
		  "a step is `prof on` without the sampler\n%s", e.json);
	explain_free(&e);

	/* what explain no longer proposes refuses, what it does works */
	status = memsnap_on_fixture(err, sizeof(err), "prof", "on", NULL);
	cr_assert_eq(status, 5, "prof on: exit %d: %s", status, err);
	cr_assert_not_null(strstr(err, "jemalloc was built without profiling"),
			   "%s", err);
	fixture_assert_healthy(&fx);
	status = memsnap_on_fixture(err, sizeof(err), "prof", "on",
				    "--sampler");
	cr_assert_eq(status, 0, "prof on --sampler: exit %d: %s", status, err);
	fixture_assert_healthy(&fx);
	status = memsnap_on_fixture(err, sizeof(err), "prof", "off", NULL);
	cr_assert_eq(status, 0, "prof off: exit %d: %s", status, err);
	fixture_assert_healthy(&fx);
}

/*
 * Two allocators: the glibc build with jemalloc LD_PRELOADed.  jemalloc
 * serves malloc and holds the 32 MiB; glibc's malloc is there too and
 * is named beside it.
 */
Test(explain, preloaded_jemalloc_serves_beside_glibc)
{
	static char pre[] = "LD_PRELOAD=" LIBDIR "libjemalloc.so.2";
	char *env[] = { pre, NULL };
	struct explain e;
	const char *other = NULL;
	size_t i;

	if (access(pre + 11, R_OK))
		cr_skip_test("%s is not installed", pre + 11);
	start("explain-heap-glibc", env, "--hold", "32M", NULL);
	explain(&e);
	cr_assert_str_eq(e.allocator ? e.allocator : "?", "jemalloc", "%s",
			 e.json);
	assert_heap_in_use(&e, ready_num(fx.ready, "held"));
	for (i = 0; i < 4; i++) {
		char path[64];

		snprintf(path, sizeof(path), "other_allocators[%zu].allocator",
			 i);
		other = explain_str(&e, path);
		if (!other || !strcmp(other, "glibc"))
			break;
	}
	cr_assert(other && !strcmp(other, "glibc"),
		  "glibc is not among other_allocators\n%s", e.json);
	explain_free(&e);
}
