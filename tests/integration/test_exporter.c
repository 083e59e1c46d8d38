/*
 * memsnap exporter against live processes: what it serves is explain's
 * measurement of each target (heap in use as the fixture holds it, the
 * parts adding up to RSS, a jemalloc's free bytes), labelled, with a
 * hostile process name kept inside its quotes, and promtool accepts
 * it; --no-attach stops no thread; the listener, attacked with
 * malformed, oversized and idle connections, keeps serving; and a
 * target that exits and whose pid is taken by another user's process
 * is never attached, neither between two scrapes nor between the pin
 * and the attach, and its series is never the new process's.  Every
 * fixture is asked afterwards whether it is well, and no thread of it
 * is left stopped or traced.
 */
#include "../lib/fault.h"
#include "../lib/fixture.h"
#include "../lib/prom.h"
#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <ctype.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1024.0 * 1024.0)
#define NFX 4

static struct fixture fx[NFX] = { { .pid = -1 }, { .pid = -1 },
				  { .pid = -1 }, { .pid = -1 } };
static struct fixture impostor = { .pid = -1 };
static struct daemon exporter = { .pid = -1 };
static char dir[PATH_MAX];

static void setup(void)
{
	int rc = scratch_make("memsnap-test-exporter", dir, sizeof(dir));

	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
}

static void teardown(void)
{
	size_t i;

	daemon_stop(&exporter, 5000);
	for (i = 0; i < NFX; i++)
		fixture_stop(&fx[i]);
	fixture_stop(&impostor);
	scratch_cleanup(dir);
}

TestSuite(exporter, .init = setup, .fini = teardown, .timeout = 120);
TestSuite(exporter_listener, .init = setup, .fini = teardown, .timeout = 120);
TestSuite(exporter_reuse, .init = setup, .fini = teardown, .timeout = 120);

