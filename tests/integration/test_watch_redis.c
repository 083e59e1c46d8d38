/*
 * memsnap watch on a real server: two Debian redis-servers with the
 * same keyspace, one whose keyspace grows under a client while the
 * other only serves reads.  Watched side by side for 12 s, the report
 * of the first says RSS is growing, of the second that it is flat; both
 * servers still answer after.
 */
#include "../lib/fixture.h"
#include "../lib/redis.h"
#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define VALUE (16 * 1024)

static struct redis grows = { .pid = -1 }, stays = { .pid = -1 };
static pid_t watchers[2] = { -1, -1 };
static char base[PATH_MAX];

static void teardown(void)
{
	int i;

	for (i = 0; i < 2; i++)
		if (watchers[i] > 0) {
			kill(watchers[i], SIGKILL);
			waitpid(watchers[i], NULL, 0);
			watchers[i] = -1;
		}
	redis_stop(&grows);
	redis_stop(&stays);
	scratch_cleanup(base);
}

TestSuite(watch_redis, .fini = teardown, .timeout = 180);

static void start(struct redis *r)
{
	int rc = redis_start(r, NULL);

	if (rc == -ENOENT)
		cr_skip_test("redis-server is not installed");
	cr_assert_eq(rc, 0, "redis-server: %s", strerror(-rc));
}

static char value[VALUE + 1];

/* SET PREFIX:N VALUE on @r. */
static void set_key(const struct redis *r, const char *prefix, unsigned int n)
{
	char cmd[VALUE + 64], reply[64];
	int rc;

	snprintf(cmd, sizeof(cmd), "SET %s:%u %s", prefix, n, value);
	rc = redis_command(r, cmd, reply, sizeof(reply));
	cr_assert_eq(rc, 0, "SET: %s", strerror(-rc));
	cr_assert_str_eq(reply, "+OK");
}

/* memsnap --pid PID watch -o BASE/@name ... in the background. */
static pid_t watch(const struct redis *r, const char *name)
{
	const char *bin = getenv("MEMSNAP_BIN");
	char pid[16], dir[PATH_MAX + 16];
	pid_t w;

	snprintf(pid, sizeof(pid), "%d", (int)r->pid);
	snprintf(dir, sizeof(dir), "%s/%s", base, name);
	w = fork();
	cr_assert_geq(w, 0);
	if (w == 0) {
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

		if (null >= 0)
			dup2(null, STDOUT_FILENO);
		execl(bin ? bin : "./memsnap", "memsnap", "--pid", pid, "watch",
		      "-o", dir, "--interval", "0.5s", "--count", "24",
		      "--dump-every", "0", (char *)NULL);
		_exit(127);
	}
	return w;
}

static bool running(pid_t *w, int *status)
{
	if (*w <= 0)
		return false;
	if (waitpid(*w, status, WNOHANG) == *w) {
		*w = -1;
		return false;
	}
	return true;
}

/* report DIR --json: its output (free it). */
static char *report(const char *name)
{
	char dir[PATH_MAX + 16];
	const char *args[] = { "report", dir, "--json", NULL };
	struct run r;

	snprintf(dir, sizeof(dir), "%s/%s", base, name);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "report %s: %s", dir, r.err);
	free(r.err);
	return r.out;
}

/* The shape of part @part in report JSON @json. */
static const char *part_shape(const char *json, const char *part,
			      char *buf, size_t size)
{
	char key[64];
	const char *p, *q;

	snprintf(key, sizeof(key), "\"name\": \"%s\"", part);
	buf[0] = '\0';
	p = strstr(json, key);
	if (!p || !(p = strstr(p, "\"shape\": \"")))
		return buf;
	p += strlen("\"shape\": \"");
	q = strchr(p, '"');
	if (q && (size_t)(q - p) < size) {
		memcpy(buf, p, (size_t)(q - p));
		buf[q - p] = '\0';
	}
	return buf;
}

Test(watch_redis, a_growing_keyspace_told_from_a_fixed_one)
{
	struct timespec t0, now;
	int st[2] = { 0, 0 }, i, rc;
	unsigned int n = 0, reads = 0;
	char reply[64], cmd[64], shape[32], *a, *b;

	rc = scratch_make("memsnap-test-watch-redis", base, sizeof(base));
	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	memset(value, 'v', VALUE);
	start(&grows);
	start(&stays);
	for (i = 0; i < 500; i++) {
		set_key(&grows, "k", (unsigned int)i);
		set_key(&stays, "k", (unsigned int)i);
	}

	watchers[0] = watch(&grows, "grows");
	watchers[1] = watch(&stays, "stays");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* the client: 200 new keys a second on one (3.2 MiB/s), reads on
	 * the other, until both watches end */
	while (running(&watchers[0], &st[0]) | running(&watchers[1], &st[1])) {
		double t;

		clock_gettime(CLOCK_MONOTONIC, &now);
		t = (double)(now.tv_sec - t0.tv_sec) +
		    (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
		if (n < (unsigned int)(200 * t) && n < 20000)
			set_key(&grows, "new", n++);
		snprintf(cmd, sizeof(cmd), "STRLEN k:%u", reads++ % 500);
		cr_assert_eq(redis_command(&stays, cmd, reply, sizeof(reply)),
			     0);
		cr_assert_str_eq(reply, ":16384");
	}
	cr_assert(WIFEXITED(st[0]) && !WEXITSTATUS(st[0]), "watch grows: %#x",
		  st[0]);
	cr_assert(WIFEXITED(st[1]) && !WEXITSTATUS(st[1]), "watch stays: %#x",
		  st[1]);
	cr_assert_gt(n, 1000, "only %u keys added during the watch", n);

	a = report("grows");
	b = report("stays");
	cr_assert_str_eq(part_shape(a, "rss", shape, sizeof(shape)), "growing",
			 "the growing server's RSS: '%s'\n%s", shape, a);
	cr_assert_str_eq(part_shape(a, "heap_in_use", shape, sizeof(shape)),
			 "growing", "its heap in use: '%s'\n%s", shape, a);
	cr_assert_str_eq(part_shape(b, "rss", shape, sizeof(shape)), "flat",
			 "the fixed server's RSS: '%s'\n%s", shape, b);
	cr_assert(strstr(a, "\"end\": \"count reached\""), "%s", a);
	free(a);
	free(b);
	cr_assert(redis_alive(&grows), "the growing redis is gone");
	cr_assert(redis_alive(&stays), "the fixed redis is gone");
}
