#ifndef MEMSNAP_TEST_EXPLAIN_LIB_H
#define MEMSNAP_TEST_EXPLAIN_LIB_H

/*
 * What the explain tests share (tests/integration/test_explain*.c): a
 * small reader of `memsnap --pid N explain --json` (docs/json.md) and
 * the checks every explained process must pass.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum explain_part {
	P_HEAP_IN_USE,
	P_HEAP_FREE,
	P_ALLOCATOR_METADATA,
	P_THREAD_STACKS,
	P_ANON_OTHER,
	P_FILE,
	P_SHMEM,
	P_RUNTIME,	/* a language runtime's heap and own memory */
	P_MEMSNAP_SAMPLER,	/* memsnap's sampler in the process */
	P_UNACCOUNTED,
	P_SWAP,
	P_HEAP,		/* --no-attach: the allocator's memory as one part */
	P_COUNT
};

extern const char *const explain_part_names[P_COUNT];

#define EXPLAIN_MAX_FINDINGS 32

struct explain_finding {
	const char *id, *text, *remedy;	/* NULL if absent */
	int64_t bytes;
};

struct explain {
	char *json;		/* stdout of explain --json */
	int64_t rss;
	int64_t part[P_COUNT];
	bool known[P_COUNT];	/* present and a number (not null) */
	size_t nfindings;
	struct explain_finding f[EXPLAIN_MAX_FINDINGS];
	const char *verdict;
	const char *allocator;	/* "allocator", NULL if absent or null */
	int64_t threads, largest_stack;	/* "threads" {count, largest_stack}; -1 */
	int attached;		/* "attached": 1, 0, -1 if absent */
	void *doc;		/* the parsed document */
};

/*
 * `memsnap --pid @pid explain --json` and @extra (NULL or one more
 * argument), checked to exit 0 with one valid JSON object, parsed into
 * @e.  Fails the test otherwise.  The test's own RSS readings
 * (smaps_rollup) just before and after are in @rss_lo/@rss_hi (either
 * may be NULL).
 */
void explain_run(pid_t pid, const char *extra, struct explain *e,
		 int64_t *rss_lo, int64_t *rss_hi);
void explain_free(struct explain *e);

/* explain_free() what a failed assertion left: for a suite's .fini, so
 * that a failing test is not also a leak under the sanitizer. */
void explain_free_all(void);

/* The number at @path ("parts.heap_free", "threads.count"); false if
 * absent or not a number. */
bool explain_num(const struct explain *e, const char *path, int64_t *v);

/* The string at @path ("other_allocators[0].allocator"); NULL if
 * absent or not a string. */
const char *explain_str(const struct explain *e, const char *path);

/* The finding @id, NULL if explain did not report it. */
const struct explain_finding *explain_finding(const struct explain *e,
					      const char *id);

/* Cause @id inside finding @host (what explains the host's bytes,
 * shown inside it): true, its bytes in *@bytes and its remedy in
 * *@remedy (either may be NULL); false when it is not there. */
bool explain_cause(const struct explain *e, const char *host, const char *id,
		   int64_t *bytes, const char **remedy);

/*
 * What every explained process must show: rss within 2% of the RSS
 * (smaps_rollup) the test read around the run; every part but unaccounted >= 0; the
 * parts but swap summing to rss; |unaccounted| <= 2% of rss; findings
 * with an id and a text, most bytes first, no two counting the same
 * bytes (their sum at most rss; a cause inside its finding, never
 * beside it, and no larger); a one-line verdict.  With
 * @attached the allocator's parts are numbers, or null beside a "heap"
 * part for an allocator that does not count them apart; without, they
 * are absent or null and "heap" holds the allocator's memory.
 */
void explain_assert_sound(const struct explain *e, int64_t rss_lo,
			  int64_t rss_hi, bool attached);

/* The text form's first line is the JSON's verdict. */
void explain_assert_text_verdict(pid_t pid, const struct explain *e);

/* |@got - @want| <= @pct % of @want, with a message naming @what. */
void assert_within_pct(int64_t got, int64_t want, double pct,
		       const char *what, const struct explain *e);

/* The number after "@key=" in @text (a ready line); fails if absent. */
int64_t ready_num(const char *text, const char *key);

/* The RSS of @pid in bytes: the Rss of /proc/PID/smaps_rollup. */
int64_t proc_rss(pid_t pid);

/* The "@field:" of the smaps entry starting at @start, in bytes; -1 if
 * no mapping starts there. */
int64_t smaps_field_at(pid_t pid, unsigned long start, const char *field);

/* The Rss of every mapping named @name ("[heap]"), in bytes. */
int64_t smaps_rss_named(pid_t pid, const char *name);

#endif
