/*
 * memsnap and containers.  The target runs as in a container: its own
 * pid namespace (it is pid 1 there) and mount namespace (its own /tmp).
 * memsnap reaches it
 *   - from the host, by its host pid;
 *   - from a debug container, as `kubectl debug --target` makes one:
 *     the static binary, in the target's pid namespace, in a mount
 *     namespace of its own whose root is another directory (no library,
 *     no /dev, its own /proc), by pid 1;
 * and in both info, stats, a dump, the sampler on and off, and a report
 * symbolized through /proc/PID/root work, each dump landing in the
 * caller's own file system.  Without CAP_SYS_PTRACE (a debug container
 * without --profile=sysadmin), memsnap says which capability it needs
 * and how to get it.  The target is unharmed after each step.
 */
#include "../lib/fixture.h"
#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static struct fixture fx = { .pid = -1 };	/* unshare(1), the runtime */
static pid_t target;				/* the fixture, host pid */
static char base[PATH_MAX];

static void setup(void)
{
	int rc = scratch_make("memsnap-test-container", base, sizeof(base));

	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
}

static void teardown(void)
{
	if (target > 0)
		kill(target, SIGKILL);
	fixture_stop(&fx);
	scratch_cleanup(base);
}

TestSuite(container, .init = setup, .fini = teardown, .timeout = 180);

/* The only child of @pid (unshare's, which became the fixture). */
static pid_t only_child(pid_t pid)
{
	char path[64];
	long c = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid,
		 (int)pid);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_eq(fscanf(f, "%ld", &c), 1, "%s is empty", path);
	fclose(f);
	return (pid_t)c;
}

/* The fixture in a pid and mount namespace of its own, /tmp its own. */
static void start_container(void)
{
	char path[PATH_MAX], nspid[256] = "";
	char *argv[] = { (char *)"/usr/bin/unshare", (char *)"--pid",
			 (char *)"--mount", (char *)"--fork",
			 (char *)"--mount-proc", (char *)"/bin/sh", (char *)"-c",
			 (char *)"mount -t tmpfs none /tmp && exec \"$0\"",
			 path, NULL };
	char *env[] = { (char *)"MALLOC_CONF=prof:true,lg_prof_sample:10",
			NULL };
	char status[64];
	FILE *f;
	int rc;

	if (access(argv[0], X_OK))
		cr_skip_test("no %s (util-linux)", argv[0]);
	if (unshare(0))
		cr_skip_test("no unshare(2) here");
	fixture_path("jemalloc-target", path, sizeof(path));
	if (!strncmp(path, "/tmp/", 5))
		cr_skip_test("the fixtures are under /tmp (%s), which the "
			     "container's own /tmp hides", path);
	rc = fixture_start(&fx, argv, env, 10000);
	if (rc)
		cr_skip_test("a pid and mount namespace cannot be made here "
			     "(unshare: %s)", strerror(-rc));
	target = only_child(fx.pid);
	snprintf(status, sizeof(status), "/proc/%d/status", (int)target);
	f = fopen(status, "r");
	cr_assert_not_null(f);
	while (fgets(nspid, sizeof(nspid), f) && strncmp(nspid, "NSpid:", 6))
		;
	fclose(f);
	cr_assert(strstr(nspid, "\t1\n"), "the fixture is not pid 1 in its "
		  "namespace: %s", nspid);
}

static void assert_target_unharmed(const char *when)
{
	char st[64], line[256] = "";
	FILE *f;

	snprintf(st, sizeof(st), "/proc/%d/stat", (int)target);
	f = fopen(st, "r");
	cr_assert_not_null(f, "%s: the target is gone", when);
	cr_assert_not_null(fgets(line, sizeof(line), f));
	fclose(f);
	cr_assert_null(strstr(line, ") T "), "%s: the target is stopped",
		       when);
	cr_assert_null(strstr(line, ") t "), "%s: the target is traced",
		       when);
	fixture_assert_healthy(&fx);
}

