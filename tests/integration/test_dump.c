/*
 * `memsnap dump` end to end on a live jemalloc process: the profile
 * arrives where asked, nothing is left in the target's cwd or temp dir,
 * planted files at the output never redirect the write, the allocator's
 * refusals come with the right words and exit codes, and the target is
 * unharmed after every dump.
 */
#include "../lib/fixture.h"
#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static struct fixture fx = { .pid = -1 };
static char base[PATH_MAX];	/* one temp dir per test, holding: */
static char cwd_dir[PATH_MAX + 8];  /* the target's cwd */
static char tmp_dir[PATH_MAX + 8];  /* the target's TMPDIR */
static char out_dir[PATH_MAX + 8];  /* where the caller writes */
static char pidstr[16];

static void setup(void)
{
	int rc = scratch_make("memsnap-test-dump", base, sizeof(base));

	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	snprintf(cwd_dir, sizeof(cwd_dir), "%s/cwd", base);
	snprintf(tmp_dir, sizeof(tmp_dir), "%s/tmp", base);
	snprintf(out_dir, sizeof(out_dir), "%s/out", base);
	cr_assert_eq(mkdir(cwd_dir, 0755), 0);
	cr_assert_eq(mkdir(tmp_dir, 01777), 0);
	cr_assert_eq(mkdir(out_dir, 0755), 0);
}

static void teardown(void)
{
	fixture_stop(&fx);
	scratch_cleanup(base);
}

TestSuite(dump, .init = setup, .fini = teardown, .timeout = 120);

