/*
 * Fuzz what `memsnap report DIR` reads of a watch's directory: the
 * series file (timeline/series.h), which memsnap wrote but anyone who
 * can write the directory may have changed, and the trends and
 * sparklines made of it (timeline/trend.h).
 *
 *   - series_parse: 0 or -EINVAL (or -ENOMEM); the ticks' times rise,
 *     every dump name is one memsnap writes, every measured value but
 *     unaccounted is >= 0, the strings are NUL-ended and hold no
 *     control character;
 *   - trend_fit over every column measured at each tick: a known shape,
 *     finite slopes (the floor's too), a swing >= 0, a noise at least
 *     the caller's, min <= first, last <= max;
 *   - trend_sparkline: 3 bytes a column, never past its buffer;
 *   - the words of report DIR (timeline/words.c): each part judged, the
 *     headline and the sentences beside it whole, with no control byte,
 *     and the chart, whatever the numbers.
 */
#include "timeline/series.h"
#include "timeline/timeline.h"
#include "timeline/trend.h"

#include "tests/fuzz/fuzz.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static void check_string(const char *s, size_t size)
{
	size_t i;

	FUZZ_CHECK(memchr(s, '\0', size) != NULL);
	for (i = 0; s[i]; i++)
		FUZZ_CHECK((unsigned char)s[i] >= 0x20 && s[i] != 0x7f);
}

/*
 * The words of report DIR over the series @s (its ticks at @t seconds):
 * each part judged, the headline and the sentences beside it, NUL-ended
 * within their buffers, with no control byte, whatever the numbers;
 * the chart drawn without a fault.
 */
static void words(struct series *s, double *t)
{
	struct timeline tl = { .s = *s, .t = t };
	char line[1024];
	double *v = malloc((s->n ? s->n : 1) * sizeof(*v));
	size_t i, c;
	FILE *f;

	FUZZ_CHECK(v != NULL);
	for (c = 0; c < SERIES_COLS; c++) {
		tl.have[c] = s->n > 0;
		for (i = 0; i < s->n; i++)
			tl.have[c] &= !!(s->v[i].known & (1u << c));
		if (!tl.have[c])
			continue;
		timeline_column(&tl, (enum series_col)c, v);
		trend_fit(t, v, s->n, TREND_NOISE_PART, &tl.parts[c]);
	}
	free(v);
	timeline_judge(&tl);
	FUZZ_CHECK(isfinite(tl.threshold) && tl.threshold >= 0);
	timeline_headline(&tl, line, sizeof(line));
	check_string(line, sizeof(line));
	if (tl.have[COL_RSS]) {
		timeline_rss_sentence(&tl, line, sizeof(line));
		check_string(line, sizeof(line));
	}
	timeline_threshold_sentence(&tl, line, sizeof(line));
	check_string(line, sizeof(line));
	if (timeline_sampler_sentence(&tl, line, sizeof(line)))
		check_string(line, sizeof(line));
	for (c = 0; c < SERIES_COLS; c++)
		FUZZ_CHECK(isfinite(timeline_part_pace(&tl, (int)c)) ||
			   !tl.have[c]);
	f = fopen("/dev/null", "w");
	FUZZ_CHECK(f != NULL);
	timeline_svg(&tl, true, f);
	fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct series s;
	char why[256], spark[3 * 24 + 1];
	double *t, *v;
	size_t i, c;
	int rc;

	rc = series_parse((const char *)data, size, &s, why, sizeof(why));
	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	if (rc) {
		FUZZ_CHECK(rc != -EINVAL || why[0]);
		return 0;
	}
	FUZZ_CHECK(s.n <= SERIES_MAX_TICKS);
	check_string(s.command, sizeof(s.command));
	check_string(s.allocator, sizeof(s.allocator));
	check_string(s.end, sizeof(s.end));
	check_string(s.last_note, sizeof(s.last_note));
	for (i = 0; i < s.n; i++) {
		FUZZ_CHECK(!i || s.v[i].t_ms > s.v[i - 1].t_ms);
		FUZZ_CHECK(!s.v[i].dump[0] || series_dump_name_ok(s.v[i].dump));
		for (c = 0; c < SERIES_COLS; c++)
			FUZZ_CHECK(!(s.v[i].known & (1u << c)) ||
				   c == COL_UNACCOUNTED || s.v[i].v[c] >= 0);
	}
	t = malloc((s.n ? s.n : 1) * sizeof(*t));
	v = malloc((s.n ? s.n : 1) * sizeof(*v));
	FUZZ_CHECK(t && v);
	for (i = 0; i < s.n; i++)
		t[i] = (double)(s.v[i].t_ms - s.v[0].t_ms) / 1000.0;
	for (c = 0; c < SERIES_COLS; c++) {
		struct trend tr;

		for (i = 0; i < s.n; i++)
			v[i] = (double)s.v[i].v[c];
		trend_fit(t, v, s.n, TREND_NOISE_PART, &tr);
		FUZZ_CHECK(tr.shape >= TREND_FEW && tr.shape <= TREND_IRREGULAR);
		FUZZ_CHECK(isfinite(tr.per_hour) && isfinite(tr.recent_per_hour));
		FUZZ_CHECK(isfinite(tr.floor_per_hour) &&
			   isfinite(tr.floor_recent_per_hour) &&
			   isfinite(tr.floor_rise) &&
			   isfinite(tr.floor_recent_rise));
		FUZZ_CHECK(tr.swing >= 0 && isfinite(tr.swing) &&
			   (!s.n || tr.noise >= TREND_NOISE_PART) &&
			   isfinite(tr.noise));
		FUZZ_CHECK(!s.n || (tr.min <= tr.first && tr.first <= tr.max &&
				    tr.min <= tr.last && tr.last <= tr.max));
		trend_sparkline(v, s.n, 24, spark, sizeof(spark));
		FUZZ_CHECK(strlen(spark) % 3 == 0 &&
			   strlen(spark) <= 3 * (s.n < 24 ? s.n : 24));
	}
	free(v);
	words(&s, t);
	free(t);
	series_free(&s);
	return 0;
}
