/*
 * A target that attacks root's memsnap with its own bytes
 * (docs/SECURITY.md, promises 11a and 6a): the hostile fixture runs as
 * nobody, and memsnap as root reads its unwind tables and the sampler's
 * table it rewrote.
 *
 *   unwind tables   a CIE whose return-address column is 100000000
 *                   (libunwind 1.6.2 indexed its register array with it:
 *                   SIGSEGV in memsnap), under a stack word that looks
 *                   like a signal frame, so that the fences unwind; and
 *                   the sampler's records pointed at that code, for dump
 *   sampler table   2^18 live records whose CFI makes every frame its
 *                   own caller (dump kept 128 frames each, formatted a
 *                   510 MB profile in 280 MB and 94 s before --max-size
 *                   was looked at), and a geometry memsnap never makes
 *
 * memsnap must end with a documented exit code and at most one line
 * (never a signal), within bounded memory, and the target answers a
 * ping afterwards.
 */
#include "tests/lib/fixture.h"
#include "tests/lib/scratch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct fixture fx = { .pid = -1 };
static char pidstr[16], dir[PATH_MAX], heap[PATH_MAX + 16];

static void setup(void)
{
	int rc = scratch_make("memsnap-hostile", dir, sizeof(dir));

	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	snprintf(heap, sizeof(heap), "%s/out.heap", dir);
}

static void teardown(void)
{
	fixture_stop(&fx);
	scratch_cleanup(dir);
}

TestSuite(hostile, .init = setup, .fini = teardown, .timeout = 300);

/* @frame: serve from inside hostile_through() (else from main(): prof
 * on must borrow a thread whatever memsnap makes of that CIE). */
static void start(const char *records, const char *pcs, bool frame)
{
	char path[PATH_MAX], e1[64], e2[64], e3[64];
	char *argv[] = { path, NULL };
	char *env[] = { e1, e2, e3, NULL };
	int rc;

	if (geteuid())
		cr_skip_test("needs root: the target becomes nobody");
	snprintf(e1, sizeof(e1), "HOSTILE_RECORDS=%s", records);
	snprintf(e2, sizeof(e2), "HOSTILE_PCS=%s", pcs);
	snprintf(e3, sizeof(e3), "HOSTILE_FRAME=%d", frame);
	fixture_path("hostile", path, sizeof(path));
	rc = fixture_start(&fx, argv, env, 10000);
	cr_assert_eq(rc, 0, "%s", strerror(-rc));
	cr_assert_str_eq(fx.ready, "hostile");
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
}

static size_t lines(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static char reply[128];

static void command(char c, const char *want)
{
	int rc = fixture_command(&fx, c, reply, sizeof(reply), 30000);

	cr_assert_eq(rc, 0, "command %c: %s", c, strerror(-rc));
	cr_assert_eq(strncmp(reply, want, strlen(want)), 0,
		     "command %c: \"%s\"", c, reply);
}

static void sampler_on(void)
{
	const char *args[] = { "--pid", pidstr, "prof", "on", "--sampler",
			       "--sample-bytes", "64", NULL };
	struct run r;

	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "prof on: exit %d: %s", r.status, r.err);
	run_free(&r);
}

/*
 * Hole 1, the fences: any command that borrows a thread unwound the
 * one inside hostile_through() and died of SIGSEGV in libunwind.  Now
 * the CIE is refused before libunwind parses it, and libunwind runs in
 * a sandbox anyway: the command either borrows the thread or passes it
 * over, in one line.
 */
Test(hostile, unwind_table_with_return_column_100000000)
{
	const char *args[] = { "--pid", pidstr, "stats", NULL };
	struct run r;

	start("16384", "0", true);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert(r.status == 0 || r.status == 6,
		  "stats: exit %d (139: SIGSEGV): %s", r.status, r.err);
	cr_assert_leq(lines(r.err), 1, "%s", r.err);
	if (!r.status)
		cr_assert_not_null(strstr(r.out, "glibc malloc"), "%s", r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

/* Hole 1 through the sampler's dump: records whose registers say they
 * are inside hostile_through(); no thread is stopped, the unwind is of
 * the forged registers alone. */
Test(hostile, sampler_records_under_the_hostile_cie)
{
	const char *args[] = { "--pid", pidstr, "dump", "-o", heap, NULL };
	struct run r;
	struct stat st;

	start("16384", "0", false);
	sampler_on();
	command('c', "c ");
	cr_assert_gt(atoi(reply + 2), 0, "no live record to point there");
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "dump: exit %d (139: SIGSEGV): %s",
		     r.status, r.err);
	cr_assert_eq(stat(heap, &st), 0, "%s: %s", heap, strerror(errno));
	run_free(&r);
	fixture_assert_healthy(&fx);
}

/*
 * The target rewrites the sampler's table with @cmd (@records records,
 * @pcs distinct pcs; the reply begins @want), then memsnap dumps with
 * @args: it must end with @status and one line on stderr holding @line,
 * its memory bounded, and the target unharmed.
 */
static void forged_dump_kept(const char *records, const char *pcs, char cmd,
			     const char *want, const char *const args[],
			     int status, const char *line, struct run *kept)
{
	struct run r;

	start(records, pcs, false);
	sampler_on();
	command(cmd, want);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, status, "dump: exit %d: %s", r.status, r.err);
	cr_assert_eq(lines(r.err), 1, "%s", r.err);
	cr_assert_not_null(strstr(r.err, line), "%s", r.err);
	{
		/* "N of M samples keep only their caller": no record
		 * counted twice */
		const char *p = strstr(r.err, " was spent: ");
		unsigned long long cut, live;

		if (p && sscanf(p, " was spent: %llu of %llu", &cut,
				&live) == 2)
			cr_assert_leq(cut, live, "%s", r.err);
	}
	/* 276 MiB before, on 2^18 records; now 16 MiB of frames at most */
	cr_assert_lt(r.maxrss_kb, 160 * 1024, "memsnap peaked at %ld KiB",
		     r.maxrss_kb);
	if (kept)
		*kept = r;
	else
		run_free(&r);
	fixture_assert_healthy(&fx);
}

