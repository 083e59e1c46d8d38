/*
 * memsnap exporter with the real Prometheus side, Debian's packages on
 * loopback ports of their own:
 *   - prometheus scraping the exporter every second while a glibc
 *     process leaks 1 MiB a second beside a fixed one and a jemalloc
 *     one holding dirty pages: deriv() of heap in use is the leak's
 *     rate for the one and flat for the other, the jemalloc one's free
 *     bytes are there, and the shipped rules, made by make-rules with
 *     every duration divided by 180 (an hour is 20 s), take
 *     MemsnapHeapGrowing from pending to firing for the leak after its
 *     `for:` and never for the others;
 *   - prometheus-node-exporter's textfile collector serving what
 *     `--textfile` wrote;
 *   - promtool: the shipped rules check, their unit tests pass, and
 *     they are what make-rules makes of the template.
 * Every fixture is asked afterwards whether it is well.
 */
#include "../lib/fault.h"
#include "../lib/fixture.h"
#include "../lib/prom.h"
#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MiB (1024.0 * 1024.0)
#define PROMETHEUS "/usr/bin/prometheus"
#define NODE_EXPORTER "/usr/bin/prometheus-node-exporter"
#define PROMTOOL "/usr/bin/promtool"
/* make-rules' divisor here: an hour is 20 s, half an hour 10 s */
#define SCALE "180"
#define FOR_S 10

static struct fixture fx[3] = { { .pid = -1 }, { .pid = -1 }, { .pid = -1 } };
static struct daemon exporter = { .pid = -1 }, prom = { .pid = -1 },
		     node = { .pid = -1 };
static char dir[PATH_MAX];

static void setup(void)
{
	int rc = scratch_make("memsnap-test-prometheus", dir, sizeof(dir));

	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
}

static void teardown(void)
{
	size_t i;

	daemon_stop(&prom, 10000);
	daemon_stop(&node, 5000);
	daemon_stop(&exporter, 5000);
	for (i = 0; i < 3; i++)
		fixture_stop(&fx[i]);
	scratch_cleanup(dir);
}

TestSuite(exporter_prometheus, .init = setup, .fini = teardown,
	  .timeout = 240);

static void need(const char *path, const char *package)
{
	if (access(path, X_OK))
		skip_test("%s is not installed (apt-get install %s)", path,
			  package);
}

/* The tree's contrib/prometheus, from $MEMSNAP_TESTDATA (tests/data). */
static void contrib(const char *file, char *buf, size_t size)
{
	const char *data = getenv("MEMSNAP_TESTDATA");

	cr_assert_not_null(data, "MEMSNAP_TESTDATA is not set");
	snprintf(buf, size, "%s/../../contrib/prometheus/%s", data, file);
}

static void start(size_t i, const char *name, char *const args[],
		  char *const env[])
{
	char path[PATH_MAX];
	char *argv[12] = { path };
	size_t n = 1;
	int rc;

	fixture_path(name, path, sizeof(path));
	while (args[n - 1] && n + 1 < 12) {
		argv[n] = args[n - 1];
		n++;
	}
	argv[n] = NULL;
	rc = fixture_start(&fx[i], argv, env, 30000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
}

static void shell(const char *cmd)
{
	struct run r;

	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s: exit %d\n%s%s", cmd, r.status, r.out,
		     r.err);
	run_free(&r);
}

/* Prometheus on a port of its own, scraping the exporter on @target
 * every second with the rules at SCALE; its port. */
static unsigned int start_prometheus(unsigned int target)
{
	char cfg[PATH_MAX + 16], rules[PATH_MAX + 16], data[PATH_MAX + 16];
	char make[PATH_MAX], cmd[3 * PATH_MAX], listen[64], log[PATH_MAX + 16];
	char cfg_arg[PATH_MAX + 64], data_arg[PATH_MAX + 64];
	char *argv[] = { (char *)PROMETHEUS, cfg_arg, data_arg, listen,
			 (char *)"--log.level=warn", NULL };
	unsigned int port = free_port();
	FILE *f;
	int rc;

	snprintf(cfg, sizeof(cfg), "%s/prometheus.yml", dir);
	snprintf(rules, sizeof(rules), "%s/rules.yml", dir);
	snprintf(data, sizeof(data), "%s/data", dir);
	contrib("make-rules", make, sizeof(make));
	snprintf(cmd, sizeof(cmd), "'%s' " SCALE " > '%s'", make, rules);
	shell(cmd);
	f = fopen(cfg, "w");
	cr_assert_not_null(f);
	fprintf(f,
		"global:\n"
		"  scrape_interval: 1s\n"
		"  scrape_timeout: 1s\n"
		"  evaluation_interval: 1s\n"
		"rule_files:\n"
		"  - %s\n"
		"scrape_configs:\n"
		"  - job_name: memsnap\n"
		"    static_configs:\n"
		"      - targets: ['127.0.0.1:%u']\n",
		rules, target);
	fclose(f);
	snprintf(cfg_arg, sizeof(cfg_arg), "--config.file=%s", cfg);
	snprintf(data_arg, sizeof(data_arg), "--storage.tsdb.path=%s", data);
	snprintf(listen, sizeof(listen), "--web.listen-address=127.0.0.1:%u",
		 port);
	snprintf(log, sizeof(log), "%s/prometheus.log", dir);
	rc = daemon_start(&prom, argv, log);
	cr_assert_eq(rc, 0, "starting prometheus: %s", strerror(-rc));
	cr_assert(http_wait_ready(port, "/-/ready", 60000),
		  "prometheus is not ready:\n%s", daemon_log(&prom));
	return port;
}

