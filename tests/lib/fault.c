/*
 * The fault tests' library (fault.h): a target's threads read from
 * /proc/PID/task, memsnap run through /bin/sh, in the background, or
 * under ptrace.
 */
#include "fault.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

void (*skip_cleanup)(void);

void skip_test(const char *fmt, ...)
{
	char why[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (skip_cleanup)
		skip_cleanup();
	cr_skip_test("%s", why);
}

void known_bug(const char *where)
{
	if (!getenv("MEMSNAP_KNOWN_BUGS"))
		skip_test("KNOWN BUG (%s); run with MEMSNAP_KNOWN_BUGS=1 to "
			  "see it fail", where);
}

long fault_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

void fault_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

bool task_state(pid_t pid, pid_t tid, char *state, pid_t *tracer)
{
	char path[96], buf[4096];
	const char *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid,
		 (int)tid);
	f = fopen(path, "re");
	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	*state = p && p[1] && p[2] ? p[2] : '?';
	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid,
		 (int)tid);
	f = fopen(path, "re");
	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strstr(buf, "\nTracerPid:");
	*tracer = p ? (pid_t)atoi(p + 11) : -1;
	return true;
}

bool threads_free(pid_t pid, char *why, size_t size)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	bool ok = true;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d) {
		snprintf(why, size, "%s: %s", path, strerror(errno));
		return false;
	}
	while (ok && (e = readdir(d))) {
		pid_t tid = (pid_t)atoi(e->d_name), tracer;
		char st;

		if (tid <= 0 || !task_state(pid, tid, &st, &tracer))
			continue;
		if (st == 't' || st == 'T' || tracer) {
			snprintf(why, size,
				 "thread %d of pid %d: state %c, traced by %d",
				 (int)tid, (int)pid, st, (int)tracer);
			ok = false;
		}
	}
	closedir(d);
	return ok;
}

void assert_threads_free(pid_t pid, const char *when)
{
	char why[256];
	long deadline = fault_now_ms() + 2000;

	while (!threads_free(pid, why, sizeof(why)) &&
	       fault_now_ms() < deadline)
		fault_sleep_ms(1);
	cr_assert(threads_free(pid, why, sizeof(why)), "%s: %s", when, why);
}

void assert_untouched(struct fixture *f, const char *when)
{
	char why[256];

	assert_threads_free(f->pid, when);
	cr_assert(fixture_healthy(f, why, sizeof(why)), "%s: %s", when, why);
}

size_t count_lines(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

const char *sh_quote(const char *s, char *buf, size_t size)
{
	size_t o = 0;

	if (o + 1 < size)
		buf[o++] = '\'';
	for (; *s && o + 5 < size; s++) {
		if (*s == '\'') {
			memcpy(buf + o, "'\\''", 4);
			o += 4;
		} else {
			buf[o++] = *s;
		}
	}
	if (o + 1 < size)
		buf[o++] = '\'';
	buf[o] = '\0';
	return buf;
}

int run_memsnap_after(struct run *r, const char *pre,
		      const char *const args[])
{
	const char *bin = getenv("MEMSNAP_BIN");
	char cmd[8192], q[1024];
	size_t o;
	int i;

	o = (size_t)snprintf(cmd, sizeof(cmd), "%s%sexec %s", pre,
			     pre[0] ? " && " : "",
			     sh_quote(bin ? bin : "./memsnap", q, sizeof(q)));
	for (i = 0; args[i] && o < sizeof(cmd); i++)
		o += (size_t)snprintf(cmd + o, sizeof(cmd) - o, " %s",
				      sh_quote(args[i], q, sizeof(q)));
	cr_assert_lt(o, sizeof(cmd), "command line too long");
	return run_shell(r, cmd);
}

bool memsnap_sanitized(void)
{
	const char *bin = getenv("MEMSNAP_BIN");
	char cmd[1200], q[1024];
	struct run r;
	bool yes;

	snprintf(cmd, sizeof(cmd), "nm -D %s 2>/dev/null | grep -c __asan_init",
		 sh_quote(bin ? bin : "./memsnap", q, sizeof(q)));
	if (run_shell(&r, cmd))
		return false;
	yes = atoi(r.out) > 0;
	run_free(&r);
	return yes;
}

void bg_start(struct bg *b, const char *const args[])
{
	const char *bin = getenv("MEMSNAP_BIN");
	char *argv[32];
	int out[2], err[2];
	size_t i;

	argv[0] = (char *)(bin ? bin : "./memsnap");
	for (i = 0; args[i] && i + 2 < 32; i++)
		argv[i + 1] = (char *)args[i];
	argv[i + 1] = NULL;
	cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(err, O_CLOEXEC), 0);
	b->pid = fork();
	cr_assert_geq(b->pid, 0);
	if (b->pid == 0) {
		dup2(out[1], 1);
		dup2(err[1], 2);
		execv(argv[0], argv);
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	b->out = out[0];
	b->err = err[0];
}

char *bg_slurp(int fd)
{
	size_t len = 0, cap = 4096;
	char *s = malloc(cap);
	ssize_t n;

	cr_assert_not_null(s);
	while ((n = read(fd, s + len, cap - len - 1)) > 0 ||
	       (n < 0 && errno == EINTR)) {
		if (n < 0)
			continue;
		len += (size_t)n;
		if (cap - len < 2) {
			cap *= 2;
			s = realloc(s, cap);
			cr_assert_not_null(s);
		}
	}
	s[len] = '\0';
	close(fd);
	return s;
}

void bg_finish(struct bg *b, struct run *r)
{
	int status;

	memset(r, 0, sizeof(*r));
	while (waitpid(b->pid, &status, 0) < 0)
		cr_assert_eq(errno, EINTR, "waitpid: %s", strerror(errno));
	r->status = WIFEXITED(status) ? WEXITSTATUS(status)
				      : 128 + WTERMSIG(status);
	r->out = bg_slurp(b->out);
	r->err = bg_slurp(b->err);
	b->pid = -1;
}

/* A syscall entry as PTRACE_GET_SYSCALL_INFO gives it, on any CPU
 * (the kernel's struct ptrace_syscall_info, which glibc 2.36 lacks). */
struct sc_info {
	uint8_t op;		/* 1: PTRACE_SYSCALL_INFO_ENTRY */
	uint8_t pad[3];
	uint32_t arch;
	uint64_t instruction_pointer, stack_pointer;
	uint64_t nr;
	uint64_t args[6];
	uint32_t ret_data;
	uint32_t pad2;
};

/*
 * The environment for a traced memsnap, built before the fork: a
 * sanitizer build's leak check stops memsnap's threads with ptrace at
 * exit, which it cannot do while memsnap is traced, and would abort
 * (exit 134) a run that the test never let go.  Off for such a run.
 */
static char **env_untraceable_leak_check(char *opts, size_t len)
{
	const char *old = getenv("ASAN_OPTIONS");
	size_t n = 0, i, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 2, sizeof(*env));
	cr_assert_not_null(env);
	for (i = 0; i < n; i++)
		if (strncmp(environ[i], "ASAN_OPTIONS=", 13))
			env[k++] = environ[i];
	snprintf(opts, len, "ASAN_OPTIONS=%s%sdetect_leaks=0",
		 old ? old : "", old && old[0] ? ":" : "");
	env[k] = opts;
	return env;
}

