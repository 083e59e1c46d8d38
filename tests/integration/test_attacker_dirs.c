/*
 * Root never acts on a reused pid, nor through a directory the target's
 * user controls (docs/SECURITY.md, "Audit: every file memsnap opens"):
 * memsnap run as root, the target and its user (65534) hostile.
 *
 *   - watch: the target exits and a process of root's takes its pid
 *     (clone3 with set_tid) between two ticks; the watch ends with
 *     "target exited" and never looks at the new process: no stub page
 *     in it, no sampler, nothing stopped, and no `prof off` sent to it;
 *   - watch -o DIR: an existing DIR of the user's, with a FIFO planted
 *     where the first dump goes, is refused at once (no tick, no dump,
 *     the FIFO never opened); in a DIR of root's own the FIFO is not
 *     opened either, and the watch goes on;
 *   - report DIR: a DIR of the user's, with links planted as its dumps
 *     (to a root-only profile and to a device) and a FIFO, is refused;
 *     in a DIR of root's own the same entries are left out, none of
 *     them opened;
 *   - memsnap-capture: a DIR of the user's with summary.txt a link to a
 *     root-only file: the file is not truncated nor written.
 *
 * Each runs with the plain and the static binary.  What memsnap opened
 * is seen with inotify (IN_OPEN) on the files it must not open.
 */
#include "tests/lib/fault.h"
#include "tests/lib/scratch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOBODY 65534
/* How long a refused or short command may take before it counts as
 * hung (it takes well under a second). */
#define HUNG_MS 60000

static struct fixture fx = { .pid = -1 };
static struct fixture impostor = { .pid = -1 };
static char base[PATH_MAX];	/* 0755, in /tmp: nobody reaches it */
static char secret[PATH_MAX + 32];	/* root's, 0600, in a 0700 dir */
static char device[PATH_MAX + 32];	/* a character device, 0600 */
static char pidstr[16];

static void teardown(void);

static void setup(void)
{
	char dir[PATH_MAX + 16];
	int fd, rc;

	skip_cleanup = teardown;
	if (geteuid())
		skip_test("needs root (a user's files, mknod, clone3 set_tid)");
	rc = scratch_make("/tmp/memsnap-test-dirs", base, sizeof(base));
	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	cr_assert_eq(chmod(base, 0755), 0);
	snprintf(dir, sizeof(dir), "%s/root", base);
	cr_assert_eq(mkdir(dir, 0700), 0);
	snprintf(secret, sizeof(secret), "%s/secret.heap", dir);
	fd = open(secret, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "heap_v2/524288\n", 15), 15);
	cr_assert_eq(close(fd), 0);
	snprintf(device, sizeof(device), "%s/null", dir);
	if (mknod(device, S_IFCHR | 0600, makedev(1, 3)))
		skip_test("mknod: %s", strerror(errno));
}

static void teardown(void)
{
	fixture_stop(&fx);
	fixture_stop(&impostor);
	scratch_cleanup(base);
}

TestSuite(attacker_dirs, .init = setup, .fini = teardown, .timeout = 240);

/* The static binary as $MEMSNAP_BIN for this test, or skip. */
static void use_static(void)
{
	const char *p = getenv("MEMSNAP_STATIC");

	if (!p || access(p, X_OK))
		skip_test("no static binary at %s (a sanitized build has "
			  "none: its runtimes cannot be linked statically)",
			  p ? p : "(unset)");
	cr_assert_eq(setenv("MEMSNAP_BIN", p, 1), 0);
}

/* ---- what was opened ---------------------------------------------------- */

/* IN_OPEN on each of @paths (NULL-ended) from now on. */
static int watch_opens(const char *const paths[])
{
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	size_t i;

	cr_assert_geq(fd, 0, "inotify_init1: %s", strerror(errno));
	for (i = 0; paths[i]; i++)
		cr_assert_geq(inotify_add_watch(fd, paths[i], IN_OPEN |
							      IN_DONT_FOLLOW),
			      0, "%s: %s", paths[i], strerror(errno));
	return fd;
}

/* None of them was opened since watch_opens(). */
static void assert_not_opened(int fd, const char *what)
{
	char buf[4096] __attribute__((aligned(8)));
	ssize_t n = read(fd, buf, sizeof(buf));

	cr_assert(n < 0 && errno == EAGAIN, "%s: a file memsnap must not "
		  "open was opened", what);
	close(fd);
}

/* ---- the target --------------------------------------------------------- */

