/*
 * dump, prof and info on a real Debian redis-server (linked with
 * libjemalloc.so.2, started with MALLOC_CONF=prof:true), while a client
 * thread pings it in a loop: every ping must be answered, the data set
 * before is there after, and jeprof reads the profiles.
 */
#include "../lib/redis.h"
#include "../lib/fixture.h"
#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct redis rs = { .pid = -1 };
static char outdir[PATH_MAX];

static void setup(void)
{
	int rc = scratch_make("memsnap-test-redis", outdir, sizeof(outdir));

	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
}

static void teardown(void)
{
	redis_stop(&rs);
	scratch_cleanup(outdir);
}

TestSuite(redis, .init = setup, .fini = teardown, .timeout = 180);

static atomic_bool stop;
static atomic_long pings, failures;

/* One client, one command at a time, as long as the test runs. */
static void *pinger(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		if (redis_alive(&rs))
			atomic_fetch_add(&pings, 1);
		else
			atomic_fetch_add(&failures, 1);
	}
	return NULL;
}

static void start_redis(const char *malloc_conf)
{
	int rc = redis_start(&rs, malloc_conf);

	if (rc == -ENOENT)
		cr_skip_test("redis-server is not installed (apt-get install redis-server)");
	cr_assert_eq(rc, 0, "starting redis-server: %s", strerror(-rc));
}

static void set_data(void)
{
	char cmd[128], reply[64], why[160];
	int i, rc;

	for (i = 0; i < 300; i++) {
		snprintf(cmd, sizeof(cmd), "SET memsnap:%d value-%d-%d", i, i,
			 (int)rs.pid);
		rc = redis_command(&rs, cmd, reply, sizeof(reply));
		cr_assert_eq(rc, 0, "%s: %s", cmd,
			     redis_why(&rs, rc, why, sizeof(why)));
		cr_assert_str_eq(reply, "+OK");
	}
}

static void check_data(void)
{
	char cmd[128], reply[64], want[64], why[160];
	int i, rc;

	for (i = 0; i < 300; i += 7) {
		snprintf(cmd, sizeof(cmd), "GET memsnap:%d", i);
		snprintf(want, sizeof(want), "value-%d-%d", i, (int)rs.pid);
		rc = redis_command(&rs, cmd, reply, sizeof(reply));
		cr_assert_eq(rc, 0, "%s: %s", cmd,
			     redis_why(&rs, rc, why, sizeof(why)));
		cr_assert_str_eq(reply, want);
	}
}

/*
 * One block of BIG_BLOCK bytes, live in redis until it stops, so that a
 * heap profile at jemalloc's default mean is never empty.  Redis's own
 * allocations leave a few samples live, and now and then none: jeprof
 * then prints no "Total:" line.  The bytes jemalloc lets pass before
 * its next sample are geometric of mean 2^19 (lg_prof_sample:19, 512
 * KiB), whatever passed before; the block goes unsampled only if they
 * exceed its 32 MiB: (1 - 2^-19)^(2^25) = e^-64, about 1.6e-28.
 * SETRANGE past the end of a new key allocates the string whole, from
 * a command of a few bytes.
 */
#define BIG_BLOCK (32 << 20)

static void set_big_block(void)
{
	char cmd[128], reply[64], why[160];
	int rc;

	snprintf(cmd, sizeof(cmd), "SETRANGE memsnap:big %d x", BIG_BLOCK - 1);
	rc = redis_command(&rs, cmd, reply, sizeof(reply));
	cr_assert_eq(rc, 0, "%s: %s", cmd,
		     redis_why(&rs, rc, why, sizeof(why)));
	snprintf(cmd, sizeof(cmd), ":%d", BIG_BLOCK);
	cr_assert_str_eq(reply, cmd);
}

/* ... and it is all there after. */
static void check_big_block(void)
{
	char reply[64], want[64], why[160];
	int rc;

	rc = redis_command(&rs, "STRLEN memsnap:big", reply, sizeof(reply));
	cr_assert_eq(rc, 0, "STRLEN: %s",
		     redis_why(&rs, rc, why, sizeof(why)));
	snprintf(want, sizeof(want), ":%d", BIG_BLOCK);
	cr_assert_str_eq(reply, want);
	rc = redis_command(&rs, "GETRANGE memsnap:big -1 -1", reply,
			   sizeof(reply));
	cr_assert_eq(rc, 0, "GETRANGE: %s",
		     redis_why(&rs, rc, why, sizeof(why)));
	cr_assert_str_eq(reply, "x");
}

static void memsnap_ok(struct run *r, const char *const *args)
{
	cr_assert_eq(run_memsnap(r, args), 0);
	cr_assert_eq(r->status, 0, "memsnap %s: status %d: %s", args[2],
		     r->status, r->err);
}

