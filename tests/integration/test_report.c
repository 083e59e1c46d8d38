/*
 * memsnap report on the committed dumps (tests/data/profiles, see its
 * README): exact text, folded and json output, the difference of two
 * dumps, the pprof and jeprof exports read by their own tools, a fresh
 * dump from the prof-chain fixture, bad input, --max-size and --root,
 * and the memory a big hostile dump takes.
 */
#include "../lib/fixture.h"
#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char root[256];	/* the --root of the golden runs */
static char data[512];	/* $MEMSNAP_TESTDATA/profiles */

static void setup(void)
{
	const char *td = getenv("MEMSNAP_TESTDATA");
	char cmd[2048];
	struct run r;
	int rc;

	cr_assert(td, "MEMSNAP_TESTDATA is not set");
	snprintf(data, sizeof(data), "%s/profiles", td);
	rc = scratch_make("memsnap-report", root, sizeof(root));
	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	/* the fixture binary of the dumps and the system's jemalloc only;
	 * the dumps are of an x86-64 process (elsewhere the tests that need
	 * that jemalloc skip: need_debian_jemalloc()) */
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p %s/prof %s/usr/lib/x86_64-linux-gnu && "
		 "cp %s/root/prof/prof-chain %s/prof/ && "
		 "{ ! [ -e /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ] || "
		 "cp /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 "
		 "%s/usr/lib/x86_64-linux-gnu/; }",
		 root, root, data, root, root);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);
}

/* Also before a skip: Criterion runs no .fini after cr_skip_test(). */
static void teardown(void)
{
	scratch_cleanup(root);
}

TestSuite(report, .init = setup, .fini = teardown);

/* The golden data assume Debian 12's jemalloc; elsewhere the allocator's
 * frames sit at other offsets. */
static void need_debian_jemalloc(void)
{
	struct run r;

	cr_assert_eq(run_shell(&r, "readelf -n /usr/lib/x86_64-linux-gnu/"
				   "libjemalloc.so.2 2>/dev/null | grep -q "
				   "1d5163c246dc9cd2b4d339f2ac42efd95c6e0ae1"),
		     0);
	if (r.status) {
		run_free(&r);
		teardown();
		cr_skip_test("libjemalloc.so.2 is not the build the golden "
			     "dumps came from (Debian 12 5.3.0-1)");
	}
	run_free(&r);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	cr_assert(f, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return buf;
}

/* memsnap report DUMP --root ROOT ARGS... against expected/NAME, run in
 * the data directory as regen.sh does (the json names the dump) */
static void golden(const char *expected, const char *dump, const char *a1,
		   const char *a2, const char *a3, const char *a4)
{
	char epath[700], cmd[2048];
	struct run r;
	char *want;

	need_debian_jemalloc();
	snprintf(epath, sizeof(epath), "%s/expected/%s", data, expected);
	snprintf(cmd, sizeof(cmd), "cd %s && %s report %s --root %s -q %s %s "
		 "%s %s", data, getenv("MEMSNAP_BIN"), dump, root,
		 a1 ? a1 : "", a2 ? a2 : "", a3 ? a3 : "", a4 ? a4 : "");
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	want = slurp(epath);
	cr_assert_str_eq(r.out, want, "%s differs", expected);
	free(want);
	run_free(&r);
}

Test(report, golden_text)
{
	golden("chain-3.txt", "chain-3.heap", NULL, NULL, NULL, NULL);
}

Test(report, golden_text_lines)
{
	golden("chain-3-lines.txt", "chain-3.heap", "--lines", NULL, NULL,
	       NULL);
}

Test(report, golden_objects)
{
	golden("chain-3-objects.txt", "chain-3.heap", "--objects", NULL, NULL,
	       NULL);
}

Test(report, golden_folded)
{
	golden("chain-3.folded", "chain-3.heap", "--format", "folded", NULL,
	       NULL);
}

Test(report, golden_json)
{
	golden("chain-3.json", "chain-3.heap", "--format", "json", "--lines",
	       NULL);
}

Test(report, diff_shows_known_growth)
{
	golden("diff-10-3.txt", "chain-10.heap", "--base", "chain-3.heap",
	       NULL, NULL);
	golden("diff-10-3.folded", "chain-10.heap", "--base", "chain-3.heap",
	       "--format", "folded");
}

/* The numbers themselves, independent of the golden files. */
Test(report, exact_values_of_the_chain)
{
	char cmd[2048];
	struct run r;

	need_debian_jemalloc();
	snprintf(cmd, sizeof(cmd),
		 "%s report %s/chain-10.heap --root %s -q --format folded",
		 getenv("MEMSNAP_BIN"), data, root);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	/* 10 x malloc(4096) under f0 -> f1 -> f2; no allocator frame */
	cr_assert(strstr(r.out, ";main;f0;f1;f2 40960\n"), "%s", r.out);
	cr_assert(strstr(r.out, ";main;h0 5120\n"), "%s", r.out);
	cr_assert_null(strstr(r.out, "libjemalloc"), "%s", r.out);
	run_free(&r);
}

Test(report, missing_objects_degrade_with_a_warning)
{
	char dpath[700], empty[300];
	const char *args[] = { "report", dpath, "--root", empty, NULL };
	struct run r;

	/* a root without the dump's objects */
	snprintf(empty, sizeof(empty), "%s/empty", root);
	cr_assert_eq(mkdir(empty, 0700), 0);
	snprintf(dpath, sizeof(dpath), "%s/chain-3.heap", data);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.err, "memsnap: warning: '/prof/prof-chain': "),
		  "%s", r.err);
	cr_assert(strstr(r.out, "prof-chain+0x"), "%s", r.out);
	cr_assert_null(strstr(r.out, " f2\n"), "%s", r.out);
	run_free(&r);
}

