/*
 * Planted files at every path a dump goes through, on both sides:
 *
 *   target side  what the target leaves at the path it was given (a
 *                symlink, FIFO, socket, directory, a file of another
 *                owner, its directory swapped for a symlink); look-alike
 *                .memsnap-* entries beside memsnap's directory; a
 *                TMPDIR that is a FIFO, a file, a symlink, or missing;
 *                no writable place at all
 *   memsnap side -o (and report -o) naming an existing file, a symlink,
 *                a dangling symlink, a directory, a path through a file
 *
 * In every case: nothing is written through another user's symlink,
 * nothing the target planted is read, a file already at -o is replaced
 * atomically (a new inode), a FIFO at -o is written to, or the run is
 * refused; and the target is untouched.  (test_dump.c has the symlink
 * and FIFO at -o, test_attacker.c a target that attacks from its own
 * namespaces, tests/unit/test_dumpdir.c and test_output.c the functions
 * underneath.)
 */
#include "tests/lib/fault.h"
#include "tests/lib/scratch.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

static struct fixture fx = { .pid = -1 };
static char base[PATH_MAX];
static char tmp_dir[PATH_MAX + 8];	/* the target's TMPDIR */
static char cwd_dir[PATH_MAX + 8];	/* its cwd */
static char out_dir[PATH_MAX + 8];	/* memsnap's output */
static char victim[PATH_MAX + 16];	/* a file no one may touch */
static char victim_dir[PATH_MAX + 16];	/* a directory, with victim_dir/dump.heap */
static char pidstr[16];

#define VICTIM_TEXT "precious\n"

