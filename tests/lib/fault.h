#ifndef MEMSNAP_TESTS_LIB_FAULT_H
#define MEMSNAP_TESTS_LIB_FAULT_H

#include "fixture.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * For the fault and bad-input tests (test_faults*.c, test_cli_bad.c and
 * others): what "untouched" means for a target, runs of memsnap under
 * resource limits, in the background or stopped at a system call, and
 * the gate for tests of known bugs.  Every function fails the current
 * Criterion test when a step of its own fails.
 */

/*
 * Criterion runs no .fini after cr_skip_test(): the suites skip through
 * skip_test(), which first calls the teardown their .init put here (it
 * must be safe to call twice).  One per test process, as Criterion runs
 * each test in a process of its own; NULL for none.
 */
extern void (*skip_cleanup)(void);

/* skip_cleanup(), then skip the current test saying why. */
__attribute__((format(printf, 1, 2), noreturn))
void skip_test(const char *fmt, ...);

/*
 * A test that shows a bug memsnap still has: it runs (and fails) only
 * with MEMSNAP_KNOWN_BUGS=1, so that `make check` stays green; without
 * it, it is skipped and says which bug.  @where: file:line and what.
 */
void known_bug(const char *where);

/* CLOCK_MONOTONIC in milliseconds, and a sleep that EINTR does not cut
 * short. */
long fault_now_ms(void);
void fault_sleep_ms(long ms);

/* The state letter and TracerPid of thread @tid of @pid: false if gone. */
bool task_state(pid_t pid, pid_t tid, char *state, pid_t *tracer);

/*
 * Every thread of @pid running free: none in a ptrace stop ('t') or a
 * job-control stop ('T'), none traced.  false with the first offender
 * in @why.
 */
bool threads_free(pid_t pid, char *why, size_t size);

/*
 * threads_free(), polled for up to 2 s: a tracer's death detaches its
 * tracees at once, but a thread it had just let go may take a moment
 * to be scheduled out of its stop.  @when names the moment in the
 * failure.
 */
void assert_threads_free(pid_t pid, const char *when);

/* Untouched: every thread free, and the fixture says it is well. */
void assert_untouched(struct fixture *f, const char *when);

/* The newlines in @s. */
size_t count_lines(const char *s);

/* @s single-quoted for /bin/sh, in @buf; returns @buf. */
const char *sh_quote(const char *s, char *buf, size_t size);

/*
 * $MEMSNAP_BIN with @args after the shell command @pre ("ulimit -n 8",
 * "" for none), through /bin/sh: exec'd, so the limit is memsnap's own
 * and $$ in @pre is memsnap's pid.  0 or -errno.
 */
int run_memsnap_after(struct run *r, const char *pre,
		      const char *const args[]);

/*
 * Whether $MEMSNAP_BIN is a sanitizer build: ASan reserves terabytes of
 * address space, so RLIMIT_AS tests say nothing about memsnap there.
 */
bool memsnap_sanitized(void);

/*
 * memsnap in the background with its stdout and stderr kept in pipes
 * (a pipe holds 64 KiB: plenty for one error line), for a test that
 * acts while memsnap runs.  bg_finish() waits and fills @r (run_free()
 * it).
 */
struct bg {
	pid_t pid;
	int out, err;
};

void bg_start(struct bg *b, const char *const args[]);
void bg_finish(struct bg *b, struct run *r);

/* All that can be read from @fd until EOF, NUL-ended, for free(); @fd
 * is closed. */
char *bg_slurp(int fd);

/* A system call's entry: its number and arguments. */
struct sc_entry {
	long nr;
	uint64_t args[6];
};

/*
 * Run memsnap with @args under ptrace and stop it at the entry of the
 * first system call @match accepts; there call @act, which returns true
 * to have memsnap SIGKILLed at that point, false to let it go on
 * (untraced).  Its result in @r; false if no system call matched.
 */
bool run_traced(const char *const args[],
		bool (*match)(const struct sc_entry *), bool (*act)(pid_t),
		struct run *r);

/* The anonymous r-x pages of @pid that start with memsnap's stub
 * signature: 0 for a process memsnap never called into. */
int stub_pages(pid_t pid);

/* xorshift64*: the random delays of a run, reproducible from its seed
 * in *@s. */
uint64_t prng_next(uint64_t *s);

#endif