/* @name (a fixture) as nobody, through setpriv (same pid). */
static void start_as_nobody(const char *name, char *const env[])
{
	static char setpriv[] = "/usr/bin/setpriv", uid[] = "--reuid=65534",
		    gid[] = "--regid=65534", groups[] = "--clear-groups";
	char path[PATH_MAX];
	char *argv[] = { setpriv, uid, gid, groups, path, NULL };
	int rc;

	if (access(argv[0], X_OK))
		skip_test("no %s (util-linux)", argv[0]);
	fixture_path(name, path, sizeof(path));
	rc = fixture_start(&fx, argv, env, 60000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
}

/* A directory of nobody's, 0755, at @path. */
static void users_dir(const char *path)
{
	cr_assert_eq(mkdir(path, 0755), 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(chown(path, NOBODY, NOBODY), 0);
}

/* An entry of nobody's: a symlink @name in @dir to @to. */
static void plant_link(const char *dir, const char *name, const char *to)
{
	char p[PATH_MAX + 64];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	unlink(p);
	cr_assert_eq(symlink(to, p), 0, "%s: %s", p, strerror(errno));
	cr_assert_eq(lchown(p, NOBODY, NOBODY), 0);
}

/* A FIFO of nobody's at @dir/@name; its path into @out. */
static void plant_fifo(const char *dir, const char *name, char *out,
		       size_t size)
{
	snprintf(out, size, "%s/%s", dir, name);
	unlink(out);
	cr_assert_eq(mkfifo(out, 0666), 0, "%s: %s", out, strerror(errno));
	cr_assert_eq(lchown(out, NOBODY, NOBODY), 0);
}

/* memsnap @args in the background; its status within HUNG_MS, or the
 * test fails (it is killed): a command blocked in an open() hangs. */
static int run_bounded(const char *const args[], struct run *r)
{
	long deadline = fault_now_ms() + HUNG_MS;
	struct bg b;
	int st;

	bg_start(&b, args);
	while (waitpid(b.pid, &st, WNOHANG) == 0) {
		if (fault_now_ms() > deadline) {
			kill(b.pid, SIGKILL);
			waitpid(b.pid, &st, 0);
			r->err = bg_slurp(b.err);
			cr_assert_fail("memsnap %s hung: %s", args[0], r->err);
		}
		fault_sleep_ms(20);
	}
	r->out = bg_slurp(b.out);
	r->err = bg_slurp(b.err);
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return r->status;
}

/* A watch of root's own, made by memsnap, with 4 dumps of the jemalloc
 * fixture at @dir. */
static void real_watch(const char *dir)
{
	const char *args[] = { "--pid", pidstr, "watch", "-o", dir,
			       "--interval", "0.1s", "--count", "4",
			       "--dump-every", "1", NULL };
	char reply[64];
	struct run r;

	cr_assert_eq(fixture_command(&fx, 'g', reply, sizeof(reply), 10000),
		     0);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "watch: exit %d: %s", r.status, r.err);
	run_free(&r);
}

/* ---- watch and a reused pid --------------------------------------------- */

static void watch_and_reused_pid(void)
{
	char dir[PATH_MAX + 16], path[PATH_MAX], reply[64];
	char *argv[] = { path, NULL };
	const char *args[] = { "--pid", pidstr, "watch", "-o", dir,
			       "--interval", "0.3s", "--count", "30",
			       "--sampler", "--sample-bytes", "64K", NULL };
	long deadline;
	struct bg b;
	struct run r;
	pid_t pid;
	int st, rc, before;

	start_as_nobody("watch-target-glibc", NULL);
	cr_assert_eq(fixture_command(&fx, 'g', reply, sizeof(reply), 10000),
		     0);
	snprintf(dir, sizeof(dir), "%s/w", base);
	bg_start(&b, args);
	deadline = fault_now_ms() + HUNG_MS;
	while (series_ticks(dir) < 2 && fault_now_ms() < deadline)
		fault_sleep_ms(10);
	cr_assert_geq(series_ticks(dir), 2, "the watch never ticked");
	/* right after a tick: the target goes, root's process takes its
	 * pid before the next one */
	pid = fx.pid;
	before = series_ticks(dir);
	fixture_stop(&fx);
	fixture_path("agent-pin-target", path, sizeof(path));
	rc = fixture_start_at_pid(&impostor, argv, NULL, 10000, pid);
	if (rc) {
		kill(b.pid, SIGKILL);
		waitpid(b.pid, NULL, 0);
		skip_test("clone3 with set_tid: %s (needs root and Linux 5.5)",
			  strerror(-rc));
	}
	cr_assert_eq(impostor.pid, pid);
	/* the watch ends by itself, saying why */
	while (waitpid(b.pid, &st, WNOHANG) == 0) {
		if (fault_now_ms() > deadline) {
			kill(b.pid, SIGKILL);
			waitpid(b.pid, &st, 0);
			cr_assert_fail("the watch went on with the new process");
		}
		fault_sleep_ms(20);
	}
	r.out = bg_slurp(b.out);
	r.err = bg_slurp(b.err);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "watch: %s%s",
		  r.out, r.err);
	cr_expect(strstr(r.out, "target exited"), "%s%s", r.out, r.err);
	/* nothing of the new process in the series, nothing done to it */
	cr_expect_leq(series_ticks(dir), before + 1, "ticks of the new process");
	cr_expect_eq(stub_pages(impostor.pid), 0,
		     "memsnap called into the process that took the pid");
	assert_untouched(&impostor, "the process that took the pid");
	run_free(&r);
}

