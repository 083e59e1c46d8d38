/* Heap profile parser: formats, unsampling, and hostile input. */
#include "profile/profile.h"
#include "profile/report.h"
#include "symbols/detect.h"
#include "symbols/demangle.h"
#include "symbols/symbolizer.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char jemalloc_dump[] =
	"heap_v2/524288\n"
	"  t*: 3: 3072 [0: 0]\n"
	"  t0: 3: 3072 [0: 0]\n"
	"@ 0x7f0000001000 0x555500001234 0x555500005678\n"
	"  t*: 2: 1024 [0: 0]\n"
	"  t0: 2: 1024 [0: 0]\n"
	"@ 0x7f0000001000 0x555500009abc\n"
	"  t*: 1: 2048 [0: 0]\n"
	"  t7: 1: 2048 [0: 0]\n"
	"\n"
	"MAPPED_LIBRARIES:\n"
	"555500000000-555500010000 r-xp 00000000 fe:00 1234 /usr/bin/app\n"
	"7f0000000000-7f0000010000 r-xp 00000000 fe:00 99 /usr/lib/libjemalloc.so.2\n";

static struct profile *parse_ok(const char *text)
{
	struct profile *p = NULL;
	char why[256];
	int rc = profile_parse(text, strlen(text), &p, why, sizeof(why));

	cr_assert_eq(rc, 0, "parse failed: %d %s", rc, why);
	return p;
}

static int parse_err(const char *text, char *why, size_t len)
{
	struct profile *p = NULL;
	int rc = profile_parse(text, strlen(text), &p, why, len);

	cr_assert_null(p);
	return rc;
}

static double expect_scale(double bytes, double objs, double period)
{
	return 1.0 / (1.0 - exp(-(bytes / objs) / period));
}

Test(profile, jemalloc_stacks_and_unsampling)
{
	struct profile *p = parse_ok(jemalloc_dump);
	double s0 = expect_scale(1024, 2, 524288);
	double s1 = expect_scale(2048, 1, 524288);

	cr_assert_eq(p->format, PROFILE_JEMALLOC);
	cr_assert_eq(p->period, 524288);
	cr_assert_eq(p->n, 2);
	cr_assert_eq(p->v[0].depth, 3);
	cr_assert_eq(p->v[0].pcs[0], 0x7f0000001000ull);
	cr_assert_eq(p->v[0].pcs[2], 0x555500005678ull);
	cr_assert_eq(p->v[1].depth, 2);
	cr_assert_eq(p->v[1].pcs[1], 0x555500009abcull);
	cr_assert_eq(p->v[0].objs, 2);
	cr_assert_eq(p->v[0].bytes, 1024);
	/* each stack by its own average size */
	cr_assert_float_eq(p->v[0].ubytes, 1024 * s0, 1e-6);
	cr_assert_float_eq(p->v[0].uobjs, 2 * s0, 1e-9);
	cr_assert_float_eq(p->v[1].ubytes, 2048 * s1, 1e-6);
	cr_assert_float_eq(p->total_bytes, 1024 * s0 + 2048 * s1, 1e-6);
	cr_assert_eq(p->maps->n, 2);
	cr_assert_str_eq(p->maps->v[0].path, "/usr/bin/app");
	profile_free(p);
}

Test(profile, period_one_is_exact)
{
	struct profile *p = parse_ok("heap_v2/1\n  t*: 1: 4096 [0: 0]\n"
				     "@ 0x10\n  t*: 3: 12288 [0: 0]\n");

	cr_assert_eq(llround(p->total_bytes), 12288);
	cr_assert_eq(llround(p->total_objs), 3);
	cr_assert_eq(p->maps->n, 0);
	profile_free(p);
}

Test(profile, gperftools_unsampled_and_sampled)
{
	struct profile *p = parse_ok(
		"heap profile:    2:   3000 [     9:  9000] @ heapprofile\n"
		"     1:     1000 [     4:  4000] @ 0x4005c5 0x4006aa\n"
		"     1:     2000 [     5:  5000] @ 0x4005d0\n"
		"\n"
		"MAPPED_LIBRARIES:\n"
		"00400000-00401000 r-xp 00000000 08:01 77 /bin/x\n");

	cr_assert_eq(p->format, PROFILE_GPERFTOOLS);
	cr_assert_eq(p->period, 0);
	cr_assert_eq(p->n, 2);
	cr_assert_float_eq(p->total_bytes, 3000, 1e-9);
	cr_assert_eq(p->v[0].pcs[1], 0x4006aa);
	profile_free(p);

	p = parse_ok("heap profile: 1: 100 [ 1: 100] @ heap_v2/524288\n"
		     " 1: 100 [ 1: 100] @ 0x1 0x2\n");
	cr_assert_eq(p->period, 524288);
	cr_assert_float_eq(p->total_bytes,
			   100 * expect_scale(100, 1, 524288), 1e-6);
	profile_free(p);
}

