/*
 * memsnap opens nothing but regular files on a target's behalf
 * (docs/SECURITY.md): not at a path a dump's MAPPED_LIBRARIES names,
 * not at one an object's build-id, .gnu_debuglink or .gnu_debugaltlink
 * makes, not at a live target's maps path when /proc/PID/map_files
 * cannot be read.  With `report --root /proc/PID/root` the target lays
 * out all of these.  Opening is already the harm (a watchdog arms on
 * open, a tape rewinds, a FIFO's waiting writer learns that root opened
 * it, a FIFO without one blocks the opener for ever), so each trap
 * (a FIFO with a writer waiting, a character device) is watched with
 * inotify: an open() makes an IN_OPEN event, an O_PATH descriptor does
 * not.  Every memsnap runs under timeout(1) in case something blocks.
 */
#include "tests/lib/fault.h"
#include "tests/lib/scratch.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

static char top[64];		/* $TMPDIR/memsnap-hp.XXXXXX */
static char root[80];		/* the --root: top/root */
static char dump[96];		/* top/dump.heap */

/* Where the dumps put the object, and a return address inside it. */
#define BASE 0x7f0000000000ull
#define IN_TEXT 0x1100

#define MAX_TRAPS 4

struct trap {
	char path[PATH_MAX + 64];
	int inotify;
	pid_t writer;	/* a FIFO's, blocked in open() until a reader */
};

static struct trap traps[MAX_TRAPS];
static size_t ntraps;
static struct fixture fx = { .pid = -1 };

static void teardown(void)
{
	size_t i;

	fixture_stop(&fx);
	for (i = 0; i < ntraps; i++) {
		if (traps[i].writer > 0) {
			kill(traps[i].writer, SIGKILL);
			waitpid(traps[i].writer, NULL, 0);
		}
		close(traps[i].inotify);
	}
	ntraps = 0;
	scratch_cleanup(top);
}

static void setup(void)
{
	int rc = scratch_make("memsnap-hp", top, sizeof(top));

	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	snprintf(root, sizeof(root), "%s/root", top);
	snprintf(dump, sizeof(dump), "%s/dump.heap", top);
	cr_assert_eq(mkdir(root, 0755), 0);
	skip_cleanup = teardown;
}

TestSuite(hostile_paths, .init = setup, .fini = teardown);

static void shell(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void shell(const char *fmt, ...)
{
	char cmd[4 * PATH_MAX];
	struct run r;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	cr_assert_eq(run_shell(&r, cmd), 0, "%s", cmd);
	cr_assert_eq(r.status, 0, "%s: %s", cmd, r.err);
	run_free(&r);
}

/* @rel beneath the root, its directories made. */
static void in_root(const char *rel, char *path, size_t size)
{
	snprintf(path, size, "%s%.1000s", root, rel);
	shell("mkdir -p \"$(dirname '%s')\"", path);
}

/* Watch @t->path for opens, from now on. */
static void watch(struct trap *t)
{
	t->inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	cr_assert_geq(t->inotify, 0);
	cr_assert_geq(inotify_add_watch(t->inotify, t->path, IN_OPEN), 0,
		      "%s: %s", t->path, strerror(errno));
}

/* Watch the FIFO at @path, a writer waiting in open() for a reader. */
static struct trap *trap_existing_fifo(const char *path)
{
	struct trap *t = &traps[ntraps++];

	cr_assert_leq(ntraps, MAX_TRAPS);
	snprintf(t->path, sizeof(t->path), "%s", path);
	watch(t);
	t->writer = fork();
	cr_assert_geq(t->writer, 0);
	if (!t->writer)	/* returns only when someone opens it to read */
		_exit(open(t->path, O_WRONLY) < 0 ? 1 : 0);
	return t;
}

/* A FIFO made at @path, watched. */
static struct trap *trap_fifo(const char *path)
{
	cr_assert_eq(mkfifo(path, 0666), 0, "%s: %s", path, strerror(errno));
	return trap_existing_fifo(path);
}

/* A character device at @path: the null device's numbers, so that an
 * open does no harm but is seen. */
static struct trap *trap_device(const char *path)
{
	struct trap *t = &traps[ntraps];

	snprintf(t->path, sizeof(t->path), "%s", path);
	if (mknod(t->path, S_IFCHR | 0666, makedev(1, 3)))
		skip_test("mknod %s: %s (needs CAP_MKNOD, a file system "
			  "without nodev)", t->path, strerror(errno));
	ntraps++;
	cr_assert_leq(ntraps, MAX_TRAPS);
	watch(t);
	return t;
}

/* Was @t opened since it was made? */
static bool opened(struct trap *t)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n = read(t->inotify, buf, sizeof(buf));

	if (n < 0)
		cr_assert_eq(errno, EAGAIN, "inotify: %s", strerror(errno));
	return n > 0;
}