static double query(unsigned int port, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The one value of the PromQL @fmt, NAN when there is none. */
static double query(unsigned int port, const char *fmt, ...)
{
	char expr[1024];
	va_list ap;
	double v;
	int rc;

	va_start(ap, fmt);
	vsnprintf(expr, sizeof(expr), fmt, ap);
	va_end(ap);
	rc = prom_query(port, expr, &v);
	cr_assert(rc == 0 || rc == -ENOENT, "%s: %s", expr, strerror(-rc));
	return rc ? NAN : v;
}

Test(exporter_prometheus, leak_told_from_fixed_and_alert_fires)
{
	static char hold[] = "--hold", m8[] = "8388608", m24[] = "25165824",
		    leak[] = "--leak", rate[] = "1048576", churn[] = "--churn",
		    m48[] = "48M", m8s[] = "8M";
	char *leaky[] = { hold, m8, leak, rate, NULL };
	char *fixed[] = { hold, m24, NULL };
	char *je[] = { churn, m48, hold, m8s, NULL };
	char *jenv[] = { (char *)"MALLOC_CONF=", NULL };
	char l[16], f[16], j[16];
	const char *args[] = { "--pid", l, "--pid", f, "--pid", j,
			       "--attach-every", "1s", NULL };
	long deadline, pending_at = 0, firing_at = 0;
	double slope = NAN, flat = NAN, free_b = NAN, v;
	unsigned int xport, pport;
	int rc;
	size_t i;

	need_http();
	need(PROMETHEUS, "prometheus");
	start(0, "exporter-target", leaky, NULL);
	start(1, "exporter-target", fixed, NULL);
	start(2, "explain-heap-jemalloc", je, jenv);
	snprintf(l, sizeof(l), "%d", (int)fx[0].pid);
	snprintf(f, sizeof(f), "%d", (int)fx[1].pid);
	snprintf(j, sizeof(j), "%d", (int)fx[2].pid);
	rc = exporter_start(&exporter, dir, args, &xport);
	cr_assert_eq(rc, 0, "starting the exporter: %s", strerror(-rc));
	pport = start_prometheus(xport);

	/* everything polled through Prometheus's API, until the alert
	 * fires or 120 s have gone */
	deadline = prom_now_ms() + 120000;
	while (prom_now_ms() < deadline && !firing_at) {
		slope = query(pport, "deriv(memsnap_process_memory_bytes{pid=\"%s\",part=\"heap_in_use\"}[10s])", l);
		flat = query(pport, "deriv(memsnap_process_memory_bytes{pid=\"%s\",part=\"heap_in_use\"}[10s])", f);
		free_b = query(pport, "memsnap_allocator_bytes{pid=\"%s\",stat=\"free\"}", j);
		v = query(pport, "ALERTS{alertname=\"MemsnapHeapGrowing\",alertstate=\"pending\",pid=\"%s\"}", l);
		if (!isnan(v) && !pending_at)
			pending_at = prom_now_ms();
		v = query(pport, "ALERTS{alertname=\"MemsnapHeapGrowing\",alertstate=\"firing\",pid=\"%s\"}", l);
		if (!isnan(v))
			firing_at = prom_now_ms();
	}
	cr_assert(firing_at, "MemsnapHeapGrowing never fired for the leak in "
		  "120 s (deriv %.0f B/s); prometheus:\n%s\nexporter:\n%s",
		  slope, daemon_log(&prom), daemon_log(&exporter));
	/* the leak's slope is its rate (1 MiB/s), the fixed heap's none */
	cr_expect(slope > 0.5 * MiB && slope < 1.5 * MiB,
		  "deriv of the leak's heap in use: %.0f B/s", slope);
	cr_expect(!isnan(flat) && fabs(flat) < 64 * 1024,
		  "deriv of the fixed heap in use: %.0f B/s", flat);
	cr_expect_geq(free_b, 24 * MiB, "jemalloc's free bytes: %.0f", free_b);
	/* pending first, firing once its `for:` had passed */
	cr_expect(pending_at && firing_at - pending_at >= (FOR_S - 2) * 1000,
		  "firing %ld ms after pending (for: %d s)",
		  pending_at ? firing_at - pending_at : -1L, FOR_S);
	/* never pending nor firing for the others */
	for (i = 1; i < 3; i++) {
		char expr[256];

		snprintf(expr, sizeof(expr),
			 "count_over_time(ALERTS{alertname=\"MemsnapHeapGrowing\",pid=\"%d\"}[5m])",
			 (int)fx[i].pid);
		cr_expect_eq(prom_count(pport, expr), 0,
			     "MemsnapHeapGrowing for pid %d", (int)fx[i].pid);
	}
	/* every scrape of the exporter succeeded */
	v = query(pport, "min_over_time(up{job=\"memsnap\"}[5m])");
	cr_expect_eq(v, 1, "a scrape failed: up %.0f", v);
	for (i = 0; i < 3; i++)
		assert_untouched(&fx[i], "scraped for a minute");
	cr_expect_eq(daemon_stop(&exporter, 10000), 0, "the exporter's exit");
}

Test(exporter_prometheus, node_exporter_serves_the_textfile)
{
	static char hold[] = "--hold", m8[] = "8388608";
	char *args_fx[] = { hold, m8, NULL };
	char a[16], out[PATH_MAX + 16], listen[64], textdir[PATH_MAX + 64];
	char log[PATH_MAX + 16], p[32];
	const char *args[] = { "exporter", "--pid", a, "--textfile", out,
			       "--once", NULL };
	char *argv[] = { (char *)NODE_EXPORTER, listen,
			 (char *)"--collector.disable-defaults",
			 (char *)"--collector.textfile", textdir, NULL };
	unsigned int port = free_port();
	char *body = NULL;
	struct run r;
	double v;
	int status, rc;

	need(NODE_EXPORTER, "prometheus-node-exporter");
	start(0, "exporter-target", args_fx, NULL);
	snprintf(a, sizeof(a), "%d", (int)fx[0].pid);
	snprintf(out, sizeof(out), "%s/memsnap.prom", dir);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	snprintf(listen, sizeof(listen), "--web.listen-address=127.0.0.1:%u",
		 port);
	snprintf(textdir, sizeof(textdir),
		 "--collector.textfile.directory=%s", dir);
	snprintf(log, sizeof(log), "%s/node.log", dir);
	rc = daemon_start(&node, argv, log);
	cr_assert_eq(rc, 0, "starting the node exporter: %s", strerror(-rc));
	cr_assert(http_wait_ready(port, "/", 30000), "%s", daemon_log(&node));
	rc = http_get(port, "/metrics", 10000, &status, &body);
	cr_assert_eq(rc, 0);
	cr_assert_eq(status, 200);
	snprintf(p, sizeof(p), "pid=\"%d\"", (int)fx[0].pid);
	cr_expect_eq(expo_value(body, "memsnap_process_memory_bytes",
				(const char *const[]){ p, "part=\"heap_in_use\"", NULL },
				&v), 0, "%s", body);
	cr_expect(v > 7.5 * MiB && v < 8.5 * MiB, "heap in use %.0f", v);
	cr_expect_eq(expo_value(body, "node_textfile_scrape_error", NULL, &v),
		     0, "%s", body);
	cr_expect_eq(v, 0, "the collector could not read the file:\n%s", body);
	free(body);
	assert_untouched(&fx[0], "written for the collector");
}

Test(exporter_prometheus, shipped_rules_pass_promtool)
{
	char rules[PATH_MAX], tests[PATH_MAX], make[PATH_MAX];
	char cmd[4 * PATH_MAX];

	need(PROMTOOL, "prometheus");
	contrib("memsnap-rules.yml", rules, sizeof(rules));
	contrib("memsnap-rules.test.yml", tests, sizeof(tests));
	contrib("make-rules", make, sizeof(make));
	/* the shipped file is the template's, and so is the test's */
	snprintf(cmd, sizeof(cmd), "'%s' | cmp - '%s'", make, rules);
	shell(cmd);
	snprintf(cmd, sizeof(cmd), "'%s' check rules '%s'", PROMTOOL, rules);
	shell(cmd);
	snprintf(cmd, sizeof(cmd), "'%s' " SCALE " > '%s/fast.yml' && '%s' check rules '%s/fast.yml'",
		 make, dir, PROMTOOL, dir);
	shell(cmd);
	snprintf(cmd, sizeof(cmd), "'%s' test rules '%s'", PROMTOOL, tests);
	shell(cmd);
}
