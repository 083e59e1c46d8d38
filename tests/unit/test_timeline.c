/*
 * timeline/: the shape of a series is the one its construction says
 * (a line, a line then a level, teeth, a fall, noise; a leak under a
 * wave, a wave alone, a pool that warms up), the slope is the line's
 * and a spike or a wave does not move the floor's, and a watch's
 * series file is read back whole when it is
 * well formed and without harm when it is not (a series is read back as
 * untrusted: bad numbers, times that go back, a dump name with a
 * slash, a line cut short by a kill); and the call sites of report DIR
 * are past the allocator's wrappers.
 */
#include "profile/wrappers.h"
#include "timeline/series.h"
#include "timeline/timeline.h"
#include "timeline/timeline_internal.h"
#include "timeline/trend.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1024.0 * 1024.0)
#define N 40

static double t[N], v[N];

/* t = 0, 30, 60, ... seconds; v from @f. */
static void make(double (*f)(double s))
{
	size_t i;

	for (i = 0; i < N; i++) {
		t[i] = 30.0 * (double)i;
		v[i] = f(t[i]);
	}
}

static double line(double s)
{
	return 100 * MiB + s * 10000;	/* 36 MB an hour */
}

static double line_then_level(double s)
{
	return 100 * MiB + (s < 300 ? s : 300) * 100000;
}

static double teeth(double s)
{
	return 100 * MiB + 50 * MiB * fmod(s, 270) / 270;
}

static double fall(double s)
{
	return 200 * MiB - s * 50000;
}

static double level(double s)
{
	/* a few pages of jitter on 100 MiB */
	return 100 * MiB + ((long)s % 7) * 4096;
}

static enum trend_shape shape_of(double (*f)(double s))
{
	struct trend tr;

	make(f);
	trend_fit(t, v, N, TREND_NOISE_PART, &tr);
	return tr.shape;
}

Test(trend, shapes_of_known_series)
{
	cr_assert_eq(shape_of(line), TREND_GROWING);
	cr_assert_eq(shape_of(line_then_level), TREND_PLATEAU);
	cr_assert_eq(shape_of(teeth), TREND_SAWTOOTH);
	cr_assert_eq(shape_of(fall), TREND_SHRINKING);
	cr_assert_eq(shape_of(level), TREND_FLAT);
}

/* 2 MiB a second of leak under a working set of 12 MiB that comes back
 * every second, every 0.2 s for 6 s (the ticks a little late, as a
 * watch's are): a rising floor under a wave is growth. */
static void leak_under_a_wave(size_t n, double *tt, double *vv, double leak)
{
	size_t i;

	for (i = 0; i < n; i++) {
		tt[i] = 0.2 * (double)i + 0.003 * (double)(i % 3);
		vv[i] = 20 * MiB + leak * tt[i] + 12 * MiB * fmod(tt[i], 1.0);
	}
}

Test(trend, a_leak_under_a_wave_is_growth)
{
	double tt[30], vv[30];
	struct trend tr;

	leak_under_a_wave(30, tt, vv, 2 * MiB);
	trend_fit(tt, vv, 30, TREND_NOISE_PART, &tr);
	cr_assert_eq(tr.shape, TREND_GROWING, "%s", trend_shape_name(tr.shape));
	/* the floor's pace is the leak's, within what a tick can miss a
	 * trough by */
	cr_assert(fabs(tr.floor_per_hour - 7200 * MiB) < 1200 * MiB,
		  "floor %f MiB/h", tr.floor_per_hour / MiB);
	cr_assert(fabs(tr.floor_recent_per_hour - 7200 * MiB) < 1800 * MiB,
		  "recent %f MiB/h", tr.floor_recent_per_hour / MiB);
	cr_assert(tr.swing > 6 * MiB && tr.swing < 13 * MiB, "swing %f",
		  tr.swing / MiB);

	/* the wave alone: it comes and goes, it does not grow */
	leak_under_a_wave(30, tt, vv, 0);
	trend_fit(tt, vv, 30, TREND_NOISE_PART, &tr);
	cr_assert_eq(tr.shape, TREND_SAWTOOTH, "%s", trend_shape_name(tr.shape));
	cr_assert(fabs(tr.floor_rise) <= tr.noise, "floor rose %f MiB",
		  tr.floor_rise / MiB);
}

