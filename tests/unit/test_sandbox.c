/*
 * common/sandbox.c: the child that parses the target's bytes has no
 * rights.  Each test starts a child whose serve() plays a parser taken
 * over by an attacker, tries what such code would try, and checks from
 * outside (its exit, /proc/CHILD) that it could not.
 */
#include "common/sandbox.h"

#include "injector/arch.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Wait for the child's end, at most 10 s; its waitpid() status. */
static int end_of(struct sandbox *sb)
{
	int i;

	for (i = 0; i < 1000 && sandbox_alive(sb); i++)
		usleep(10000);
	cr_assert(!sandbox_alive(sb), "the child did not end");
	return sb->status;
}

static void assert_killed_by(struct sandbox *sb, int sig, const char *what)
{
	int st = end_of(sb);

	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == sig,
		  "%s: the child was not killed by signal %d (status 0x%x)",
		  what, sig, st);
	sandbox_stop(sb);
}

static int start(struct sandbox *sb, int (*serve)(int, void *), void *arg)
{
	int rc = sandbox_start(sb, arch_audit, NULL, serve, arg);

	cr_assert_eq(rc, 0, "sandbox_start: %s", strerror(-rc));
	return sb->fd;
}

/* ---- what it may do ------------------------------------------------------ */

static int echo_with_memory(int fd, void *arg)
{
	char buf[64];
	ssize_t n;
	char *big = malloc(4 << 20);

	(void)arg;
	if (!big)
		return 3;
	memset(big, 1, 4 << 20);
	free(big);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (write(fd, buf, (size_t)n) != n)
			return 4;
	return 0;
}

Test(sandbox, reads_writes_allocates_and_exits)
{
	struct sandbox sb;
	int fd = start(&sb, echo_with_memory, NULL), st;
	char buf[16] = "";

	cr_assert_eq(write(fd, "hello", 5), 5);
	cr_assert_eq(read(fd, buf, sizeof(buf)), 5);
	cr_assert_str_eq(buf, "hello");
	shutdown(fd, SHUT_WR);
	st = end_of(&sb);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
	sandbox_stop(&sb);
}

/* ---- what it may not ----------------------------------------------------- */

/* Blocks until memsnap's end closes: /proc/CHILD can be read meanwhile. */
static int wait_for_eof(int fd, void *arg)
{
	char c;

	(void)arg;
	while (read(fd, &c, 1) > 0)
		;
	return 0;
}

static bool status_line(pid_t pid, const char *key, char *val, size_t size)
{
	char path[64], line[512];
	FILE *f;
	bool found = false;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	while (!found && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)) && line[strlen(key)] == ':') {
			snprintf(val, size, "%s", line + strlen(key) + 1);
			val[strcspn(val, "\n")] = '\0';
			found = true;
		}
	fclose(f);
	return found;
}

/* The status line @key of the child, once it has locked itself in
 * (Seccomp: 2 is the last thing it sets). */
static void child_status(pid_t pid, const char *key, char *val, size_t size)
{
	char sc[32] = "";
	int i;

	for (i = 0; i < 1000; i++) {
		if (status_line(pid, "Seccomp", sc, sizeof(sc)) &&
		    strstr(sc, "2"))
			break;
		usleep(10000);
	}
	cr_assert(strstr(sc, "2"), "the child never entered its filter");
	cr_assert(status_line(pid, key, val, size), "no %s line", key);
}

Test(sandbox, has_no_credentials_capabilities_or_descriptors)
{
	struct sandbox sb;
	char v[256], path[64];
	DIR *d;
	struct dirent *e;
	int fds = 0;

	start(&sb, wait_for_eof, NULL);
	child_status(sb.pid, "NoNewPrivs", v, sizeof(v));
	cr_expect_eq(atoi(v), 1, "NoNewPrivs:%s", v);
	child_status(sb.pid, "CapEff", v, sizeof(v));
	cr_expect_eq(strtoull(v, NULL, 16), 0, "CapEff:%s", v);
	child_status(sb.pid, "CapPrm", v, sizeof(v));
	cr_expect_eq(strtoull(v, NULL, 16), 0, "CapPrm:%s", v);
	child_status(sb.pid, "CapAmb", v, sizeof(v));
	cr_expect_eq(strtoull(v, NULL, 16), 0, "CapAmb:%s", v);
	if (!geteuid()) {
		child_status(sb.pid, "Uid", v, sizeof(v));
		cr_expect_str_eq(v, "\t65534\t65534\t65534\t65534", "Uid:%s",
				 v);
		child_status(sb.pid, "Gid", v, sizeof(v));
		cr_expect_str_eq(v, "\t65534\t65534\t65534\t65534", "Gid:%s",
				 v);
		child_status(sb.pid, "Groups", v, sizeof(v));
		cr_expect_eq(strspn(v, " \t"), strlen(v), "Groups:%s", v);
	}
	/* one descriptor: its end of the socket */
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)sb.pid);
	d = opendir(path);
	cr_assert_not_null(d, "%s: %s", path, strerror(errno));
	while ((e = readdir(d)))
		fds += e->d_name[0] != '.';
	closedir(d);
	cr_expect_eq(fds, 1, "the child holds %d descriptors", fds);
	sandbox_stop(&sb);
}