Test(profile, errors_name_the_line)
{
	char why[256];

	cr_assert_eq(parse_err("", why, sizeof(why)), -EINVAL);
	cr_assert_eq(parse_err("hello\n", why, sizeof(why)), -EINVAL);
	cr_assert(strstr(why, "line 1: not a heap profile"), "%s", why);
	cr_assert_eq(parse_err("heap_v2/0\n", why, sizeof(why)), -EINVAL);
	cr_assert_str_eq(why, "line 1: bad sample period");
	cr_assert_eq(parse_err("heap_v2/1\n@ 0x1 zz\n", why, sizeof(why)),
		     -EINVAL);
	cr_assert_str_eq(why, "line 2: bad address in stack");
	cr_assert_eq(parse_err("heap_v2/1\n@ 0x1\n", why, sizeof(why)),
		     -EINVAL);
	cr_assert(strstr(why, "truncated"), "%s", why);
	cr_assert_eq(parse_err("heap_v2/1\n@ 0x1\n  t*: 0: 5 [0: 0]\n", why,
			       sizeof(why)),
		     -EINVAL);
	cr_assert_str_eq(why, "line 3: 5 bytes in 0 objects");
	/* 2^64 does not fit */
	cr_assert_eq(parse_err("heap_v2/1\n@ 0x1\n  t*: 18446744073709551616:"
			       " 5 [0: 0]\n",
			       why, sizeof(why)),
		     -EINVAL);
	cr_assert_eq(parse_err("heap_v2/1\n@ 0x11112222333344445\n", why,
			       sizeof(why)),
		     -EINVAL);
}

Test(profile, hostile_numbers_stay_finite)
{
	struct profile *p = parse_ok(
		"heap_v2/1\n@ 0x1\n  t*: 1: 18446744073709551615 [0: 0]\n"
		"@ 0x2\n  t*: 18446744073709551615: 1 [0: 0]\n"
		"@ 0x3\n  t*: 7: 0 [0: 0]\n");

	cr_assert(isfinite(p->total_bytes));
	cr_assert(isfinite(p->total_objs));
	profile_free(p);
}

Test(profile, deep_stack_is_refused)
{
	size_t n = PROFILE_MAX_DEPTH + 1, i;
	char *buf = malloc(n * 8 + 64), *q = buf;
	struct profile *p = NULL;
	char why[128];

	q += sprintf(q, "heap_v2/1\n@");
	for (i = 0; i < n; i++)
		q += sprintf(q, " 0x%zx", i + 1);
	sprintf(q, "\n  t*: 1: 1 [0: 0]\n");
	cr_assert_eq(profile_parse(buf, strlen(buf), &p, why, sizeof(why)),
		     -EINVAL);
	cr_assert(strstr(why, "deeper than"), "%s", why);
	free(buf);
}

/* Every prefix of a valid dump parses or fails cleanly (run this under
 * SANITIZE=address,undefined to see reads past the end). */
Test(profile, every_truncation)
{
	size_t len = strlen(jemalloc_dump), i, ok = 0;

	for (i = 0; i <= len; i++) {
		char *copy = malloc(i ? i : 1);
		struct profile *p = NULL;
		char why[128];
		int rc;

		memcpy(copy, jemalloc_dump, i);
		rc = profile_parse(copy, i, &p, why, sizeof(why));
		cr_assert(rc == 0 || rc == -EINVAL, "rc %d at %zu", rc, i);
		cr_assert((rc == 0) == (p != NULL));
		if (!rc)
			ok++;
		profile_free(p);
		free(copy);
	}
	/* the complete dump and the cuts between whole lines parse */
	cr_assert_gt(ok, 3);
}

Test(profile, random_and_mutated_input)
{
	unsigned int seed = 12345;
	size_t len = strlen(jemalloc_dump);
	char *buf = malloc(len + 4096);
	int iter, parsed = 0;

	for (iter = 0; iter < 3000; iter++) {
		struct profile *p = NULL;
		size_t n, k;
		int rc;

		if (iter % 2) {
			/* random bytes, often starting like a dump */
			n = (size_t)(rand_r(&seed) % 4096);
			for (k = 0; k < n; k++)
				buf[k] = (char)(rand_r(&seed) & 0xff);
			if (iter % 4 == 1 && n > 10)
				memcpy(buf, "heap_v2/1\n", 10);
		} else {
			/* a valid dump with a few bytes flipped */
			memcpy(buf, jemalloc_dump, len);
			n = len;
			for (k = 0; k < 4; k++)
				buf[rand_r(&seed) % len] =
					" 0x@:t*\n9fz\0"[rand_r(&seed) % 12];
		}
		rc = profile_parse(buf, n, &p, NULL, 0);
		cr_assert(rc == 0 || rc == -EINVAL, "rc %d", rc);
		if (!rc) {
			parsed++;
			cr_assert(isfinite(p->total_bytes));
		}
		profile_free(p);
	}
	cr_assert_gt(parsed, 0, "no mutation survived: generator broken");
	free(buf);
}

