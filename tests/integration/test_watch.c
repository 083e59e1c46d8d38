/*
 * memsnap watch and memsnap report DIR against real processes:
 *
 *   - three call sites whose shapes are known (tests/fixtures/
 *     watch_target.c: a leak, a cache that fills, a working set in
 *     waves) watched for 20 s; the report ranks the leak first as
 *     "growing", calls the cache a "plateau" and the waves a
 *     "saw-tooth": on glibc through memsnap's sampler, on jemalloc
 *     through its own profiler;
 *   - the HTML report (and a dump's) opened in Debian's chromium,
 *     headless and with no network: every script ran and none threw,
 *     the chart has a point per tick, the top site is the leak, the
 *     flame graph drew, and its screenshot is not blank;
 *   - a watch SIGKILLed mid-series leaves a series the report reads,
 *     and with --sampler a report that names `prof off`, and a sampler
 *     that stops sampling once its lease lapses; SIGTERM ends it
 *     cleanly (the sampler switched off); a target that exits
 *     mid-series is recorded and reported, not an error; a single tick
 *     without dumps still reports.
 *
 * After each, the fixture is checked unharmed.
 */
#include "test_explain_lib.h"
#include "../lib/fixture.h"
#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static struct fixture fx = { .pid = -1 };
static char base[PATH_MAX];	/* the test's temp dir */
static char dir[PATH_MAX + 16];	/* the watch's */
static char pidstr[16];
static pid_t watcher = -1;	/* a watch run in the background */

static void teardown(void)
{
	explain_free_all();
	if (watcher > 0) {
		kill(watcher, SIGKILL);
		waitpid(watcher, NULL, 0);
		watcher = -1;
	}
	fixture_stop(&fx);
	scratch_cleanup(base);
}

static void setup(void)
{
	int rc = scratch_make("memsnap-test-watch", base, sizeof(base));

	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	snprintf(dir, sizeof(dir), "%s/w", base);
}

TestSuite(watch, .init = setup, .fini = teardown, .timeout = 240);

static void start(const char *name, char *const env[])
{
	char path[PATH_MAX];
	char *argv[] = { path, NULL };
	int rc;

	fixture_path(name, path, sizeof(path));
	rc = fixture_start(&fx, argv, env, 60000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
}

static void command(char c, const char *want)
{
	char reply[256];
	int rc = fixture_command(&fx, c, reply, sizeof(reply), 10000);

	cr_assert_eq(rc, 0, "command %c: %s", c, strerror(-rc));
	cr_assert(!strncmp(reply, want, strlen(want)), "command %c: %s", c,
		  reply);
}

/* memsnap with @args (NULL-ended), which must exit @want. */
static void memsnap_ok(struct run *r, int want, ...)
{
	const char *args[24];
	size_t n = 0;
	va_list ap;

	va_start(ap, want);
	while (n + 1 < 24 && (args[n] = va_arg(ap, const char *)))
		n++;
	va_end(ap);
	args[n] = NULL;
	cr_assert_eq(run_memsnap(r, args), 0);
	cr_assert_eq(r->status, want, "memsnap %s %s: exit %d, want %d: %s%s",
		     args[0], n > 2 ? args[2] : "", r->status, want, r->out,
		     r->err);
}

/* The string value of the first "@key" after @from in JSON @s (copied
 * into @buf), or NULL. */
static const char *json_str_after(const char *s, const char *from,
				  const char *key, char *buf, size_t size)
{
	char pat[96];
	const char *p = from ? strstr(s, from) : s, *q;

	if (!p)
		return NULL;
	snprintf(pat, sizeof(pat), "\"%s\": \"", key);
	p = strstr(p, pat);
	if (!p)
		return NULL;
	p += strlen(pat);
	q = strchr(p, '"');
	if (!q || (size_t)(q - p) >= size)
		return NULL;
	memcpy(buf, p, (size_t)(q - p));
	buf[q - p] = '\0';
	return buf;
}

/* The shape report gave site @name, or "" when it is not listed. */
static const char *site_shape(const char *json, const char *name,
			      char *buf, size_t size)
{
	char from[128];
	const char *sites = strstr(json, "\"sites\": [");

	snprintf(from, sizeof(from), "\"name\": \"%s\"", name);
	buf[0] = '\0';
	if (!sites || !strstr(sites, from))
		return buf;
	json_str_after(strstr(sites, from), NULL, "shape", buf, size);
	return buf;
}

/* Occurrences of @needle in @s. */
static int count(const char *s, const char *needle)
{
	int n = 0;

	while ((s = strstr(s, needle))) {
		n++;
		s += strlen(needle);
	}
	return n;
}

/* @path's bytes, NUL-terminated (free() them). */
static char *file_bytes(const char *path, size_t *len)
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
	if (len)
		*len = (size_t)n;
	return buf;
}

/* report DIR --format svg -o FILE: one chart with the RSS line, the
 * heap in use among its areas, @dumps dump marks, and (where python3
 * is here to read it) well-formed XML. */