static char *slurp(const char *path)
{
	static char buf[1 << 16];
	FILE *f = fopen(path, "re");
	size_t n;

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void teardown(void);

static void setup(void)
{
	char p[PATH_MAX + 32];
	int rc;

	skip_cleanup = teardown;
	rc = scratch_make("memsnap-test-files", base, sizeof(base));
	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	snprintf(tmp_dir, sizeof(tmp_dir), "%s/tmp", base);
	snprintf(cwd_dir, sizeof(cwd_dir), "%s/cwd", base);
	snprintf(out_dir, sizeof(out_dir), "%s/out", base);
	snprintf(victim, sizeof(victim), "%s/victim", base);
	snprintf(victim_dir, sizeof(victim_dir), "%s/vdir", base);
	cr_assert_eq(mkdir(tmp_dir, 01777), 0);
	cr_assert_eq(mkdir(cwd_dir, 0755), 0);
	cr_assert_eq(mkdir(out_dir, 0755), 0);
	cr_assert_eq(mkdir(victim_dir, 0700), 0);
	write_file(victim, VICTIM_TEXT, 0644);
	snprintf(p, sizeof(p), "%s/dump.heap", victim_dir);
	write_file(p, VICTIM_TEXT, 0644);
}

static void teardown(void)
{
	fixture_stop(&fx);
	scratch_cleanup(base);
}

TestSuite(faults_files, .init = setup, .fini = teardown, .timeout = 120);

static void start(const char *name, char *const extra_env[])
{
	char path[PATH_MAX], tmp[PATH_MAX + 16], cwd[PATH_MAX + 32];
	char conf[] = "MALLOC_CONF=prof:true";
	char vic[PATH_MAX + 48], vdir[PATH_MAX + 48];
	char *argv[] = { path, NULL };
	char *env[16] = { conf, tmp, cwd, vic, vdir };
	int rc, n = 5, i;

	snprintf(tmp, sizeof(tmp), "TMPDIR=%s", tmp_dir);
	snprintf(cwd, sizeof(cwd), "JE_FIXTURE_CWD=%s", cwd_dir);
	snprintf(vic, sizeof(vic), "FAULT_VICTIM=%s", victim);
	snprintf(vdir, sizeof(vdir), "FAULT_VICTIM_DIR=%s", victim_dir);
	for (i = 0; extra_env && extra_env[i] && n < 15; i++)
		env[n++] = extra_env[i];
	env[n] = NULL;
	fixture_path(name, path, sizeof(path));
	if (access(path, X_OK))
		skip_test("fixture %s not built", path);
	rc = fixture_start(&fx, argv, env, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
}

/* The victims are as they were. */
static void assert_victims_intact(void)
{
	char p[PATH_MAX + 32];

	cr_assert_str_eq(slurp(victim), VICTIM_TEXT, "the victim changed");
	snprintf(p, sizeof(p), "%s/dump.heap", victim_dir);
	cr_assert_str_eq(slurp(p), VICTIM_TEXT, "the victim dir changed");
	cr_assert_eq(dir_count_entries(victim_dir), 1,
		     "something was added to or removed from the victim dir");
}

static void dump_to(const char *out, struct run *r)
{
	const char *args[] = { "--pid", pidstr, "dump", "-o", out, NULL };

	cr_assert_eq(run_memsnap(r, args), 0);
}

/* A dump to @out that succeeds quietly with a jemalloc profile. */
static void dump_ok(const char *out)
{
	struct run r;

	dump_to(out, &r);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_assert_str_empty(r.err);
	run_free(&r);
	cr_assert_eq(strncmp(slurp(out), "heap_v2/", 8), 0);
}

/* ---- the target plants things at the path it is given ------------------ */

/*
 * fault-hostile's prof.dump plants @how and claims success.  memsnap
 * refuses with one line (exit @status), reads nothing through it, and
 * cleans up its directory.
 */
static void planted_by_target(const char *how, const char *why)
{
	char env[64], out[PATH_MAX + 32], no_memfd[] = "FIXTURE_NO_MEMFD=1";
	char *extra[] = { env, NULL, NULL };
	struct run r;

	snprintf(env, sizeof(env), "FAULT_PLANT=%s", how);
	/* the file's way, through memsnap's agent */
	extra[1] = no_memfd;
	start("fault-hostile", extra);
	snprintf(out, sizeof(out), "%s/%s.heap", out_dir, how);
	dump_to(out, &r);
	cr_assert_eq(r.status, 1, "%s: exit %d: %s", how, r.status, r.err);
	cr_assert_eq(count_lines(r.err), 1, "%s: %s", how, r.err);
	cr_assert_not_null(strstr(r.err, why), "%s: %s", how, r.err);
	cr_assert_str_empty(r.out);
	run_free(&r);
	cr_assert_eq(access(out, F_OK), -1, "%s: an output was written", how);
	cr_assert_eq(dir_count_entries(out_dir), 0, "%s: a temp file was left",
		     how);
	cr_assert_eq(dir_count_entries(tmp_dir), 0,
		     "%s: memsnap's directory was left", how);
	assert_victims_intact();
	assert_untouched(&fx, how);
}

Test(faults_files, target_plants_a_symlink)
{
	planted_by_target("symlink", "a symlink is there, not the profile");
}

Test(faults_files, target_plants_a_fifo)
{
	planted_by_target("fifo", "not a regular file");
}

Test(faults_files, target_plants_a_directory)
{
	planted_by_target("dir", "not a regular file");
}

Test(faults_files, target_plants_a_socket)
{
	planted_by_target("socket", "dump.heap: ");
}

Test(faults_files, target_plants_a_file_of_another_owner)
{
	planted_by_target("otheruid", "dump.heap: ");
}

/* The control: the same fake, writing a real file, is collected. */
Test(faults_files, target_writes_a_profile)
{
	char env[] = "FAULT_PLANT=profile", out[PATH_MAX + 32];
	char no_memfd[] = "FIXTURE_NO_MEMFD=1";
	char *extra[] = { env, no_memfd, NULL };
	struct run r;

	start("fault-hostile", extra);
	snprintf(out, sizeof(out), "%s/p.heap", out_dir);
	dump_to(out, &r);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	run_free(&r);
	cr_assert_eq(strncmp(slurp(out), "heap_v2/", 8), 0);
	cr_assert_eq(dir_count_entries(tmp_dir), 0);
	assert_untouched(&fx, "after the dump");
}

/*
 * The target moves memsnap's directory away and puts a symlink to
 * another directory (holding a dump.heap) in its place.  memsnap works
 * through its directory fd: it reads the real file or nothing, never
 * the one behind the symlink, and removes nothing there.
 */
Test(faults_files, target_swaps_the_directory_for_a_symlink)
{
	char env[] = "FAULT_PLANT=swapdir", out[PATH_MAX + 32];
	char no_memfd[] = "FIXTURE_NO_MEMFD=1";
	char *extra[] = { env, no_memfd, NULL };
	struct run r;

	start("fault-hostile", extra);
	snprintf(out, sizeof(out), "%s/s.heap", out_dir);
	dump_to(out, &r);
	cr_assert(r.status == 0 || r.status == 1, "exit %d: %s", r.status,
		  r.err);
	cr_assert_leq(count_lines(r.err), 1, "%s", r.err);
	run_free(&r);
	if (!access(out, F_OK))
		cr_assert_eq(strncmp(slurp(out), "heap_v2/", 8), 0,
			     "memsnap collected: %s", slurp(out));
	assert_victims_intact();
	assert_untouched(&fx, "after the dump");
}

/* ---- look-alikes of memsnap's directory beside it ------------------------ */

/* @path's times a few minutes back, without following a symlink. */
static void age(const char *path)
{
	struct timespec ts[2];

	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= 600;
	ts[1] = ts[0];
	cr_assert_eq(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW), 0,
		     "%s: %s", path, strerror(errno));
}

/*
 * Old entries named like memsnap's directories, which the sweep of
 * leftovers looks at: a symlink to a directory, a FIFO, a file, another
 * uid's directory, a directory of the wrong mode, and one of "ours"
 * holding a symlink to the victim.  Only the last is swept (its symlink
 * removed, not followed); nothing blocks; the dump works.
 */
Test(faults_files, lookalike_directories_in_the_targets_tmpdir)
{
	static const char *const names[] = {
		".memsnap-00000000000000a1", ".memsnap-00000000000000a2",
		".memsnap-00000000000000a3", ".memsnap-00000000000000a4",
		".memsnap-00000000000000a5", ".memsnap-00000000000000a6",
	};
	char p[6][PATH_MAX + 64], in[PATH_MAX + 96], theirs[PATH_MAX + 96];
	char out[PATH_MAX + 32], no_memfd[] = "FIXTURE_NO_MEMFD=1";
	char *extra[] = { no_memfd, NULL };
	int i;

	for (i = 0; i < 6; i++)
		snprintf(p[i], sizeof(p[i]), "%s/%s", tmp_dir, names[i]);
	cr_assert_eq(symlink(victim_dir, p[0]), 0);
	cr_assert_eq(mkfifo(p[1], 0600), 0);
	write_file(p[2], "a file\n", 0644);
	cr_assert_eq(mkdir(p[3], 0700), 0);
	snprintf(theirs, sizeof(theirs), "%s/dump.heap", p[3]);
	write_file(theirs, "theirs\n", 0644);
	cr_assert_eq(chown(theirs, 12345, 12345), 0);
	cr_assert_eq(chown(p[3], 12345, 12345), 0);
	cr_assert_eq(mkdir(p[4], 0700), 0);
	snprintf(in, sizeof(in), "%s/dump.heap", p[4]);
	cr_assert_eq(symlink(victim, in), 0);
	cr_assert_eq(mkdir(p[5], 0755), 0);
	for (i = 0; i < 6; i++)
		age(p[i]);

	/* the file's way: the agent sweeps what it finds */
	start("jemalloc-target", extra);
	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	dump_ok(out);
	for (i = 0; i < 6; i++) {
		struct stat st;
		bool there = !lstat(p[i], &st);

		cr_assert_eq(there, i != 4, "%s %s", names[i],
			     there ? "is still there" : "was removed");
	}
	cr_assert_str_eq(slurp(theirs), "theirs\n",
			 "another uid's file changed");
	/* The look-alikes, and nothing of this run. */
	cr_assert_eq(dir_count_entries(tmp_dir), 5);
	assert_victims_intact();
	assert_untouched(&fx, "after the dump");
}

/* ---- the target's TMPDIR itself, and no writable place ------------------- */

/*
 * jemalloc-target in a mount namespace of its own, with a private tmpfs
 * at /tmp holding /tmp/fifo, /tmp/file, /tmp/real and /tmp/link (a
 * symlink to /tmp/real), its cwd /tmp.  @ro: /tmp, /var/tmp and
 * /dev/shm all read-only.  @no_memfd: memfd_create refused
 * (tests/fixtures/no_memfd.h), so that a dump takes the file's way.
 * Skips where namespaces are not allowed.
 */
static void start_in_namespace(const char *tmpdir, bool ro, bool no_memfd)
{
	char path[PATH_MAX], script[2048], env_tmp[PATH_MAX + 16];
	char conf[] = "MALLOC_CONF=prof:true";
	char *argv[] = { (char *)"/usr/bin/unshare", (char *)"--mount",
			 (char *)"--propagation", (char *)"private",
			 (char *)"/bin/sh", (char *)"-c", script, path, NULL };
	char nomemfd[] = "FIXTURE_NO_MEMFD=1";
	char *env[] = { conf, env_tmp, no_memfd ? nomemfd : NULL, NULL };
	int rc;

	if (geteuid() != 0 || access("/usr/bin/unshare", X_OK))
		skip_test("needs root and unshare(1) for a private /tmp");
	fixture_path("jemalloc-target", path, sizeof(path));
	snprintf(env_tmp, sizeof(env_tmp), "TMPDIR=%s", tmpdir ? tmpdir : "");
	/* The fixture is opened first (fd 9) and run through /proc: the new
	 * /tmp hides its path when the tree itself is under /tmp. */
	snprintf(script, sizeof(script),
		 "exec 9<\"$0\" && "
		 "mount -t tmpfs -o mode=1777,size=8m tmpfs /tmp && "
		 "mkfifo /tmp/fifo && echo file > /tmp/file && "
		 "mkdir /tmp/real && ln -s /tmp/real /tmp/link && %s"
		 "cd /tmp && exec /proc/self/fd/9",
		 ro ? "mount -o remount,ro /tmp && "
		      "mount -t tmpfs -o ro tmpfs /var/tmp && "
		      "mount -t tmpfs -o ro tmpfs /dev/shm && "
		    : "");
	rc = fixture_start(&fx, argv, env, 10000);
	if (rc == -EPIPE || rc == -ETIMEDOUT)
		skip_test("could not start the fixture in a mount namespace "
			     "(%s)", strerror(-rc));
	cr_assert_eq(rc, 0, "%s", strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
}

/*
 * An empty, read-only /proc in the target's mount namespace: it cannot
 * name its own descriptors (/proc/thread-self/fd/N), so a dump takes
 * the file's way, through memsnap's agent and a writable place.
 */
static void hide_proc(void)
{
	char cmd[128];
	struct run r;

	if (access("/usr/bin/nsenter", X_OK))
		skip_test("needs nsenter(1)");
	snprintf(cmd, sizeof(cmd), "/usr/bin/nsenter -t %d -m mount -t tmpfs "
		 "-o ro tmpfs /proc", (int)fx.pid);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s: %s", cmd, r.err);
	run_free(&r);
	snprintf(cmd, sizeof(cmd), "/proc/%d/root/proc/self", (int)fx.pid);
	cr_assert_eq(access(cmd, F_OK), -1, "the target's /proc is there");
}

/* Descriptors of the target whose link names @what. */
static int target_fds_with(const char *what)
{
	char dir[64], link[PATH_MAX], to[256];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)fx.pid);
	d = opendir(dir);
	cr_assert_not_null(d, "%s: %s", dir, strerror(errno));
	while ((e = readdir(d))) {
		ssize_t len;

		snprintf(link, sizeof(link), "%s/%s", dir, e->d_name);
		len = readlink(link, to, sizeof(to) - 1);
		if (len < 0)
			continue;
		to[len] = '\0';
		n += strstr(to, what) != NULL;
	}
	closedir(d);
	return n;
}

