/*
 * `memsnap prof on --sampler` end to end (issue #15): memsnap's own
 * byte-sampling heap profiler, placed in a target whose allocator
 * cannot profile, on tests/fixtures/sampler_target.c (plain glibc
 * malloc, no frame pointers; sampler-target-je: the same on a jemalloc
 * without prof:true).  Proven here:
 *
 *   - the CLI's words: `prof on --sampler` twice, with --json, `info`'s
 *     sampler line, `prof off`
 *   - each allocation site's live bytes, unsampled from `dump` by
 *     `report --format folded`, within 10% of the exact count the
 *     fixture gives, under a stack that reaches main through
 *     sampler_sites (unwound by DWARF CFI: the fixture has no frame
 *     pointers)
 *   - freed blocks leave the profile; `report --base` finds the leak and
 *     nothing else
 *   - `prof off` puts every GOT slot of the malloc family back to the
 *     value it had before `prof on`, read here from /proc/PID/mem at
 *     addresses found with readelf (not with memsnap's code), and every
 *     file mapping back to its permissions (RELRO read-only again)
 *   - 20 rounds of on, dump and off while four threads allocate, check
 *     and free; 30 runs of memsnap SIGKILLed at a random moment
 *   - a jemalloc target without profiling gets the sampler too
 *
 * After every test the target is alive, no thread stopped or traced,
 * and its ping says every block holds its pattern, no allocation
 * failed and its threads still make progress.
 *
 * A memsnap without `prof on --sampler` (exit 2, "unexpected argument
 * '--sampler'") has every test that needs it skipped, saying so.
 * fixture_counts_match_jemalloc_profiler needs no sampler: it
 * checks the fixture's counts and this file's reading of folded output
 * against jemalloc's own profiler, recording every allocation.
 *
 *   MEMSNAP_FAULT_SEED=S   the kill delays of an earlier run (its seed is
 *                          printed)
 */
#include "tests/integration/fault_lib.h"
#include "tests/integration/test_inject_lib.h"

#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>

static char base[PATH_MAX];	/* one temp dir per test: dumps, TMPDIR */
static char tmp_dir[PATH_MAX + 8];
static char pidstr[16];
static pid_t tracer_pid;	/* seize_thread()'s, until it is killed */

static void teardown(void);

static void setup(void)
{
	char tmpl[] = "/tmp/memsnap-test-sampler.XXXXXX";

	skip_cleanup = teardown;
	cr_assert_not_null(mkdtemp(tmpl), "mkdtemp: %s", strerror(errno));
	snprintf(base, sizeof(base), "%s", tmpl);
	snprintf(tmp_dir, sizeof(tmp_dir), "%s/tmp", base);
	cr_assert_eq(mkdir(tmp_dir, 01777), 0, "mkdir %s: %s", tmp_dir,
		     strerror(errno));
}