/* A pool of 64 MiB touched in the first 2 s of a 6 s watch, and a
 * creep of 0.5 MiB over it. */
static double pool(double s)
{
	return 64 * MiB * fmin(1, s / 2);
}

Test(trend, a_pool_that_warms_up_levels_off)
{
	double tt[30], vv[30];
	struct trend tr;
	size_t i;

	for (i = 0; i < 30; i++) {
		tt[i] = 0.2 * (double)i;
		vv[i] = pool(tt[i]);
	}
	trend_fit(tt, vv, 30, TREND_NOISE_PART, &tr);
	cr_assert_eq(tr.shape, TREND_PLATEAU, "%s", trend_shape_name(tr.shape));
	cr_assert(fabs(tr.floor_rise - 64 * MiB) < MiB, "rose %f",
		  tr.floor_rise / MiB);
	cr_assert(fabs(tr.floor_recent_per_hour) < 1, "recent %f",
		  tr.floor_recent_per_hour);
	for (i = 0; i < 30; i++)
		vv[i] = MiB + 0.5 * MiB * tt[i] / 6;
	trend_fit(tt, vv, 30, TREND_NOISE_PART, &tr);
	cr_assert_eq(tr.shape, TREND_GROWING, "%s", trend_shape_name(tr.shape));
}

Test(trend, a_spike_does_not_move_the_floor)
{
	struct trend tr;

	make(line);
	v[N / 2] += 500 * MiB;
	v[N / 2 + 1] -= 50 * MiB;
	trend_fit(t, v, N, TREND_NOISE_PART, &tr);
	cr_assert_eq(tr.shape, TREND_GROWING, "%s", trend_shape_name(tr.shape));
	cr_assert(fabs(tr.floor_recent_per_hour - 36e6) < 1, "recent %f",
		  tr.floor_recent_per_hour);
	cr_assert(fabs(trend_robust_slope(t, v, N) * 3600 - 36e6) < 1);
}

Test(trend, slope_is_the_lines)
{
	struct trend tr;

	make(line);
	trend_fit(t, v, N, TREND_NOISE_PART, &tr);
	cr_assert(fabs(tr.per_hour - 36e6) < 1, "per hour %f", tr.per_hour);
	cr_assert(fabs(tr.recent_per_hour - 36e6) < 1, "recent %f",
		  tr.recent_per_hour);
	cr_assert(fabs(tr.floor_per_hour - 36e6) < 1, "floor %f",
		  tr.floor_per_hour);
	cr_assert(fabs(tr.floor_recent_per_hour - 36e6) < 1, "floor recent %f",
		  tr.floor_recent_per_hour);
	cr_assert_eq(tr.first, v[0]);
	cr_assert_eq(tr.last, v[N - 1]);
}

/* 100 KiB over the watch: noise for a part of RSS, a small leak for a
 * call site */
static double small_rise(double s)
{
	return 28 * 1024 + s * 100 * 1024 / (30.0 * (N - 1));
}

Test(trend, noise_floor_is_the_callers)
{
	struct trend tr;

	make(small_rise);
	trend_fit(t, v, N, TREND_NOISE_PART, &tr);
	cr_assert_eq(tr.shape, TREND_FLAT);
	trend_fit(t, v, N, TREND_NOISE_SITE, &tr);
	cr_assert_eq(tr.shape, TREND_GROWING);
}