static void assert_never_opened(void)
{
	size_t i;

	for (i = 0; i < ntraps; i++)
		cr_assert(!opened(&traps[i]), "memsnap opened %s",
			  traps[i].path);
}

/* A dump whose one stack has a return address in @obj (a maps path),
 * mapped at BASE from offset 0. */
static void write_dump(const char *obj, uint64_t pc)
{
	FILE *f = fopen(dump, "w");

	cr_assert_not_null(f);
	fprintf(f, "heap_v2/524288\n"
		   "  t*: 1: 4096 [0: 0]\n"
		   "@ 0x%" PRIx64 "\n"
		   "  t*: 1: 4096 [0: 0]\n"
		   "\n"
		   "MAPPED_LIBRARIES:\n"
		   "%" PRIx64 "-%" PRIx64 " r-xp 00000000 00:00 5 %s\n",
		pc, (uint64_t)BASE, (uint64_t)BASE + 0x10000, obj);
	cr_assert_eq(fclose(f), 0);
}

/* memsnap report of the dump beneath the root: it ends, and well. */
static void report(struct run *r, const char *args)
{
	char cmd[4 * PATH_MAX];

	snprintf(cmd, sizeof(cmd), "timeout 60 '%s' report '%s' --root '%s' "
		 "--lines %s", getenv("MEMSNAP_BIN"), dump, root, args);
	cr_assert_eq(run_shell(r, cmd), 0);
	cr_assert_neq(r->status, 124, "memsnap report blocked: %s", r->err);
	cr_assert_eq(r->status, 0, "exit %d: %s", r->status, r->err);
}

static void fixture_file(const char *name, char *path, size_t size)
{
	fixture_path(name, path, size);
	cr_assert_eq(access(path, R_OK), 0, "%s: %s", path, strerror(errno));
}

/* The library at @rel beneath the root: without DWARF (a distribution's,
 * whose debuginfo is looked for), or with @section made of the bytes in
 * @file: ".gnu_debuglink" to the same, ".gnu_debugaltlink" to the
 * library with its DWARF (which then needs its supplementary file).
 * Its build-id in hex into @id. */
static void put_library(const char *rel, const char *section,
			const char *file, char id[41])
{
	char lib[PATH_MAX], dst[PATH_MAX], cmd[PATH_MAX + 64];
	struct run r;

	fixture_file(section && !strcmp(section, ".gnu_debugaltlink")
			     ? "libhostile-paths.so"
			     : "libhostile-paths.stripped.so",
		     lib, sizeof(lib));
	in_root(rel, dst, sizeof(dst));
	if (section)
		shell("objcopy --add-section %s='%s' '%s' '%s'", section, file,
		      lib, dst);
	else
		shell("cp '%s' '%s'", lib, dst);
	snprintf(cmd, sizeof(cmd),
		 "readelf -n '%s' | sed -n 's/.*Build ID: *//p'", dst);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(strlen(r.out), 41, "build-id of %s: '%s'", dst, r.out);
	memcpy(id, r.out, 40);
	id[40] = '\0';
	run_free(&r);
}

