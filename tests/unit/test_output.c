/*
 * -o, as dump and report write it (common/output.h): stdout, devices and
 * FIFOs written to and never replaced, files replaced only when
 * complete, symlinks followed only when root's or the caller's, a size
 * cap that refuses a sparse 1 TiB file before copying a byte.
 */
#include "common/output.h"
#include "common/util.h"

#include "../lib/fixture.h"
#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char scratch[PATH_MAX];

static void setup(void)
{
	int rc = scratch_make("memsnap-test-output", scratch, sizeof(scratch));

	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
}

static void teardown(void)
{
	scratch_cleanup(scratch);
}

TestSuite(output, .init = setup, .fini = teardown);

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

static int source_fd(const char *text)
{
	char path[PATH_MAX + 16];
	int fd;

	snprintf(path, sizeof(path), "%s/.source", scratch);
	write_file(path, text, 0644);
	fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0);
	unlink(path);
	return fd;
}

static void in_scratch(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "%s/%s", scratch, name);
}

Test(output, new_file_and_nothing_else)
{
	char out[PATH_MAX + 16];
	int fd = source_fd("profile\n");

	in_scratch(out, sizeof(out), "out.heap");
	cr_assert_eq(output_write_fd(fd, out, true, UINT64_MAX), 0);
	close(fd);
	cr_assert_str_eq(read_all(out), "profile\n");
	cr_assert_eq(dir_count_entries(scratch), 1, "a temp file was left");
}

Test(output, replaces_a_regular_file)
{
	char out[PATH_MAX + 16];
	struct stat a, b;
	int fd = source_fd("profile\n");

	in_scratch(out, sizeof(out), "out.heap");
	write_file(out, "old contents, longer than the new\n", 0644);
	cr_assert_eq(stat(out, &a), 0);
	cr_assert_eq(output_write_fd(fd, out, true, UINT64_MAX), 0);
	close(fd);
	cr_assert_eq(stat(out, &b), 0);
	cr_assert_str_eq(read_all(out), "profile\n");
	cr_assert_neq(a.st_ino, b.st_ino, "written in place, not replaced");
	cr_assert_eq(dir_count_entries(scratch), 1, "a temp file was left");
}

Test(output, no_replace)
{
	char out[PATH_MAX + 16];
	int fd = source_fd("profile\n");

	in_scratch(out, sizeof(out), "out.heap");
	write_file(out, "old\n", 0644);
	cr_assert_eq(output_write_fd(fd, out, false, UINT64_MAX), -EEXIST);
	close(fd);
	cr_assert_str_eq(read_all(out), "old\n");
	cr_assert_eq(dir_count_entries(scratch), 1, "a temp file was left");
}

Test(output, directories_and_empty_names_fail_cleanly)
{
	char out[PATH_MAX + 16];
	int fd = source_fd("profile\n");

	in_scratch(out, sizeof(out), "d");
	cr_assert_eq(mkdir(out, 0700), 0);
	cr_assert_eq(output_write_fd(fd, out, true, UINT64_MAX), -EISDIR);
	cr_assert_eq(output_write_fd(fd, "", true, UINT64_MAX), -ENOENT);
	in_scratch(out, sizeof(out), "");
	cr_assert_eq(output_write_fd(fd, out, true, UINT64_MAX), -EISDIR);
	in_scratch(out, sizeof(out), "d/..");
	cr_assert_eq(output_write_fd(fd, out, true, UINT64_MAX), -EISDIR);
	in_scratch(out, sizeof(out), "nodir/out.heap");
	cr_assert_eq(output_write_fd(fd, out, true, UINT64_MAX), -ENOENT);
	close(fd);
	cr_assert_eq(dir_count_entries(scratch), 1, "a temp file was left");
}

Test(output, own_symlink_is_followed)
{
	char out[PATH_MAX + 16], victim[PATH_MAX + 16];
	struct stat st;
	int fd = source_fd("profile\n");

	in_scratch(victim, sizeof(victim), "real.heap");
	in_scratch(out, sizeof(out), "link.heap");
	write_file(victim, "old\n", 0644);
	cr_assert_eq(symlink("real.heap", out), 0);
	cr_assert_eq(output_write_fd(fd, out, true, UINT64_MAX), 0);
	close(fd);
	cr_assert_eq(lstat(out, &st), 0);
	cr_assert(S_ISLNK(st.st_mode), "the user's own link was replaced");
	cr_assert_str_eq(read_all(victim), "profile\n");
	cr_assert_eq(dir_count_entries(scratch), 2);
}

