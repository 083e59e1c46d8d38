/*
 * A hostile target against a root memsnap (docs/SECURITY.md): the
 * attacker fixture runs as nobody in user and mount namespaces of its
 * own, as `unshare -Urm` lets anyone, and tries to make memsnap delete,
 * chown, read or overwrite what is root's:
 *
 *   1 a stale-looking .memsnap-* directory with a root directory
 *     bind-mounted over it, for the sweep of leftovers
 *   2 an inotify race: a root directory bind-mounted over each new
 *     .memsnap-* directory the moment it appears
 *   3 a root-only file bind-mounted over the file memsnap reads back
 *   4 devices at -o (/dev/null, /dev/stdout, "-")
 *   5 a $TMPDIR that is not the target's, or writable by all
 *   6 a 1 TiB sparse "profile"
 *   7 a rootless container: its own tmpfs on /tmp (must work)
 *   8 another user's symlink in a directory of -o
 *
 * Every decoy's tree (names, modes, owners, sizes, times) is compared
 * before and after; the secret must appear in no output; memsnap either
 * succeeds or fails with one line and a documented exit code; the target
 * answers a ping afterwards.
 */
#include "tests/lib/fault.h"
#include "tests/lib/scratch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define NOBODY 65534
#define SECRET "TOPSECRET-0c8f3a-not-for-the-target"

static struct fixture fx = { .pid = -1 };
static char base[PATH_MAX];
static char place[PATH_MAX + 16];	/* the attacker's $TMPDIR */
static char decoy[PATH_MAX + 16];	/* root's directory */
static char secret[PATH_MAX + 16];	/* root's file, 0600 */
static char out_dir[PATH_MAX + 16];	/* memsnap's output */
static char pidstr[16];

static void age(const char *path, int seconds)
{
	struct timespec ts[2];

	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= seconds;
	ts[1] = ts[0];
	cr_assert_eq(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW), 0);
}

/* Root's directory @path: 0700, two files and a subdirectory, old. */
static void make_decoy(const char *path, mode_t mode)
{
	char p[PATH_MAX + 32];

	cr_assert_eq(mkdir(path, 0700), 0);
	snprintf(p, sizeof(p), "%s/a", path);
	write_file(p, "root's a\n", 0600);
	snprintf(p, sizeof(p), "%s/sub", path);
	cr_assert_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/sub/b", path);
	write_file(p, "root's b\n", 0600);
	cr_assert_eq(chmod(path, mode), 0);
	age(path, 3600);
}

/* ---- what a tree looks like ------------------------------------------- */

static char *snap_buf;
static size_t snap_len, snap_cap;

static int snap_one(const char *path, const struct stat *st, int type,
		    struct FTW *ftw)
{
	char line[PATH_MAX + 200];
	int n;

