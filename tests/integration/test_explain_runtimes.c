/*
 * explain on the language runtimes, on real interpreters and a real Go
 * build (tests/fixtures/runtimes/): Debian's python3 with a dict that
 * grows, a Go program (golang-go) with a map that grows, a Java program
 * (default-jre-headless, run from its source) holding byte arrays, and
 * Node.js with a Map that grows.  Each runtime's memory must be its own
 * part ("runtime", the runtime named), its finding first, with its own
 * tools; the parts must add up to RSS within 2%; where the runtime's
 * own numbers are readable from outside, they must agree with what the
 * program says of itself.  Then the program grows, and so does the
 * part.  After every run the program answers a ping (its data
 * unchanged).  A runtime that is not installed skips its test.
 */
#include "test_explain_lib.h"
#include "../lib/fixture.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB (1024 * 1024LL)

static struct fixture fx = { .pid = -1 };

static void teardown(void)
{
	explain_free_all();
	fixture_stop(&fx);
}

TestSuite(explain_runtimes, .fini = teardown, .timeout = 180);

/* Start @interp (NULL: the fixture itself) on fixture @name, or skip
 * when @interp is not installed. */
static void start(const char *interp, const char *pkg, const char *name,
		  const char *arg)
{
	char path[PATH_MAX];
	char *argv[6] = { 0 };
	size_t n = 0;
	int rc;

	fixture_path(name, path, sizeof(path));
	if (interp && access(interp, X_OK))
		cr_skip_test("%s is not installed (apt-get install %s)", interp,
			     pkg);
	if (!interp && access(path, X_OK))
		cr_skip_test("%s was not built (apt-get install %s)", path,
			     pkg);
	if (interp)
		argv[n++] = (char *)interp;
	argv[n++] = path;
	if (arg)
		argv[n++] = (char *)arg;
	rc = fixture_start(&fx, argv, NULL, 90000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
}

/* explain --json, sound, the runtime @name its own part and its finding
 * first; the program healthy after; the text's first line the same
 * verdict. */
static void explain_runtime(struct explain *e, const char *name,
			    bool attached)
{
	const char *rt;
	int64_t lo, hi;

	explain_run(fx.pid, NULL, e, &lo, &hi);
	fixture_assert_healthy(&fx);
	explain_assert_sound(e, lo, hi, attached);
	rt = explain_str(e, "runtime.name");
	cr_assert_not_null(rt, "no runtime found\n%s", e->json);
	cr_assert_str_eq(rt, name, "%s", e->json);
	cr_assert(e->known[P_RUNTIME], "%s", e->json);
	cr_assert_gt(e->nfindings, 0, "%s", e->json);
	cr_assert_str_eq(e->f[0].id, "runtime", "the first finding\n%s",
			 e->json);
	cr_assert_eq(e->f[0].bytes, e->part[P_RUNTIME], "%s", e->json);
	cr_assert_null(strstr(e->f[0].remedy, "not a leak"), "%s", e->json);
	cr_assert_not_null(strstr(e->f[0].remedy, "watch"), "%s", e->json);
	cr_assert_not_null(strstr(e->verdict, "outside malloc"), "%s",
			   e->verdict);
	explain_assert_text_verdict(fx.pid, e);
	fixture_assert_healthy(&fx);
}

/* Send @c, which must answer "ok ...": the reply. */
static const char *command(char c)
{
	static char reply[256];
	int rc = fixture_command(&fx, c, reply, sizeof(reply), 120000);

	cr_assert_eq(rc, 0, "command %c: %s", c, strerror(-rc));
	cr_assert(!strncmp(reply, "ok", 2), "command %c: %s", c, reply);
	return reply;
}

/*
 * Debian's python3, a dict of 400,000 small str values: pymalloc's
 * arenas are CPython's part (never "anonymous memory outside the
 * allocator"), the dict's table glibc's heap in use; the dict doubles
 * and CPython's part grows by about what the new objects take.
 */
Test(explain_runtimes, python_dict_that_grows)
{
	struct explain a, b;
	const char *v;

	start("/usr/bin/python3", "python3", "runtime-grow.py", "400000");
	explain_runtime(&a, "cpython", true);
	cr_assert_str_eq(a.allocator ? a.allocator : "?", "glibc", "%s",
			 a.json);
	v = explain_str(&a, "runtime.version");
	cr_assert(v && !strncmp(v, "3.", 2), "%s", a.json);
	/* 400,000 strs of ~100 bytes and their int keys */
	cr_assert_geq(a.part[P_RUNTIME], 30 * MiB, "%s", a.json);
	cr_assert_lt(a.part[P_ANON_OTHER], 4 * MiB, "%s", a.json);
	cr_assert_not_null(strstr(a.f[0].remedy, "tracemalloc"), "%s",
			   a.json);
	cr_assert_not_null(strstr(a.f[0].remedy, "PYTHONMALLOC=malloc"),
			   "%s", a.json);
	command('g');
	explain_runtime(&b, "cpython", true);
	cr_assert_geq(b.part[P_RUNTIME], a.part[P_RUNTIME] + 25 * MiB,
		      "the dict doubled, CPython's part went from %" PRId64
		      " to %" PRId64 "\n%s", a.part[P_RUNTIME],
		      b.part[P_RUNTIME], b.json);
	explain_free(&b);
	explain_free(&a);
}

/* "key=N" of a line, or fail. */
static int64_t num(const char *line, const char *key)
{
	return ready_num(line, key);
}

/*
 * A Go program (Debian's golang-go) whose map grows: no malloc at all,
 * so explain reads no allocator and says why, exit 0; Go's heap arenas
 * and the runtime's own memory are its part, the goroutines' stack
 * pointers in its heap make no thread stacks; runtime.memstats, read
 * from outside, agrees with the program's own runtime.ReadMemStats.
 */
Test(explain_runtimes, go_map_that_grows)
{
	struct explain a, b;
	int64_t inuse, got;
	const char *v;

	start(NULL, "golang-go", "runtime-grow-go", "400000");
	inuse = num(fx.ready, "heap_inuse");
	explain_runtime(&a, "go", false);
	cr_assert_eq(a.attached, 0, "%s", a.json);
	cr_assert_not_null(explain_str(&a, "not_read"), "%s", a.json);
	cr_assert_not_null(strstr(explain_str(&a, "not_read"), "no malloc"),
			   "%s", a.json);
	v = explain_str(&a, "runtime.version");
	cr_assert(v && !strncmp(v, "go1.", 4), "%s", a.json);
	cr_assert_geq(a.part[P_RUNTIME], inuse * 9 / 10, "%s", a.json);
	cr_assert_lt(a.part[P_THREAD_STACKS], MiB, "%s", a.json);
	cr_assert_leq(a.part[P_HEAP], 0, "%s", a.json);
	cr_assert_not_null(strstr(a.f[0].remedy, "GOMEMLIMIT"), "%s", a.json);
	if (!strncmp(v, "go1.19", 6) && (v[6] == '.' || !v[6])) {
		cr_assert(explain_num(&a, "runtime.heap_inuse", &got),
			  "go1.19's memstats not read\n%s", a.json);
		assert_within_pct(got, inuse, 10,
				  "HeapInuse read from outside against the "
				  "program's ReadMemStats", &a);
	}
	inuse = num(command('g'), "heap_inuse");
	explain_runtime(&b, "go", false);
	cr_assert_geq(b.part[P_RUNTIME], a.part[P_RUNTIME] + 30 * MiB,
		      "the map doubled, Go's part went from %" PRId64 " to %"
		      PRId64 "\n%s", a.part[P_RUNTIME], b.part[P_RUNTIME],
		      b.json);
	if (explain_num(&b, "runtime.heap_inuse", &got))
		assert_within_pct(got, inuse, 10, "HeapInuse after it grew",
				  &b);
	explain_free(&b);
	explain_free(&a);
}

/*
 * A Java program holding 96 MiB of byte arrays (-Xmx256m): the JVM's
 * part holds them, its counters (the hsperfdata it maps, read from its
 * memory) agree with the program's own Runtime, and the finding names
 * -Xmx, jcmd and NMT; the arrays double and the part grows.
 */
Test(explain_runtimes, java_heap_that_grows)
{
	static char java[] = "/usr/bin/java";
	struct explain a, b;
	int64_t max, committed, got;
	const char *settings;
	char path[PATH_MAX];
	char *argv[] = { java, (char *)"-Xmx256m", path, (char *)"96", NULL };
	int rc;

	if (access(java, X_OK))
		cr_skip_test("%s is not installed (apt-get install "
			     "default-jre-headless)", java);
	fixture_path("RuntimeGrow.java", path, sizeof(path));
	rc = fixture_start(&fx, argv, NULL, 90000);
	cr_assert_eq(rc, 0, "starting java %s: %s", path, strerror(-rc));
	max = num(fx.ready, "max");
	committed = num(fx.ready, "committed");
	explain_runtime(&a, "jvm", true);
	cr_assert_geq(a.part[P_RUNTIME], 96 * MiB, "%s", a.json);
	cr_assert(explain_num(&a, "runtime.heap_max", &got), "%s", a.json);
	assert_within_pct(got, max, 1, "the Java heap's most, against "
			  "Runtime.maxMemory()", &a);
	cr_assert(explain_num(&a, "runtime.heap_committed", &got), "%s",
		  a.json);
	assert_within_pct(got, committed, 25, "the Java heap committed, "
			  "against Runtime.totalMemory()", &a);
	cr_assert(explain_num(&a, "runtime.heap_used", &got), "%s", a.json);
	cr_assert_geq(got, 96 * MiB, "%s", a.json);
	settings = explain_str(&a, "runtime.settings");
	cr_assert(settings && strstr(settings, "-Xmx256m"), "%s", a.json);
	cr_assert_not_null(strstr(a.f[0].remedy, "-Xmx"), "%s", a.json);
	cr_assert_not_null(strstr(a.f[0].remedy, "NativeMemoryTracking"),
			   "%s", a.json);
	cr_assert_not_null(strstr(a.f[0].remedy, "GC.heap_info"), "%s",
			   a.json);
	command('g');
	explain_runtime(&b, "jvm", true);
	cr_assert_geq(b.part[P_RUNTIME], a.part[P_RUNTIME] + 64 * MiB,
		      "the arrays doubled, the JVM's part went from %" PRId64
		      " to %" PRId64 "\n%s", a.part[P_RUNTIME],
		      b.part[P_RUNTIME], b.json);
	explain_free(&b);
	explain_free(&a);
}

/* Node.js, a Map of 300,000 strings: V8's heap is the part; it grows
 * with the Map. */
Test(explain_runtimes, node_map_that_grows)
{
	struct explain a, b;
	int64_t used;

	start("/usr/bin/node", "nodejs", "runtime-grow.js", "300000");
	used = num(fx.ready, "heap_used");
	explain_runtime(&a, "node", true);
	cr_assert_geq(a.part[P_RUNTIME], used / 2, "V8's heap_used %" PRId64
		      "\n%s", used, a.json);
	cr_assert_not_null(strstr(a.f[0].remedy, "--max-old-space-size"),
			   "%s", a.json);
	command('g');
	explain_runtime(&b, "node", true);
	cr_assert_geq(b.part[P_RUNTIME], a.part[P_RUNTIME] + 16 * MiB,
		      "the Map doubled, Node's part went from %" PRId64
		      " to %" PRId64 "\n%s", a.part[P_RUNTIME],
		      b.part[P_RUNTIME], b.json);
	explain_free(&b);
	explain_free(&a);
}

/*
 * A CPython whose symbol table names pymalloc's arena count (Debian's
 * python3 is stripped of it; a fixture stands in: tests/fixtures/
 * runtime_pymalloc.c): the count is read from its memory, and the
 * arenas it says are in CPython's part.
 */
Test(explain_runtimes, pymalloc_arenas_where_the_symbols_name_them)
{
	struct explain e;
	int64_t arenas, size, got;

	start(NULL, "build-essential", "runtime-pymalloc", "48");
	arenas = num(fx.ready, "arenas");
	size = num(fx.ready, "arena");
	explain_runtime(&e, "cpython", true);
	cr_assert_str_eq(explain_str(&e, "runtime.version"), "3.11.2", "%s",
			 e.json);
	cr_assert(explain_num(&e, "runtime.arenas", &got), "%s", e.json);
	cr_assert_eq(got, arenas, "%s", e.json);
	cr_assert(explain_num(&e, "runtime.arena_size", &got), "%s", e.json);
	cr_assert_eq(got, size, "%s", e.json);
	cr_assert_null(explain_str(&e, "runtime.not_read"), "%s", e.json);
	cr_assert_geq(e.part[P_RUNTIME], arenas * size, "%s", e.json);
	cr_assert_not_null(strstr(e.f[0].text, "48 arenas of 1.0 MiB"), "%s",
			   e.json);
	explain_free(&e);
}