Test(output, foreign_symlink_at_the_name_is_refused)
{
	char out[PATH_MAX + 16], victim[PATH_MAX + 16];
	struct output o;
	int fd = source_fd("profile\n");

	in_scratch(victim, sizeof(victim), "victim");
	in_scratch(out, sizeof(out), "out.heap");
	write_file(victim, "secret\n", 0644);
	cr_assert_eq(symlink(victim, out), 0);
	cr_assert_eq(lchown(out, 65534, 65534), 0);
	cr_assert_eq(output_write_fd(fd, out, true, UINT64_MAX), -ELOOP);
	cr_assert_eq(output_open(&o, out, true), -ELOOP);
	cr_assert_str_eq(o.refused, out);
	close(fd);
	cr_assert_str_eq(read_all(victim), "secret\n");
	cr_assert_eq(dir_count_entries(scratch), 2);
}

Test(output, foreign_symlink_in_a_directory_component_is_refused)
{
	char real[PATH_MAX + 16], link[PATH_MAX + 16], out[PATH_MAX + 32];
	struct output o;
	int fd = source_fd("profile\n");

	in_scratch(real, sizeof(real), "real");
	in_scratch(link, sizeof(link), "planted");
	cr_assert_eq(mkdir(real, 0755), 0);
	cr_assert_eq(symlink(real, link), 0);
	cr_assert_eq(lchown(link, 65534, 65534), 0);
	snprintf(out, sizeof(out), "%s/out.heap", link);
	cr_assert_eq(output_write_fd(fd, out, true, UINT64_MAX), -ELOOP);
	cr_assert_eq(output_open(&o, out, true), -ELOOP);
	cr_assert_str_eq(o.refused, link);
	/* The same through the user's own link is fine. */
	cr_assert_eq(lchown(link, 0, 0), 0);
	cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
	cr_assert_eq(output_write_fd(fd, out, true, UINT64_MAX), 0);
	close(fd);
	cr_assert_eq(dir_count_entries(real), 1);
}

/* A null device of the test's own: a broken writer replaces only it. */
Test(output, device_is_written_not_replaced)
{
	char null[PATH_MAX + 16];
	struct stat a, b;
	int fd = source_fd("profile\n");

	in_scratch(null, sizeof(null), "null");
	cr_assert_eq(mknod(null, S_IFCHR | 0666, makedev(1, 3)), 0);
	cr_assert_eq(stat(null, &a), 0);
	cr_assert_eq(output_write_fd(fd, null, true, UINT64_MAX), 0);
	close(fd);
	cr_assert_eq(stat(null, &b), 0);
	cr_assert(S_ISCHR(b.st_mode), "the device was replaced");
	cr_assert_eq(a.st_ino, b.st_ino);
	cr_assert_eq(a.st_rdev, b.st_rdev);
}

Test(output, fifo_is_written_through)
{
	char out[PATH_MAX + 16], buf[64] = "";
	struct stat st;
	int fd = source_fd("profile\n"), r;
	ssize_t n;

	in_scratch(out, sizeof(out), "pipe");
	cr_assert_eq(mkfifo(out, 0600), 0);
	r = open(out, O_RDONLY | O_NONBLOCK);
	cr_assert_geq(r, 0);
	cr_assert_eq(output_write_fd(fd, out, true, UINT64_MAX), 0);
	close(fd);
	n = read(r, buf, sizeof(buf) - 1);
	cr_assert_eq(n, 8, "read %zd", n);
	buf[n] = '\0';
	cr_assert_str_eq(buf, "profile\n");
	close(r);
	cr_assert_eq(lstat(out, &st), 0);
	cr_assert(S_ISFIFO(st.st_mode), "the FIFO was replaced");
}

/* @path written with stdout on a pipe: what came through the pipe. */
static char *through_stdout(const char *path)
{
	static char buf[64];
	int p[2], saved, fd = source_fd("profile\n");
	ssize_t n;

	cr_assert_eq(pipe(p), 0);
	fflush(stdout);
	saved = dup(1);
	cr_assert_eq(dup2(p[1], 1), 1);
	close(p[1]);
	cr_assert_eq(output_write_fd(fd, path, true, UINT64_MAX), 0);
	cr_assert_eq(dup2(saved, 1), 1);
	close(saved);
	close(fd);
	n = read(p[0], buf, sizeof(buf) - 1);
	cr_assert_geq(n, 0);
	buf[n] = '\0';
	close(p[0]);
	return buf;
}

