/*
 * The call engine's test library (inject.h): inject_target started,
 * `memsnap call` run on a thread of a fixture, and the gate a callee
 * blocks on.
 */
#include "inject.h"
#include "scratch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void inject_start(struct fixture *f)
{
	char path[512];
	char *argv[] = { path, NULL };
	int rc;

	fixture_path("inject_target", path, sizeof(path));
	if (access(path, X_OK))
		cr_skip_test("fixture %s not built", path);
	rc = fixture_start(f, argv, NULL, 10000);
	cr_assert_eq(rc, 0, "fixture_start: %s", strerror(-rc));
}

pid_t thread_of(const struct fixture *f, const char *name)
{
	char key[32];
	const char *p;

	snprintf(key, sizeof(key), "%s=", name);
	for (p = f->ready; (p = strstr(p, key)); p++)
		if (p == f->ready || p[-1] == ' ')
			return (pid_t)atoi(p + strlen(key));
	cr_assert_fail("no %s= in the ready line '%s'", name, f->ready);
	return 0;
}

void assert_command_ok(struct fixture *f, char cmd)
{
	char reply[512];
	int rc = fixture_command(f, cmd, reply, sizeof(reply), 20000);

	cr_assert_eq(rc, 0, "command %c: %s", cmd, strerror(-rc));
	cr_assert_str_eq(reply, "ok", "command %c: %s", cmd, reply);
}

int call_on(const struct fixture *f, struct run *r, pid_t tid,
	    const char *fn, const char *a1, const char *a2)
{
	char pid[16], t[16];
	const char *args[12];
	size_t n = 0;
	int rc;

	snprintf(pid, sizeof(pid), "%d", (int)f->pid);
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

long long call_value(const struct run *r)
{
	const char *p = strstr(r->out, "(signed ");

	return p ? strtoll(p + 8, NULL, 10) : -999999;
}

void assert_call(const struct fixture *f, pid_t tid, const char *fn,
		 const char *a1, long long want)
{
	struct run r;
	int st = call_on(f, &r, tid, fn, a1, NULL);

	cr_assert_eq(st, 0, "call %s on %d: exit %d: %s", fn, (int)tid, st,
		     r.err);
	cr_assert_eq(call_value(&r), want, "call %s: printed '%s'", fn, r.out);
	run_free(&r);
}

void assert_no_thread_stopped(const struct fixture *f)
{
	char cmd[128];
	struct run r;

	snprintf(cmd, sizeof(cmd),
		 "awk '{ sub(/.*\\) /, \"\"); print substr($0, 1, 1) }' "
		 "/proc/%d/task/*/stat | grep -c '[tT]'", (int)f->pid);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(atoi(r.out), 0, "%s thread(s) of the fixture stopped",
		     r.out);
	run_free(&r);
}

pid_t spawn_memsnap(const char *const args[])
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

int wait_status(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		cr_assert_eq(errno, EINTR, "waitpid: %s", strerror(errno));
	return WIFEXITED(status) ? WEXITSTATUS(status)
				 : 128 + WTERMSIG(status);
}

void gate_open(struct gate *g)
{
	char p[256];
	int rc;

	/* in /tmp itself, whatever $TMPDIR: the path is a string argument
	 * of the call, kept as short as it always was */
	rc = scratch_make("/tmp/memsnap-gate", g->dir, sizeof(g->dir));
	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	snprintf(p, sizeof(p), "%s/started", g->dir);
	cr_assert_eq(mkfifo(p, 0600), 0);
	g->started = open(p, O_RDWR | O_CLOEXEC);
	snprintf(p, sizeof(p), "%s/go", g->dir);
	cr_assert_eq(mkfifo(p, 0600), 0);
	g->go = open(p, O_RDWR | O_CLOEXEC);
	cr_assert(g->started >= 0 && g->go >= 0);
}

bool gate_wait_started(struct gate *g, int timeout_ms)
{
	struct pollfd p = { .fd = g->started, .events = POLLIN };
	char c;

	if (poll(&p, 1, timeout_ms) != 1)
		return false;
	return read(g->started, &c, 1) == 1;
}

void gate_release(struct gate *g)
{
	cr_assert_eq(write(g->go, "g", 1), 1);
}

void gate_close(struct gate *g)
{
	close(g->started);
	close(g->go);
	scratch_cleanup(g->dir);
}
