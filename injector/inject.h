#ifndef MEMSNAP_INJECTOR_INJECT_H
#define MEMSNAP_INJECTOR_INJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Calling a function inside a live process, one thread stopped at a time.
 *
 *   struct inject_session *s;
 *   rc = inject_open(pid, &opts, &s);      triage, seize ONE thread, check
 *                                          its stack, save its state
 *   rc = inject_call(s, &call, &res);      as many calls as needed
 *   rc = inject_close(s);                  restore exactly, detach
 *
 * Every function returns 0 or -errno.  Whatever fails, inject_close()
 * (also called on error paths) leaves the thread as it was; if memsnap
 * dies at any moment, the thread restores itself.  inject_call() giving
 * -ETIMEDOUT leaves the call running: inject_close() then detaches
 * without touching it, and the thread restores itself when the call
 * returns.
 *
 * Buffers: each call may place up to INJECT_MAX_BUFS buffers in reserved
 * space on the borrowed thread's stack (below the red zone); nothing is
 * ever allocated in the target for marshalling.  An argument of kind
 * INJECT_ARG_BUF receives the remote address of buffer @buf.  After the
 * call, each buffer's @out (if not NULL) receives its final contents
 * (@len bytes), so out-parameters (mallctl's oldp/oldlenp) come back.
 */

#define INJECT_MAX_ARGS 6
#define INJECT_MAX_BUFS 8
#define INJECT_MAX_BUF_BYTES (32 * 1024) /* all buffers of one call */

enum inject_arg_kind {
	INJECT_ARG_INT,	/* @value as is */
	INJECT_ARG_BUF,	/* the remote address of bufs[@buf] */
};

struct inject_arg {
	enum inject_arg_kind kind;
	uint64_t value;
	unsigned int buf;
};

struct inject_buf {
	const void *in;	/* initial contents (NULL: zeroes) */
	void *out;	/* receives the contents after the call (or NULL) */
	size_t len;
	uint64_t remote; /* filled in: where it was placed */
};

struct inject_call {
	uint64_t fn; /* runtime address of the function */
	struct inject_arg args[INJECT_MAX_ARGS];
	unsigned int nargs;
	struct inject_buf bufs[INJECT_MAX_BUFS];
	unsigned int nbufs;
};

/* Address ranges no frame of the borrowed thread may be in. */
struct inject_range {
	uint64_t lo, hi;  /* [lo, hi) */
	const char *what; /* "jemalloc (libjemalloc.so.2)", "ld.so", ... */
};

struct inject_opts {
	pid_t tid;		/* 0: memsnap chooses the thread */
	int timeout_ms;		/* per call; 0: the default */
	const struct inject_range *forbidden;
	size_t nforbidden;
	/* Set by memsnap's SIGINT/SIGTERM/SIGHUP handler: finish or restore,
	 * then return -EINTR. */
	volatile int *interrupted;
	/* On failure of inject_open(), why, as text (one line per refused
	 * thread: "tid 4243: frame #2 in jemalloc: je_malloc+0x1c"). */
	char *why;
	size_t why_size;
};

/* Microseconds the borrowed thread spent stopped, per phase. */
struct inject_timings {
	uint64_t seize_us, check_us, save_us, call_us, restore_us, detach_us;
	unsigned int threads_stopped; /* always 1: proof for --timings */
};

struct inject_result {
	uint64_t ret; /* rax */
};

struct inject_session;

int inject_open(pid_t pid, const struct inject_opts *opts,
		struct inject_session **out);
int inject_call(struct inject_session *s, struct inject_call *call,
		struct inject_result *res);
int inject_close(struct inject_session *s);

/* Which thread was borrowed, and the timings so far. */
pid_t inject_tid(const struct inject_session *s);
void inject_timings(const struct inject_session *s, struct inject_timings *t);

#endif