Test(profile, load_missing_and_directory)
{
	struct profile *p = NULL;
	char why[64];

	cr_assert_eq(profile_load("/nonexistent/x.heap", &p, why,
				  sizeof(why)),
		     -ENOENT);
	cr_assert_eq(profile_load("/", &p, why, sizeof(why)), -EISDIR);
	cr_assert_null(p);
}

Test(profile, demangle_cpp_and_rust)
{
	char *s = demangle("_ZN2ns6Widget4makeEi");

	cr_assert_str_eq(s, "ns::Widget::make(int)");
	free(s);
	s = demangle("_ZN4core3fmt9Formatter3pad17h0123456789abcdefE");
	cr_assert_str_eq(s, "core::fmt::Formatter::pad");
	free(s);
	s = demangle("_RNvCs1234_7mycrate3foo");
	cr_assert_str_eq(s, "mycrate::foo");
	free(s);
	cr_assert_null(demangle("main"));
	cr_assert_null(demangle("_Zgarbage"));
}

Test(profile, allocation_entry_points)
{
	cr_assert(report_is_alloc_entry("malloc"));
	cr_assert(report_is_alloc_entry("je_calloc"));
	cr_assert(report_is_alloc_entry("_rjem_mallocx"));
	cr_assert(report_is_alloc_entry("tc_new"));
	cr_assert(report_is_alloc_entry("operator new(unsigned long)"));
	cr_assert(report_is_alloc_entry("posix_memalign"));
	cr_assert_not(report_is_alloc_entry("xmalloc"));
	cr_assert_not(report_is_alloc_entry("malloc_stats_print"));
	cr_assert_not(report_is_alloc_entry("f2"));
	cr_assert(report_is_alloc_entry("__libc_memalign"));
	cr_assert(report_is_alloc_entry("mi_new_nothrow"));
	cr_assert_not(report_is_alloc_entry("__libc_start_main"));
}

/* The catalogue's prefixes: owned by the allocator, or shared. */
Test(profile, allocator_internal_names)
{
	size_t i;

	cr_assert(alloc_is_internal("je_arena_malloc_hard"));
	cr_assert(alloc_is_internal("_rjem_je_tcache_alloc_small"));
	cr_assert(alloc_is_internal("tc_newarray"));
	cr_assert(alloc_is_internal("mi_heap_malloc"));
	cr_assert_not(alloc_is_internal("__libc_start_main"));
	cr_assert_not(alloc_is_internal("main"));
	cr_assert_not(alloc_is_internal("jemalloc_like_name"));
	for (i = 0; alloc_entry_point(i); i++)
		cr_assert(alloc_is_entry_point(alloc_entry_point(i)), "%s",
			  alloc_entry_point(i));
	cr_assert_geq(i, 20);
}

/* A dump over the limit is refused by its size, before it is read. */
Test(profile, load_refuses_more_than_max)
{
	char path[] = "/tmp/memsnap-profile-XXXXXX";
	size_t len = strlen(jemalloc_dump);
	struct profile *p = NULL;
	char why[64];
	int fd = mkstemp(path);

	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, jemalloc_dump, len), (ssize_t)len);
	close(fd);
	cr_assert_eq(profile_load_max(path, len - 1, &p, why, sizeof(why)),
		     -EFBIG);
	cr_assert_null(p);
	cr_assert_eq(profile_load_max(path, len, &p, why, sizeof(why)), 0);
	cr_assert_eq(p->n, 2);
	cr_assert_eq(p->text_len, len);
	/* what only the jeprof export reads goes early */
	profile_drop_text(p);
	cr_assert_null(p->text);
	profile_drop_stacks(p);
	cr_assert_eq(p->n, 0);
	cr_assert_float_eq(p->total_objs,
			   2 * expect_scale(1024, 2, 524288) +
				   expect_scale(2048, 1, 524288),
			   1e-9);
	profile_free(p);
	unlink(path);
}

/*
 * Folded stacks come sorted as strings, as `sort` sorts them, although
 * they are compared label by label: "0x20;..." sorts before "0x2;..."
 * ('0' < ';'), and "0x2" before both.
 */