Test(trend, few_points_have_no_shape)
{
	struct trend tr;

	make(line);
	trend_fit(t, v, 2, TREND_NOISE_PART, &tr);
	cr_assert_eq(tr.shape, TREND_FEW);
	cr_assert(tr.per_hour > 0);
	trend_fit(t, v, 1, TREND_NOISE_PART, &tr);
	cr_assert_eq(tr.shape, TREND_FEW);
	cr_assert_eq(tr.per_hour, 0);
	trend_fit(t, v, 0, TREND_NOISE_PART, &tr);
	cr_assert_eq(tr.shape, TREND_FEW);
}

Test(trend, all_points_at_one_time)
{
	double same[3] = { 5, 5, 5 }, val[3] = { 1, 2 * MiB, 3 * MiB };
	struct trend tr;

	trend_fit(same, val, 3, TREND_NOISE_PART, &tr);
	cr_assert_eq(tr.per_hour, 0);
	cr_assert(isfinite(tr.recent_per_hour));
}

Test(trend, sparkline_lowest_to_highest)
{
	char buf[3 * 8 + 1];
	double up[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };

	trend_sparkline(up, 8, 8, buf, sizeof(buf));
	cr_assert_str_eq(buf, "\u2581\u2582\u2583\u2584\u2585\u2586\u2587"
			      "\u2588");
	/* 16 values in 4 columns: averaged */
	{
		double many[16];
		char b4[13];
		size_t i;

		for (i = 0; i < 16; i++)
			many[i] = i < 8 ? 0 : 100;
		trend_sparkline(many, 16, 4, b4, sizeof(b4));
		cr_assert_str_eq(b4, "\u2581\u2581\u2588\u2588");
	}
	/* no room: nothing half written */
	trend_sparkline(up, 8, 8, buf, 5);
	cr_assert_eq(strlen(buf), 3);
}

/* ---- the series file ----------------------------------------------------- */

static const char head[] =
	"# memsnap watch series 1\n"
	"# pid\t4242\n"
	"# command\tredis-server\n"
	"# started\t1764162000123\n"
	"# interval_ms\t30000\n"
	"# limit\t1073741824\n"
	"# allocator\tjemalloc\n"
	"t_ms\trss\theap_in_use\theap_free\tmetadata\theap\tthread_stacks\t"
	"anon_other\tfile\tshmem\tunaccounted\tswap\tthreads\tdump\n";

static int parse(const char *text, struct series *s)
{
	char why[256];

	return series_parse(text, strlen(text), s, why, sizeof(why));
}

Test(series, round_trip)
{
	struct series_tick tk = { .t_ms = 30002 }, tk2 = { .t_ms = 60004 };
	char buf[8192], line[SERIES_LINE_MAX];
	struct series s = { .pid = 4242, .started_ms = 1764162000123ull,
			    .interval_ms = 30000, .limit = 1ull << 30,
			    .sampler_on = true };
	size_t len = 0, n, c;
	FILE *f;

	snprintf(s.command, sizeof(s.command), "redis\tserver\n");
	snprintf(s.allocator, sizeof(s.allocator), "jemalloc");
	f = fmemopen(buf, sizeof(buf), "w");
	cr_assert_not_null(f);
	series_write_header(f, &s);
	fflush(f);
	len = strlen(buf);
	fclose(f);
	for (c = 0; c < SERIES_COLS; c++) {
		tk.v[c] = (int64_t)(c + 1) * 1000;
		tk.known |= 1u << c;
	}
	tk.v[COL_UNACCOUNTED] = -4096;
	tk2 = tk;
	tk2.t_ms = 60004;
	tk2.known &= ~(1u << COL_HEAP_FREE);
	snprintf(tk2.dump, sizeof(tk2.dump), "dump-0001.heap");
	n = series_format_tick(&tk, line, sizeof(line));
	cr_assert_gt(n, 0);
	memcpy(buf + len, line, n);
	len += n;
	n = series_format_tick(&tk2, line, sizeof(line));
	memcpy(buf + len, line, n);
	len += n;
	buf[len] = '\0';
	strcat(buf, "# end\t60010\tcount reached\n");

	memset(&s, 0, sizeof(s));
	cr_assert_eq(parse(buf, &s), 0);
	cr_assert_eq(s.pid, 4242);
	/* a tab or newline of a command name never splits a line */
	cr_assert_str_eq(s.command, "redis?server?");
	cr_assert_str_eq(s.allocator, "jemalloc");
	cr_assert_eq(s.limit, 1ull << 30);
	cr_assert(s.sampler_on && !s.sampler_off && !s.sampler_found);
	cr_assert_eq(s.n, 2);
	cr_assert_eq(s.v[0].v[COL_UNACCOUNTED], -4096);
	cr_assert_eq(s.v[1].v[COL_THREADS], (COL_THREADS + 1) * 1000);
	cr_assert_eq(s.v[1].v[COL_SAMPLER], (COL_SAMPLER + 1) * 1000);
	cr_assert(!(s.v[1].known & (1u << COL_HEAP_FREE)));
	cr_assert_str_eq(s.v[1].dump, "dump-0001.heap");
	cr_assert_eq(s.dumps, 1);
	cr_assert_str_eq(s.end, "count reached");
	cr_assert_eq(s.end_ms, 60010);
	cr_assert_eq(s.bad, 0);
	series_free(&s);
}

