#include "fixture.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

const char *fixture_path(const char *name, char *buf, size_t size)
{
	const char *dir = getenv("MEMSNAP_FIXTURES");

	snprintf(buf, size, "%s/%s", dir ? dir : "build/fixtures", name);
	return buf;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Read one line from @fd within @timeout_ms. */
static int read_line(int fd, char *buf, size_t size, int timeout_ms)
{
	long deadline = now_ms() + timeout_ms;
	size_t got = 0;

	while (got + 1 < size) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		long left = deadline - now_ms();
		ssize_t n;
		int rc;

		if (left <= 0)
			return -ETIMEDOUT;
		rc = poll(&p, 1, (int)left);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -errno;
		if (rc == 0)
			return -ETIMEDOUT;
		n = read(fd, buf + got, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		if (buf[got] == '\n')
			break;
		got++;
	}
	buf[got] = '\0';
	return 0;
}

/* What "LD_PRELOAD=<LIBDIR's jemalloc> @rest" prints, in @out. */
static void jemalloc_run(const char *rest, char *out, size_t size)
{
	char cmd[256];
	size_t n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "LD_PRELOAD=" LIBDIR "libjemalloc.so.2 %s",
		 rest);
	p = popen(cmd, "r");
	if (p) {
		n = fread(out, 1, size - 1, p);
		pclose(p);
	}
	out[n] = '\0';
}

bool jemalloc_can_profile(void)
{
	static int known = -1;
	char out[512];

	if (known >= 0)
		return known;
	/* jemalloc built without --enable-prof rejects the option (at its
	 * first malloc: a program that allocates) */
	jemalloc_run("MALLOC_CONF=prof:true /bin/ls -d / 2>&1", out,
		     sizeof(out));
	known = !strstr(out, "Invalid conf pair: prof");
	return known;
}

void need_jemalloc_profiling(void)
{
	if (!jemalloc_can_profile())
		cr_skip_test("Debian's jemalloc on this CPU is built without "
			     "profiling (config.prof is false): no heap profile "
			     "to ask for");
}

const char *jemalloc_version(void)
{
	static char version[64];
	static bool known;
	char out[256];
	const char *v;

	if (known)
		return version;
	known = true;
	/* stats_print at exit: the report starts with 'Version: "5.1.0..."' */
	jemalloc_run("MALLOC_CONF=stats_print:true /bin/true 2>&1", out,
		     sizeof(out));
	v = strstr(out, "Version: \"");
	if (v)
		sscanf(v + 10, "%63[^\"]", version);
	return version;
}

/* A jemalloc target started to profile, or a test of the words
 * memsnap has for one that could but does not. */
static bool wants_profiling(char *const env[])
{
	size_t i;

	for (i = 0; env && env[i]; i++)
		if (strstr(env[i], "MALLOC_CONF=") && strstr(env[i], "prof"))
			return true;
	return false;
}

/* The environment of a fixture, built before the fork (only
 * async-signal-safe calls follow it: the test may have threads): ours
 * without the names @env and the protocol set, then those. */
static char **fixture_env(char *const env[])
{
	static char ready[] = "MEMSNAP_READY_FD=3";
	static char control[] = "MEMSNAP_CONTROL_FD=4";
	size_t n = 0, i, j, cap = 3;
	char **v;

	for (i = 0; environ[i]; i++)
		cap++;
	for (i = 0; env && env[i]; i++)
		cap++;
	v = calloc(cap, sizeof(*v));
	if (!v)
		return NULL;
	for (i = 0; environ[i]; i++) {
		size_t len = strcspn(environ[i], "=");
		bool replaced = !strncmp(environ[i], ready, len + 1) ||
				!strncmp(environ[i], control, len + 1);

		for (j = 0; env && env[j] && !replaced; j++)
			replaced = !strncmp(environ[i], env[j], len + 1);
		if (!replaced)
			v[n++] = environ[i];
	}
	for (i = 0; env && env[i]; i++)
		v[n++] = env[i];
	v[n++] = ready;
	v[n++] = control;
	return v;
}