/* Start @name with @malloc_conf (NULL: none) and extra @arg. */
static void start(const char *name, const char *malloc_conf, const char *arg)
{
	char path[PATH_MAX], conf[256], tmp[PATH_MAX + 16], cwd[PATH_MAX + 32];
	char *argv[] = { path, (char *)arg, NULL };
	char *env[4] = { tmp, cwd, NULL, NULL };
	int rc;

	snprintf(tmp, sizeof(tmp), "TMPDIR=%s", tmp_dir);
	snprintf(cwd, sizeof(cwd), "JE_FIXTURE_CWD=%s", cwd_dir);
	if (malloc_conf) {
		snprintf(conf, sizeof(conf), "%s", malloc_conf);
		env[2] = conf;
	}
	fixture_path(name, path, sizeof(path));
	rc = fixture_start(&fx, argv, env, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
}

static void assert_nothing_left(void)
{
	cr_assert_eq(dir_count_entries(cwd_dir), 0,
		     "something was left in the target's cwd");
	cr_assert_eq(dir_count_entries(tmp_dir), 0,
		     "something was left in the target's TMPDIR");
}

static char *slurp(const char *path)
{
	static char buf[1 << 20];
	FILE *f = fopen(path, "r");
	size_t n;

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void assert_profile(const char *path)
{
	const char *text = slurp(path);

	cr_assert_eq(strncmp(text, "heap_v2/", 8), 0, "%.60s", text);
	cr_assert_not_null(strstr(text, "\nMAPPED_LIBRARIES:\n"));
	cr_assert_not_null(strstr(text, "libjemalloc"));
}

Test(dump, profile_collected_at_o_and_nothing_left)
{
	char out[PATH_MAX + 32], want[PATH_MAX + 40];
	const char *args[] = { "--pid", pidstr, "dump", "-o", out, NULL };
	struct run r;
	int i;

	start("jemalloc-target", "MALLOC_CONF=prof:true", NULL);
	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	/* Repeatedly: every dump is independent and leaves nothing. */
	for (i = 0; i < 5; i++) {
		cr_assert_eq(run_memsnap(&r, args), 0);
		cr_assert_eq(r.status, 0, "%s", r.err);
		snprintf(want, sizeof(want), "%s\n", out);
		cr_assert_str_eq(r.out, want);
		cr_assert_str_eq(r.err, "");
		run_free(&r);
		assert_profile(out);
		assert_nothing_left();
		fixture_assert_healthy(&fx);
	}
	cr_assert_eq(dir_count_entries(out_dir), 1, "a temp file was left");
}

Test(dump, default_name_in_callers_cwd)
{
	char cmd[3 * PATH_MAX], path[PATH_MAX * 2];
	const char *bin = getenv("MEMSNAP_BIN");
	regex_t re;
	struct run r;
	char pat[128];

	start("jemalloc-target", "MALLOC_CONF=prof:true", NULL);
	snprintf(cmd, sizeof(cmd), "cd '%s' && '%s' --pid %s dump", out_dir,
		 bin ? bin : "memsnap", pidstr);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(pat, sizeof(pat), "^memsnap\\.%s\\.[0-9]{8}-[0-9]{6}\\.heap\n$",
		 pidstr);
	cr_assert_eq(regcomp(&re, pat, REG_EXTENDED), 0);
	cr_assert_eq(regexec(&re, r.out, 0, NULL, 0), 0, "stdout: %s", r.out);
	regfree(&re);
	r.out[strlen(r.out) - 1] = '\0';
	snprintf(path, sizeof(path), "%s/%s", out_dir, r.out);
	assert_profile(path);
	cr_assert_eq(dir_count_entries(out_dir), 1);
	run_free(&r);

	/* A second dump in the same second gets a new name, never the
	 * first one's. */
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(dir_count_entries(out_dir), 2);
	run_free(&r);
	assert_nothing_left();
	fixture_assert_healthy(&fx);
}

/* Another user's symlink at -o: refused, its target untouched. */
Test(dump, planted_symlink_at_output_is_refused)
{
	char out[PATH_MAX + 32], victim[PATH_MAX + 32], want[PATH_MAX * 3];
	const char *args[] = { "--pid", pidstr, "dump", "-o", out, NULL };
	struct run r;
	FILE *f;

	start("jemalloc-target", "MALLOC_CONF=prof:true", NULL);
	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	snprintf(victim, sizeof(victim), "%s/victim", base);
	f = fopen(victim, "w");
	cr_assert_not_null(f);
	fputs("precious\n", f);
	fclose(f);
	cr_assert_eq(symlink(victim, out), 0);
	cr_assert_eq(lchown(out, 65534, 65534), 0);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 1, "%s", r.err);
	snprintf(want, sizeof(want),
		 "memsnap: dump %s: writing '%s': '%s' is a symlink of another user; memsnap does not follow it\n",
		 pidstr, out, out);
	cr_assert_str_eq(r.err, want);
	run_free(&r);
	cr_assert_str_eq(slurp(victim), "precious\n");
	fixture_assert_healthy(&fx);
}

/* A FIFO at -o is written to (never replaced), as a shell would. */
Test(dump, fifo_at_output_is_written_to)
{
	char out[PATH_MAX + 32], buf[16] = "";
	const char *args[] = { "--pid", pidstr, "dump", "-o", out, NULL };
	struct stat st;
	struct run r;
	int rd;

	start("jemalloc-target", "MALLOC_CONF=prof:true", NULL);
	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	cr_assert_eq(mkfifo(out, 0600), 0);
	/* A reader, so the writer's open does not wait; a profile fits in
	 * the pipe's buffer. */
	rd = open(out, O_RDONLY | O_NONBLOCK);
	cr_assert_geq(rd, 0);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_str_empty(r.out, "a path printed for a FIFO: %s", r.out);
	run_free(&r);
	cr_assert_eq(read(rd, buf, 8), 8);
	cr_assert_str_eq(buf, "heap_v2/");
	close(rd);
	cr_assert_eq(lstat(out, &st), 0);
	cr_assert(S_ISFIFO(st.st_mode), "the FIFO was replaced");
	fixture_assert_healthy(&fx);
}

Test(dump, output_directory_missing)
{
	char out[PATH_MAX + 32], want[PATH_MAX * 2];
	const char *args[] = { "--pid", pidstr, "dump", "-o", out, NULL };
	struct run r;

	start("jemalloc-target", "MALLOC_CONF=prof:true", NULL);
	snprintf(out, sizeof(out), "%s/no/such/dir.heap", out_dir);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 1);
	snprintf(want, sizeof(want),
		 "memsnap: dump %s: writing '%s': No such file or directory\n",
		 pidstr, out);
	cr_assert_str_eq(r.err, want);
	cr_assert_str_eq(r.out, "");
	run_free(&r);
	assert_nothing_left();
	fixture_assert_healthy(&fx);
}