static void teardown(void)
{
	char cmd[PATH_MAX + 32];

	/* a thread held by a tracer would hold up the fixture's end */
	if (tracer_pid > 0) {
		kill(tracer_pid, SIGKILL);
		waitpid(tracer_pid, NULL, 0);
		tracer_pid = 0;
	}
	fixture_stop(&fx);
	if (base[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
		if (system(cmd))
			fprintf(stderr, "could not remove %s\n", base);
		base[0] = '\0';
	}
}

TestSuite(sampler, .init = setup, .fini = teardown, .timeout = 300);

/* Start fixture @name with @conf (a "MALLOC_CONF=..." entry, or NULL). */
static void start(const char *name, const char *conf)
{
	char path[PATH_MAX], tmp[PATH_MAX + 16], c[256];
	char *argv[] = { path, NULL };
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
	rc = fixture_start(&fx, argv, env, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
	cr_assert(strstr(fx.ready, "sites=site_malloc_small,") ||
			  !strncmp(name, "sampler-cxx", 11) ||
			  !strcmp(name, "sampler-prefixed"),
		  "ready line: %s", fx.ready);
}

/* ---- the fixture's sites and counts -------------------------------------- */

/* As the fixture names them (its ready line and 'a' reply). */
enum site {
	MALLOC_SMALL,
	CALLOC,
	REALLOC,
	REALLOCARRAY,
	MEMALIGN,
	VALLOC,
	LARGE,
	LEAK,
	NSITES
};

static const char *const site_name[NSITES] = {
	"site_malloc_small", "site_calloc", "site_realloc",
	"site_reallocarray", "site_memalign", "site_valloc", "site_large",
	"leak_grow",
};

/* Live bytes asked for at each site, exact. */
struct counts {
	long long v[NSITES];
};

/* Send @cmd; its reply "ok bytes=site_malloc_small:N,...,leak_grow:N". */
static struct counts command_counts(char cmd)
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

/* Send @cmd and expect a reply starting with @want. */
static void command_expect(char cmd, const char *want, char *reply,
			   size_t size)
{
	int rc = fixture_command(&fx, cmd, reply, size, 60000);

	cr_assert_eq(rc, 0, "command %c: %s", cmd, strerror(-rc));
	cr_assert(!strncmp(reply, want, strlen(want)),
		  "command %c: '%s', want '%s...'", cmd, reply, want);
}

/* ---- memsnap ------------------------------------------------------------- */

/* memsnap --pid PID @a0 ... NULL, into @r (run_free() it). */
__attribute__((sentinel)) static void memsnap(struct run *r, const char *a0,
					      ...)
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

/*
 * A memsnap that does not know the option says so as a usage error
 * naming it: then there is nothing to test here yet.
 */
static void need_sampler(struct run *r)
{
	if (r->status == 2 && strstr(r->err, "--sampler"))
		skip_test("this memsnap has no `prof on --sampler` (exit 2: "
			  "%s)", chomp(r->err));
}


/* `prof on --sampler [--sample-bytes @mean]` (@mean 0: the default):
 * exit 0 and one line saying "sampler on". */
static void sampler_on(long mean)
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

/* `prof off` with the sampler on: exit 0, "sampler off". */
static void sampler_off(void)
{
	struct run r;

	memsnap(&r, "prof", "off", NULL);
	cr_assert_eq(r.status, 0, "prof off: exit %d: %s", r.status, r.err);
	cr_assert(strstr(r.out, "sampler off"), "prof off printed '%s'",
		  r.out);
	run_free(&r);
}

/* `dump -o BASE/@name.heap` into @path: its exit status (output in @r,
 * run_free() it). */
static int dump_try(const char *name, char *path, size_t size,
		    struct run *r)
{
	snprintf(path, size, "%s/%s.heap", base, name);
	memsnap(r, "dump", "-o", path, NULL);
	return r->status;
}

/* @path holds a heap_v2 profile sampled every @mean bytes (0: any). */
static void assert_heap_v2(const char *path, long mean)
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

/* dump_try(), which must succeed with a profile sampled every @mean
 * bytes (0: any mean). */
static void dump_to(const char *name, long mean, char *path, size_t size)
{
	struct run r;

	dump_try(name, path, size, &r);
	cr_assert_eq(r.status, 0, "dump -o %s: exit %d: %s", path, r.status,
		     r.err);
	run_free(&r);
	assert_heap_v2(path, mean);
}

/* The "sampler" line of `info --no-attach` (live samples, drops), for
 * the messages of failed checks; never stops the target. */
static const char *sampler_state(char *buf, size_t size)
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

/* ---- folded reports ------------------------------------------------------ */

#define MAX_LEAVES 1024
#define PROFILE_DEPTH 256

/*
 * `report DUMP [--base OLD] --format folded -q`, summed by innermost
 * frame.  A folded line is "outer;...;inner BYTES" (a label may hold a
 * space, a C++ signature: the number is after the last one), e.g.
 *
 *   _start;__libc_start_main_impl;__libc_start_call_main;main;
 *   fixture_serve;command;sampler_sites;site_calloc 32815104
 */
struct folded {
	char *text;			/* the report, for messages */
	struct {
		char name[128];
		long long bytes;
	} leaf[MAX_LEAVES];
	size_t nleaves;
	long long site[NSITES];		/* the sums of the sites' leaves */
	long long fixture_bytes;	/* of every stack with a frame of
					 * the sites or sampler_sites */
	char after[NSITES][128];	/* the frame after a site that is
					 * not the leaf (first seen) */
	char last[512];			/* the line being read */
	size_t lines[NSITES];
	char wrong[NSITES][512];	/* a site's first stack that does not
					 * reach main through sampler_sites */
};

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

/* --root for report_folded(), when the target's files are not memsnap's. */
static const char *report_root;

/* Report @dump (against @old if not NULL) into @fo. */
static void report_folded(const char *dump, const char *old,
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

static void folded_free(struct folded *fo)
{
	free(fo->text);
	fo->text = NULL;
}

/* |@got - @want| within @pct percent of @want. */
static bool near(long long got, long long want, int pct)
{
	return llabs(got - want) * 100 <= llabs(want) * pct;
}

/*
 * Every site of @mask with live bytes: its leaves in @fo add up to
 * within 10% of the exact count, and each of its stacks reaches main
 * and has sampler_sites right before the site.  @what names the dump.
 */
/* Each site of @mask within 10% of @c, and (@whole) its stacks down to
 * main through sampler_sites. */
static void check_sites(const struct folded *fo, const struct counts *c,
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

static void assert_sites(const struct folded *fo, const struct counts *c,
			 unsigned mask, const char *what)
{
	check_sites(fo, c, mask, what, true);
}

/* ---- what `prof off` must put back --------------------------------------- */

#define MAX_MAPPINGS 1024
#define MAX_SLOTS 512

/* The file mappings of a process, from /proc/PID/maps. */
struct maps_snap {
	struct {
		uint64_t start, end, off;
		char perms[8];
		char path[256];
	} v[MAX_MAPPINGS];
	size_t n;
};

static void maps_take(pid_t pid, struct maps_snap *m)
{
	char name[64], line[4096];
	FILE *f;

	snprintf(name, sizeof(name), "/proc/%d/maps", (int)pid);
	f = fopen(name, "re");
	cr_assert_not_null(f, "%s: %s", name, strerror(errno));
	m->n = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off;
		char perms[8], *path = strchr(line, '/');

		if (!path || sscanf(line, "%llx-%llx %7s %llx", &start, &end,
				    perms, &off) != 4)
			continue;
		cr_assert_lt(m->n, MAX_MAPPINGS, "%s: too many mappings", name);
		path[strcspn(path, "\n")] = '\0';
		m->v[m->n].start = start;
		m->v[m->n].end = end;
		m->v[m->n].off = off;
		snprintf(m->v[m->n].perms, sizeof(m->v[m->n].perms), "%s",
			 perms);
		snprintf(m->v[m->n].path, sizeof(m->v[m->n].path), "%s", path);
		m->n++;
	}
	fclose(f);
}

/*
 * Every byte of every file mapping of @before is mapped in @after from
 * the same file with the same permissions: no page left writable (or
 * made read-only) by the GOT swap.  Compared by address range, so a
 * mapping split by mprotect and merged again still matches.
 */
static void assert_same_perms(const struct maps_snap *before,
			      const struct maps_snap *after, const char *when)
{
	size_t i, j;

	for (i = 0; i < before->n; i++) {
		uint64_t covered = 0;

		for (j = 0; j < after->n; j++) {
			uint64_t lo, hi;

			if (after->v[j].end <= before->v[i].start ||
			    after->v[j].start >= before->v[i].end)
				continue;
			lo = after->v[j].start > before->v[i].start
				     ? after->v[j].start
				     : before->v[i].start;
			hi = after->v[j].end < before->v[i].end
				     ? after->v[j].end
				     : before->v[i].end;
			cr_assert(!strcmp(after->v[j].path, before->v[i].path) &&
					  !strcmp(after->v[j].perms,
						  before->v[i].perms),
				  "%s: %" PRIx64 "-%" PRIx64 " was %s %s, is "
				  "now %s %s",
				  when, lo, hi, before->v[i].perms,
				  before->v[i].path, after->v[j].perms,
				  after->v[j].path);
			covered += hi - lo;
		}
		cr_assert_eq(covered, before->v[i].end - before->v[i].start,
			     "%s: %s at %" PRIx64 "-%" PRIx64 " (%s) is no "
			     "longer all mapped",
			     when, before->v[i].path, before->v[i].start,
			     before->v[i].end, before->v[i].perms);
	}
}

/* How often sampler_target's waiter saw its epoll_wait fail with EINTR
 * (only memsnap stopping it explains one). */
static long waiter_eintr(void)
{
	char reply[64];

	command_expect('e', "ok eintr=", reply, sizeof(reply));
	return atol(reply + 9);
}

/* The program's code: its r-x mapping, as /proc/PID/mem reads it. */
struct text_snap {
	uint64_t start;
	size_t len;
	unsigned char *bytes;	/* text_free() */
};

static void text_take(pid_t pid, struct text_snap *t)
{
	struct maps_snap *m = calloc(1, sizeof(*m));
	char exe[PATH_MAX], link[64], mem[64];
	ssize_t n;
	size_t i;
	int fd;

	cr_assert_not_null(m);
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	n = readlink(link, exe, sizeof(exe) - 1);
	cr_assert_gt(n, 0, "readlink %s: %s", link, strerror(errno));
	exe[n] = '\0';
	maps_take(pid, m);
	for (i = 0; i < m->n; i++)
		if (!strcmp(m->v[i].path, exe) &&
		    !strcmp(m->v[i].perms, "r-xp"))
			break;
	cr_assert_lt(i, m->n, "no r-xp mapping of %s", exe);
	t->start = m->v[i].start;
	t->len = (size_t)(m->v[i].end - m->v[i].start);
	free(m);
	t->bytes = malloc(t->len);
	cr_assert_not_null(t->bytes);
	snprintf(mem, sizeof(mem), "/proc/%d/mem", (int)pid);
	fd = open(mem, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s: %s", mem, strerror(errno));
	cr_assert_eq(pread(fd, t->bytes, t->len, (off_t)t->start),
		     (ssize_t)t->len, "reading the text: %s", strerror(errno));
	close(fd);
}

static void text_free(struct text_snap *t)
{
	free(t->bytes);
	t->bytes = NULL;
}

/* Byte for byte the same code: every patched entry point put back. */
static void assert_same_text(const struct text_snap *a,
			     const struct text_snap *b, const char *when)
{
	size_t i;

	cr_assert(a->start == b->start && a->len == b->len,
		  "%s: the text mapping moved", when);
	for (i = 0; i < a->len && a->bytes[i] == b->bytes[i]; i++)
		;
	cr_assert_eq(i, a->len, "%s: the program's code differs at +%#zx "
		     "(%#x, was %#x): an entry point left patched?", when, i,
		     b->bytes[i], a->bytes[i]);
}

/* The GOT slots of the functions the sampler hooks, and their values. */
struct got_snap {
	struct {
		char obj[256];
		char name[96];
		uint64_t addr, value;
		uint64_t lo, hi;	/* the span of the object's mappings */
		uint64_t plt_lo, plt_hi; /* its .plt, where lazy slots point */
	} v[MAX_SLOTS];
	size_t n;
};

static bool hooked(const char *name)
{
	static const char *const fns[] = {
		"malloc", "free", "calloc", "realloc", "posix_memalign",
		"aligned_alloc", "memalign", "valloc", "pvalloc",
		"reallocarray",
	};
	size_t i;

	for (i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		if (!strcmp(name, fns[i]))
			return true;
	/* C++ operator new, new[], delete, delete[], every overload */
	return !strncmp(name, "_Znw", 4) || !strncmp(name, "_Zna", 4) ||
	       !strncmp(name, "_Zdl", 4) || !strncmp(name, "_Zda", 4);
}

/* The first hex number @cmd prints; false if it prints none. */
static bool shell_hex(const char *cmd, uint64_t *v)
{
	struct run r;
	bool ok;

	cr_assert_eq(run_shell(&r, cmd), 0, "%s", cmd);
	ok = !r.status && sscanf(r.out, "%" SCNx64, v) == 1;
	run_free(&r);
	return ok;
}

/* Add @path's hooked slots, loaded at @start (its offset-0 mapping),
 * its mappings spanning [@lo, @hi). */
static void got_add_object(pid_t pid, int mem, const char *path,
			   uint64_t start, uint64_t lo, uint64_t hi,
			   struct got_snap *g)
{
	char cmd[PATH_MAX + 128], q[PATH_MAX + 16], line[1024];
	uint64_t vaddr, bias, plt_lo, plt_hi;
	FILE *p;

	sh_quote(path, q, sizeof(q));
	snprintf(cmd, sizeof(cmd),
		 "LC_ALL=C readelf -lW %s 2>/dev/null | "
		 "awk '$1 == \"LOAD\" { print $3; exit }'", q);
	if (!shell_hex(cmd, &vaddr))
		return;		/* not an ELF file (a locale archive) */
	bias = start - (vaddr & ~(uint64_t)4095);
	snprintf(cmd, sizeof(cmd),
		 "LC_ALL=C readelf -SW %s 2>/dev/null | "
		 "awk '$2 == \".plt\" { print $4, $6; exit }'", q);
	plt_lo = plt_hi = 0;
	{
		struct run r;

		cr_assert_eq(run_shell(&r, cmd), 0, "%s", cmd);
		if (!r.status &&
		    sscanf(r.out, "%" SCNx64 " %" SCNx64, &plt_lo, &plt_hi) == 2) {
			plt_lo += bias;
			plt_hi += plt_lo;
		} else {
			plt_lo = plt_hi = 0;
		}
		run_free(&r);
	}
	snprintf(cmd, sizeof(cmd), "LC_ALL=C readelf -rW %s", q);
	p = popen(cmd, "r");
	cr_assert_not_null(p, "%s: %s", cmd, strerror(errno));
	while (fgets(line, sizeof(line), p)) {
		unsigned long long off, info, value;
		char type[64], name[240];

		/* "0000000000003fd8  0000000300000007 R_X86_64_JUMP_SLOT
		 *  0000000000000000 malloc@GLIBC_2.2.5 + 0" */
		if (sscanf(line, "%llx %llx %63s %llx %239s", &off, &info, type,
			   &value, name) != 5 ||
		    (!strstr(type, "JUMP_SLOT") && !strstr(type, "GLOB_DAT")))
			continue;
		*strchrnul(name, '@') = '\0';
		if (!hooked(name))
			continue;
		cr_assert_lt(g->n, MAX_SLOTS, "too many GOT slots");
		snprintf(g->v[g->n].obj, sizeof(g->v[g->n].obj), "%s", path);
		snprintf(g->v[g->n].name, sizeof(g->v[g->n].name), "%.95s",
			 name);
		g->v[g->n].addr = bias + off;
		g->v[g->n].lo = lo;
		g->v[g->n].hi = hi;
		g->v[g->n].plt_lo = plt_lo;
		g->v[g->n].plt_hi = plt_hi;
		cr_assert_eq(pread(mem, &g->v[g->n].value, 8,
				   (off_t)g->v[g->n].addr), 8,
			     "reading %s's %s slot at 0x%" PRIx64 " in pid %d: "
			     "%s", path, name, g->v[g->n].addr, (int)pid,
			     strerror(errno));
		g->n++;
	}
	pclose(p);
}

/*
 * Every hooked GOT slot of every object of @pid with its value, found
 * without memsnap's code: the lowest offset-0 mapping of each file
 * minus its first PT_LOAD's page (readelf -lW), plus each JUMP_SLOT or
 * GLOB_DAT relocation's offset (readelf -rW), read from /proc/PID/mem.
 * The fixture calls every hooked function before its ready line, so
 * lazy binding does not change the executable's slots between two
 * snapshots; a library's own lazy slot may still be bound meanwhile
 * (assert_same_got() allows that one change).
 */
static void got_take(pid_t pid, struct got_snap *g)
{
	struct maps_snap *m = calloc(1, sizeof(*m));
	char name[64];
	size_t i, j;
	int mem;

	cr_assert_not_null(m);
	maps_take(pid, m);
	snprintf(name, sizeof(name), "/proc/%d/mem", (int)pid);
	mem = open(name, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(mem, 0, "%s: %s", name, strerror(errno));
	g->n = 0;
	for (i = 0; i < m->n; i++) {
		bool first = m->v[i].off == 0;

		/* once per file: its lowest offset-0 mapping */
		for (j = 0; first && j < m->n; j++)
			if (j != i && m->v[j].off == 0 &&
			    !strcmp(m->v[j].path, m->v[i].path) &&
			    m->v[j].start < m->v[i].start)
				first = false;
		if (first && !strstr(m->v[i].path, " (deleted)")) {
			uint64_t lo = m->v[i].start, hi = m->v[i].end;

			for (j = 0; j < m->n; j++)
				if (!strcmp(m->v[j].path, m->v[i].path)) {
					lo = m->v[j].start < lo ? m->v[j].start
								: lo;
					hi = m->v[j].end > hi ? m->v[j].end
							      : hi;
				}
			got_add_object(pid, mem, m->v[i].path, m->v[i].start,
				       lo, hi, g);
		}
	}
	close(mem);
	free(m);
}

/* The executable's own malloc slot in @g (the sites call through it). */
static size_t exe_malloc_slot(const struct got_snap *g)
{
	char exe[64], path[PATH_MAX];
	ssize_t n;
	size_t i;

	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)fx.pid);
	n = readlink(exe, path, sizeof(path) - 1);
	cr_assert_gt(n, 0, "%s: %s", exe, strerror(errno));
	path[n] = '\0';
	for (i = 0; i < g->n; i++)
		if (!strcmp(g->v[i].obj, path) && !strcmp(g->v[i].name, "malloc"))
			return i;
	cr_assert_fail("no malloc GOT slot in %s", path);
	return 0;
}

/* @addr is in a file-backed object of @g (a hook of the sampler, in its
 * anonymous mapping, is not). */
static bool in_an_object(const struct got_snap *g, uint64_t addr)
{
	size_t i;

	for (i = 0; i < g->n; i++)
		if (addr >= g->v[i].lo && addr < g->v[i].hi)
			return true;
	return false;
}

/*
 * Every slot of @before holds the same value in @after, but for the one
 * change a program makes itself: a lazy slot (pointing into its own
 * object's .plt) bound by the loader to a function (of a file-backed
 * object, never a hook), which AArch64's libc does the first time it
 * calls free itself.
 */
static void assert_same_got(const struct got_snap *before,
			    const struct got_snap *after, const char *when)
{
	size_t i;

	cr_assert_eq(after->n, before->n, "%s: %zu hooked GOT slots, %zu "
		     "before", when, after->n, before->n);
	for (i = 0; i < before->n; i++) {
		cr_assert_eq(after->v[i].addr, before->v[i].addr,
			     "%s: the objects moved", when);
		if (after->v[i].value != before->v[i].value &&
		    before->v[i].value >= before->v[i].plt_lo &&
		    before->v[i].value < before->v[i].plt_hi &&
		    in_an_object(after, after->v[i].value))
			continue;	/* bound lazily meanwhile */
		cr_assert_eq(after->v[i].value, before->v[i].value,
			     "%s: %s's GOT slot for %s at 0x%" PRIx64 " holds "
			     "0x%" PRIx64 ", 0x%" PRIx64 " before prof on",
			     when, before->v[i].obj, before->v[i].name,
			     before->v[i].addr, after->v[i].value,
			     before->v[i].value);
	}
}

/* The JSON value of key "@key" in @s: past the colon and blanks; NULL
 * if there is no such key (the same string as a value does not count). */
static const char *json_value(const char *s, const char *key)
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

/* ---- the tests ----------------------------------------------------------- */

/* The words: on twice, --json, info's line, off. */
Test(sampler, on_twice_json_info_off)
{
	const char *v;
	struct run r;
	bool info_line = false;
	char *line;

	start("sampler-target", NULL);
	sampler_on(16384);
	/* again: already on is not an error */
	sampler_on(16384);

	memsnap(&r, "--json", "prof", "on", "--sampler", "--sample-bytes",
		"16384", NULL);
	cr_assert_eq(r.status, 0, "--json prof on --sampler: exit %d: %s",
		     r.status, r.err);
	v = strchr(r.out, '{');
	cr_assert(v && strrchr(r.out, '}') > v, "not a JSON object: '%s'",
		  r.out);
	v = json_value(r.out, "pid");
	cr_assert(v && atoi(v) == fx.pid, "\"pid\" of pid %d: %s",
		  (int)fx.pid, r.out);
	v = json_value(r.out, "action");
	cr_assert(v && !strncmp(v, "\"sampling\"", 10),
		  "\"action\": \"sampling\" wanted: %s", r.out);
	v = json_value(r.out, "sampler");
	cr_assert(v && !strncmp(v, "true", 4), "\"sampler\": true wanted: %s",
		  r.out);
	v = json_value(r.out, "mean");
	cr_assert(v && strtoll(v, NULL, 10) == 16384,
		  "\"mean\": 16384 wanted: %s", r.out);
	run_free(&r);

	memsnap(&r, "info", NULL);
	cr_assert_eq(r.status, 0, "info: exit %d: %s", r.status, r.err);
	for (line = r.out; line; line = strchr(line, '\n')) {
		line += *line == '\n';
		if (!strncmp(line, "sampler", 7) &&
		    isspace((unsigned char)line[7]))
			info_line = true;
	}
	cr_assert(info_line, "info has no 'sampler' line with the sampler "
		  "on:\n%s", r.out);
	run_free(&r);

	sampler_off();
	assert_untouched(&fx, "after prof off");
}

/*
 * Each site's live bytes within 10% of the exact count.  At a mean of
 * 16 KiB the smallest blocks (1000 bytes) are sampled about 2000 times:
 * the estimate's standard error is near 2%, so 10% is 4.5 of them.
 */
Test(sampler, accuracy_per_site)
{
	char dump[PATH_MAX + 32];
	struct folded *fo = calloc(1, sizeof(*fo));
	struct counts c;

	cr_assert_not_null(fo);
	start("sampler-target", NULL);
	sampler_on(16384);
	c = command_counts('a');
	dump_to("a", 16384, dump, sizeof(dump));
	report_folded(dump, NULL, fo);
	assert_sites(fo, &c, ~0u, "after 'a'");
	/* nothing was leaked yet: no stack may claim it */
	cr_assert_eq(fo->lines[LEAK], 0, "leak_grow in the profile before "
		     "it ran:\n%.3000s", fo->text);
	folded_free(fo);
	free(fo);
	assert_untouched(&fx, "after the dump");
	sampler_off();
	assert_untouched(&fx, "after prof off");
}

/*
 * A freed block leaves the profile: after 'f' frees every second block
 * of site_malloc_small, a new dump holds half of it, and the difference
 * of the two dumps is minus that half.  Mean 8 KiB: the 16384 blocks
 * left are sampled about 1900 times (standard error near 2%).
 */
Test(sampler, frees_are_forgotten)
{
	char d1[PATH_MAX + 32], d2[PATH_MAX + 32];
	struct folded *fo = calloc(1, sizeof(*fo));
	struct counts c0, c1;
	long long freed;

	cr_assert_not_null(fo);
	start("sampler-target", NULL);
	sampler_on(8192);
	c0 = command_counts('a');
	dump_to("before", 8192, d1, sizeof(d1));
	report_folded(d1, NULL, fo);
	assert_sites(fo, &c0, 1u << MALLOC_SMALL, "before 'f'");
	folded_free(fo);

	c1 = command_counts('f');
	freed = c0.v[MALLOC_SMALL] - c1.v[MALLOC_SMALL];
	cr_assert_eq(freed * 2, c0.v[MALLOC_SMALL],
		     "'f' freed %lld of %lld bytes", freed,
		     c0.v[MALLOC_SMALL]);
	dump_to("after", 8192, d2, sizeof(d2));
	report_folded(d2, NULL, fo);
	/* half of site_malloc_small, every other site untouched */
	assert_sites(fo, &c1, ~0u, "after 'f'");
	folded_free(fo);

	report_folded(d2, d1, fo);
	cr_assert(near(fo->site[MALLOC_SMALL], -freed, 10),
		  "site_malloc_small grew by %lld bytes, want -%lld within "
		  "10%%:\n%.3000s", fo->site[MALLOC_SMALL], freed, fo->text);
	folded_free(fo);
	free(fo);
	assert_untouched(&fx, "after the dumps");
	sampler_off();
	assert_untouched(&fx, "after prof off");
}

/*
 * The leak hunt of the README, on glibc: dump, leak 4 x 4 MiB, dump,
 * `report --base`.  leak_grow is the largest growth of any stack, about
 * 16 MiB; every other site, live all along, grows by less than 10% of
 * its size (the same blocks, sampled once: in fact by nothing).  Mean
 * 8 KiB: 8388 blocks of 2000 bytes are sampled about 1800 times.
 */
Test(sampler, leak_found_by_base)
{
	char d1[PATH_MAX + 32], d2[PATH_MAX + 32];
	struct folded *fo = calloc(1, sizeof(*fo));
	struct counts c0, c1 = { { 0 } };
	size_t i, top = 0;
	int s, k;

	cr_assert_not_null(fo);
	start("sampler-target", NULL);
	sampler_on(8192);
	c0 = command_counts('a');
	dump_to("old", 8192, d1, sizeof(d1));
	for (k = 0; k < 4; k++)
		c1 = command_counts('g');
	cr_assert_eq(c1.v[LEAK], 4 * 4194000LL, "leaked %lld bytes",
		     c1.v[LEAK]);
	dump_to("new", 8192, d2, sizeof(d2));
	report_folded(d2, d1, fo);

	cr_assert_gt(fo->nleaves, 0, "report --base printed nothing");
	for (i = 1; i < fo->nleaves; i++)
		if (fo->leaf[i].bytes > fo->leaf[top].bytes)
			top = i;
	cr_assert_str_eq(fo->leaf[top].name, "leak_grow",
			 "the top growth is %s (%lld bytes), not leak_grow "
			 "(%lld):\n%.3000s", fo->leaf[top].name,
			 fo->leaf[top].bytes, fo->site[LEAK], fo->text);
	cr_assert(near(fo->site[LEAK], c1.v[LEAK], 10),
		  "leak_grow grew by %lld bytes, %lld leaked (more than 10%% "
		  "off):\n%.3000s", fo->site[LEAK], c1.v[LEAK], fo->text);
	cr_assert(!fo->wrong[LEAK][0], "leak_grow's stack does not reach "
		  "main through sampler_sites: '%s'", fo->wrong[LEAK]);
	for (s = 0; s < LEAK; s++)
		cr_assert_lt(llabs(fo->site[s]) * 10, c0.v[s],
			     "%s, untouched, grew by %lld bytes (of %lld):\n"
			     "%.3000s", site_name[s], fo->site[s], c0.v[s],
			     fo->text);
	folded_free(fo);
	free(fo);
	assert_untouched(&fx, "after the dumps");
	sampler_off();
	assert_untouched(&fx, "after prof off");
}

/* The fixture's frames in @fo: at most 1% of @made bytes. */
static void assert_sites_empty(const struct folded *fo, long long made,
			       const char *what)
{
	cr_assert_leq(llabs(fo->fixture_bytes) * 100, made,
		      "%s: %lld bytes at the sites in the profile (of %lld "
		      "allocated):\n%.3000s",
		      what, fo->fixture_bytes, made, fo->text);
}

/*
 * `prof off` undoes `prof on`: every hooked GOT slot holds what it held
 * before (while on, the executable's malloc slot did not: the check
 * can see a swap), every file mapping has its permissions back (RELRO
 * read-only), and allocations are no longer sampled.  The sampled
 * blocks are freed while the sampler is on (so their records go) and
 * the set made again after `prof off`: the dump then holds nothing of
 * them.
 */
Test(sampler, prof_off_restores_got_and_relro)
{
	struct got_snap *g0 = calloc(1, sizeof(*g0)), *g = calloc(1, sizeof(*g));
	struct maps_snap *m0 = calloc(1, sizeof(*m0)),
			 *m = calloc(1, sizeof(*m));
	struct folded *fo = calloc(1, sizeof(*fo));
	char d[PATH_MAX + 32];
	struct counts c;
	long long want = 0;
	struct run r;
	size_t k;
	int s;

	cr_assert(g0 && g && m0 && m && fo, "calloc");
	start("sampler-target", NULL);
	got_take(fx.pid, g0);
	maps_take(fx.pid, m0);
	k = exe_malloc_slot(g0);

	sampler_on(16384);
	got_take(fx.pid, g);
	cr_assert_eq(g->n, g0->n, "the hooked GOT slots changed in number");
	cr_assert_neq(g->v[k].value, g0->v[k].value,
		      "prof on left the executable's malloc slot (0x%" PRIx64
		      ") at 0x%" PRIx64, g0->v[k].addr, g0->v[k].value);
	/* it samples: much of what 'a' makes is in the profile, at the
	 * sites (how exactly, and under which leaf, is for
	 * accuracy_per_site to check) */
	c = command_counts('a');
	dump_to("on", 16384, d, sizeof(d));
	report_folded(d, NULL, fo);
	for (s = 0; s < LEAK; s++)
		want += c.v[s];
	cr_assert_geq(fo->fixture_bytes * 2, want, "with the sampler on, "
		      "%lld of %lld bytes at the sites:\n%.3000s",
		      fo->fixture_bytes, want, fo->text);
	folded_free(fo);
	/* freed while on: forgotten */
	command_counts('F');
	dump_to("freed", 16384, d, sizeof(d));
	report_folded(d, NULL, fo);
	assert_sites_empty(fo, want, "after 'F' with the sampler on");
	folded_free(fo);

	sampler_off();
	got_take(fx.pid, g);
	assert_same_got(g0, g, "after prof off");
	maps_take(fx.pid, m);
	assert_same_perms(m0, m, "after prof off");

	/*
	 * Made after prof off: not sampled.  What dump does with the
	 * sampler off is not settled: a profile of what it still holds
	 * (nothing at the sites), or glibc's own refusal (exit 5).
	 */
	command_counts('a');
	if (dump_try("off", d, sizeof(d), &r) == 0) {
		assert_heap_v2(d, 0);
		report_folded(d, NULL, fo);
		assert_sites_empty(fo, want, "allocated after prof off");
		folded_free(fo);
	} else {
		cr_assert_eq(r.status, 5, "dump after prof off: exit %d: %s",
			     r.status, r.err);
		cr_log_info("dump after prof off: exit 5: %s", r.err);
	}
	run_free(&r);
	/* On again, the blocks made while off still live: the first
	 * round's records went at 'F', so none may be at the sites. */
	sampler_on(16384);
	dump_to("again", 16384, d, sizeof(d));
	report_folded(d, NULL, fo);
	assert_sites_empty(fo, want, "allocated while off, dumped on again");
	folded_free(fo);
	command_counts('F');
	sampler_off();
	got_take(fx.pid, g);
	assert_same_got(g0, g, "after a second prof off");
	maps_take(fx.pid, m);
	assert_same_perms(m0, m, "after a second prof off");
	free(g0);
	free(g);
	free(m0);
	free(m);
	free(fo);
	assert_untouched(&fx, "after prof off");
}

/*
 * Hooks swapped in and out under four threads that allocate, write,
 * check and free (or realloc) as fast as they can: 20 rounds of on,
 * dump, report and off.  The threads' own checks and their progress
 * are in every ping; at the end the GOT and the mappings are as they
 * were.
 */
static void threads_rounds(const char *fixture)
{
	struct got_snap *g0 = calloc(1, sizeof(*g0)), *g = calloc(1, sizeof(*g));
	struct maps_snap *m0 = calloc(1, sizeof(*m0)),
			 *m = calloc(1, sizeof(*m));
	struct folded *fo = calloc(1, sizeof(*fo));
	struct text_snap t0, t;
	char d[PATH_MAX + 32], reply[256], when[64];
	int i;

	cr_assert(g0 && g && m0 && m && fo, "calloc");
	start(fixture, NULL);
	got_take(fx.pid, g0);
	maps_take(fx.pid, m0);
	text_take(fx.pid, &t0);
	command_expect('t', "ok threads=4", reply, sizeof(reply));
	for (i = 0; i < 20; i++) {
		sampler_on(16384);
		dump_to("threads", 16384, d, sizeof(d));
		/* readable, whatever the threads were doing */
		report_folded(d, NULL, fo);
		folded_free(fo);
		sampler_off();
		snprintf(when, sizeof(when), "round %d", i);
		assert_untouched(&fx, when);
	}
	command_expect('T', "ok loops=", reply, sizeof(reply));
	cr_assert_gt(atol(reply + 9), 0, "the threads did nothing: %s",
		     reply);
	got_take(fx.pid, g);
	assert_same_got(g0, g, "after 20 rounds");
	maps_take(fx.pid, m);
	assert_same_perms(m0, m, "after 20 rounds");
	text_take(fx.pid, &t);
	assert_same_text(&t0, &t, "after 20 rounds");
	text_free(&t0);
	text_free(&t);
	/* every thread stopped, 40 times: none may see an EINTR */
	cr_assert_eq(waiter_eintr(), 0, "an epoll_wait failed with EINTR");
	free(g0);
	free(g);
	free(m0);
	free(m);
	free(fo);
	assert_untouched(&fx, "after the threads stopped");
}

Test(sampler, threads_on_dump_off_20_times)
{
	threads_rounds("sampler-target");
}

/* The same with jemalloc linked into the program: its entry points
 * patched and put back 20 times under four allocating threads. */
Test(sampler, threads_on_dump_off_20_times_linked)
{
	threads_rounds("sampler-target-je-static");
}

/* And in a program linked statically, glibc's malloc and all. */
Test(sampler, threads_on_dump_off_20_times_static)
{
	threads_rounds("sampler-target-static");
}

static long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000L + ts.tv_nsec / 1000L;
}

static void delay_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

#define KILL_TRIALS 30

/*
 * memsnap SIGKILLed at a random moment of `prof on --sampler` (even
 * trials) or `prof off` (odd ones), 30 times, while four threads
 * allocate: after each kill no thread is stopped or traced and the
 * target's checks pass.  Then a whole `prof on` and `prof off` still
 * work, and leave the GOT and the mappings as they were at the start.
 * The delays are 0 to 50 ms, and no longer than the longer of a whole
 * on and off (the median of three pairs timed once the sampler is in,
 * with the threads running):
 * at least a fifth of the runs must die before their end, or this
 * proves nothing.
 */
static void killed_at_random(const char *fixture)
{
	const char *env_seed = getenv("MEMSNAP_FAULT_SEED");
	const char *const on_args[] = { "--pid", pidstr, "prof", "on",
					"--sampler", NULL };
	const char *const off_args[] = { "--pid", pidstr, "prof", "off",
					 NULL };
	struct got_snap *g0 = calloc(1, sizeof(*g0)), *g = calloc(1, sizeof(*g));
	struct maps_snap *m0 = calloc(1, sizeof(*m0)),
			 *m = calloc(1, sizeof(*m));
	struct text_snap x0, x;
	char reply[256];
	uint64_t seed, s;
	long t0, t_on, t_off, span, pair[3];
	int i, killed = 0;

	cr_assert(g0 && g && m0 && m, "calloc");
	start(fixture, NULL);
	got_take(fx.pid, g0);
	maps_take(fx.pid, m0);
	text_take(fx.pid, &x0);
	command_expect('t', "ok threads=4", reply, sizeof(reply));
	/* the feature is there (else skip) and works whole; then how long
	 * an on and an off take once the sampler is in (the first on also
	 * copies it in: timed, it made the delays too long for most runs
	 * to be killed) */
	sampler_on(0);
	sampler_off();
	for (i = 0; i < 3; i++) {
		t0 = now_us();
		sampler_on(0);
		t_on = now_us() - t0;
		t0 = now_us();
		sampler_off();
		t_off = now_us() - t0;
		pair[i] = t_on > t_off ? t_on : t_off;
	}
	/* the median of three: one slow pair on a busy machine must not
	 * set delays most runs finish before */
	span = pair[0] < pair[1] ? pair[0] : pair[1];
	if (pair[2] < (pair[0] > pair[1] ? pair[0] : pair[1]))
		span = pair[2] > span ? pair[2] : span;
	else
		span = pair[0] > pair[1] ? pair[0] : pair[1];
	if (span > 50000)
		span = 50000;

	seed = env_seed ? strtoull(env_seed, NULL, 0)
			: (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid();
	if (!seed)
		seed = 1;
	s = seed;
	fprintf(stderr, "sampler: kills within %ld us (on %ld us, off %ld "
		"us), seed %llu (MEMSNAP_FAULT_SEED=%llu repeats the "
		"delays)\n", span, t_on, t_off, (unsigned long long)seed,
		(unsigned long long)seed);
	for (i = 0; i < KILL_TRIALS; i++) {
		bool on = !(i & 1);
		long delay = (long)(prng_next(&s) % (uint64_t)(span + 1));
		char when[600];
		struct bg b;
		struct run r;

		bg_start(&b, on ? on_args : off_args);
		delay_us(delay);
		kill(b.pid, SIGKILL);
		bg_finish(&b, &r);
		snprintf(when, sizeof(when),
			 "trial %d (seed %llu): prof %s killed after %ld us, "
			 "exit %d: %s", i, (unsigned long long)seed,
			 on ? "on --sampler" : "off", delay, r.status, r.err);
		killed += r.status == 128 + SIGKILL;
		/* on: done or killed; off: whatever it says when the
		 * sampler is not (all) on, but never a usage error or a
		 * crash */
		if (on)
			cr_assert(r.status == 0 || r.status == 128 + SIGKILL,
				  "%s", when);
		else
			cr_assert(r.status == 128 + SIGKILL ||
					  (r.status < 128 && r.status != 2),
				  "%s", when);
		run_free(&r);
		assert_untouched(&fx, when);
	}
	fprintf(stderr, "sampler: %d of %d runs killed before their end, "
		"%ld EINTRs seen by the waiter\n", killed, KILL_TRIALS,
		waiter_eintr());
	/* a kill between stopping the waiter and putting its call back
	 * leaves it one, and only a kill does */
	cr_assert_leq(waiter_eintr(), killed, "more EINTRs than kills");
	cr_assert_geq(killed * 5, KILL_TRIALS, "only %d of %d runs were "
		      "killed before their end (delays up to %ld us)", killed,
		      KILL_TRIALS, span);

	sampler_on(0);
	sampler_off();
	command_expect('T', "ok loops=", reply, sizeof(reply));
	got_take(fx.pid, g);
	assert_same_got(g0, g, "after the kills and a whole on and off");
	maps_take(fx.pid, m);
	assert_same_perms(m0, m, "after the kills and a whole on and off");
	text_take(fx.pid, &x);
	assert_same_text(&x0, &x, "after the kills and a whole on and off");
	text_free(&x0);
	text_free(&x);
	free(g0);
	free(g);
	free(m0);
	free(m);
	assert_untouched(&fx, "at the end");
}

Test(sampler, memsnap_killed_at_random_moments, .timeout = 600)
{
	killed_at_random("sampler-target");
}

/* The same with jemalloc linked into the program: killed while its
 * entry points are planned, logged, written with every thread stopped,
 * or put back. */
Test(sampler, memsnap_killed_at_random_moments_linked, .timeout = 600)
{
	killed_at_random("sampler-target-je-static");
}

/* The pc of thread @tid of the fixture, stopped or waiting outside a
 * system call ("-1 SP PC" in its syscall file): 0 when it is in one. */
static unsigned long long pc_outside_syscall(pid_t tid)
{
	char path[64], line[256];
	unsigned long long sp, pc;
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)fx.pid,
		 (int)tid);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	n = fgets(line, sizeof(line), f) ? sscanf(line, "-1 %llx %llx", &sp,
						   &pc)
					 : 0;
	fclose(f);
	return n == 2 ? pc : 0;
}

/* @n bytes of the fixture's memory at @addr. */
static void read_target(unsigned long long addr, void *buf, size_t n)
{
	struct iovec l = { buf, n }, r = { (void *)(uintptr_t)addr, n };

	cr_assert_eq(process_vm_readv(fx.pid, &l, 1, &r, 1, 0), (ssize_t)n,
		     "process_vm_readv at %#llx: %s", addr, strerror(errno));
}

/*
 * A thread stopped between the first instructions of a function, which
 * the jump replaces, is stepped out of them, not waited for: on a busy
 * machine a thread preempted there may not run again for all the rounds
 * of stop and check, and `prof on` was refused ("stayed inside the
 * first bytes of a function to patch").  The fixture holds a thread
 * there for certain: its realloc's second push waits on a page that
 * userfaultfd serves only once the thread has been stopped and has
 * tried again (or after a second).  Each `prof on` must step it out and
 * say so in its timings; the thread goes on calling realloc, patched or
 * not, and the process is unharmed.
 */
Test(sampler, threads_inside_the_bytes_to_patch_are_stepped_out)
{
	char reply[256];
	unsigned long long fn, pc;
	unsigned long calls;
	const char *v;
	pid_t tid;
	int i;

#if !defined(__x86_64__)
	skip_test("one instruction is replaced on this CPU: no pc can be "
		  "inside the bytes to patch");
#endif
	start("sampler-target-static", NULL);
	command_expect('z', "ok realloc=", reply, sizeof(reply));
	fn = strtoull(reply + 11, NULL, 16);
	v = strstr(reply, "tid=");
	cr_assert(fn && v, "reply: %s", reply);
	tid = (pid_t)atoi(v + 4);
	for (i = 0; i < 5; i++) {
		struct run r;

		pc = pc_outside_syscall(tid);
		if (pc <= fn || pc >= fn + 16)
			skip_test("this realloc does not make its second "
				  "stack write within its first bytes: the "
				  "thread waits at %#llx, realloc is at %#llx",
				  pc, fn);
		memsnap(&r, "--timings", "prof", "on", "--sampler", NULL);
		need_sampler(&r);
		cr_assert_eq(r.status, 0, "prof on %d, a thread at "
			     "realloc+%llu: exit %d: %s", i, pc - fn,
			     r.status, r.err);
		v = strstr(r.err, " stepped out of them");
		cr_assert(v && v[-1] != '0' && v[-2] == ' ',
			  "prof on %d, a thread at realloc+%llu: not one "
			  "thread stepped out: %s", i, pc - fn, r.err);
		run_free(&r);
		sampler_off();
		command_expect('Z', "ok calls=", reply, sizeof(reply));
		calls = strtoul(reply + 9, NULL, 10);
		cr_assert_geq(calls, (unsigned long)i + 1, "%s", reply);
	}
	assert_untouched(&fx, "after the thread was stepped");
}

/*
 * A thread that cannot be stepped out of the bytes to patch (its next
 * instruction waits on a page nobody serves while memsnap waits) is no
 * safe moment to write: `prof on --sampler` gives up with the "no safe
 * thread" status, 6, not 4 "permission denied" as the bare -EBUSY it
 * travelled as once said; nothing of realloc's first bytes is written,
 * and the thread runs on once the page is served.
 */
Test(sampler, a_thread_held_inside_the_bytes_to_patch_is_no_safe_moment)
{
	unsigned char before[16], after[16];
	unsigned long long fn, pc;
	char reply[256];
	const char *v;
	struct run r;
	pid_t tid;

#if !defined(__x86_64__)
	skip_test("one instruction is replaced on this CPU: no pc can be "
		  "inside the bytes to patch");
#endif
	start("sampler-target-static", NULL);
	command_expect('y', "ok realloc=", reply, sizeof(reply));
	fn = strtoull(reply + 11, NULL, 16);
	v = strstr(reply, "tid=");
	cr_assert(fn && v, "reply: %s", reply);
	tid = (pid_t)atoi(v + 4);
	pc = pc_outside_syscall(tid);
	if (pc <= fn || pc >= fn + 16)
		skip_test("this realloc does not make its second stack write "
			  "within its first bytes: the thread waits at %#llx, "
			  "realloc is at %#llx", pc, fn);
	read_target(fn, before, sizeof(before));
	memsnap(&r, "prof", "on", "--sampler", NULL);
	need_sampler(&r);
	cr_assert_eq(r.status, 6, "prof on, a thread held at realloc+%llu: "
		     "exit %d, not 6 (no safe thread): %s", pc - fn, r.status,
		     r.err);
	cr_assert(strstr(r.err, "stayed inside the first bytes of a function "
			 "to patch"), "prof on: %s", r.err);
	cr_assert_eq(count_lines(r.err), 1, "not one line: %s", r.err);
	run_free(&r);
	read_target(fn, after, sizeof(after));
	cr_assert(!memcmp(before, after, sizeof(before)),
		  "realloc's first bytes changed though prof on failed");
	command_expect('Z', "ok calls=", reply, sizeof(reply));
	cr_assert_geq(strtoul(reply + 9, NULL, 10), 1ul, "%s", reply);
	assert_untouched(&fx, "after prof on found no safe moment");
}

/*
 * No sampler needed: the fixture's counts and this file's reading of
 * folded reports, checked against jemalloc's own profiler recording
 * every allocation (lg_prof_sample:0).  jemalloc records usable sizes
 * (1000 bytes count as 1024): within 2.4% here.  Its stacks come from
 * libgcc's unwinder, so the fixture's CFI is checked too.
 */
Test(sampler, fixture_counts_match_jemalloc_profiler)
{
	char d[PATH_MAX + 32];
	struct folded *fo = calloc(1, sizeof(*fo));
	struct counts c;

	cr_assert_not_null(fo);
	need_jemalloc_profiling();
	if (!strncmp(jemalloc_version(), "5.1.", 4)) {
		free(fo);
		skip_test("jemalloc %s: its profiler recording every "
			  "allocation dies in this fixture (the arm64 "
			  "guest's cross-built 5.1)", jemalloc_version());
	}
	start("sampler-target-je", "MALLOC_CONF=prof:true,lg_prof_sample:0");
	command_counts('a');
	c = command_counts('g');
	dump_to("native", 1, d, sizeof(d));
	report_folded(d, NULL, fo);
	assert_sites(fo, &c, ~0u, "jemalloc's own profile");
	folded_free(fo);
	free(fo);
	assert_untouched(&fx, "after the dump");
}

/* ---- objects loaded after prof on ---------------------------------------- */

/* The bytes of stacks whose leaf is @name. */
static long long leaf_bytes(const struct folded *fo, const char *name)
{
	size_t k;

	for (k = 0; k < fo->nleaves; k++)
		if (!strcmp(fo->leaf[k].name, name))
			return fo->leaf[k].bytes;
	return 0;
}

/*
 * A library dlopened after `prof on --sampler` (@lib: bind-now with
 * full RELRO, or lazy) is sampled: its slots were swapped by the
 * sampler's dlopen hook, RELRO pages given back their protection.  Its
 * blocks are forgotten when freed, and after dlclose (its logged slots
 * now unmapped) `prof off` still works and leaves the target unharmed.
 */
static void dlopened_library(const char *lib)
{
	struct maps_snap *m0 = calloc(1, sizeof(*m0)),
			 *m = calloc(1, sizeof(*m));
	struct folded *fo = calloc(1, sizeof(*fo));
	char path[PATH_MAX], env[PATH_MAX + 32], d[PATH_MAX + 32];
	char reply[256];
	long long want;

	cr_assert(m0 && m && fo, "calloc");
	fixture_path(lib, path, sizeof(path));
	if (access(path, R_OK))
		skip_test("fixture %s not built", path);
	snprintf(env, sizeof(env), "MEMSNAP_SAMPLER_LIB=%s", path);
	start("sampler-target", env);
	sampler_on(16384);
	maps_take(fx.pid, m0);
	command_expect('o', "ok lib=", reply, sizeof(reply));
	want = strtoll(strstr(reply, "lib=") + 4, NULL, 10);
	cr_assert_gt(want, 0, "reply: %s", reply);
	dump_to("lib", 16384, d, sizeof(d));
	report_folded(d, NULL, fo);
	cr_assert(near(leaf_bytes(fo, "lib_site"), want, 10),
		  "%s: lib_site has %lld bytes, %lld live:\n%s", lib,
		  leaf_bytes(fo, "lib_site"), want, fo->text);
	folded_free(fo);

	command_expect('x', "ok", reply, sizeof(reply));
	dump_to("closed", 16384, d, sizeof(d));
	report_folded(d, NULL, fo);
	cr_assert_lt(leaf_bytes(fo, "lib_site"), want / 10,
		     "%s: lib_site still has %lld bytes after its frees",
		     lib, leaf_bytes(fo, "lib_site"));
	folded_free(fo);
	sampler_off();
	assert_untouched(&fx, "after dlclose and prof off");
	/* The executable and libc keep their protections. */
	maps_take(fx.pid, m);
	assert_same_perms(m0, m, "after dlopen, dlclose and prof off");
	free(fo);
	free(m);
	free(m0);
}

Test(sampler, dlopened_bind_now_relro_library)
{
	dlopened_library("libsampler-now.so");
}

Test(sampler, dlopened_lazy_library)
{
	dlopened_library("libsampler-lazy.so");
}

/* ---- other allocators, and C++ -------------------------------------------- */

/* An allocator that cannot profile (jemalloc without prof:true,
 * tcmalloc_minimal, mimalloc): the sites of @mask within 10%. */
static void other_allocator(const char *fixture, unsigned mask)
{
	char d[PATH_MAX + 32];
	struct folded *fo = calloc(1, sizeof(*fo));
	struct counts c;

	cr_assert_not_null(fo);
	start(fixture, NULL);
	sampler_on(16384);
	c = command_counts('a');
	dump_to("other", 16384, d, sizeof(d));
	report_folded(d, NULL, fo);
	assert_sites(fo, &c, mask, fixture);
	folded_free(fo);
	free(fo);
	assert_untouched(&fx, "after the dump");
	sampler_off();
	assert_untouched(&fx, "after prof off");
}

#define OTHER_SITES \
	(1u << MALLOC_SMALL | 1u << CALLOC | 1u << MEMALIGN | 1u << LARGE)

/*
 * jemalloc without prof:true cannot profile, but the sampler can: the
 * same fixture linked with jemalloc, and site_malloc_small within 10%.
 */
Test(sampler, jemalloc_without_prof)
{
	other_allocator("sampler-target-je", 1u << MALLOC_SMALL);
}

Test(sampler, tcmalloc_minimal)
{
	other_allocator("sampler-target-tcm", OTHER_SITES);
}

Test(sampler, mimalloc)
{
	other_allocator("sampler-target-mi", OTHER_SITES);
}

/*
 * An allocator linked into the program: the program's own calls reach
 * it through no GOT slot, so its entry points are patched (every thread
 * stopped for the write).  libjemalloc.a's functions start with a plain
 * compare or pushes; libtcmalloc_minimal.a's with a RIP-relative load
 * the trampoline must move.  Every site within 10%, frees forgotten
 * through the patched free, the program's code byte for byte as it was
 * after prof off, and the target unharmed.
 */
static void linked_program(const char *fixture, const char *kind,
			   unsigned mask, bool whole)
{
	struct folded *fo = calloc(1, sizeof(*fo));
	struct text_snap t0, t1, t2;
	char d[PATH_MAX + 32];
	size_t klen = strlen(kind);
	const char *v;
	struct counts c;
	struct run r;

	cr_assert_not_null(fo);
	start(fixture, NULL);
	text_take(fx.pid, &t0);
	memsnap(&r, "--json", "prof", "on", "--sampler", "--sample-bytes",
		"16384", NULL);
	need_sampler(&r);
	cr_assert_eq(r.status, 0, "prof on --sampler: exit %d: %s", r.status,
		     r.err);
	v = json_value(r.out, "linked_allocator");
	cr_assert(v && *v == '"' && !strncmp(v + 1, kind, klen) &&
			  v[1 + klen] == '"',
		  "no linked_allocator \"%s\" in: %s", kind, r.out);
	v = json_value(r.out, "entries");
	cr_assert(v && atoi(v) >= 4, "fewer than 4 entry points patched: %s",
		  r.out);
	cr_assert_null(json_value(r.out, "unsampled_allocator"), "%s", r.out);
	cr_assert_str_empty(r.err, "prof on said: '%s'", r.err);
	run_free(&r);
	text_take(fx.pid, &t1);
	cr_assert(memcmp(t0.bytes, t1.bytes, t0.len),
		  "prof on changed no byte of the program's code");

	c = command_counts('a');
	dump_to("linked", 16384, d, sizeof(d));
	report_folded(d, NULL, fo);
	check_sites(fo, &c, mask, kind, whole);
	folded_free(fo);
	c = command_counts('f');
	dump_to("linked-freed", 16384, d, sizeof(d));
	report_folded(d, NULL, fo);
	check_sites(fo, &c, mask, "after 'f'", whole);
	folded_free(fo);
	free(fo);
	assert_untouched(&fx, "after the dumps");

	sampler_off();
	text_take(fx.pid, &t2);
	assert_same_text(&t0, &t2, "after prof off");
	text_free(&t0);
	text_free(&t1);
	text_free(&t2);
	cr_assert_eq(waiter_eintr(), 0, "an epoll_wait failed with EINTR");
	assert_untouched(&fx, "after prof off");
}

Test(sampler, jemalloc_linked_into_program)
{
	linked_program("sampler-target-je-static", "jemalloc", ~0u, true);
}

/* A thread of @pid other than the main one. */
static pid_t other_thread(pid_t pid)
{
	char path[64];
	struct dirent *e;
	pid_t tid = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	cr_assert_not_null(d, "%s: %s", path, strerror(errno));
	while ((e = readdir(d)))
		if (atoi(e->d_name) > 0 && atoi(e->d_name) != pid)
			tid = atoi(e->d_name);
	closedir(d);
	cr_assert_gt(tid, 0, "no second thread");
	return tid;
}

/* A process that holds @tid as its tracer (named "strace"), as strace
 * -p TID would: its pid, once it holds it.  let_go() or the teardown
 * kills it. */
static pid_t seize_thread(pid_t tid)
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

/* seize_thread()'s tracer gone: its thread runs free. */
static void let_go(pid_t tracer)
{
	kill(tracer, SIGKILL);
	waitpid(tracer, NULL, 0);
	tracer_pid = 0;
}

/* The one line of @r's refusal: a nonzero exit that names @tid's
 * tracer. */
static void assert_refused_for(const struct run *r, const char *what,
			       pid_t tid, pid_t tracer)
{
	char want[128];

	snprintf(want, sizeof(want), "thread %d is traced by pid %d (strace)",
		 (int)tid, (int)tracer);
	cr_assert_neq(r->status, 0, "%s with a traced thread: exit 0", what);
	cr_assert(strstr(r->err, want), "%s: no '%s' in: %s", what, want,
		  r->err);
	cr_assert_eq(count_lines(r->err), 1, "%s: not one line: %s", what,
		     r->err);
}

/* The program's code and GOT as in @t0 and @g0, and `info` says
 * @state ("sampler   on"), @when. */
static void assert_as_before(const struct text_snap *t0,
			     const struct got_snap *g0, const char *state,
			     const char *when)
{
	struct got_snap *g = calloc(1, sizeof(*g));
	char buf[512];
	struct text_snap t;

	cr_assert_not_null(g);
	text_take(fx.pid, &t);
	assert_same_text(t0, &t, when);
	text_free(&t);
	got_take(fx.pid, g);
	assert_same_got(g0, g, when);
	free(g);
	cr_assert(strstr(sampler_state(buf, sizeof(buf)), state), "%s: %s",
		  when, buf);
}

/*
 * A thread another tracer holds (strace -p TID) cannot be stopped for
 * the write: prof on fails in one line naming the tracer, and leaves
 * the program as it was (no entry patched, no slot swapped, sampling
 * off).  Once the tracer is gone, prof on works.
 */
Test(sampler, linked_program_with_a_traced_thread)
{
	struct got_snap *g0 = calloc(1, sizeof(*g0));
	struct text_snap t0, t1;
	char reply[256];
	pid_t tid, tracer;
	struct run r;

	cr_assert_not_null(g0);
	start("sampler-target-je-static", NULL);
	command_expect('t', "ok threads=4", reply, sizeof(reply));
	text_take(fx.pid, &t0);
	got_take(fx.pid, g0);
	tid = other_thread(fx.pid);
	tracer = seize_thread(tid);

	memsnap(&r, "prof", "on", "--sampler", NULL);
	need_sampler(&r);
	assert_refused_for(&r, "prof on", tid, tracer);
	run_free(&r);
	assert_as_before(&t0, g0, "sampler   off", "after the refused prof on");
	let_go(tracer);

	sampler_on(0);
	sampler_off();
	text_take(fx.pid, &t1);
	assert_same_text(&t0, &t1, "after prof on and off");
	text_free(&t0);
	text_free(&t1);
	command_expect('T', "ok loops=", reply, sizeof(reply));
	/* the threads stopped before the refusal were let go healed */
	cr_assert_eq(waiter_eintr(), 0, "an epoll_wait failed with EINTR");
	free(g0);
	assert_untouched(&fx, "at the end");
}

/*
 * The same refusal at prof off, whose entry points cannot be put back
 * while a thread is held by another tracer: the sampler stays wholly on
 * (entry points and slots as prof on left them, sampling), so that the
 * next prof off, once the tracer is gone, finds it on and takes it all
 * back.
 */
Test(sampler, linked_program_prof_off_with_a_traced_thread)
{
	struct got_snap *g1 = calloc(1, sizeof(*g1));
	struct text_snap t0, t1, t;
	char reply[256];
	pid_t tid, tracer;
	struct run r;

	cr_assert_not_null(g1);
	start("sampler-target-je-static", NULL);
	command_expect('t', "ok threads=4", reply, sizeof(reply));
	text_take(fx.pid, &t0);
	sampler_on(0);
	text_take(fx.pid, &t1);
	cr_assert(memcmp(t0.bytes, t1.bytes, t0.len),
		  "prof on changed no byte of the program's code");
	got_take(fx.pid, g1);
	tid = other_thread(fx.pid);
	tracer = seize_thread(tid);

	memsnap(&r, "prof", "off", NULL);
	assert_refused_for(&r, "prof off", tid, tracer);
	run_free(&r);
	assert_as_before(&t1, g1, "sampler   on", "after the refused prof off");
	let_go(tracer);

	sampler_off();
	text_take(fx.pid, &t);
	assert_same_text(&t0, &t, "after prof off");
	text_free(&t0);
	text_free(&t1);
	text_free(&t);
	command_expect('T', "ok loops=", reply, sizeof(reply));
	cr_assert_eq(waiter_eintr(), 0, "an epoll_wait failed with EINTR");
	free(g1);
	assert_untouched(&fx, "at the end");
}

/*
 * Linked statically, glibc and all: no loader, no GOT slot.  gcc -static
 * writes no PT_GNU_EH_FRAME, the only CFI index memsnap reads from a
 * target: stacks end at the allocation's caller (the site), which this
 * test allows and README "Limitations" says.
 */
Test(sampler, glibc_in_a_static_program)
{
	linked_program("sampler-target-static", "glibc", ~0u, false);
}

Test(sampler, tcmalloc_minimal_linked_into_program)
{
	linked_program("sampler-target-tcm-static", "tcmalloc_minimal", ~0u,
		       true);
}

/*
 * jemalloc linked in under the je_ prefix, as redis built from source
 * has it, beside libc's malloc: the patched entries (je_malloc,
 * je_mallocx; je_free, je_sdallocx) and the GOT slots (malloc, free)
 * at once, each site within 10%, everything forgotten once freed.
 */
Test(sampler, prefixed_jemalloc_linked_into_program)
{
	struct folded *fo = calloc(1, sizeof(*fo));
	struct text_snap t0, t1;
	char d[PATH_MAX + 32], reply[128];
	long long je, libc;
	const char *v;
	struct run r;

	cr_assert_not_null(fo);
	start("sampler-prefixed", NULL);
	text_take(fx.pid, &t0);
	memsnap(&r, "--json", "prof", "on", "--sampler", "--sample-bytes",
		"16384", NULL);
	need_sampler(&r);
	cr_assert_eq(r.status, 0, "prof on: exit %d: %s", r.status, r.err);
	v = json_value(r.out, "linked_allocator");
	cr_assert(v && !strncmp(v, "\"jemalloc\"", 10), "%s", r.out);
	v = json_value(r.out, "entries");
	cr_assert(v && atoi(v) >= 4, "%s", r.out);
	cr_assert_str_empty(r.err, "prof on said: '%s'", r.err);
	run_free(&r);
	command_expect('a', "ok bytes=", reply, sizeof(reply));
	je = strtoll(reply + 9, NULL, 10);
	libc = strtoll(strstr(reply, "libc=") + 5, NULL, 10);
	dump_to("prefixed", 16384, d, sizeof(d));
	report_folded(d, NULL, fo);
	cr_assert(near(leaf_bytes(fo, "prefixed_site"), je, 10),
		  "prefixed_site: %lld bytes, %lld live:\n%s",
		  leaf_bytes(fo, "prefixed_site"), je, fo->text);
	cr_assert(near(leaf_bytes(fo, "libc_site"), libc, 10),
		  "libc_site: %lld bytes, %lld live:\n%s",
		  leaf_bytes(fo, "libc_site"), libc, fo->text);
	folded_free(fo);
	command_expect('F', "ok bytes=0", reply, sizeof(reply));
	dump_to("prefixed-freed", 16384, d, sizeof(d));
	report_folded(d, NULL, fo);
	cr_assert_lt(leaf_bytes(fo, "prefixed_site") +
			     leaf_bytes(fo, "libc_site"),
		     je / 20, "freed blocks stay in the profile:\n%s",
		     fo->text);
	folded_free(fo);
	free(fo);
	assert_untouched(&fx, "after the dumps");
	sampler_off();
	text_take(fx.pid, &t1);
	assert_same_text(&t0, &t1, "after prof off");
	text_free(&t0);
	text_free(&t1);
	assert_untouched(&fx, "after prof off");
}

/*
 * C++: operator new on top of glibc's malloc (libstdc++: seen at its
 * call to malloc, the operators not hooked) and tcmalloc_minimal's own
 * (the operators hooked, "cxx": true).  new char[4000] x 8192 at
 * cxx_site within 10%; a 4 EiB new[] throws std::bad_alloc and the
 * program catches it (a sampled throwing new goes through its nothrow
 * twin, and throws from no frame of the sampler's); delete[] and sized
 * delete forget the blocks.
 */
static void cxx(const char *fixture, bool hooked)
{
	struct folded *fo = calloc(1, sizeof(*fo));
	char d[PATH_MAX + 32], reply[128];
	const char *v;
	long long want;
	struct run r;

	cr_assert_not_null(fo);
	start(fixture, NULL);
	memsnap(&r, "--json", "prof", "on", "--sampler", "--sample-bytes",
		"16384", NULL);
	cr_assert_eq(r.status, 0, "prof on: exit %d: %s", r.status, r.err);
	v = json_value(r.out, "cxx");
	cr_assert(v && !strncmp(v, hooked ? "true" : "false", 4),
		  "\"cxx\": %s wanted: %s", hooked ? "true" : "false", r.out);
	run_free(&r);
	command_expect('a', "ok bytes=", reply, sizeof(reply));
	want = strtoll(reply + 9, NULL, 10);
	dump_to("cxx", 16384, d, sizeof(d));
	report_folded(d, NULL, fo);
	cr_assert(near(leaf_bytes(fo, "cxx_site"), want, 10),
		  "%s: cxx_site has %lld bytes, %lld live:\n%s", fixture,
		  leaf_bytes(fo, "cxx_site"), want, fo->text);
	folded_free(fo);
	command_expect('h', "ok caught", reply, sizeof(reply));
	command_expect('F', "ok bytes=0", reply, sizeof(reply));
	dump_to("cxx-freed", 16384, d, sizeof(d));
	report_folded(d, NULL, fo);
	cr_assert_lt(leaf_bytes(fo, "cxx_site"), want / 10,
		     "%s: cxx_site keeps %lld bytes after delete[]", fixture,
		     leaf_bytes(fo, "cxx_site"));
	folded_free(fo);
	free(fo);
	sampler_off();
	assert_untouched(&fx, "after prof off");
}

Test(sampler, cxx_on_libstdcxx)
{
	cxx("sampler-cxx", false);
}

Test(sampler, cxx_on_tcmalloc_minimal)
{
	cxx("sampler-cxx-tcm", true);
}

/* tcmalloc_minimal linked into the program: its operators patched at
 * their entry points; the throwing new still throws from no frame of
 * the sampler's. */
Test(sampler, cxx_on_tcmalloc_minimal_linked_into_program)
{
	cxx("sampler-cxx-tcm-static", true);
}

/* ---- a target whose files memsnap cannot see --------------------------- */

/*
 * The target in a mount namespace of its own, run from a tmpfs that only
 * it sees (mounted on an empty directory of this test's): its program's
 * path does not exist in memsnap's view.  prof on finds
 * its GOT slots through /proc/PID/map_files and swaps them; the dump is
 * the same; report names its stacks with --root /proc/PID/root.
 */
Test(sampler, target_in_its_own_mount_namespace)
{
	static const char script[] =
		"mount -t tmpfs memsnap-sampler \"$1\" && "
		"cp \"$0\" \"$1/sampler-target\" && "
		"exec \"$1/sampler-target\"";
	char path[PATH_MAX], tmp[PATH_MAX + 16], root[64], ns[PATH_MAX + 8];
	char hidden[PATH_MAX + 32];
	char a0[] = "/usr/bin/unshare", a1[] = "--mount",
	     a2[] = "--propagation", a3[] = "private", a4[] = "/bin/sh",
	     a5[] = "-c";
	char *argv[] = { a0, a1, a2, a3, a4, a5, (char *)script, path, ns,
			 NULL };
	char *env[] = { tmp, NULL };
	char d[PATH_MAX + 32], exe[PATH_MAX];
	struct folded *fo = calloc(1, sizeof(*fo));
	struct counts c;
	ssize_t n;
	int rc;

	cr_assert_not_null(fo);
	fixture_path("sampler-target", path, sizeof(path));
	if (access(path, X_OK))
		skip_test("fixture %s not built", path);
	if (access("/usr/bin/unshare", X_OK))
		skip_test("no /usr/bin/unshare (util-linux)");
	snprintf(tmp, sizeof(tmp), "TMPDIR=%s", tmp_dir);
	/* an empty directory here; a tmpfs with the program in it there */
	snprintf(ns, sizeof(ns), "%s/ns", base);
	cr_assert_eq(mkdir(ns, 0700), 0, "%s: %s", ns, strerror(errno));
	snprintf(hidden, sizeof(hidden), "%s/sampler-target", ns);
	rc = fixture_start(&fx, argv, env, 10000);
	cr_assert_eq(rc, 0, "starting %s in a mount namespace: %s", path,
		     strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
	snprintf(root, sizeof(root), "/proc/%d/root", (int)fx.pid);
	/* what memsnap reads in the maps is a path it does not have */
	snprintf(d, sizeof(d), "/proc/%d/exe", (int)fx.pid);
	n = readlink(d, exe, sizeof(exe) - 1);
	cr_assert_gt(n, 0);
	exe[n] = '\0';
	cr_assert_str_eq(exe, hidden);
	cr_assert(access(hidden, F_OK), "%s is in memsnap's view too",
		  hidden);

	sampler_on(16384);
	c = command_counts('a');
	dump_to("ns", 16384, d, sizeof(d));
	report_root = root;
	report_folded(d, NULL, fo);
	report_root = NULL;
	assert_sites(fo, &c, 1u << MALLOC_SMALL | 1u << LARGE,
		     "a target in its own mount namespace");
	folded_free(fo);
	free(fo);
	sampler_off();
	assert_untouched(&fx, "after prof off");
}