int fixture_start_at_pid(struct fixture *f, char *const argv[],
			 char *const env[], int timeout_ms, pid_t want)
{
	struct clone_args ca = { .exit_signal = SIGCHLD };
	pid_t tid[1] = { want };
	int from[2], to[2];
	char line[sizeof(f->ready)];
	char **envp;
	long pid;
	int rc;

	if (wants_profiling(env))
		need_jemalloc_profiling();
	memset(f, 0, sizeof(*f));
	f->pid = -1;
	envp = fixture_env(env);
	if (!envp)
		return -ENOMEM;
	if (pipe2(from, O_CLOEXEC)) {
		free(envp);
		return -errno;
	}
	if (pipe2(to, O_CLOEXEC)) {
		rc = -errno;
		close(from[0]);
		close(from[1]);
		free(envp);
		return rc;
	}
	if (want) {
		ca.set_tid = (uint64_t)(uintptr_t)tid;
		ca.set_tid_size = 1;
		pid = syscall(SYS_clone3, &ca, sizeof(ca));
	} else {
		pid = fork();
	}
	if (pid == 0) {
		/* fd 3 and 4 by contract; dup2 clears O_CLOEXEC. */
		if (dup2(from[1], 3) < 0 || dup2(to[0], 4) < 0)
			_exit(127);
		execve(argv[0], argv, envp);
		_exit(127);
	}
	rc = pid < 0 ? -errno : 0;
	free(envp);
	close(from[1]);
	close(to[0]);
	if (rc) {
		close(from[0]);
		close(to[1]);
		return rc;
	}
	f->pid = (pid_t)pid;
	f->from_fd = from[0];
	f->to_fd = to[1];
	rc = read_line(f->from_fd, line, sizeof(line), timeout_ms);
	if (!rc && strncmp(line, "R", 1))
		rc = -EPROTO;
	if (rc) {
		fixture_stop(f);
		return rc;
	}
	/* "R" or "R text": keep the text. */
	snprintf(f->ready, sizeof(f->ready), "%s", line[1] ? line + 2 : "");
	return 0;
}

int fixture_start(struct fixture *f, char *const argv[], char *const env[],
		  int timeout_ms)
{
	return fixture_start_at_pid(f, argv, env, timeout_ms, 0);
}

int fixture_command(struct fixture *f, char cmd, char *reply, size_t size,
		    int timeout_ms)
{
	if (write(f->to_fd, &cmd, 1) != 1)
		return -errno;
	return read_line(f->from_fd, reply, size, timeout_ms);
}

char fixture_state(const struct fixture *f)
{
	char path[64], buf[512];
	const char *p;
	FILE *fp;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)f->pid);
	fp = fopen(path, "re");
	if (!fp)
		return '?';
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] && p[2] ? p[2] : '?';
}

bool fixture_healthy(struct fixture *f, char *why, size_t size)
{
	char reply[256], st = fixture_state(f);
	int rc;

	if (st == '?' || st == 'Z' || st == 'X' || st == 'T' || st == 't') {
		snprintf(why, size, "fixture %d is in state %c", (int)f->pid,
			 st);
		return false;
	}
	/* Longer than any fixture waits for itself (soak-target: 60 s). */
	rc = fixture_command(f, 'p', reply, sizeof(reply), 90000);
	if (rc) {
		snprintf(why, size, "fixture %d did not answer a ping: %s",
			 (int)f->pid, strerror(-rc));
		return false;
	}
	if (strcmp(reply, "ok")) {
		snprintf(why, size, "fixture %d says: %s", (int)f->pid, reply);
		return false;
	}
	return true;
}

void fixture_assert_healthy(struct fixture *f)
{
	char why[256];

	cr_assert(fixture_healthy(f, why, sizeof(why)), "%s", why);
}

size_t dir_count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	cr_assert_not_null(d, "%s: %s", dir, strerror(errno));
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