static void forged_dump(const char *records, const char *pcs, char cmd,
			const char *want, const char *const args[],
			int status, const char *line)
{
	forged_dump_kept(records, pcs, cmd, want, args, status, line, NULL);
}

/*
 * Hole 3: a table of 2^18 live records, 128 frames each, every stack
 * different.  The dump keeps memory to its budget of distinct frames,
 * says so in one line, and the records past it keep their caller.
 */
Test(hostile, forged_sampler_table_of_262144_records)
{
	const char *args[] = { "--pid", pidstr, "dump", "-o", heap, NULL };
	struct stat st;

	forged_dump("262144", "0", 'F', "F 262144", args, 0,
		    "budget of distinct stack frames");
	cr_assert_eq(stat(heap, &st), 0);
	cr_assert_lt(st.st_size, 64 << 20, "a %lld-byte profile",
		     (long long)st.st_size);
}

/* The same records all alike: interned, they cost no memory; the
 * frames unwound are what the budget bounds.  Each record alike the one
 * before is given its frames instead of an unwind of its own, and they
 * count as unwound: the budget is spent at the same record as by
 * 4 Mi frames stepped through (2.5 min of an emulated CPU).  One dump,
 * with --json: the user reads the line, scripts the names. */
Test(hostile, forged_sampler_table_of_one_stack)
{
	const char *json[] = { "--json", "--pid", pidstr, "dump", "-o", heap,
			       NULL };
	struct run r;

	forged_dump_kept("65536", "1", 'F', "F 65536", json, 0,
			 "budget of frames unwound", &r);
	cr_assert_not_null(strstr(r.out, "\"budget_spent\": \"frames unwound\""),
			   "%s", r.out);
	cr_assert_not_null(strstr(r.out, "\"samples_cut\": "), "%s", r.out);
	run_free(&r);
}

/*
 * Every record claims the largest stack copy memsnap makes (64 KiB), 8
 * GiB in all, each a stack of one frame: what bounds the dump is the
 * bytes of stack it reads (4 GiB), and it says so.
 */
Test(hostile, forged_sampler_table_of_deep_copies)
{
	const char *args[] = { "--pid", pidstr, "dump", "-o", heap, NULL };

	forged_dump("0", "0", 'S', "S 131072", args, 0,
		    "budget of bytes of stack read");
}

/*
 * Each record of the reservoir stands for its part's share of the freed
 * samples, and the dump's allocation counts add up to that share, not
 * to each record's share rounded: 768 records standing for 1.5 each,
 * every one a stack of its own, are 1152 allocations.  (Rounded one by
 * one they were 1536.)
 */
Test(hostile, kept_records_add_up_to_their_share)
{
	const char *args[] = { "--pid", pidstr, "dump", "-o", heap, NULL };
	char line[256];
	unsigned long long objs = 0, bytes = 0;
	struct run r;
	FILE *f;

	start("16384", "0", false);
	sampler_on();
	command('K', "K");
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "dump: exit %d: %s", r.status, r.err);
	run_free(&r);
	f = fopen(heap, "re");
	cr_assert_not_null(f, "%s: %s", heap, strerror(errno));
	cr_assert_not_null(fgets(line, sizeof(line), f));	/* heap_v2/ */
	cr_assert_not_null(fgets(line, sizeof(line), f));
	fclose(f);
	cr_assert_eq(sscanf(line, "  t*: 0: 0 [%llu: %llu]", &objs, &bytes), 2,
		     "%s", line);
	cr_assert_eq(objs, 1152, "%s", line);
	cr_assert_eq(bytes, 1152 * 64, "%s", line);
	fixture_assert_healthy(&fx);
}

/* --max-size holds while the profile is written, not after. */
Test(hostile, forged_sampler_table_past_max_size)
{
	const char *args[] = { "--max-size", "1M", "--pid", pidstr, "dump",
			       "-o", heap, NULL };
	struct stat st;

	forged_dump("262144", "0", 'F', "F 262144", args, 1,
		    "larger than --max-size");
	cr_assert_neq(stat(heap, &st), 0, "a profile was written");
}

/* A geometry memsnap never makes is refused before a record is read. */
Test(hostile, forged_sampler_geometry_is_refused)
{
	const char *args[] = { "--pid", pidstr, "dump", "-o", heap, NULL };
	struct stat st;

	const char *off[] = { "--pid", pidstr, "prof", "off", NULL };
	char want[256];
	struct run r;

	forged_dump("16384", "0", 'G', "G", args, 1,
		    "is not one this memsnap made");
	cr_assert_neq(stat(heap, &st), 0, "a profile was written");
	/* prof off says what it found, not "no profiler here" */
	cr_assert_eq(run_memsnap(&r, off), 0);
	cr_assert_eq(r.status, 5, "prof off: exit %d: %s", r.status, r.err);
	snprintf(want, sizeof(want), "memsnap: prof %s: its sampler's control "
		 "block or table is not one this memsnap made", pidstr);
	cr_assert(!strncmp(r.err, want, strlen(want)) &&
		  lines(r.err) == 2, "%s", r.err);
	run_free(&r);
	fixture_assert_healthy(&fx);
}