/* Run @argv with @prep, expect exit 0, the target unharmed. */
static void ok(struct run *r, const char *const *argv, void (*prep)(void *),
	       void *arg)
{
	int rc = run_argv_with(r, (char *const *)argv, prep, arg);

	cr_assert_eq(rc, 0, "running %s: %s", argv[0], strerror(-rc));
	cr_assert_eq(r->status, 0, "%s %s %s: exit %d: %s%s", argv[1],
		     argv[2], argv[3] ? argv[3] : "", r->status, r->out,
		     r->err);
	assert_target_unharmed(argv[3] ? argv[3] : argv[1]);
}

Test(container, from_the_host)
{
	const char *bin = getenv("MEMSNAP_BIN");
	char pid[16], root[64], heap[PATH_MAX + 16], sheap[PATH_MAX + 16];
	struct run r;

	cr_assert_not_null(bin);
	start_container();
	snprintf(pid, sizeof(pid), "%d", (int)target);
	snprintf(root, sizeof(root), "/proc/%d/root", (int)target);
	snprintf(heap, sizeof(heap), "%s/je.heap", base);
	snprintf(sheap, sizeof(sheap), "%s/sampler.heap", base);
	ok(&r, (const char *const[]){ bin, "--pid", pid, "info", NULL },
	   NULL, NULL);
	cr_assert_not_null(strstr(r.out, "jemalloc"), "%s", r.out);
	run_free(&r);
	ok(&r, (const char *const[]){ bin, "--pid", pid, "stats", NULL },
	   NULL, NULL);
	run_free(&r);
	ok(&r, (const char *const[]){ bin, "--pid", pid, "dump", "-o", heap,
				NULL }, NULL, NULL);
	run_free(&r);
	ok(&r, (const char *const[]){ bin, "report", heap, "--root", root,
				NULL }, NULL, NULL);
	cr_assert_not_null(strstr(r.out, "leak_inner"), "%s", r.out);
	run_free(&r);
	ok(&r, (const char *const[]){ bin, "--pid", pid, "prof", "on",
				"--sampler", NULL }, NULL, NULL);
	run_free(&r);
	ok(&r, (const char *const[]){ bin, "--pid", pid, "dump", "-o",
				sheap, NULL }, NULL, NULL);
	run_free(&r);
	ok(&r, (const char *const[]){ bin, "--pid", pid, "prof", "off",
				NULL }, NULL, NULL);
	cr_assert_not_null(strstr(r.out, "sampler off"), "%s", r.out);
	run_free(&r);
	cr_assert_eq(access(sheap, R_OK), 0, "no dump at %s", sheap);
}

/* In the child, before the exec: into the target's pid namespace (a
 * child of ours is in it), a mount namespace of our own with its own
 * /proc, rooted at @arg: a debug container. */
static void enter_debug_container(void *arg)
{
	const char *root = arg;
	char ns[64], proc[PATH_MAX + 8];
	int fd, st;
	pid_t c;

	snprintf(ns, sizeof(ns), "/proc/%d/ns/pid", (int)target);
	fd = open(ns, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWPID))
		_exit(126);
	c = fork();
	if (c < 0)
		_exit(126);
	if (c > 0) {
		while (waitpid(c, &st, 0) < 0)
			if (errno != EINTR)
				_exit(126);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	}
	snprintf(proc, sizeof(proc), "%s/proc", root);
	if (unshare(CLONE_NEWNS) ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  NULL) ||
	    chroot(root) || chdir("/"))
		_exit(125);
}