static bool info_has(const char *pid, const char *member)
{
	const char *args[] = { "--pid", pid, "--json", "info", NULL };
	struct run r;
	bool yes;

	memsnap_ok(&r, args);
	yes = strstr(r.out, member) != NULL;
	run_free(&r);
	return yes;
}

/* No profile and no private directory in redis's own directory. */
static void assert_redis_dir_clean(void)
{
	DIR *d = opendir(rs.dir);
	struct dirent *e;

	cr_assert_not_null(d);
	while ((e = readdir(d))) {
		cr_expect(!strstr(e->d_name, ".heap") &&
				  strncmp(e->d_name, ".memsnap-", 9),
			  "left in redis's directory: %s", e->d_name);
	}
	closedir(d);
}

Test(redis, dump_prof_info_while_serving)
{
	char pid[16], out[PATH_MAX + 32], cmd[2 * PATH_MAX];
	const char *dump[] = { "--pid", pid, "dump", "-o", out, NULL };
	const char *off[] = { "--pid", pid, "prof", "off", NULL };
	const char *on[] = { "--pid", pid, "prof", "on", NULL };
	pthread_t t;
	struct run r;
	int i;

	start_redis("prof:true");
	snprintf(pid, sizeof(pid), "%d", (int)rs.pid);
	set_data();
	set_big_block();
	cr_assert(info_has(pid, "\"prof.active\": true"));

	atomic_store(&stop, false);
	cr_assert_eq(pthread_create(&t, NULL, pinger, NULL), 0);
	for (i = 0; i < 5; i++) {
		snprintf(out, sizeof(out), "%s/redis.%d.heap", outdir, i);
		memsnap_ok(&r, dump);
		run_free(&r);
	}
	memsnap_ok(&r, off);
	run_free(&r);
	cr_expect(info_has(pid, "\"prof.active\": false"));
	memsnap_ok(&r, on);
	run_free(&r);
	cr_expect(info_has(pid, "\"prof.active\": true"));
	atomic_store(&stop, true);
	pthread_join(t, NULL);

	cr_expect_eq(atomic_load(&failures), 0,
		     "%ld of %ld pings failed during the dumps",
		     atomic_load(&failures),
		     atomic_load(&failures) + atomic_load(&pings));
	cr_expect_gt(atomic_load(&pings), 0);
	check_data();
	check_big_block();
	cr_assert(redis_alive(&rs));
	assert_redis_dir_clean();

	if (access("/usr/bin/jeprof", X_OK))
		cr_skip_test("jeprof is not installed (libjemalloc-dev)");
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/jeprof --text /usr/bin/redis-server '%s' 2>&1", out);
	cr_assert_eq(run_shell(&r, cmd), 0);
	/* the status too: jeprof may say nothing when it fails */
	cr_assert_eq(r.status, 0, "jeprof: exit %d (128 + a signal's number "
		     "when killed): %s", r.status, r.out);
	cr_expect_not_null(strstr(r.out, "Total: "), "%s", r.out);
	run_free(&r);
}

Test(redis, without_prof_true_the_hint)
{
	need_jemalloc_profiling();
	const char *dump[] = { "--pid", NULL, "dump", NULL };
	char pid[16], want[160];
	struct run r;

	start_redis(NULL);
	snprintf(pid, sizeof(pid), "%d", (int)rs.pid);
	dump[1] = pid;
	set_data();
	cr_assert_eq(run_memsnap(&r, dump), 0);
	cr_assert_eq(r.status, 5, "%s", r.err);
	cr_expect_not_null(
		strstr(r.err,
		       "restart it with MALLOC_CONF=prof:true,prof_active:false"),
		"%s", r.err);
	/* and the way without a restart */
	snprintf(want, sizeof(want), "memsnap: hint: or, with no restart, "
		 "memsnap's own sampler: `memsnap --pid %s prof on --sampler`",
		 pid);
	cr_expect_not_null(strstr(r.err, want), "%s", r.err);
	run_free(&r);
	check_data();
	assert_redis_dir_clean();
}

/*
 * Every other command on the same live server: stats, trim and a call
 * answer, and a dump of a profile sampled every 256 bytes reports
 * redis's own allocation wrappers by name.  (Not every allocation,
 * lg_prof_sample:0: jemalloc 5.1's profiling then took redis-server to
 * 2.5 GB in the arm64 guest, whose OOM killer ended it mid-test; 95 MB
 * on x86-64 against 22 MB at 256 bytes.)
 */
/*
 * A report's top sites are Redis's own code, past its allocation
 * wrapper (zmalloc and kin, which the note names): the keys set hold
 * string objects (createObject, _sdsnewlen) and dict entries.
 */
