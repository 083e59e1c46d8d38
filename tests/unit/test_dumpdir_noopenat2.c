/*
 * The private dump directory on a kernel without openat2() (before 5.6,
 * or a sandbox that hides it): this process (memsnap's side) installs a
 * seccomp filter that makes openat2 fail with ENOSYS, for a sleeping
 * child as the target, and the component-by-component walk must give the same
 * result: a private directory, the file read back, a planted symlink
 * refused.  Criterion runs each test in its own process, so the filter
 * dies with it.
 */
#include "agent/dumpdir.h"
#include "tests/unit/dumpdir_now.h"

#include "../lib/noopenat2.h"
#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static char scratch[PATH_MAX];
static pid_t child = -1;

/* A "target" whose initial environment has TMPDIR=@tmpdir (what
 * /proc/PID/environ shows), asleep until the test ends. */
static pid_t spawn_target(const char *tmpdir)
{
	char env[PATH_MAX + 16], a0[] = "sleep", a1[] = "60";
	char *argv[] = { a0, a1, NULL };
	char *envp[] = { env, NULL };

	char path[64], seen[PATH_MAX + 16];
	int tries;

	snprintf(env, sizeof(env), "TMPDIR=%s", tmpdir);
	cr_assert_eq(posix_spawn(&child, "/bin/sleep", NULL, NULL, argv, envp),
		     0);
	/* posix_spawn returns once the exec has begun; the new environment
	 * shows in /proc a moment later. */
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)child);
	for (tries = 0; tries < 5000; tries++) {
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(seen, 1, sizeof(seen) - 1, f) : 0;

		if (f)
			fclose(f);
		if (n > 7 && !strncmp(seen, "TMPDIR=", 7))
			return child;
		usleep(1000);
	}
	cr_assert_fail("the child's environment never appeared");
	return child;
}

static void setup(void)
{
	int rc = scratch_make("memsnap-test-noopenat2", scratch,
			      sizeof(scratch));

	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
}

static void teardown(void)
{
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	scratch_cleanup(scratch);
}

TestSuite(dumpdir_noopenat2, .init = setup, .fini = teardown);

Test(dumpdir_noopenat2, directory_made_and_file_read_back)
{
	struct dumpdir *d = NULL;
	char why[512];
	uint64_t size = 0;
	struct stat st;
	int fd;

	no_openat2();
	cr_assert_eq(dumpdir_create_now(spawn_target(scratch), &d, why,
				    sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(strncmp(dumpdir_file(d), scratch, strlen(scratch)), 0,
		     "not in TMPDIR: %s", dumpdir_file(d));
	/* the "target" writes its file */
	fd = open(dumpdir_file(d), O_WRONLY | O_CREAT | O_EXCL, 0600);
	cr_assert_geq(fd, 0, "%s: %s", dumpdir_file(d), strerror(errno));
	cr_assert_eq(write(fd, "heap_v2/1\n", 10), 10);
	close(fd);
	fd = dumpdir_open_result(d, &size);
	cr_assert_geq(fd, 0, "%s", strerror(-fd));
	cr_assert_eq(size, 10);
	close(fd);
	cr_assert_eq(lstat(dumpdir_file(d), &st), 0);
	cr_assert_eq(dumpdir_remove(d), 0);
	cr_assert_neq(lstat(dumpdir_file(d), &st), 0, "not removed");
}

/* TMPDIR a symlink to elsewhere: never followed, another place is used
 * or the creation fails; nothing appears where the link points. */
Test(dumpdir_noopenat2, symlinked_tmpdir_not_followed)
{
	char link[PATH_MAX + 16], elsewhere[PATH_MAX + 16];
	struct dumpdir *d = NULL;
	char why[512];
	int rc;

	snprintf(elsewhere, sizeof(elsewhere), "%s/elsewhere", scratch);
	snprintf(link, sizeof(link), "%s/link", scratch);
	cr_assert_eq(mkdir(elsewhere, 01777), 0);
	cr_assert_eq(symlink(elsewhere, link), 0);
	no_openat2();
	rc = dumpdir_create_now(spawn_target(link), &d, why, sizeof(why));
	if (!rc) {
		cr_assert_neq(strncmp(dumpdir_file(d), link, strlen(link)), 0,
			      "went through the link: %s", dumpdir_file(d));
		cr_assert_eq(dumpdir_remove(d), 0);
	}
	{
		char cmd[PATH_MAX * 2];

		snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A '%s')\"",
			 elsewhere);
		cr_assert_eq(system(cmd), 0, "something was made through the link");
	}
}