Test(profile, folded_sorted_as_strings)
{
	struct profile *p = parse_ok("heap_v2/1\n"
				     "@ 0x2a\n  t*: 1: 100 [0: 0]\n"
				     "@ 0x10 0x2\n  t*: 1: 2 [0: 0]\n"
				     "@ 0x3 0x20\n  t*: 1: 3 [0: 0]\n"
				     "@ 0x1 0x2\n  t*: 1: 4 [0: 0]\n"
				     "@ 0x2\n  t*: 1: 5 [0: 0]\n"
				     "@ 0x2 0x1\n  t*: 1: 6 [0: 0]\n"
				     "@ 0x1 0x2\n  t*: 1: 7 [0: 0]\n");
	struct report_opts o = { .dump_name = "x" };
	struct symbolizer *s;
	struct report *r;
	char *buf = NULL;
	size_t n = 0;
	FILE *f;

	cr_assert_eq(symbolizer_new(p->maps, "/nonexistent", &s), 0);
	cr_assert_eq(report_build(p, s, NULL, NULL, &r), 0);
	f = open_memstream(&buf, &n);
	cr_assert_eq(report_folded(r, &o, f), 0);
	fclose(f);
	/* the two "0x2;0x1" stacks merged */
	cr_assert_str_eq(buf, "0x1;0x2 6\n"
			      "0x2 5\n"
			      "0x20;0x3 3\n"
			      "0x2;0x1 11\n"
			      "0x2;0x10 2\n"
			      "0x2a 100\n");
	free(buf);
	report_free(r);
	symbolizer_free(s);
	profile_free(p);
}

/*
 * The "[N: B]" pair, what was allocated since profiling began, is kept
 * and unsampled like the pair in use; profile_select() makes a report
 * count it, or says -ENODATA where a dump counts none; an allocated
 * pair of bytes in no objects is refused as the pair in use is.
 */
Test(profile, allocated_pair_kept_and_selected)
{
	struct profile *p = parse_ok("heap_v2/1\n"
				     "  t*: 1: 100 [5: 700]\n"
				     "@ 0x1 0x2\n  t*: 1: 100 [3: 300]\n"
				     "@ 0x3\n  t*: 0: 0 [2: 400]\n");
	struct report_opts o = { .dump_name = "x" };
	struct symbolizer *s, *bs;
	struct profile *b;
	struct report *r;
	char *buf = NULL, why[256];
	size_t n = 0;
	FILE *f;

	cr_assert(p->has_alloc);
	cr_assert_eq(p->v[0].aobjs, 3);
	cr_assert_eq(p->v[1].abytes, 400);
	cr_assert_float_eq(p->total_bytes, 100, 1e-9);
	cr_assert_float_eq(p->total_abytes, 700, 1e-9);
	cr_assert_eq(profile_select(p, true), 0);
	cr_assert_eq(symbolizer_new(p->maps, "/nonexistent", &s), 0);
	cr_assert_eq(report_build(p, s, NULL, NULL, &r), 0);
	cr_assert(r->alloc);
	cr_assert_float_eq(r->total_bytes, 700, 1e-9);
	f = open_memstream(&buf, &n);
	cr_assert_eq(report_folded(r, &o, f), 0);
	fclose(f);
	cr_assert_str_eq(buf, "0x2;0x1 300\n0x3 400\n");
	free(buf);
	report_free(r);
	symbolizer_free(s);
	profile_free(p);

	/* a difference counts the base's allocations too, not its bytes
	 * in use */
	p = parse_ok("heap_v2/1\n@ 0x1\n  t*: 1: 10 [10: 1000]\n");
	b = parse_ok("heap_v2/1\n@ 0x1\n  t*: 1: 10 [5: 500]\n");
	cr_assert_eq(profile_select(p, true), 0);
	cr_assert_eq(profile_select(b, true), 0);
	cr_assert_eq(symbolizer_new(p->maps, "/nonexistent", &s), 0);
	cr_assert_eq(symbolizer_new(b->maps, "/nonexistent", &bs), 0);
	cr_assert_eq(report_build(p, s, b, bs, &r), 0);
	cr_assert_float_eq(r->total_bytes, 500, 1e-9);
	cr_assert_float_eq(r->base_bytes, 500, 1e-9);
	report_free(r);
	symbolizer_free(bs);
	symbolizer_free(s);
	profile_free(b);
	profile_free(p);

	p = parse_ok(jemalloc_dump);
	cr_assert(!p->has_alloc);
	cr_assert_eq(profile_select(p, true), -ENODATA);
	cr_assert_eq(profile_select(p, false), 0);
	profile_free(p);

	cr_assert_eq(parse_err("heap_v2/1\n@ 0x1\n  t*: 1: 1 [0: 9]\n", why,
			       sizeof(why)), -EINVAL);
	cr_assert_str_eq(why, "line 3: 9 bytes in 0 objects");
	cr_assert_eq(parse_err("heap profile: 1: 1 [1: 1] @ heapprofile\n"
			       " 0: 0 [0: 9] @ 0x1\n", why, sizeof(why)),
		     -EINVAL);
	cr_assert_str_eq(why, "line 2: 9 bytes in 0 objects");
}
