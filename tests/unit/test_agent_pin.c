/*
 * The agent acts only for the process memsnap looked at
 * (agent/pin.c): dumpdir_create() with the view of a child
 * that has since been replaced by another with the same pid (clone3
 * set_tid), with a pidfd and without one (before Linux 5.3: the start
 * time alone), or with credentials other than the view's.  Each time
 * the agent must refuse before it makes anything in the $TMPDIR it
 * would use.
 */
#include "agent/dumpdir.h"
#include "proc/procinfo.h"

#include "../lib/fixture.h"
#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char scratch[PATH_MAX];
static char tmpdir[PATH_MAX + 16];	/* the children's $TMPDIR */
static pid_t kids[2] = { -1, -1 };

static void setup(void)
{
	int rc = scratch_make("memsnap-test-agentpin", scratch,
			      sizeof(scratch));

	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	snprintf(tmpdir, sizeof(tmpdir), "%s/tmp", scratch);
	/* ours, 0700: a place the agent, as any child of ours, would use */
	cr_assert_eq(mkdir(tmpdir, 0700), 0);
}

static void teardown(void)
{
	size_t i;

	for (i = 0; i < 2; i++)
		if (kids[i] > 0) {
			kill(kids[i], SIGKILL);
			waitpid(kids[i], NULL, 0);
			kids[i] = -1;
		}
	scratch_cleanup(scratch);
}

TestSuite(agent_pin, .init = setup, .fini = teardown);

/*
 * `sleep 60` with TMPDIR=$tmpdir, with the pid @want (0: any), once its
 * exec is done (the pipe's end it holds closes with O_CLOEXEC): its
 * /proc/PID/environ is the new one then.  Only async-signal-safe calls
 * between clone3 and execve.
 */
static pid_t spawn_sleep(pid_t want)
{
	char env[PATH_MAX + 32], a0[] = "sleep", a1[] = "60";
	char *argv[] = { a0, a1, NULL }, *envp[] = { env, NULL };
	struct clone_args ca = { .exit_signal = SIGCHLD };
	pid_t tid[1] = { want };
	int sync[2];
	char c;
	long pid;

	snprintf(env, sizeof(env), "TMPDIR=%s", tmpdir);
	cr_assert_eq(pipe2(sync, O_CLOEXEC), 0);
	if (want) {
		ca.set_tid = (uint64_t)(uintptr_t)tid;
		ca.set_tid_size = 1;
	}
	pid = syscall(SYS_clone3, &ca, sizeof(ca));
	if (pid == 0) {
		close(sync[0]);
		execve("/bin/sleep", argv, envp);
		_exit(127);
	}
	close(sync[1]);
	if (pid < 0) {
		close(sync[0]);
		cr_skip_test("clone3%s: %s (needs Linux 5.5, and root for a "
			     "chosen pid)", want ? " with set_tid" : "",
			     strerror(errno));
	}
	cr_assert_eq(read(sync[0], &c, 1), 0, "the child did not exec");
	close(sync[0]);
	return (pid_t)pid;
}

static void reap(pid_t *pid)
{
	cr_assert_eq(kill(*pid, SIGKILL), 0);
	cr_assert_eq(waitpid(*pid, NULL, 0), *pid);
	*pid = -1;
}

/* Clock ticks since boot, as /proc/PID/stat counts a start time. */
static uint64_t boot_ticks(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) /
	       (1000000000u / (uint64_t)sysconf(_SC_CLK_TCK));
}

/*
 * The view of a child (its procinfo and a pidfd opened first), then the
 * child replaced by another with its pid, started in a later clock tick
 * (so that its start time differs), and dumpdir_create() with the view
 * and @pidfd_kept (else none).
 */