void fixture_stop(struct fixture *f)
{
	if (f->pid > 0) {
		kill(f->pid, SIGKILL);
		while (waitpid(f->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	if (f->from_fd > 0)
		close(f->from_fd);
	if (f->to_fd > 0)
		close(f->to_fd);
	f->pid = -1;
	f->from_fd = f->to_fd = -1;
}

/* Drain two pipes into strings until both reach EOF. */
static int drain(int out_fd, int err_fd, char **out, char **err)
{
	int fds[2] = { out_fd, err_fd };
	char **dst[2] = { out, err };
	size_t len[2] = { 0, 0 }, cap[2] = { 0, 0 };
	bool open_[2] = { true, true };
	int i;

	*out = *err = NULL;
	while (open_[0] || open_[1]) {
		struct pollfd p[2];
		int np = 0, idx[2];

		for (i = 0; i < 2; i++)
			if (open_[i]) {
				p[np] = (struct pollfd){ .fd = fds[i],
							 .events = POLLIN };
				idx[np++] = i;
			}
		if (poll(p, (nfds_t)np, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (i = 0; i < np; i++) {
			int k = idx[i];
			char buf[4096];
			ssize_t n;

			if (!p[i].revents)
				continue;
			n = read(fds[k], buf, sizeof(buf));
			if (n <= 0) {
				open_[k] = false;
				continue;
			}
			if (len[k] + (size_t)n + 1 > cap[k]) {
				char *nb;

				cap[k] = (len[k] + (size_t)n + 1) * 2;
				nb = realloc(*dst[k], cap[k]);
				if (!nb)
					return -ENOMEM;
				*dst[k] = nb;
			}
			memcpy(*dst[k] + len[k], buf, (size_t)n);
			len[k] += (size_t)n;
			(*dst[k])[len[k]] = '\0';
		}
	}
	for (i = 0; i < 2; i++)
		if (!*dst[i])
			*dst[i] = strdup("");
	return 0;
}

int run_argv_with(struct run *r, char *const argv[], void (*setup)(void *),
		  void *arg)
{
	struct rusage ru;
	int out[2], err[2], status, rc;
	pid_t pid;

	memset(r, 0, sizeof(*r));
	if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		dup2(out[1], 1);
		dup2(err[1], 2);
		if (setup)
			setup(arg);
		execv(argv[0], argv);
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	rc = drain(out[0], err[0], &r->out, &r->err);
	close(out[0]);
	close(err[0]);
	while (wait4(pid, &status, 0, &ru) < 0)
		if (errno != EINTR)
			return -errno;
	r->status = WIFEXITED(status) ? WEXITSTATUS(status)
				      : 128 + WTERMSIG(status);
	r->maxrss_kb = ru.ru_maxrss;
	return rc;
}

static int run_argv(struct run *r, char *const argv[])
{
	return run_argv_with(r, argv, NULL, NULL);
}

int run_memsnap(struct run *r, const char *const args[])
{
	const char *bin = getenv("MEMSNAP_BIN");
	char *argv[64];
	size_t i;

	argv[0] = (char *)(bin ? bin : "./memsnap");
	for (i = 0; args[i] && i + 2 < 64; i++)
		argv[i + 1] = (char *)args[i];
	argv[i + 1] = NULL;
	return run_argv(r, argv);
}

int run_shell(struct run *r, const char *cmd)
{
	char *argv[] = { (char *)"/bin/sh", (char *)"-c", (char *)cmd, NULL };

	return run_argv(r, argv);
}

void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

/* The ptrace stops of the borrowed thread in @r's timings line. */
unsigned int ptrace_stops(const struct run *r)
{
	const char *p = strstr(r->err, " ptrace stops)");
	const char *q = p;

	cr_assert_not_null(p, "no ptrace stops in: %s", r->err);
	while (q > r->err && q[-1] >= '0' && q[-1] <= '9')
		q--;
	cr_assert(q < p && q[-1] == '(', "no count before: %s", r->err);
	return (unsigned int)strtoul(q, NULL, 10);
}
