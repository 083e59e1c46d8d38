/*
 * The sampler tests' library (sampler.h): the fixture and its counts,
 * memsnap run against it, and its folded reports read.
 */
#include "sampler.h"
#include "fault.h"
#include "scratch.h"

#include <criterion/criterion.h>
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct fixture fx = { .pid = -1 };
char base[PATH_MAX];
char tmp_dir[PATH_MAX + 8];
char pidstr[16];
const char *report_root;

static pid_t tracer_pid;	/* seize_thread()'s, until it is killed */

void sampler_setup(void)
{
	int rc;

	skip_cleanup = sampler_teardown;
	rc = scratch_make("memsnap-test-sampler", base, sizeof(base));
	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	snprintf(tmp_dir, sizeof(tmp_dir), "%s/tmp", base);
	cr_assert_eq(mkdir(tmp_dir, 01777), 0, "mkdir %s: %s", tmp_dir,
		     strerror(errno));
}

void sampler_teardown(void)
{
	/* a thread held by a tracer would hold up the fixture's end */
	if (tracer_pid > 0) {
		kill(tracer_pid, SIGKILL);
		waitpid(tracer_pid, NULL, 0);
		tracer_pid = 0;
	}
	fixture_stop(&fx);
	scratch_cleanup(base);
}

