/*
 * The headline of `report DIR` on processes whose memory is known by
 * construction (tests/fixtures/headline_target.c), each watched for 6 s
 * (30 ticks of 0.2 s):
 *
 *   - a heap leak under a working set that comes and goes: heap in use
 *     still growing (a leak suspect), the wave on top, no saw-tooth;
 *   - a heap cache that levels off beside a creep of the program's own
 *     anonymous memory under the threshold: nothing still growing, the
 *     heap levelled off, the creep named as one;
 *   - a buffer pool that warms up beside a heap leak: the heap still
 *     growing, the pool levelled off;
 *   - a working set alone: nothing still growing, the heap comes and
 *     goes.
 *
 * Text, JSON and HTML say the same headline.  After each, the fixture is
 * checked unharmed.
 */
#include "../lib/fixture.h"
#include "../lib/jsonget.h"
#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct fixture fx = { .pid = -1 };
static char base[PATH_MAX];
static char dir[PATH_MAX + 16];
static char pidstr[16];

static void teardown(void)
{
	fixture_stop(&fx);
	scratch_cleanup(base);
}

static void setup(void)
{
	int rc = scratch_make("memsnap-test-headline", base, sizeof(base));

	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	snprintf(dir, sizeof(dir), "%s/w", base);
}

TestSuite(watch_headline, .init = setup, .fini = teardown, .timeout = 120);

/* memsnap with the NULL-ended arguments, which must exit 0. */
static void memsnap_ok(struct run *r, ...)
{
	const char *args[24];
	size_t n = 0;
	va_list ap;

	va_start(ap, r);
	while (n + 1 < 24 && (args[n] = va_arg(ap, const char *)))
		n++;
	va_end(ap);
	args[n] = NULL;
	cr_assert_eq(run_memsnap(r, args), 0);
	cr_assert_eq(r->status, 0, "memsnap %s %s: exit %d: %s%s", args[0],
		     n > 2 ? args[2] : "", r->status, r->out, r->err);
}

/* The state report gave part @part in JSON @json. */
static const char *part_state(const char *json, const char *part,
			      char *buf, size_t size)
{
	char key[64];
	const char *p;

	snprintf(key, sizeof(key), "\"name\": \"%s\"", part);
	p = strstr(json, key);
	buf[0] = '\0';
	return p ? json_str_get(p, "state", buf, size) : buf;
}

/* @path's bytes, NUL-ended (free() them). */
static char *file_bytes(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf;
	long n;

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return buf;
}

/*
 * headline-target @mode watched for 30 ticks of 0.2 s: the headline,
 * the same in text, JSON and HTML, into @headline; the JSON in *@json
 * (free() it).
 */
static void watch_mode(const char *mode, char *headline, size_t size,
		       char **json)
{
	char path[PATH_MAX], html[PATH_MAX + 32], reply[64], *page;
	char *argv[] = { path, (char *)mode, NULL };
	const char *p;
	struct run r;
	int rc;

	fixture_path("headline-target", path, sizeof(path));
	rc = fixture_start(&fx, argv, NULL, 60000);
	cr_assert_eq(rc, 0, "starting %s %s: %s", path, mode, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
	rc = fixture_command(&fx, 'g', reply, sizeof(reply), 10000);
	cr_assert(!rc && !strcmp(reply, "ok"), "g: %s", reply);
	memsnap_ok(&r, "--pid", pidstr, "watch", "-o", dir, "--interval",
		   "0.2s", "--count", "30", "--dump-every", "0", NULL);
	run_free(&r);
	fixture_assert_healthy(&fx);

	memsnap_ok(&r, "report", dir, "--json", NULL);
	json_str_get(r.out, "headline", headline, size);
	cr_assert(headline[0], "no headline: %s", r.out);
	*json = r.out;
	free(r.err);

	/* the text: the headline after the first blank line */
	memsnap_ok(&r, "report", dir, NULL);
	p = strstr(r.out, "\n\n");
	cr_assert(p && !strncmp(p + 2, headline, strlen(headline)) &&
			  p[2 + strlen(headline)] == '\n',
		  "the text's headline is not the JSON's (%s):\n%s", headline,
		  r.out);
	run_free(&r);

	/* the page: the same words, escaped the same (none need it) */
	snprintf(html, sizeof(html), "%s/r.html", base);
	memsnap_ok(&r, "report", dir, "--format", "html", "-o", html, NULL);
	run_free(&r);
	page = file_bytes(html);
	p = strstr(page, "id=\"headline\">");
	cr_assert(p && !strncmp(p + 14, headline, strlen(headline)) &&
			  !strncmp(p + 14 + strlen(headline), "</p>", 4),
		  "the page's headline is not the JSON's (%s): %.300s",
		  headline, p ? p : page);
	free(page);
	fixture_assert_healthy(&fx);
}

Test(watch_headline, a_leak_under_a_wave_is_still_growing)
{
	char h[1024], st[32], *json;

	watch_mode("wave", h, sizeof(h), &json);
	cr_assert(!strncmp(h, "heap in use still growing at +", 30), "%s", h);
	cr_assert(strstr(h, "(leak suspect)"), "%s", h);
	/* the wave is said, as what comes and goes on top of the leak */
	cr_assert(strstr(h, "on top comes and goes"), "%s", h);
	cr_assert_null(strstr(h, "saw-tooth"), "%s", h);
	cr_assert_str_eq(part_state(json, "heap_in_use", st, sizeof(st)),
			 "growing", "%s", json);
	free(json);
}

Test(watch_headline, a_plateau_beside_a_small_creep)
{
	char h[1024], st[32], *json;

	watch_mode("creep", h, sizeof(h), &json);
	cr_assert(!strncmp(h, "nothing still growing: ", 23), "%s", h);
	cr_assert(strstr(h, "heap in use levelled off at 16"), "%s", h);
	cr_assert(strstr(h, "other anonymous memory creeping at +"), "%s", h);
	cr_assert_null(strstr(h, "still growing at"), "%s", h);
	cr_assert_str_eq(part_state(json, "heap_in_use", st, sizeof(st)),
			 "levelled", "%s", json);
	cr_assert_str_eq(part_state(json, "anon_other", st, sizeof(st)),
			 "creeping", "%s", json);
	free(json);
}

Test(watch_headline, a_pool_that_warms_up_beside_a_heap_leak)
{
	char h[1024], st[32], *json;

	watch_mode("pool", h, sizeof(h), &json);
	cr_assert(!strncmp(h, "heap in use still growing at +", 30), "%s", h);
	cr_assert(strstr(h, "; other anonymous memory levelled off at 64"),
		  "%s", h);
	cr_assert_str_eq(part_state(json, "heap_in_use", st, sizeof(st)),
			 "growing", "%s", json);
	cr_assert_str_eq(part_state(json, "anon_other", st, sizeof(st)),
			 "levelled", "%s", json);
	free(json);
}

Test(watch_headline, a_working_set_alone_does_not_grow)
{
	char h[1024], st[32], *json;

	watch_mode("wset", h, sizeof(h), &json);
	cr_assert(!strncmp(h, "nothing still growing: heap in use: 12", 38),
		  "%s", h);
	cr_assert(strstr(h, "comes and goes (a working set)"), "%s", h);
	cr_assert_null(strstr(h, "still growing at"), "%s", h);
	cr_assert_str_eq(part_state(json, "heap_in_use", st, sizeof(st)),
			 "working set", "%s", json);
	free(json);
}
