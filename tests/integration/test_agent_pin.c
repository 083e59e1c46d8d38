/*
 * The file agent (agent/agent.c) acts for the process
 * memsnap looked at, with the rights it had then, and never trusts an
 * environment the target's own loader ignored (docs/SECURITY.md):
 *
 *   - the pid reused by a process of another user between memsnap's
 *     view and its agent: the agent proves the /proc/PID it opened is
 *     the pinned process, or does nothing
 *   - a nobody target that execs a set-user-ID root program between the
 *     view and the agent: refused, not served with root's rights
 *   - a target already in secure mode (set-user-ID root, or file
 *     capabilities) with a $TMPDIR of its real user's choosing: served
 *     with its own rights, its $TMPDIR ignored as its loader ignored it
 *
 * memsnap is stopped between its view and its agent at the one
 * socketpair() it makes, the agent's line (run_traced()).  What the
 * agent made is seen with inotify on the directories it must not touch:
 * it removes its directory at the end, but not the event.
 */
#include "tests/lib/fault.h"
#include "tests/lib/scratch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#define NOBODY 65534

extern char **environ;

static struct fixture fx = { .pid = -1 };
static struct fixture impostor = { .pid = -1 };
static char base[PATH_MAX];
static char place[PATH_MAX + 16];	/* nobody's own directory, 0700 */
static char decoy[PATH_MAX + 16];	/* root's directory, 0700 */
static char suid[PATH_MAX + 16];	/* the fixture, set-user-ID root */
static char capped[PATH_MAX + 16];	/* the fixture, file capabilities */
static char pidstr[16];

static void teardown(void);

static void setup(void)
{
	char p[PATH_MAX + 32];
	int fd, rc;

	skip_cleanup = teardown;
	if (geteuid())
		skip_test("needs root (other users, set-user-ID files)");
	/* in /tmp itself, whatever $TMPDIR: nobody must reach place/ */
	rc = scratch_make("/tmp/memsnap-test-agentpin", base, sizeof(base));
	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	cr_assert_eq(chmod(base, 0755), 0);
	snprintf(place, sizeof(place), "%s/place", base);
	snprintf(decoy, sizeof(decoy), "%s/decoy", base);
	snprintf(suid, sizeof(suid), "%s/suid-target", base);
	snprintf(capped, sizeof(capped), "%s/cap-target", base);
	cr_assert_eq(mkdir(place, 0700), 0);
	cr_assert_eq(chown(place, NOBODY, NOBODY), 0);
	cr_assert_eq(mkdir(decoy, 0700), 0);
	snprintf(p, sizeof(p), "%s/a", decoy);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "root's a\n", 9), 9);
	cr_assert_eq(close(fd), 0);
}

static void teardown(void)
{
	fixture_stop(&fx);
	fixture_stop(&impostor);
	scratch_cleanup(base);
}

TestSuite(agent_pin, .init = setup, .fini = teardown, .timeout = 120);

/* ---- what the agent touched ------------------------------------------- */

/* Every entry made in, moved into or removed from @dir from now on. */
static int watch(const char *dir)
{
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);

	cr_assert_geq(fd, 0, "inotify_init1: %s", strerror(errno));
	cr_assert_geq(inotify_add_watch(fd, dir, IN_CREATE | IN_MOVED_TO |
						  IN_DELETE),
		      0, "%s: %s", dir, strerror(errno));
	return fd;
}

/* Nothing happened in @dir since watch(): else the first name. */
static void assert_no_event(int fd, const char *dir, const char *what)
{
	char buf[4096] __attribute__((aligned(8)));
	const struct inotify_event *ev = (const void *)buf;
	ssize_t n = read(fd, buf, sizeof(buf));

	cr_assert(n < 0 && errno == EAGAIN, "%s: '%s' appeared in %s", what,
		  n > 0 && ev->len ? ev->name : "?", dir);
	close(fd);
}

/* ---- the target -------------------------------------------------------- */