/* The target holds no memfd of memsnap's after the session. */
static void assert_no_memfd_left(void)
{
	cr_assert_eq(target_fds_with("memfd:memsnap"), 0,
		     "a memfd of memsnap's was left open in the target");
}

/* The entries of the target's /tmp, as it sees it. */
static size_t target_tmp_entries(void)
{
	char p[64];

	snprintf(p, sizeof(p), "/proc/%d/root/tmp", (int)fx.pid);
	return dir_count_entries(p);
}

static void odd_tmpdir(const char *tmpdir)
{
	char out[PATH_MAX + 32], p[96];
	struct run r;

	/* the file's way: not by hiding /proc, which jemalloc 5.1's dump
	 * needs for its maps (it stops after the header without them) */
	start_in_namespace(tmpdir, false, true);
	cr_assert_eq(target_tmp_entries(), 4);
	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	dump_to(out, &r);
	cr_assert_eq(r.status, 0, "TMPDIR=%s: exit %d: %s", tmpdir, r.status,
		     r.err);
	cr_assert_str_empty(r.err);
	run_free(&r);
	cr_assert_eq(strncmp(slurp(out), "heap_v2/", 8), 0);
	/* Its /tmp as it was: memsnap's directory made there and removed. */
	cr_assert_eq(target_tmp_entries(), 4, "TMPDIR=%s: /tmp changed",
		     tmpdir);
	snprintf(p, sizeof(p), "/proc/%d/root/tmp/real", (int)fx.pid);
	cr_assert_eq(dir_count_entries(p), 0, "written through the symlink");
	snprintf(p, sizeof(p), "/proc/%d/root/tmp/file", (int)fx.pid);
	cr_assert_str_eq(slurp(p), "file\n");
	assert_untouched(&fx, tmpdir);
}