	(void)type;
	(void)ftw;
	n = snprintf(line, sizeof(line),
		     "%s mode=%o uid=%d gid=%d size=%lld mtime=%lld.%09ld ctime=%lld.%09ld\n",
		     path, (unsigned)st->st_mode, (int)st->st_uid,
		     (int)st->st_gid, (long long)st->st_size,
		     (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec,
		     (long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
	if (snap_len + (size_t)n + 1 > snap_cap) {
		snap_cap = (snap_cap + (size_t)n + 1) * 2;
		snap_buf = realloc(snap_buf, snap_cap);
		cr_assert_not_null(snap_buf);
	}
	memcpy(snap_buf + snap_len, line, (size_t)n + 1);
	snap_len += (size_t)n;
	return 0;
}

/* Every entry of @path with its mode, owner, size and times. */
static char *snapshot(const char *path)
{
	snap_buf = NULL;
	snap_len = snap_cap = 0;
	cr_assert_eq(nftw(path, snap_one, 16, FTW_PHYS), 0, "%s", path);
	return snap_buf;
}

static void assert_same_tree(const char *path, const char *before)
{
	char *after = snapshot(path);

	cr_assert_str_eq(after, before, "%s changed:\nbefore:\n%s\nafter:\n%s",
			 path, before, after);
	free(after);
}

/* ---- setup ---------------------------------------------------------- */

static void teardown(void);

static void setup(void)
{
	int rc;

	skip_cleanup = teardown;
	/* in /tmp itself, whatever $TMPDIR: nobody must reach place/ */
	rc = scratch_make("/tmp/memsnap-test-attack", base, sizeof(base));
	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	cr_assert_eq(chmod(base, 0755), 0);
	snprintf(place, sizeof(place), "%s/place", base);
	snprintf(decoy, sizeof(decoy), "%s/decoy", base);
	snprintf(secret, sizeof(secret), "%s/secret", base);
	snprintf(out_dir, sizeof(out_dir), "%s/out", base);
	cr_assert_eq(mkdir(place, 0700), 0);
	cr_assert_eq(chown(place, NOBODY, NOBODY), 0);
	cr_assert_eq(mkdir(out_dir, 0755), 0);
	make_decoy(decoy, 0700);
	write_file(secret, SECRET "\n", 0600);
}

static void teardown(void)
{
	fixture_stop(&fx);
	scratch_cleanup(base);
}

TestSuite(attacker, .init = setup, .fini = teardown, .timeout = 300);

/* The attacker, as nobody in namespaces of its own, with @extra env. */
/*
 * The attacker, with @extra in its environment; its memfd_create fails
 * unless @memfd (these attacks aim at the place memsnap's agent makes,
 * which a dump or stats through a memfd never needs).
 */
static void start_with(const char *tmpdir, char *const extra[], bool memfd)
{
	char path[PATH_MAX], tmp[PATH_MAX + 32], pl[PATH_MAX + 32];
	char dc[PATH_MAX + 32], sc[PATH_MAX + 32];
	char ns[] = "ATTACK_NS=1", no_memfd[] = "FIXTURE_NO_MEMFD=1";
	char *argv[] = { path, NULL };
	char *env[16] = { ns, tmp, pl, dc, sc, no_memfd };
	int rc, n = memfd ? 5 : 6, i;

	snprintf(tmp, sizeof(tmp), "TMPDIR=%s", tmpdir ? tmpdir : place);
	snprintf(pl, sizeof(pl), "ATTACK_PLACE=%s", place);
	snprintf(dc, sizeof(dc), "ATTACK_DECOY=%s", decoy);
	snprintf(sc, sizeof(sc), "ATTACK_SECRET=%s", secret);
	for (i = 0; extra && extra[i] && n < 15; i++)
		env[n++] = extra[i];
	env[n] = NULL;
	fixture_path("attacker", path, sizeof(path));
	if (access(path, X_OK))
		skip_test("fixture %s not built", path);
	rc = fixture_start(&fx, argv, env, 10000);
	if (rc == -EPIPE || rc == -ECONNRESET)
		skip_test("the attacker could not make its namespaces here "
			  "(unprivileged user namespaces off?)");
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
}

static void start(const char *tmpdir, char *const extra[])
{
	start_with(tmpdir, extra, false);
}

/* Success, or one "memsnap: " line and a documented failure code. */
static void assert_ok_or_one_line(const struct run *r, const char *what)
{
	const char *nl = strchr(r->err, '\n');

	if (r->status == 0)
		return;
	cr_assert(r->status >= 1 && r->status <= 10, "%s: exit %d: %s", what,
		  r->status, r->err);
	cr_assert(!strncmp(r->err, "memsnap: ", 9) && nl && !nl[1],
		  "%s: not one line: '%s'", what, r->err);
}

static void assert_no_secret(const struct run *r, const char *what)
{
	cr_assert_null(strstr(r->out, "TOPSECRET"), "%s leaked it: %s", what,
		       r->out);
	cr_assert_null(strstr(r->err, "TOPSECRET"), "%s leaked it: %s", what,
		       r->err);
}

/* The attacker's (fake) jemalloc, not the glibc malloc that serves it. */
static void memsnap(struct run *r, const char *a1, const char *a2,
		    const char *a3, const char *a4)
{
	const char *args[] = { "--pid", pidstr, "--allocator", "jemalloc",
			       a1, a2, a3, a4, NULL };

	cr_assert_eq(run_memsnap(r, args), 0);
}

static bool file_has(const char *path, const char *needle)
{
	static char buf[1 << 16];
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return strstr(buf, needle) != NULL;
}

/*
 * A null device and a /dev/stdout of the test's own (mknod, symlink to
 * /proc/self/fd/1) stand for the system's, so that a broken memsnap
 * replaces only those.
 */
static void make_devices(char *null, char *out, size_t size)
{
	snprintf(null, size, "%s/null", base);
	snprintf(out, size, "%s/stdout", base);
	cr_assert_eq(mknod(null, S_IFCHR | 0666, makedev(1, 3)), 0,
		     "mknod: %s", strerror(errno));
	cr_assert_eq(symlink("/proc/self/fd/1", out), 0);
}

/* ---- 1: the sweep of leftovers ----------------------------------------- */

Test(attacker, sweep_never_empties_a_root_directory)
{
	char *before = snapshot(decoy), out[PATH_MAX + 32];
	char *extra[] = { (char *)"ATTACK=sweep", NULL };
	struct run r;

	start(NULL, extra);
	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	memsnap(&r, "dump", "-o", out, NULL);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_assert(file_has(out, "heap_v2"), "no profile at %s", out);
	run_free(&r);
	memsnap(&r, "stats", "--raw", NULL, NULL);
	assert_ok_or_one_line(&r, "stats --raw");
	run_free(&r);
	assert_same_tree(decoy, before);
	free(before);
	fixture_assert_healthy(&fx);
}

/* ---- 2: the inotify race ------------------------------------------------ */

Test(attacker, race_never_wins_a_root_directory)
{
	const char *env = getenv("MEMSNAP_ATTACK_ROUNDS");
	int rounds = env ? atoi(env) : 200, i, ok = 0;
	char *before = snapshot(decoy), reply[32];
	char *extra[] = { (char *)"ATTACK=race", NULL };
	char null[PATH_MAX + 16], out[PATH_MAX + 16];
	struct run r;

	make_devices(null, out, sizeof(null));
	start(NULL, extra);
	for (i = 0; i < rounds; i++) {
		if (i % 2)
			memsnap(&r, "stats", "--raw", NULL, NULL);
		else
			memsnap(&r, "dump", "-o", null, NULL);
		assert_ok_or_one_line(&r, i % 2 ? "stats" : "dump");
		ok += r.status == 0;
		run_free(&r);
		assert_same_tree(decoy, before);
	}
	cr_assert_eq(fixture_command(&fx, 'm', reply, sizeof(reply), 5000), 0);
	cr_log_info("race: %d rounds, %d succeeded, %s bind mounts made by the attacker",
		    rounds, ok, reply);
	/* The attack really ran: memsnap's directories were covered. */
	cr_assert_gt(atoi(reply), 0, "the attacker never mounted anything");
	cr_assert_gt(ok, 0, "memsnap never worked around the attacker");
	free(before);
	fixture_assert_healthy(&fx);
}

/* ---- 3: reading back a root file ----------------------------------------- */

Test(attacker, read_back_never_reads_a_root_file)
{
	char *extra[] = { (char *)"ATTACK=readback", NULL };
	char out[PATH_MAX + 32];
	struct run r;

	start(NULL, extra);
	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	memsnap(&r, "dump", "-o", out, NULL);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	assert_ok_or_one_line(&r, "dump");
	assert_no_secret(&r, "dump");
	cr_assert(strstr(r.err, "mounted there"), "%s", r.err);
	run_free(&r);
	cr_assert_eq(access(out, F_OK), -1, "an output was written");
	cr_assert_eq(dir_count_entries(out_dir), 0);
	memsnap(&r, "stats", "--raw", NULL, NULL);
	assert_ok_or_one_line(&r, "stats --raw");
	assert_no_secret(&r, "stats --raw");
	run_free(&r);
	fixture_assert_healthy(&fx);
}

/* ---- 4: devices at -o ------------------------------------------------------ */

Test(attacker, devices_at_output_are_written_not_replaced)
{
	char *extra[] = { (char *)"ATTACK=profile", NULL };
	char null[PATH_MAX + 16], out[PATH_MAX + 16];
	struct stat a, b;
	struct run r;

	make_devices(null, out, sizeof(null));
	start(NULL, extra);
	cr_assert_eq(stat(null, &a), 0);
	memsnap(&r, "dump", "-o", null, NULL);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_assert_str_empty(r.out);
	run_free(&r);
	cr_assert_eq(stat(null, &b), 0);
	cr_assert(S_ISCHR(b.st_mode) && a.st_ino == b.st_ino,
		  "the device was replaced");
	/* "-" is standard output, never a file named "-". */
	cr_assert_eq(chdir(out_dir), 0);
	memsnap(&r, "dump", "-o", "-", NULL);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_assert(!strncmp(r.out, "heap_v2/", 8), "stdout: %s", r.out);
	run_free(&r);
	cr_assert_eq(dir_count_entries(out_dir), 0, "a file was made");
	/* A link to /proc/self/fd/1: followed to the pipe, the link stays. */
	memsnap(&r, "dump", "-o", out, NULL);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_assert(!strncmp(r.out, "heap_v2/", 8), "stdout: %s", r.out);
	run_free(&r);
	cr_assert_eq(lstat(out, &a), 0);
	cr_assert(S_ISLNK(a.st_mode), "the link was replaced");
	fixture_assert_healthy(&fx);
}

Test(attacker, report_to_a_device_keeps_the_device)
{
	char dump[PATH_MAX + 32], cmd[PATH_MAX * 3];
	char null[PATH_MAX + 16], out[PATH_MAX + 16];
	struct stat a, b;
	struct run r;

	make_devices(null, out, sizeof(null));
	snprintf(dump, sizeof(dump), "%s/in.heap", out_dir);
	write_file(dump, "heap_v2/524288\n  t*: 1: 64 [0: 0]\n\nMAPPED_LIBRARIES:\n",
		   0644);
	cr_assert_eq(stat(null, &a), 0);
	snprintf(cmd, sizeof(cmd), "'%s' report '%s' -o '%s'",
		 getenv("MEMSNAP_BIN"), dump, null);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	run_free(&r);
	cr_assert_eq(stat(null, &b), 0);
	cr_assert(S_ISCHR(b.st_mode) && a.st_ino == b.st_ino,
		  "the device was replaced");
}

/* ---- 5: $TMPDIR ------------------------------------------------------------- */

static void tmpdir_not_used(const char *tmpdir)
{
	char *extra[] = { (char *)"ATTACK=profile", NULL };
	char *before = snapshot(tmpdir), out[PATH_MAX + 32];
	struct run r;

	start(tmpdir, extra);
	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	memsnap(&r, "dump", "-o", out, NULL);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	run_free(&r);
	memsnap(&r, "stats", "--raw", NULL, NULL);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	run_free(&r);
	assert_same_tree(tmpdir, before);
	free(before);
	fixture_assert_healthy(&fx);
}

Test(attacker, tmpdir_of_another_owner_is_not_used)
{
	char other[PATH_MAX + 32];

	/* Root's, and open to all: the target could write there, but it
	 * is not the target's to hand out. */
	snprintf(other, sizeof(other), "%s/roots-tmp", base);
	make_decoy(other, 01777);
	tmpdir_not_used(other);
}

Test(attacker, tmpdir_writable_by_all_without_sticky_is_not_used)
{
	char wide[PATH_MAX + 32];

	snprintf(wide, sizeof(wide), "%s/wide", base);
	cr_assert_eq(mkdir(wide, 0777), 0);
	cr_assert_eq(chmod(wide, 0777), 0);
	cr_assert_eq(chown(wide, NOBODY, NOBODY), 0);
	age(wide, 3600);
	tmpdir_not_used(wide);
}

/* ---- 6: a sparse terabyte ------------------------------------------------- */

/* A 1 TiB sparse profile, in the agent's file or the target's memfd:
 * refused for its size before a byte is read. */
static void sparse_refused(bool memfd)
{
	char *extra[] = { (char *)"ATTACK=sparse", NULL };
	char out[PATH_MAX + 32];
	struct run r;

	start_with(NULL, extra, memfd);
	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	memsnap(&r, "dump", "-o", out, NULL);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	assert_ok_or_one_line(&r, "dump");
	cr_assert(strstr(r.err, "--max-size"), "%s", r.err);
	run_free(&r);
	cr_assert_eq(dir_count_entries(out_dir), 0, "something was written");
	fixture_assert_healthy(&fx);
}

Test(attacker, sparse_terabyte_is_refused)
{
	sparse_refused(false);
}

Test(attacker, sparse_terabyte_in_a_memfd_is_refused)
{
	sparse_refused(true);
}

Test(attacker, max_size_caps_a_normal_profile)
{
	char *extra[] = { (char *)"ATTACK=profile", NULL };
	char out[PATH_MAX + 32];
	const char *args[] = { "--pid", pidstr, "--max-size", "16", "dump",
			       "-o", out, NULL };
	struct run r;

	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	start(NULL, extra);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	cr_assert(strstr(r.err, "larger than --max-size (16 B)"), "%s", r.err);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

/* ---- 7: rootless containers ------------------------------------------------- */

Test(attacker, rootless_container_with_its_own_tmp)
{
	char *extra[] = { (char *)"ATTACK=profile", (char *)"ATTACK_TMPFS=1",
			  NULL };
	char out[PATH_MAX + 32];
	struct run r;

	start(NULL, extra);
	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	memsnap(&r, "dump", "-o", out, NULL);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_assert(file_has(out, "heap_v2/524288"), "no profile");
	run_free(&r);
	memsnap(&r, "stats", "--raw", NULL, NULL);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_assert(strstr(r.out, "attacker"), "%s", r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

Test(attacker, rootless_container_real_jemalloc)
{
	char prog[PATH_MAX], ex[PATH_MAX + 16], out[PATH_MAX + 32];
	char *extra[] = { (char *)"ATTACK_TMPFS=1", ex,
			  (char *)"MALLOC_CONF=prof:true", NULL };
	struct run r;

	fixture_path("jemalloc-target", prog, sizeof(prog));
	snprintf(ex, sizeof(ex), "ATTACK_EXEC=%s", prog);
	start(NULL, extra);
	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	memsnap(&r, "dump", "-o", out, NULL);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_assert(file_has(out, "heap_v2/"), "no profile");
	run_free(&r);
	memsnap(&r, "stats", NULL, NULL, NULL);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_assert(strstr(r.out, "allocated"), "%s", r.out);
	run_free(&r);
	memsnap(&r, "stats", "--raw", NULL, NULL);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_assert(strstr(r.out, "Allocated"), "%.300s", r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

/* ---- 8: another user's symlink in -o ---------------------------------------- */

Test(attacker, foreign_symlink_in_output_path_is_refused)
{
	char *extra[] = { (char *)"ATTACK=profile", NULL };
	char link[PATH_MAX + 32], out[PATH_MAX + 48], want[PATH_MAX * 3];
	char *before = snapshot(decoy);
	struct run r;

	start(NULL, extra);
	snprintf(link, sizeof(link), "%s/planted", out_dir);
	cr_assert_eq(symlink(decoy, link), 0);
	cr_assert_eq(lchown(link, NOBODY, NOBODY), 0);
	snprintf(out, sizeof(out), "%s/a.heap", link);
	memsnap(&r, "dump", "-o", out, NULL);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	snprintf(want, sizeof(want),
		 "memsnap: dump %s: writing '%s': '%s' is a symlink of another user; memsnap does not follow it\n",
		 pidstr, out, link);
	cr_assert_str_eq(r.err, want);
	run_free(&r);
	assert_same_tree(decoy, before);
	free(before);
	fixture_assert_healthy(&fx);
}

/* ---- 9: the unwinder ------------------------------------------------------ */

/*
 * A library mapped from a path that now names a FIFO, on the stack of a
 * thread that looks as if it were inside malloc(): memsnap unwinds it
 * from the target's memory and opens nothing the maps name (opening the
 * FIFO would wait for ever; `timeout` turns that into exit 124).
 */
Test(attacker, unwinder_opens_no_path_from_the_maps)
{
	char path[PATH_MAX], pl[PATH_MAX + 32], cmd[2 * PATH_MAX];
	char *argv[] = { path, NULL };
	char *env[] = { pl, NULL };
	struct stat st;
	struct run r;
	const char *bin = getenv("MEMSNAP_BIN");

	cr_assert_not_null(bin);
	snprintf(pl, sizeof(pl), "ATTACK_PLACE=%s", place);
	fixture_path("unwind-trap", path, sizeof(path));
	cr_assert_eq(fixture_start(&fx, argv, env, 10000), 0);
	cr_assert_eq(strncmp(fx.ready, "trap ", 5), 0, "%s", fx.ready);
	cr_assert_eq(stat(fx.ready + 5, &st), 0, "%s", fx.ready + 5);
	cr_assert(S_ISFIFO(st.st_mode), "%s is not a FIFO", fx.ready + 5);
	snprintf(cmd, sizeof(cmd), "timeout 60 '%s' --pid %d stats",
		 bin, (int)fx.pid);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_assert_not_null(strstr(r.out, "glibc malloc"), "%s", r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
}