/* A series written before the runtime and sampler columns were added
 * reads by the names of its columns, and one with a column this
 * memsnap does not know skips it. */
Test(series, columns_by_name)
{
	static const char old[] =
		"# memsnap watch series 1\n# pid\t1\n"
		"t_ms\trss\theap_in_use\theap_free\tmetadata\theap\t"
		"thread_stacks\tanon_other\tfile\tshmem\tunaccounted\tswap\t"
		"threads\tdump\n"
		"0\t100\t1\t2\t3\t6\t4\t5\t6\t7\t-8\t0\t3\t-\n";
	static const char later[] =
		"# memsnap watch series 1\n# pid\t1\n"
		"t_ms\trss\tsomething_new\tanon_other\tdump\n"
		"0\t100\t42\t5\tdump-0001.heap\n"
		"10\t100\t-\t5\t-\t-\n";
	struct series s;

	cr_assert_eq(parse(old, &s), 0);
	cr_assert_eq(s.n, 1);
	cr_assert_eq(s.v[0].v[COL_ANON_OTHER], 5);
	cr_assert_eq(s.v[0].v[COL_THREADS], 3);
	cr_assert_eq(s.v[0].v[COL_UNACCOUNTED], -8);
	cr_assert(!(s.v[0].known & (1u << COL_RUNTIME)));
	cr_assert(!(s.v[0].known & (1u << COL_SAMPLER)));
	series_free(&s);
	cr_assert_eq(parse(later, &s), 0);
	cr_assert_eq(s.n, 1, "the line of the wrong width is skipped");
	cr_assert_eq(s.bad, 1);
	cr_assert_eq(s.v[0].known, (1u << COL_RSS) | (1u << COL_ANON_OTHER));
	cr_assert_str_eq(s.v[0].dump, "dump-0001.heap");
	series_free(&s);
}

static const char *tick(const char *t_ms, const char *rss, const char *dump)
{
	static char b[512];

	snprintf(b, sizeof(b), "%s\t%s\t1\t2\t3\t6\t4\t5\t6\t7\t-8\t0\t3\t%s\n",
		 t_ms, rss, dump);
	return b;
}

/*
 * The sampler in the header: on (the watch switched it on), off at the
 * end, or found on; a series that says on and not off is a watch that
 * may have left it on, and the words say so with the command, unless
 * the process is gone.
 */
