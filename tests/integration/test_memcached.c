/*
 * A real Debian server on glibc malloc: memcached, started privately on a
 * unix socket.  `stats` (summary, --json, --raw) and `trim` run against
 * it while it holds data, and it serves every key afterwards.
 */
#include "../lib/fixture.h"
#include "../lib/scratch.h"

#include "../lib/memcached.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MEMCACHED "/usr/bin/memcached"
#define KEYS 400

static pid_t mc_pid = -1;
static char base[PATH_MAX];
static char sock_path[PATH_MAX + 16];
static char log_path[PATH_MAX + 16];
static char pidstr[16];

static void teardown(void)
{
	if (mc_pid > 0) {
		kill(mc_pid, SIGKILL);
		waitpid(mc_pid, NULL, 0);
		mc_pid = -1;
	}
	scratch_cleanup(base);
}

TestSuite(memcached, .fini = teardown, .timeout = 120);

static void set_keys(int fd)
{
	static char req[12000], v[8193];
	char reply[64];
	unsigned int k;

	for (k = 0; k < KEYS; k++) {
		int n;

		mc_value(k, v, sizeof(v));
		n = snprintf(req, sizeof(req), "set key%u 0 0 %zu\r\n%s\r\n",
			     k, sizeof(v) - 1, v);
		mc_request(fd, req, (size_t)n, "\r\n", reply, sizeof(reply));
		cr_assert_str_eq(reply, "STORED\r\n");
	}
}

/* memcached is alive, not stopped, and serves every key intact. */
static void assert_serves_keys(int fd)
{
	static char reply[12000], v[8193], want[8300];
	char req[64];
	unsigned int k;

	for (k = 0; k < KEYS; k += 7) {
		int n = snprintf(req, sizeof(req), "get key%u\r\n", k);

		mc_value(k, v, sizeof(v));
		snprintf(want, sizeof(want), "VALUE key%u 0 %zu\r\n%s\r\nEND\r\n",
			 k, sizeof(v) - 1, v);
		mc_request(fd, req, (size_t)n, "END\r\n", reply, sizeof(reply));
		cr_assert_str_eq(reply, want, "key%u", k);
	}
}

static void start_memcached(void)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	int i, rc, fd = -1;

	if (access(MEMCACHED, X_OK))
		cr_skip_test("%s is not installed (apt-get install memcached)",
			     MEMCACHED);
	/* in /tmp itself, whatever $TMPDIR: memcached's unix socket is in
	 * it, and a socket's path must be short */
	rc = scratch_make("/tmp/memsnap-test-memcached", base, sizeof(base));
	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	snprintf(sock_path, sizeof(sock_path), "%s/mc.sock", base);
	snprintf(log_path, sizeof(log_path), "%s/mc.log", base);
	mc_pid = fork();
	cr_assert_geq(mc_pid, 0);
	if (mc_pid == 0) {
		int out = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (out < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
			_exit(126);
		execl(MEMCACHED, "memcached", "-u", "root", "-s", sock_path,
		      "-m", "64", "-t", "4", (char *)NULL);
		_exit(127);
	}
	/* Ready when its socket accepts; a bounded wait for that event. */
	for (i = 0; i < 1000 && fd < 0; i++) {
		int status;

		cr_assert_eq(waitpid(mc_pid, &status, WNOHANG), 0,
			     "memcached exited at start");
		fd = mc_connect(sock_path);
		if (fd < 0)
			nanosleep(&ts, NULL);
	}
	cr_assert_geq(fd, 0, "memcached never listened on %s", sock_path);
	close(fd);
	snprintf(pidstr, sizeof(pidstr), "%d", (int)mc_pid);
}

static void memsnap(struct run *r, const char *a, const char *b)
{
	const char *args[] = { "--pid", pidstr, a, b, NULL };

	cr_assert_eq(run_memsnap(r, args), 0);
}

Test(memcached, stats_and_trim_on_a_live_server)
{
	struct run r;
	struct stat st;
	const char *total;
	int fd;

	start_memcached();
	fd = mc_connect(sock_path);
	cr_assert_geq(fd, 0);
	set_keys(fd);

	memsnap(&r, "stats", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_not_null(strstr(r.out, "glibc malloc statistics"), "%s",
			   r.out);
	cr_assert_not_null(strstr(r.out, "arena 0"), "%s", r.out);
	run_free(&r);
	assert_serves_keys(fd);

	memsnap(&r, "stats", "--json");
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_not_null(strstr(r.out, "\"allocator\": \"glibc\""));
	/* memcached's slabs (KEYS x 8 KiB at least) are in use: 1 MiB
	 * pages, in an arena or mmapped on their own. */
	total = strstr(r.out, "\"name\": \"total\"");
	cr_assert_not_null(total, "%s", r.out);
	cr_assert_not_null(strstr(total, "\"in_use\": "), "%s", total);
	cr_assert_not_null(strstr(total, "\"mmap\": "), "%s", total);
	cr_assert_geq(strtoll(strstr(total, "\"in_use\": ") + 10, NULL, 10) +
			      strtoll(strstr(total, "\"mmap\": ") + 8, NULL,
				      10),
		      KEYS * 8192, "%s", total);
	run_free(&r);

	memsnap(&r, "stats", "--raw");
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(strncmp(r.out, "<malloc version=\"1\">", 20), 0, "%.80s",
		     r.out);
	/* memcached runs several threads: several arenas. */
	cr_assert_not_null(strstr(r.out, "<heap nr=\"1\">"), "%.2000s", r.out);
	run_free(&r);

	memsnap(&r, "trim", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_not_null(strstr(r.out, "malloc_trim(0): RSS "), "%s", r.out);
	run_free(&r);

	assert_serves_keys(fd);
	close(fd);
	cr_assert_eq(stat(log_path, &st), 0);
	cr_assert_eq(st.st_size, 0, "memcached printed %lld bytes",
		     (long long)st.st_size);
}