static void start(size_t i, const char *name, char *const args[],
		  char *const env[])
{
	char path[PATH_MAX];
	char *argv[16] = { path };
	size_t n = 1;
	int rc;

	fixture_path(name, path, sizeof(path));
	while (args && args[n - 1] && n + 1 < 16) {
		argv[n] = args[n - 1];
		n++;
	}
	argv[n] = NULL;
	rc = fixture_start(&fx[i], argv, env, 30000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
}

static const char *pid_label(pid_t pid, char *buf, size_t size)
{
	snprintf(buf, size, "pid=\"%d\"", (int)pid);
	return buf;
}

/* GET /metrics of the exporter on @port: the body (asserting 200). */
static char *scrape(unsigned int port)
{
	char *body = NULL;
	int status = 0, rc;

	rc = http_get(port, "/metrics", 20000, &status, &body);
	cr_assert_eq(rc, 0, "GET /metrics: %s", strerror(-rc));
	cr_assert_eq(status, 200, "GET /metrics: status %d: %s", status, body);
	return body;
}

/* Scrape until every pid of @pids is a target with its allocator's
 * numbers read (@attached) or its first reading done: its text. */
static char *scrape_until_read(unsigned int port, const pid_t *pids,
			       size_t n, bool attached)
{
	long deadline = prom_now_ms() + 30000;
	char *text = NULL;

	while (prom_now_ms() < deadline) {
		size_t i, ok = 0;

		free(text);
		text = scrape(port);
		for (i = 0; i < n; i++) {
			char p[32];
			const char *l[] = { pid_label(pids[i], p, sizeof(p)),
					    NULL };

			ok += attached ? expo_count(text, "memsnap_allocator_bytes", l) > 0
				       : expo_count(text, "memsnap_process_rss_bytes", l) > 0;
		}
		if (ok == n)
			return text;
	}
	cr_assert_fail("targets not read within 30 s:\n%s", text);
	return NULL;
}

static double value_of(const char *text, const char *name, pid_t pid,
		       const char *label)
{
	char p[32];
	const char *l[] = { pid_label(pid, p, sizeof(p)), label, NULL };
	double v = 0;

	cr_assert_eq(expo_value(text, name, l, &v), 0, "no %s{%s,%s} in:\n%s",
		     name, p, label ? label : "", text);
	return v;
}

/* `promtool check metrics` on @text: skipped where promtool is not. */
static void promtool_accepts(const char *text)
{
	char path[PATH_MAX + 32], cmd[2 * PATH_MAX];
	struct run r;
	FILE *f;

	if (access("/usr/bin/promtool", X_OK))
		return;
	snprintf(path, sizeof(path), "%s/metrics.txt", dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "promtool check metrics < '%s'", path);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_expect_eq(r.status, 0, "promtool check metrics: %s%s", r.out, r.err);
	run_free(&r);
}

static void stop_exporter_cleanly(void)
{
	int st = daemon_stop(&exporter, 10000);
	char *log = daemon_log(&exporter);

	cr_expect_eq(st, 0, "the exporter ended with %d; its log:\n%s", st,
		     log);
	free(log);
}

Test(exporter, serves_what_explain_measures)
{
	static char hold[] = "--hold", b32m[] = "33554432", churn[] = "--churn",
		    m48[] = "48M", m8[] = "8M", name[] = "--name",
		    hostile[] = "x\"} 1\nfake 9\xff";
	char *glibc[] = { hold, b32m, NULL };
	char *je[] = { churn, m48, hold, m8, NULL };
	char *named[] = { hold, b32m, name, hostile, NULL };
	char *jenv[] = { (char *)"MALLOC_CONF=", NULL };
	char a[16], b[16], c[16];
	const char *args[] = { "--pid", a, "--pid", b, "--pid", c,
			       "--attach-every", "1s", NULL };
	pid_t pids[3];
	unsigned int port;
	double held, use, rss, sum, v;
	char *text, pl[32];
	size_t i;
	int rc;

	need_http();
	start(0, "exporter-target", glibc, NULL);
	start(1, "explain-heap-jemalloc", je, jenv);
	start(2, "exporter-target", named, NULL);
	for (i = 0; i < 3; i++)
		pids[i] = fx[i].pid;
	snprintf(a, sizeof(a), "%d", (int)pids[0]);
	snprintf(b, sizeof(b), "%d", (int)pids[1]);
	snprintf(c, sizeof(c), "%d", (int)pids[2]);
	rc = exporter_start(&exporter, dir, args, &port);
	cr_assert_eq(rc, 0, "starting the exporter: %s\n%s", strerror(-rc),
		     daemon_log(&exporter));
	text = scrape_until_read(port, pids, 3, true);

	/* heap in use is what the fixture holds (explain's 5%) */
	held = 33554432;
	use = value_of(text, "memsnap_process_memory_bytes", pids[0],
		       "part=\"heap_in_use\"");
	cr_expect(use > held * 0.95 && use < held * 1.05,
		  "heap_in_use %.0f, the fixture holds %.0f", use, held);
	/* the parts add up to RSS, every part explain has */
	for (i = 0; i < 3; i++) {
		char pl2[32];

		rss = value_of(text, "memsnap_process_rss_bytes", pids[i], NULL);
		sum = expo_sum(text, "memsnap_process_memory_bytes",
			       (const char *const[]){ pid_label(pids[i], pl2, sizeof(pl2)), NULL });
		cr_expect(sum > rss * 0.98 && sum < rss * 1.02,
			  "pid %d: the parts add up to %.0f, RSS %.0f",
			  (int)pids[i], sum, rss);
		cr_expect_geq(expo_count(text, "memsnap_process_memory_bytes",
					 (const char *const[]){ pl2, NULL }), 9,
			      "pid %d: fewer parts than explain's", (int)pids[i]);
	}
	/* the jemalloc one holds its freed churn as dirty pages, free */
	v = value_of(text, "memsnap_allocator_bytes", pids[1], "stat=\"free\"");
	cr_expect_geq(v, 24 * MiB, "jemalloc free %.0f", v);
	v = value_of(text, "memsnap_allocator_bytes", pids[1], "stat=\"dirty\"");
	cr_expect_geq(v, 24 * MiB, "jemalloc dirty %.0f", v);
	cr_expect_geq(value_of(text, "memsnap_finding_bytes", pids[1],
			       "finding=\"heap_free\""), 24 * MiB);
	/* and every number a dashboard shows, findings or not */
	value_of(text, "memsnap_allocator_bytes", pids[1], "stat=\"retained\"");
	value_of(text, "memsnap_allocator_bytes", pids[1], "stat=\"muzzy\"");
	value_of(text, "memsnap_allocator_bytes", pids[1], "stat=\"active\"");
	cr_expect_geq(value_of(text, "memsnap_allocator_arenas", pids[1], NULL), 1);
	/* labels: each target's own, the allocator it serves malloc with */
	cr_expect_eq(value_of(text, "memsnap_process_rss_bytes", pids[0],
			      "allocator=\"glibc\""), value_of(text, "memsnap_process_rss_bytes", pids[0], NULL));
	value_of(text, "memsnap_process_rss_bytes", pids[1],
		 "allocator=\"jemalloc\"");
	value_of(text, "memsnap_process_rss_bytes", pids[0],
		 "comm=\"exporter-target\"");
	/* a name that tries to end its quotes and its line stays inside */
	value_of(text, "memsnap_process_rss_bytes", pids[2],
		 "comm=\"x\\\"} 1?fake 9?\"");
	cr_expect_null(strstr(text, "\nfake 9"), "a forged line:\n%s", text);
	cr_expect_gt(value_of(text, "memsnap_exporter_thread_stopped_seconds_total",
			      pids[0], NULL), 0);
	cr_expect_eq(expo_value(text, "memsnap_exporter_targets", NULL, &v), 0);
	cr_expect_eq(v, 3);
	cr_expect_eq(expo_count(text, "memsnap_process_rss_bytes",
				(const char *const[]){ pid_label(getpid(), pl, sizeof(pl)), NULL }),
		     0, "a process not asked for is a target");
	promtool_accepts(text);
	free(text);
	for (i = 0; i < 3; i++)
		assert_untouched(&fx[i], "scraped");
	stop_exporter_cleanly();
	for (i = 0; i < 3; i++)
		assert_untouched(&fx[i], "the exporter stopped");
}

/* ---- --no-attach ----------------------------------------------------- */

static pid_t tids[64];
static size_t ntids;

static void seize_all(pid_t pid)
{
	char path[64];
	struct dirent *d;
	DIR *task;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	task = opendir(path);
	cr_assert_not_null(task);
	while ((d = readdir(task)) && ntids < 64) {
		pid_t tid = (pid_t)atoi(d->d_name);

		if (tid <= 0)
			continue;
		cr_assert_eq(ptrace(PTRACE_SEIZE, tid, 0, 0), 0,
			     "PTRACE_SEIZE %d: %s", (int)tid, strerror(errno));
		tids[ntids++] = tid;
	}
	closedir(task);
}

static void nothing_happened(const char *when)
{
	size_t i;

	for (i = 0; i < ntids; i++) {
		int st = 0;

		cr_assert_eq(waitpid(tids[i], &st, WNOHANG | __WALL), 0,
			     "%s: thread %d reported %#x", when, (int)tids[i],
			     st);
	}
}

static void release_all(void)
{
	size_t i;

	for (i = 0; i < ntids; i++) {
		int st;

		cr_assert_eq(ptrace(PTRACE_INTERRUPT, tids[i], 0, 0), 0);
		cr_assert_eq(waitpid(tids[i], &st, __WALL), tids[i]);
		cr_assert_eq(ptrace(PTRACE_DETACH, tids[i], 0, 0), 0);
	}
	ntids = 0;
}

/* The test holds every thread with PTRACE_SEIZE, which stops nothing:
 * any stop or signal the exporter caused would be reported to it. */
Test(exporter, no_attach_stops_no_thread)
{
	static char hold[] = "--hold", m16[] = "16777216", leak[] = "--leak",
		    rate[] = "65536";
	char *args_fx[] = { hold, m16, leak, rate, NULL };
	char a[16];
	const char *args[] = { "--pid", a, "--no-attach", "--attach-every",
			       "1s", NULL };
	unsigned int port;
	double heap, v;
	char *text;
	int rc, i;

	need_http();
	start(0, "exporter-target", args_fx, NULL);
	snprintf(a, sizeof(a), "%d", (int)fx[0].pid);
	seize_all(fx[0].pid);
	cr_assert_eq(ntids, 2, "the fixture has %zu threads", ntids);
	rc = exporter_start(&exporter, dir, args, &port);
	cr_assert_eq(rc, 0, "starting the exporter: %s", strerror(-rc));
	text = scrape_until_read(port, &fx[0].pid, 1, false);
	/* three scrapes more, readings due at each */
	for (i = 0; i < 3; i++) {
		free(text);
		text = scrape(port);
		nothing_happened("scraped with --no-attach");
	}
	heap = value_of(text, "memsnap_process_memory_bytes", fx[0].pid,
			"part=\"heap\"");
	cr_expect_geq(heap, 16 * MiB, "heap %.0f", heap);
	cr_expect_eq(expo_count(text, "memsnap_allocator_bytes", NULL), 0,
		     "allocator numbers without an attach:\n%s", text);
	cr_expect_eq(value_of(text, "memsnap_exporter_thread_stopped_seconds_total",
			      fx[0].pid, NULL), 0);
	cr_expect_eq(expo_value(text, "memsnap_exporter_attach_failures_total",
				(const char *const[]){ "reason=\"permission\"", NULL },
				&v), 0);
	cr_expect_eq(v, 0, "a reading failed:\n%s", daemon_log(&exporter));
	free(text);
	stop_exporter_cleanly();
	nothing_happened("the exporter stopped");
	release_all();
	fixture_assert_healthy(&fx[0]);
}

/* ---- the command line -------------------------------------------------- */

#define USAGE " (usage: exporter \\[--listen ADDR:PORT | --textfile PATH " \
	"\\[--interval DUR] \\[--once]] \\[--pid PID]... \\[--match REGEX] " \
	"\\[--min-rss SIZE] \\[--cgroup PATH] \\[--max-targets N] " \
	"\\[--attach-every DUR] \\[--no-attach])\n"

Test(exporter, bad_command_lines)
{
	static const struct {
		const char *args[8];
		int code;
		const char *err;	/* fnmatch(3) of all of stderr */
	} rows[] = {
		{ { "exporter" }, 2,
		  "memsnap: exporter: which processes? give --pid, --match, "
		  "--min-rss or --cgroup" USAGE },
		{ { "exporter", "--pid" }, 2,
		  "memsnap: exporter: needs a value: '--pid'" USAGE },
		{ { "exporter", "--pid", "x" }, 2,
		  "memsnap: exporter: not a process id: 'x'" USAGE },
		{ { "exporter", "--match", "(" }, 2,
		  "memsnap: exporter: --match '(': *\n" },
		{ { "exporter", "--cgroup", "../x" }, 2,
		  "memsnap: exporter: --cgroup '../x': not a cgroup's path*\n" },
		{ { "exporter", "--min-rss", "lots" }, 2,
		  "memsnap: exporter: not a size (bytes, or with K, M, G): "
		  "'lots'" USAGE },
		{ { "exporter", "--min-rss", "1M", "--max-targets", "0" }, 2,
		  "memsnap: exporter: not a count of targets (1 to 10000): '0'"
		  USAGE },
		{ { "exporter", "--min-rss", "1M", "--attach-every", "10ms" }, 2,
		  "memsnap: exporter: not a duration (1s at least, e.g. 60s): "
		  "'10ms'" USAGE },
		{ { "exporter", "--min-rss", "1M", "--once" }, 2,
		  "memsnap: exporter: --once goes with --textfile\n" },
		{ { "exporter", "--min-rss", "1M", "--listen", "127.0.0.1:1",
		    "--textfile", "/x.prom" }, 2,
		  "memsnap: exporter: --listen serves, --textfile writes a "
		  "file; give one\n" },
		{ { "exporter", "--min-rss", "1M", "--listen", "localhost" }, 1,
		  "memsnap: exporter: 'localhost' is not ADDR:PORT (e.g. "
		  "127.0.0.1:9853)\n" },
		{ { "exporter", "--min-rss", "1M", "--textfile", "/tmp/x.prom",
		    "--once" }, 4,
		  "memsnap: exporter: --textfile: '/tmp' can be written by "
		  "others (mode 1777): they could plant or swap what is written "
		  "there\n" },
		{ { "exporter", "--min-rss", "1M", "--textfile", "/tmp/x.txt" }, 2,
		  "memsnap: exporter: --textfile: 'x.txt' is not a NAME.prom "
		  "file name: node_exporter reads only *.prom files\n" },
		{ { "exporter", "--pid", "999999999" }, 2,
		  "memsnap: exporter: not a process id: '999999999'" USAGE },
		{ { "exporter", "--frob" }, 2,
		  "memsnap: exporter: unknown option '--frob'" USAGE },
	};
	size_t i;

	bool http = has_http();

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct run r;

		/* a build without HTTP refuses --listen before reading it */
		if (!http && rows[i].code == 1 &&
		    strstr(rows[i].err, "is not ADDR:PORT"))
			continue;
		cr_assert_eq(run_memsnap(&r, rows[i].args), 0);
		cr_expect_eq(r.status, rows[i].code, "row %zu: exit %d: %s", i,
			     r.status, r.err);
		cr_expect_eq(fnmatch(rows[i].err, r.err, 0), 0,
			     "row %zu: stderr:\n%swanted:\n%s", i, r.err,
			     rows[i].err);
		cr_expect_str_empty(r.out, "row %zu", i);
		run_free(&r);
	}
}