/* start(), under setarch -R (@no_aslr): the same addresses each run. */
static void start_as(const char *name, const char *conf, bool no_aslr)
{
	char path[PATH_MAX], tmp[PATH_MAX + 16], c[256];
	char setarch[] = "/usr/bin/setarch", r[] = "-R";
	char *argv[] = { path, NULL }, *fixed[] = { setarch, r, path, NULL };
	char *env[3] = { tmp, NULL, NULL };
	int rc;

	snprintf(tmp, sizeof(tmp), "TMPDIR=%s", tmp_dir);
	if (conf) {
		snprintf(c, sizeof(c), "%s", conf);
		env[1] = c;
	}
	fixture_path(name, path, sizeof(path));
	if (access(path, X_OK))
		skip_test("fixture %s not built", path);
	if (no_aslr && access(setarch, X_OK))
		skip_test("%s is missing (util-linux)", setarch);
	rc = fixture_start(&fx, no_aslr ? fixed : argv, env, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
	cr_assert(strstr(fx.ready, "sites=site_malloc_small,") ||
			  !strncmp(name, "sampler-cxx", 11) ||
			  !strcmp(name, "sampler-prefixed") ||
			  !strcmp(name, "sampler-stacks"),
		  "ready line: %s", fx.ready);
}

void start(const char *name, const char *conf)
{
	start_as(name, conf, false);
}

void start_without_aslr(const char *name)
{
	start_as(name, NULL, true);
}

/* ---- the fixture's sites and counts -------------------------------------- */

const char *const site_name[NSITES] = {
	"site_malloc_small", "site_calloc", "site_realloc",
	"site_reallocarray", "site_memalign", "site_valloc", "site_large",
	"leak_grow",
};

struct counts command_counts(char cmd)
{
	struct counts c;
	char reply[512], key[64];
	int rc, s;

	/* 200 MiB allocated and filled: generous, for a loaded machine */
	rc = fixture_command(&fx, cmd, reply, sizeof(reply), 60000);
	cr_assert_eq(rc, 0, "command %c: %s", cmd, strerror(-rc));
	cr_assert(!strncmp(reply, "ok bytes=", 9), "command %c: %s", cmd,
		  reply);
	for (s = 0; s < NSITES; s++) {
		const char *p;

		snprintf(key, sizeof(key), "%s:", site_name[s]);
		p = strstr(reply, key);
		cr_assert(p && (p[-1] == '=' || p[-1] == ','),
			  "command %c: no %s in '%s'", cmd, key, reply);
		c.v[s] = strtoll(p + strlen(key), NULL, 10);
	}
	return c;
}

void command_expect(char cmd, const char *want, char *reply, size_t size)
{
	int rc = fixture_command(&fx, cmd, reply, size, 60000);

	cr_assert_eq(rc, 0, "command %c: %s", cmd, strerror(-rc));
	cr_assert(!strncmp(reply, want, strlen(want)),
		  "command %c: '%s', want '%s...'", cmd, reply, want);
}

long waiter_eintr(void)
{
	char reply[64];

	command_expect('e', "ok eintr=", reply, sizeof(reply));
	return atol(reply + 9);
}

/* ---- memsnap ------------------------------------------------------------- */

void memsnap(struct run *r, const char *a0, ...)
{
	const char *args[32] = { "--pid", pidstr, a0 };
	size_t n = 3;
	va_list ap;
	int rc;

	va_start(ap, a0);
	while (n + 1 < 32 && (args[n] = va_arg(ap, const char *)))
		n++;
	va_end(ap);
	args[n] = NULL;
	rc = run_memsnap(r, args);
	cr_assert_eq(rc, 0, "run_memsnap: %s", strerror(-rc));
}

/* @s without its trailing newline, for messages. */
static const char *chomp(char *s)
{
	size_t n = strlen(s);

	while (n && s[n - 1] == '\n')
		s[--n] = '\0';
	return s;
}

void need_sampler(struct run *r)
{
	if (r->status == 2 && strstr(r->err, "--sampler"))
		skip_test("this memsnap has no `prof on --sampler` (exit 2: "
			  "%s)", chomp(r->err));
}

void sampler_on(long mean)
{
	char mean_arg[32];
	struct run r;

	snprintf(mean_arg, sizeof(mean_arg), "%ld", mean);
	if (mean)
		memsnap(&r, "prof", "on", "--sampler", "--sample-bytes",
			mean_arg, NULL);
	else
		memsnap(&r, "prof", "on", "--sampler", NULL);
	need_sampler(&r);
	cr_assert_eq(r.status, 0, "prof on --sampler: exit %d: %s", r.status,
		     r.err);
	cr_assert_eq(count_lines(r.out), 1,
		     "prof on --sampler: not one line: '%s'", r.out);
	cr_assert(strstr(r.out, "sampler on"),
		  "prof on --sampler printed '%s'", r.out);
	run_free(&r);
}

void sampler_off(void)
{
	struct run r;

	memsnap(&r, "prof", "off", NULL);
	cr_assert_eq(r.status, 0, "prof off: exit %d: %s", r.status, r.err);
	cr_assert(strstr(r.out, "sampler off"), "prof off printed '%s'",
		  r.out);
	run_free(&r);
}

int dump_try(const char *name, char *path, size_t size, struct run *r)
{
	snprintf(path, size, "%s/%s.heap", base, name);
	memsnap(r, "dump", "-o", path, NULL);
	return r->status;
}

void assert_heap_v2(const char *path, long mean)
{
	char head[64] = "", want[40];
	size_t n;
	FILE *f;

	f = fopen(path, "re");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	n = fread(head, 1, sizeof(head) - 1, f);
	fclose(f);
	head[n] = '\0';
	cr_assert(!strncmp(head, "heap_v2/", 8),
		  "%s is not a heap_v2 profile: '%.20s'", path, head);
	if (!mean)
		return;
	n = (size_t)snprintf(want, sizeof(want), "heap_v2/%ld", mean);
	cr_assert(!strncmp(head, want, n) && !isdigit((unsigned char)head[n]),
		  "%s: header '%.20s', want %s", path, head, want);
}

void dump_to(const char *name, long mean, char *path, size_t size)
{
	struct run r;

	dump_try(name, path, size, &r);
	cr_assert_eq(r.status, 0, "dump -o %s: exit %d: %s", path, r.status,
		     r.err);
	run_free(&r);
	assert_heap_v2(path, mean);
}

const char *sampler_state(char *buf, size_t size)
{
	struct run r;
	char *line;

	snprintf(buf, size, "info shows no sampler line");
	memsnap(&r, "info", "--no-attach", NULL);
	for (line = r.out; line; line = strchr(line, '\n')) {
		line += *line == '\n';
		if (!strncmp(line, "sampler", 7)) {
			snprintf(buf, size, "info: %.*s",
				 (int)strcspn(line, "\n"), line);
			break;
		}
	}
	run_free(&r);
	return buf;
}

const char *json_value(const char *s, const char *key)
{
	char pat[96];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\"", key);
	for (p = strstr(s, pat); p; p = strstr(p, pat)) {
		p += strlen(pat);
		while (isspace((unsigned char)*p))
			p++;
		if (*p != ':')
			continue;
		p++;
		while (isspace((unsigned char)*p))
			p++;
		return p;
	}
	return NULL;
}

