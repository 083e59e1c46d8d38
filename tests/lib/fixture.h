#ifndef MEMSNAP_TESTS_FIXTURE_H
#define MEMSNAP_TESTS_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * Test side of the fixture protocol (the program side is
 * tests/fixtures/fixture.h):
 *
 *   fd 3  fixture -> test   "R <text>\n" once ready, then replies
 *   fd 4  test -> fixture   one-byte commands; EOF makes the fixture exit
 *
 * 'p' (ping) asks the fixture to check its own invariants and answer
 * "ok\n" or "bad <why>\n".  So a test proves the target unharmed by
 * asking it, and a fixture whose test died exits by itself.
 */
struct fixture {
	pid_t pid;
	int from_fd;	  /* read replies */
	int to_fd;	  /* send commands */
	char ready[512];  /* the text after "R " */
};

/* $MEMSNAP_FIXTURES/@name into @buf. */
const char *fixture_path(const char *name, char *buf, size_t size);

/*
 * Start @argv (argv[0] is a path) with @env entries ("K=V", NULL-ended,
 * may be NULL) added to the environment, and wait up to @timeout_ms for
 * its ready line.  0 or -errno; on failure nothing is left running.
 */
/* Debian's libjemalloc.so.2 here was built with profiling (it is on
 * x86-64; not on arm64). */
bool jemalloc_can_profile(void);
/* Skip the test, saying why, when it was not. fixture_start() calls it
 * for a target whose MALLOC_CONF asks for profiling. */
void need_jemalloc_profiling(void);

/* The version of LIBDIR's libjemalloc.so.2 ("5.3.0-0-g..."), "" if it
 * cannot be told: what its stats_print says. */
const char *jemalloc_version(void);

int fixture_start(struct fixture *f, char *const argv[], char *const env[],
		  int timeout_ms);

/*
 * The same, with exactly the pid @want (clone3 set_tid: needs root and
 * Linux 5.5; the pid must be free, its process reaped): a process that
 * gets the pid of the one a test just stopped.  TMPDIR from @env
 * replaces the test's own.
 */
int fixture_start_at_pid(struct fixture *f, char *const argv[],
			 char *const env[], int timeout_ms, pid_t want);

/* Send @cmd and read one reply line into @reply.  0 or -errno. */
int fixture_command(struct fixture *f, char cmd, char *reply, size_t size,
		    int timeout_ms);

/* Alive, not stopped, and answering "ok" to a ping. */
bool fixture_healthy(struct fixture *f, char *why, size_t size);

/* The state letter from /proc/PID/stat ('?' if gone). */
char fixture_state(const struct fixture *f);

/* Fail the current Criterion test unless @f is fixture_healthy(). */
void fixture_assert_healthy(struct fixture *f);

/* Entries in directory @dir, "." and ".." aside; fails the test if it
 * cannot be read. */
size_t dir_count_entries(const char *dir);

/* SIGKILL and reap; safe to call twice. */
void fixture_stop(struct fixture *f);

struct run {
	int status;  /* exit code, or 128 + signal */
	char *out;   /* NUL-terminated stdout and stderr */
	char *err;
	long maxrss_kb;	/* the peak resident size of the process run */
};

/* The ptrace stops of the borrowed thread in @r's `--timings` line
 * (asserted there). */
unsigned int ptrace_stops(const struct run *r);

/* Run $MEMSNAP_BIN with @args (NULL-ended, without argv[0]). 0 or -errno. */
int run_memsnap(struct run *r, const char *const args[]);

/* Run @argv (argv[0] a path; output captured), after @setup(@arg) in
 * the child, just before the exec (it _exit()s on failure). */
int run_argv_with(struct run *r, char *const argv[], void (*setup)(void *),
		  void *arg);

/* Run any command line through /bin/sh -c; output captured. */
int run_shell(struct run *r, const char *cmd);

void run_free(struct run *r);

#endif
