/*
 * memsnap watch on a real server: two Debian redis-servers with the
 * same keyspace, one whose keyspace grows under a client while the
 * other only serves reads.  Watched side by side for 24 ticks, the report
 * of the first says its heap in use is still growing, of the second
 * that nothing is; both servers still answer after.  And a growing one
 * watched with memsnap's sampler: the call sites that grew are Redis's
 * own (_sdsnewlen or createStringObject, dictAddRaw), never its
 * allocator wrappers (zmalloc and kin), in the report of the watch and
 * in the report of a dump.
 */
#include "../lib/fixture.h"
#include "../lib/redis.h"
#include "../lib/jsonget.h"
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
#include <unistd.h>

#define VALUE (16 * 1024)
/* New keys on the growing server after each of its watch's ticks: 800
 * KiB a tick, a line of RSS far above its noise (256 KiB, or 1% of
 * some 30 MiB) over the 23 steps between the 24 ticks. */
#define KEYS_PER_TICK 50

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

/* SET PREFIX:N VALUE for N in [@from, @to) on @r, in one go. */
static void set_keys(const struct redis *r, const char *prefix,
		     unsigned int from, unsigned int to)
{
	char why[160];
	int rc = redis_set_keys(r, prefix, from, to, value);

	cr_assert_eq(rc, 0, "SET %s:%u..%u: %s", prefix, from, to - 1,
		     redis_why(r, rc, why, sizeof(why)));
}

/* The ticks in BASE/@name/series.tsv so far: its whole lines that
 * begin with a number. */
static unsigned int ticks_written(const char *name)
{
	char path[PATH_MAX + 32], line[1100];
	unsigned int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/series.tsv", base, name);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += line[0] >= '0' && line[0] <= '9' && strchr(line, '\n');
	fclose(f);
	return n;
}

/* memsnap --pid PID watch -o BASE/@name ... in the background: 24
 * ticks of 0.5 s without dumps, or with @sampler 16 ticks and a dump
 * every 3 through memsnap's sampler (a sample every 8 KiB, so that
 * the dict's small entries are sampled too). */
static pid_t watch(const struct redis *r, const char *name, bool sampler)
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
		if (sampler)
			execl(bin ? bin : "./memsnap", "memsnap", "--pid", pid,
			      "watch", "-o", dir, "--interval", "0.5s",
			      "--count", "16", "--dump-every", "3", "--sampler",
			      "--sample-bytes", "8K", "--stack-bytes", "8K",
			      (char *)NULL);
		else
			execl(bin ? bin : "./memsnap", "memsnap", "--pid", pid,
			      "watch", "-o", dir, "--interval", "0.5s",
			      "--count", "24", "--dump-every", "0",
			      (char *)NULL);
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
	int st[2] = { 0, 0 }, rc, fd;
	unsigned int n = 0, reads = 0, want;
	char reply[64], cmd[64], shape[32], *a, *b;

	rc = scratch_make("memsnap-test-watch-redis", base, sizeof(base));
	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	memset(value, 'v', VALUE);
	start(&grows);
	start(&stays);
	set_keys(&grows, "k", 0, 500);
	set_keys(&stays, "k", 0, 500);

	/* the reads through one connection, on which redis allocates
	 * nothing per read: with a connection each (a client's buffers
	 * allocated and freed hundreds of times a second) the fixed
	 * server's RSS fell by 1 MiB within the watch in 5 of 20 runs in
	 * the arm64 guest (jemalloc 5.1, 64 KiB pages), "shrinking" */
	fd = redis_connect(&stays);
	cr_assert_geq(fd, 0, "connecting: %s", strerror(-fd));
	watchers[0] = watch(&grows, "grows", false);
	watchers[1] = watch(&stays, "stays", false);
	/* the client, until both watches end: KEYS_PER_TICK new keys on
	 * one for each tick its watch wrote, and reads on the other.  The
	 * growth follows the ticks, not this machine's speed: a slow
	 * machine's ticks come late, or are skipped, and so are its
	 * keys; the 50 of a tick are sent in one go, read by redis as
	 * they are. */
	while (running(&watchers[0], &st[0]) | running(&watchers[1], &st[1])) {
		want = KEYS_PER_TICK * ticks_written("grows");
		if (n < want) {
			set_keys(&grows, "new", n, want);
			n = want;
		}
		snprintf(cmd, sizeof(cmd), "STRLEN k:%u", reads++ % 500);
		rc = redis_ask(fd, cmd, reply, sizeof(reply));
		cr_assert_eq(rc, 0, "%s: %s", cmd, strerror(-rc));
		cr_assert_str_eq(reply, ":16384");
	}
	close(fd);
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
	/* the headlines: the heap grows in one, nothing in the other */
	cr_assert(strstr(a, "\"headline\": \"heap in use still growing at +"),
		  "%s", a);
	cr_assert(strstr(b, "\"headline\": \"nothing still growing"), "%s",
		  b);
	free(a);
	free(b);
	cr_assert(redis_alive(&grows), "the growing redis is gone");
	cr_assert(redis_alive(&stays), "the fixed redis is gone");
}

