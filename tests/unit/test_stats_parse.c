/*
 * What allocators print, parsed: malloc_info() XML, mi_stats_print_out()
 * text, a gperftools profile with memsnap's own bucket, and the JSON
 * check for jemalloc's report.  All of it comes from the target, so
 * besides real samples (tests/data/stats/) every parser gets truncated,
 * garbled and oversized input, and must neither crash nor invent rows.
 */
#include "allocators/allocator_internal.h"
#include "common/json.h"
#include "common/util.h"

#include "../lib/testdata.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp_data(const char *name, size_t *len)
{
	return testdata_slurp("stats", name, len);
}

static const struct alloc_stat_table *table(const struct alloc_stats *st,
					    const char *name)
{
	size_t i;

	for (i = 0; i < st->nt; i++)
		if (!strcmp(st->t[i].name, name))
			return &st->t[i];
	cr_assert_fail("no table %s", name);
	return NULL;
}

static const struct alloc_stat_row *row(const struct alloc_stat_table *t,
					const char *name)
{
	size_t i;

	for (i = 0; i < t->nrows; i++)
		if (!strcmp(t->rows[i].name, name))
			return &t->rows[i];
	cr_assert_fail("no row %s in %s", name, t->name);
	return NULL;
}

/* The value of column @col in @r, failing if the row lacks it. */
static uint64_t val(const struct alloc_stat_table *t,
		    const struct alloc_stat_row *r, const char *col)
{
	size_t i;

	for (i = 0; i < t->ncols; i++)
		if (!strcmp(t->cols[i], col)) {
			cr_assert(r->have[i], "%s has no %s", r->name, col);
			return r->v[i];
		}
	cr_assert_fail("no column %s", col);
	return 0;
}

Test(stats_parse, malloc_info_of_a_live_memcached)
{
	struct alloc_stats st = { 0 };
	const struct alloc_stat_table *t;
	const struct alloc_stat_row *a0, *tot;
	uint64_t sum = 0;
	size_t len, i;
	char *xml = slurp_data("malloc_info.xml", &len);

	cr_assert_eq(glibc_parse_malloc_info(xml, len, &st), 0);
	t = table(&st, "arenas");
	cr_assert_eq(t->nrows, 8, "7 arenas and the total");
	a0 = row(t, "arena 0");
	tot = row(t, "total");
	/* in use = system - (fast + rest), per arena */
	cr_assert_eq(val(t, a0, "in_use") + val(t, a0, "free"),
		     val(t, a0, "system"));
	for (i = 0; i + 1 < t->nrows; i++)
		sum += val(t, &t->rows[i], "system");
	cr_assert_eq(sum, val(t, tot, "system"), "arenas add up to the total");
	cr_assert_eq(val(t, tot, "mmap"), 1376256);
	cr_assert_eq(val(t, tot, "mmap_chunks"), 7);
	alloc_stats_free(&st);
	free(xml);
}

Test(stats_parse, malloc_info_hostile)
{
	static const char *const bad[] = {
		"",
		"<",
		"<malloc",
		"<heap nr=\"0\">",
		"<malloc version=\"1\"><heap nr=\"x\"></heap></malloc>",
		"<malloc><heap nr=\"99999999999999999999999\"></heap></malloc>",
	};
	static const char *const odd[] = {
		/* no heaps, sizes missing, unknown types, negative numbers,
		 * attributes without quotes, truncated tags: no crash, no
		 * made-up values */
		"<malloc version=\"1\"></malloc>",
		"<malloc><total type=\"fast\" size=\"-1\"/><system type=\"current\"",
		"<malloc><total type=\"rest\" count=1 size=2/></malloc>",
		"<malloc><total type=\"rest\" size=\"18446744073709551615\"/>"
		"<system type=\"current\" size=\"1\"/></malloc>",
		"<malloc><heap nr=\"1\"><total type=\"weird\" size=\"5\"/></heap>",
		"<malloc><heap nr=\"1\"></heap><heap nr=\"1\"></heap></malloc>",
	};
	struct alloc_stats st = { 0 };
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		cr_assert_neq(glibc_parse_malloc_info(bad[i], strlen(bad[i]),
						      &st),
			      0, "accepted: %s", bad[i]);
		alloc_stats_free(&st);
	}
	for (i = 0; i < sizeof(odd) / sizeof(*odd); i++) {
		glibc_parse_malloc_info(odd[i], strlen(odd[i]), &st);
		alloc_stats_free(&st);
	}
	/* A free larger than the system: no in_use, never a wrapped one. */
	cr_assert_eq(glibc_parse_malloc_info(odd[3], strlen(odd[3]), &st), 0);
	cr_assert_eq(table(&st, "arenas")->nrows, 1);
	cr_assert_not(table(&st, "arenas")->rows[0].have[2]);
	alloc_stats_free(&st);
}

