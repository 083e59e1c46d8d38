/*
 * The private dump directory (docs/DESIGN.md, "Files in the target's view"),
 * with this test process (or a child with its own $TMPDIR) as the
 * "target": the directory is made by the agent exactly as for
 * a real one.
 */
#include "agent/dumpdir.h"
#include "tests/unit/dumpdir_now.h"

#include "../lib/fixture.h"
#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char scratch[PATH_MAX];
static pid_t child = -1;

static void setup(void)
{
	int rc = scratch_make("memsnap-test-dumpdir", scratch, sizeof(scratch));

	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
}

static void teardown(void)
{
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		child = -1;
	}
	scratch_cleanup(scratch);
}

TestSuite(dumpdir, .init = setup, .fini = teardown);

static char *read_all(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "r");
	size_t n;

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* The directory part of the target-view file name. */
static void dir_of(const char *file, char *buf, size_t size)
{
	const char *slash = strrchr(file, '/');

	cr_assert_not_null(slash);
	snprintf(buf, size, "%.*s", (int)(slash - file), file);
}

/* A child (sleep 60) with TMPDIR=@tmpdir, once its environment shows. */
static pid_t spawn_with_tmpdir(const char *tmpdir)
{
	char env_tmp[PATH_MAX + 8];
	char *argv[] = { (char *)"/bin/sleep", (char *)"60", NULL };
	char *envp[] = { env_tmp, NULL };
	char path[64], env[PATH_MAX + 64];
	pid_t pid;
	int tries;

	snprintf(env_tmp, sizeof(env_tmp), "TMPDIR=%s", tmpdir);
	cr_assert_eq(posix_spawn(&pid, argv[0], NULL, NULL, argv, envp), 0);
	child = pid;
	/* posix_spawn returns once the exec has begun; the new environment
	 * shows in /proc a moment later. */
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	for (tries = 0; tries < 5000; tries++) {
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(env, 1, sizeof(env) - 1, f) : 0;

		if (f)
			fclose(f);
		if (n > 7 && !strncmp(env, "TMPDIR=", 7))
			return pid;
		usleep(1000);
	}
	cr_assert_fail("the child's environment never appeared");
	return pid;
}