/* The usual dump (/lib/libhp.so) reported: no trap was opened.  The
 * report's stderr into @err (may be NULL). */
static void report_opens_no_trap(char *err, size_t size)
{
	struct run r;

	write_dump("/lib/libhp.so", BASE + IN_TEXT);
	report(&r, "");
	assert_never_opened();
	if (err)
		snprintf(err, size, "%s", r.err);
	run_free(&r);
}

/* ROOT/usr/lib/debug/.build-id/xx/yyyy.debug for build-id @id, its
 * directories made. */
static void build_id_path(const char *id, char *path, size_t size)
{
	char rel[128];

	snprintf(rel, sizeof(rel), "/usr/lib/debug/.build-id/%.2s/%.38s.debug",
		 id, id + 2);
	in_root(rel, path, size);
}

/* ---- paths the dump's maps name ----------------------------------- */

Test(hostile_paths, report_opens_no_fifo_named_by_the_maps)
{
	char path[PATH_MAX], err[1024];

	in_root("/lib/libhp.so", path, sizeof(path));
	trap_fifo(path);
	report_opens_no_trap(err, sizeof(err));
	cr_assert(strstr(err, "'/lib/libhp.so': not an ELF file"), "%s", err);
}

Test(hostile_paths, report_opens_no_device_named_by_the_maps)
{
	char path[PATH_MAX], err[1024];

	in_root("/lib/libhp.so", path, sizeof(path));
	trap_device(path);
	report_opens_no_trap(err, sizeof(err));
	cr_assert(strstr(err, "'/lib/libhp.so': not an ELF file"), "%s", err);
}

/* The maps' paths are the kernel's, every link resolved: a symlink
 * there is the target's, and not followed, even inside the root. */
Test(hostile_paths, report_follows_no_symlink_named_by_the_maps)
{
	char path[PATH_MAX], lib[PATH_MAX], dev[PATH_MAX];

	in_root("/lib/fifo", path, sizeof(path));
	trap_fifo(path);
	in_root("/lib/libhp.so", lib, sizeof(lib));
	cr_assert_eq(symlink("/lib/fifo", lib), 0);
	report_opens_no_trap(NULL, 0);
	/* a relative one, to a device */
	in_root("/dev/watchdog", path, sizeof(path));
	trap_device(path);
	in_root("/lib/libdev.so", dev, sizeof(dev));
	cr_assert_eq(symlink("../dev/watchdog", dev), 0);
	cr_assert_eq(rename(dev, lib), 0);
	report_opens_no_trap(NULL, 0);
}

/* ---- paths libdwfl would make from the object --------------------- */

/* The debug file by build-id is a FIFO. */
Test(hostile_paths, report_opens_no_fifo_at_the_build_id_path)
{
	char id[41], path[PATH_MAX];

	put_library("/lib/libhp.so", NULL, NULL, id);
	build_id_path(id, path, sizeof(path));
	trap_fifo(path);
	report_opens_no_trap(NULL, 0);
}

/* The debug file by build-id is a symlink, inside the root, to a
 * device (a distribution's .build-id links are symlinks: followed
 * inside the root, but only to a regular file). */
Test(hostile_paths, report_opens_no_device_behind_the_build_id_path)
{
	char id[41], path[PATH_MAX];

	put_library("/lib/libhp.so", NULL, NULL, id);
	in_root("/dev/watchdog", path, sizeof(path));
	trap_device(path);
	build_id_path(id, path, sizeof(path));
	cr_assert_eq(symlink("../../../../../dev/watchdog", path), 0);
	report_opens_no_trap(NULL, 0);
}