/* The value of column @col of the only row of "arenas", if it has one. */
static bool arena_val(const struct alloc_stats *st, const char *col,
		      uint64_t *v)
{
	const struct alloc_stat_table *t = table(st, "arenas");
	size_t i;

	cr_assert_eq(t->nrows, 1);
	for (i = 0; i < t->ncols; i++)
		if (!strcmp(t->cols[i], col)) {
			*v = t->rows[0].v[i];
			return t->rows[0].have[i];
		}
	cr_assert_fail("no column %s", col);
	return false;
}

/* Every number in the table stands in the text: a count or a fast
 * total that is not there is not 0, a free that wraps past 2^64 is
 * none, and neither "\n-5" (strtoull skips the newline and negates)
 * nor "0\0" is a number. */
Test(stats_parse, malloc_info_numbers_stand_in_the_text)
{
	static const char no_count[] =
		"<malloc version=\"1\"><total type=\"mmap\" size=\"4096\"/>"
		"<total type=\"rest\" size=\"64\"/></malloc>";
	static const char wraps[] =
		"<malloc version=\"1\"><heap nr=\"1\">"
		"<total type=\"fast\" count=\"1\" size=\"18446744073709551615\"/>"
		"<total type=\"rest\" count=\"1\" size=\"2\"/>"
		"<system type=\"current\" size=\"5\"/></heap></malloc>";
	static const char minus[] =
		"<malloc version=\"1\">"
		"<total type=\"mmap\" count=\"1\" size=\"\n-5\"/></malloc>";
	static const char nul[] =
		"<malloc version=\"1\">"
		"<total type=\"mmap\" count=\"1\" size=\"0\0\"/></malloc>";
	struct alloc_stats st = { 0 };
	uint64_t v;

	cr_assert_eq(glibc_parse_malloc_info(no_count, strlen(no_count), &st),
		     0);
	cr_assert(arena_val(&st, "mmap", &v) && v == 4096);
	cr_assert_not(arena_val(&st, "mmap_chunks", &v), "chunks %llu",
		      (unsigned long long)v);
	cr_assert_not(arena_val(&st, "free_chunks", &v), "chunks %llu",
		      (unsigned long long)v);
	cr_assert_not(arena_val(&st, "fastbin", &v), "fastbin %llu",
		      (unsigned long long)v);
	cr_assert_not(arena_val(&st, "free", &v), "free %llu without fast",
		      (unsigned long long)v);
	alloc_stats_free(&st);

	cr_assert_eq(glibc_parse_malloc_info(wraps, strlen(wraps), &st), 0);
	cr_assert_not(arena_val(&st, "free", &v), "free %llu",
		      (unsigned long long)v);
	cr_assert_not(arena_val(&st, "in_use", &v), "in use %llu",
		      (unsigned long long)v);
	cr_assert(arena_val(&st, "system", &v) && v == 5);
	alloc_stats_free(&st);

	cr_assert_eq(glibc_parse_malloc_info(minus, strlen(minus), &st), 0);
	cr_assert_not(arena_val(&st, "mmap", &v), "mmap %llu",
		      (unsigned long long)v);
	alloc_stats_free(&st);

	cr_assert_eq(glibc_parse_malloc_info(nul, sizeof(nul) - 1, &st), 0);
	cr_assert_not(arena_val(&st, "mmap", &v), "mmap %llu",
		      (unsigned long long)v);
	alloc_stats_free(&st);
}

/* A '<' whose '>' is not within XML_TAG_MAX bytes opens no tag: the
 * parser looks no further, else a text of '<' costs its square. */
Test(stats_parse, malloc_info_tag_is_bounded)
{
	char xml[1024];
	struct alloc_stats st = { 0 };
	uint64_t v;
	int n;

	n = snprintf(xml, sizeof(xml),
		     "<malloc version=\"1\"><total type=\"mmap\" count=\"1\" "
		     "size=\"5\"%*s/><system type=\"current\" size=\"7\"/>",
		     XML_TAG_MAX, "");
	cr_assert_lt(n, (int)sizeof(xml));
	cr_assert_eq(glibc_parse_malloc_info(xml, (size_t)n, &st), 0);
	cr_assert_not(arena_val(&st, "mmap", &v), "mmap %llu from a tag of %d bytes",
		      (unsigned long long)v, XML_TAG_MAX + 40);
	cr_assert(arena_val(&st, "system", &v) && v == 7);
	cr_assert_eq(xml_attr_u64(xml + 20, xml + n, "size", &v), -EINVAL);
	alloc_stats_free(&st);
}