Test(report, jeprof_reads_the_export)
{
	char cmd[2048];
	struct run r;

	if (access("/usr/bin/jeprof", X_OK)) {
		teardown();
		cr_skip_test("jeprof is not installed (libjemalloc-dev)");
	}
	need_debian_jemalloc();
	/* jeprof gets no binary: every name must come from the export */
	snprintf(cmd, sizeof(cmd),
		 "%s report %s/chain-3.heap --root %s -q --format jeprof "
		 "-o %s/sym.prof && cd %s && jeprof --text sym.prof",
		 getenv("MEMSNAP_BIN"), data, root, root, root);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
	cr_assert(strstr(r.out, "Total:"), "%s", r.out);
	cr_assert(strstr(r.out, " f2\n"), "%s", r.out);
	cr_assert(strstr(r.out, " h0\n"), "%s", r.out);
	/* the allocator's unnamed frames are gone: f2 is a leaf */
	cr_assert_null(strstr(r.out, "libjemalloc"), "%s", r.out);
	cr_assert(strstr(r.out, "  12.4%  94.8%      0.0  12.4% f2\n"),
		  "%s", r.out);
	run_free(&r);
}

Test(report, go_pprof_reads_the_export)
{
	char cmd[2048];
	struct run r;

	cr_assert_eq(run_shell(&r, "command -v go"), 0);
	if (r.status) {
		run_free(&r);
		teardown();
		cr_skip_test("go is not installed (Debian golang-go): "
			     "cannot check the pprof export");
	}
	run_free(&r);
	need_debian_jemalloc();
	snprintf(cmd, sizeof(cmd),
		 "%s report %s/chain-3.heap --root %s -q --format pprof "
		 "-o %s/heap.pb.gz && HOME=%s GOCACHE=%s/gocache "
		 "go tool pprof -top -sample_index=inuse_space %s/heap.pb.gz",
		 getenv("MEMSNAP_BIN"), data, root, root, root, root, root);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
	cr_assert(strstr(r.out, "12kB"), "%s", r.out);
	cr_assert(strstr(r.out, " f2\n"), "%s", r.out);
	cr_assert(strstr(r.out, " h0\n"), "%s", r.out);
	cr_assert(strstr(r.out, " f0\n"), "%s", r.out);
	run_free(&r);
}