static void assert_svg(int dumps)
{
	char path[PATH_MAX + 16], cmd[PATH_MAX + 128], *svg;
	struct run r;

	snprintf(path, sizeof(path), "%s/t.svg", base);
	memsnap_ok(&r, 0, "report", dir, "--format", "svg", "-o", path, NULL);
	run_free(&r);
	svg = file_bytes(path, NULL);
	cr_assert(strstr(svg, "<svg ") && strstr(svg, "</svg>"), "%s", svg);
	cr_assert_eq(count(svg, "class=\"rss\""), 1, "%s", svg);
	cr_assert(strstr(svg, "data-part=\"heap_in_use\"") ||
			  strstr(svg, "data-part=\"heap\""), "%s", svg);
	cr_assert_eq(count(svg, "class=\"dump\""), dumps, "%s", svg);
	cr_assert_null(strstr(svg, "<script"), "a script in the chart");
	free(svg);
	if (access("/usr/bin/python3", X_OK)) {
		fprintf(stderr, "watch: no /usr/bin/python3: the chart's XML "
			"is not parsed\n");
		return;
	}
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 -c 'import sys, "
		 "xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' '%s'",
		 path);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s is not well-formed XML: %s", path, r.err);
	run_free(&r);
}

/* The three sites, watched for 20 s (every 0.5 s, a dump every 4
 * ticks), then the report's verdict on each. */
static void three_shapes(void)
{
	char shape[64], first[128];
	const char *sites;
	struct run r;

	memsnap_ok(&r, 0, "--pid", pidstr, "watch", "-o", dir, "--interval",
		   "0.5s", "--count", "40", "--dump-every", "4", NULL);
	cr_assert(strstr(r.out, "40 ticks, 10 dumps, count reached"), "%s",
		  r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);

	memsnap_ok(&r, 0, "report", dir, "--json", "--top", "0", NULL);
	sites = strstr(r.out, "\"sites\": [");
	cr_assert_not_null(sites, "%s", r.out);
	cr_assert_not_null(json_str_after(sites, NULL, "name", first,
					  sizeof(first)), "%s", r.out);
	cr_assert_str_eq(first, "leak_site", "the site that grew most: %s\n%s",
			 first, r.out);
	cr_assert_str_eq(site_shape(r.out, "leak_site", shape, sizeof(shape)),
			 "growing", "leak_site: '%s'\n%s", shape, r.out);
	cr_assert_str_eq(site_shape(r.out, "cache_site", shape, sizeof(shape)),
			 "plateau", "cache_site: '%s'\n%s", shape, r.out);
	cr_assert_str_eq(site_shape(r.out, "waves_site", shape, sizeof(shape)),
			 "saw-tooth", "waves_site: '%s'\n%s", shape, r.out);
	cr_assert(strstr(r.out, "\"ticks\": 40"), "%s", r.out);
	run_free(&r);

	assert_svg(10);

	/* the text says it too: the leak on the first line of sites */
	memsnap_ok(&r, 0, "report", dir, NULL);
	sites = strstr(r.out, "call sites that grew");
	cr_assert_not_null(sites, "%s", r.out);
	sites = strchr(strchr(sites, '\n') + 1, '\n') + 1;
	cr_assert(!strncmp(strstr(sites, "growing"), "growing", 7) &&
			  strstr(sites, "leak_site") < strchr(sites, '\n'),
		  "the first site is not a growing leak_site:\n%s", r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

/* ---- the HTML report in a browser ---------------------------------------- */

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static int paeth(int a, int b, int c)
{
	int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);

	return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/*
 * The share of pixels of PNG @path that are not the page's white, and
 * how many of 64 colour buckets (2 bits a channel) occur: chromium's screenshots are 8-bit
 * RGB or RGBA, which is all this reads.
 */
static void png_ink(const char *path, double *ink, int *colours)
{
	size_t len, at = 8, zlen = 0, i;
	unsigned char *png = (unsigned char *)file_bytes(path, &len);
	unsigned char *z = malloc(len), *raw, *prev;
	uint32_t w = 0, h = 0, x, y;
	unsigned int bpp = 0;
	unsigned long long seen = 0;
	unsigned long long inked = 0;
	uLongf rawlen;

	cr_assert_not_null(z);
	cr_assert(len > 8 && !memcmp(png, "\x89PNG\r\n\x1a\n", 8),
		  "%s is not a PNG", path);
	while (at + 12 <= len) {
		uint32_t n = be32(png + at);
		const unsigned char *type = png + at + 4, *d = png + at + 8;

		cr_assert_leq(n, len - at - 12, "%s: a chunk runs past the end",
			      path);
		if (!memcmp(type, "IHDR", 4)) {
			w = be32(d);
			h = be32(d + 4);
			cr_assert(d[8] == 8 && (d[9] == 2 || d[9] == 6) &&
					  !d[12], "%s: not 8-bit RGB(A)", path);
			bpp = d[9] == 6 ? 4 : 3;
		} else if (!memcmp(type, "IDAT", 4)) {
			memcpy(z + zlen, d, n);
			zlen += n;
		}
		at += 12 + n;
	}
	cr_assert(w && h && bpp, "%s: no image header", path);
	rawlen = (uLongf)h * (1 + (uLongf)w * bpp);
	raw = malloc(rawlen);
	prev = calloc(1, (size_t)w * bpp);
	cr_assert(raw && prev);
	cr_assert_eq(uncompress(raw, &rawlen, z, zlen), Z_OK,
		     "%s: its pixels do not inflate", path);
	for (y = 0; y < h; y++) {
		unsigned char *row = raw + (size_t)y * (1 + (size_t)w * bpp);
		unsigned char *px = row + 1;

		for (i = 0; i < (size_t)w * bpp; i++) {
			int a = i >= bpp ? px[i - bpp] : 0, b = prev[i],
			    c = i >= bpp ? prev[i - bpp] : 0;

			switch (row[0]) {
			case 1: px[i] = (unsigned char)(px[i] + a); break;
			case 2: px[i] = (unsigned char)(px[i] + b); break;
			case 3: px[i] = (unsigned char)(px[i] + (a + b) / 2); break;
			case 4: px[i] = (unsigned char)(px[i] + paeth(a, b, c)); break;
			}
		}
		for (x = 0; x < w; x++) {
			const unsigned char *p = px + (size_t)x * bpp;

			inked += p[0] < 240 || p[1] < 240 || p[2] < 240;
			seen |= 1ull << ((p[0] >> 6) << 4 | (p[1] >> 6) << 2 |
					 (p[2] >> 6));
		}
		memcpy(prev, px, (size_t)w * bpp);
	}
	*ink = (double)inked / ((double)w * h);
	for (*colours = 0, i = 0; i < 64; i++)
		*colours += !!(seen & (1ull << i));
	free(png);
	free(z);
	free(raw);
	free(prev);
}

/* chromium --headless on file @html with no network (its own network
 * namespace), @what: "--dump-dom" into @r, or "--screenshot=PNG". */
static void chromium(struct run *r, const char *html, const char *what)
{
	char cmd[PATH_MAX * 3];

	snprintf(cmd, sizeof(cmd), "unshare --net chromium --headless "
		 "--no-sandbox --disable-gpu --hide-scrollbars "
		 "--no-first-run --user-data-dir='%s/chromium' "
		 "--window-size=1200,2000 %s 'file://%s' 2>/dev/null", base,
		 what, html);
	cr_assert_eq(run_shell(r, cmd), 0);
	cr_assert_eq(r->status, 0, "chromium %s: exit %d: %s", what, r->status,
		     r->err);
}

/* The number after @attr=" in @s, or -1. */
static long attr_num(const char *s, const char *attr)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "%s=\"", attr);
	p = strstr(s, pat);
	return p ? strtol(p + strlen(pat), NULL, 10) : -1;
}