static int create_after_reuse(bool pidfd_kept, struct diag *err)
{
	struct timespec tick = { 0, 1000000 };
	struct procinfo view, now;
	struct dumpdir *d = NULL;
	int pidfd, rc;

	kids[0] = spawn_sleep(0);
	pidfd = (int)syscall(SYS_pidfd_open, kids[0], 0);
	if (pidfd_kept && pidfd < 0)
		cr_skip_test("pidfd_open: %s", strerror(errno));
	cr_assert_eq(procinfo_read(kids[0], &view), 0);
	cr_assert(view.have_creds);
	reap(&kids[0]);
	while (boot_ticks() <= view.start_time)
		nanosleep(&tick, NULL);
	kids[1] = spawn_sleep(view.pid);
	cr_assert_eq(kids[1], view.pid);
	cr_assert_eq(procinfo_read(kids[1], &now), 0);
	cr_assert_neq(now.start_time, view.start_time);
	/* Same user, same namespaces: only the pin tells them apart. */
	cr_assert_eq(memcmp(&now.creds, &view.creds, sizeof(now.creds)), 0);
	rc = dumpdir_create(&view, pidfd_kept ? pidfd : -1, &d, err);
	if (pidfd >= 0)
		close(pidfd);
	if (!rc)
		dumpdir_remove(d);
	return rc;
}

Test(agent_pin, reused_pid_refused_by_the_pidfd)
{
	struct diag err;

	cr_assert_eq(create_after_reuse(true, &err), -ESRCH,
		     "%s", err.what);
	cr_assert_not_null(strstr(err.what, "exited"), "%s", err.what);
	cr_assert_eq(dir_count_entries(tmpdir), 0);
	cr_assert_eq(kill(kids[1], 0), 0, "the new process was harmed");
}

/* Before Linux 5.3 (no pidfd): the start time read through the
 * directory the agent opened. */
Test(agent_pin, reused_pid_refused_by_the_start_time)
{
	struct diag err;

	cr_assert_eq(create_after_reuse(false, &err), -ESRCH,
		     "%s", err.what);
	cr_assert_not_null(strstr(err.what, "exited"), "%s", err.what);
	cr_assert_eq(dir_count_entries(tmpdir), 0);
	cr_assert_eq(kill(kids[1], 0), 0, "the new process was harmed");
}

/* The control: the same child, not replaced, is served in $TMPDIR. */
Test(agent_pin, same_process_is_served)
{
	struct procinfo view;
	struct dumpdir *d;
	struct diag err;
	int pidfd;

	kids[0] = spawn_sleep(0);
	pidfd = (int)syscall(SYS_pidfd_open, kids[0], 0);
	cr_assert_eq(procinfo_read(kids[0], &view), 0);
	cr_assert_eq(dumpdir_create(&view, pidfd, &d, &err), 0,
		     "%s", err.what);
	if (pidfd >= 0)
		close(pidfd);
	cr_assert_eq(strncmp(dumpdir_file(d), tmpdir, strlen(tmpdir)), 0,
		     "%s not in %s", dumpdir_file(d), tmpdir);
	cr_assert_eq(dumpdir_remove(d), 0);
	cr_assert_eq(dir_count_entries(tmpdir), 0);
}

/* Each of the credentials the view holds, changed: refused. */
Test(agent_pin, credentials_other_than_the_view_refused)
{
	struct procinfo view, changed;
	struct dumpdir *d = NULL;
	struct diag err;
	int i, pidfd;

	kids[0] = spawn_sleep(0);
	pidfd = (int)syscall(SYS_pidfd_open, kids[0], 0);
	cr_assert_eq(procinfo_read(kids[0], &view), 0);
	for (i = 0; i < 10; i++) {
		changed = view;
		if (i < 4)
			changed.creds.uid[i] ^= 1;
		else if (i < 8)
			changed.creds.gid[i - 4] ^= 1;
		else if (i == 8)
			changed.creds.cap_prm ^= 1;
		else
			changed.creds.cap_eff ^= 1;
		cr_assert_eq(dumpdir_create(&changed, pidfd, &d, &err),
			     -ESTALE, "change %d: %s", i, err.what);
		cr_assert_not_null(strstr(err.what, "changed its credentials"),
				   "%s", err.what);
		cr_assert_eq(dir_count_entries(tmpdir), 0, "change %d", i);
	}
	changed = view;
	changed.have_creds = false;
	cr_assert_eq(dumpdir_create(&changed, pidfd, &d, &err),
		     -EINVAL);
	if (pidfd >= 0)
		close(pidfd);
	cr_assert_eq(dir_count_entries(tmpdir), 0);
}