Test(stats_parse, parse_u64_takes_digits_only)
{
	static const char *const bad[] = {
		"\n-5", "\n5", "\v5", "\f5", "\r5", " 5", "\t5", "-5", "+5",
		"", "5 ", "0x5",
	};
	uint64_t v;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		cr_assert_eq(parse_u64(bad[i], 10, &v), -EINVAL,
			     "\"%s\" taken as %llu", bad[i],
			     (unsigned long long)v);
	cr_assert_eq(parse_u64("18446744073709551615", 10, &v), 0);
	cr_assert_eq(v, UINT64_MAX);
	cr_assert_eq(parse_u64("18446744073709551616", 10, &v), -ERANGE);
}

/* Many arenas: rows grow; beyond the limit they stop, no crash. */
Test(stats_parse, malloc_info_many_arenas)
{
	size_t cap = 70000 * 40 + 64, len = 0, i;
	char *xml = malloc(cap);
	struct alloc_stats st = { 0 };

	cr_assert_not_null(xml);
	len += (size_t)sprintf(xml, "<malloc version=\"1\">");
	for (i = 0; i < 70000; i++)
		len += (size_t)sprintf(xml + len, "<heap nr=\"%zu\"></heap>\n",
				       i);
	cr_assert_lt(len, cap);
	cr_assert_neq(glibc_parse_malloc_info(xml, len, &st), 0,
		      "70000 arenas are more than an allocator has");
	alloc_stats_free(&st);
	free(xml);
}

Test(stats_parse, mimalloc_sample)
{
	struct alloc_stats st = { 0 };
	const struct alloc_stat_table *mem, *cnt, *proc;
	size_t len;
	char *text = slurp_data("mimalloc.txt", &len);

	cr_assert_eq(mimalloc_parse_stats(text, len, &st), 0);
	mem = table(&st, "memory");
	cnt = table(&st, "counts");
	proc = table(&st, "process");
	cr_assert_eq(val(mem, row(mem, "reserved"), "peak"), 32u << 20);
	cr_assert_eq(val(cnt, row(cnt, "segments"), "current"), 1);
	row(cnt, "segments.abandoned");
	row(cnt, "pages.abandoned");
	cr_assert_gt(val(proc, row(proc, "process"), "rss"), 1u << 20);
	alloc_stats_free(&st);
	free(text);
}

Test(stats_parse, mimalloc_hostile)
{
	static const char *const inputs[] = {
		"",
		":",
		"::::\n:::",
		"heap stats: peak total freed current\n",
		" reserved: 1e400 GiB\n",
		" reserved: nan\n",
		" reserved: 12.5.6 KiB 3 MiB\n",
		" process: rss: 3.0",
		" process: rss: ",
		"-abandoned: 1 2 3 4 5 6 7 8\n",
		"                                                       x: 1\n",
	};
	struct alloc_stats st = { 0 };
	size_t i;

	for (i = 0; i < sizeof(inputs) / sizeof(*inputs); i++) {
		mimalloc_parse_stats(inputs[i], strlen(inputs[i]), &st);
		alloc_stats_free(&st);
	}
	cr_assert_neq(mimalloc_parse_stats("", 0, &st), 0);
	alloc_stats_free(&st);
	cr_assert_eq(mimalloc_parse_stats(" reserved: 2 KiB -5 KiB\n", 24,
					  &st),
		     0);
	cr_assert_eq(val(table(&st, "memory"),
			 row(table(&st, "memory"), "reserved"), "peak"),
		     2048);
	cr_assert_eq(table(&st, "memory")->rows[0].have[1], false,
		     "a negative amount is not a quantity");
	alloc_stats_free(&st);
}

static const char tc_profile[] =
	"heap profile:      3:  1050000 [     9:  1060000] @ heapprofile\n"
	"     1:  1048576 [     1:  1048576] @ 0x7f0000001010 0x7fff00000010\n"
	"     2:     1424 [     8:    11424] @ 0x555500001234 0x555500005678\n"
	"\n"
	"MAPPED_LIBRARIES:\n"
	"555500000000-555500010000 r-xp 00000000 00:00 1234 /usr/bin/app\n";