/* The page ran every script, none threw. */
static void assert_ran(const char *dom, const char *what)
{
	const char *html = strstr(dom, "<html");

	cr_assert_not_null(html, "%s: no page: %.400s", what, dom);
	cr_assert(strstr(html, "data-ready=\"1\"") &&
			  strstr(html, "data-ready=\"1\"") < strchr(html, '>'),
		  "%s: the page's scripts did not run to the end: %.300s",
		  what, html);
	cr_assert_lt(attr_num(dom, "data-errors"), 0,
		     "%s: a script threw: %.300s", what, html);
}

/* A page that asks nothing of the network: no src or href, no URL but
 * the SVG namespace, and a policy that forbids any. */
static void assert_offline(const char *page, const char *what)
{
	const char *p = page;

	cr_assert_null(strstr(page, " src="), "%s: a src attribute", what);
	cr_assert_null(strstr(page, " href="), "%s: an href attribute", what);
	while ((p = strstr(p, "://"))) {
		cr_assert(p - page >= 4 &&
				  !strncmp(p - 4, "http://www.w3.org/2000/svg", 26),
			  "%s: a URL: %.60s", what, p - 4 > page ? p - 4 : p);
		p++;
	}
	cr_assert(strstr(page, "default-src 'none'"), "%s: no policy", what);
}

/* `report @src --format html -o @out`, a page that asks nothing of the
 * network: its bytes (free() them). */
static char *html_page(const char *src, const char *out)
{
	struct run r;
	char *page;

	memsnap_ok(&r, 0, "report", src, "--format", "html", "-o", out, NULL);
	run_free(&r);
	page = file_bytes(out, NULL);
	assert_offline(page, out);
	return page;
}

/*
 * The page of a series and of one of its dumps in a real browser.  The
 * ticks: from the report's JSON; the top site: the fixture's leak.
 */