Test(faults_files, tmpdir_is_a_fifo)
{
	odd_tmpdir("/tmp/fifo");
}

Test(faults_files, tmpdir_is_a_file)
{
	odd_tmpdir("/tmp/file");
}

Test(faults_files, tmpdir_is_a_symlink)
{
	odd_tmpdir("/tmp/link");
}

Test(faults_files, tmpdir_is_missing)
{
	odd_tmpdir("/tmp/nowhere");
}

/*
 * No writable place and no /proc to name a memfd by: the dump is
 * refused, saying where it looked.
 */
Test(faults_files, no_writable_place)
{
	char out[PATH_MAX + 32], want[128];
	struct run r;

	start_in_namespace(NULL, true, false);
	hide_proc();
	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	dump_to(out, &r);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	snprintf(want, sizeof(want), "memsnap: dump %s: no place the target "
		 "can write to: ", pidstr);
	cr_assert_eq(strncmp(r.err, want, strlen(want)), 0, "%s", r.err);
	cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
	cr_assert_not_null(strstr(r.err, "Read-only file system"), "%s", r.err);
	run_free(&r);
	cr_assert_eq(access(out, F_OK), -1);
	cr_assert_eq(target_tmp_entries(), 4);
	assert_untouched(&fx, "after the refused dump");
}