Test(stats_parse, tcmalloc_own_bucket_dropped)
{
	char text[sizeof(tc_profile)];
	size_t len = sizeof(tc_profile) - 1;

	memcpy(text, tc_profile, sizeof(text));
	tcmalloc_drop_own_buckets(text, &len, 0x7fff00000000,
				  0x7fff00001000);
	cr_assert_eq(len, strlen(text));
	cr_assert_null(strstr(text, "0x7fff00000010"), "%s", text);
	cr_assert_not_null(strstr(text, "0x555500005678"), "%s", text);
	cr_assert_not_null(strstr(text, "MAPPED_LIBRARIES:\n5555"), "%s",
			   text);
	cr_assert_eq(strncmp(text,
			     "heap profile:      2:     1424 [     8:    11424] @ heapprofile\n",
			     64),
		     0, "%s", text);
}

Test(stats_parse, tcmalloc_profile_untouched_when_odd)
{
	static const char *const inputs[] = {
		"",
		"heap profile:",
		"heap profile: 1: 2 [3: 4] @ heapprofile",
		"heap profile: 1: 2 [3: 4] @ heapprofile\n"
		"     9:  99 [ 9: 99] @ 0x7fff00000010\n",
		"heap_v2/524288\n  t*: 1: 2 [0: 0]\n",
	};
	size_t i;

	for (i = 0; i < sizeof(inputs) / sizeof(*inputs); i++) {
		char text[256];
		size_t len = strlen(inputs[i]);

		memcpy(text, inputs[i], len + 1);
		tcmalloc_drop_own_buckets(text, &len, 0x7fff00000000,
					  0x7fff00001000);
		/* a bucket bigger than the totals is not ours to drop */
		cr_assert_str_eq(text, inputs[i]);
	}
}

Test(stats_parse, json_valid_accepts_and_refuses)
{
	static const char *const good[] = {
		"{}", "[]", "0", "-1.5e10", "\"\\u00e9\"", "true", "null",
		"{\"a\": [1, 2, {\"b\": \"c\"}]}\n", " {\"jemalloc\": {}} \n",
		"\"\xc3\xa9\"",
	};
	static const char *const bad[] = {
		"", "{", "}", "[1,]", "{\"a\" 1}", "01", "1.", "-", "\"\\x\"",
		"\"\x01\"", "\"\xff\"", "\"\xc3\"", "{} {}", "tru", "nul",
		"\"abc", "[\"\\u12\"]", "{\"a\":}",
	};
	char deep[600];
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(*good); i++)
		cr_assert(json_valid(good[i], strlen(good[i])), "%s", good[i]);
	for (i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		cr_assert_not(json_valid(bad[i], strlen(bad[i])), "%s", bad[i]);
	/* 300 levels deep: refused, not a stack overflow */
	memset(deep, '[', 300);
	memset(deep + 300, ']', 300);
	cr_assert_not(json_valid(deep, 600));
	/* an embedded NUL ends nothing: the length does */
	cr_assert_not(json_valid("{}\0{}", 5));
}

/* A second "process:" line (a fake mi_stats_print_out prints any): one
 * table "process", the first line's, never a second of the same name. */
Test(stats_parse, mimalloc_process_line_twice)
{
	static const char text[] = "reserved: 1 KiB\n"
				   "process: rss: 1 MiB\n"
				   "process: rss: 2 MiB\n";
	struct alloc_stats st = { 0 };
	const struct alloc_stat_table *proc;
	size_t i, n = 0;

	cr_assert_eq(mimalloc_parse_stats(text, sizeof(text) - 1, &st), 0);
	for (i = 0; i < st.nt; i++)
		n += !strcmp(st.t[i].name, "process");
	cr_assert_eq(n, 1, "%zu tables \"process\"", n);
	proc = table(&st, "process");
	cr_assert_eq(val(proc, row(proc, "process"), "rss"), 1u << 20);
	alloc_stats_free(&st);
}

/* A label that is not a word of ASCII (an escape sequence for the
 * terminal `stats` prints row names on, a NUL that would cut the name):
 * not one of mimalloc's lines, no row. */
Test(stats_parse, mimalloc_label_not_ascii)
{
	static const char text[] = " reserved: 1 KiB\n"
				   "\033]0;pwned\007\033[2J: 1 2 3 4\n"
				   "\0hidden: 5\n"
				   "caf\xc3\xa9: 6\n";
	struct alloc_stats st = { 0 };
	size_t i, r;

	cr_assert_eq(mimalloc_parse_stats(text, sizeof(text) - 1, &st), 0);
	for (i = 0; i < st.nt; i++)
		for (r = 0; r < st.t[i].nrows; r++)
			cr_assert_str_eq(st.t[i].rows[r].name, "reserved",
					 "row \"%s\" in %s",
					 st.t[i].rows[r].name, st.t[i].name);
	row(table(&st, "memory"), "reserved");
	alloc_stats_free(&st);
}

