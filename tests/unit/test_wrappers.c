/*
 * profile/wrappers.h: the built-in list knows the wrappers of the
 * servers and runtimes it names and nothing of their callers; a user's
 * pattern must match a whole name and one that does not compile is
 * refused with its reason; the text and JSON reports give a stack's
 * bytes to the first frame past a run of wrappers at the leaf end, and
 * folded keeps whole stacks.
 */
#include "profile/profile.h"
#include "profile/report.h"
#include "profile/wrappers.h"
#include "symbols/symbolizer.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_wrapper(struct wrappers *w, const char *name)
{
	return wrappers_match(w, name, strlen(name));
}

Test(wrappers, the_builtin_list)
{
	static const char *const yes[] = {
		"zmalloc", "zmalloc_usable", "ztrymalloc_usable_internal",
		"zcalloc", "zrealloc_usable", "zstrdup", "my_malloc",
		"my_realloc", "alloc_root", "palloc", "palloc0",
		"MemoryContextAllocZero", "AllocSetAlloc", "g_malloc0_n",
		"g_slice_alloc", "xmalloc", "xstrdup",
		"operator new(unsigned long)",
		"std::allocator<int>::allocate(unsigned long)",
		"__rust_alloc", "alloc::raw_vec::finish_grow",
		"PyMem_Malloc", "PyObject_Malloc", "_PyMem_RawMalloc",
	};
	static const char *const no[] = {
		"createStringObject", "_sdsnewlen", "dictAddRaw",
		"update_hash", "set_var_user::update(THD*)", "main", "malloc_site",
		"my_mallocx", "Palloc", "xmalloc2", "pallocate", "g_mallocx",
		"",
	};
	struct wrappers *w;
	char why[256];
	size_t i;

	cr_assert_eq(wrappers_new(NULL, 0, &w, why, sizeof(why)), 0, "%s",
		     why);
	for (i = 0; i < sizeof(yes) / sizeof(*yes); i++)
		cr_assert(is_wrapper(w, yes[i]), "%s is a wrapper", yes[i]);
	for (i = 0; i < sizeof(no) / sizeof(*no); i++)
		cr_assert_not(is_wrapper(w, no[i]), "%s is no wrapper", no[i]);
	/* asked again: the same answer, from what was remembered */
	cr_assert(is_wrapper(w, "zmalloc"));
	cr_assert_not(is_wrapper(w, "main"));
	/* a name is its bytes, not what a NUL or a length cut makes of it */
	cr_assert_not(wrappers_match(w, "zmalloc\0x", 9));
	cr_assert_not(wrappers_match(w, "zmallocq", 5));	/* "zmall" */
	cr_assert(wrappers_match(w, "zmalloc_usable", 7));	/* "zmalloc" */
	cr_assert_not(wrappers_match(NULL, "zmalloc", 7));
	wrappers_free(w);
}

Test(wrappers, the_users_patterns)
{
	const char *mine[] = { "my_pool_(get|grow)", "arena_.*" };
	const char *bad[] = { "ok", "(unclosed" };
	struct wrappers *w;
	char why[256];

	cr_assert_eq(wrappers_new(mine, 2, &w, why, sizeof(why)), 0);
	cr_assert(is_wrapper(w, "my_pool_get"));
	cr_assert(is_wrapper(w, "arena_alloc"));
	cr_assert(is_wrapper(w, "zmalloc"), "the built-in list stays");
	/* the whole name */
	cr_assert_not(is_wrapper(w, "my_pool_get_slow"));
	cr_assert_not(is_wrapper(w, "the_arena_alloc"));
	wrappers_free(w);

	cr_assert_eq(wrappers_new(bad, 2, &w, why, sizeof(why)), -EINVAL);
	cr_assert_null(w);
	cr_assert(strstr(why, "'(unclosed'"), "%s", why);
}

/* The report of @text with the wrappers @pat, in text, JSON or folded
 * (@fn): its output (free() it). */
static char *report_of(const char *text, const char *pat,
		       int (*fn)(const struct report *,
				 const struct report_opts *, FILE *))
{
	struct report_opts o = { .dump_name = "x" };
	struct profile *p = NULL;
	struct symbolizer *s;
	struct report *r;
	char why[256], *buf = NULL;
	size_t n = 0;
	FILE *f;

	cr_assert_eq(profile_parse(text, strlen(text), &p, why, sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(wrappers_new(&pat, 1, &o.wrappers, why, sizeof(why)), 0);
	cr_assert_eq(symbolizer_new(p->maps, "/nonexistent", &s), 0);
	cr_assert_eq(report_build(p, s, NULL, NULL, &r), 0);
	f = open_memstream(&buf, &n);
	cr_assert_eq(fn(r, &o, f), 0);
	fclose(f);
	report_free(r);
	symbolizer_free(s);
	profile_free(p);
	wrappers_free(o.wrappers);
	return buf;
}

/* Unnamed frames are named by their addresses: "0x1" the wrapper. */
static const char dump[] = "heap_v2/1\n"
			   "@ 0x1 0x1 0x2 0x9\n  t*: 1: 100 [0: 0]\n"
			   "@ 0x3 0x9\n  t*: 1: 40 [0: 0]\n"
			   "@ 0x1\n  t*: 1: 7 [0: 0]\n";

Test(wrappers, a_site_is_past_the_wrappers_at_the_leaf)
{
	char *out = report_of(dump, "0x1", report_text);
	const char *row = strstr(out, "allocated at");

	cr_assert_not_null(row, "%s", out);
	row = strchr(row, '\n') + 1;
	/* 0x2, twice past 0x1, first; 0x1 alone keeps its own */
	cr_assert(!strncmp(row, "         100", 12) &&
			  strstr(row, "  0x2\n") == strchr(row, '\n') - 5,
		  "%s", out);
	cr_assert(strstr(out, "40 ") && strstr(out, "  0x3\n"), "%s", out);
	cr_assert(strstr(out, "such as 0x1;"), "the note: %s", out);
	free(out);

	out = report_of(dump, "0x1", report_json);
	cr_assert(strstr(out, "\"site\": \"0x2\",\n      \"wrapper_frames\": 2"),
		  "%s", out);
	cr_assert(strstr(out, "\"site\": \"0x1\",\n      \"wrapper_frames\": 0"),
		  "%s", out);
	free(out);

	/* folded: whole stacks */
	out = report_of(dump, "0x1", report_folded);
	cr_assert_str_eq(out, "0x1 7\n0x9;0x2;0x1;0x1 100\n0x9;0x3 40\n");
	free(out);
}
