#ifndef MEMSNAP_TESTS_LIB_INJECT_H
#define MEMSNAP_TESTS_LIB_INJECT_H

#include "fixture.h"

#include <stdbool.h>
#include <sys/types.h>

/*
 * For the call engine's integration tests (test_inject*.c, and the
 * fault tests that borrow a thread): start tests/fixtures/inject_target,
 * find a fixture's threads by the names its ready line gives, run
 * `memsnap call` on one of them.  The fixture is the caller's; every
 * function fails the current Criterion test when a step of its own
 * fails.
 */

/* Start inject_target in @f, or skip the test if it is not built. */
void inject_start(struct fixture *f);

/* The tid the ready line of @f gives for @name ("read", "avx", ...):
 * "... read=4242 avx=4243 ...". */
pid_t thread_of(const struct fixture *f, const char *name);

/* Send @cmd to @f and expect "ok". */
void assert_command_ok(struct fixture *f, char cmd);

/*
 * memsnap --pid F [--thread TID] call FN [A1 [A2]] (@tid 0: no
 * --thread; @a1, @a2 may be NULL): the exit status, the output in @r
 * (run_free() it).
 */
int call_on(const struct fixture *f, struct run *r, pid_t tid,
	    const char *fn, const char *a1, const char *a2);

/* The value memsnap printed, "RET (signed S, 0xH)": S, or -999999. */
long long call_value(const struct run *r);

/* Call @fn on thread @tid of @f and expect success with result @want. */
void assert_call(const struct fixture *f, pid_t tid, const char *fn,
		 const char *a1, long long want);

/* No thread of @f in a ptrace or job-control stop. */
void assert_no_thread_stopped(const struct fixture *f);

/* Spawn memsnap with @args without waiting; stdout/stderr to /dev/null. */
pid_t spawn_memsnap(const char *const args[]);

/* Reap @pid: its exit code, or 128 + the signal that killed it. */
int wait_status(pid_t pid);

/*
 * A directory with the two FIFOs of the fixture's block_on(), "started"
 * and "go": the test holds both open read-write, so the callee's opens
 * never block.  gate_close() closes them and removes the directory.
 */
struct gate {
	char dir[128];
	int started, go;
};

void gate_open(struct gate *g);

/* Wait (bounded) for the callee's "started" byte.  true if it came. */
bool gate_wait_started(struct gate *g, int timeout_ms);

/* Let the callee go on. */
void gate_release(struct gate *g);

void gate_close(struct gate *g);

#endif