/* The names of the sites of report JSON @json, one a line, in @buf. */
static void site_names(const char *json, const char *array, char *buf,
		       size_t size)
{
	char key[64];
	const char *p = strstr(json, array), *end, *q;
	size_t len = 0;

	buf[0] = '\0';
	if (!p)
		return;
	end = strstr(p, "\n  ]");
	snprintf(key, sizeof(key), "\"name\": \"");
	while ((p = strstr(p, key)) && (!end || p < end)) {
		p += strlen(key);
		q = strchr(p, '"');
		if (!q || len + (size_t)(q - p) + 2 > size)
			break;
		memcpy(buf + len, p, (size_t)(q - p));
		len += (size_t)(q - p);
		buf[len++] = '\n';
		buf[len] = '\0';
	}
}

/* The sampled server's keys: 4 KiB values, sent as a client library
 * sends them (the multibulk protocol: Redis makes each argument a string
 * object of its own), 150 after each tick, 9 MiB over the 16 ticks. */
#define SMALL 4096
#define SMALL_PER_TICK 150

static char small[SMALL + 1];

Test(watch_redis, sites_past_the_allocator_wrappers)
{
	unsigned int n = 0, want;
	int st = 0, rc;
	char dump[PATH_MAX + 32], names[4096], head[1024], why[160], *a;
	const char *args[] = { "report", dump, "--top", "5", NULL };
	const char *p;
	struct run r;

	rc = scratch_make("memsnap-test-watch-redis", base, sizeof(base));
	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	memset(value, 'v', VALUE);
	start(&grows);
	set_keys(&grows, "k", 0, 200);
	memset(small, 'v', SMALL);
	watchers[0] = watch(&grows, "sampled", true);
	n = 0;
	/* SMALL_PER_TICK new keys for each tick the watch wrote, as the
	 * first test's: the growth follows the ticks, not this machine's
	 * speed */
	while (running(&watchers[0], &st)) {
		want = SMALL_PER_TICK * ticks_written("sampled");
		if (n < want) {
			rc = redis_set_keys(&grows, "new", n, want, small);
			cr_assert_eq(rc, 0, "SET new:%u..%u: %s", n, want - 1,
				     redis_why(&grows, rc, why, sizeof(why)));
			n = want;
		} else {
			cr_assert(redis_alive(&grows));
		}
	}
	cr_assert(WIFEXITED(st) && !WEXITSTATUS(st), "watch: %#x", st);
	cr_assert_gt(n, 2000, "only %u keys added during the watch", n);

	a = report("sampled");
	site_names(a, "\"sites\": [", names, sizeof(names));
	cr_assert(!strncmp(names, "_sdsnewlen\n", 11) ||
			  !strncmp(names, "createStringObject\n", 19),
		  "the site that grew most is not Redis's string's:\n%s\n%s",
		  names, a);
	cr_assert(strstr(names, "dictAddRaw\n"), "no dictAddRaw:\n%s", names);
	cr_assert_null(strstr(names, "zmalloc"), "%s", names);
	cr_assert_null(strstr(names, "ztrymalloc"), "%s", names);
	cr_assert_null(strstr(names, "zcalloc"), "%s", names);
	/* the sampler's copies of the stacks of its samples, one every
	 * 8 KiB allocated, grow beside the heap: the sampler's own part,
	 * said as its own if at all, never the program's */
	json_str_get(a, "headline", head, sizeof(head));
	cr_assert(strstr(head, "heap in use still growing at +") &&
			  strstr(head, "(leak suspect)"), "%s", head);
	cr_assert_null(strstr(head, "other anonymous memory still growing"),
		       "%s", head);
	p = strstr(head, "memsnap's sampler still growing");
	cr_assert(!p || strstr(p, "not the program's"), "%s", head);
	free(a);

	/* a dump's own report: its top site too */
	snprintf(dump, sizeof(dump), "%s/sampled/dump-0006.heap", base);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	a = strstr(r.out, "allocated at");
	cr_assert(a && (strstr(strchr(a, '\n'), "  _sdsnewlen\n") ==
				strchr(strchr(a, '\n') + 1, '\n') - 12),
		  "the dump's top site is not _sdsnewlen:\n%s", r.out);
	cr_assert(strstr(r.out, "such as z"), "%s", r.out);
	run_free(&r);
	cr_assert(redis_alive(&grows), "the redis is gone");
}
