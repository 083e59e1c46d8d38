/*
 * timeline/words.c: the headline of series made by construction (a
 * leak under a wave, a plateau beside a small creep, a pool that warms
 * up beside a leak, a working set alone), read back from a series file
 * as `report DIR` reads one; and a watch that switched the sampler on
 * and never off is said, with the command that switches it off, unless
 * it switched it off or the process exited.
 */
#include "timeline/series.h"
#include "timeline/timeline.h"
#include "timeline/trend.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1024.0 * 1024.0)
#define TICKS 30

/* The amounts at @s seconds of a series' parts. */
struct amounts {
	double heap_in_use, anon_other;
};

/* The tick at @s seconds of a series whose parts are @f's. */
static void tick_of(void (*f)(double s, struct amounts *a), double s,
		    struct series_tick *t)
{
	const int64_t file = 4 << 20, stacks = 64 << 10;
	struct amounts a;
	size_t c;

	f(s, &a);
	memset(t, 0, sizeof(*t));
	t->t_ms = (uint64_t)llround(s * 1000);
	t->v[COL_RSS] = (int64_t)(a.heap_in_use + a.anon_other) + file +
			stacks;
	t->v[COL_HEAP_IN_USE] = t->v[COL_HEAP] = (int64_t)a.heap_in_use;
	t->v[COL_STACKS] = stacks;
	t->v[COL_ANON_OTHER] = (int64_t)a.anon_other;
	t->v[COL_FILE] = file;
	t->v[COL_THREADS] = 3;
	for (c = 0; c < SERIES_COLS; c++)
		t->known |= 1u << c;
}

/* A series of TICKS ticks of 0.2 s whose parts are @f's, as watch
 * writes one, with @extra lines after its header and @end after its
 * ticks, parsed and judged into @tl (timeline_free() it). */
static void judge(void (*f)(double s, struct amounts *a), const char *extra,
		  const char *end, struct timeline *tl)
{
	struct series hs = { .pid = 4242, .started_ms = 1764162000123ull,
			     .interval_ms = 200 };
	char *text = NULL, why[128];
	size_t len = 0, i, c;
	FILE *out = open_memstream(&text, &len);

	cr_assert_not_null(out);
	snprintf(hs.command, sizeof(hs.command), "server");
	snprintf(hs.allocator, sizeof(hs.allocator), "glibc");
	series_write_header(out, &hs);
	fputs(extra, out);
	for (i = 0; i < TICKS; i++) {
		struct series_tick t;
		char line[SERIES_LINE_MAX];

		tick_of(f, 0.2 * (double)i, &t);
		cr_assert(series_format_tick(&t, line, sizeof(line)));
		fputs(line, out);
	}
	fputs(end, out);
	fclose(out);
	memset(tl, 0, sizeof(*tl));
	cr_assert_eq(series_parse(text, len, &tl->s, why, sizeof(why)), 0,
		     "%s", why);
	cr_assert_eq(tl->s.n, TICKS, "%zu ticks: %s", tl->s.n, text);
	free(text);
	tl->t = calloc(TICKS, sizeof(*tl->t));
	cr_assert_not_null(tl->t);
	for (i = 0; i < TICKS; i++)
		tl->t[i] = 0.2 * (double)i;
	for (c = 0; c < SERIES_COLS; c++) {
		double v[TICKS];

		tl->have[c] = true;
		timeline_column(tl, (enum series_col)c, v);
		trend_fit(tl->t, v, TICKS, TREND_NOISE_PART, &tl->parts[c]);
	}
	timeline_judge(tl);
}

static void wave(double s, struct amounts *a)
{
	a->heap_in_use = 2 * MiB * s + 12 * MiB * fmod(s / 1.1, 1.0);
	a->anon_other = MiB;
}

static void creep(double s, struct amounts *a)
{
	a->heap_in_use = 8 * MiB * fmin(s, 2);
	a->anon_other = MiB + 96 * 1024 * s;
}

static void pool(double s, struct amounts *a)
{
	a->heap_in_use = 2 * MiB * s;
	a->anon_other = 32 * MiB * fmin(s, 2);
}

static void wset(double s, struct amounts *a)
{
	a->heap_in_use = fmod(s, 1.0) < 0.5 ? 12 * MiB : 0;
	a->anon_other = MiB;
}

static const char *headline(struct timeline *tl, char *buf, size_t size)
{
	timeline_headline(tl, buf, size);
	return buf;
}