Test(series, the_sampler_left_on)
{
	static const struct {
		const char *lines, *end;
		bool on, off, found, said;
	} cases[] = {
		{ "# sampler\ton\n", "", true, false, false, true },
		{ "# sampler\ton\n", "# end\t90\tcount reached\n", true,
		  false, false, true },
		{ "# sampler\ton\n", "# end\t90\tcount reached\n"
				      "# sampler\toff\n", true, true, false,
		  false },
		{ "# sampler\ton\n", "# end\t90\ttarget exited\n", true,
		  false, false, false },
		{ "# sampler\tfound\n", "", false, false, true, false },
		{ "# sampler\tmaybe\n", "", false, false, false, false },
		{ "", "", false, false, false, false },
	};
	static char text[4096];
	struct timeline tl;
	char line[512];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		memset(&tl, 0, sizeof(tl));
		snprintf(text, sizeof(text), "%s%s%s%s", head, cases[i].lines,
			 tick("0", "100", "-"), cases[i].end);
		cr_assert_eq(parse(text, &tl.s), 0);
		cr_assert_eq(tl.s.sampler_on, cases[i].on, "case %zu", i);
		cr_assert_eq(tl.s.sampler_off, cases[i].off, "case %zu", i);
		cr_assert_eq(tl.s.sampler_found, cases[i].found, "case %zu", i);
		cr_assert_eq(timeline_sampler_sentence(&tl, line, sizeof(line)),
			     cases[i].said, "case %zu", i);
		if (cases[i].said)
			cr_assert(strstr(line, "may still be on in pid 4242 "
					 "(redis-server)") &&
					  strstr(line, "`memsnap --pid 4242 "
						 "prof off`"), "%s", line);
		series_free(&tl.s);
	}
}

Test(series, hostile_lines_are_skipped)
{
	static char text[1 << 16];
	struct series s;
	char longline[SERIES_LINE_MAX + 50];

	memset(longline, '7', sizeof(longline) - 2);
	longline[sizeof(longline) - 2] = '\n';
	longline[sizeof(longline) - 1] = '\0';
	snprintf(text, sizeof(text), "%s", head);
	strcat(text, tick("0", "100", "-"));
	strcat(text, tick("10", "-5", "-"));		/* negative RSS */
	strcat(text, tick("20", "1e9", "-"));		/* not decimal */
	strcat(text, tick("30", "99999999999999999999", "-")); /* overflow */
	strcat(text, tick("0", "100", "-"));		/* time went back */
	strcat(text, tick("40", "100", "../etc/passwd"));
	strcat(text, tick("50", "100", "dump-1/x.heap"));
	strcat(text, "60\t1\t2\n");			/* too few fields */
	strcat(text, longline);				/* too long */
	strcat(text, tick("70", "200", "dump-0001.heap"));
	strcat(text, "# limit\tlots\n");		/* ignored */
	strcat(text, "# note\t70\t\x1b]0;owned\x07 red\n"); /* escapes */
	strcat(text, "80\t300");			/* cut by a kill */
	cr_assert_eq(parse(text, &s), 0);
	cr_assert_eq(s.n, 2, "%zu ticks", s.n);
	cr_assert_eq(s.v[1].t_ms, 70);
	cr_assert_str_eq(s.v[1].dump, "dump-0001.heap");
	cr_assert_eq(s.bad, 8, "%zu bad", s.bad);
	cr_assert_eq(s.limit, 1073741824);
	cr_assert_str_eq(s.end, "");
	/* a terminal is never written a control character of the file */
	cr_assert_str_eq(s.last_note, "?]0;owned? red");
	cr_assert_eq(s.notes, 1);
	series_free(&s);
}

Test(series, not_a_series)
{
	struct series s;
	char why[256];

	cr_assert_eq(series_parse("hello\n", 6, &s, why, sizeof(why)), -EINVAL);
	cr_assert(strstr(why, "first line"), "%s", why);
	cr_assert_eq(series_parse("", 0, &s, why, sizeof(why)), -EINVAL);
	/* NUL bytes in the first line */
	cr_assert_eq(series_parse("# memsnap\0watch\n", 16, &s, why,
				  sizeof(why)), -EINVAL);
}