Test(container, from_a_debug_container)
{
	const char *bin = getenv("MEMSNAP_STATIC");
	char dbg[PATH_MAX + 8], cmd[4 * PATH_MAX + 128], out[PATH_MAX + 32];
	const char *const m = "/bin/memsnap";
	struct run r;

	if (!bin || access(bin, X_OK))
		cr_skip_test("no static binary at %s (MEMSNAP_STATIC; a "
			     "sanitized build has none)", bin ? bin : "(unset)");
	start_container();
	/* the debug image: memsnap-static alone */
	snprintf(dbg, sizeof(dbg), "%s/dbg", base);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/bin' '%s/proc' '%s/tmp' && "
		 "cp '%s' '%s/bin/memsnap'", dbg, dbg, dbg, bin, dbg);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);

	ok(&r, (const char *const[]){ m, "--pid", "1", "info", NULL },
	   enter_debug_container, dbg);
	cr_assert_not_null(strstr(r.out, "pid       1 "), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "jemalloc"), "%s", r.out);
	run_free(&r);
	ok(&r, (const char *const[]){ m, "--pid", "1", "stats", NULL },
	   enter_debug_container, dbg);
	run_free(&r);
	ok(&r, (const char *const[]){ m, "--pid", "1", "dump", "-o", "/tmp/je.heap",
				NULL }, enter_debug_container, dbg);
	run_free(&r);
	/* in the debug container's own file system */
	snprintf(out, sizeof(out), "%s/tmp/je.heap", dbg);
	cr_assert_eq(access(out, R_OK), 0, "the dump is not at %s", out);
	ok(&r, (const char *const[]){ m, "report", "/tmp/je.heap", "--root",
				"/proc/1/root", NULL },
	   enter_debug_container, dbg);
	cr_assert_not_null(strstr(r.out, "leak_inner"), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "__libc_start"), "%s", r.out);
	run_free(&r);
	ok(&r, (const char *const[]){ m, "--pid", "1", "prof", "on", "--sampler",
				NULL }, enter_debug_container, dbg);
	run_free(&r);
	ok(&r, (const char *const[]){ m, "--pid", "1", "dump", "-o",
				"/tmp/sampler.heap", NULL },
	   enter_debug_container, dbg);
	run_free(&r);
	snprintf(out, sizeof(out), "%s/tmp/sampler.heap", dbg);
	cr_assert_eq(access(out, R_OK), 0, "the dump is not at %s", out);
	ok(&r, (const char *const[]){ m, "--pid", "1", "prof", "off", NULL },
	   enter_debug_container, dbg);
	cr_assert_not_null(strstr(r.out, "sampler off"), "%s", r.out);
	run_free(&r);
}

/* In the child: CAP_SYS_PTRACE out of every set, as in a debug
 * container made without --profile=sysadmin. */
static void drop_cap_sys_ptrace(void *arg)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	(void)arg;
	if (prctl(PR_CAPBSET_DROP, CAP_SYS_PTRACE, 0, 0, 0) ||
	    syscall(SYS_capget, &h, d))
		_exit(126);
	d[0].effective &= ~(1u << CAP_SYS_PTRACE);
	d[0].permitted &= ~(1u << CAP_SYS_PTRACE);
	d[0].inheritable &= ~(1u << CAP_SYS_PTRACE);
	if (syscall(SYS_capset, &h, d))
		_exit(126);
}

Test(container, without_cap_sys_ptrace_says_which_and_how)
{
	const char *bin = getenv("MEMSNAP_BIN");
	char pid[16];
	struct run r;
	int rc;

	cr_assert_not_null(bin);
	if (geteuid())
		cr_skip_test("needs root: the target must hold capabilities "
			     "memsnap lacks");
	start_container();
	snprintf(pid, sizeof(pid), "%d", (int)target);
	rc = run_argv_with(&r, (char *const *)(const char *const[]){
					   bin, "--pid", pid, "info", NULL },
			   drop_cap_sys_ptrace, NULL);
	cr_assert_eq(rc, 0);
	cr_assert_neq(r.status, 126, "the capability could not be dropped");
	cr_assert_eq(r.status, 4, "exit %d (want 4, permission): %s%s",
		     r.status, r.out, r.err);
	cr_assert_not_null(strstr(r.err, "CAP_SYS_PTRACE"), "%s", r.err);
	cr_assert_not_null(strstr(r.err, "--cap-add=SYS_PTRACE"), "%s",
			   r.err);
	cr_assert_not_null(strstr(r.err, "--profile=sysadmin"), "%s", r.err);
	run_free(&r);
	assert_target_unharmed("after the refusal");
}
