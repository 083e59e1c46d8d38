/*
 * The sampler on every kind of target (the `sampler` suite; see
 * test_sampler.c): libraries dlopened after `prof on`, allocators that
 * cannot profile (jemalloc without prof:true, tcmalloc_minimal,
 * mimalloc), C++'s operator new on libstdc++ and on tcmalloc, and a
 * target in a mount namespace of its own.
 */
#include "tests/lib/fault.h"
#include "tests/lib/procsnap.h"
#include "tests/lib/sampler.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- objects loaded after prof on ---------------------------------------- */

/*
 * A library dlopened after `prof on --sampler` (@lib: bind-now with
 * full RELRO, or lazy) is sampled: its slots were swapped by the
 * sampler's dlopen hook, RELRO pages given back their protection.  Its
 * blocks are forgotten when freed, and after dlclose (its logged slots
 * now unmapped) `prof off` still works and leaves the target unharmed.
 */
static void dlopened_library(const char *lib)
{
	struct maps_snap *m0 = calloc(1, sizeof(*m0)),
			 *m = calloc(1, sizeof(*m));
	struct folded *fo = calloc(1, sizeof(*fo));
	char path[PATH_MAX], env[PATH_MAX + 32], d[PATH_MAX + 32];
	char reply[256];
	long long want;

	cr_assert(m0 && m && fo, "calloc");
	fixture_path(lib, path, sizeof(path));
	if (access(path, R_OK))
		skip_test("fixture %s not built", path);
	snprintf(env, sizeof(env), "MEMSNAP_SAMPLER_LIB=%s", path);
	start("sampler-target", env);
	sampler_on(16384);
	maps_take(fx.pid, m0);
	command_expect('o', "ok lib=", reply, sizeof(reply));
	want = strtoll(strstr(reply, "lib=") + 4, NULL, 10);
	cr_assert_gt(want, 0, "reply: %s", reply);
	dump_to("lib", 16384, d, sizeof(d));
	folded_load(d, NULL, fo);
	cr_assert(near(leaf_bytes(fo, "lib_site"), want, 10),
		  "%s: lib_site has %lld bytes, %lld live:\n%s", lib,
		  leaf_bytes(fo, "lib_site"), want, fo->text);
	folded_free(fo);

	command_expect('x', "ok", reply, sizeof(reply));
	dump_to("closed", 16384, d, sizeof(d));
	folded_load(d, NULL, fo);
	cr_assert_lt(leaf_bytes(fo, "lib_site"), want / 10,
		     "%s: lib_site still has %lld bytes after its frees",
		     lib, leaf_bytes(fo, "lib_site"));
	folded_free(fo);
	sampler_off();
	assert_untouched(&fx, "after dlclose and prof off");
	/* The executable and libc keep their protections. */
	maps_take(fx.pid, m);
	assert_same_perms(m0, m, "after dlopen, dlclose and prof off");
	free(fo);
	free(m);
	free(m0);
}

Test(sampler, dlopened_bind_now_relro_library)
{
	dlopened_library("libsampler-now.so");
}

Test(sampler, dlopened_lazy_library)
{
	dlopened_library("libsampler-lazy.so");
}

/* ---- other allocators, and C++ -------------------------------------------- */

/* An allocator that cannot profile (jemalloc without prof:true,
 * tcmalloc_minimal, mimalloc): the sites of @mask within 10%. */
static void other_allocator(const char *fixture, unsigned mask)
{
	char d[PATH_MAX + 32];
	struct folded *fo = calloc(1, sizeof(*fo));
	struct counts c;

	cr_assert_not_null(fo);
	start(fixture, NULL);
	sampler_on(16384);
	c = command_counts('a');
	dump_to("other", 16384, d, sizeof(d));
	folded_load(d, NULL, fo);
	assert_sites(fo, &c, mask, fixture);
	folded_free(fo);
	free(fo);
	assert_untouched(&fx, "after the dump");
	sampler_off();
	assert_untouched(&fx, "after prof off");
}

#define OTHER_SITES \
	(1u << MALLOC_SMALL | 1u << CALLOC | 1u << MEMALIGN | 1u << LARGE)

/*
 * jemalloc without prof:true cannot profile, but the sampler can: the
 * same fixture linked with jemalloc, and site_malloc_small within 10%.
 */
Test(sampler, jemalloc_without_prof)
{
	other_allocator("sampler-target-je", 1u << MALLOC_SMALL);
}

Test(sampler, tcmalloc_minimal)
{
	other_allocator("sampler-target-tcm", OTHER_SITES);
}

Test(sampler, mimalloc)
{
	other_allocator("sampler-target-mi", OTHER_SITES);
}

/*
 * C++: operator new on top of glibc's malloc (libstdc++: seen at its
 * call to malloc, the operators not hooked) and tcmalloc_minimal's own
 * (the operators hooked, "cxx": true).  new char[4000] x 8192 at
 * cxx_site within 10%; a 4 EiB new[] throws std::bad_alloc and the
 * program catches it (a sampled throwing new goes through its nothrow
 * twin, and throws from no frame of the sampler's); delete[] and sized
 * delete forget the blocks.
 */