/*
 * No writable place, but the target's /proc: jemalloc's prof.dump
 * writes a memfd of its own by the name /proc/thread-self/fd/N, and
 * nothing is made in its view.
 */
Test(faults_files, no_writable_place_dump_goes_to_a_memfd)
{
	char out[PATH_MAX + 32];

	start_in_namespace(NULL, true, false);
	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	dump_ok(out);
	cr_assert_not_null(strstr(slurp(out), "\n@ 0x"), "no stack in: %s",
			   slurp(out));
	cr_assert_eq(target_tmp_entries(), 4);
	assert_no_memfd_left();
	assert_untouched(&fx, "after a dump through a memfd");
}

/* What the allocator prints needs no place: it goes to a memfd. */
Test(faults_files, no_writable_place_stats_still_work)
{
	const char *args[] = { "--pid", pidstr, "stats", "--raw", NULL };
	struct run r;

	start_in_namespace(NULL, true, false);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_assert_str_empty(r.err);
	cr_assert_not_null(strstr(r.out, "Begin jemalloc statistics"), "%s",
			   r.out);
	run_free(&r);
	cr_assert_eq(target_tmp_entries(), 4);
	assert_untouched(&fx, "after stats");
}

/* ---- the target's memfd, by a name in its view ------------------------- */

