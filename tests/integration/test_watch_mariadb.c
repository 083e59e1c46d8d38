/*
 * memsnap watch --sampler on Debian's mariadbd (10.11, glibc malloc): a
 * session that leaks, user variables of 1 MiB set one after another
 * and never unset, while a client scans a 40 MB table through a 64 MiB
 * buffer pool that InnoDB maps itself.  The report's headline names the
 * heap in use as what still grows, never the pool (other anonymous
 * memory), and the call site that grew is MariaDB's own (update_hash or
 * set_var_user::update), not its allocator wrapper (my_malloc).  The
 * server answers after, its sampler switched off.
 */
#include "../lib/fixture.h"
#include "../lib/mariadb.h"
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
#include <time.h>
#include <unistd.h>

static struct mariadb db = { .pid = -1 };
static pid_t watcher = -1, scanner = -1;
static char base[PATH_MAX];

static void teardown(void)
{
	pid_t *p[] = { &watcher, &scanner };
	size_t i;

	for (i = 0; i < 2; i++)
		if (*p[i] > 0) {
			kill(*p[i], SIGKILL);
			waitpid(*p[i], NULL, 0);
			*p[i] = -1;
		}
	mariadb_stop(&db);
	scratch_cleanup(base);
}

TestSuite(watch_mariadb, .fini = teardown, .timeout = 240);

static void sql(const char *query, char *out, size_t size)
{
	char buf[4096];

	cr_assert_eq(mariadb_sql(&db, query, out ? out : buf,
				 out ? size : sizeof(buf)), 0, "%s: %s", query,
		     out ? out : buf);
}

/* memsnap --pid PID watch -o BASE/w: 16 ticks of 0.5 s, a dump every
 * 3, through memsnap's sampler, in the background. */
static pid_t watch(void)
{
	const char *bin = getenv("MEMSNAP_BIN");
	char pid[16], dir[PATH_MAX + 16];
	pid_t w;

	snprintf(pid, sizeof(pid), "%d", (int)db.pid);
	snprintf(dir, sizeof(dir), "%s/w", base);
	w = fork();
	cr_assert_geq(w, 0);
	if (w == 0) {
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

		if (null >= 0)
			dup2(null, STDOUT_FILENO);
		execl(bin ? bin : "./memsnap", "memsnap", "--pid", pid, "watch",
		      "-o", dir, "--interval", "0.5s", "--count", "16",
		      "--dump-every", "3", "--sampler", (char *)NULL);
		_exit(127);
	}
	return w;
}

/* A client scanning the table over and over, each scan checked. */
static pid_t scan(void)
{
	pid_t p = fork();

	cr_assert_geq(p, 0);
	if (p == 0) {
		char out[256];

		for (;;)
			if (mariadb_sql(&db, "SELECT SUM(LENGTH(v)) FROM m.t",
					out, sizeof(out)) ||
			    strcmp(out, "40000000\n"))
				_exit(1);
	}
	return p;
}

static double since(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t0->tv_sec) +
	       (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

Test(watch_mariadb, a_leaking_session_beside_a_buffer_pool)
{
	char dir[PATH_MAX + 16], out[256], head[1024], first[256];
	const char *args[] = { "report", dir, "--json", NULL };
	struct timespec t0;
	unsigned int n = 0;
	int st = 0, rc;
	struct run r;
	FILE *session;

	rc = mariadb_start(&db, "64M");
	if (rc == -ENOENT)
		cr_skip_test("mariadb-server is not installed (apt-get install "
			     "mariadb-server-core mariadb-client-core)");
	cr_assert_eq(rc, 0, "mariadbd: %s (see %s/err)", strerror(-rc),
		     db.dir);
	rc = scratch_make("memsnap-test-watch-mariadb", base, sizeof(base));
	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	sql("CREATE DATABASE m; USE m; CREATE TABLE t (id INT PRIMARY KEY, "
	    "v VARCHAR(1000)) ENGINE=InnoDB; INSERT INTO t SELECT seq, "
	    "REPEAT('x', 1000) FROM seq_1_to_40000", NULL, 0);

	session = mariadb_session(&db);
	cr_assert_not_null(session, "%s", strerror(errno));
	scanner = scan();
	watcher = watch();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* 4 MiB a second of user variables, none unset, until the watch
	 * ends */
	while (waitpid(watcher, &st, WNOHANG) == 0) {
		if (n < (unsigned int)(4 * since(&t0)) && n < 200) {
			fprintf(session, "SET @v%u = REPEAT('%c', 1048576);\n",
				n, 'a' + n % 26);
			fflush(session);
			n++;
		} else {
			struct timespec step = { 0, 20 * 1000 * 1000 };

			nanosleep(&step, NULL);
		}
	}
	watcher = -1;
	cr_assert(WIFEXITED(st) && !WEXITSTATUS(st), "watch: %#x", st);
	cr_assert_gt(n, 20, "only %u variables set during the watch", n);
	kill(scanner, SIGKILL);
	waitpid(scanner, &st, 0);
	scanner = -1;
	cr_assert(WIFSIGNALED(st), "a scan of the table failed: %#x", st);

	snprintf(dir, sizeof(dir), "%s/w", base);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "report: %s", r.err);
	json_str_get(r.out, "headline", head, sizeof(head));
	cr_assert(!strncmp(head, "heap in use still growing at +", 30),
		  "the headline: %s\n%s", head, r.out);
	cr_assert_null(strstr(head, "other anonymous memory still growing"),
		       "the pool is no leak: %s", head);
	json_str_get(strstr(r.out, "\"sites\": ["), "name", first, sizeof(first));
	cr_assert(!strncmp(first, "update_hash(", 12) ||
			  !strncmp(first, "set_var_user::update", 20),
		  "the site that grew most: '%s'\n%s", first, r.out);
	cr_assert_null(strstr(strstr(r.out, "\"sites\": ["),
			      "\"name\": \"my_malloc\""), "%s", r.out);
	run_free(&r);

	/* the session still works, and so does the server, sampler off */
	fprintf(session, "SELECT LENGTH(@v0);\n");
	cr_assert_eq(mariadb_end(session), 0, "the leaking session failed");
	cr_assert(mariadb_alive(&db), "mariadbd does not answer");
	sql("SELECT COUNT(*) FROM m.t WHERE v = REPEAT('x', 1000)", out,
	    sizeof(out));
	cr_assert_str_eq(out, "40000\n");
	snprintf(out, sizeof(out), "%d", (int)db.pid);
	{
		const char *info[] = { "--pid", out, "info", "--no-attach",
				       NULL };

		cr_assert_eq(run_memsnap(&r, info), 0);
		cr_assert(strstr(r.out, "sampler   off"), "%s", r.out);
		run_free(&r);
	}
}