/* agent-pin-target with @env ("K=V", NULL-ended). */
static void start(char *const env[])
{
	char path[PATH_MAX];
	char *argv[] = { path, NULL };
	int rc;

	fixture_path("agent-pin-target", path, sizeof(path));
	if (access(path, X_OK))
		skip_test("fixture %s not built", path);
	rc = fixture_start(&fx, argv, env, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
}

/* A copy of the fixture at @to, root's, mode @mode. */
static void copy_fixture(const char *to, mode_t mode)
{
	char path[PATH_MAX], cmd[2 * PATH_MAX + 64], q1[PATH_MAX + 8],
		q2[PATH_MAX + 8];
	struct statvfs sv;
	struct run r;

	fixture_path("agent-pin-target", path, sizeof(path));
	if (access(path, X_OK))
		skip_test("fixture %s not built", path);
	cr_assert_eq(statvfs(base, &sv), 0);
	if (sv.f_flag & ST_NOSUID)
		skip_test("%s is mounted nosuid: no secure-mode exec here",
			  base);
	snprintf(cmd, sizeof(cmd), "cp %s %s", sh_quote(path, q1, sizeof(q1)),
		 sh_quote(to, q2, sizeof(q2)));
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s: %s", cmd, r.err);
	run_free(&r);
	cr_assert_eq(chown(to, 0, 0), 0);
	cr_assert_eq(chmod(to, mode), 0);
}

/* The set-user-ID root copy. */
static void make_suid(void)
{
	copy_fixture(suid, 04755);
}

/* The copy with CAP_NET_BIND_SERVICE permitted and effective: its uids
 * stay nobody's, but it gains a capability, so it runs in secure mode. */
static void make_capped(void)
{
	struct vfs_cap_data cap = {
		.magic_etc = VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE,
		.data = { { .permitted = 1u << CAP_NET_BIND_SERVICE } },
	};

	copy_fixture(capped, 0755);
	if (setxattr(capped, "security.capability", &cap, XATTR_CAPS_SZ_2, 0))
		skip_test("file capabilities on %s: %s", capped,
			  strerror(errno));
}

/* ---- the pid reused between the view and the agent --------------------- */

/*
 * Start agent-pin-target as @f with exactly the pid @want, as nobody,
 * with TMPDIR=@tmpdir.
 */
static void start_with_pid(struct fixture *f, pid_t want, const char *tmpdir)
{
	char path[PATH_MAX], tmp[PATH_MAX + 32];
	char drop[] = "PIN_DROP=1";
	char *argv[] = { path, NULL }, *env[] = { drop, tmp, NULL };
	int rc;

	fixture_path("agent-pin-target", path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "TMPDIR=%s", tmpdir);
	rc = fixture_start_at_pid(f, argv, env, 10000, want);
	if (rc)
		skip_test("clone3 with set_tid: %s (needs root and Linux 5.5)",
			  strerror(-rc));
}

/* memsnap about to start its agent: the agent's socket pair. */
static bool makes_the_agent(const struct sc_entry *e)
{
	return e->nr == SYS_socketpair;
}

static pid_t reused_pid;

/* A process of nobody gets the pid; memsnap goes on. */
static bool replace_the_target(pid_t m)
{
	(void)m;
	fixture_stop(&fx);
	start_with_pid(&impostor, reused_pid, place);
	return false;
}

/*
 * The target, root's, is replaced by a process of nobody's with the
 * same pid just before memsnap starts its agent.  An agent that opened
 * /proc/PID by number would take nobody's credentials, and as nobody
 * make its directory in $TMPDIR (nobody's own, so fit for nobody; never
 * for root): it must see that the pid is not the pinned process and do
 * nothing.
 */
Test(agent_pin, pid_reused_between_view_and_agent)
{
	const char *args[] = { "--pid", pidstr, "stats", NULL };
	char tmp[sizeof(place) + 16], want[64];
	char *env[] = { tmp, NULL };
	struct run r;
	int w;

	snprintf(tmp, sizeof(tmp), "TMPDIR=%s", place);
	start(env);
	reused_pid = fx.pid;
	w = watch(place);
	cr_assert(run_traced(args, makes_the_agent, replace_the_target, &r),
		  "memsnap never started its agent: exit %d: %s", r.status,
		  r.err);
	cr_assert_eq(impostor.pid, reused_pid);
	cr_assert_not_null(strstr(impostor.ready, "uid=65534,65534,65534"),
			   "%s", impostor.ready);
	assert_no_event(w, place, "the agent took the credentials of the "
				  "process that got the pid");
	/* The process memsnap looked at is gone: say so, touch nothing. */
	cr_expect_eq(r.status, 3, "exit %d: %s", r.status, r.err);
	snprintf(want, sizeof(want), "%d", (int)reused_pid);
	cr_expect_eq(count_lines(r.err), 1, "%s", r.err);
	cr_expect_not_null(strstr(r.err, want), "%s", r.err);
	/* Told by the pin, not by the credentials it happens to lack. */
	cr_expect_not_null(strstr(r.err, "exited"), "%s", r.err);
	cr_expect_str_empty(r.out, "a result from another process: %s",
			    r.out);
	run_free(&r);
	assert_untouched(&impostor, "the process that got the pid");
}

/* ---- a credential change between the view and the agent ---------------- */

static char exec_reply[300];

/* The target execs its set-user-ID root copy; memsnap goes on. */
static bool exec_setuid(pid_t m)
{
	(void)m;
	exec_reply[0] = '\0';
	fixture_command(&fx, 'x', exec_reply, sizeof(exec_reply), 10000);
	return false;
}

/*
 * A target of nobody's, with root's directory as $TMPDIR, execs a
 * set-user-ID root program after memsnap looked at it and before its
 * agent: an agent that took the credentials it finds then would be
 * root (euid, fsuid and every capability), find root's directory fit
 * and make its own there.  memsnap refuses: the process no longer has
 * the rights it had when memsnap looked.
 */
Test(agent_pin, credentials_changed_between_view_and_agent)
{
	const char *args[] = { "--pid", pidstr, "stats", NULL };
	char tmp[sizeof(decoy) + 16], sx[sizeof(suid) + 16], want[64];
	char drop[] = "PIN_DROP=1";
	char *env[] = { drop, tmp, sx, NULL };
	struct run r;
	int w;

	make_suid();
	snprintf(tmp, sizeof(tmp), "TMPDIR=%s", decoy);
	snprintf(sx, sizeof(sx), "PIN_SUID=%s", suid);
	start(env);
	cr_assert_not_null(strstr(fx.ready, "uid=65534,65534,65534"), "%s",
			   fx.ready);
	w = watch(decoy);
	cr_assert(run_traced(args, makes_the_agent, exec_setuid, &r),
		  "memsnap never started its agent: exit %d: %s", r.status,
		  r.err);
	if (!strstr(exec_reply, "R uid=65534,0,0"))
		skip_test("the set-user-ID exec gave no root euid: '%s'",
			  exec_reply);
	assert_no_event(w, decoy,
			"the agent took the new credentials (root)");
	cr_expect_eq(r.status, 3, "exit %d: %s", r.status, r.err);
	snprintf(want, sizeof(want), "stats %s: ", pidstr);
	cr_expect_eq(count_lines(r.err), 1, "%s", r.err);
	cr_expect_not_null(strstr(r.err, want), "%s", r.err);
	cr_expect_not_null(strstr(r.err, "credentials"), "%s", r.err);
	cr_expect_str_empty(r.out, "%s", r.out);
	run_free(&r);
	assert_untouched(&fx, "after the refused stats");
}

/* ---- a target in secure mode -------------------------------------------- */

/*
 * The target as nobody execs @image at once (PIN_EXEC) with $TMPDIR
 * @tmpdir; memsnap then gets its statistics, with the target's rights
 * and without the $TMPDIR, which is never touched.
 */
static void stats_of_secure_target(const char *image, const char *tmpdir,
				   const char *who)
{
	const char *args[] = { "--pid", pidstr, "stats", NULL };
	char tmp[PATH_MAX + 32], ex[PATH_MAX + 32];
	char drop[] = "PIN_DROP=1";
	char *env[] = { drop, tmp, ex, NULL };
	struct run r;
	int w;

	snprintf(tmp, sizeof(tmp), "TMPDIR=%s", tmpdir);
	snprintf(ex, sizeof(ex), "PIN_EXEC=%s", image);
	start(env);
	if (!strstr(fx.ready, who) || !strstr(fx.ready, "secure=1"))
		skip_test("the exec of %s gave no secure mode: '%s'", image,
			  fx.ready);
	w = watch(tmpdir);
	cr_assert_eq(run_memsnap(&r, args), 0);
	assert_no_event(w, tmpdir,
			"the agent used the $TMPDIR of a secure-mode target");
	cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_expect_not_null(strstr(r.out, "statistics"), "%s", r.out);
	run_free(&r);
	assert_untouched(&fx, "after stats");
}

/* Set-user-ID root, run by nobody with root's directory as $TMPDIR: an
 * agent with the target's root rights must not go there. */
Test(agent_pin, setuid_target_tmpdir_not_used)
{
	make_suid();
	stats_of_secure_target(suid, decoy, "uid=65534,0,0");
}

/* File capabilities, uids all nobody's, $TMPDIR nobody's own: the
 * loader ignored it (AT_SECURE), so does memsnap. */
Test(agent_pin, capability_target_tmpdir_not_used)
{
	make_capped();
	stats_of_secure_target(capped, place, "uid=65534,65534,65534");
}