Test(dump, profiling_off_gives_the_restart_hint)
{
	need_jemalloc_profiling();
	char want[1024];
	const char *args[] = { "--pid", pidstr, "dump", NULL };
	struct run r;

	start("jemalloc-target", NULL, NULL);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 5, "status %d: %s", r.status, r.err);
	snprintf(want, sizeof(want),
		 "memsnap: dump %s: jemalloc profiling is off (opt.prof is false, fixed at start-up); restart it with MALLOC_CONF=prof:true,prof_active:false, then `memsnap --pid %s prof on` starts sampling\n"
		 "memsnap: hint: or, with no restart, memsnap's own sampler: `memsnap --pid %s prof on --sampler`, then dump\n",
		 pidstr, pidstr, pidstr);
	cr_assert_str_eq(r.err, want);
	cr_assert_str_eq(r.out, "");
	run_free(&r);
	assert_nothing_left();
	fixture_assert_healthy(&fx);
}

Test(dump, existing_malloc_conf_is_kept_in_the_hint)
{
	need_jemalloc_profiling();
	const char *args[] = { "--pid", pidstr, "dump", NULL };
	struct run r;

	start("jemalloc-target", "MALLOC_CONF=narenas:2", NULL);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 5, "%s", r.err);
	cr_assert_not_null(
		strstr(r.err,
		       "restart it with MALLOC_CONF=narenas:2,prof:true,prof_active:false, then "),
		"%s", r.err);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

/* A fixture of elf.mk links Debian's libjemalloc_pic.a, built without
 * profiling on some CPUs (arm64): it says so in its ready line. */
static void need_static_jemalloc_profiling(void)
{
	if (strstr(fx.ready, "config.prof=0"))
		cr_skip_test("Debian's static jemalloc (libjemalloc_pic.a) on "
			     "this CPU is built without profiling");
}

Test(dump, rust_prefix_gives_rjem_hint)
{
	const char *args[] = { "--pid", pidstr, "dump", NULL };
	struct run r;

	/* tests/fixtures/elf.mk: jemalloc linked in with the _rjem_
	 * prefix and not exported, like tikv-jemallocator. */
	start("elf-rjem", NULL, NULL);
	need_static_jemalloc_profiling();
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 5, "status %d: %s", r.status, r.err);
	cr_assert_not_null(
		strstr(r.err,
		       "restart it with _RJEM_MALLOC_CONF=prof:true,prof_active:false, then "),
		"%s", r.err);
	run_free(&r);
	assert_nothing_left();
	fixture_assert_healthy(&fx);
}

Test(dump, built_without_profiling)
{
	char want[512];
	const char *args[] = { "--pid", pidstr, "dump", NULL };
	struct run r;

	start("jemalloc-fake", NULL, NULL);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 5, "status %d: %s", r.status, r.err);
	snprintf(want, sizeof(want),
		 "memsnap: dump %s: jemalloc was built without profiling (config.prof is false)\n"
		 "memsnap: hint: heap profiles need a jemalloc configured with --enable-prof (Debian 12's is on x86-64, not on arm64); memsnap's own sampler needs nothing: `memsnap --pid %s prof on --sampler`, then dump\n",
		 pidstr, pidstr);
	cr_assert_str_eq(r.err, want);
	run_free(&r);
	assert_nothing_left();
	fixture_assert_healthy(&fx);
}

Test(dump, target_cannot_write_says_why)
{
	const char *args[] = { "--pid", pidstr, "dump", NULL };
	struct run r;

	start("jemalloc-target", "MALLOC_CONF=prof:true", "--exhaust-fds");
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 8, "status %d: %s", r.status, r.err);
	cr_assert_not_null(strstr(r.err, "the target could not write /"),
			   "%s", r.err);
	cr_assert_not_null(strstr(r.err, "file descriptors open (RLIMIT_NOFILE)"),
			   "%s", r.err);
	cr_assert_str_eq(r.out, "");
	run_free(&r);
	assert_nothing_left();
	fixture_assert_healthy(&fx);
}