/*
 * fault-hostile's prof.dump, given /proc/thread-self/fd/N, plants @how:
 * memsnap refuses with one line (exit 1), writes nothing at -o, and
 * leaves the target no memfd of its own.  *@nulls: the target's
 * descriptors for /dev/null before the dump.
 */
static void memfd_by_target(const char *how, int *nulls)
{
	char env[64], out[PATH_MAX + 32];
	char *extra[] = { env, NULL };
	struct run r;

	snprintf(env, sizeof(env), "FAULT_PLANT=%s", how);
	start("fault-hostile", extra);
	*nulls = target_fds_with("/dev/null");
	snprintf(out, sizeof(out), "%s/%s.heap", out_dir, how);
	dump_to(out, &r);
	cr_assert_eq(r.status, 1, "%s: exit %d: %s", how, r.status, r.err);
	cr_assert_eq(count_lines(r.err), 1, "%s: %s", how, r.err);
	cr_assert_not_null(strstr(r.err, "its memfd is empty"), "%s: %s", how,
			   r.err);
	run_free(&r);
	cr_assert_eq(access(out, F_OK), -1, "%s: an output was written", how);
	cr_assert_eq(dir_count_entries(out_dir), 0, "%s: a temp file was left",
		     how);
	assert_no_memfd_left();
}

Test(faults_files, memfd_left_empty_is_refused)
{
	int nulls;

	memfd_by_target("nothing", &nulls);
	cr_assert_eq(target_fds_with("/dev/null"), nulls);
	assert_untouched(&fx, "after the refused dump");
}

/* The file the target put at the memfd's number is its own: memsnap
 * reads its own descriptor for the memfd, and closes nothing there. */
Test(faults_files, memfd_swapped_for_another_file_is_refused_and_left)
{
	int nulls;

	memfd_by_target("swapfd", &nulls);
	cr_assert_eq(target_fds_with("/dev/null"), nulls + 1,
		     "the target's own /dev/null at the memfd's number was "
		     "closed");
	assert_untouched(&fx, "after the refused dump");
}

/* ---- memsnap's side: what is at -o ---------------------------------------- */

static ino_t inode_of(const char *path)
{
	struct stat st;

	cr_assert_eq(lstat(path, &st), 0, "%s: %s", path, strerror(errno));
	return st.st_ino;
}

/*
 * A file at -o, with a second hard link: replaced by rename (a new
 * inode), so the other link keeps the old content; never rewritten in
 * place.
 */
Test(faults_files, output_replaces_an_existing_file_atomically)
{
	char out[PATH_MAX + 32], other[PATH_MAX + 32];
	ino_t before;
	struct run r;

	start("jemalloc-target", NULL);
	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	snprintf(other, sizeof(other), "%s/other-link", base);
	write_file(out, "old\n", 0644);
	cr_assert_eq(link(out, other), 0);
	before = inode_of(out);
	dump_to(out, &r);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	run_free(&r);
	cr_assert_neq(inode_of(out), before, "rewritten in place");
	cr_assert_eq(strncmp(slurp(out), "heap_v2/", 8), 0);
	cr_assert_str_eq(slurp(other), "old\n");
	cr_assert_eq(dir_count_entries(out_dir), 1, "a temp file was left");
	assert_untouched(&fx, "after the dump");
}

/* A dangling symlink at -o: replaced; its target never created. */
Test(faults_files, output_is_a_dangling_symlink)
{
	char out[PATH_MAX + 32], target[PATH_MAX + 32];
	struct run r;

	start("jemalloc-target", NULL);
	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	snprintf(target, sizeof(target), "%s/created-through-link", base);
	cr_assert_eq(symlink(target, out), 0);
	/* Another user's: refused. */
	cr_assert_eq(lchown(out, 65534, 65534), 0);
	dump_to(out, &r);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	cr_assert(strstr(r.err, "is a symlink of another user"), "%s", r.err);
	run_free(&r);
	cr_assert_eq(access(target, F_OK), -1, "written through the symlink");
	/* The user's own: followed, as the user asked. */
	cr_assert_eq(lchown(out, 0, 0), 0);
	dump_to(out, &r);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	run_free(&r);
	cr_assert_eq(access(target, F_OK), 0, "the own link not followed");
	assert_untouched(&fx, "after the dump");
}