Test(dumpdir, private_directory_with_unpredictable_name)
{
	struct dumpdir *a, *b;
	char dir_a[PATH_MAX], dir_b[PATH_MAX], why[256];
	struct stat st;

	cr_assert_eq(dumpdir_create_now(getpid(), &a, why, sizeof(why)), 0,
		     "%s", why);
	cr_assert_eq(dumpdir_create_now(getpid(), &b, why, sizeof(why)), 0,
		     "%s", why);
	dir_of(dumpdir_file(a), dir_a, sizeof(dir_a));
	dir_of(dumpdir_file(b), dir_b, sizeof(dir_b));
	cr_assert_eq(dumpdir_file(a)[0], '/');
	cr_assert_str_neq(dir_a, dir_b);
	cr_assert_not_null(strstr(dir_a, "/.memsnap-"), "%s", dir_a);
	/* 16 hex digits of randomness after the prefix. */
	cr_assert_eq(strlen(strstr(dir_a, "/.memsnap-")), 10 + 16, "%s", dir_a);
	cr_assert_eq(lstat(dir_a, &st), 0);
	cr_assert(S_ISDIR(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0700, "mode %o", st.st_mode & 07777);
	cr_assert_eq(st.st_uid, geteuid());
	cr_assert_eq(dumpdir_remove(a), 0);
	cr_assert_eq(dumpdir_remove(b), 0);
	cr_assert_eq(lstat(dir_a, &st), -1);
	cr_assert_eq(errno, ENOENT);
	cr_assert_eq(lstat(dir_b, &st), -1);
}

Test(dumpdir, result_is_read_and_everything_removed)
{
	struct dumpdir *d;
	char dir[PATH_MAX], buf[64];
	uint64_t size = 0;
	ssize_t n;
	int fd;

	cr_assert_eq(dumpdir_create_now(getpid(), &d, NULL, 0), 0);
	cr_assert_eq(dumpdir_open_result(d, &size), -ENOENT);
	write_file(dumpdir_here(d), "heap_v2/524288\n", 0644);
	dir_of(dumpdir_here(d), dir, sizeof(dir));
	fd = dumpdir_open_result(d, &size);
	cr_assert_geq(fd, 0, "%s", strerror(-fd));
	cr_assert_eq(size, 15);
	n = read(fd, buf, sizeof(buf) - 1);
	cr_assert_eq(n, 15);
	buf[n] = '\0';
	cr_assert_str_eq(buf, "heap_v2/524288\n");
	close(fd);
	cr_assert_eq(dumpdir_remove(d), 0);
	cr_assert_eq(access(dir, F_OK), -1);
}

Test(dumpdir, extra_files_are_removed)
{
	char dir[PATH_MAX], extra[PATH_MAX + 32];
	struct dumpdir *d;

	cr_assert_eq(dumpdir_create_now(getpid(), &d, NULL, 0), 0);
	dir_of(dumpdir_here(d), dir, sizeof(dir));
	snprintf(extra, sizeof(extra), "%s/jeprof.1.0.m0.heap", dir);
	write_file(extra, "x", 0644);
	snprintf(extra, sizeof(extra), "%s/sub", dir);
	cr_assert_eq(mkdir(extra, 0700), 0);
	cr_assert_eq(dir_count_entries(dir), 2);
	cr_assert_eq(dumpdir_remove(d), 0);
	cr_assert_eq(access(dir, F_OK), -1);
}

Test(dumpdir, planted_symlink_is_not_followed)
{
	char victim[PATH_MAX + 16];
	struct dumpdir *d;

	snprintf(victim, sizeof(victim), "%s/victim", scratch);
	write_file(victim, "secret\n", 0644);
	cr_assert_eq(dumpdir_create_now(getpid(), &d, NULL, 0), 0);
	cr_assert_eq(symlink(victim, dumpdir_here(d)), 0);
	cr_assert_eq(dumpdir_open_result(d, NULL), -ELOOP);
	cr_assert_eq(dumpdir_remove(d), 0);
	cr_assert_str_eq(read_all(victim), "secret\n");
}

Test(dumpdir, planted_fifo_does_not_block)
{
	struct dumpdir *d;

	cr_assert_eq(dumpdir_create_now(getpid(), &d, NULL, 0), 0);
	cr_assert_eq(mkfifo(dumpdir_here(d), 0600), 0);
	/* A blocking open of a FIFO with no writer would hang here. */
	cr_assert_eq(dumpdir_open_result(d, NULL), -EINVAL);
	cr_assert_eq(dumpdir_remove(d), 0);
}

Test(dumpdir, target_tmpdir_is_used)
{
	char why[256];
	struct dumpdir *d;
	pid_t pid = spawn_with_tmpdir(scratch);
	cr_assert_eq(dumpdir_create_now(pid, &d, why, sizeof(why)), 0, "%s",
		     why);
	cr_assert_eq(strncmp(dumpdir_file(d), scratch, strlen(scratch)), 0,
		     "%s not in %s", dumpdir_file(d), scratch);
	cr_assert_eq(dir_count_entries(scratch), 1);
	cr_assert_eq(dumpdir_remove(d), 0);
	cr_assert_eq(dir_count_entries(scratch), 0);
}

Test(dumpdir, symlinked_tmpdir_is_refused)
{
	char link[PATH_MAX + 16], elsewhere[PATH_MAX + 16];
	struct dumpdir *d;
	pid_t pid;

	snprintf(elsewhere, sizeof(elsewhere), "%s/elsewhere", scratch);
	snprintf(link, sizeof(link), "%s/link", scratch);
	cr_assert_eq(mkdir(elsewhere, 0700), 0);
	cr_assert_eq(symlink(elsewhere, link), 0);
	pid = spawn_with_tmpdir(link);
	cr_assert_eq(dumpdir_create_now(pid, &d, NULL, 0), 0);
	/* Not through the link: the next place in the list instead. */
	cr_assert_neq(strncmp(dumpdir_file(d), scratch, strlen(scratch)), 0,
		      "%s is under the symlinked TMPDIR", dumpdir_file(d));
	cr_assert_eq(dir_count_entries(elsewhere), 0);
	cr_assert_eq(dumpdir_remove(d), 0);
}

Test(dumpdir, no_such_process)
{
	struct dumpdir *d;

	cr_assert_eq(dumpdir_create_now(999999999, &d, NULL, 0), -ENOENT);
}

/* A directory as a memsnap killed mid-dump leaves it, @age s old. */
static void plant_leftover(const char *name, int age, char *path,
			   size_t size)
{
	char file[PATH_MAX + 64];
	struct timespec ts[2];

	snprintf(path, size, "%s/%s", scratch, name);
	cr_assert_eq(mkdir(path, 0700), 0);
	snprintf(file, sizeof(file), "%s/dump.heap", path);
	write_file(file, "heap_v2/524288\n", 0644);
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= age;
	ts[1] = ts[0];
	cr_assert_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
}

Test(dumpdir, leftovers_of_a_killed_run_are_swept)
{
	char stale[PATH_MAX + 32], locked[PATH_MAX + 32], fresh[PATH_MAX + 32];
	char other[PATH_MAX + 32];
	struct dumpdir *d;
	pid_t pid;
	int lfd;

	plant_leftover(".memsnap-0123456789abcdef", 120, stale, sizeof(stale));
	plant_leftover(".memsnap-00000000000000ff", 120, locked,
		       sizeof(locked));
	plant_leftover(".memsnap-0000000000000abc", 0, fresh, sizeof(fresh));
	plant_leftover(".memsnap-not-ours", 120, other, sizeof(other));
	/* A running memsnap holds its directory locked. */
	lfd = open(locked, O_RDONLY | O_DIRECTORY);
	cr_assert_geq(lfd, 0);
	cr_assert_eq(flock(lfd, LOCK_EX), 0);

	pid = spawn_with_tmpdir(scratch);
	cr_assert_eq(dumpdir_create_now(pid, &d, NULL, 0), 0);
	cr_assert_eq(access(stale, F_OK), -1, "the leftover is still there");
	cr_assert_eq(access(locked, F_OK), 0, "a locked directory was removed");
	cr_assert_eq(access(fresh, F_OK), 0, "a new directory was removed");
	cr_assert_eq(access(other, F_OK), 0, "a foreign name was removed");
	cr_assert_eq(dumpdir_remove(d), 0);
	close(lfd);
}
