/*
 * The static binary (make static) where nothing is installed: run in a
 * mount namespace whose library directories are empty tmpfs mounts, it
 * does everything a user starts with against a live process (info,
 * stats, a jemalloc dump, the sampler on, its dump, off, and reports of
 * both symbolized through /proc/PID/root), and the target is unharmed
 * after each.  The dynamic memsnap, run the same way, cannot even
 * start: the directories are really hidden.
 */
#include "../lib/fixture.h"
#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static struct fixture fx = { .pid = -1 };
static char base[PATH_MAX];
static char pidstr[16];

static void setup(void)
{
	int rc = scratch_make("memsnap-test-static", base, sizeof(base));

	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
}

static void teardown(void)
{
	fixture_stop(&fx);
	scratch_cleanup(base);
}

TestSuite(static_binary, .init = setup, .fini = teardown, .timeout = 180);

/* $MEMSNAP_STATIC, or skip saying why there is none. */
static const char *static_bin(void)
{
	const char *p = getenv("MEMSNAP_STATIC");

	if (!p || access(p, X_OK))
		cr_skip_test("no static binary at %s (MEMSNAP_STATIC; a "
			     "sanitized build has none: its runtimes cannot "
			     "be linked statically)", p ? p : "(unset)");
	return p;
}

/* In the child, before the exec: a mount namespace of its own with
 * every library directory an empty tmpfs.  126: no namespace; 125: a
 * mount failed; 124: the C library is still there. */
static void hide_libraries(void *arg)
{
	static const char *const dirs[] = { "/usr/lib", "/usr/lib64", "/lib",
					    "/lib64", "/usr/local/lib" };
	struct stat st;
	size_t i;

	(void)arg;
	if (unshare(CLONE_NEWNS) ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		_exit(126);
	/* a symlink (/lib on a merged /usr) leads to one hidden already */
	for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (!lstat(dirs[i], &st) && S_ISDIR(st.st_mode) &&
		    mount("none", dirs[i], "tmpfs", MS_NOSUID | MS_NODEV,
			  "size=64k"))
			_exit(125);
	if (!access(LIBDIR "libc.so.6", F_OK))
		_exit(124);
}

/* @bin with @args (NULL-ended) in the hidden namespace, into @r. */
static void run_hidden(struct run *r, const char *bin, const char *const *args)
{
	char *argv[32];
	size_t i;
	int rc;

	argv[0] = (char *)bin;
	for (i = 0; args[i] && i + 2 < 32; i++)
		argv[i + 1] = (char *)args[i];
	argv[i + 1] = NULL;
	rc = run_argv_with(r, argv, hide_libraries, NULL);
	cr_assert_eq(rc, 0, "running %s: %s", bin, strerror(-rc));
	cr_assert(r->status < 124 || r->status > 126,
		  "the namespace could not be made (%d)", r->status);
}

/* Run, expect exit 0, prove the target unharmed; @r kept for checks. */
static void ok_hidden(struct run *r, const char *bin, const char *const *args)
{
	run_hidden(r, bin, args);
	cr_assert_eq(r->status, 0, "memsnap-static %s %s: exit %d: %s%s",
		     args[0], args[1] ? args[1] : "", r->status, r->out,
		     r->err);
	fixture_assert_healthy(&fx);
}

/* No interpreter and no dynamic section in @path's program headers. */
static void assert_no_dynamic(const char *path)
{
	Elf64_Ehdr e;
	Elf64_Phdr ph;
	FILE *f = fopen(path, "rb");
	int i;

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_eq(fread(&e, sizeof(e), 1, f), 1);
	for (i = 0; i < e.e_phnum; i++) {
		cr_assert_eq(fseek(f, (long)(e.e_phoff + (uint64_t)i *
					     e.e_phentsize), SEEK_SET), 0);
		cr_assert_eq(fread(&ph, sizeof(ph), 1, f), 1);
		cr_assert_neq(ph.p_type, PT_INTERP, "%s asks for a loader",
			      path);
		cr_assert_neq(ph.p_type, PT_DYNAMIC, "%s is linked "
			      "dynamically", path);
	}
	fclose(f);
}

Test(static_binary, works_with_no_library_installed)
{
	const char *bin = static_bin(), *dyn = getenv("MEMSNAP_BIN");
	char path[PATH_MAX], root[64], heap[PATH_MAX + 16],
		sheap[PATH_MAX + 16];
	char *argv[] = { path, NULL };
	char *env[] = { (char *)"MALLOC_CONF=prof:true,lg_prof_sample:10",
			NULL };
	struct run r;
	int rc;

	assert_no_dynamic(bin);
	fixture_path("jemalloc-target", path, sizeof(path));
	rc = fixture_start(&fx, argv, env, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
	snprintf(root, sizeof(root), "/proc/%d/root", (int)fx.pid);
	snprintf(heap, sizeof(heap), "%s/je.heap", base);
	snprintf(sheap, sizeof(sheap), "%s/sampler.heap", base);

	/* the control: the dynamic memsnap cannot start there */
	if (dyn) {
		run_hidden(&r, dyn, (const char *const[]){ "--version", NULL });
		cr_assert_neq(r.status, 0, "the dynamic memsnap ran with "
			      "the libraries hidden: %s", r.out);
		run_free(&r);
	}

	ok_hidden(&r, bin, (const char *const[]){ "--version", NULL });
	cr_assert_not_null(strstr(r.out, "linked: statically"), "%s", r.out);
	run_free(&r);
	ok_hidden(&r, bin, (const char *const[]){ "--pid", pidstr, "info",
						  NULL });
	cr_assert_not_null(strstr(r.out, "jemalloc"), "%s", r.out);
	run_free(&r);
	ok_hidden(&r, bin, (const char *const[]){ "--pid", pidstr, "stats",
						  NULL });
	run_free(&r);
	ok_hidden(&r, bin, (const char *const[]){ "--pid", pidstr, "dump",
						  "-o", heap, NULL });
	run_free(&r);
	cr_assert_eq(access(heap, R_OK), 0, "no dump at %s", heap);
	ok_hidden(&r, bin, (const char *const[]){ "report", heap, "--root",
						  root, NULL });
	/* the program's own frame, and one of libc's, which only
	 * /proc/PID/root still shows */
	cr_assert_not_null(strstr(r.out, "leak_inner"), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "__libc_start"), "%s", r.out);
	run_free(&r);

	/* every block sampled: the pings after it allocate and free */
	ok_hidden(&r, bin, (const char *const[]){ "--pid", pidstr, "prof",
						  "on", "--sampler",
						  "--sample-bytes", "64",
						  NULL });
	cr_assert_not_null(strstr(r.out, "sampler on"), "%s", r.out);
	run_free(&r);
	ok_hidden(&r, bin, (const char *const[]){ "--pid", pidstr, "dump",
						  "-o", sheap, NULL });
	run_free(&r);
	ok_hidden(&r, bin, (const char *const[]){ "--pid", pidstr, "prof",
						  "off", NULL });
	cr_assert_not_null(strstr(r.out, "sampler off"), "%s", r.out);
	run_free(&r);
	ok_hidden(&r, bin, (const char *const[]){ "report", sheap, "--alloc",
						  "--root", root, NULL });
	/* the ping's check(), unwound whole by the static binary's
	 * unwinder at the dump */
	cr_assert_not_null(strstr(r.out, "fixture_serve"), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "__libc_start"), "%s", r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
}
