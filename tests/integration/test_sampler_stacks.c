/*
 * The stacks the sampler copies (the `sampler` suite; see
 * test_sampler.c), on tests/fixtures/sampler_stacks.c: in place, with
 * no system call, on the main thread's stack and on a thread's own
 * stack (where memsnap learned how the thread's libc describes it:
 * glibc's); by the kernel anywhere else, such as a fiber's stack
 * with a PROT_NONE page right above its top, which a copy that went
 * past the top would fault on.
 */
#include "tests/lib/fault.h"
#include "tests/lib/sampler.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Blocks per command, and their size (the fixture's). */
#define BLOCKS 64
#define BLOCK_SIZE (256 << 10)

struct taken {
	long long samples, in_place;
};

/* The sampler's counts, from `info --no-attach`. */
static struct taken taken(void)
{
	struct taken t;
	const char *v;
	struct run r;

	memsnap(&r, "--json", "info", "--no-attach", NULL);
	cr_assert_eq(r.status, 0, "info: exit %d: %s", r.status, r.err);
	v = json_value(r.out, "samples");
	cr_assert_not_null(v, "%s", r.out);
	t.samples = atoll(v);
	v = json_value(r.out, "stacks_in_place");
	cr_assert_not_null(v, "%s", r.out);
	t.in_place = atoll(v);
	run_free(&r);
	return t;
}

/* Command @c, then the samples it took and how many of their stacks
 * were copied in place. */
static struct taken command_taken(char c)
{
	struct taken t0 = taken(), t;
	char reply[64];

	command_expect(c, "ok", reply, sizeof(reply));
	t = taken();
	t.samples -= t0.samples;
	t.in_place -= t0.in_place;
	cr_assert_geq(t.samples, BLOCKS, "command %c: %lld samples, %d "
		      "blocks of %d KiB at a mean of 16 KiB", c, t.samples,
		      BLOCKS, BLOCK_SIZE >> 10);
	return t;
}

/* The folded line of @fo whose stack holds @frames ("a;b"), or fail. */
static const char *line_with(const struct folded *fo, const char *frames)
{
	const char *p = strstr(fo->text, frames);

	cr_assert_not_null(p, "no stack has %s:\n%s", frames, fo->text);
	while (p > fo->text && p[-1] != '\n')
		p--;
	return p;
}

/* The line at @line reaches @outer, and is not marked cut. */
static void assert_reaches(const char *line, const char *outer)
{
	size_t len = strcspn(line, "\n");
	char *l = strndup(line, len);

	cr_assert_not_null(l);
	cr_assert(strstr(l, outer) && !strstr(l, "[truncated]"),
		  "this stack does not reach %s: %s", outer, l);
	free(l);
}

Test(sampler, stacks_on_the_main_thread_and_a_thread_are_copied_in_place)
{
	char path[PATH_MAX + 32];
	struct folded *fo = calloc(1, sizeof(*fo));
	struct taken m, t, u;
	long long want = 3LL * BLOCKS * BLOCK_SIZE;

	cr_assert_not_null(fo);
	start("sampler-stacks", NULL);
	sampler_on(16384);
	m = command_taken('m');
	cr_assert_eq(m.in_place, m.samples, "main thread: %lld of %lld "
		     "stacks copied in place", m.in_place, m.samples);
	t = command_taken('t');
	cr_assert_eq(t.in_place, t.samples, "thread: %lld of %lld stacks "
		     "copied in place", t.in_place, t.samples);
	/* the fiber: by the kernel, and the target lives */
	u = command_taken('u');
	cr_assert_eq(u.in_place, 0, "fiber: %lld of %lld stacks copied in "
		     "place", u.in_place, u.samples);
	assert_untouched(&fx, "after samples on a fiber's stack");

	/* every copy whole: the stacks reach their thread's start */
	dump_to("stacks", 16384, path, sizeof(path));
	folded_load(path, NULL, fo);
	assert_reaches(line_with(fo, ";on_main;alloc_blocks "), "main;");
	assert_reaches(line_with(fo, ";on_thread;alloc_blocks "),
		       "thread_main;");
	line_with(fo, "on_fiber;alloc_blocks ");
	cr_assert(near(leaf_bytes(fo, "alloc_blocks"), want, 10),
		  "alloc_blocks: %lld bytes, %lld live:\n%s",
		  leaf_bytes(fo, "alloc_blocks"), want, fo->text);
	folded_free(fo);
	sampler_off();
	assert_untouched(&fx, "after prof off");
	free(fo);
}
