/*
 * memsnap's sampler in a real forking server: Debian's PostgreSQL 15,
 * whose postmaster forks a backend per connection.  The sampler is
 * switched on in the postmaster; a backend forked after that inherits
 * its hooks and its copy of the table, so `memsnap --pid BACKEND dump`
 * is that session's profile, and `prof off` there switches the
 * backend's copy off while the postmaster's runs on.  Every session
 * keeps answering, and a backend forked after the postmaster's own
 * prof off serves too.  And explain on the postmaster: its RSS is
 * mostly the segment it shares with every backend, which explain says,
 * with who else maps it.  Skips where postgresql-15 is not installed.
 */
#include "test_explain_lib.h"
#include "../lib/fault.h"
#include "../lib/fixture.h"
#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PG_BIN "/usr/lib/postgresql/15/bin"

static char dir[PATH_MAX];
static pid_t postmaster = -1;

/* One psql session: queries in, one line of answer out. */
struct session {
	pid_t pid;
	int in, out;
};

static struct session sess = { .pid = -1, .in = -1, .out = -1 };

static void session_close(struct session *s)
{
	if (s->in >= 0)
		close(s->in);	/* psql ends at EOF */
	if (s->out >= 0)
		close(s->out);
	if (s->pid > 0)
		while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
			;
	*s = (struct session){ .pid = -1, .in = -1, .out = -1 };
}

/* A command as the postgres user, its output in @r. */
static int as_postgres(struct run *r, const char *cmd)
{
	char full[5 * PATH_MAX];

	snprintf(full, sizeof(full), "su postgres -s /bin/sh -c \"%s\"", cmd);
	return run_shell(r, full);
}

static void setup(void)
{
	int rc = scratch_make("/tmp/memsnap-pg", dir, sizeof(dir));

	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
}

static void teardown(void)
{
	char cmd[4 * PATH_MAX];
	struct run r;

	explain_free_all();
	session_close(&sess);
	if (postmaster > 0) {
		snprintf(cmd, sizeof(cmd), PG_BIN "/pg_ctl -D %s/data -m "
			 "immediate -w stop", dir);
		if (!as_postgres(&r, cmd))
			run_free(&r);
		postmaster = -1;
	}
	scratch_cleanup(dir);
}

TestSuite(postgres, .init = setup, .fini = teardown, .timeout = 180);

/* initdb and a postmaster on a socket in dir, no TCP, @opts (-c
 * settings, "" none) beside; its pid. */