Test(dump, timings_show_one_thread_stopped)
{
	char out[PATH_MAX + 32], pat[256];
	const char *args[] = { "--pid", pidstr, "--timings", "dump", "-o", out,
			       NULL };
	regmatch_t m[2];
	regex_t re;
	struct run r;
	long tid;

	start("jemalloc-target", "MALLOC_CONF=prof:true", NULL);
	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(pat, sizeof(pat),
		 "^memsnap: timings: pid %s tid ([0-9]+) stopped [0-9]+ us: "
		 "seize [0-9]+, check [0-9]+, save [0-9]+, call [0-9]+, "
		 "restore [0-9]+, detach [0-9]+ \\([0-9]+ ptrace stops\\); "
		 "1 of 4 threads stopped\n$",
		 pidstr);
	cr_assert_eq(regcomp(&re, pat, REG_EXTENDED), 0);
	cr_assert_eq(regexec(&re, r.err, 2, m, 0), 0, "stderr: %s", r.err);
	regfree(&re);
	tid = strtol(r.err + m[1].rm_so, NULL, 10);
	/* An idle worker, not the main thread. */
	cr_assert_neq(tid, (long)fx.pid);
	run_free(&r);
	assert_profile(out);
	fixture_assert_healthy(&fx);
}

Test(dump, chosen_thread)
{
	char out[PATH_MAX + 32], tid[16], want[64];
	const char *args[] = { "--pid", pidstr, "--thread", tid, "--timings",
			       "dump", "-o", out, NULL };
	struct run r;

	start("jemalloc-target", "MALLOC_CONF=prof:true", NULL);
	snprintf(out, sizeof(out), "%s/a.heap", out_dir);
	/* The main thread: in read() on the control pipe. */
	snprintf(tid, sizeof(tid), "%d", (int)fx.pid);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(want, sizeof(want), " tid %s stopped ", tid);
	cr_assert_not_null(strstr(r.err, want), "%s", r.err);
	run_free(&r);
	assert_profile(out);
	fixture_assert_healthy(&fx);
}

Test(dump, allocator_that_cannot)
{
	char want[256];
	const char *args[] = { "--pid", pidstr, "--allocator", "glibc", "dump",
			       NULL };
	struct run r;

	start("jemalloc-target", "MALLOC_CONF=prof:true", NULL);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 5);
	snprintf(want, sizeof(want),
		 "memsnap: dump %s: glibc malloc cannot write a heap profile; with it memsnap can: stats, trim (heap profiles need jemalloc or the full gperftools tcmalloc, or memsnap's sampler: prof on --sampler)\n",
		 pidstr);
	cr_assert_str_eq(r.err, want);
	run_free(&r);
	assert_nothing_left();
	fixture_assert_healthy(&fx);
}

Test(dump, usage_errors)
{
	const char *extra[] = { "--pid", "1", "dump", "more", NULL };
	const char *noval[] = { "--pid", "1", "dump", "-o", NULL };
	const char *nopid[] = { "dump", NULL };
	const char *bad[] = { "--pid", "1", "dump", "--frob", NULL };
	struct run r;

	cr_assert_eq(run_memsnap(&r, extra), 0);
	cr_assert_eq(r.status, 2);
	cr_assert_str_eq(r.err,
			 "memsnap: dump: unexpected argument 'more' (see memsnap --help)\n");
	run_free(&r);
	cr_assert_eq(run_memsnap(&r, noval), 0);
	cr_assert_eq(r.status, 2);
	cr_assert_str_eq(r.err,
			 "memsnap: dump: -o needs a value (see memsnap --help)\n");
	run_free(&r);
	cr_assert_eq(run_memsnap(&r, nopid), 0);
	cr_assert_eq(r.status, 2);
	cr_assert_str_eq(r.err, "memsnap: dump: which process? give --pid PID\n");
	run_free(&r);
	cr_assert_eq(run_memsnap(&r, bad), 0);
	cr_assert_eq(r.status, 2);
	cr_assert_str_eq(r.err,
			 "memsnap: dump: unknown option '--frob' (see memsnap --help)\n");
	run_free(&r);
}

Test(dump, no_such_process)
{
	const char *args[] = { "--pid", "4194303", "dump", NULL };
	struct run r;

	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 3);
	cr_assert_str_eq(r.err, "memsnap: pid 4194303: no such process\n");
	run_free(&r);
}