/* A .gnu_debuglink section naming @name (CRC 0). */
static void debuglink_section(const char *name, char *file, size_t size)
{
	FILE *f;
	size_t len = strlen(name) + 1, pad = (4 - len % 4) % 4;
	static const char zeros[8];

	snprintf(file, size, "%s/debuglink", top);
	f = fopen(file, "w");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(name, 1, len, f), len);
	cr_assert_eq(fwrite(zeros, 1, pad + 4, f), pad + 4);
	cr_assert_eq(fclose(f), 0);
}

/* The .gnu_debuglink file beside the object is a FIFO. */
Test(hostile_paths, report_opens_no_fifo_named_by_a_debuglink)
{
	char id[41], file[PATH_MAX + 16], path[PATH_MAX];

	debuglink_section("libhp.debug", file, sizeof(file));
	put_library("/lib/libhp.so", ".gnu_debuglink", file, id);
	in_root("/lib/libhp.debug", path, sizeof(path));
	trap_fifo(path);
	report_opens_no_trap(NULL, 0);
}

/* A .gnu_debuglink is a file name: "../../x" does not climb out of the
 * root (libdwfl would open top/outside, beside the root). */
Test(hostile_paths, report_debuglink_never_leaves_the_root)
{
	char id[41], file[PATH_MAX + 16], path[PATH_MAX + 16];

	debuglink_section("../../outside", file, sizeof(file));
	put_library("/lib/libhp.so", ".gnu_debuglink", file, id);
	snprintf(path, sizeof(path), "%s/outside", top);
	trap_fifo(path);
	report_opens_no_trap(NULL, 0);
}

/* The supplementary (dwz) file a .gnu_debugaltlink names is a FIFO
 * where libdwfl looks for it: ROOT/usr/lib/debug/.dwz/NAME. */
Test(hostile_paths, report_opens_no_fifo_named_by_a_debugaltlink)
{
	static const char alt[] = "/usr/lib/debug/.dwz/hp.debug";
	char id[41], file[PATH_MAX + 16], path[PATH_MAX];
	FILE *f;
	int i;

	snprintf(file, sizeof(file), "%s/altlink", top);
	f = fopen(file, "w");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(alt, 1, sizeof(alt), f), sizeof(alt));
	for (i = 0; i < 20; i++)
		fputc(0xa0 + i, f);
	cr_assert_eq(fclose(f), 0);
	/* with its DWARF: libdwfl asks for the supplementary file as soon
	 * as it reads it */
	put_library("/lib/libhp.so", ".gnu_debugaltlink", file, id);
	in_root(alt, path, sizeof(path));
	trap_fifo(path);
	report_opens_no_trap(NULL, 0);
}

/* hp_leaf's link-time address, from the fixture's .debug file, whose
 * path goes into @dbg. */
static uint64_t hp_leaf_address(char *dbg, size_t size)
{
	char cmd[PATH_MAX + 64];
	struct run r;
	uint64_t leaf;

	fixture_file("libhostile-paths.debug", dbg, size);
	snprintf(cmd, sizeof(cmd), "nm '%s' | sed -n 's/ T hp_leaf$//p'", dbg);
	cr_assert_eq(run_shell(&r, cmd), 0);
	leaf = strtoull(r.out, NULL, 16);
	cr_assert_neq(leaf, 0, "%s", r.out);
	run_free(&r);
	return leaf;
}

/* The report of a dump whose first frame is in hp_leaf (the address
 * itself is looked up) names its file and line. */
static void report_shows_hp_leaf_line(uint64_t leaf, const char *args)
{
	struct run r;

	write_dump("/lib/libhp.so", BASE + leaf + 4);
	report(&r, args);
	cr_assert(strstr(r.out, "hp_leaf hostile_paths_lib.c:"), "%s",
		  r.out);
	run_free(&r);
}

/* What still works: the debug file found by build-id beneath the root
 * gives the library's file and line. */