static void start_postgres(const char *opts)
{
	char cmd[4 * PATH_MAX], path[PATH_MAX + 32];
	struct passwd *pw = getpwnam("postgres");
	struct run r;
	FILE *f;

	if (access(PG_BIN "/postgres", X_OK) || !pw)
		cr_skip_test("PostgreSQL 15 is not installed "
			     "(apt-get install postgresql-15)");
	cr_assert_eq(chown(dir, pw->pw_uid, pw->pw_gid), 0, "chown: %s",
		     strerror(errno));
	snprintf(cmd, sizeof(cmd), PG_BIN "/initdb -D %s/data -A trust "
		 "--no-sync -E UTF8 --locale=C >%s/initdb.log 2>&1", dir, dir);
	cr_assert_eq(as_postgres(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "initdb: %s", r.out);
	run_free(&r);
	/* -w: pg_ctl returns once the server accepts connections */
	snprintf(cmd, sizeof(cmd), PG_BIN "/pg_ctl -D %s/data -w -l %s/log "
		 "-o \\\"-k %s -c listen_addresses='' -c fsync=off %s\\\" start",
		 dir, dir, dir, opts);
	cr_assert_eq(as_postgres(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "pg_ctl start: %s", r.out);
	run_free(&r);
	snprintf(path, sizeof(path), "%s/data/postmaster.pid", dir);
	f = fopen(path, "re");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_eq(fscanf(f, "%d", &postmaster), 1);
	fclose(f);
}

/* psql as postgres on the server's socket, unaligned, tuples only. */
static void session_open(struct session *s)
{
	char sh[2 * PATH_MAX];
	int to[2], from[2];

	cr_assert_eq(pipe2(to, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(from, O_CLOEXEC), 0);
	snprintf(sh, sizeof(sh), "exec " PG_BIN "/psql -h %s -qAt "
		 "-v ON_ERROR_STOP=0 postgres", dir);
	s->pid = fork();
	cr_assert_geq(s->pid, 0);
	if (!s->pid) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		dup2(from[1], 2);
		execl("/bin/su", "su", "postgres", "-s", "/bin/sh", "-c", sh,
		      (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	s->in = to[1];
	s->out = from[0];
}

/* Send @sql (one statement or more, the last a SELECT of one value)
 * and read that value's line into @line: the session answered. */
static void query(struct session *s, const char *sql, char *line,
		  size_t size)
{
	size_t got = 0;

	cr_assert(dprintf(s->in, "%s\n", sql) > 0, "psql is gone");
	while (got + 1 < size) {
		struct pollfd p = { .fd = s->out, .events = POLLIN };
		ssize_t n;

		/* a bound, not a wait: psql answers as soon as it can */
		cr_assert_gt(poll(&p, 1, 60000), 0, "no answer to: %s", sql);
		n = read(s->out, line + got, 1);
		cr_assert_eq(n, 1, "psql ended; before: %.*s", (int)got, line);
		if (line[got] == '\n')
			break;
		got++;
	}
	line[got] = '\0';
}

static void memsnap_ok(struct run *r, const char *const *args)
{
	cr_assert_eq(run_memsnap(r, args), 0);
	cr_assert_eq(r->status, 0, "memsnap %s %s: exit %d: %s", args[2],
		     args[3] ? args[3] : "", r->status, r->err);
}

/* "Total: N bytes" of a report's text. */
static long long total_bytes(const char *out)
{
	const char *p = strstr(out, "Total: ");

	cr_assert_not_null(p, "%s", out);
	return atoll(p + 7);
}

Test(postgres, a_forked_backend_has_its_profile_and_its_own_prof_off)
{
	char pm[16], be[16], line[256], heap[PATH_MAX + 16];
	char logpath[PATH_MAX + 16], cmd[4 * PATH_MAX];
	const char *on[] = { "--pid", pm, "prof", "on", "--sampler",
			     "--sample-bytes", "16384", NULL };
	const char *dump[] = { "--pid", be, "dump", "-o", heap, NULL };
	const char *be_off[] = { "--pid", be, "prof", "off", NULL };
	const char *pm_off[] = { "--pid", pm, "prof", "off", NULL };
	const char *inuse[] = { "report", heap, "-q", NULL };
	const char *alloc[] = { "report", heap, "-q", "--alloc", NULL };
	long long in_use, allocated;
	struct run r;

	start_postgres("");
	snprintf(pm, sizeof(pm), "%d", (int)postmaster);
	memsnap_ok(&r, on);
	cr_assert(strstr(r.out, "sampler on"), "%s", r.out);
	run_free(&r);

	/* a backend forked with the sampler on; 10 MB built and freed */
	session_open(&sess);
	query(&sess, "select pg_backend_pid();", be, sizeof(be));
	cr_assert_gt(atoi(be), 0, "backend pid: %s", be);
	query(&sess, "create temp table t as select g, repeat('x', 200) s "
		     "from generate_series(1, 200000) g; "
		     "select length(string_agg(s, ',')) from "
		     "(select s from t limit 50000) q;", line, sizeof(line));
	cr_assert_str_eq(line, "10049999");

	snprintf(heap, sizeof(heap), "%s/backend.heap", dir);
	memsnap_ok(&r, dump);
	run_free(&r);
	memsnap_ok(&r, inuse);
	in_use = total_bytes(r.out);
	cr_assert(strstr(r.out, "postgres"), "%s", r.out);
	run_free(&r);
	memsnap_ok(&r, alloc);
	allocated = total_bytes(r.out);
	run_free(&r);
	/* string_agg's 10 MB went by; what is left in use is less */
	cr_assert_gt(allocated, 8ll << 20, "allocated %lld bytes", allocated);
	cr_assert_lt(in_use, allocated, "in use %lld, allocated %lld",
		     in_use, allocated);

	/* the backend's copy off; it serves on, the postmaster samples on */
	memsnap_ok(&r, be_off);
	cr_assert(strstr(r.out, "sampler off"), "%s", r.out);
	run_free(&r);
	assert_threads_free(atoi(be), "the backend after its prof off");
	query(&sess, "select count(*) from t;", line, sizeof(line));
	cr_assert_str_eq(line, "200000");
	memsnap_ok(&r, pm_off);
	cr_assert(strstr(r.out, "sampler off"), "%s", r.out);
	run_free(&r);
	assert_threads_free(postmaster, "the postmaster after prof off");

	/* a backend forked after: the postmaster forks and serves */
	snprintf(cmd, sizeof(cmd), PG_BIN "/psql -h %s -At -c 'select 40 + 2' "
		 "postgres", dir);
	cr_assert_eq(as_postgres(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s", r.out);
	cr_assert(!strcmp(r.out, "42\n"), "%s", r.out);
	run_free(&r);
	query(&sess, "select 1;", line, sizeof(line));
	cr_assert_str_eq(line, "1");
	cr_assert_eq(kill(postmaster, 0), 0, "the postmaster is gone");

	/* no backend died on a signal, nothing failed */
	session_close(&sess);
	snprintf(logpath, sizeof(logpath), "%s/log", dir);
	snprintf(cmd, sizeof(cmd), "grep -E 'PANIC|FATAL|terminated by "
		 "signal|ERROR' '%s'", logpath);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_neq(r.status, 0, "the server's log: %s", r.out);
	run_free(&r);
}

/*
 * The postmaster of a server with shared_buffers of 512 MB: most of its
 * RSS is the shared segment it made and touched (the buffers'
 * descriptors, locks, the other shared structures), which every backend
 * maps too.  The verdict says shared memory, and a finding says what it
 * is (shared_buffers), its PSS against its RSS, and who else maps it;
 * the server serves on.
 */
Test(postgres, the_postmaster_is_mostly_shared_memory)
{
	char be[16], line[256];
	struct explain e;
	int64_t lo, hi;
	const struct explain_finding *f;

	start_postgres("-c shared_buffers=512MB");
	session_open(&sess);
	query(&sess, "select pg_backend_pid();", be, sizeof(be));
	cr_assert_gt(atoi(be), 0, "backend pid: %s", be);

	explain_run(postmaster, NULL, &e, &lo, &hi);
	explain_assert_sound(&e, lo, hi, true);
	cr_assert_not_null(strstr(e.verdict, "shared memory"), "%s",
			   e.json);
	cr_assert_gt(e.nfindings, 0, "%s", e.json);
	cr_assert_str_eq(e.f[0].id, "shmem", "%s", e.json);
	f = &e.f[0];
	cr_assert_eq(f->bytes, e.part[P_SHMEM], "%s", e.json);
	cr_assert_not_null(strstr(f->text, "shared_buffers"), "%s", e.json);
	cr_assert_not_null(strstr(f->text, "(PSS)"), "%s", e.json);
	cr_assert_not_null(strstr(f->text, "also mapped by pid "), "%s",
			   e.json);
	cr_assert_not_null(strstr(f->text, "(postgres)"), "%s", e.json);
	cr_assert_not_null(strstr(f->remedy, "restart"), "%s", e.json);
	cr_assert_not_null(strstr(f->remedy, "watch"), "%s", e.json);
	explain_assert_text_verdict(postmaster, &e);

	/* it serves, and forks a new backend */
	query(&sess, "select 40 + 2;", line, sizeof(line));
	cr_assert_str_eq(line, "42");
	cr_assert_eq(kill(postmaster, 0), 0, "the postmaster is gone");
	session_close(&sess);
	session_open(&sess);
	query(&sess, "select 6 * 7;", line, sizeof(line));
	cr_assert_str_eq(line, "42");
	explain_free(&e);
}