Test(series, dump_names)
{
	cr_assert(series_dump_name_ok("dump-0001.heap"));
	cr_assert(series_dump_name_ok("dump-12345.heap"));
	cr_assert_not(series_dump_name_ok("dump-.heap/"));
	cr_assert_not(series_dump_name_ok("../dump-1.heap"));
	cr_assert_not(series_dump_name_ok("dump-1.heap\n"));
	cr_assert_not(series_dump_name_ok("x.heap"));
	cr_assert_not(series_dump_name_ok("dump-1/.heap"));
}

/* ---- the sites of report DIR ---------------------------------------------- */

/*
 * A stack's bytes go to its site: the first frame from the leaf past a
 * run of allocator wrappers (the root's when every frame is one); a
 * site's growth is what its floor rose by over the dumps, so that a
 * working set caught low first and high last is no growth, and the
 * large ones are listed by their peak whatever their shape.
 */
Test(sites, past_the_wrappers_and_the_large_ones)
{
	char dumps[6][512];
	struct timeline tl = { 0 };
	struct wrappers *w;
	char why[256];
	size_t k, i, n, *big;

	cr_assert_eq(wrappers_new(NULL, 0, &tl.wrappers, why, sizeof(why)), 0);
	tl.t = calloc(6, sizeof(*tl.t));
	tl.s.v = calloc(6, sizeof(*tl.s.v));
	cr_assert(tl.t && tl.s.v);
	tl.s.n = tl.ndumps = 6;
	for (k = 0; k < 6; k++) {
		/* a leak of 1 MB a dump, its dict's entries, a working set
		 * of 9 MB every other dump, a stack of wrappers alone */
		snprintf(dumps[k], sizeof(dumps[k]),
			 "main;createStringObject;_sdsnewlen;zmalloc_usable;"
			 "ztrymalloc_usable_internal %zu\n"
			 "main;dictAddRaw;zmalloc %zu\n"
			 "main;zmalloc 7\nzcalloc;zmalloc 3\n"
			 "main;wave_site %d\n", (k + 1) * 1000000,
			 (k + 1) * 100000, k % 2 ? 9000000 : 1000);
		tl.t[k] = 60.0 * (double)k;
		tl.dump_tick[k] = k;
		tl.dump_ok[k] = true;
		cr_assert_eq(timeline_add_folded(&tl, k, dumps[k]), 0);
	}
	cr_assert_eq(timeline_fit_sites(&tl), 0);
	/* most growth first: the string, then the dict's entries */
	cr_assert_str_eq(tl.sites[0].name, "_sdsnewlen");
	cr_assert(timeline_site_grew(&tl.sites[0]));
	cr_assert_str_eq(tl.sites[1].name, "dictAddRaw");
	cr_assert(timeline_site_grew(&tl.sites[1]));
	for (i = 0; i < tl.nsites; i++) {
		cr_assert(strncmp(tl.sites[i].name, "zmalloc", 7) ||
				  !strcmp(tl.sites[i].name, "zmalloc"),
			  "%s", tl.sites[i].name);
		if (!strcmp(tl.sites[i].name, "main"))
			cr_assert_eq(tl.sites[i].bytes[0], 7);
		if (!strcmp(tl.sites[i].name, "zcalloc"))
			cr_assert_eq(tl.sites[i].bytes[0], 3);
		if (!strcmp(tl.sites[i].name, "wave_site"))
			cr_assert_not(timeline_site_grew(&tl.sites[i]),
				      "a working set grew: %f",
				      tl.sites[i].growth);
	}
	/* beside the two that grew: the working set, by its peak */
	n = timeline_largest(&tl, 10, 2, &big);
	cr_assert_eq(n, 1, "%zu large sites", n);
	cr_assert_str_eq(tl.sites[big[0]].name, "wave_site");
	free(big);
	w = tl.wrappers;	/* the caller's, as report's */
	timeline_free(&tl);
	wrappers_free(w);
}