bool run_traced(const char *const args[],
		bool (*match)(const struct sc_entry *), bool (*act)(pid_t),
		struct run *r)
{
	const char *bin = getenv("MEMSNAP_BIN");
	char *argv[32], **env, opts[1024];
	int out[2], err[2], status;
	bool matched = false;
	pid_t m;
	size_t i;

	argv[0] = (char *)(bin ? bin : "./memsnap");
	for (i = 0; args[i] && i + 2 < 32; i++)
		argv[i + 1] = (char *)args[i];
	argv[i + 1] = NULL;
	env = env_untraceable_leak_check(opts, sizeof(opts));
	cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(err, O_CLOEXEC), 0);
	m = fork();
	cr_assert_geq(m, 0);
	if (m == 0) {
		dup2(out[1], 1);
		dup2(err[1], 2);
		if (ptrace(PTRACE_TRACEME, 0, 0, 0))
			_exit(126);
		raise(SIGSTOP);
		execve(argv[0], argv, env);
		_exit(127);
	}
	free(env);
	close(out[1]);
	close(err[1]);
	cr_assert_eq(waitpid(m, &status, 0), m);
	cr_assert(WIFSTOPPED(status), "memsnap did not stop for tracing");
	cr_assert_eq(ptrace(PTRACE_SETOPTIONS, m, 0,
			    PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL |
				    PTRACE_O_TRACEEXEC), 0);
	cr_assert_eq(ptrace(PTRACE_SYSCALL, m, 0, 0), 0);
	for (;;) {
		int sig = 0;

		cr_assert_eq(waitpid(m, &status, 0), m);
		if (WIFEXITED(status) || WIFSIGNALED(status))
			break;
		if (WSTOPSIG(status) == (SIGTRAP | 0x80)) {
			struct sc_info si = { 0 };
			struct sc_entry e = { 0 };

			cr_assert_gt(ptrace(PTRACE_GET_SYSCALL_INFO, m,
					    sizeof(si), &si), 0);
			if (si.op == 1) {
				e.nr = (long)si.nr;
				memcpy(e.args, si.args, sizeof(e.args));
			}
			if (si.op == 1 && match(&e)) {
				matched = true;
				if (act(m))
					kill(m, SIGKILL);
				else
					cr_assert_eq(ptrace(PTRACE_DETACH, m, 0,
							    0), 0);
				cr_assert_eq(waitpid(m, &status, 0), m);
				break;
			}
		} else if (status >> 16 == 0 && WSTOPSIG(status) != SIGTRAP) {
			/* A signal for memsnap: deliver it. */
			sig = WSTOPSIG(status);
		}
		cr_assert_eq(ptrace(PTRACE_SYSCALL, m, 0, sig), 0);
	}
	memset(r, 0, sizeof(*r));
	r->status = WIFEXITED(status) ? WEXITSTATUS(status)
				      : 128 + WTERMSIG(status);
	r->out = bg_slurp(out[0]);
	r->err = bg_slurp(err[0]);
	return matched;
}

uint64_t prng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

int stub_pages(pid_t pid)
{
	char path[64], line[512];
	FILE *maps;
	int mem, n = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	maps = fopen(path, "re");
	cr_assert_not_null(maps);
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	mem = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(mem, 0);
	while (fgets(line, sizeof(line), maps)) {
		unsigned long long lo, hi;
		char perms[8], sig[16];
		int end = 0;

		if (sscanf(line, "%llx-%llx %7s %*s %*s %*s%n", &lo, &hi, perms,
			   &end) < 3 || strcmp(perms, "r-xp"))
			continue;
		while (line[end] == ' ')
			end++;
		if (line[end] != '\n' && line[end] != '\0')
			continue; /* file-backed or [vdso] */
		if (pread(mem, sig, sizeof(sig), (off_t)lo) == sizeof(sig) &&
		    !memcmp(sig, "memsnap-stub-v", 14))
			n++;
	}
	close(mem);
	fclose(maps);
	return n;
}