Test(hostile_paths, report_finds_debuginfo_by_build_id_in_the_root)
{
	char id[41], path[PATH_MAX], dbg[PATH_MAX];
	uint64_t leaf;

	put_library("/lib/libhp.so", NULL, NULL, id);
	leaf = hp_leaf_address(dbg, sizeof(dbg));
	build_id_path(id, path, sizeof(path));
	shell("cp '%s' '%s'", dbg, path);
	report_shows_hp_leaf_line(leaf, "--format folded");
}

/* And debuginfod, when asked (a file:// server: no network), by
 * build-id, into a cache of the caller's. */
Test(hostile_paths, report_debuginfod_still_finds_debuginfo)
{
	char id[41], dbg[PATH_MAX], url[128], cache[128];
	uint64_t leaf;

	if (!dlopen("libdebuginfod.so.1", RTLD_LAZY | RTLD_LOCAL))
		skip_test("libdebuginfod.so.1 is not installed");
	put_library("/lib/libhp.so", NULL, NULL, id);
	leaf = hp_leaf_address(dbg, sizeof(dbg));
	shell("mkdir -p '%s/srv/buildid/%s' && cp '%s' '%s/srv/buildid/%s/"
	      "debuginfo'", top, id, dbg, top, id);
	snprintf(url, sizeof(url), "file://%s/srv", top);
	snprintf(cache, sizeof(cache), "%s/cache", top);
	cr_assert_eq(setenv("DEBUGINFOD_URLS", url, 1), 0);
	cr_assert_eq(setenv("DEBUGINFOD_CACHE_PATH", cache, 1), 0);
	report_shows_hp_leaf_line(leaf, "--format folded --debuginfod");
}

/* ---- a live target's maps, without /proc/PID/map_files ------------- */

/*
 * Without CAP_SYS_ADMIN and CAP_CHECKPOINT_RESTORE, /proc/PID/map_files
 * cannot be followed and memsnap opens the maps' path beneath
 * /proc/PID/root, where the target has put a FIFO.
 */
Test(hostile_paths, fallback_from_map_files_opens_no_fifo)
{
	char exe[PATH_MAX], lib[PATH_MAX], place[PATH_MAX + 16];
	char env_place[PATH_MAX + 32], cmd[4 * PATH_MAX];
	char *argv[] = { exe, lib, NULL };
	char *env[] = { env_place, NULL };
	static const char drop[] = "setpriv --inh-caps=-all "
				   "--bounding-set=-sys_admin,"
				   "-checkpoint_restore";
	struct run r;

	fixture_file("fifo-lib-target", exe, sizeof(exe));
	fixture_file("libhostile-paths.so", lib, sizeof(lib));
	snprintf(place, sizeof(place), "%s/place", top);
	cr_assert_eq(mkdir(place, 0755), 0);
	snprintf(env_place, sizeof(env_place), "ATTACK_PLACE=%s", place);
	cr_assert_eq(fixture_start(&fx, argv, env, 10000), 0);
	cr_assert_eq(strncmp(fx.ready, "fifo ", 5), 0, "%s", fx.ready);
	trap_existing_fifo(fx.ready + 5);
	/* the precondition: no map_files entry can be followed */
	snprintf(cmd, sizeof(cmd), "%s sh -c 'for f in /proc/%d/map_files/*; "
		 "do stat -L \"$f\" >/dev/null 2>&1 && exit 1; done; exit 0'",
		 drop, (int)fx.pid);
	cr_assert_eq(run_shell(&r, cmd), 0);
	if (r.status) {
		run_free(&r);
		skip_test("/proc/PID/map_files can be followed without "
			  "CAP_SYS_ADMIN here: no fallback to test");
	}
	run_free(&r);
	snprintf(cmd, sizeof(cmd), "%s timeout 60 '%s' --pid %d info "
		 "--no-attach", drop, getenv("MEMSNAP_BIN"), (int)fx.pid);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_neq(r.status, 124, "memsnap blocked: %s", r.err);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	run_free(&r);
	assert_never_opened();
	fixture_assert_healthy(&fx);
}