static void cxx(const char *fixture, bool hooked)
{
	struct folded *fo = calloc(1, sizeof(*fo));
	char d[PATH_MAX + 32], reply[128];
	const char *v;
	long long want;
	struct run r;

	cr_assert_not_null(fo);
	start(fixture, NULL);
	memsnap(&r, "--json", "prof", "on", "--sampler", "--sample-bytes",
		"16384", NULL);
	cr_assert_eq(r.status, 0, "prof on: exit %d: %s", r.status, r.err);
	v = json_value(r.out, "cxx");
	cr_assert(v && !strncmp(v, hooked ? "true" : "false", 4),
		  "\"cxx\": %s wanted: %s", hooked ? "true" : "false", r.out);
	run_free(&r);
	command_expect('a', "ok bytes=", reply, sizeof(reply));
	want = strtoll(reply + 9, NULL, 10);
	dump_to("cxx", 16384, d, sizeof(d));
	folded_load(d, NULL, fo);
	cr_assert(near(leaf_bytes(fo, "cxx_site"), want, 10),
		  "%s: cxx_site has %lld bytes, %lld live:\n%s", fixture,
		  leaf_bytes(fo, "cxx_site"), want, fo->text);
	folded_free(fo);
	command_expect('h', "ok caught", reply, sizeof(reply));
	command_expect('F', "ok bytes=0", reply, sizeof(reply));
	dump_to("cxx-freed", 16384, d, sizeof(d));
	folded_load(d, NULL, fo);
	cr_assert_lt(leaf_bytes(fo, "cxx_site"), want / 10,
		     "%s: cxx_site keeps %lld bytes after delete[]", fixture,
		     leaf_bytes(fo, "cxx_site"));
	folded_free(fo);
	free(fo);
	sampler_off();
	assert_untouched(&fx, "after prof off");
}

Test(sampler, cxx_on_libstdcxx)
{
	cxx("sampler-cxx", false);
}

Test(sampler, cxx_on_tcmalloc_minimal)
{
	cxx("sampler-cxx-tcm", true);
}

/* tcmalloc_minimal linked into the program: its operators patched at
 * their entry points; the throwing new still throws from no frame of
 * the sampler's. */
Test(sampler, cxx_on_tcmalloc_minimal_linked_into_program)
{
	cxx("sampler-cxx-tcm-static", true);
}

/* ---- a target whose files memsnap cannot see --------------------------- */

/*
 * The target in a mount namespace of its own, run from a tmpfs that only
 * it sees (mounted on an empty directory of this test's): its program's
 * path does not exist in memsnap's view.  prof on finds
 * its GOT slots through /proc/PID/map_files and swaps them; the dump is
 * the same; report names its stacks with --root /proc/PID/root.
 */
Test(sampler, target_in_its_own_mount_namespace)
{
	static const char script[] =
		"mount -t tmpfs memsnap-sampler \"$1\" && "
		"cp \"$0\" \"$1/sampler-target\" && "
		"exec \"$1/sampler-target\"";
	char path[PATH_MAX], tmp[PATH_MAX + 16], root[64], ns[PATH_MAX + 8];
	char hidden[PATH_MAX + 32];
	char a0[] = "/usr/bin/unshare", a1[] = "--mount",
	     a2[] = "--propagation", a3[] = "private", a4[] = "/bin/sh",
	     a5[] = "-c";
	char *argv[] = { a0, a1, a2, a3, a4, a5, (char *)script, path, ns,
			 NULL };
	char *env[] = { tmp, NULL };
	char d[PATH_MAX + 32], exe[PATH_MAX];
	struct folded *fo = calloc(1, sizeof(*fo));
	struct counts c;
	ssize_t n;
	int rc;

	cr_assert_not_null(fo);
	fixture_path("sampler-target", path, sizeof(path));
	if (access(path, X_OK))
		skip_test("fixture %s not built", path);
	if (access("/usr/bin/unshare", X_OK))
		skip_test("no /usr/bin/unshare (util-linux)");
	snprintf(tmp, sizeof(tmp), "TMPDIR=%s", tmp_dir);
	/* an empty directory here; a tmpfs with the program in it there */
	snprintf(ns, sizeof(ns), "%s/ns", base);
	cr_assert_eq(mkdir(ns, 0700), 0, "%s: %s", ns, strerror(errno));
	snprintf(hidden, sizeof(hidden), "%s/sampler-target", ns);
	rc = fixture_start(&fx, argv, env, 10000);
	cr_assert_eq(rc, 0, "starting %s in a mount namespace: %s", path,
		     strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
	snprintf(root, sizeof(root), "/proc/%d/root", (int)fx.pid);
	/* what memsnap reads in the maps is a path it does not have */
	snprintf(d, sizeof(d), "/proc/%d/exe", (int)fx.pid);
	n = readlink(d, exe, sizeof(exe) - 1);
	cr_assert_gt(n, 0);
	exe[n] = '\0';
	cr_assert_str_eq(exe, hidden);
	cr_assert(access(hidden, F_OK), "%s is in memsnap's view too",
		  hidden);

	sampler_on(16384);
	c = command_counts('a');
	dump_to("ns", 16384, d, sizeof(d));
	report_root = root;
	folded_load(d, NULL, fo);
	report_root = NULL;
	assert_sites(fo, &c, 1u << MALLOC_SMALL | 1u << LARGE,
		     "a target in its own mount namespace");
	folded_free(fo);
	free(fo);
	sampler_off();
	assert_untouched(&fx, "after prof off");
}