pid_t seize_thread(pid_t tid)
{
	int ready[2];
	pid_t tracer;
	char c;

	cr_assert_eq(pipe(ready), 0);
	tracer = fork();
	cr_assert_geq(tracer, 0);
	tracer_pid = tracer;
	if (tracer == 0) {
		/* gone with the test, whatever fails */
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		prctl(PR_SET_NAME, "strace", 0, 0, 0);
		c = ptrace(PTRACE_SEIZE, tid, 0, 0) ? 'n' : 'y';
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(ready[1]);
	cr_assert_eq(read(ready[0], &c, 1), 1);
	close(ready[0]);
	cr_assert_eq(c, 'y', "the tracer could not seize tid %d", (int)tid);
	return tracer;
}

void let_go(pid_t tracer)
{
	kill(tracer, SIGKILL);
	waitpid(tracer, NULL, 0);
	tracer_pid = 0;
}

/* ---- folded reports ------------------------------------------------------ */

#define PROFILE_DEPTH 256

/* Add one line of a folded report, @len bytes at @line, to @fo. */
static void folded_add(struct folded *fo, const char *line, size_t len)
{
	char stack[4096], *f[PROFILE_DEPTH], *sp, *p;
	bool fixture = false, main_seen = false;
	size_t n = 0, i, k;
	long long v;
	int s;

	if (len >= sizeof(stack))
		len = sizeof(stack) - 1;
	memcpy(stack, line, len);
	stack[len] = '\0';
	sp = strrchr(stack, ' ');
	cr_assert_not_null(sp, "a folded line without a count: '%s'", stack);
	*sp = '\0';
	v = strtoll(sp + 1, NULL, 10);
	/* a copy for messages; then cut into frames, outermost first */
	snprintf(fo->last, sizeof(fo->last), "%.480s %lld", stack, v);
	for (p = stack; p && n < PROFILE_DEPTH; p = sp) {
		sp = strchr(p, ';');
		if (sp)
			*sp++ = '\0';
		f[n++] = p;
	}
	for (i = 0; i < n; i++) {
		main_seen |= i + 1 < n && !strcmp(f[i], "main");
		fixture |= !strcmp(f[i], "sampler_sites");
		for (s = 0; s < NSITES; s++)
			fixture |= !strcmp(f[i], site_name[s]);
	}
	if (fixture)
		fo->fixture_bytes += v;

	for (k = 0; k < fo->nleaves; k++)
		if (!strcmp(fo->leaf[k].name, f[n - 1]))
			break;
	if (k == fo->nleaves) {
		cr_assert_lt(fo->nleaves, MAX_LEAVES, "too many leaves");
		/* a longer name is cut: only the sites' are compared */
		snprintf(fo->leaf[k].name, sizeof(fo->leaf[k].name), "%.127s",
			 f[n - 1]);
		fo->nleaves++;
	}
	fo->leaf[k].bytes += v;

	for (s = 0; s < NSITES; s++) {
		/* a site that is not the leaf: what follows it, for the
		 * message when its own sum is missing */
		for (i = 0; i + 1 < n; i++)
			if (!strcmp(f[i], site_name[s]) && !fo->after[s][0])
				snprintf(fo->after[s], sizeof(fo->after[s]),
					 "%.127s", f[i + 1]);
		if (strcmp(f[n - 1], site_name[s]))
			continue;
		fo->site[s] += v;
		fo->lines[s]++;
		/* sampler_sites right before the leaf, main outside it */
		if ((!main_seen || n < 2 || strcmp(f[n - 2], "sampler_sites")) &&
		    !fo->wrong[s][0])
			snprintf(fo->wrong[s], sizeof(fo->wrong[s]), "%s",
				 fo->last);
	}
}

void folded_load(const char *dump, const char *old, struct folded *fo)
{
	folded_load_with(dump, old, NULL, fo);
}

void folded_load_with(const char *dump, const char *old, const char *opt,
		      struct folded *fo)
{
	const char *args[12] = { "report", dump, "--format", "folded", "-q" };
	size_t na = 5;
	struct run r;
	const char *p;
	int rc;

	memset(fo, 0, sizeof(*fo));
	if (old) {
		args[na++] = "--base";
		args[na++] = old;
	}
	if (report_root) {
		args[na++] = "--root";
		args[na++] = report_root;
	}
	if (opt)
		args[na++] = opt;
	rc = run_memsnap(&r, args);
	cr_assert_eq(rc, 0, "run_memsnap: %s", strerror(-rc));
	cr_assert_eq(r.status, 0, "report %s%s%s: exit %d: %s", dump,
		     old ? " --base " : "", old ? old : "", r.status, r.err);
	for (p = r.out; *p;) {
		const char *nl = strchrnul(p, '\n');

		if (nl > p)
			folded_add(fo, p, (size_t)(nl - p));
		p = *nl ? nl + 1 : nl;
	}
	fo->text = r.out;
	free(r.err);
}

void folded_free(struct folded *fo)
{
	free(fo->text);
	fo->text = NULL;
}

bool near(long long got, long long want, int pct)
{
	return llabs(got - want) * 100 <= llabs(want) * pct;
}

void check_sites(const struct folded *fo, const struct counts *c,
		 unsigned mask, const char *what, bool whole)
{
	char state[512];
	int s;

	sampler_state(state, sizeof(state));
	for (s = 0; s < NSITES; s++) {
		if (!(mask & 1u << s) || !c->v[s])
			continue;
		cr_assert_gt(fo->lines[s], 0,
			     "%s: no stack ends in %s (%lld bytes live)%s%s%s "
			     "(%s):\n%.3000s",
			     what, site_name[s], c->v[s],
			     fo->after[s][0] ? "; it is followed by '" : "",
			     fo->after[s], fo->after[s][0]
				     ? "' (the innermost frame named at the "
				       "return address, not at the call?)"
				     : "",
			     state, fo->text);
		cr_assert(near(fo->site[s], c->v[s], 10),
			  "%s: %s: %lld bytes in the profile, %lld live "
			  "(more than 10%% off; %s):\n%.3000s",
			  what, site_name[s], fo->site[s], c->v[s], state,
			  fo->text);
		cr_assert(!whole || !fo->wrong[s][0],
			  "%s: %s's stack does not reach main through "
			  "sampler_sites (unwinding without frame pointers "
			  "failed?): '%s'",
			  what, site_name[s], fo->wrong[s]);
	}
}

void assert_sites(const struct folded *fo, const struct counts *c,
		  unsigned mask, const char *what)
{
	check_sites(fo, c, mask, what, true);
}

long long leaf_bytes(const struct folded *fo, const char *name)
{
	size_t k;

	for (k = 0; k < fo->nleaves; k++)
		if (!strcmp(fo->leaf[k].name, name))
			return fo->leaf[k].bytes;
	return 0;
}
