/*
 * Shared by the call engine's integration tests (test_inject*.c): start
 * tests/fixtures/inject_target, find its threads, run `memsnap call` on
 * one of them.  Header-only (static functions) so that each test file
 * stays one unit.
 */
#ifndef MEMSNAP_TESTS_INJECT_LIB_H
#define MEMSNAP_TESTS_INJECT_LIB_H

#include "tests/lib/fixture.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static struct fixture fx = { .pid = -1 };

static inline void inject_start(void)
{
	char path[512];
	char *argv[] = { path, NULL };
	int rc;

	fixture_path("inject_target", path, sizeof(path));
	if (access(path, X_OK))
		cr_skip_test("fixture %s not built", path);
	rc = fixture_start(&fx, argv, NULL, 10000);
	cr_assert_eq(rc, 0, "fixture_start: %s", strerror(-rc));
}

static inline void inject_stop(void)
{
	fixture_stop(&fx);
}

/* The tid the ready line gives for @name ("read", "avx", ...). */
static inline pid_t thread_of(const char *name)
{
	char key[32];
	const char *p;

	snprintf(key, sizeof(key), "%s=", name);
	for (p = fx.ready; (p = strstr(p, key)); p++)
		if (p == fx.ready || p[-1] == ' ')
			return (pid_t)atoi(p + strlen(key));
	cr_assert_fail("no %s= in the ready line '%s'", name, fx.ready);
	return 0;
}

static inline void assert_healthy(void)
{
	char why[512];

	cr_assert(fixture_healthy(&fx, why, sizeof(why)), "%s", why);
}

/* Send @cmd and expect "ok". */
static inline void assert_command_ok(char cmd)
{
	char reply[512];
	int rc = fixture_command(&fx, cmd, reply, sizeof(reply), 20000);

	cr_assert_eq(rc, 0, "command %c: %s", cmd, strerror(-rc));
	cr_assert_str_eq(reply, "ok", "command %c: %s", cmd, reply);
}

/*
 * memsnap [--thread TID] --pid FIXTURE call FN ARG...: the exit status,
 * output in @r (run_free() it).
 */
static inline int call_on(struct run *r, pid_t tid, const char *fn,
			  const char *a1, const char *a2)
{
	char pid[16], t[16];
	const char *args[12];
	size_t n = 0;
	int rc;

	snprintf(pid, sizeof(pid), "%d", (int)fx.pid);
	snprintf(t, sizeof(t), "%d", (int)tid);
	args[n++] = "--pid";
	args[n++] = pid;
	if (tid) {
		args[n++] = "--thread";
		args[n++] = t;
	}
	args[n++] = "call";
	args[n++] = fn;
	if (a1)
		args[n++] = a1;
	if (a2)
		args[n++] = a2;
	args[n] = NULL;
	rc = run_memsnap(r, args);
	cr_assert_eq(rc, 0, "run_memsnap: %s", strerror(-rc));
	return r->status;
}

/* The value memsnap printed: "RET (signed S, 0xH)". */
static inline long long call_value(const struct run *r)
{
	const char *p = strstr(r->out, "(signed ");

	return p ? strtoll(p + 8, NULL, 10) : -999999;
}

/* Call @fn on thread @tid and expect success with result @want. */
static inline void assert_call(pid_t tid, const char *fn, const char *a1,
			long long want)
{
	struct run r;
	int st = call_on(&r, tid, fn, a1, NULL);

	cr_assert_eq(st, 0, "call %s on %d: exit %d: %s", fn, (int)tid, st,
		     r.err);
	cr_assert_eq(call_value(&r), want, "call %s: printed '%s'", fn, r.out);
	run_free(&r);
}

/* No thread of the fixture in a ptrace or job-control stop. */
static inline void assert_no_thread_stopped(void)
{
	char cmd[128];
	struct run r;

	snprintf(cmd, sizeof(cmd),
		 "awk '{ sub(/.*\\) /, \"\"); print substr($0, 1, 1) }' "
		 "/proc/%d/task/*/stat | grep -c '[tT]'", (int)fx.pid);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(atoi(r.out), 0, "%s thread(s) of the fixture stopped",
		     r.out);
	run_free(&r);
}

/* Spawn memsnap with @args without waiting; stdout/stderr to /dev/null. */
static inline pid_t spawn_memsnap(const char *const args[])
{
	const char *bin = getenv("MEMSNAP_BIN");
	posix_spawn_file_actions_t fa;
	char *argv[32];
	pid_t pid;
	size_t i;
	int rc;

	argv[0] = (char *)(bin ? bin : "./memsnap");
	for (i = 0; args[i] && i + 2 < 32; i++)
		argv[i + 1] = (char *)args[i];
	argv[i + 1] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, NULL);
	posix_spawn_file_actions_destroy(&fa);
	cr_assert_eq(rc, 0, "posix_spawn %s: %s", argv[0], strerror(rc));
	return pid;
}

static inline int wait_status(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		cr_assert_eq(errno, EINTR, "waitpid: %s", strerror(errno));
	return WIFEXITED(status) ? WEXITSTATUS(status)
				 : 128 + WTERMSIG(status);
}

/*
 * A directory with the two FIFOs of the fixture's block_on(): the test
 * holds both open read-write, so the callee's opens never block.
 */
struct gate {
	char dir[128];
	int started, go;
};

static inline void gate_open(struct gate *g)
{
	char p[256];

	snprintf(g->dir, sizeof(g->dir), "/tmp/memsnap-gate.XXXXXX");
	cr_assert_not_null(mkdtemp(g->dir));
	snprintf(p, sizeof(p), "%s/started", g->dir);
	cr_assert_eq(mkfifo(p, 0600), 0);
	g->started = open(p, O_RDWR | O_CLOEXEC);
	snprintf(p, sizeof(p), "%s/go", g->dir);
	cr_assert_eq(mkfifo(p, 0600), 0);
	g->go = open(p, O_RDWR | O_CLOEXEC);
	cr_assert(g->started >= 0 && g->go >= 0);
}

/* Wait (bounded) for the callee's "started" byte.  true if it came. */
static inline bool gate_wait_started(struct gate *g, int timeout_ms)
{
	struct pollfd p = { .fd = g->started, .events = POLLIN };
	char c;

	if (poll(&p, 1, timeout_ms) != 1)
		return false;
	return read(g->started, &c, 1) == 1;
}

static inline void gate_release(struct gate *g)
{
	cr_assert_eq(write(g->go, "g", 1), 1);
}

static inline void gate_close(struct gate *g)
{
	char p[256];

	close(g->started);
	close(g->go);
	snprintf(p, sizeof(p), "%s/started", g->dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/go", g->dir);
	unlink(p);
	rmdir(g->dir);
}

/* Bytes left unread in the "go" FIFO (a release nobody took). */
static inline int gate_pending(struct gate *g)
{
	int n = 0;

	ioctl(g->go, FIONREAD, &n);
	return n;
}

#endif
