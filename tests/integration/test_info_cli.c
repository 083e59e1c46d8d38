/*
 * `memsnap info` from the outside: exact messages and exit codes for bad
 * input, and proof that the target is untouched.
 */
#include "../lib/fixture.h"
#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static struct fixture fx = { .pid = -1 };

static void stop_fixture(void)
{
	fixture_stop(&fx);
}

static void start(const char *name)
{
	char path[512];
	char *argv[] = { path, NULL };
	int rc;

	fixture_path(name, path, sizeof(path));
	rc = fixture_start(&fx, argv, NULL, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
}

/* Run memsnap with up to 6 arguments; the result stays in @r. */
#define MEMSNAP(r, ...)                                                    \
	do {                                                               \
		const char *args_[] = { __VA_ARGS__, NULL };               \
		cr_assert_eq(run_memsnap((r), args_), 0, "running memsnap"); \
	} while (0)

static void expect_usage(const char *arg, const char *err)
{
	struct run r;

	MEMSNAP(&r, "--pid", arg, "info");
	cr_expect_eq(r.status, 2, "--pid %s: exit %d", arg, r.status);
	cr_expect_str_eq(r.err, err);
	cr_expect_str_empty(r.out);
	run_free(&r);
}

Test(info_cli, bad_pids)
{
	expect_usage("abc", "memsnap: abc: not a process id (see memsnap --help)\n");
	expect_usage("12x", "memsnap: 12x: not a process id (see memsnap --help)\n");
	expect_usage("-5", "memsnap: -5: not a process id (see memsnap --help)\n");
	expect_usage("", "memsnap: : not a process id (see memsnap --help)\n");
	expect_usage("0", "memsnap: 0: pid out of range (see memsnap --help)\n");
	expect_usage("99999999999999999999",
		     "memsnap: 99999999999999999999: pid out of range (see memsnap --help)\n");
	expect_usage("4194305",
		     "memsnap: 4194305: pid out of range (see memsnap --help)\n");
}

Test(info_cli, usage_errors)
{
	struct run r;

	MEMSNAP(&r, "info");
	cr_expect_eq(r.status, 2);
	cr_expect_str_eq(r.err, "memsnap: info: which process? give --pid PID\n");
	run_free(&r);

	MEMSNAP(&r, "--pid", "1");
	cr_expect_eq(r.status, 2);
	cr_expect_str_eq(r.err, "memsnap: no command given (see memsnap --help)\n");
	run_free(&r);

	MEMSNAP(&r, "--pid", "1", "frobnicate");
	cr_expect_eq(r.status, 2);
	cr_expect_str_eq(r.err,
			 "memsnap: frobnicate: unknown command (see memsnap --help)\n");
	run_free(&r);

	MEMSNAP(&r, "--frob", "info");
	cr_expect_eq(r.status, 2);
	cr_expect_str_eq(r.err, "memsnap: --frob: unknown option (see memsnap --help)\n");
	run_free(&r);

	MEMSNAP(&r, "-Z", "info");
	cr_expect_eq(r.status, 2);
	cr_expect_str_eq(r.err, "memsnap: -Z: unknown option (see memsnap --help)\n");
	run_free(&r);

	MEMSNAP(&r, "info", "--pid");
	cr_expect_eq(r.status, 2);
	cr_expect_str_eq(r.err, "memsnap: --pid: needs a value (see memsnap --help)\n");
	run_free(&r);

	MEMSNAP(&r, "--pid", "1", "info", "extra");
	cr_expect_eq(r.status, 2);
	cr_expect_str_eq(r.err,
			 "memsnap: info: unexpected argument 'extra' (see memsnap --help)\n");
	run_free(&r);
}

Test(info_cli, help_and_version)
{
	struct run r;

	MEMSNAP(&r, "--help");
	cr_expect_eq(r.status, 0);
	cr_expect(strstr(r.out, "usage: memsnap") != NULL);
	cr_expect(strstr(r.out, "exit status:") != NULL);
	cr_expect_str_empty(r.err);
	run_free(&r);

	MEMSNAP(&r, "-V");
	cr_expect_eq(r.status, 0);
	cr_expect(strncmp(r.out, "memsnap ", 8) == 0, "%s", r.out);
	cr_expect(strstr(r.out, "features:") != NULL);
	run_free(&r);
}

/* Every command answers --help (and -h) with its own usage, before a
 * process is asked for; watch's names every option it takes. */
Test(info_cli, every_command_answers_help)
{
	static const char *const cmds[] = { "info", "dump", "prof", "stats",
					    "trim", "explain", "watch", "call",
					    "report" };
	static const char *const watch_opts[] = {
		"-o, --output DIR", "--interval", "--for", "--count",
		"--dump-every", "--sampler", "--sample-bytes", "--stack-bytes",
		"--no-attach",
	};
	char want[64];
	struct run r;
	size_t i;

	for (i = 0; i < sizeof(cmds) / sizeof(*cmds); i++) {
		MEMSNAP(&r, cmds[i], i % 2 ? "-h" : "--help");
		snprintf(want, sizeof(want), " %s", cmds[i]);
		cr_expect_eq(r.status, 0, "%s --help: exit %d: %s", cmds[i],
			     r.status, r.err);
		cr_expect(!strncmp(r.out, "usage: memsnap", 14) &&
				  strstr(r.out, want) < strchr(r.out, '\n'),
			  "%s --help: %s", cmds[i], r.out);
		cr_expect_str_empty(r.err, "%s --help: %s", cmds[i], r.err);
		run_free(&r);
	}
	MEMSNAP(&r, "--pid", "1", "watch", "-o", "/nonexistent/x", "--help");
	cr_expect_eq(r.status, 0, "%s", r.err);
	for (i = 0; i < sizeof(watch_opts) / sizeof(*watch_opts); i++)
		cr_expect(strstr(r.out, watch_opts[i]), "watch --help has no "
			  "%s: %s", watch_opts[i], r.out);
	run_free(&r);
}

/* A pid that existed and is now gone: fork, reap, then ask. */
Test(info_cli, no_such_process)
{
	char pid[16], want[128];
	struct run r;
	pid_t p = fork();

	cr_assert(p >= 0);
	if (p == 0)
		_exit(0);
	cr_assert_eq(waitpid(p, NULL, 0), p);
	snprintf(pid, sizeof(pid), "%d", (int)p);
	snprintf(want, sizeof(want), "memsnap: pid %d: no such process\n",
		 (int)p);
	MEMSNAP(&r, "--pid", pid, "info");
	cr_expect_eq(r.status, 3);
	cr_expect_str_eq(r.err, want);
	cr_expect_str_empty(r.out);
	run_free(&r);
}

Test(info_cli, zombie)
{
	char pid[16], want[160];
	siginfo_t si;
	struct run r;
	pid_t p = fork();

	cr_assert(p >= 0);
	if (p == 0)
		_exit(0);
	/* Wait until it is a zombie, without reaping it. */
	cr_assert_eq(waitid(P_PID, (id_t)p, &si, WEXITED | WNOWAIT), 0);
	snprintf(pid, sizeof(pid), "%d", (int)p);
	MEMSNAP(&r, "--pid", pid, "info");
	waitpid(p, NULL, 0);
	snprintf(want, sizeof(want),
		 "memsnap: pid %d (%s) is a zombie: it has exited and holds no memory\n",
		 (int)p, "integration-tes");
	cr_expect_eq(r.status, 3);
	cr_expect_str_eq(r.err, want);
	run_free(&r);
}

Test(info_cli, kernel_thread)
{
	struct run r;
	FILE *f = fopen("/proc/2/comm", "re");
	char comm[64] = "", want[160];

	if (!f || !fgets(comm, sizeof(comm), f))
		cr_skip_test("no /proc/2/comm: no kernel thread to try");
	fclose(f);
	comm[strcspn(comm, "\n")] = '\0';
	snprintf(want, sizeof(want),
		 "memsnap: pid 2 (%s) is a kernel thread: it has no allocator\n",
		 comm);
	MEMSNAP(&r, "--pid", "2", "info");
	cr_expect_eq(r.status, 3);
	cr_expect_str_eq(r.err, want);
	run_free(&r);
}

/*
 * A copy of @src that uid 65534 can run: the build tree may sit under a
 * directory only root can enter (/root on CI machines), and so may
 * $TMPDIR: the copy goes to a directory of its own in /tmp.  Into @dst.
 */
static void public_copy(const char *src, char *dst, size_t size)
{
	char dir[256], cmd[1200];
	struct run r;
	int rc;

	rc = scratch_make("/tmp/memsnap-pub", dir, sizeof(dir));
	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	cr_assert_eq(chmod(dir, 0755), 0);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s/' && chmod 755 '%s'/*", src,
		 dir, dir);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(dst, size, "%s/%s", dir, strrchr(src, '/') + 1);
	run_free(&r);
}

