#ifndef MEMSNAP_TESTS_LIB_SAMPLER_H
#define MEMSNAP_TESTS_LIB_SAMPLER_H

#include "fixture.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * The test side of `memsnap prof on --sampler` (test_sampler*.c) on
 * tests/fixtures/sampler_target.c and its kin: the fixture, its
 * allocation sites and exact counts, the memsnap commands, and folded
 * reports summed by site.  Every function fails the current Criterion
 * test when a step of its own fails.
 */

/*
 * The running test's state, shared by this library and the test files:
 * Criterion runs each test in a process of its own, which
 * sampler_setup() prepares and sampler_teardown() cleans up (the
 * suite's .init and .fini, in test_sampler.c).
 */
extern struct fixture fx;		/* the target, start()ed */
extern char pidstr[16];			/* its pid, for --pid */
extern char base[PATH_MAX];		/* one temp dir per test: dumps, */
extern char tmp_dir[PATH_MAX + 8];	/* and base/tmp, the TMPDIR */

/* --root for folded_load(), when the target's files are not
 * memsnap's; NULL for none. */
extern const char *report_root;

/* The suite's .init: base and tmp_dir made, sampler_teardown() put in
 * skip_cleanup. */
void sampler_setup(void);

/* The suite's .fini, safe to call twice: seize_thread()'s tracer
 * killed, the target stopped, base removed. */
void sampler_teardown(void);

/*
 * Start fixture @name with @conf (a "MALLOC_CONF=..." entry, or NULL)
 * in fx, TMPDIR=tmp_dir; skip the test if it is not built.
 */
void start(const char *name, const char *conf);

/* start() with the address space laid out the same at each run
 * (setarch -R: no ASLR), MALLOC_CONF unset. */
void start_without_aslr(const char *name);

/* ---- the fixture's sites and counts ---------------------------------- */

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

/* "site_malloc_small", ..., "leak_grow". */
extern const char *const site_name[NSITES];

/* Live bytes asked for at each site, exact. */
struct counts {
	long long v[NSITES];
};

/* Send @cmd; its reply "ok bytes=site_malloc_small:N,...,leak_grow:N". */
struct counts command_counts(char cmd);

/* Send @cmd and expect a reply starting with @want (in @reply). */
void command_expect(char cmd, const char *want, char *reply, size_t size);

/* How often sampler_target's waiter saw its epoll_wait fail with EINTR
 * (only memsnap stopping it explains one). */
long waiter_eintr(void);

/* ---- memsnap ----------------------------------------------------------- */

/* memsnap --pid PID @a0 ... NULL, into @r (run_free() it). */
__attribute__((sentinel))
void memsnap(struct run *r, const char *a0, ...);

/*
 * A memsnap that does not know the option says so as a usage error
 * naming it: then there is nothing to test here yet, and the test is
 * skipped.
 */
void need_sampler(struct run *r);

/* `prof on --sampler [--sample-bytes @mean]` (@mean 0: the default):
 * exit 0 and one line saying "sampler on". */
void sampler_on(long mean);

/* `prof off` with the sampler on: exit 0, "sampler off". */
void sampler_off(void);

/* `dump -o BASE/@name.heap` into @path: its exit status (output in @r,
 * run_free() it). */
int dump_try(const char *name, char *path, size_t size, struct run *r);

/* @path holds a heap_v2 profile sampled every @mean bytes (0: any). */
void assert_heap_v2(const char *path, long mean);

/* dump_try(), which must succeed with a profile sampled every @mean
 * bytes (0: any mean). */
void dump_to(const char *name, long mean, char *path, size_t size);

/* The "sampler" line of `info --no-attach` (live samples, drops), in
 * @buf, for the messages of failed checks; never stops the target. */
const char *sampler_state(char *buf, size_t size);

/* The JSON value of key "@key" in @s: past the colon and blanks; NULL
 * if there is no such key (the same string as a value does not count). */
const char *json_value(const char *s, const char *key);

/*
 * A process that holds thread @tid as its tracer (named "strace"), as
 * strace -p TID would: its pid, once it holds it.  let_go() or
 * sampler_teardown() kills it.
 */
pid_t seize_thread(pid_t tid);

/* seize_thread()'s tracer gone: its thread runs free. */
void let_go(pid_t tracer);

/* ---- folded reports ---------------------------------------------------- */

#define MAX_LEAVES 1024

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

/* Report @dump (against @old if not NULL) into @fo; folded_free() it. */
void folded_load(const char *dump, const char *old, struct folded *fo);
/* ... with one more option of report's (NULL: none): "--alloc". */
void folded_load_with(const char *dump, const char *old, const char *opt,
		      struct folded *fo);
void folded_free(struct folded *fo);

/* The bytes of stacks whose leaf is @name. */
long long leaf_bytes(const struct folded *fo, const char *name);

/* |@got - @want| within @pct percent of @want. */
bool near(long long got, long long want, int pct);

/*
 * Every site of @mask with live bytes: its leaves in @fo add up to
 * within 10% of the exact count in @c, and (@whole) each of its stacks
 * reaches main and has sampler_sites right before the site.  @what
 * names the dump.
 */
void check_sites(const struct folded *fo, const struct counts *c,
		 unsigned mask, const char *what, bool whole);

/* check_sites(), the stacks whole. */
void assert_sites(const struct folded *fo, const struct counts *c,
		  unsigned mask, const char *what);

#endif