Test(report, svg_is_self_contained)
{
	char cmd[2048];
	struct run r;

	need_debian_jemalloc();
	snprintf(cmd, sizeof(cmd),
		 "%s report %s/chain-3.heap --root %s -q --format svg",
		 getenv("MEMSNAP_BIN"), data, root);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(!strncmp(r.out, "<?xml", 5));
	cr_assert(strstr(r.out, "<title>f2 (12288 bytes, 12.37%)</title>"),
		  "%s", r.out);
	cr_assert(strstr(r.out, "</svg>\n"));
	cr_assert_null(strstr(r.out, "<script"));
	cr_assert_null(strstr(r.out, "href"));
	run_free(&r);
}

/* A fresh dump, written by the fixture itself: the chain with its
 * real build paths and the system's libraries. */
Test(report, fresh_dump_from_the_fixture)
{
	need_jemalloc_profiling();
	char fx[512], cmd[2048];
	struct run r;

	fixture_path("prof-chain", fx, sizeof(fx));
	snprintf(cmd, sizeof(cmd),
		 "MALLOC_CONF=prof:true,lg_prof_sample:0 %s %s/fresh.heap 7 &&"
		 " %s report %s/fresh.heap -q --format folded --lines",
		 fx, root, getenv("MEMSNAP_BIN"), root);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, ";f0 prof_f0.c:6;f1 prof_f1.c:13;"
				"f2 prof_f2.c:7 28672\n"),
		  "%s", r.out);
	run_free(&r);
}

static void bad_dump(const char *content, const char *msg)
{
	char path[400], cmd[1200];
	const char *args[] = { "report", path, NULL };
	struct run r;
	FILE *f;

	snprintf(path, sizeof(path), "%s/bad.heap", root);
	f = fopen(path, "w");
	cr_assert(f);
	fputs(content, f);
	fclose(f);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 10, "status %d: %s", r.status, r.err);
	snprintf(cmd, sizeof(cmd), "memsnap: '%s': %s\n", path, msg);
	cr_assert_str_eq(r.err, cmd);
	cr_assert_str_eq(r.out, "");
	run_free(&r);
}

Test(report, bad_input_has_a_clear_message_and_code)
{
	const char *missing[] = { "report", "/nonexistent.heap", NULL };
	const char *usage[] = { "report", "x", "--format", "png", NULL };
	struct run r;

	bad_dump("", "not a readable heap profile: line 0: empty file");
	bad_dump("GIF89a\n", "not a readable heap profile: line 1: not a "
			     "heap profile (expected heap_v2/ or heap "
			     "profile:)");
	bad_dump("heap_v2/1\n@ 0x1 0x2\n", "not a readable heap profile: "
		 "line 2: truncated: stack without counts");
	bad_dump("heap_v2/1\n@ 0x1\n  t*: 99999999999999999999: 1 [0: 0]\n",
		 "not a readable heap profile: line 3: bad t*: line");
	cr_assert_eq(run_memsnap(&r, missing), 0);
	cr_assert_eq(r.status, 10);
	cr_assert_str_eq(r.err, "memsnap: '/nonexistent.heap': No such file "
				"or directory\n");
	run_free(&r);
	cr_assert_eq(run_memsnap(&r, usage), 0);
	cr_assert_eq(r.status, 2);
	cr_assert_str_eq(r.err, "memsnap: report: png: unknown format (see "
				"memsnap report --help)\n");
	run_free(&r);
}

/* C++ names demangled, the inlined body a frame of its own with its line,
 * operator new[] dropped as the allocator's. */