Test(dump, timeout_reports_where_the_call_is)
{
	const char *args[] = { "--pid", pidstr, "--timeout", "0.5", "dump",
			       NULL };
	char want[256];
	struct run r;

	/* Its prof.dump sleeps 2 s in slow_dump(). */
	start("jemalloc-fake", "JE_FAKE_SLOW_DUMP=1", NULL);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 7, "status %d: %s", r.status, r.err);
	snprintf(want, sizeof(want),
		 "memsnap: dump %s: the call did not finish in time: ", pidstr);
	cr_assert_eq(strncmp(r.err, want, strlen(want)), 0, "%s", r.err);
	cr_assert_not_null(strstr(r.err, " slow_dump+0x"), "%s", r.err);
	cr_assert_not_null(strstr(r.err, " mallctl+0x"), "%s", r.err);
	/* mallctl returns into memsnap's stub page: named, not "?". */
	cr_assert_not_null(strstr(r.err, " [memsnap-stub]\n"), "%s", r.err);
	run_free(&r);
	assert_nothing_left();
	/* The call returns by itself and the thread restores itself: the
	 * ping is answered (fixture_healthy waits up to 10 s). */
	fixture_assert_healthy(&fx);
}

/* How many of @pid's descriptors name a file of memsnap's ("memsnap"
 * in the path: its private directories). */
static int memsnap_fds(pid_t pid)
{
	char dir[64], path[PATH_MAX], link[PATH_MAX];
	struct dirent *de;
	int n = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	d = opendir(dir);
	cr_assert_not_null(d, "%s: %s", dir, strerror(errno));
	while ((de = readdir(d))) {
		ssize_t len;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = '\0';
		n += strstr(link, "memsnap") != NULL;
	}
	closedir(d);
	return n;
}

/*
 * A stats call that times out goes on in the target: when it ends, the
 * descriptor memsnap had the target open for it is closed there too.
 */
Test(dump, stats_timeout_leaves_no_descriptor)
{
	const char *args[] = { "--pid", pidstr, "--allocator", "jemalloc",
			       "--timeout", "0.5", "stats", "--raw", NULL };
	struct run r;

	/* Its malloc_stats_print prints, sleeps 2 s, prints again. */
	start("jemalloc-fake", "JE_FAKE_SLOW_STATS=1", NULL);
	cr_assert_eq(memsnap_fds(fx.pid), 0);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 7, "status %d: %s", r.status, r.err);
	run_free(&r);
	/* Its one thread answers the ping only once the call has ended
	 * and the thread restored itself. */
	fixture_assert_healthy(&fx);
	cr_assert_eq(memsnap_fds(fx.pid), 0,
		     "the capture descriptor is still open in the target");
	assert_nothing_left();
	/* and the next stats works */
	args[5] = "10";
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.err);
	cr_assert_str_eq(r.out, "fake\nfake, after 2 s\n");
	run_free(&r);
	cr_assert_eq(memsnap_fds(fx.pid), 0);
	fixture_assert_healthy(&fx);
}

Test(dump, thread_not_in_process)
{
	const char *args[] = { "--pid", pidstr, "--thread", "1", "dump", NULL };
	char want[256];
	struct run r;

	start("jemalloc-target", "MALLOC_CONF=prof:true", NULL);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 3, "%s", r.err);
	snprintf(want, sizeof(want),
		 "memsnap: dump %s: thread 1 is not a thread of pid %s\n",
		 pidstr, pidstr);
	cr_assert_str_eq(r.err, want);
	run_free(&r);
	assert_nothing_left();
	fixture_assert_healthy(&fx);
}

