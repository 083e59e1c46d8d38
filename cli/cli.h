#ifndef MEMSNAP_CLI_CLI_H
#define MEMSNAP_CLI_CLI_H

#include "common/diag.h"
#include "common/voice.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Exit codes.  Documented in README.md and `memsnap --help`; scripts
 * depend on them, so a code never changes meaning.
 */
enum {
	EXIT_OK = 0,
	EXIT_FAILURE_OTHER = 1, /* an operation failed (I/O, memory, ...) */
	EXIT_USAGE = 2,		/* bad command line */
	EXIT_NO_PROCESS = 3,	/* no such process, zombie, kernel thread */
	EXIT_PERMISSION = 4,	/* not allowed to inspect or attach */
	EXIT_NO_ALLOCATOR = 5,	/* no allocator, or it cannot do that */
	EXIT_UNSAFE = 6,	/* no thread was safe to call from */
	EXIT_TIMEOUT = 7,	/* the call did not finish in --timeout */
	EXIT_ALLOCATOR_ERROR = 8, /* the call ran; the allocator said no */
	EXIT_INTERRUPTED = 9,	/* SIGINT/SIGTERM/SIGHUP; target restored */
	EXIT_BAD_INPUT = 10,	/* an input file (dump) is unreadable */
};

struct proc_pin;

struct options {
	pid_t pid; /* 0: not given */
	/* the process @pid named when a command that runs many steps
	 * (watch) first looked: each step acts on it or stops */
	const struct proc_pin *pin;
	bool json;
	bool quiet;
	pid_t tid;		/* --thread: 0, memsnap chooses */
	int timeout_ms;		/* --timeout: 0, the engine's default */
	bool timings;		/* --timings */
	const char *allocator;	/* --allocator NAME, or NULL */
	bool no_attach;		/* info, explain --no-attach */
	uint64_t max_size;	/* --max-size: what memsnap takes from the target */
	bool all_numbers;	/* explain's reading takes every number of
				   the allocator, not only those a part or
				   finding needs (exporter) */
};

#define MAX_SIZE_DEFAULT (1ull << 30)

/* The exit status for an error of kind @kind: the one table
 * (cli/message.c). */
int diag_exit(enum diag_kind kind);

/* "memsnap: " + the formatted message + "\n" on stderr. */
void error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same, for the error a command ends with: the exit status of
 * @kind, from the one table (diag_exit()). */
int fail(enum diag_kind kind, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* error() and fail() with what @err means after the message, as
 * strerror() says it: "memsnap: dump 4242: memfd_create: Too many open
 * files".  @err is an errno, or -errno as memsnap's functions return
 * it. */
void error_errno(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int fail_errno(enum diag_kind kind, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* What to do about the error just printed: "memsnap: hint: ...". */
void hint(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * From now on every message (error, warning, hint, note) is kept in
 * @buf (@size bytes, the first one only) instead of printed; NULL
 * prints again.  For a command that counts the failures of its many
 * measurements rather than print each (exporter).
 */
void messages_capture(char *buf, size_t size);

/* "memsnap: " + the formatted message + "\n" on stderr, unless
 * --quiet: something the user should know that is not wrong. */
void note(const struct options *opt, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* "memsnap: warning: ..." unless --quiet. */
void warning(const struct options *opt, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The voice cli/ gives a model (common/voice.h): warnings as
 * warning() says them (not with --quiet), errors as error(), progress
 * on the progress line. */
struct voice cli_voice(const struct options *opt);

/*
 * Map a failure to reach pid @pid (reading /proc/PID/@what) to one error
 * line, with a diagnosis for permission errors, and return the exit code.
 */
int report_proc_error(pid_t pid, const char *what, int err);

/* "dump PID: the profile is larger than --max-size (SIZE); nothing was
 * written" */
void dump_size_error(pid_t pid, uint64_t max);

struct procinfo;

/* A 32-bit (ia32, x32) process: one error line and EXIT_NO_ALLOCATOR;
 * else EXIT_OK. */
int refuse_foreign_abi(const struct procinfo *pi);

/* `memsnap COMMAND --help`: COMMAND's help on stdout (cli/help.c);
 * false for a name that is none. */
bool print_command_help(const char *name);

int cmd_info(const struct options *opt, int argc, char **argv);
int cmd_call(const struct options *opt, int argc, char **argv);
int cmd_dump(const struct options *opt, int argc, char **argv);
int cmd_prof(const struct options *opt, int argc, char **argv);
int cmd_stats(const struct options *opt, int argc, char **argv);
int cmd_trim(const struct options *opt, int argc, char **argv);
int cmd_explain(const struct options *opt, int argc, char **argv);
int cmd_watch(const struct options *opt, int argc, char **argv);
int cmd_report(const struct options *opt, int argc, char **argv);
int cmd_exporter(const struct options *opt, int argc, char **argv);

#endif