Test(report, inline_frames_and_cpp_names)
{
	need_jemalloc_profiling();
	char fx[512], cmd[2048];
	struct run r;

	fixture_path("prof-inline", fx, sizeof(fx));
	snprintf(cmd, sizeof(cmd),
		 "MALLOC_CONF=prof:true,lg_prof_sample:0 %s %s/inl.heap && "
		 "%s report %s/inl.heap -q --format folded --lines",
		 fx, root, getenv("MEMSNAP_BIN"), root);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, ";main prof_inline.cc:48;"
				"ns::Widget::make(int) prof_inline.cc:32;"
				"inner prof_inline.cc:24 1024\n"),
		  "%s", r.out);
	run_free(&r);
	snprintf(cmd, sizeof(cmd), "%s report %s/inl.heap -q --format json",
		 getenv("MEMSNAP_BIN"), root);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "\"function\": \"inner\",\n"
				"          \"resolved\": true,\n"
				"          \"inlined\": true,"),
		  "%s", r.out);
	run_free(&r);
}

/* gperftools' own heap profile ("heap profile: ... @ heapprofile"), from
 * the same chains on tcmalloc: nothing sampled, requested sizes. */
Test(report, gperftools_dump_from_tcmalloc)
{
	char fx[512], cmd[2048];
	struct run r;

	fixture_path("prof-tc", fx, sizeof(fx));
	snprintf(cmd, sizeof(cmd),
		 "%s %s/tc 6 2>/dev/null && head -c 14 %s/tc.0001.heap && "
		 "%s report %s/tc.0001.heap -q --format folded",
		 fx, root, root, getenv("MEMSNAP_BIN"), root);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(!strncmp(r.out, "heap profile: ", 14), "%s", r.out);
	cr_assert(strstr(r.out, ";main;f0;f1;f2 24576\n"), "%s", r.out);
	cr_assert(strstr(r.out, ";main;h0 5000\n"), "%s", r.out);
	cr_assert(strstr(r.out, ";main;f0;f1 56\n"), "%s", r.out);
	run_free(&r);
}

/* Maps that name things that are no ELF file, or not the file at all,
 * and addresses anywhere: names degrade, nothing breaks. */
Test(report, hostile_maps_and_addresses)
{
	char path[400], cmd[1200];
	struct run r;
	FILE *f;

	snprintf(path, sizeof(path), "%s/hostile.heap", root);
	f = fopen(path, "w");
	cr_assert(f);
	fputs("heap_v2/524288\n"
	      "  t*: 9: 9000 [0: 0]\n"
	      "@ 0x0 0xffffffffffffffff 0x1000 0x2000 0x3000 0x4000 0x5000\n"
	      "  t*: 9: 9000 [0: 0]\n"
	      "@ 0x6000 0x7fffffffffff\n"
	      "  t*: 1: 18446744073709551615 [0: 0]\n"
	      "\n"
	      "MAPPED_LIBRARIES:\n"
	      "00001000-00002000 r-xp 00000000 00:00 5 /etc/passwd\n"
	      "00002000-00003000 r-xp 00000000 00:00 6 /dev/zero\n"
	      "00003000-00004000 r-xp 00000000 00:00 7 /\n"
	      "00004000-00005000 r-xp ffffffffffff0000 00:00 8 /bin/true\n"
	      "00005000-00006000 r-xp 00000000 00:00 9 /proc/self/exe\n"
	      "00006000-00007000 r-xp 00000000 00:00 9 ../../../../etc/shadow\n"
	      "garbage line\n",
	      f);
	fclose(f);
	snprintf(cmd, sizeof(cmd),
		 "for fmt in text folded json svg pprof jeprof; do "
		 "%s report %s --format $fmt -o %s/out.$fmt || exit $?; done",
		 getenv("MEMSNAP_BIN"), path, root);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.err, "memsnap: warning: '/etc/passwd': "), "%s",
		  r.err);
	run_free(&r);
	snprintf(cmd, sizeof(cmd), "cat %s/out.folded", root);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert(strstr(r.out, "passwd+0x"), "%s", r.out);
	cr_assert(strstr(r.out, "0xffffffffffffffff"), "%s", r.out);
	run_free(&r);
}