/* The main thread traced by another process: memsnap uses another. */
Test(dump, main_thread_traced_by_another)
{
	const char *dump[] = { "--pid", pidstr, "dump", NULL };
	const char *info[] = { "--pid", pidstr, "info", NULL };
	char want[256];
	int ready[2];
	pid_t tracer;
	struct run r;
	char c;

	start("jemalloc-target", "MALLOC_CONF=prof:true", NULL);
	cr_assert_eq(pipe(ready), 0);
	tracer = fork();
	cr_assert_geq(tracer, 0);
	if (tracer == 0) {
		/* Seized, not stopped: the fixture keeps running. */
		c = ptrace(PTRACE_SEIZE, fx.pid, 0, 0) ? 'n' : 'y';
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(ready[1]);
	cr_assert_eq(read(ready[0], &c, 1), 1);
	close(ready[0]);
	if (c != 'y') {
		kill(tracer, SIGKILL);
		waitpid(tracer, NULL, 0);
		cr_skip_test("this test cannot ptrace its fixture");
	}
	/* Tracers attach per thread: another one of the target's is used. */
	cr_assert_eq(run_memsnap(&r, dump), 0);
	cr_expect_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	cr_assert_eq(run_memsnap(&r, info), 0);
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect_not_null(strstr(r.out, "runtime (read through"), "%s", r.out);
	snprintf(want, sizeof(want), "runtime (read through tid %s)", pidstr);
	cr_expect_null(strstr(r.out, want), "the traced thread was used: %s",
		       r.out);
	run_free(&r);
	kill(tracer, SIGKILL);
	waitpid(tracer, NULL, 0);
	assert_nothing_left();
	fixture_assert_healthy(&fx);
}

/* TracerPid of the fixture's (only) thread. */
static pid_t tracer_of(pid_t pid)
{
	char path[64], buf[4096];
	const char *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strstr(buf, "TracerPid:");
	return p ? (pid_t)atoi(p + 10) : -1;
}

Test(dump, sigterm_restores_then_exits_9)
{
	const char *bin = getenv("MEMSNAP_BIN");
	char err[1024] = "", want[256];
	int errp[2], status, tries;
	ssize_t n;
	pid_t m;

	/* prof.dump takes 2 s: memsnap is attached for that long. */
	start("jemalloc-fake", "JE_FAKE_SLOW_DUMP=1", NULL);
	cr_assert_eq(pipe(errp), 0);
	m = fork();
	cr_assert_geq(m, 0);
	if (m == 0) {
		dup2(errp[1], 2);
		close(errp[0]);
		execl(bin, bin, "--pid", pidstr, "dump", (char *)NULL);
		_exit(127);
	}
	close(errp[1]);
	for (tries = 0; tries < 10000 && tracer_of(fx.pid) != m; tries++)
		usleep(1000);
	cr_assert_eq(tracer_of(fx.pid), m, "memsnap never attached");
	cr_assert_eq(kill(m, SIGTERM), 0);
	cr_assert_eq(waitpid(m, &status, 0), m);
	n = read(errp[0], err, sizeof(err) - 1);
	close(errp[0]);
	err[n > 0 ? n : 0] = '\0';
	cr_assert(WIFEXITED(status), "memsnap died of signal %d",
		  WTERMSIG(status));
	cr_assert_eq(WEXITSTATUS(status), 9, "%s", err);
	snprintf(want, sizeof(want),
		 "memsnap: dump %s: interrupted; the target is restored\n",
		 pidstr);
	cr_assert_str_eq(err, want);
	cr_assert_eq(tracer_of(fx.pid), 0, "still traced");
	assert_nothing_left();
	fixture_assert_healthy(&fx);
}

Test(dump, jemalloc_linked_into_the_executable)
{
	char out[PATH_MAX + 32];
	const char *args[] = { "--pid", pidstr, "dump", "-o", out, NULL };
	struct run r;

	/* tests/fixtures/elf.mk: Debian's libjemalloc_pic.a with the je_
	 * prefix, linked in and exported, like Redis' own build.  Only
	 * its entry points are off limits, not the whole executable. */
	start("elf-je", "MALLOC_CONF=prof:true", NULL);
	need_static_jemalloc_profiling();
	snprintf(out, sizeof(out), "%s/je.heap", out_dir);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	cr_assert_eq(strncmp(slurp(out), "heap_v2/", 8), 0);
	assert_nothing_left();
	fixture_assert_healthy(&fx);
}

Test(dump, thread_inside_the_allocator_is_never_used)
{
	const char *args[] = { "--pid", pidstr, "dump", NULL };
	char want[128];
	struct run r;

	/* Its only thread is inside malloc_stats_print(). */
	start("jemalloc-fake", "JE_FAKE_INSIDE=1", NULL);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 6, "status %d: %s", r.status, r.err);
	snprintf(want, sizeof(want),
		 "memsnap: dump %s: no thread was safe to call from: tid %s: ",
		 pidstr, pidstr);
	cr_assert_eq(strncmp(r.err, want, strlen(want)), 0, "%s", r.err);
	cr_assert_not_null(strstr(r.err, "jemalloc"), "%s", r.err);
	run_free(&r);
	assert_nothing_left();
	fixture_assert_healthy(&fx);
}