static void expect_past_zmalloc(const char *out)
{
	const char *rows = strstr(out, "allocated at (bytes)\n"), *p, *end;

	cr_assert_not_null(rows, "%s", out);
	cr_expect(strstr(out, "(flat: at the first frame past the "
			  "allocator's wrappers, such as z"), "%s", out);
	cr_expect(strstr(rows, " createObject\n") ||
			  strstr(rows, " _sdsnewlen\n") ||
			  strstr(rows, " createEmbeddedStringObject\n"),
		  "no string object among the sites: %s", out);
	/* no wrapper with bytes of its own: a row of it shows 0 flat (the
	 * rows end where the notes begin, one of which names a wrapper) */
	end = strstr(rows, "\n(");
	for (p = strstr(rows, " zmalloc"); p && (!end || p < end);
	     p = strstr(p + 1, " zmalloc")) {
		const char *bol = p;

		while (bol > rows && bol[-1] != '\n')
			bol--;
		cr_expect(!strncmp(bol, "           0 ", 13),
			  "a wrapper with bytes of its own: %.80s", bol);
	}
}

Test(redis, stats_trim_call_and_a_symbolized_report)
{
	char pid[16], out[PATH_MAX + 32], want[32];
	const char *stats[] = { "--pid", pid, "stats", NULL };
	const char *trim[] = { "--pid", pid, "trim", NULL };
	const char *call[] = { "--pid", pid, "call", "getpid", NULL };
	const char *dump[] = { "--pid", pid, "dump", "-o", out, NULL };
	const char *report[] = { "report", out, NULL };
	struct run r;

	start_redis("prof:true,lg_prof_sample:8");
	snprintf(pid, sizeof(pid), "%d", (int)rs.pid);
	set_data();
	memsnap_ok(&r, stats);
	cr_expect_not_null(strstr(r.out, "jemalloc statistics"), "%s", r.out);
	run_free(&r);
	memsnap_ok(&r, trim);
	cr_expect_not_null(strstr(r.out, "purge"), "%s", r.out);
	run_free(&r);
	memsnap_ok(&r, call);
	snprintf(want, sizeof(want), "%s (", pid);
	cr_expect_eq(strncmp(r.out, want, strlen(want)), 0, "%s", r.out);
	run_free(&r);
	snprintf(out, sizeof(out), "%s/redis.heap", outdir);
	memsnap_ok(&r, dump);
	run_free(&r);
	cr_assert_eq(run_memsnap(&r, report), 0);
	cr_assert_eq(r.status, 0, "report: %s", r.err);
	cr_expect_not_null(strstr(r.out, "Total: "), "%s", r.out);
	expect_past_zmalloc(r.out);
	run_free(&r);
	check_data();
	cr_assert(redis_alive(&rs));
	assert_redis_dir_clean();
}

/*
 * Debian's redis-server as it is started everywhere, jemalloc without
 * prof:true, gets heap profiles from memsnap's sampler: what it
 * allocates for new keys is reported at redis's own code, past its
 * allocation wrapper, and it serves every key before, during and
 * after.
 */
Test(redis, sampler_without_prof_true)
{
	char pid[16], out[PATH_MAX + 32];
	const char *on[] = { "--pid", pid, "prof", "on", "--sampler",
			     "--sample-bytes", "64", NULL };
	const char *off[] = { "--pid", pid, "prof", "off", NULL };
	const char *dump[] = { "--pid", pid, "dump", "-o", out, NULL };
	const char *report[] = { "report", out, NULL };
	struct run r;

	start_redis(NULL);
	snprintf(pid, sizeof(pid), "%d", (int)rs.pid);
	memsnap_ok(&r, on);
	cr_expect_not_null(strstr(r.out, "sampler on"), "%s", r.out);
	run_free(&r);
	set_data();
	snprintf(out, sizeof(out), "%s/sampler.heap", outdir);
	memsnap_ok(&r, dump);
	run_free(&r);
	cr_assert_eq(run_memsnap(&r, report), 0);
	cr_assert_eq(r.status, 0, "report: %s", r.err);
	expect_past_zmalloc(r.out);
	run_free(&r);
	check_data();
	memsnap_ok(&r, off);
	cr_expect_not_null(strstr(r.out, "sampler off"), "%s", r.out);
	run_free(&r);
	set_data();
	check_data();
	cr_assert(redis_alive(&rs));
	assert_redis_dir_clean();
}

/*
 * Switching the sampler on a server whose slots are in many objects,
 * most of them read-only (Debian builds with full RELRO), holds its
 * thread for a couple of ptrace stops more than a `call getpid`, not
 * two per object: the read-only slots are swapped to their mirrors a
 * byte each, from memsnap (DESIGN.md, "Interposition").  Once they
 * cost two mprotects per object in the call: 54-62 stops here.
 */