Test(attacker_dirs, watch_never_follows_a_reused_pid)
{
	watch_and_reused_pid();
}

Test(attacker_dirs, watch_never_follows_a_reused_pid_static)
{
	use_static();
	watch_and_reused_pid();
}

/* ---- watch -o DIR -------------------------------------------------------- */

static void watch_and_planted_fifo(void)
{
	char dir[PATH_MAX + 16], fifo[PATH_MAX + 64], ours[PATH_MAX + 16];
	const char *paths[] = { NULL, NULL };
	const char *args[] = { "--pid", pidstr, "watch", "-o", dir,
			       "--interval", "0.1s", "--count", "2",
			       "--dump-every", "1", NULL };
	static char conf[] = "MALLOC_CONF=prof:true,lg_prof_sample:14";
	char *env[] = { conf, NULL };
	struct run r;
	int in;

	start_as_nobody("watch-target-jemalloc", env);
	/* the user's DIR, a FIFO where the first dump goes */
	snprintf(dir, sizeof(dir), "%s/users", base);
	users_dir(dir);
	plant_fifo(dir, "dump-0001.heap", fifo, sizeof(fifo));
	paths[0] = fifo;
	in = watch_opens(paths);
	run_bounded(args, &r);
	cr_expect_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	cr_expect(strstr(r.err, "belongs to uid 65534"), "%s", r.err);
	cr_expect_eq(count_lines(r.err), 1, "%s", r.err);
	run_free(&r);
	assert_not_opened(in, "watch into the user's directory");
	cr_expect_eq(series_ticks(dir), 0);
	cr_expect_eq(stub_pages(fx.pid), 0, "the refused watch attached");

	/* root's own DIR with the same FIFO: not opened, the watch goes on
	 * and its next dump is written */
	snprintf(ours, sizeof(ours), "%s/ours", base);
	cr_assert_eq(mkdir(ours, 0700), 0);
	plant_fifo(ours, "dump-0001.heap", fifo, sizeof(fifo));
	args[4] = ours;
	in = watch_opens(paths);
	run_bounded(args, &r);
	cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_expect(strstr(r.err, "something is there already"), "%s", r.err);
	run_free(&r);
	assert_not_opened(in, "watch into a directory with a FIFO");
	cr_expect_eq(series_ticks(ours), 2);
	snprintf(fifo, sizeof(fifo), "%s/dump-0002.heap", ours);
	cr_expect_eq(access(fifo, R_OK), 0, "no second dump");
	assert_untouched(&fx, "the target after both watches");
}

Test(attacker_dirs, watch_refuses_a_directory_of_another_user)
{
	watch_and_planted_fifo();
}

Test(attacker_dirs, watch_refuses_a_directory_of_another_user_static)
{
	use_static();
	watch_and_planted_fifo();
}

/* ---- report DIR ---------------------------------------------------------- */

/* Dumps 1 to 3 of @dir replaced: links to the secret and the device, a
 * FIFO; the FIFO's path into @fifo. */
static void plant_dumps(const char *dir, char *fifo, size_t size)
{
	plant_link(dir, "dump-0001.heap", secret);
	plant_link(dir, "dump-0002.heap", device);
	plant_fifo(dir, "dump-0003.heap", fifo, size);
}

