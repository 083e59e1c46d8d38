/*
 * jemalloc through the call engine: `prof` switches that `info` then
 * shows, the runtime section of `info`, and profiles that jeprof reads
 * with the leak chain in them (the fixture's and the demo's).
 */
#include "../lib/fixture.h"
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

static struct fixture fx = { .pid = -1 };
static pid_t demo = -1;
static char pidstr[16];
static char outdir[PATH_MAX];

static void setup(void)
{
	int rc = scratch_make("memsnap-test-jemalloc", outdir, sizeof(outdir));

	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
}

static void teardown(void)
{
	fixture_stop(&fx);
	if (demo > 0) {
		kill(demo, SIGKILL);
		waitpid(demo, NULL, 0);
		demo = -1;
	}
	scratch_cleanup(outdir);
}

TestSuite(jemalloc, .init = setup, .fini = teardown, .timeout = 120);

static void start(const char *malloc_conf)
{
	char path[PATH_MAX], conf[256], cwd[PATH_MAX + 32];
	char *argv[] = { path, NULL };
	char *env[] = { conf, cwd, NULL };
	int rc;

	snprintf(conf, sizeof(conf), "%s", malloc_conf ? malloc_conf : "X=");
	/* gdump writes there. */
	snprintf(cwd, sizeof(cwd), "JE_FIXTURE_CWD=%s", outdir);
	fixture_path("jemalloc-target", path, sizeof(path));
	rc = fixture_start(&fx, argv, env, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
}

/* `memsnap --pid P ARGS...`, expecting exit 0; stdout stays in @r. */
static void memsnap_ok(struct run *r, const char *const *args)
{
	cr_assert_eq(run_memsnap(r, args), 0);
	cr_assert_eq(r->status, 0, "memsnap %s %s: status %d: %s", args[2],
		     args[3] ? args[3] : "", r->status, r->err);
}

/* The JSON member "@key": its text up to the next comma or newline. */
static const char *json_member(const char *json, const char *key, char *buf,
			       size_t size)
{
	char pat[128];
	const char *p;
	size_t n;

	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = strstr(json, pat);
	cr_assert_not_null(p, "no %s in %s", key, json);
	p += strlen(pat);
	n = strcspn(p, ",\n");
	snprintf(buf, size, "%.*s", (int)n, p);
	return buf;
}

static void expect_info(const char *key, const char *want)
{
	const char *args[] = { "--pid", pidstr, "--json", "info", NULL };
	char got[128];
	struct run r;

	memsnap_ok(&r, args);
	cr_expect_str_eq(json_member(r.out, key, got, sizeof(got)), want,
			 "%s", key);
	run_free(&r);
}

Test(jemalloc, prof_switches_show_in_info)
{
	const char *off[] = { "--pid", pidstr, "prof", "off", NULL };
	const char *on[] = { "--pid", pidstr, "prof", "on", NULL };
	const char *gon[] = { "--pid", pidstr, "prof", "gdump", "on", NULL };
	const char *goff[] = { "--pid", pidstr, "prof", "gdump", "off", NULL };
	const char *reset[] = { "--pid", pidstr, "prof", "reset",
				"--lg-sample", "14", NULL };
	const char *reset2[] = { "--pid", pidstr, "prof", "reset", NULL };
	char want[PATH_MAX + 256];
	struct run r;

	start("MALLOC_CONF=prof:true");
	expect_info("prof.active", "true");

	memsnap_ok(&r, off);
	snprintf(want, sizeof(want), "pid %s: heap profiling off (was on)\n",
		 pidstr);
	cr_assert_str_eq(r.out, want);
	run_free(&r);
	expect_info("prof.active", "false");
	fixture_assert_healthy(&fx);

	memsnap_ok(&r, on);
	snprintf(want, sizeof(want), "pid %s: heap profiling on (was off)\n",
		 pidstr);
	cr_assert_str_eq(r.out, want);
	run_free(&r);
	expect_info("prof.active", "true");

	memsnap_ok(&r, gon);
	snprintf(want, sizeof(want),
		 "pid %s: dump on every new heap high (gdump) on (was off)\n",
		 pidstr);
	cr_assert_str_eq(r.out, want);
	snprintf(want, sizeof(want),
		 "memsnap: warning: pid %s now writes a profile into its working directory (%s) at every new heap high;",
		 pidstr, outdir);
	cr_assert_eq(strncmp(r.err, want, strlen(want)), 0, "%s", r.err);
	run_free(&r);
	expect_info("prof.gdump", "true");
	memsnap_ok(&r, goff);
	run_free(&r);
	expect_info("prof.gdump", "false");

	memsnap_ok(&r, reset);
	snprintf(want, sizeof(want),
		 "pid %s: profile reset, sampling every 2^14 bytes on average\n",
		 pidstr);
	cr_assert_str_eq(r.out, want);
	run_free(&r);
	expect_info("prof.lg_sample", "14");
	/* The start-up value stays what it was. */
	expect_info("opt.lg_prof_sample", "19");
	/* Without --lg-sample: the current rate is kept. */
	memsnap_ok(&r, reset2);
	cr_assert_not_null(strstr(r.out, "every 2^14 bytes"), "%s", r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

Test(jemalloc, prof_json)
{
	const char *off[] = { "--pid", pidstr, "--json", "prof", "off", NULL };
	char got[64];
	struct run r;

	start("MALLOC_CONF=prof:true");
	memsnap_ok(&r, off);
	cr_expect_str_eq(json_member(r.out, "action", got, sizeof(got)),
			 "\"sampling\"");
	cr_expect_str_eq(json_member(r.out, "was", got, sizeof(got)), "true");
	cr_expect_str_eq(json_member(r.out, "now", got, sizeof(got)), "false");
	run_free(&r);
	fixture_assert_healthy(&fx);
}

Test(jemalloc, prof_without_profiling)
{
	need_jemalloc_profiling();
	const char *on[] = { "--pid", pidstr, "prof", "on", NULL };
	char want[512];
	struct run r;

	start(NULL);
	cr_assert_eq(run_memsnap(&r, on), 0);
	cr_assert_eq(r.status, 5, "%s", r.err);
	snprintf(want, sizeof(want),
		 "memsnap: prof %s: jemalloc profiling is off (opt.prof is false, fixed at start-up); restart it with MALLOC_CONF=prof:true,prof_active:false, then `memsnap --pid %s prof on` starts sampling\n"
		 "memsnap: hint: or, with no restart, memsnap's own sampler: `memsnap --pid %s prof on --sampler`, then dump\n",
		 pidstr, pidstr, pidstr);
	cr_assert_str_eq(r.err, want);
	cr_assert_str_eq(r.out, "");
	run_free(&r);
	fixture_assert_healthy(&fx);
}

Test(jemalloc, info_runtime_section)
{
	need_jemalloc_profiling();
	const char *text[] = { "--pid", pidstr, "info", NULL };
	const char *json[] = { "--pid", pidstr, "--json", "info", NULL };
	char got[128], want[200];
	struct run r;

	start("MALLOC_CONF=prof:true,lg_prof_sample:16");
	memsnap_ok(&r, text);
	cr_assert_not_null(strstr(r.out, "  runtime (read through tid "), "%s",
			   r.out);
	cr_assert_not_null(strstr(r.out, "  opt.prof            true\n"), "%s",
			   r.out);
	cr_assert_not_null(strstr(r.out, "  version             \"5."), "%s",
			   r.out);
	cr_assert_str_eq(r.err, "");
	run_free(&r);

	memsnap_ok(&r, json);
	cr_expect_str_eq(json_member(r.out, "config.prof", got, sizeof(got)),
			 "true");
	cr_expect_str_eq(json_member(r.out, "opt.lg_prof_sample", got,
				     sizeof(got)), "16");
	cr_expect_str_eq(json_member(r.out, "opt.prof_prefix", got,
				     sizeof(got)), "\"jeprof\"");
	/* The fixture leaked 4 MiB: allocated counts at least that, and
	 * the other statistics are ordered as jemalloc defines them. */
	{
		unsigned long long alloc, active, resident, mapped;

		alloc = strtoull(json_member(r.out, "stats.allocated", got,
					     sizeof(got)), NULL, 10);
		active = strtoull(json_member(r.out, "stats.active", got,
					      sizeof(got)), NULL, 10);
		resident = strtoull(json_member(r.out, "stats.resident", got,
						sizeof(got)), NULL, 10);
		mapped = strtoull(json_member(r.out, "stats.mapped", got,
					      sizeof(got)), NULL, 10);
		cr_expect_geq(alloc, 4ull << 20);
		cr_expect_geq(active, alloc);
		cr_expect_geq(resident, active);
		cr_expect_geq(mapped, active);
	}
	/* The borrowed thread is one of the fixture's, not the main one. */
	json_member(r.out, "tid", got, sizeof(got));
	snprintf(want, sizeof(want), "/proc/%s/task/%s", pidstr, got);
	cr_expect_eq(access(want, F_OK), 0, "%s", want);
	cr_expect_neq(atoi(got), (int)fx.pid);
	cr_expect_str_eq(json_member(r.out, "runtime_error", got, sizeof(got)),
			 "null");
	run_free(&r);
	fixture_assert_healthy(&fx);
}

Test(jemalloc, info_runtime_with_profiling_off)
{
	need_jemalloc_profiling();
	const char *text[] = { "--pid", pidstr, "info", NULL };
	struct run r;

	start(NULL);
	memsnap_ok(&r, text);
	cr_assert_not_null(strstr(r.out, "  opt.prof            false\n"),
			   "%s", r.out);
	cr_assert_not_null(strstr(r.out, "  prof.active         false\n"),
			   "%s", r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

Test(jemalloc, info_no_attach)
{
	const char *json[] = { "--pid", pidstr, "--json", "info", "--no-attach",
			       NULL };
	char got[64];
	struct run r;

	start("MALLOC_CONF=prof:true");
	memsnap_ok(&r, json);
	cr_expect_str_eq(json_member(r.out, "runtime", got, sizeof(got)),
			 "null");
	cr_expect_str_eq(json_member(r.out, "runtime_error", got, sizeof(got)),
			 "null");
	cr_expect_null(strstr(r.out, "stats.allocated"));
	run_free(&r);
	fixture_assert_healthy(&fx);
}

Test(jemalloc, prof_usage_errors)
{
	static const struct {
		const char *args[8];
		const char *err;
	} cases[] = {
		{ { "--pid", "1", "prof", NULL },
		  "memsnap: prof: say on [--sampler [--sample-bytes SIZE] [--stack-bytes SIZE]], off, reset [--lg-sample N] or gdump on|off (see memsnap --help)\n" },
		{ { "--pid", "1", "prof", "maybe", NULL },
		  "memsnap: prof: unknown action 'maybe'; say on [--sampler [--sample-bytes SIZE] [--stack-bytes SIZE]], off, reset [--lg-sample N] or gdump on|off\n" },
		{ { "--pid", "1", "prof", "gdump", NULL },
		  "memsnap: prof gdump: say on or off (see memsnap --help)\n" },
		{ { "--pid", "1", "prof", "on", "now", NULL },
		  "memsnap: prof: unexpected argument 'now' (see memsnap --help)\n" },
		{ { "--pid", "1", "prof", "reset", "--lg-sample", "63", NULL },
		  "memsnap: prof reset: --lg-sample 63: not a number from 0 to 62\n" },
		{ { "--pid", "1", "prof", "reset", "--lg-sample", "-1", NULL },
		  "memsnap: prof reset: --lg-sample -1: not a number from 0 to 62\n" },
		{ { "--pid", "1", "prof", "reset", "--lg-sample", NULL },
		  "memsnap: prof reset: --lg-sample needs a value (see memsnap --help)\n" },
		{ { "prof", "on", NULL },
		  "memsnap: prof: which process? give --pid PID\n" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct run r;

		cr_assert_eq(run_memsnap(&r, cases[i].args), 0);
		cr_expect_eq(r.status, 2, "case %zu: %s", i, r.err);
		cr_expect_str_eq(r.err, cases[i].err, "case %zu", i);
		run_free(&r);
	}
}

/* jeprof --text BINARY PROFILE: its output, or skip if there is none. */
static char *jeprof_text(const char *binary, const char *profile)
{
	char cmd[3 * PATH_MAX];
	struct run r;

	if (access("/usr/bin/jeprof", X_OK))
		cr_skip_test("jeprof is not installed (libjemalloc-dev)");
	snprintf(cmd, sizeof(cmd), "/usr/bin/jeprof --text '%s' '%s' 2>&1",
		 binary, profile);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s", r.out);
	free(r.err);
	return r.out;
}

Test(jemalloc, profile_shows_the_leak_chain_to_jeprof)
{
	char out[PATH_MAX + 16], path[PATH_MAX];
	const char *args[] = { "--pid", pidstr, "dump", "-o", out, NULL };
	struct run r;
	char *text;

	start("MALLOC_CONF=prof:true");
	snprintf(out, sizeof(out), "%s/t.heap", outdir);
	memsnap_ok(&r, args);
	run_free(&r);
	fixture_path("jemalloc-target", path, sizeof(path));
	text = jeprof_text(path, out);
	cr_expect_not_null(strstr(text, "Total: "), "%s", text);
	cr_expect_not_null(strstr(text, "leak_inner"), "%s", text);
	cr_expect_not_null(strstr(text, "leak_outer"), "%s", text);
	free(text);
	fixture_assert_healthy(&fx);
}

/* The demo prints "ready PID" on stdout when its threads are up. */
static void start_demo(const char *path)
{
	char line[64];
	int p[2];
	ssize_t n;
	size_t got = 0;

	cr_assert_eq(pipe(p), 0);
	demo = fork();
	cr_assert_geq(demo, 0);
	if (demo == 0) {
		dup2(p[1], 1);
		close(p[0]);
		setenv("MALLOC_CONF", "prof:true,lg_prof_sample:12", 1);
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	while (got < sizeof(line) - 1 &&
	       (n = read(p[0], line + got, 1)) == 1 && line[got] != '\n')
		got++;
	line[got] = '\0';
	close(p[0]);
	cr_assert_eq(strncmp(line, "ready ", 6), 0, "demo said '%s'", line);
	snprintf(pidstr, sizeof(pidstr), "%d", (int)demo);
}

Test(jemalloc, demo_dump_shows_session_buffer)
{
	need_jemalloc_profiling();
	const char *path = getenv("MEMSNAP_DEMO");
	char out[PATH_MAX + 16];
	const char *args[] = { "--pid", pidstr, "dump", "-o", out, NULL };
	struct run r;
	char *text;
	int i;

	if (!path || access(path, X_OK))
		cr_skip_test("the demo is not built (MEMSNAP_DEMO)");
	start_demo(path);
	snprintf(out, sizeof(out), "%s/demo.heap", outdir);
	/* While it serves requests: several dumps, it keeps running. */
	for (i = 0; i < 3; i++) {
		memsnap_ok(&r, args);
		run_free(&r);
		cr_assert_eq(kill(demo, 0), 0, "the demo died");
	}
	text = jeprof_text(path, out);
	cr_expect_not_null(strstr(text, "session_buffer"), "%s", text);
	cr_expect_not_null(strstr(text, "session_open"), "%s", text);
	free(text);
	cr_assert_eq(waitpid(demo, NULL, WNOHANG), 0, "the demo exited");
}

Test(jemalloc, prof_timings)
{
	need_jemalloc_profiling();
	const char *off[] = { "--pid", pidstr, "--timings", "prof", "off",
			      NULL };
	char want[64];
	struct run r;

	start("MALLOC_CONF=prof:true");
	memsnap_ok(&r, off);
	snprintf(want, sizeof(want), "memsnap: timings: pid %s tid ", pidstr);
	cr_assert_eq(strncmp(r.err, want, strlen(want)), 0, "%s", r.err);
	cr_assert_not_null(strstr(r.err, ", call "), "%s", r.err);
	cr_assert_not_null(strstr(r.err, "; 1 of 4 threads stopped\n"), "%s",
			   r.err);
	run_free(&r);
	expect_info("prof.active", "false");
	fixture_assert_healthy(&fx);
}