/* What the target's GetHeapProfile() returned, through
 * tcmalloc_drop_own_buckets() with the stub page of tc_profile. */
static void drop_own(const char *in, char *out, size_t size)
{
	size_t len = strlen(in);

	cr_assert_lt(len, size);
	memcpy(out, in, len + 1);
	tcmalloc_drop_own_buckets(out, &len, 0x7fff00000000,
				  0x7fff00001000);
	cr_assert_eq(len, strlen(out));
}

/* A header written without gperftools' padding has no room for the new
 * totals: then no bucket goes either, or the totals would not add up. */
Test(stats_parse, tcmalloc_header_without_room_keeps_all)
{
	static const char in[] =
		"heap profile: 2: 1048600 [ 2: 1048600] @ heapprofile\n"
		" 1: 1048576 [ 1: 1048576] @ 0x7fff00000010\n"
		" 1: 24 [ 1: 24] @ 0x555555555000\n";
	char out[sizeof(in)];

	drop_own(in, out, sizeof(out));
	cr_assert_str_eq(out, in);
}

/* Only an address on the bucket's own line, in hex as gperftools writes
 * it, is the stub's: not one on the next line, not a negative one that
 * wraps into the stub page. */
Test(stats_parse, tcmalloc_address_is_the_lines_own)
{
	static const char *const inputs[] = {
		"heap profile:      2:  1048600 [     2:  1048600] @ heapprofile\n"
		"     1:  1048576 [     1:  1048576] @ 0x\n"
		"7fff00000010\n"
		"     1:       24 [     1:       24] @ 0x555555555000\n",
		"heap profile:      2:  1048600 [     2:  1048600] @ heapprofile\n"
		"     1:  1048576 [     1:  1048576] @ 0x-ffff8000fffffff0\n"
		"     1:       24 [     1:       24] @ 0x555555555000\n",
		"heap profile:      2:  1048600 [     2:  1048600] @ heapprofile\n"
		"     1:  1048576 [     1:  1048576] @ 0x 7fff00000010\n"
		"     1:       24 [     1:       24] @ 0x555555555000\n",
	};
	char out[256];
	size_t i;

	for (i = 0; i < sizeof(inputs) / sizeof(*inputs); i++) {
		drop_own(inputs[i], out, sizeof(out));
		cr_assert_str_eq(out, inputs[i]);
	}
}

/* A bucket line whose counts run on past the bytes the parser copies
 * (127): not one, rather than a number cut short (1048 of 1048576). */
Test(stats_parse, tcmalloc_counts_cut_by_the_copy_are_none)
{
	char in[512], out[512];
	int n;

	n = snprintf(in, sizeof(in),
		     "heap profile:      2:  1048600 [     2:  1048600] @ heapprofile\n"
		     "     1:  1048576 [%96s     1:  1048576] @ 0x7fff00000010\n"
		     "     1:       24 [     1:       24] @ 0x555555555000\n",
		     "");
	cr_assert_lt(n, (int)sizeof(in));
	drop_own(in, out, sizeof(out));
	cr_assert_str_eq(out, in);
}

/* "-abandoned" under no row: no row ".abandoned", named after nothing. */
Test(stats_parse, mimalloc_sub_line_without_parent)
{
	static const char text[] = "-abandoned: 1 2 3 4\n"
				   "  segments: 1 1 0 1\n"
				   "-abandoned: 5 5 0 0\n";
	struct alloc_stats st = { 0 };
	const struct alloc_stat_table *cnt;
	size_t i, r;

	cr_assert_eq(mimalloc_parse_stats(text, sizeof(text) - 1, &st), 0);
	for (i = 0; i < st.nt; i++)
		for (r = 0; r < st.t[i].nrows; r++)
			cr_assert_neq(st.t[i].rows[r].name[0], '.',
				      "row \"%s\" in %s", st.t[i].rows[r].name,
				      st.t[i].name);
	cnt = table(&st, "counts");
	cr_assert_eq(cnt->nrows, 2);
	cr_assert_eq(val(cnt, row(cnt, "segments.abandoned"), "peak"), 5);
	alloc_stats_free(&st);
}