static void report_and_planted_links(void)
{
	char dir[PATH_MAX + 16], users[PATH_MAX + 16], fifo[PATH_MAX + 64];
	char cmd[6 * PATH_MAX];
	const char *paths[] = { secret, device, NULL, NULL };
	const char *args[] = { "report", dir, NULL };
	static char conf[] = "MALLOC_CONF=prof:true,lg_prof_sample:14";
	char *env[] = { conf, NULL };
	struct run r;
	int in;

	start_as_nobody("watch-target-jemalloc", env);
	snprintf(dir, sizeof(dir), "%s/ours", base);
	real_watch(dir);
	/* a copy given to the user, who plants links and a FIFO in it */
	snprintf(users, sizeof(users), "%s/users", base);
	snprintf(cmd, sizeof(cmd), "cp -a '%s' '%s' && chown -R %d:%d '%s' && "
		 "chmod 0755 '%s'", dir, users, NOBODY, NOBODY, users, users);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	plant_dumps(users, fifo, sizeof(fifo));
	paths[2] = fifo;
	in = watch_opens(paths);
	args[1] = users;
	run_bounded(args, &r);
	cr_expect_eq(r.status, 10, "exit %d: %s", r.status, r.err);
	cr_expect(strstr(r.err, "belongs to uid 65534"), "%s", r.err);
	cr_expect_str_empty(r.out, "a report of the user's directory: %s",
			    r.out);
	run_free(&r);
	assert_not_opened(in, "report of the user's directory");

	/* root's own DIR with the same entries: each left out, never
	 * opened; the fourth dump read */
	plant_dumps(dir, fifo, sizeof(fifo));
	paths[2] = fifo;
	in = watch_opens(paths);
	args[1] = dir;
	run_bounded(args, &r);
	cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_expect(strstr(r.err, "dump-0001.heap': a symlink, not a dump; left "
			 "out"), "%s", r.err);
	cr_expect(strstr(r.err, "dump-0002.heap': a symlink, not a dump; left "
			 "out"), "%s", r.err);
	cr_expect(strstr(r.err, "dump-0003.heap': not a regular file; left "
			 "out"), "%s", r.err);
	cr_expect(strstr(r.out, "4 dumps"), "%s", r.out);
	run_free(&r);
	assert_not_opened(in, "report of a directory with links and a FIFO");
	fixture_assert_healthy(&fx);
}

Test(attacker_dirs, report_dir_follows_no_planted_link)
{
	report_and_planted_links();
}

Test(attacker_dirs, report_dir_follows_no_planted_link_static)
{
	use_static();
	report_and_planted_links();
}

/* ---- memsnap-capture ---------------------------------------------------- */

static void capture_and_planted_summary(void)
{
	char dir[PATH_MAX + 16], victim[PATH_MAX + 32], cmd[8 * PATH_MAX];
	const char *paths[] = { NULL, NULL };
	const char *script = getenv("MEMSNAP_CAPTURE");
	static char conf[] = "MALLOC_CONF=prof:true,lg_prof_sample:14";
	char *env[] = { conf, NULL };
	struct stat before, after;
	struct run r;
	int fd, in;

	if (!script || access(script, X_OK))
		skip_test("no memsnap-capture at %s (MEMSNAP_CAPTURE)",
			  script ? script : "(unset)");
	start_as_nobody("watch-target-jemalloc", env);
	snprintf(victim, sizeof(victim), "%s/root/victim", base);
	fd = open(victim, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "root's own\n", 11), 11);
	cr_assert_eq(close(fd), 0);
	cr_assert_eq(stat(victim, &before), 0);
	snprintf(dir, sizeof(dir), "%s/users", base);
	users_dir(dir);
	plant_link(dir, "summary.txt", victim);
	plant_link(dir, "growth.txt", victim);
	paths[0] = victim;
	in = watch_opens(paths);
	snprintf(cmd, sizeof(cmd), "MEMSNAP='%s' '%s' --pid %d -o '%s' "
		 "--count 2 --interval 0.1", getenv("MEMSNAP_BIN"), script,
		 (int)fx.pid, dir);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_expect_neq(r.status, 0, "the capture went on: %s%s", r.out, r.err);
	cr_expect(strstr(r.err, "belongs to uid 65534"), "%s", r.err);
	run_free(&r);
	assert_not_opened(in, "memsnap-capture into the user's directory");
	cr_assert_eq(stat(victim, &after), 0);
	cr_expect_eq(after.st_size, before.st_size, "the victim was written");
	cr_expect_eq(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
	cr_expect_eq(stub_pages(fx.pid), 0, "the refused capture attached");
	fixture_assert_healthy(&fx);
}

Test(attacker_dirs, capture_writes_nothing_through_a_planted_link)
{
	capture_and_planted_summary();
}

Test(attacker_dirs, capture_writes_nothing_through_a_planted_link_static)
{
	use_static();
	capture_and_planted_summary();
}
