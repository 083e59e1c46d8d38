/*
 * `memsnap info` on every allocator Debian ships, linked and preloaded:
 * the kind, who serves malloc, and the function addresses, each checked
 * against nm and the maps.
 */
#include "../lib/addr.h"
#include "../lib/fixture.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>


static struct fixture fx = { .pid = -1 };

static void stop_fixture(void)
{
	fixture_stop(&fx);
}

/* Start fixture @name (with LD_PRELOAD=@preload if not NULL), run info
 * --json, check the kind serving malloc; the output goes to @r. */
static void info_of(const char *name, const char *preload, const char *kind,
		    struct run *r)
{
	char path[512], env0[256], pid[16], want[64], why[256];
	char *argv[] = { path, NULL };
	char *env[] = { env0, NULL };
	const char *args[] = { "--pid", pid, "--json", "info", NULL };
	int rc;

	if (preload && access(preload, R_OK))
		cr_skip_test("%s is not installed", preload);
	snprintf(env0, sizeof(env0), "LD_PRELOAD=%s", preload ? preload : "");
	fixture_path(name, path, sizeof(path));
	rc = fixture_start(&fx, argv, env, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pid, sizeof(pid), "%d", (int)fx.pid);
	cr_assert_eq(run_memsnap(r, args), 0);
	cr_assert_eq(r->status, 0, "%s", r->err);
	snprintf(want, sizeof(want), "\"allocator\": \"%s\"", kind);
	cr_expect(strstr(r->out, want) != NULL, "%s must serve malloc: %s",
		  kind, r->out);
	snprintf(want, sizeof(want), "\"kind\": \"%s\"", kind);
	cr_expect(strstr(r->out, want) != NULL, "%s", r->out);
	cr_assert(fixture_healthy(&fx, why, sizeof(why)), "%s", why);
}

static void check_tcmalloc_full(const char *fixture, const char *preload)
{
	struct run r;

	info_of(fixture, preload, "tcmalloc", &r);
	addr_expect_json(r.out, "HeapProfilerStart",
			 addr_expected(fx.pid, "libtcmalloc", "HeapProfilerStart", 1));
	addr_expect_json(r.out, "HeapProfilerDump",
			 addr_expected(fx.pid, "libtcmalloc", "HeapProfilerDump", 1));
	addr_expect_json(r.out, "MallocExtension_GetStats",
			 addr_expected(fx.pid, "libtcmalloc",
				       "MallocExtension_GetStats", 1));
	cr_expect(strstr(r.out, "tcmalloc_minimal") == NULL);
	run_free(&r);
}

static void check_tcmalloc_minimal(const char *fixture, const char *preload)
{
	struct run r;

	info_of(fixture, preload, "tcmalloc_minimal", &r);
	addr_expect_json(r.out, "MallocExtension_ReleaseFreeMemory",
			 addr_expected(fx.pid, "libtcmalloc_minimal",
				       "MallocExtension_ReleaseFreeMemory", 1));
	cr_expect(strstr(r.out, "HeapProfilerStart") == NULL,
		  "minimal has no heap profiler: %s", r.out);
	run_free(&r);
}

static void check_mimalloc(const char *fixture, const char *preload)
{
	struct run r;

	info_of(fixture, preload, "mimalloc", &r);
	addr_expect_json(r.out, "mi_stats_print_out",
			 addr_expected(fx.pid, "libmimalloc", "mi_stats_print_out", 1));
	addr_expect_json(r.out, "mi_collect",
			 addr_expected(fx.pid, "libmimalloc", "mi_collect", 1));
	addr_expect_json(r.out, "mi_version",
			 addr_expected(fx.pid, "libmimalloc", "mi_version", 1));
	run_free(&r);
}

Test(info_kinds, tcmalloc_linked, .fini = stop_fixture)
{
	check_tcmalloc_full("cli_tcmalloc", NULL);
}

Test(info_kinds, tcmalloc_preloaded, .fini = stop_fixture)
{
	check_tcmalloc_full("cli_plain", LIBDIR "libtcmalloc_and_profiler.so.4");
}

Test(info_kinds, tcmalloc_minimal_linked, .fini = stop_fixture)
{
	check_tcmalloc_minimal("cli_tcmalloc_minimal", NULL);
}

Test(info_kinds, tcmalloc_minimal_preloaded, .fini = stop_fixture)
{
	check_tcmalloc_minimal("cli_plain", LIBDIR "libtcmalloc_minimal.so.4");
}

Test(info_kinds, mimalloc_linked, .fini = stop_fixture)
{
	check_mimalloc("cli_mimalloc", NULL);
}

Test(info_kinds, mimalloc_preloaded, .fini = stop_fixture)
{
	check_mimalloc("cli_plain", LIBDIR "libmimalloc.so.2");
}

Test(info_kinds, jemalloc_preloaded, .fini = stop_fixture)
{
	struct run r;

	info_of("cli_plain", LIBDIR "libjemalloc.so.2", "jemalloc", &r);
	addr_expect_json(r.out, "mallctl",
			 addr_expected(fx.pid, "libjemalloc", "mallctl", 1));
	/* glibc is still there, just not serving malloc. */
	cr_expect(strstr(r.out, "\"kind\": \"glibc\"") != NULL);
	run_free(&r);
}