/* Another user's symlink to a directory at -o: refused, the dir untouched. */
Test(faults_files, output_is_a_symlink_to_a_directory)
{
	char out[PATH_MAX + 32];
	struct stat st;
	struct run r;

	start("jemalloc-target", NULL);
	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	cr_assert_eq(symlink(victim_dir, out), 0);
	cr_assert_eq(lchown(out, 65534, 65534), 0);
	dump_to(out, &r);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	run_free(&r);
	cr_assert_eq(lstat(out, &st), 0);
	cr_assert(S_ISLNK(st.st_mode), "the link was removed");
	assert_victims_intact();
	assert_untouched(&fx, "after the dump");
}

/* -o naming a directory (or through a file): refused in one line. */
static void output_refused(const char *out, const char *why)
{
	char want[PATH_MAX * 2];
	struct run r;

	dump_to(out, &r);
	cr_assert_eq(r.status, 1, "-o %s: exit %d: %s", out, r.status, r.err);
	snprintf(want, sizeof(want), "memsnap: dump %s: writing '%s': %s\n",
		 pidstr, out, why);
	cr_assert_str_eq(r.err, want);
	cr_assert_str_empty(r.out);
	run_free(&r);
	cr_assert_eq(dir_count_entries(tmp_dir), 0);
}

Test(faults_files, output_is_a_directory)
{
	char out[PATH_MAX + 32], file[PATH_MAX + 40];

	start("jemalloc-target", NULL);
	snprintf(out, sizeof(out), "%s/d", out_dir);
	cr_assert_eq(mkdir(out, 0755), 0);
	output_refused(out, "Is a directory");
	snprintf(out, sizeof(out), "%s/d/", out_dir);
	output_refused(out, "Is a directory");
	snprintf(file, sizeof(file), "%s/d", out_dir);
	cr_assert_eq(dir_count_entries(file), 0, "written into the directory");
	/* A path through a regular file. */
	snprintf(file, sizeof(file), "%s/f", out_dir);
	write_file(file, "f\n", 0644);
	snprintf(out, sizeof(out), "%s/f/a.heap", out_dir);
	output_refused(out, "Not a directory");
	cr_assert_str_eq(slurp(file), "f\n");
	cr_assert_eq(dir_count_entries(out_dir), 2, "a temp file was left");
	assert_untouched(&fx, "after the refused dumps");
}

/* ---- report -o: the same rules -------------------------------------------- */

static void report_to(const char *out, struct run *r)
{
	char dump[PATH_MAX];
	const char *td = getenv("MEMSNAP_TESTDATA");
	const char *args[] = { "report", "-q", dump, "-o", out, NULL };

	snprintf(dump, sizeof(dump), "%s/profiles/chain-3.heap",
		 td ? td : "tests/data");
	cr_assert_eq(run_memsnap(r, args), 0);
}