/* The directory of public_copy()'s @path, and all in it. */
static void remove_public_copy(const char *path)
{
	char dir[512];

	snprintf(dir, sizeof(dir), "%.*s", (int)(strrchr(path, '/') - path),
		 path);
	scratch_cleanup(dir);
}

/* Run memsnap as uid 65534 through setpriv. */
static void run_as_nobody(struct run *r, pid_t pid)
{
	char cmd[1024], bin[512];

	public_copy(getenv("MEMSNAP_BIN"), bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd),
		 "exec setpriv --reuid 65534 --regid 65534 --clear-groups "
		 "--inh-caps=-all %s --pid %d info",
		 bin, (int)pid);
	cr_assert_eq(run_shell(r, cmd), 0);
	remove_public_copy(bin);
	if (r->status == 127)
		cr_skip_test("setpriv is not available: %s", r->err);
}

Test(info_cli, permission_denied_other_uid, .fini = stop_fixture)
{
	char want[256];
	struct run r;

	if (geteuid() != 0)
		cr_skip_test("needs root to run memsnap as another uid");
	start("cli_plain");
	run_as_nobody(&r, fx.pid);
	snprintf(want, sizeof(want),
		 "memsnap: pid %d: /proc/%d/maps: Permission denied: pid %d runs as uid 0; memsnap runs as uid 65534 without CAP_SYS_PTRACE (run as uid 0 or as root)\n",
		 (int)fx.pid, (int)fx.pid, (int)fx.pid);
	cr_expect_eq(r.status, 4, "exit %d: %s", r.status, r.err);
	cr_expect_str_eq(r.err, want);
	cr_expect_str_empty(r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

Test(info_cli, permission_denied_not_dumpable, .fini = stop_fixture)
{
	char built[512], path[512], want[320];
	struct run r;
	int rc;

	if (geteuid() != 0)
		cr_skip_test("needs root to start a fixture as another uid");
	/* The fixture runs as nobody too, but is not dumpable. */
	fixture_path("cli_nondumpable", built, sizeof(built));
	public_copy(built, path, sizeof(path));
	{
		char *argv[] = { (char *)"/usr/bin/setpriv", (char *)"--reuid",
				 (char *)"65534", (char *)"--regid",
				 (char *)"65534", (char *)"--clear-groups",
				 path, NULL };

		rc = fixture_start(&fx, argv, NULL, 10000);
		remove_public_copy(path);
		if (rc == -EPIPE)
			cr_skip_test("setpriv could not start the fixture");
		cr_assert_eq(rc, 0, "%s", strerror(-rc));
	}
	run_as_nobody(&r, fx.pid);
	snprintf(want, sizeof(want),
		 "memsnap: pid %d: /proc/%d/maps: Permission denied: pid %d is not dumpable (setuid or prctl(PR_SET_DUMPABLE, 0)): only root or CAP_SYS_PTRACE may inspect it\n",
		 (int)fx.pid, (int)fx.pid, (int)fx.pid);
	cr_expect_eq(r.status, 4, "exit %d: %s", r.status, r.err);
	cr_expect_str_eq(r.err, want);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

Test(info_cli, traced_target_is_reported, .fini = stop_fixture)
{
	char pid[16], want[96];
	struct run r;

	start("cli_plain");
	cr_assert_eq(ptrace(PTRACE_SEIZE, fx.pid, 0, 0), 0, "seize: %s",
		     strerror(errno));
	snprintf(pid, sizeof(pid), "%d", (int)fx.pid);
	MEMSNAP(&r, "--pid", pid, "info");
	cr_expect_eq(r.status, 0, "%s", r.err);
	snprintf(want, sizeof(want), "traced    by pid %d (", (int)getpid());
	cr_expect(strstr(r.out, want) != NULL, "%s", r.out);
	run_free(&r);

	MEMSNAP(&r, "--pid", pid, "--json", "info");
	snprintf(want, sizeof(want), "\"tracer_pid\": %d", (int)getpid());
	cr_expect(strstr(r.out, want) != NULL, "%s", r.out);
	run_free(&r);
	/* Detaching needs a stopped tracee. */
	cr_assert_eq(ptrace(PTRACE_INTERRUPT, fx.pid, 0, 0), 0);
	cr_assert_eq(waitpid(fx.pid, NULL, __WALL), fx.pid);
	cr_assert_eq(ptrace(PTRACE_DETACH, fx.pid, 0, 0), 0, "detach: %s",
		     strerror(errno));
	fixture_assert_healthy(&fx);
}

Test(info_cli, no_allocator, .fini = stop_fixture)
{
	char pid[16], want[200];
	struct run r;

	start("cli_static_stripped");
	snprintf(pid, sizeof(pid), "%d", (int)fx.pid);
	MEMSNAP(&r, "--pid", pid, "info");
	snprintf(want, sizeof(want),
		 "memsnap: pid %d: no allocator control functions found (no malloc symbol in 1 objects: static and stripped, or not C)\n",
		 (int)fx.pid);
	cr_expect_eq(r.status, 5);
	cr_expect_str_eq(r.err, want);
	cr_expect(strstr(r.out, "malloc    not found") != NULL, "%s", r.out);
	run_free(&r);
	fixture_assert_healthy(&fx);
}

Test(info_cli, glibc_process, .fini = stop_fixture)
{
	char pid[16];
	struct run r;

	start("cli_plain");
	snprintf(pid, sizeof(pid), "%d", (int)fx.pid);
	MEMSNAP(&r, "--pid", pid, "info");
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect_str_empty(r.err);
	cr_expect(strstr(r.out, "malloc    glibc malloc, 0x") != NULL, "%s",
		  r.out);
	cr_expect(strstr(r.out, "glibc malloc  [serves malloc]") != NULL);
	cr_expect(strstr(r.out, "jemalloc") == NULL);
	run_free(&r);

	MEMSNAP(&r, "--pid", pid, "--json", "info");
	cr_expect_eq(r.status, 0);
	cr_expect(strstr(r.out, "\"kind\": \"glibc\"") != NULL, "%s", r.out);
	cr_expect(strstr(r.out, "\"serves_malloc\": true") != NULL);
	cr_expect(strstr(r.out, "\"malloc_info\": {") != NULL);
	run_free(&r);
	fixture_assert_healthy(&fx);
}