Test(output, dash_is_stdout)
{
	cr_assert_str_eq(through_stdout("-"), "profile\n");
	cr_assert_eq(access("-", F_OK), -1, "a file named '-' was made");
}

Test(output, link_to_proc_self_fd_is_followed_not_replaced)
{
	char link[PATH_MAX + 16];
	struct stat st;

	in_scratch(link, sizeof(link), "stdout");
	cr_assert_eq(symlink("/proc/self/fd/1", link), 0);
	cr_assert_str_eq(through_stdout(link), "profile\n");
	cr_assert_eq(lstat(link, &st), 0);
	cr_assert(S_ISLNK(st.st_mode), "the link was replaced");
}

Test(output, killed_writer_leaves_nothing)
{
	char out[PATH_MAX + 16];
	int status;
	pid_t pid;

	in_scratch(out, sizeof(out), "out.heap");
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct output o;

		if (output_open(&o, out, true) || write(o.fd, "part", 4) != 4)
			_exit(1);
		/* killed before the commit */
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && !WEXITSTATUS(status));
	cr_assert_eq(dir_count_entries(scratch), 0, "left something behind");
}

Test(output, sparse_terabyte_refused_before_copying)
{
	char src[PATH_MAX + 16], out[PATH_MAX + 16];
	struct stat st;
	int fd;

	in_scratch(src, sizeof(src), "sparse");
	in_scratch(out, sizeof(out), "out.heap");
	fd = open(src, O_RDWR | O_CREAT | O_EXCL, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)1 << 40), 0);
	cr_assert_eq(output_write_fd(fd, out, true, 1u << 30), -EFBIG);
	cr_assert_eq(lseek(fd, 0, SEEK_CUR), 0, "it read the file");
	close(fd);
	cr_assert_eq(stat(out, &st), -1, "an output was made");
	cr_assert_eq(dir_count_entries(scratch), 1, "a temp file was left");
}

Test(output, growing_past_the_cap_stops)
{
	char out[PATH_MAX + 16];
	int p[2], sink;
	uint64_t copied = 0;
	static char chunk[4096];

	in_scratch(out, sizeof(out), "out.heap");
	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(write(p[1], chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
	close(p[1]);
	sink = open(out, O_WRONLY | O_CREAT | O_EXCL, 0600);
	cr_assert_geq(sink, 0);
	cr_assert_eq(copy_fd_max(p[0], sink, 1000, &copied), -EFBIG);
	cr_assert_leq(copied, 1000);
	close(sink);
	close(p[0]);
}

Test(output, parse_size)
{
	uint64_t v;

	cr_assert_eq(parse_size("4096", &v), 0);
	cr_assert_eq(v, 4096);
	cr_assert_eq(parse_size("64K", &v), 0);
	cr_assert_eq(v, 64 << 10);
	cr_assert_eq(parse_size("1G", &v), 0);
	cr_assert_eq(v, 1ull << 30);
	cr_assert_eq(parse_size("2GiB", &v), 0);
	cr_assert_eq(v, 2ull << 30);
	cr_assert_eq(parse_size("3m", &v), 0);
	cr_assert_eq(v, 3ull << 20);
	cr_assert_eq(parse_size("", &v), -EINVAL);
	cr_assert_eq(parse_size("-1", &v), -EINVAL);
	cr_assert_eq(parse_size("1X", &v), -EINVAL);
	cr_assert_eq(parse_size("99999999999T", &v), -ERANGE);
}

Test(output, default_name)
{
	char buf[128];
	struct tm tm = { .tm_year = 126, .tm_mon = 10, .tm_mday = 21,
			 .tm_hour = 6, .tm_min = 1, .tm_sec = 2,
			 .tm_isdst = -1 };
	time_t when = mktime(&tm);

	output_default_name(4242, when, 1, buf, sizeof(buf));
	cr_assert_str_eq(buf, "memsnap.4242.20261121-060102.heap");
	output_default_name(4242, when, 3, buf, sizeof(buf));
	cr_assert_str_eq(buf, "memsnap.4242.20261121-060102-3.heap");
}