static int try_open(int fd, void *arg)
{
	(void)fd;
	return open(arg, O_RDONLY) >= 0 ? 0 : 9;
}

Test(sandbox, opening_a_file_kills_it)
{
	struct sandbox sb;

	char path[] = "/etc/hostname";

	start(&sb, try_open, path);
	assert_killed_by(&sb, SIGSYS, "open");
}

static int try_exec_mapping(int fd, void *arg)
{
	(void)fd;
	(void)arg;
	return mmap(NULL, 4096, PROT_READ | PROT_EXEC,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED ? 9 : 0;
}

Test(sandbox, executable_memory_kills_it)
{
	struct sandbox sb;

	start(&sb, try_exec_mapping, NULL);
	assert_killed_by(&sb, SIGSYS, "mmap(PROT_EXEC)");
}

static int try_mprotect_exec(int fd, void *arg)
{
	static char page[8192] __attribute__((aligned(4096)));

	(void)fd;
	(void)arg;
	return mprotect(page, 4096, PROT_READ | PROT_EXEC) ? 9 : 0;
}

Test(sandbox, making_memory_executable_kills_it)
{
	struct sandbox sb;

	start(&sb, try_mprotect_exec, NULL);
	assert_killed_by(&sb, SIGSYS, "mprotect(PROT_EXEC)");
}

static int try_signal(int fd, void *arg)
{
	(void)fd;
	/* raw: getppid() would already be refused */
	return syscall(SYS_kill, *(pid_t *)arg, 0) ? 9 : 0;
}

Test(sandbox, signalling_memsnap_kills_it)
{
	struct sandbox sb;
	pid_t me = getpid();

	start(&sb, try_signal, &me);
	assert_killed_by(&sb, SIGSYS, "kill");
}

static int try_socket(int fd, void *arg)
{
	(void)fd;
	(void)arg;
	return socket(AF_UNIX, SOCK_STREAM, 0) >= 0 ? 0 : 9;
}

Test(sandbox, a_new_socket_kills_it)
{
	struct sandbox sb;

	start(&sb, try_socket, NULL);
	assert_killed_by(&sb, SIGSYS, "socket");
}

static int crash(int fd, void *arg)
{
	volatile int *wild = arg;

	(void)fd;
	*wild = 1;
	return 0;
}

/* A parser's crash is the child's: memsnap sees how it ended and goes
 * on (and a second child works). */
Test(sandbox, a_crash_costs_only_the_child)
{
	struct sandbox sb;
	char buf[64];
	int fd, st;

	start(&sb, crash, (void *)(uintptr_t)16);
#if defined(__SANITIZE_ADDRESS__)
	/* ASan's handler takes the SIGSEGV, and its report makes calls
	 * the filter kills */
	assert_killed_by(&sb, SIGSYS, "a wild write");
#else
	assert_killed_by(&sb, SIGSEGV, "a wild write");
#endif
	fd = start(&sb, echo_with_memory, NULL);
	cr_assert_str_eq(sandbox_status(&sb, buf, sizeof(buf)), "running");
	cr_assert_eq(write(fd, "x", 1), 1);
	cr_assert_eq(read(fd, buf, sizeof(buf)), 1);
	shutdown(fd, SHUT_WR);
	st = end_of(&sb);
	cr_assert(WIFEXITED(st), "status 0x%x", st);
	cr_assert_str_eq(sandbox_status(&sb, buf, sizeof(buf)),
			 "exited with status 0");
	sandbox_stop(&sb);
}

static int hog(int fd, void *arg)
{
	size_t n = 2 * SANDBOX_MEMORY;
	char *p = malloc(n);

	(void)arg;
	return write(fd, p ? "got" : "nomem", p ? 3 : 5) > 0 ? 0 : 3;
}

/* Memory a hostile table could make it allocate is bounded. */
Test(sandbox, memory_is_bounded)
{
	struct sandbox sb;
	char buf[16] = "";
	int fd;

#if defined(__SANITIZE_ADDRESS__)
	cr_skip_test("AddressSanitizer needs terabytes of address space: "
		     "the child has no RLIMIT_AS in this build");
#endif
	fd = start(&sb, hog, NULL);
	cr_assert_gt(read(fd, buf, sizeof(buf) - 1), 0);
	cr_assert_str_eq(buf, "nomem");
	end_of(&sb);
	sandbox_stop(&sb);
}