/* A pid that is gone: exit 3, one line. */
Test(exporter, a_pid_that_is_gone)
{
	char gone[16];
	const char *args[] = { "exporter", "--pid", gone, NULL };
	struct run r;
	pid_t p = fork();

	cr_assert_geq(p, 0);
	if (!p)
		_exit(0);
	waitpid(p, NULL, 0);
	snprintf(gone, sizeof(gone), "%d", (int)p);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_expect_eq(r.status, 3, "%s", r.err);
	cr_expect_eq(count_lines(r.err), 1, "%s", r.err);
	cr_expect(strstr(r.err, "no such process"), "%s", r.err);
	run_free(&r);
}

/* ---- the listener, attacked ------------------------------------------- */

/* @req from a new connection: the reply's status (0 for none: the
 * connection closed without one). */
static int attack(unsigned int port, const char *from, const void *req,
		  size_t len)
{
	char *reply = NULL;
	int fd = net_connect(port, from), code;

	cr_assert_geq(fd, 0, "connect: %s", strerror(-fd));
	net_send(fd, req, len);	/* the server may close before all of it */
	shutdown(fd, SHUT_WR);
	net_read_all(fd, 15000, &reply, NULL);
	close(fd);
	code = http_status(reply);
	free(reply);
	return code;
}