/* @text into @name under the test's directory; the path into @path. */
/* @text as @name in the test's directory; its path into @path. */
static void put_dump(const char *name, const char *text, char *path,
		     size_t size)
{
	snprintf(path, size, "%s/%s", root, name);
	write_file(path, text, 0644);
}

static bool starts_with(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

static const char small_dump[] =
	"heap_v2/1\n"
	"  t*: 3: 3072 [0: 0]\n"
	"@ 0x10 0x20\n"
	"  t*: 2: 2048 [0: 0]\n"
	"@ 0x30 0x20\n"
	"  t*: 1: 1024 [0: 0]\n";

/* A base without a byte: growth is no percentage of it. */
Test(report, empty_base_says_so)
{
	char dump[400], base[400];
	const char *args[] = { "report", "-q", dump, "--base", base, NULL };
	const char *objs[] = { "report", "-q", dump, "--base", base,
			       "--objects", NULL };
	struct run r;

	put_dump("small.heap", small_dump, dump, sizeof(dump));
	put_dump("empty.heap", "heap_v2/1\n  t*: 0: 0 [0: 0]\n", base,
		   sizeof(base));
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_str_eq(r.out,
		"Total: +3072 bytes (0 -> 3072), base is empty\n"
		"Profile: heap_v2 (jemalloc's format), sampled every 1 bytes on average, "
		"unsampled per stack\n"
		"        flat  flat%   sum%          cum   cum%  growth at (bytes)\n"
		"       +2048      -      -        +2048      -  0x10\n"
		"       +1024      -      -        +1024      -  0x30\n"
		"          +0      -      -        +3072      -  0x20\n");
	cr_assert_str_eq(r.err, "");
	run_free(&r);
	cr_assert_eq(run_memsnap(&r, objs), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(starts_with(r.out, "Total: +3 objects (0 -> 3), base is "
				     "empty\n"), "%s", r.out);
	run_free(&r);
	/* a base with bytes keeps its percentage */
	args[4] = dump;
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert(starts_with(r.out, "Total: +0 bytes (3072 -> 3072), +0.0% "
				     "of base\n"), "%s", r.out);
	run_free(&r);
}

/* --root names a directory, or nothing is read at all: the missing
 * root is named even before the missing dump. */
Test(report, root_must_be_a_directory)
{
	char dump[400], msg[600];
	const char *missing[] = { "report", "/nonexistent.heap", "--root",
				  "/nonexistent", NULL };
	const char *file[] = { "report", dump, "--root", dump, NULL };
	struct run r;

	cr_assert_eq(run_memsnap(&r, missing), 0);
	cr_assert_eq(r.status, 10, "status %d: %s", r.status, r.err);
	cr_assert_str_eq(r.err, "memsnap: --root '/nonexistent': No such "
				"file or directory\n");
	cr_assert_str_eq(r.out, "");
	run_free(&r);
	put_dump("small.heap", small_dump, dump, sizeof(dump));
	cr_assert_eq(run_memsnap(&r, file), 0);
	cr_assert_eq(r.status, 10, "status %d: %s", r.status, r.err);
	snprintf(msg, sizeof(msg), "memsnap: --root '%s': Not a directory\n",
		 dump);
	cr_assert_str_eq(r.err, msg);
	cr_assert_str_eq(r.out, "");
	run_free(&r);
}

/* --alloc of a dump that counts only what is in use (jemalloc without
 * prof_accum): one line saying what would count it, exit status 10;
 * and of a dump that counts it, the allocations. */
Test(report, alloc_needs_a_dump_that_counts_allocations)
{
	char dump[400], counted[400], msg[700];
	const char *inuse[] = { "report", dump, "--alloc", NULL };
	const char *alloc[] = { "report", counted, "--alloc",
				"--format", "folded", "-q", NULL };
	struct run r;

	put_dump("small.heap", small_dump, dump, sizeof(dump));
	cr_assert_eq(run_memsnap(&r, inuse), 0);
	cr_assert_eq(r.status, 10, "status %d: %s", r.status, r.err);
	snprintf(msg, sizeof(msg), "memsnap: '%s' counts what is in use, not "
		 "what was allocated: --alloc needs a dump that counts "
		 "allocations (memsnap's sampler, gperftools; jemalloc with "
		 "prof_accum:true)\n", dump);
	cr_assert_str_eq(r.err, msg);
	cr_assert_str_eq(r.out, "");
	run_free(&r);
	put_dump("counted.heap",
		   "heap_v2/1\n@ 0x10 0x20\n  t*: 1: 1024 [3: 3072]\n",
		   counted, sizeof(counted));
	cr_assert_eq(run_memsnap(&r, alloc), 0);
	cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.err);
	cr_assert_str_eq(r.out, "0x20;0x10 3072\n");
	run_free(&r);
}

/* A dump one byte over --max-size is refused, a regular file before it
 * is read, a pipe once it gives more; the base too. */
Test(report, max_size_refuses_a_larger_dump)
{
	char big[400], small[400], text[1100], msg[600], cmd[1200];
	const char *over[] = { "report", "-q", big, "--max-size", "1K", NULL };
	const char *at[] = { "report", "-q", big, "--max-size", "1025",
			     "--format", "folded", NULL };
	const char *base[] = { "report", "-q", small, "--base", big,
			       "--max-size", "1K", NULL };
	const char *bad[] = { "report", small, "--max-size", "1x", NULL };
	size_t n = strlen(small_dump);
	struct run r;

	/* 1025 bytes: the dump, then blank lines */
	memcpy(text, small_dump, n);
	memset(text + n, '\n', 1025 - n);
	text[1025] = '\0';
	put_dump("big.heap", text, big, sizeof(big));
	put_dump("small.heap", small_dump, small, sizeof(small));

	cr_assert_eq(run_memsnap(&r, over), 0);
	cr_assert_eq(r.status, 10, "status %d: %s", r.status, r.err);
	snprintf(msg, sizeof(msg),
		 "memsnap: '%s': larger than --max-size (1.0 KiB)\n", big);
	cr_assert_str_eq(r.err, msg);
	cr_assert_str_eq(r.out, "");
	run_free(&r);

	cr_assert_eq(run_memsnap(&r, base), 0);
	cr_assert_eq(r.status, 10, "status %d: %s", r.status, r.err);
	cr_assert_str_eq(r.err, msg);
	run_free(&r);

	cr_assert_eq(run_memsnap(&r, at), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_str_eq(r.out, "0x20;0x10 2048\n0x20;0x30 1024\n");
	run_free(&r);

	snprintf(cmd, sizeof(cmd),
		 "cat %s | %s report /dev/stdin --max-size 1K", big,
		 getenv("MEMSNAP_BIN"));
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 10, "status %d: %s", r.status, r.err);
	cr_assert_str_eq(r.err, "memsnap: '/dev/stdin': larger than "
				"--max-size (1.0 KiB)\n");
	run_free(&r);

	cr_assert_eq(run_memsnap(&r, bad), 0);
	cr_assert_eq(r.status, 2, "status %d: %s", r.status, r.err);
	cr_assert_str_eq(r.err, "memsnap: report: 1x: not a size (bytes, or "
				"with K, M, G, T) (see memsnap report --help)\n");
	run_free(&r);
}

/*
 * A hostile dump of about 5 MB: 320 distinct stacks of 1024 frames,
 * over 4096 addresses of one object with a 200-byte name (every frame a
 * 210-byte label: a stack's "root;...;leaf" is 200 KB), the largest
 * counts, and 5000 more objects in MAPPED_LIBRARIES.  Building every
 * stack's key as a string took 150 MB for it.
 */
static size_t write_hostile_dump(const char *path)
{
	unsigned int seed = 1, i, k;
	char name[256];
	size_t size;
	FILE *f = fopen(path, "w");

	cr_assert(f, "%s", path);
	memset(name, 'a', 200);
	name[200] = '\0';
	fputs("heap_v2/524288\n  t*: 18446744073709551615: "
	      "18446744073709551615 [0: 0]\n", f);
	for (i = 0; i < 320; i++) {
		fputc('@', f);
		for (k = 0; k < 1024; k++)
			fprintf(f, " 0x%llx", 0x7f0000000000ull +
				(unsigned long long)(rand_r(&seed) % 4096) *
					16 + 1);
		fputs("\n  t*: 18446744073709551615: 18446744073709551615 "
		      "[0: 0]\n", f);
	}
	fprintf(f, "\nMAPPED_LIBRARIES:\n7f0000000000-7f0000100000 r-xp "
		"00000000 fe:00 42 /nonexistent/%s.so\n", name);
	for (i = 0; i < 5000; i++)
		fprintf(f, "%012llx-%012llx r-xp 00000000 fe:00 %u "
			"/nonexistent/lib%u.so\n",
			0x7f1000000000ull + i * 4096ull,
			0x7f1000000000ull + (i + 1) * 4096ull, 100 + i, i);
	size = (size_t)ftell(f);
	cr_assert_eq(fclose(f), 0);
	return size;
}

/* The peak RSS in KiB of memsnap report DUMP -q --format FMT -o /dev/null,
 * which must exit 0. */
static long report_maxrss(const char *dump, const char *fmt)
{
	const char *bin = getenv("MEMSNAP_BIN");
	struct rusage ru;
	int status;
	pid_t pid;

	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR);

		dup2(fd, 1);
		dup2(fd, 2);
		execl(bin, bin, "report", dump, "-q", "--format", fmt, "-o",
		      "/dev/null", (char *)NULL);
		_exit(127);
	}
	cr_assert_eq(wait4(pid, &status, 0, &ru), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "report --format %s: status %d", fmt, status);
	return ru.ru_maxrss;
}