Test(watch, html_report_in_a_browser)
{
	char html[PATH_MAX + 16], dhtml[PATH_MAX + 16], png[PATH_MAX + 16];
	char dump[PATH_MAX + 32], top[160], sel[PATH_MAX + 32];
	const char *p, *q;
	long ticks, points, frames;
	struct run r;
	char *page;
	double ink;
	int colours;

	if (access("/usr/bin/chromium", X_OK) || access("/usr/bin/unshare",
							X_OK)) {
		teardown();
		cr_skip_test("no /usr/bin/chromium (Debian's chromium) or "
			     "unshare: the page is not opened in a browser");
	}
	cr_assert_eq(run_shell(&r, "unshare --net true"), 0);
	if (r.status) {
		run_free(&r);
		teardown();
		cr_skip_test("unshare --net fails here (no CAP_SYS_ADMIN?): the "
			     "browser cannot be kept off the network");
	}
	run_free(&r);
	start("watch-target-glibc", NULL);
	memsnap_ok(&r, 0, "--pid", pidstr, "prof", "on", "--sampler",
		   "--sample-bytes", "16K", NULL);
	run_free(&r);
	command('g', "ok");
	memsnap_ok(&r, 0, "--pid", pidstr, "watch", "-o", dir, "--interval",
		   "0.5s", "--count", "40", "--dump-every", "4", NULL);
	run_free(&r);
	memsnap_ok(&r, 0, "--pid", pidstr, "prof", "off", NULL);
	run_free(&r);
	fixture_assert_healthy(&fx);

	memsnap_ok(&r, 0, "report", dir, "--json", NULL);
	p = strstr(r.out, "\"ticks\": ");
	cr_assert_not_null(p, "%s", r.out);
	ticks = strtol(p + 9, NULL, 10);
	run_free(&r);

	snprintf(html, sizeof(html), "%s/report.html", base);
	page = html_page(dir, html);
	cr_assert(strstr(page, "At the last tick"), "no explain in the page");
	free(page);

	chromium(&r, html, "--dump-dom");
	assert_ran(r.out, html);
	points = attr_num(r.out, "data-points");
	cr_assert_eq(points, ticks, "the chart has %ld points, the series %ld "
		     "ticks", points, ticks);
	/* the RSS line, as the browser holds it: a point per tick */
	p = strstr(r.out, "class=\"rss\"");
	q = p ? strstr(p, "points=\"") : NULL;
	cr_assert_not_null(q, "no RSS line in the chart");
	for (points = 0, q += 8; *q && *q != '"'; q++)
		points += *q == ',';
	cr_assert_eq(points, ticks, "the RSS line has %ld points", points);
	p = strstr(r.out, "id=\"top-site\">");
	cr_assert_not_null(p, "no top site in the page");
	p += strlen("id=\"top-site\">");
	snprintf(top, sizeof(top), "%.*s", (int)strcspn(p, "<"), p);
	cr_assert_str_eq(top, "leak_site", "the page's top site: %s", top);
	cr_assert_gt(attr_num(r.out, "data-frames"), 3,
		     "the growth's flame graph drew nothing");
	run_free(&r);

	snprintf(png, sizeof(png), "%s/report.png", base);
	snprintf(dump, sizeof(dump), "--screenshot=%s", png);
	chromium(&r, html, dump);
	run_free(&r);
	png_ink(png, &ink, &colours);
	fprintf(stderr, "watch: the page's screenshot: %.1f%% inked, %d "
		"colours of 64\n", 100 * ink, colours);
	cr_assert(ink > 0.03 && colours >= 6, "the screenshot looks blank: "
		  "%.2f%% inked, %d colours", 100 * ink, colours);

	/* one dump's page: the flame graph of what is in use */
	snprintf(dump, sizeof(dump), "%s/dump-0010.heap", dir);
	snprintf(dhtml, sizeof(dhtml), "%s/dump.html", base);
	free(html_page(dump, dhtml));
	/* #selftest: the page searches, zooms and zooms out by itself */
	snprintf(sel, sizeof(sel), "%s#selftest", dhtml);
	chromium(&r, sel, "--dump-dom");
	assert_ran(r.out, dhtml);
	frames = attr_num(r.out, "data-frames");
	cr_assert_gt(frames, 3, "the dump's flame graph drew nothing");
	cr_assert_gt(attr_num(r.out, "data-search-hits"), 0, "a search for "
		     "the top frame found nothing: %.600s", strstr(r.out,
								    "id=\"flame\""));
	p = strstr(r.out, "data-search-info=\"matched ");
	cr_assert(p && !strstr(p, "matched 0 B") && strchr(p, '%'),
		  "the search says no share: %.600s", strstr(r.out,
							      "id=\"flame\""));
	cr_assert_lt(attr_num(r.out, "data-zoom-frames"), frames,
		     "zooming in drew as much as the whole");
	cr_assert_eq(attr_num(r.out, "data-zoom-full"), 1,
		     "the frame zoomed to does not span the width");
	cr_assert_eq(attr_num(r.out, "data-reset-frames"), frames,
		     "zooming out did not draw the whole again");
	p = strstr(r.out, "id=\"flame-top\"");
	cr_assert(p && strstr(p, "leak_site"), "leak_site is not among the "
		  "frames that allocated most: %.2000s", p ? p : r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

Test(watch, three_sites_glibc_through_the_sampler)
{
	struct run r;

	start("watch-target-glibc", NULL);
	memsnap_ok(&r, 0, "--pid", pidstr, "prof", "on", "--sampler",
		   "--sample-bytes", "16K", NULL);
	run_free(&r);
	command('g', "ok");
	three_shapes();
	memsnap_ok(&r, 0, "--pid", pidstr, "prof", "off", NULL);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

/* Field @name of every tick of DIR/series.tsv, by the names of its
 * "t_ms" line, into @v (at most @max): how many ticks. */
static size_t series_column(const char *name, int64_t *v, size_t max)
{
	char path[PATH_MAX + 32], line[1100];
	int col = -1;
	size_t n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/series.tsv", dir);
	f = fopen(path, "re");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *tok = strtok_r(line, "\t\n", &save);
		int i;

		if (tok && !strcmp(tok, "t_ms")) {
			for (i = 1; (tok = strtok_r(NULL, "\t\n", &save)); i++)
				if (!strcmp(tok, name))
					col = i;
			continue;
		}
		if (!tok || tok[0] < '0' || tok[0] > '9' || n >= max)
			continue;
		cr_assert_geq(col, 0, "no column %s in %s", name, path);
		for (i = 1; i <= col && (tok = strtok_r(NULL, "\t\n", &save));
		     i++)
			;
		cr_assert_not_null(tok, "a tick without %s", name);
		v[n++] = strcmp(tok, "-") ? strtoll(tok, NULL, 10) : -1;
	}
	fclose(f);
	return n;
}

/*
 * watch --sampler on a program that only mallocs (glibc, a worker
 * thread on an arena of its own): the table memsnap's sampler maps in
 * the process is memsnap's at every tick, and the arena's heaps are the
 * heap's: the program's own anonymous memory stays what it was.
 */
Test(watch, the_samplers_table_is_memsnaps_not_the_programs)
{
	static const char *const rest[] = { "thread_stacks", "file", "shmem",
					    "unaccounted" };
	int64_t rss[8], anon[8], samp[8], heap[8], other[8], sum;
	int64_t lo, hi, got;
	struct explain e;
	size_t n, i, k;
	struct run r;

	start("watch-target-glibc", NULL);
	command('g', "ok");
	memsnap_ok(&r, 0, "--pid", pidstr, "watch", "-o", dir, "--interval",
		   "1s", "--count", "4", "--sampler", "--sample-bytes", "16K",
		   NULL);
	run_free(&r);
	fixture_assert_healthy(&fx);
	n = series_column("memsnap_sampler", samp, 8);
	cr_assert_eq(n, 4);
	cr_assert_eq(series_column("anon_other", anon, 8), n);
	cr_assert_eq(series_column("rss", rss, 8), n);
	cr_assert_eq(series_column("heap", heap, 8), n);
	for (i = 0; i < n; i++) {
		cr_assert_gt(samp[i], 0, "tick %zu: the sampler's memory is "
			     "not memsnap's", i);
		/* copies on write of the program's files, and no more (1.04
		 * MiB on arm64; the sampler's own, were it counted here,
		 * would add its 1.5 MiB) */
		cr_assert_lt(anon[i], 1536 * 1024, "tick %zu: anon_other %"
			     PRId64 " beside the sampler's %" PRId64
			     " and the heap's %" PRId64, i, anon[i], samp[i],
			     heap[i]);
		cr_assert_lt(samp[i] + heap[i], rss[i]);
	}
	/* every tick's parts add up to its RSS, the sampler's among them */
	for (i = 0; i < n; i++) {
		sum = heap[i] + anon[i] + samp[i];
		for (k = 0; k < 4; k++) {
			cr_assert_eq(series_column(rest[k], other, 8), n);
			sum += other[i];
		}
		cr_assert_eq(sum, rss[i], "tick %zu: the parts add up to %"
			     PRId64 ", not rss %" PRId64, i, sum, rss[i]);
	}
	/* the table stays after the watch's prof off: explain says so */
	explain_run(fx.pid, NULL, &e, &lo, &hi);
	explain_assert_sound(&e, lo, hi, true);
	cr_assert(explain_num(&e, "parts.memsnap_sampler", &got), "%s",
		  e.json);
	cr_assert_gt(got, 0, "%s", e.json);
	cr_assert_lt(e.part[P_ANON_OTHER], 1536 * 1024, "%s", e.json);
	/* the heap's, in use or freed by the waves: never the program's
	 * own memory; under 10 MiB of it (a slow CPU's fixture is that
	 * far into its clock) there is no finding, and the verdict says
	 * heap in use */
	if (e.nfindings)
		cr_assert(!strcmp(e.f[0].id, "heap_in_use") ||
				  !strcmp(e.f[0].id, "heap_free"), "%s", e.json);
	else
		cr_assert(strstr(e.json, "\"verdict\": \"RSS ") &&
				  strstr(e.json, "% heap in use"), "%s", e.json);
	cr_assert_null(explain_finding(&e, "anon_other"), "%s", e.json);
	explain_free(&e);
	fixture_assert_healthy(&fx);
}

Test(watch, three_sites_jemalloc_through_its_profiler)
{
	static char conf[] = "MALLOC_CONF=prof:true,lg_prof_sample:14";
	char *env[] = { conf, NULL };

	start("watch-target-jemalloc", env);
	command('g', "ok");
	three_shapes();
}

/* memsnap watch in the background (its output into files of base). */
static void watch_in_background(const char *const extra[])
{
	const char *bin = getenv("MEMSNAP_BIN");
	const char *argv[24] = { bin ? bin : "./memsnap", "--pid", pidstr,
				 "watch", "-o", dir, "--interval", "0.2s" };
	char out[PATH_MAX + 16];
	size_t n = 8, i;
	int fd;

	for (i = 0; extra && extra[i] && n + 1 < 24; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	snprintf(out, sizeof(out), "%s/watch.out", base);
	watcher = fork();
	cr_assert_geq(watcher, 0);
	if (watcher == 0) {
		fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0)
			_exit(126);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
}

/* Until @n ticks are in the series (up to 60 s): the watch is under
 * way. */
static void await_ticks(int n)
{
	struct timespec step = { 0, 20 * 1000 * 1000 };
	int i;

	for (i = 0; i < 3000 && series_ticks(dir) < n; i++)
		nanosleep(&step, NULL);
	cr_assert_geq(series_ticks(dir), n, "the watch wrote %d ticks in 60 s",
		      series_ticks(dir));
}

/* The watch's exit status. */
static int reap(void)
{
	int st;

	cr_assert_eq(waitpid(watcher, &st, 0), watcher);
	watcher = -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char *slurp(const char *name)
{
	char path[PATH_MAX + 32];
	static char buf[65536];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", base, name);
	f = fopen(path, "re");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

Test(watch, killed_mid_series_leaves_a_readable_series)
{
	const char *const extra[] = { "--dump-every", "2", NULL };
	static char conf[] = "MALLOC_CONF=prof:true,lg_prof_sample:14";
	char *env[] = { conf, NULL };
	struct run r;

	start("watch-target-jemalloc", env);
	command('g', "ok");
	watch_in_background(extra);
	await_ticks(5);
	kill(watcher, SIGKILL);
	cr_assert_eq(reap(), 128 + SIGKILL);
	fixture_assert_healthy(&fx);

	memsnap_ok(&r, 0, "report", dir, NULL);
	cr_assert(strstr(r.out, "the watch did not end (killed?)"), "%s",
		  r.out);
	cr_assert(strstr(r.out, "leak_site"), "%s", r.out);
	run_free(&r);
	memsnap_ok(&r, 0, "report", dir, "--json", NULL);
	cr_assert(strstr(r.out, "\"end\": null"), "%s", r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

Test(watch, sigterm_ends_it_and_switches_the_sampler_off)
{
	const char *const extra[] = { "--sampler", "--sample-bytes", "16K",
				      "--dump-every", "3", NULL };
	struct run r;

	start("watch-target-glibc", NULL);
	command('g', "ok");
	watch_in_background(extra);
	await_ticks(7);		/* two dumps */
	kill(watcher, SIGTERM);
	/* interrupted, as the exit table says: 9, the series whole */
	cr_assert_eq(reap(), 9, "watch: %s", slurp("watch.out"));
	cr_assert(strstr(slurp("watch.out"), "stopped by SIGTERM"), "%s",
		  slurp("watch.out"));
	fixture_assert_healthy(&fx);

	memsnap_ok(&r, 0, "--pid", pidstr, "info", "--no-attach", NULL);
	cr_assert(strstr(r.out, "sampler   off"), "after the watch: %s", r.out);
	run_free(&r);
	memsnap_ok(&r, 0, "report", dir, NULL);
	cr_assert(strstr(r.out, "; stopped by SIGTERM"), "%s", r.out);
	cr_assert(strstr(r.out, "leak_site"), "%s", r.out);
	/* switched off, and the series says so: no warning */
	cr_assert_null(strstr(r.out, "prof off"), "%s", r.out);
	run_free(&r);
	memsnap_ok(&r, 0, "report", dir, "--json", NULL);
	cr_assert(strstr(r.out, "\"by_the_watch\": true,\n    "
			 "\"switched_off\": true,\n    "
			 "\"may_still_be_on\": false"), "%s", r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

/*
 * A watch --sampler killed with SIGKILL cannot switch the sampler off:
 * its report says the sampler may still be on, with the command that
 * switches it off, in text, JSON and HTML; the command does, and the
 * fixture is unharmed.
 */
Test(watch, killed_with_the_sampler_on_names_prof_off)
{
	const char *const extra[] = { "--sampler", "--sample-bytes", "16K",
				      "--dump-every", "2", NULL };
	char cmd[64], html[PATH_MAX + 16], *page;
	const char *p;
	struct run r;

	start("watch-target-glibc", NULL);
	command('g', "ok");
	watch_in_background(extra);
	await_ticks(4);
	kill(watcher, SIGKILL);
	cr_assert_eq(reap(), 128 + SIGKILL);
	fixture_assert_healthy(&fx);
	memsnap_ok(&r, 0, "--pid", pidstr, "info", "--no-attach", NULL);
	cr_assert(strstr(r.out, "sampler   on"), "the watch's sampler: %s",
		  r.out);
	run_free(&r);

	snprintf(cmd, sizeof(cmd), "`memsnap --pid %s prof off`", pidstr);
	memsnap_ok(&r, 0, "report", dir, NULL);
	p = strchr(r.out, '\n');
	cr_assert(p && !strncmp(p + 1, "warning: the watch switched memsnap's "
				"sampler on and did not end", 64) &&
			  strstr(p, "may still be on") &&
			  strstr(p, cmd) < strchr(p + 1, '\n'),
		  "the second line does not name %s:\n%s", cmd, r.out);
	run_free(&r);
	memsnap_ok(&r, 0, "report", dir, "--json", NULL);
	snprintf(cmd, sizeof(cmd), "\"switch_off\": \"memsnap --pid %s prof "
		 "off\"", pidstr);
	cr_assert(strstr(r.out, "\"may_still_be_on\": true") &&
			  strstr(r.out, cmd), "%s", r.out);
	run_free(&r);
	snprintf(html, sizeof(html), "%s/r.html", base);
	page = html_page(dir, html);
	snprintf(cmd, sizeof(cmd), "`memsnap --pid %s prof off`", pidstr);
	p = strstr(page, "id=\"sampler-left\"");
	cr_assert(p && strstr(p, cmd) && strstr(p, cmd) < strstr(p, "</p>"),
		  "the page does not name %s: %.2000s", cmd, page);
	free(page);

	/* as said: the sampler goes */
	memsnap_ok(&r, 0, "--pid", pidstr, "prof", "off", NULL);
	run_free(&r);
	memsnap_ok(&r, 0, "--pid", pidstr, "info", "--no-attach", NULL);
	cr_assert(strstr(r.out, "sampler   off"), "%s", r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

/* The number after "@key": in the "sampler" object of `info --json`
 * of the fixture (read with --no-attach: nothing stopped). */
static uint64_t sampler_number(const char *key)
{
	char pat[64];
	const char *p;
	struct run r;
	uint64_t v;

	memsnap_ok(&r, 0, "--json", "--pid", pidstr, "info", "--no-attach",
		   NULL);
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = strstr(r.out, "\"sampler\": {");
	cr_assert(p && (p = strstr(p, pat)), "no sampler %s: %s", key, r.out);
	v = strtoull(p + strlen(pat), NULL, 10);
	if (!strcmp(key, "lease_lapsed"))
		v = !strncmp(p + strlen(pat), "true", 4);
	run_free(&r);
	return v;
}

/* What the fixture's leak site holds now. */
static uint64_t leak_bytes(void)
{
	char reply[256];
	const char *p;
	int rc = fixture_command(&fx, 'h', reply, sizeof(reply), 10000);

	cr_assert_eq(rc, 0, "command h: %s", strerror(-rc));
	p = strstr(reply, "leak=");
	cr_assert(p, "%s", reply);
	return strtoull(p + 5, NULL, 10);
}

/*
 * The lease: a watch --sampler renews it at every tick, so the sampler
 * keeps sampling past a lease of 1 s; SIGKILLed, the watch renews it no
 * more, and once it lapsed the sampler takes no sample while the
 * program allocates on (info's counters, read without stopping
 * anything), says so in info, and prof off still takes it out.
 */
Test(watch, a_killed_watchs_sampler_stops_sampling_after_its_lease)
{
	const char *const extra[] = { "--sampler", "--sample-bytes", "16K",
				      "--sampler-lease", "1s",
				      "--dump-every", "0", NULL };
	struct timespec step = { 0, 100 * 1000 * 1000 };
	uint64_t lease0, samples0, samples, leak;
	struct run r;
	int i;

	start("watch-target-glibc", NULL);
	command('g', "ok");
	watch_in_background(extra);
	await_ticks(2);
	lease0 = sampler_number("lease_until");
	samples0 = sampler_number("samples");
	cr_assert_gt(lease0, 0, "the watch's sampler has no lease");
	await_ticks(17);	/* 3 s of ticks at 0.2 s: 3 leases */
	cr_assert_gt(sampler_number("lease_until"), lease0,
		     "the lease was not renewed");
	cr_assert_eq(sampler_number("lease_lapsed"), 0);
	cr_assert_gt(sampler_number("samples"), samples0,
		     "no sample taken while the watch renewed its lease");

	kill(watcher, SIGKILL);
	cr_assert_eq(reap(), 128 + SIGKILL);
	/* the lease lapses within a second or two; the first sample due
	 * after it says when (the leak asks for one every 25 ms) */
	for (i = 0; i < 300 && !sampler_number("lapsed_at"); i++)
		nanosleep(&step, NULL);
	cr_assert_neq(sampler_number("lapsed_at"), 0,
		      "the lease never lapsed in 30 s");
	cr_assert_eq(sampler_number("lease_lapsed"), 1);
	samples = sampler_number("samples");
	/* 2 MiB more of the leak, some 128 samples due at 16 KiB */
	leak = leak_bytes();
	for (i = 0; i < 300 && leak_bytes() < leak + (2u << 20); i++)
		nanosleep(&step, NULL);
	cr_assert_geq(leak_bytes(), leak + (2u << 20), "the leak stopped");
	cr_assert_eq(sampler_number("samples"), samples,
		     "samples taken after the lease lapsed");
	memsnap_ok(&r, 0, "--pid", pidstr, "info", "--no-attach", NULL);
	cr_assert(strstr(r.out, "lease lapsed at") &&
			  strstr(r.out, "no sample taken since"), "%s", r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);

	memsnap_ok(&r, 0, "--pid", pidstr, "prof", "off", NULL);
	run_free(&r);
	memsnap_ok(&r, 0, "--pid", pidstr, "info", "--no-attach", NULL);
	cr_assert(strstr(r.out, "sampler   off"), "%s", r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

Test(watch, target_exit_is_recorded_not_an_error)
{
	const char *const extra[] = { "--dump-every", "0", NULL };
	struct run r;

	start("watch-target-glibc", NULL);
	command('g', "ok");
	watch_in_background(extra);
	await_ticks(3);
	fixture_stop(&fx);
	cr_assert_eq(reap(), 0, "watch: %s", slurp("watch.out"));
	cr_assert(strstr(slurp("watch.out"), "target exited"), "%s",
		  slurp("watch.out"));

	memsnap_ok(&r, 0, "report", dir, NULL);
	cr_assert(strstr(r.out, "; target exited"), "%s", r.out);
	cr_assert(strstr(r.out, "no heap dump in the series"), "%s", r.out);
	run_free(&r);
}

Test(watch, one_tick_without_dumps_still_reports)
{
	char link[PATH_MAX + 32], victim[PATH_MAX + 32];
	struct run r;

	start("watch-target-glibc", NULL);
	memsnap_ok(&r, 0, "--pid", pidstr, "watch", "-o", dir, "--count", "1",
		   "--no-attach", NULL);
	run_free(&r);
	fixture_assert_healthy(&fx);
	memsnap_ok(&r, 0, "report", dir, NULL);
	cr_assert(strstr(r.out, "1 tick over 0.0 s"), "%s", r.out);
	cr_assert(strstr(r.out, "too few ticks for a shape"), "%s", r.out);
	cr_assert(strstr(r.out, "no heap dump in the series"), "%s", r.out);
	run_free(&r);
	memsnap_ok(&r, 0, "report", dir, "--json", NULL);
	cr_assert(strstr(r.out, "\"shape\": \"few points\""), "%s", r.out);
	run_free(&r);
	/* -o through another user's symlink: refused, and said so */
	snprintf(link, sizeof(link), "%s.link", dir);
	snprintf(victim, sizeof(victim), "%s.victim", dir);
	cr_assert_eq(symlink(victim, link), 0, "%s", strerror(errno));
	cr_assert_eq(lchown(link, 65534, 65534), 0, "%s", strerror(errno));
	memsnap_ok(&r, 1, "report", dir, "-o", link, NULL);
	cr_assert(strstr(r.err, "is a symlink of another user") &&
		  strstr(r.err, link), "%s", r.err);
	run_free(&r);
	cr_assert_eq(access(victim, F_OK), -1, "written through the symlink");
	unlink(link);

	/* the same DIR again: refused, the series kept */
	memsnap_ok(&r, 1, "--pid", pidstr, "watch", "-o", dir, "--count", "1",
		   NULL);
	cr_assert(strstr(r.err, "a series is there already"), "%s", r.err);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

/*
 * A DIR given that exists already (maybe shared) with a FIFO where the
 * last tick's explain is written first: the watch neither blocks on it
 * nor writes through it, and explain.txt is a file of its own.
 */
Test(watch, a_fifo_in_the_directory_is_not_written_through)
{
	char fifo[PATH_MAX + 64], txt[PATH_MAX + 64];
	struct stat st;
	struct run r;

	start("watch-target-glibc", NULL);
	cr_assert_eq(mkdir(dir, 0755), 0, "mkdir %s: %s", dir, strerror(errno));
	snprintf(fifo, sizeof(fifo), "%s/explain.txt.new", dir);
	cr_assert_eq(mkfifo(fifo, 0666), 0, "mkfifo: %s", strerror(errno));
	memsnap_ok(&r, 0, "--pid", pidstr, "watch", "-o", dir, "--count", "2",
		   "--interval", "0.2s", NULL);
	run_free(&r);
	snprintf(txt, sizeof(txt), "%s/explain.txt", dir);
	cr_assert_eq(lstat(txt, &st), 0, "%s: %s", txt, strerror(errno));
	cr_assert(S_ISREG(st.st_mode), "%s is not a regular file", txt);
	cr_assert_gt(st.st_size, 0, "%s is empty", txt);
	cr_assert(lstat(fifo, &st) && errno == ENOENT, "%s is still there",
		  fifo);
	fixture_assert_healthy(&fx);
}

/* ---- a memory limit ----------------------------------------------------- */

static char cgroup[PATH_MAX];	/* A cgroup limited to @limit bytes holding the fixture: v2 where
 * /sys/fs/cgroup is the unified hierarchy, else v1's memory
 * controller.  Skips when neither can be made here. */
static void limit_fixture(const char *limit)
{
	char path[PATH_MAX + 32];
	bool v2 = !access("/sys/fs/cgroup/cgroup.controllers", F_OK);

	snprintf(cgroup, sizeof(cgroup), "%s/memsnap-test-watch-%d",
		 v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory", (int)getpid());
	if (mkdir(cgroup, 0755)) {
		cgroup[0] = '\0';
		cr_skip_test("cannot make a cgroup here (%s)", strerror(errno));
	}
	snprintf(path, sizeof(path), "%s/%s", cgroup,
		 v2 ? "memory.max" : "memory.limit_in_bytes");
	if (!write_existing(path, limit))
		cr_skip_test("cannot set %s (%s)", path, strerror(errno));
	snprintf(path, sizeof(path), "%s/cgroup.procs", cgroup);
	if (!write_existing(path, pidstr))
		cr_skip_test("cannot move pid %s into %s (%s)", pidstr, cgroup,
			     strerror(errno));
}

static void unlimit(void)
{
	char path[PATH_MAX + 32];

	if (!cgroup[0])
		return;
	/* the fixture is gone first: an empty cgroup can be removed */
	fixture_stop(&fx);
	snprintf(path, sizeof(path), "%s", cgroup);
	rmdir(path);
	cgroup[0] = '\0';
}

Test(watch, when_rss_reaches_the_memory_limit, .fini = unlimit)
{
	const char *limit_s;
	struct run r;
	double hours;

	start("watch-target-glibc", NULL);
	limit_fixture("1073741824");
	command('g', "ok");
	/* within the first wave (3.1 s), which only rises */
	memsnap_ok(&r, 0, "--pid", pidstr, "watch", "-o", dir, "--interval",
		   "0.25s", "--count", "8", "--dump-every", "0", NULL);
	run_free(&r);
	fixture_assert_healthy(&fx);
	memsnap_ok(&r, 0, "report", dir, NULL);
	cr_assert(strstr(r.out, "at this slope RSS reaches the memory limit "
			 "(1.0 GiB) in "), "%s", r.out);
	run_free(&r);
	memsnap_ok(&r, 0, "report", dir, "--json", NULL);
	cr_assert(strstr(r.out, "\"limit\": 1073741824"), "%s", r.out);
	limit_s = strstr(r.out, "\"limit_in_hours\": ");
	cr_assert_not_null(limit_s, "%s", r.out);
	hours = strtod(limit_s + strlen("\"limit_in_hours\": "), NULL);
	/* ~1 GiB at 7 MiB a second or so (the leak, the cache, the
	 * waves' rise): well under an hour, more than a minute */
	cr_assert(hours > 0.01 && hours < 1, "limit in %f hours\n%s", hours,
		  r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
}