Test(faults_files, report_output_planted)
{
	char out[PATH_MAX + 32], other[PATH_MAX + 32], target[PATH_MAX + 32];
	char buf[4096];
	struct stat st;
	int rd;
	ino_t before;
	struct run r;

	snprintf(out, sizeof(out), "%s/r.txt", out_dir);
	/* An existing file with a second link: replaced, not rewritten. */
	snprintf(other, sizeof(other), "%s/other-link", base);
	write_file(out, "old\n", 0644);
	cr_assert_eq(link(out, other), 0);
	before = inode_of(out);
	report_to(out, &r);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	run_free(&r);
	cr_assert_neq(inode_of(out), before, "rewritten in place");
	cr_assert_str_eq(slurp(other), "old\n");
	/* Another user's symlink: refused, never followed. */
	unlink(out);
	cr_assert_eq(symlink(victim, out), 0);
	cr_assert_eq(lchown(out, 65534, 65534), 0);
	report_to(out, &r);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	cr_assert(strstr(r.err, "is a symlink of another user"), "%s", r.err);
	run_free(&r);
	cr_assert_eq(lstat(out, &st), 0);
	cr_assert(S_ISLNK(st.st_mode), "the link was replaced");
	/* Another user's dangling symlink: its target never created. */
	unlink(out);
	snprintf(target, sizeof(target), "%s/created-through-link", base);
	cr_assert_eq(symlink(target, out), 0);
	cr_assert_eq(lchown(out, 65534, 65534), 0);
	report_to(out, &r);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	run_free(&r);
	cr_assert_eq(access(target, F_OK), -1, "written through the symlink");
	/* A FIFO with a reader: written to, still a FIFO. */
	unlink(out);
	cr_assert_eq(mkfifo(out, 0600), 0);
	rd = open(out, O_RDONLY | O_NONBLOCK);
	cr_assert_geq(rd, 0);
	report_to(out, &r);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	run_free(&r);
	cr_assert_gt(read(rd, buf, sizeof(buf)), 0, "nothing came through");
	close(rd);
	cr_assert_eq(lstat(out, &st), 0);
	cr_assert(S_ISFIFO(st.st_mode), "the FIFO was replaced");
	cr_assert_eq(dir_count_entries(out_dir), 1, "a temp file was left");
	assert_victims_intact();
}

Test(faults_files, report_output_is_a_directory)
{
	char out[PATH_MAX + 32], want[PATH_MAX + 64];
	struct run r;

	snprintf(out, sizeof(out), "%s/d", out_dir);
	cr_assert_eq(mkdir(out, 0755), 0);
	report_to(out, &r);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	snprintf(want, sizeof(want), "memsnap: '%s': Is a directory\n", out);
	cr_assert_str_eq(r.err, want);
	run_free(&r);
	cr_assert_eq(dir_count_entries(out), 0);
	cr_assert_eq(dir_count_entries(out_dir), 1, "a temp file was left");
}

/* ---- memsnap killed just before it puts its output in place -------------- */

/* The syscall that makes the output appear: linkat (a new name, from
 * O_TMPFILE) or a rename (replacing a file). */
static bool at_commit(const struct sc_entry *e)
{
	switch (e->nr) {
#ifdef SYS_link
	case SYS_link:
#endif
#ifdef SYS_rename
	case SYS_rename:
#endif
#ifdef SYS_renameat
	case SYS_renameat:
#endif
	case SYS_linkat:
	case SYS_renameat2:
		return true;
	default:
		return false;
	}
}

static bool kill_it(pid_t m)
{
	(void)m;
	return true;
}

/*
 * Killed with its output complete but not yet linked in, memsnap leaves
 * nothing beside -o: the data was in an O_TMPFILE, gone with memsnap.
 */
Test(faults_files, killed_before_commit_leaves_nothing)
{
	char out[PATH_MAX + 32], dump[PATH_MAX], rep[PATH_MAX + 8];
	const char *td = getenv("MEMSNAP_TESTDATA");
	const char *dump_args[] = { "--pid", pidstr, "dump", "-o", out, NULL };
	const char *report_args[] = { "report", "-q", dump, "-o", out, NULL };
	struct run r;

	start("jemalloc-target", NULL);
	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	cr_assert(run_traced(dump_args, at_commit, kill_it, &r),
		  "memsnap dump never committed: exit %d: %s", r.status, r.err);
	run_free(&r);
	cr_expect_eq(dir_count_entries(out_dir), 0,
		     "dump left something beside -o");
	assert_untouched(&fx, "after memsnap was killed");

	snprintf(dump, sizeof(dump), "%s/profiles/chain-3.heap",
		 td ? td : "tests/data");
	snprintf(rep, sizeof(rep), "%s/rep", base);
	cr_assert_eq(mkdir(rep, 0755), 0);
	snprintf(out, sizeof(out), "%s/b.txt", rep);
	cr_assert(run_traced(report_args, at_commit, kill_it, &r),
		  "memsnap report never committed: exit %d: %s", r.status,
		  r.err);
	run_free(&r);
	cr_expect_eq(dir_count_entries(rep), 0,
		     "report left something beside -o");
}