Test(redis, switching_the_sampler_costs_no_stop_per_object)
{
	char pid[16];
	const char *on[] = { "--timings", "--pid", pid, "prof", "on",
			     "--sampler", NULL };
	const char *off[] = { "--timings", "--pid", pid, "prof", "off", NULL };
	const char *call[] = { "--timings", "--pid", pid, "call", "getpid",
			       NULL };
	unsigned int floor, objects;
	const char *v;
	struct run r;
	int i;

	start_redis(NULL);
	set_data();
	snprintf(pid, sizeof(pid), "%d", (int)rs.pid);
	memsnap_ok(&r, call);
	floor = ptrace_stops(&r);
	run_free(&r);
	memsnap_ok(&r, on);	/* loads the image and makes the mirrors */
	run_free(&r);
	memsnap_ok(&r, off);
	run_free(&r);
	for (i = 0; i < 2; i++) {
		memsnap_ok(&r, on);
		v = strstr(r.out, " GOT slots in ");
		cr_assert_not_null(v, "%s", r.out);
		objects = (unsigned int)strtoul(v + 14, NULL, 10);
		cr_assert_geq(objects, 5, "%s", r.out);
		cr_assert_leq(ptrace_stops(&r), floor + 4,
			      "prof on: call getpid takes %u: %s", floor, r.err);
		run_free(&r);
		check_data();
		memsnap_ok(&r, off);
		cr_expect_not_null(strstr(r.out, "restored"), "%s", r.out);
		cr_assert_leq(ptrace_stops(&r), floor + 4,
			      "prof off: call getpid takes %u: %s", floor, r.err);
		run_free(&r);
	}
	set_data();
	check_data();
	cr_assert(redis_alive(&rs));
	assert_redis_dir_clean();
}

/* Is strace's line @line ("PID  name(args...") a system call that opens
 * or looks up a file by its name? */
static bool names_a_file(const char *line)
{
	static const char *const names[] = { "open", "openat", "openat2",
					     "stat", "lstat", "newfstatat",
					     "statx" };
	size_t i, n;

	line += strspn(line, "0123456789 ");
	n = strspn(line, "abcdefghijklmnopqrstuvwxyz0123456789_");
	if (line[n] != '(')
		return false;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == n && !strncmp(line, names[i], n))
			/* newfstatat(fd, "", AT_EMPTY_PATH) is fstat */
			return !strstr(line, ", \"\", ");
	return false;
}

/*
 * prof on --sampler looks up every symbol and GOT slot before it stops
 * a thread: between memsnap's PTRACE_SEIZE and its PTRACE_DETACH, strace
 * sees it open no file but the borrowed thread's own (the engine's
 * task/TID/status, children and mem), where it once opened the objects
 * of every library it had not read yet (13 on this redis).
 */
Test(redis, sampler_opens_no_file_while_a_thread_is_stopped)
{
	const char *bin = getenv("MEMSNAP_BIN");
	const char *off[] = { "--pid", NULL, "prof", "off", NULL };
	char pid[16], log[PATH_MAX + 16], cmd[2 * PATH_MAX + 256];
	char task[64], *line = NULL;
	bool stopped = false, seized = false, detached = false;
	unsigned int opens = 0;
	size_t cap = 0;
	struct run r;
	FILE *f;

	if (system("command -v strace >/dev/null 2>&1"))
		cr_skip_test("strace is not installed (apt-get install strace)");
	start_redis(NULL);
	snprintf(pid, sizeof(pid), "%d", (int)rs.pid);
	snprintf(task, sizeof(task), "\"/proc/%d/task/", (int)rs.pid);
	snprintf(log, sizeof(log), "%s/strace.log", outdir);
	/* LeakSanitizer cannot run under a tracer: a sanitized memsnap
	 * here checks no leaks */
	snprintf(cmd, sizeof(cmd),
		 "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 "
		 "exec strace -f -qq -o '%s' -e trace=openat,open,newfstatat,"
		 "statx,ptrace '%s' --pid %s prof on --sampler", log,
		 bin ? bin : "./memsnap", pid);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "prof on --sampler: exit %d: %s", r.status,
		     r.err);
	run_free(&r);
	f = fopen(log, "r");
	cr_assert_not_null(f, "%s: %s", log, strerror(errno));
	while (getline(&line, &cap, f) > 0) {
		if (strstr(line, "PTRACE_SEIZE")) {
			stopped = seized = true;
		} else if (strstr(line, "PTRACE_DETACH")) {
			stopped = false;
			detached = true;
		} else if (stopped && names_a_file(line)) {
			opens++;
			cr_expect(strstr(line, task) != NULL,
				  "opened with a thread stopped: %s", line);
		}
	}
	free(line);
	fclose(f);
	cr_assert(seized && detached, "no seize and detach in %s", log);
	cr_assert_leq(opens, 3, "%u files opened with a thread stopped",
		      opens);
	off[1] = pid;
	memsnap_ok(&r, off);
	run_free(&r);
	set_data();
	check_data();
	cr_assert(redis_alive(&rs));
}