Test(headline, of_known_series)
{
	struct timeline tl;
	char h[1024];

	judge(wave, "", "", &tl);
	headline(&tl, h, sizeof(h));
	cr_assert(!strncmp(h, "heap in use still growing at +", 30), "%s", h);
	cr_assert(strstr(h, "(leak suspect)") && strstr(h, "on top comes and "
							  "goes"), "%s", h);
	cr_assert_eq(tl.state[COL_HEAP_IN_USE], STATE_GROWING);
	/* the pace is the leak's, 7 GiB an hour, within what a tick can
	 * miss a trough by */
	cr_assert(fabs(timeline_part_pace(&tl, COL_HEAP_IN_USE) / 3600 / MiB -
		       2) < 0.6, "%f MiB/s",
		  timeline_part_pace(&tl, COL_HEAP_IN_USE) / 3600 / MiB);
	timeline_free(&tl);

	judge(creep, "", "", &tl);
	headline(&tl, h, sizeof(h));
	cr_assert(!strncmp(h, "nothing still growing: heap in use levelled off "
			   "at 16.0 MiB", 58), "%s", h);
	cr_assert(strstr(h, "; other anonymous memory creeping at +") &&
			  strstr(h, "under 5% of RSS)"), "%s", h);
	timeline_free(&tl);

	judge(pool, "", "", &tl);
	headline(&tl, h, sizeof(h));
	cr_assert(!strncmp(h, "heap in use still growing at +", 30), "%s", h);
	cr_assert(strstr(h, "; other anonymous memory levelled off at 64.0 MiB"),
		  "%s", h);
	cr_assert_eq(tl.state[COL_ANON_OTHER], STATE_LEVELLED);
	timeline_free(&tl);

	judge(wset, "", "", &tl);
	headline(&tl, h, sizeof(h));
	cr_assert_str_eq(h, "nothing still growing: heap in use: 12.0 MiB comes "
			    "and goes (a working set)");
	timeline_free(&tl);
}

/* memsnap's sampler grows with the samples it keeps, each with a copy
 * of its stack: said as the sampler's, never as the program's leak. */
Test(headline, the_samplers_memory_is_its_own)
{
	struct timeline tl;
	char h[1024];

	judge(wave, "# sampler\ton\n", "", &tl);
	tl.parts[COL_SAMPLER] = tl.parts[COL_HEAP_IN_USE];
	timeline_judge(&tl);
	headline(&tl, h, sizeof(h));
	cr_assert(strstr(h, "memsnap's sampler still growing at +") &&
			  strstr(h, "not the program's: prof off frees it)"),
		  "%s", h);
	/* after the program's own, which rose as much */
	cr_assert(!strncmp(h, "heap in use still growing", 25), "%s", h);
	cr_assert_eq(tl.state[COL_SAMPLER], STATE_GROWING);
	timeline_free(&tl);
}

Test(headline, a_sampler_left_on_is_said)
{
	struct timeline tl;
	char line[512];

	/* killed: no end, no off */
	judge(wset, "# sampler\ton\n", "", &tl);
	cr_assert(timeline_sampler_sentence(&tl, line, sizeof(line)));
	cr_assert(strstr(line, "did not end (killed?)") &&
			  strstr(line, "may still be on in pid 4242 (server)") &&
			  strstr(line, "`memsnap --pid 4242 prof off`"), "%s",
		  line);
	timeline_free(&tl);
	/* ended, the switch off failed */
	judge(wset, "# sampler\ton\n", "# end\t6000\tcount reached\n", &tl);
	cr_assert(timeline_sampler_sentence(&tl, line, sizeof(line)));
	cr_assert(strstr(line, "did not switch it off:"), "%s", line);
	timeline_free(&tl);
	/* switched off: nothing to say */
	judge(wset, "# sampler\ton\n",
	      "# end\t6000\tstopped by SIGTERM\n# sampler\toff\n", &tl);
	cr_assert_not(timeline_sampler_sentence(&tl, line, sizeof(line)));
	timeline_free(&tl);
	/* the process is gone, and its sampler with it */
	judge(wset, "# sampler\ton\n", "# end\t6000\ttarget exited\n", &tl);
	cr_assert_not(timeline_sampler_sentence(&tl, line, sizeof(line)));
	timeline_free(&tl);
	/* on before the watch: not the watch's to switch off */
	judge(wset, "# sampler\tfound\n", "", &tl);
	cr_assert_not(timeline_sampler_sentence(&tl, line, sizeof(line)));
	timeline_free(&tl);
}

static void flat_110(double s, struct amounts *a)
{
	(void)s;
	a->heap_in_use = 100 * MiB;
	a->anon_other = 2 * MiB;
}

/* The chart's axis ends at a round step above the data (106 MiB: 5
 * steps of 25 MiB), not at the next 1, 2 or 5 (200 MiB). */
Test(chart, the_axis_ends_a_step_above_the_data)
{
	struct timeline tl;
	char *svg = NULL;
	size_t len = 0;
	FILE *f;

	judge(flat_110, "", "", &tl);
	f = open_memstream(&svg, &len);
	cr_assert_not_null(f);
	timeline_svg(&tl, true, f);
	fclose(f);
	cr_assert(strstr(svg, ">125.0 MiB</text>") &&
			  strstr(svg, ">100.0 MiB</text>") &&
			  strstr(svg, ">25.0 MiB</text>"), "%s", svg);
	cr_assert_null(strstr(svg, "150.0 MiB"), "%s", svg);
	cr_assert_null(strstr(svg, "200.0 MiB"), "%s", svg);
	free(svg);
	timeline_free(&tl);
}