Test(report, big_hostile_dump_in_bounded_memory, .timeout = 120)
{
	static const char *const fmts[] = { "text", "folded", "json", "svg",
					    "pprof", "jeprof" };
	char dump[400], small[400], cmd[1200];
	long base_kib, kib;
	size_t size, i;
	struct run r;

	/* ASan keeps freed memory in quarantine: no bound holds */
	snprintf(cmd, sizeof(cmd), "nm -D %s 2>/dev/null | grep -c __asan_init",
		 getenv("MEMSNAP_BIN"));
	cr_assert_eq(run_shell(&r, cmd), 0);
	if (atoi(r.out) > 0) {
		run_free(&r);
		teardown();
		cr_skip_test("memsnap is built with ASan: its memory is not "
			     "memsnap's");
	}
	run_free(&r);
	put_dump("small.heap", small_dump, small, sizeof(small));
	snprintf(dump, sizeof(dump), "%s/hostile.heap", root);
	size = write_hostile_dump(dump);
	base_kib = report_maxrss(small, "text");
	for (i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
		kib = report_maxrss(dump, fmts[i]);
		/* the text once (jeprof keeps it), the frames, the exports'
		 * tables: a few times the dump at most */
		cr_assert_lt(kib - base_kib, (long)(4 * size / 1024),
			     "--format %s: %ld KiB for a %zu KiB dump (%ld KiB "
			     "for a tiny one)", fmts[i], kib, size / 1024,
			     base_kib);
	}
}