static size_t open_fds(pid_t pid)
{
	char path[64];
	struct dirent *d;
	size_t n = 0;
	DIR *fd;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	fd = opendir(path);
	cr_assert_not_null(fd);
	while ((d = readdir(fd)))
		n += d->d_name[0] != '.';
	closedir(fd);
	return n;
}

/* A request written as a literal, its NUL left out. */
#define ATTACK(port, lit) attack((port), "127.0.0.2", (lit), sizeof(lit) - 1)

/* A scrape answered within @ms while the attack holds on. */
static void still_serves(unsigned int port, pid_t target, long ms,
			 const char *when)
{
	long t0 = prom_now_ms();
	char *text = scrape(port), p[32];
	const char *l[] = { pid_label(target, p, sizeof(p)), NULL };

	cr_expect_lt(prom_now_ms() - t0, ms, "%s: a scrape took %ld ms", when,
		     prom_now_ms() - t0);
	cr_expect_eq(expo_count(text, "memsnap_process_rss_bytes", l), 1,
		     "%s:\n%s", when, text);
	free(text);
}

Test(exporter_listener, attacked_and_still_serving)
{
	static char hold[] = "--hold", m8[] = "8388608";
	char *fxargs[] = { hold, m8, NULL };
	char a[16], big[128 * 1024], *text;
	const char *args[] = { "--pid", a, NULL };
	int idle[200], slow[40], code, i, n_idle = 0;
	static const char *const methods[] = { "PUT", "DELETE", "OPTIONS",
					       "TRACE", "PATCH", "CONNECT",
					       "FROB" };
	unsigned int port;
	size_t fds_before;
	double v;
	int rc, n;

	need_http();
	start(0, "exporter-target", fxargs, NULL);
	snprintf(a, sizeof(a), "%d", (int)fx[0].pid);
	rc = exporter_start(&exporter, dir, args, &port);
	cr_assert_eq(rc, 0, "starting the exporter: %s", strerror(-rc));
	free(scrape_until_read(port, &fx[0].pid, 1, true));
	fds_before = open_fds(exporter.pid);

	/* malformed */
	code = ATTACK(port, "\x00\x01\xff garbage\r\n\r\n");
	cr_expect(code == 400 || code == 0, "garbage: %d", code);
	code = ATTACK(port, "GET /metrics\r\n\r\n");
	cr_expect(code != 200, "HTTP/0.9: %d", code);
	code = ATTACK(port, "GET /metrics HTTP/9.9\r\n\r\n");
	cr_expect(code != 200, "HTTP/9.9: %d", code);
	code = ATTACK(port,
		      "GET /metrics HTTP/1.1\r\nHost: a\r\nHost: b\r\n"
		      "Bad Header\r\n\r\n");
	cr_expect(code != 200, "a header without a colon: %d", code);
	/* oversized: a request line, a header, many headers */
	memcpy(big, "GET /", 5);
	memset(big + 5, 'a', sizeof(big) - 5);
	code = attack(port, "127.0.0.2", big, sizeof(big));
	cr_expect(code == 414 || code == 431 || code == 400 || code == 0,
		  "a 128 KiB request line: %d", code);
	n = snprintf(big, sizeof(big), "GET /metrics HTTP/1.1\r\nX: ");
	memset(big + n, 'b', sizeof(big) - (size_t)n);
	code = attack(port, "127.0.0.2", big, sizeof(big));
	cr_expect(code == 431 || code == 413 || code == 400 || code == 0,
		  "a 128 KiB header: %d", code);
	/* bodies, methods, paths */
	code = ATTACK(port,
		      "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
		      "\r\nhello");
	cr_expect(code == 413 || code == 405, "POST with a body: %d", code);
	code = ATTACK(port,
		      "GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
		      "chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
	cr_expect_eq(code, 413, "GET with a chunked body");
	for (i = 0; i < (int)(sizeof(methods) / sizeof(methods[0])); i++) {
		char req[128];

		n = snprintf(req, sizeof(req),
			     "%s /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
			     methods[i]);
		code = attack(port, "127.0.0.2", req, (size_t)n);
		cr_expect(code == 405 || code == 400 || code == 501,
			  "%s: %d", methods[i], code);
	}
	code = ATTACK(port,
		      "GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n");
	cr_expect_eq(code, 404, "a path out of the tree");
	code = ATTACK(port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
	cr_expect_eq(code, 200, "the index page");
	/* a query chooses nothing: the same one target */
	{
		char *body = NULL;
		int st;

		cr_assert_eq(http_get(port, "/metrics?pid=1&match=.*", 10000,
				      &st, &body), 0);
		cr_expect_eq(st, 200);
		cr_expect_eq(expo_value(body, "memsnap_exporter_targets", NULL,
					&v), 0);
		cr_expect_eq(v, 1, "a query changed the targets");
		cr_expect_eq(expo_count(body, "memsnap_process_rss_bytes",
					(const char *const[]){ "pid=\"1\"", NULL }),
			     0, "pid 1 became a target");
		free(body);
	}
	/* pipelined: forty requests in one write */
	{
		char req[64 * 40] = "";

		for (i = 0; i < 40; i++)
			strcat(req, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
		code = attack(port, "127.0.0.2", req, strlen(req));
		cr_expect_eq(code, 200, "pipelined");
	}

	/* many idle connections from one address, half-sent requests from
	 * another: the exporter keeps answering a third */
	for (i = 0; i < 200; i++) {
		idle[i] = net_connect(port, "127.0.0.2");
		n_idle += idle[i] >= 0;
	}
	cr_expect_gt(n_idle, 0);
	for (i = 0; i < 40; i++) {
		slow[i] = net_connect(port, "127.0.0.3");
		if (slow[i] >= 0)
			net_send(slow[i], "GET /metrics HTTP/1.1\r\nX-Slow: ", 31);
	}
	still_serves(port, fx[0].pid, 5000, "200 idle and 40 half-sent");
	still_serves(port, fx[0].pid, 5000, "again");
	cr_expect_leq(open_fds(exporter.pid), fds_before + 2 * 8 + 4,
		      "the exporter took more connections than its bounds");
	for (i = 0; i < 200; i++)
		if (idle[i] >= 0)
			close(idle[i]);
	for (i = 0; i < 40; i++)
		if (slow[i] >= 0)
			close(slow[i]);

	/* its own counters say what it refused */
	text = scrape(port);
	cr_expect_eq(expo_value(text, "memsnap_exporter_http_requests_total",
				(const char *const[]){ "code=\"405\"", NULL }, &v), 0);
	cr_expect_geq(v, 6, "405s counted: %.0f", v);
	cr_expect_eq(expo_value(text, "memsnap_exporter_http_requests_total",
				(const char *const[]){ "code=\"404\"", NULL }, &v), 0);
	cr_expect_geq(v, 1);
	promtool_accepts(text);
	free(text);
	assert_untouched(&fx[0], "the listener attacked");
	stop_exporter_cleanly();
}

/* ---- a pid that exits and is taken by another user's process ----------- */

/* fx[0]'s pid, taken by exporter-target run as uid 65534 (clone3 with
 * set_tid: root and Linux 5.5), in @impostor. */
static void take_its_pid(void)
{
	char path[PATH_MAX];
	char *argv[] = { (char *)"/usr/bin/setpriv", (char *)"--reuid=65534",
			 (char *)"--regid=65534", (char *)"--clear-groups",
			 path, NULL };
	pid_t pid = fx[0].pid;
	int rc;

	fixture_path("exporter-target", path, sizeof(path));
	fixture_stop(&fx[0]);
	rc = fixture_start_at_pid(&impostor, argv, NULL, 10000, pid);
	if (rc)
		skip_test("clone3 with set_tid: %s (needs root and Linux 5.5)",
			  strerror(-rc));
	cr_assert_eq(impostor.pid, pid);
}

static uint64_t start_of(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	FILE *f;
	int i;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	p = strrchr(buf, ')');
	for (i = 0; p && i < 20; i++)
		p = strchr(p + 1, ' ');
	cr_assert_not_null(p);
	sscanf(p + 1, "%llu", &v);
	return v;
}

/* Scrape until memsnap_exporter_targets_ended_total is @n. */
static char *scrape_until_ended(unsigned int port, double n)
{
	long deadline = prom_now_ms() + 20000;
	char *text = NULL;
	double v = -1;

	while (prom_now_ms() < deadline) {
		free(text);
		text = scrape(port);
		if (!expo_value(text, "memsnap_exporter_targets_ended_total",
				NULL, &v) && v == n)
			return text;
	}
	cr_assert_fail("targets_ended_total %.0f, not %.0f:\n%s", v, n, text);
	return NULL;
}

/* --pid N: the process exits, another user's takes N; the exporter ends
 * the target and never reads, attaches or names the new process. */
Test(exporter_reuse, a_given_pid_taken_by_another_user_is_never_attached)
{
	char a[16], p[32], *text;
	const char *args[] = { "--pid", a, "--attach-every", "1s", NULL };
	unsigned int port;
	int i, rc;

	need_http();
	start(0, "exporter-target", NULL, NULL);
	snprintf(a, sizeof(a), "%d", (int)fx[0].pid);
	rc = exporter_start(&exporter, dir, args, &port);
	cr_assert_eq(rc, 0, "starting the exporter: %s", strerror(-rc));
	free(scrape_until_read(port, &fx[0].pid, 1, true));
	/* the test can fail: an attach leaves its stub page */
	cr_assert_geq(stub_pages(fx[0].pid), 1, "no attach seen at all");
	take_its_pid();
	cr_assert_eq(stub_pages(impostor.pid), 0);
	text = scrape_until_ended(port, 1);
	/* readings would be due every second: give it three more */
	for (i = 0; i < 3; i++) {
		free(text);
		text = scrape(port);
	}
	cr_expect_eq(expo_count(text, "memsnap_process_rss_bytes",
				(const char *const[]){ pid_label(impostor.pid, p, sizeof(p)), NULL }),
		     0, "the new process is served under the old pid:\n%s", text);
	cr_expect_eq(expo_value(text, "memsnap_exporter_targets", NULL,
				&(double){ 0 }), 0);
	free(text);
	cr_expect_eq(stub_pages(impostor.pid), 0,
		     "memsnap attached to the process that took the pid");
	assert_untouched(&impostor, "the process that took the pid");
	text = daemon_log(&exporter);
	cr_expect(strstr(text, "exited: it is no longer a target"), "%s", text);
	free(text);
	stop_exporter_cleanly();
}

/* --match: the process that takes the pid matches too, so it may be a
 * target, but a new one: another start label, never the old series. */
Test(exporter_reuse, a_matched_pid_taken_is_a_new_series)
{
	char old[64], p[32], *text;
	const char *args[] = { "--match", "^exporter-targe", "--no-attach",
			       "--attach-every", "1s", NULL };
	unsigned int port;
	long deadline;
	int rc;

	need_http();
	start(0, "exporter-target", NULL, NULL);
	rc = exporter_start(&exporter, dir, args, &port);
	cr_assert_eq(rc, 0, "starting the exporter: %s", strerror(-rc));
	text = scrape_until_read(port, &fx[0].pid, 1, false);
	snprintf(old, sizeof(old), "start=\"%" PRIu64 "\"", start_of(fx[0].pid));
	cr_assert_eq(expo_count(text, "memsnap_process_rss_bytes",
				(const char *const[]){ pid_label(fx[0].pid, p, sizeof(p)), old, NULL }),
		     1, "%s", text);
	free(text);
	take_its_pid();
	/* the new process, found again, under its own start */
	deadline = prom_now_ms() + 20000;
	for (text = NULL; prom_now_ms() < deadline;) {
		char now[64];

		free(text);
		text = scrape(port);
		snprintf(now, sizeof(now), "start=\"%" PRIu64 "\"",
			 start_of(impostor.pid));
		cr_assert_eq(expo_count(text, "memsnap_process_rss_bytes",
					(const char *const[]){ p, old, NULL }),
			     0, "the old series goes on with the new process:\n%s",
			     text);
		if (expo_count(text, "memsnap_process_rss_bytes",
			       (const char *const[]){ p, now, NULL }) == 1)
			break;
	}
	cr_expect_lt(prom_now_ms(), deadline, "the new process is not found:\n%s",
		     text);
	free(text);
	assert_untouched(&impostor, "the process that took the pid");
	stop_exporter_cleanly();
}

/* Between the pin and the attach: the exporter stopped (traced by the
 * test) at its PTRACE_SEIZE of the target, the target is replaced by
 * another user's process with its pid, then the exporter goes on.  It
 * must see the pin no longer holds and touch nothing. */
static pid_t reused;

static bool seizes_it(const struct sc_entry *e)
{
	return e->nr == SYS_ptrace && e->args[0] == PTRACE_SEIZE &&
	       (pid_t)e->args[1] == reused;
}

static bool replace_the_target(pid_t m)
{
	(void)m;
	take_its_pid();
	return false;
}

Test(exporter_reuse, a_pid_taken_between_pin_and_attach_is_refused)
{
	char a[16], out[PATH_MAX + 16], p[32], *text = NULL;
	const char *args[] = { "exporter", "--pid", a, "--textfile", out,
			       "--once", NULL };
	struct run r;
	int fd;

	start(0, "exporter-target", NULL, NULL);
	reused = fx[0].pid;
	snprintf(a, sizeof(a), "%d", (int)reused);
	snprintf(out, sizeof(out), "%s/memsnap.prom", dir);
	cr_assert(run_traced(args, seizes_it, replace_the_target, &r),
		  "the exporter never seized pid %d: exit %d: %s", (int)reused,
		  r.status, r.err);
	cr_assert_eq(impostor.pid, reused);
	cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_expect(strstr(r.err, "exited"), "%s", r.err);
	run_free(&r);
	fd = open(out, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s: %s", out, strerror(errno));
	net_read_all(fd, 1000, &text, NULL);
	close(fd);
	cr_expect_eq(expo_count(text, "memsnap_process_rss_bytes",
				(const char *const[]){ pid_label(reused, p, sizeof(p)), NULL }),
		     0, "the new process was read:\n%s", text);
	free(text);
	cr_expect_eq(stub_pages(impostor.pid), 0,
		     "memsnap mapped its stub into the new process");
	assert_untouched(&impostor, "the process that took the pid");
}

/* ---- the capabilities the shipped unit and DaemonSet give ---------------- */

/* The tree's @rel, from $MEMSNAP_TESTDATA (tests/data). */
static void tree_path(const char *rel, char *buf, size_t size)
{
	const char *data = getenv("MEMSNAP_TESTDATA");

	cr_assert_not_null(data, "MEMSNAP_TESTDATA is not set");
	snprintf(buf, size, "%s/../../%s", data, rel);
}

static char *slurp_file(const char *path)
{
	char *text = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	net_read_all(fd, 1000, &text, NULL);
	close(fd);
	return text;
}

/* The capabilities of the unit's CapabilityBoundingSet, as setpriv's
 * "+sys_ptrace,+kill,...", sorted by the order they are written. */
static void unit_caps(char *caps, size_t size)
{
	char path[PATH_MAX], *text, *line, *tok, *save = NULL;
	size_t n = 0;

	tree_path("contrib/systemd/memsnap-exporter.service", path, sizeof(path));
	text = slurp_file(path);
	line = strstr(text, "\nCapabilityBoundingSet=");
	cr_assert_not_null(line, "no CapabilityBoundingSet in %s", path);
	line += strlen("\nCapabilityBoundingSet=");
	line[strcspn(line, "\n")] = '\0';
	caps[0] = '\0';
	for (tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		size_t i;

		cr_assert(!strncmp(tok, "CAP_", 4), "%s", tok);
		n += (size_t)snprintf(caps + n, size - n, ",+");
		for (i = 4; tok[i] && n + 1 < size; i++)
			caps[n++] = (char)tolower((unsigned char)tok[i]);
		caps[n] = '\0';
	}
	free(text);
}

/* The DaemonSet's capabilities.add, the same way. */
static void manifest_caps(char *caps, size_t size)
{
	char path[PATH_MAX], *text, *p;
	size_t n = 0;

	tree_path("contrib/kubernetes/memsnap-exporter.yaml", path, sizeof(path));
	text = slurp_file(path);
	p = strstr(text, "\n              add:\n");
	cr_assert_not_null(p, "no capabilities.add in %s", path);
	p = strchr(p + 1, '\n') + 1;
	caps[0] = '\0';
	while (!strncmp(p, "                - ", 18)) {
		size_t i;

		p += 18;
		n += (size_t)snprintf(caps + n, size - n, ",+");
		for (i = 0; p[i] && p[i] != ' ' && p[i] != '\n' && n + 1 < size; i++)
			caps[n++] = (char)tolower((unsigned char)p[i]);
		caps[n] = '\0';
		p = strchr(p, '\n') + 1;
	}
	free(text);
	cr_assert(strstr(text = slurp_file(path), "hostPID: true"));
	cr_assert(strstr(text, "readOnlyRootFilesystem: true"));
	cr_assert(strstr(text, "drop:\n                - ALL"));
	free(text);
}

/* The exporter, once, in a mount namespace of its own (as the unit's
 * PrivateTmp makes), with no_new_privs and the bounding set @caps:
 * how many targets it read the allocator of.  (memsnap opened before
 * /tmp is hidden: a tree under /tmp.) */
static size_t read_with(const char *caps, const char *a, const char *b)
{
	char cmd[4096];
	struct run r;
	size_t n;

	snprintf(cmd, sizeof(cmd),
		 "exec unshare --mount sh -c 'exec 9<\"$0\" && "
		 "mount -t tmpfs none /tmp && "
		 "mkdir -m 755 /tmp/o && setpriv --no-new-privs "
		 "--inh-caps=-all --bounding-set=-all%s /proc/self/fd/9 exporter "
		 "--pid %s --pid %s --textfile /tmp/o/m.prom --once && "
		 "cat /tmp/o/m.prom' '%s'",
		 caps, a, b, getenv("MEMSNAP_BIN"));
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s: %s", caps, r.err);
	n = expo_count(r.out, "memsnap_allocator_bytes",
		       (const char *const[]){ "stat=\"in_use\"", NULL });
	run_free(&r);
	return n;
}

/* A process of another user, and one of another user in a pid and mount
 * namespace of its own (a container): the unit's capabilities (the
 * DaemonSet's are the same) read both; without any one of those the
 * readings of every process need, neither. */
Test(exporter, the_shipped_capabilities_are_enough)
{
	char path[PATH_MAX], caps[512], mcaps[512], a[16], b[16], less[512];
	char *nobody[] = { (char *)"/usr/bin/setpriv", (char *)"--reuid=65534",
			   (char *)"--regid=65534", (char *)"--clear-groups",
			   path, NULL };
	char inner[PATH_MAX + 256];
	char *contained[] = { (char *)"/usr/bin/unshare", (char *)"--pid",
			      (char *)"--mount", (char *)"--fork",
			      (char *)"--mount-proc", (char *)"/bin/sh",
			      (char *)"-c", inner, NULL };
	static const char *const needed[] = { "sys_ptrace", "dac_override",
					      "kill", "setuid", "setgid" };
	char task[64];
	long child = 0;
	FILE *f;
	size_t i;
	int rc;

	if (access("/usr/bin/setpriv", X_OK) || access("/usr/bin/unshare", X_OK))
		skip_test("setpriv and unshare (util-linux) are needed");
	unit_caps(caps, sizeof(caps));
	manifest_caps(mcaps, sizeof(mcaps));
	cr_assert_str_eq(caps, mcaps, "the unit and the DaemonSet differ");
	fixture_path("exporter-target", path, sizeof(path));
	rc = fixture_start(&fx[0], nobody, NULL, 10000);
	cr_assert_eq(rc, 0, "%s", strerror(-rc));
	/* the fixture opened before /tmp is hidden (a tree under /tmp) */
	snprintf(inner, sizeof(inner),
		 "exec 9<'%s' && mount -t tmpfs none /tmp && exec setpriv "
		 "--reuid=65534 --regid=65534 --clear-groups /proc/self/fd/9",
		 path);
	rc = fixture_start(&fx[1], contained, NULL, 10000);
	cr_assert_eq(rc, 0, "%s", strerror(-rc));
	snprintf(task, sizeof(task), "/proc/%d/task/%d/children",
		 (int)fx[1].pid, (int)fx[1].pid);
	f = fopen(task, "r");
	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%ld", &child), 1);
	fclose(f);
	snprintf(a, sizeof(a), "%d", (int)fx[0].pid);
	snprintf(b, sizeof(b), "%ld", child);

	cr_expect_eq(read_with(caps, a, b), 2, "with %s", caps);
	cr_expect_eq(read_with("", a, b), 0, "with no capability at all");
	for (i = 0; i < sizeof(needed) / sizeof(needed[0]); i++) {
		char drop[64];
		const char *at;

		snprintf(drop, sizeof(drop), ",+%s", needed[i]);
		at = strstr(caps, drop);
		cr_assert_not_null(at, "%s is not in the unit's set", needed[i]);
		snprintf(less, sizeof(less), "%.*s%s", (int)(at - caps), caps,
			 at + strlen(drop));
		cr_expect_eq(read_with(less, a, b), 0, "%s is not needed", needed[i]);
	}
	assert_untouched(&fx[0], "read with the shipped capabilities");
	fixture_assert_healthy(&fx[1]);
}

/* A zombie or a kernel thread given with --pid: exit 3, said so. */
Test(exporter, a_zombie_or_a_kernel_thread_is_refused)
{
	char zpid[16], comm[64] = "";
	const char *zargs[] = { "exporter", "--pid", zpid, NULL };
	const char *kargs[] = { "exporter", "--pid", "2", NULL };
	struct run r;
	FILE *f;
	pid_t z = fork();

	cr_assert_geq(z, 0);
	if (!z)
		_exit(0);
	/* unreaped: a zombie as soon as it has exited */
	while (fixture_state(&(struct fixture){ .pid = z }) != 'Z')
		sched_yield();
	snprintf(zpid, sizeof(zpid), "%d", (int)z);
	cr_assert_eq(run_memsnap(&r, zargs), 0);
	cr_expect_eq(r.status, 3, "%s", r.err);
	cr_expect(strstr(r.err, "is a zombie"), "%s", r.err);
	run_free(&r);
	waitpid(z, NULL, 0);
	f = fopen("/proc/2/comm", "r");
	if (f && fgets(comm, sizeof(comm), f) && !strcmp(comm, "kthreadd\n")) {
		cr_assert_eq(run_memsnap(&r, kargs), 0);
		cr_expect_eq(r.status, 3, "%s", r.err);
		cr_expect(strstr(r.err, "pid 2 (kthreadd) is a kernel thread"),
			  "%s", r.err);
		run_free(&r);
	}
	if (f)
		fclose(f);
}

/* A JVM holding 96 MiB of arrays, then twice as much: its part is
 * `runtime`, its own counters are memsnap_runtime_bytes, and the part
 * grows at the scrapes after the arrays doubled. */
Test(exporter, a_runtime_heap_and_its_numbers)
{
	static char java[] = "/usr/bin/java";
	char path[PATH_MAX], a[16], reply[128];
	char *argv[] = { java, (char *)"-Xmx256m", path, (char *)"96", NULL };
	const char *args[] = { "--pid", a, "--attach-every", "1s", NULL };
	double part, used, max, later = 0;
	unsigned int port;
	long deadline;
	char *text;
	int rc;

	need_http();
	if (access(java, X_OK))
		skip_test("%s is not installed (apt-get install "
			  "default-jre-headless)", java);
	fixture_path("RuntimeGrow.java", path, sizeof(path));
	rc = fixture_start(&fx[0], argv, NULL, 90000);
	cr_assert_eq(rc, 0, "starting java %s: %s", path, strerror(-rc));
	max = strtod(strstr(fx[0].ready, "max=") + 4, NULL);
	snprintf(a, sizeof(a), "%d", (int)fx[0].pid);
	rc = exporter_start(&exporter, dir, args, &port);
	cr_assert_eq(rc, 0, "starting the exporter: %s", strerror(-rc));
	text = scrape_until_read(port, &fx[0].pid, 1, false);
	part = value_of(text, "memsnap_process_memory_bytes", fx[0].pid,
			"part=\"runtime\"");
	cr_expect_geq(part, 96 * MiB, "the JVM's part: %.0f", part);
	used = value_of(text, "memsnap_runtime_bytes", fx[0].pid,
			"stat=\"heap_used\"");
	cr_expect_geq(used, 96 * MiB, "its heap used: %.0f", used);
	cr_expect(fabs(value_of(text, "memsnap_runtime_bytes", fx[0].pid,
				"stat=\"heap_max\"") - max) <= max / 100,
		  "its heap's most, against Runtime.maxMemory() %.0f", max);
	free(text);
	cr_assert_eq(fixture_command(&fx[0], 'g', reply, sizeof(reply), 60000),
		     0);
	deadline = prom_now_ms() + 30000;
	while (prom_now_ms() < deadline && later < part + 64 * MiB) {
		text = scrape(port);
		later = value_of(text, "memsnap_process_memory_bytes", fx[0].pid,
				 "part=\"runtime\"");
		free(text);
	}
	cr_expect_geq(later, part + 64 * MiB,
		      "the arrays doubled, the part went from %.0f to %.0f",
		      part, later);
	fixture_assert_healthy(&fx[0]);
	stop_exporter_cleanly();
}

/* memsnap-static: no HTTP server (exit 5, one line saying what to use),
 * and --textfile works. */
Test(exporter, the_static_binary_writes_the_textfile_only)
{
	const char *bin = getenv("MEMSNAP_STATIC");
	char a[16], out[PATH_MAX + 16], *text = NULL, p[32];
	char *http[] = { (char *)bin, (char *)"exporter", (char *)"--pid", a,
			 NULL };
	char *file[] = { (char *)bin, (char *)"exporter", (char *)"--pid", a,
			 (char *)"--textfile", out, (char *)"--once", NULL };
	struct run r;
	int fd;

	if (!bin || access(bin, X_OK))
		skip_test("no static binary (%s): a sanitized build has none",
			  bin ? bin : "MEMSNAP_STATIC unset");
	start(0, "exporter-target", NULL, NULL);
	snprintf(a, sizeof(a), "%d", (int)fx[0].pid);
	snprintf(out, sizeof(out), "%s/memsnap.prom", dir);
	cr_assert_eq(run_argv_with(&r, http, NULL, NULL), 0);
	cr_expect_eq(r.status, 5, "%s", r.err);
	cr_expect_eq(count_lines(r.err), 1, "%s", r.err);
	cr_expect(strstr(r.err, "no HTTP server") && strstr(r.err, "--textfile"),
		  "%s", r.err);
	run_free(&r);
	cr_assert_eq(run_argv_with(&r, file, NULL, NULL), 0);
	cr_expect_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	fd = open(out, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s: %s", out, strerror(errno));
	net_read_all(fd, 1000, &text, NULL);
	close(fd);
	cr_expect_eq(expo_count(text, "memsnap_allocator_bytes",
				(const char *const[]){ pid_label(fx[0].pid, p, sizeof(p)), "stat=\"in_use\"", NULL }),
		     1, "%s", text);
	free(text);
	assert_untouched(&fx[0], "read by the static binary");
}
