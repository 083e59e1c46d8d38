#ifndef MEMSNAP_INJECTOR_INJECT_H
#define MEMSNAP_INJECTOR_INJECT_H

#include "common/diag.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct procinfo;
struct maps;

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
 * A relocation writes one buffer's remote address into another buffer
 * (a struct passed by pointer that points at a string).
 */

#define INJECT_MAX_ARGS 6
#define INJECT_MAX_BUFS 8
#define INJECT_MAX_BUF_BYTES (32 * 1024) /* all buffers of one call */
#define INJECT_MAX_RELOCS 4

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

/* The 8 bytes at @off in bufs[@buf] become the remote address of
 * bufs[@target]. */
struct inject_reloc {
	unsigned int buf, target;
	size_t off;
};

struct inject_call {
	uint64_t fn; /* runtime address of the function */
	struct inject_arg args[INJECT_MAX_ARGS];
	unsigned int nargs;
	struct inject_buf bufs[INJECT_MAX_BUFS];
	unsigned int nbufs;
	struct inject_reloc relocs[INJECT_MAX_RELOCS];
	unsigned int nrelocs;
	/*
	 * 1 + the index of a buffer holding a struct inject_chain (0: none).
	 * If memsnap gives up on the call (-ETIMEDOUT), it sets that
	 * chain's @abandoned before it lets the thread go.
	 */
	unsigned int chain_buf;
	/*
	 * 1 + the index of the buffer a function returning a struct in
	 * memory (glibc's mallinfo2()) writes it to (0: none); passed the
	 * ABI's way, not as one of @args.
	 */
	unsigned int sret_buf;
	/*
	 * The function leaves errno alone (memsnap's own code: the
	 * sampler's, the stub's system call helper): the thread's errno
	 * is not asked for on its account.
	 */
	bool errno_kept;
};

/*
 * The argument of INJECT_HELPER_CHAIN (see there), placed in a buffer.
 * Every field is 8 bytes, on every architecture.
 */
struct inject_chain {
	uint64_t fn, a0, a1, a2;  /* ret = fn(a0, a1, a2) */
	uint64_t nz_fn, nz_a0;	  /* then, if ret != 0: nz_fn(nz_a0, t_a1) */
	uint64_t z_fn, z_a0;	  /* or, if ret == 0: z_fn(z_a0, t_a1) */
	uint64_t t_a1;
	uint64_t flags;		  /* INJECT_CHAIN_* */
	uint64_t abandoned;	  /* set by memsnap when it gave up */
	uint64_t ret;
};

/* The follow-up runs whatever happens, not only after a timeout. */
#define INJECT_CHAIN_ALWAYS 1u
/* nz_fn's first argument is ret instead of nz_a0. */
#define INJECT_CHAIN_NZ_GETS_RET 2u

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
	/* On failure of inject_open(), what it means (may be NULL). */
	struct diag *diag;
	/*
	 * Runtime address of __errno_location() in the target (0: errno is
	 * not saved).  When given, the borrowed thread is asked for its
	 * errno address before the first call that may change it (one not
	 * errno_kept), and every call after puts the saved value back, also
	 * on the self-healing path.
	 */
	uint64_t errno_location;
	/*
	 * Field 22 of /proc/PID/stat when memsnap first looked at the
	 * process (0: not checked).  inject_open() pins the process with a
	 * pidfd and refuses (-ESRCH) if the pid names one that started at
	 * another time, or if that one exits before a thread is stopped:
	 * what was triaged is never called into in a process that reused
	 * its pid.
	 */
	uint64_t start_time;
	/*
	 * What the caller loaded once (a process view), so the engine reads
	 * none of it again; each may be left out (NULL; 0 for @pidfd), and
	 * the engine reads what it needs itself.  @pidfd: opened before @pi and @maps
	 * were read, and kept open by the caller: the process is then known
	 * to be the one read as long as it has not exited, with no start
	 * time to compare.  @pi: its state (zombie, job-stopped, kernel
	 * thread).  @maps: where the engine looks for stacks, the stub page
	 * and gadgets (read again only for a stack newer than it).
	 */
	int pidfd;
	const struct procinfo *pi;
	const struct maps *maps;
};

/* Microseconds the borrowed thread spent stopped, per phase. */
struct inject_timings {
	uint64_t seize_us, check_us, save_us, call_us, restore_us, detach_us;
	unsigned int threads_stopped; /* 1, but every thread for the
				       * moment of inject_patch() */
	/* inject_patch(): how long every other thread was held, in all,
	 * and how many at most (0: it did not run) */
	uint64_t world_us;
	unsigned int world_threads;
	/* threads stepped out of the bytes to patch (world.c step_out()) */
	unsigned int world_stepped;
	/* ptrace stops of the borrowed thread memsnap waited for (each a
	 * switch to memsnap and back while it is held) */
	unsigned int stops;
	/* when the unwinder's sandbox was started, if it was: before the
	 * borrowed thread's stop (its stack showed a return address into
	 * the allocator: injector/thread.c), or while the thread was held */
	enum { UNWINDER_UNUSED, UNWINDER_BEFORE_STOP, UNWINDER_AT_STOP }
		unwinder;
	/* pages of the target it asked for while the thread was held (the
	 * thread's stack goes with the job; the CFI it needs is read before
	 * the stop when it can be) */
	unsigned int unwind_pages;
	/* the unwind made before the stop stood for it (injector/unwind.c) */
	bool unwind_warm;
};

struct inject_result {
	uint64_t ret; /* the return register */
};

struct inject_session;

int inject_open(pid_t pid, const struct inject_opts *opts,
		struct inject_session **out);
int inject_call(struct inject_session *s, struct inject_call *call,
		struct inject_result *res);
int inject_close(struct inject_session *s);

/*
 * Restore and detach like inject_close() but keep the session readable
 * (inject_timings() with the restore and detach phases, inject_diag(),
 * inject_backtrace()); inject_close() then only frees.  Idempotent.
 */
int inject_finish(struct inject_session *s);

/*
 * Errors (besides the usual -ENOMEM, -EIO):
 *   inject_open   -ESRCH no such process, zombie, or it exited
 *                 -EPERM/-EACCES not allowed to attach
 *                 -EBUSY every thread tried is traced by another
 *                 tracer (another memsnap: after waiting for it)
 *                 -EAGAIN stopped by job control (left stopped)
 *                 -EDEADLK no thread was safe to call from (see @why)
 *                 -EOPNOTSUPP CET shadow stack on (every candidate)
 *                 -EINTR *@interrupted was set (nothing changed)
 *                 -ENOEXEC no usable syscall instruction in the target
 *   inject_call   -ETIMEDOUT the call is still running (see above)
 *                 -EFAULT the callee faulted: the thread was restored,
 *                 the callee's work (an allocator's state) may be half
 *                 done; inject_diag() says what and where
 *                 -ESRCH the target exited or exec'ed during the call
 *                 -EINTR *@interrupted was set before the call started
 *                 -EINVAL bad @call (too many args/buffers/bytes)
 *   A call under way when *@interrupted is set is finished first.
 */

/*
 * What the session's error @rc means (common/diag.h): its kind and one
 * line ("the call faulted: SIGSEGV ...").  The failure's own, if the
 * engine understood it where it happened; else the meaning above of the
 * errno, with what the session saw last.  A failed inject_open() says
 * it in @opts->diag instead.
 */
void inject_diag(const struct inject_session *s, int rc, struct diag *d);

/* The same with no session (after it ended: an -EINTR seen since) for
 * process @pid. */
void inject_diag_of(pid_t pid, int rc, struct diag *d);

/*
 * The borrowed thread's stack (innermost first) as captured at a
 * timeout or a fault; the number of pcs stored in @pcs (at most @max).
 */
size_t inject_backtrace(const struct inject_session *s, uint64_t *pcs,
			size_t max);

/*
 * Small functions of memsnap's own in the stub page, for a target that
 * needs a function pointer or a raw system call:
 *
 *   INJECT_HELPER_SYSCALL   long helper(long nr, a1, a2, a3, a4, a5):
 *                           the raw system call, -errno on failure; its
 *                           sixth argument is a5 again (the helper leaves
 *                           that register as it is), so an anonymous
 *                           mmap(addr, len, prot, flags, 0) gets fd 0 and
 *                           offset 0
 *   INJECT_HELPER_WRITE_CB  void helper(void *fd, const char *s): write
 *                           all of s to file descriptor (int)fd; the
 *                           callback of jemalloc's malloc_stats_print()
 *   INJECT_HELPER_WRITE_CB_MSG_FIRST
 *                           void helper(const char *s, void *fd): the
 *                           same, for mimalloc's mi_stats_print_out()
 *   INJECT_HELPER_CHAIN     long helper(struct inject_chain *c): calls
 *                           c->fn, then, if INJECT_CHAIN_ALWAYS or
 *                           memsnap gave up on the call, the follow-up
 *                           for its result (which closes what the call
 *                           was given: a call that times out still
 *                           cleans up when it ends); returns fn's result
 *
 * inject_helper() gives the runtime address (valid once inject_open()
 * succeeded; the page is never unmapped, so a callback the target keeps
 * stays harmless).
 */
enum inject_helper {
	INJECT_HELPER_SYSCALL,
	INJECT_HELPER_WRITE_CB,
	INJECT_HELPER_WRITE_CB_MSG_FIRST,
	INJECT_HELPER_CHAIN,
};

uint64_t inject_helper(const struct inject_session *s, enum inject_helper h);

/* [*@lo, *@hi): the stub page (0), or -ENOENT before there is one. */
int inject_stub_range(const struct inject_session *s, uint64_t *lo,
		      uint64_t *hi);

/* The instruction set memsnap was built for ("x86_64"). */
const char *inject_arch_name(void);

/*
 * A raw system call @nr with integer arguments @args (at most 5) on the
 * borrowed thread: inject_call() of INJECT_HELPER_SYSCALL.  0 with the
 * kernel's result (-errno on failure) in *@ret, or inject_call()'s error.
 */
int inject_syscall(struct inject_session *s, long nr, const uint64_t *args,
		   unsigned int nargs, int64_t *ret);

/*
 * Write @len bytes of the target's memory at @addr while the session
 * holds its thread (a flag a call will read: gperftools' FLAGS_verbose).
 * With inject_store_word(), the only ways memory of the target is
 * written outside the engine.
 */
int inject_write(struct inject_session *s, uint64_t addr, const void *buf,
		 size_t len);

/*
 * Store @value in the aligned word at @addr of the pinned process @pin
 * while it runs, no thread stopped: for a word of memsnap's own that
 * only memsnap writes and the target reads whole (the sampler's lease,
 * sampler_renew()), never the program's memory.  Written through
 * /proc/PID/mem opened in the pinned /proc/PID: a pid taken by another
 * process meanwhile is -ESRCH, not a write.  0 or -errno.
 */
struct proc_pin;
int inject_store_word(const struct proc_pin *pin, uint64_t addr,
		      uint64_t value);

/*
 * Write @n entry-point patches (injector/patch.h) while every thread of
 * the process is stopped for the moment of the write (injector/world.c):
 * old -> new, or new -> old when @undo.  A patch whose bytes hold
 * anything but what it replaces is left alone (written already, or
 * another tool's).  *@changed: the patches written.  0; -EBUSY when a
 * thread would resume inside a jump (after a few rounds), did not stop,
 * or threads kept appearing (all "unsafe" to inject_diag(); one
 * traced by another tool is "permission"), -ESRCH, or a ptrace error;
 * inject_diag() says which thread.  The
 * one place where memsnap stops more than one thread: only for a
 * program with its allocator linked in, at `prof on|off --sampler`.
 */
struct patch_plan;
int inject_patch(struct inject_session *s, const struct patch_plan *v,
		 size_t n, bool undo, unsigned int *changed);

/* Which thread was borrowed, and the timings so far. */
pid_t inject_tid(const struct inject_session *s);
void inject_timings(const struct inject_session *s, struct inject_timings *t);

/*
 * A descriptor of memsnap's for the target's descriptor @fd: the same
 * open file, taken with pidfd_getfd() through the pidfd that pinned the
 * process (close-on-exec).  -errno: ENOSYS without a pidfd or on a
 * kernel before 5.6, EBADF, EPERM.  What the file is, the caller checks:
 * any thread of the target may have put another file at @fd.
 */
int inject_take_fd(struct inject_session *s, int fd);

/*
 * 0 if the borrowed thread's seccomp filters (if any) let system call
 * @nr with @args through; -EOPNOTSUPP otherwise, inject_diag() saying
 * what the filter would do.  inject_syscall() checks by itself; callers
 * that make system calls through a helper in other ways check first.
 */
int inject_check_syscall(struct inject_session *s, long nr,
			 const uint64_t *args, unsigned int nargs);

/* The same as a question, for a caller with another way: nothing is
 * said when the answer is no. */
bool inject_syscall_allowed(struct inject_session *s, long nr,
			    const uint64_t *args, unsigned int nargs);

/* @pc is in memsnap's stub page (a frame of the call's return path). */
bool inject_pc_in_stub(const struct inject_session *s, uint64_t pc);

#endif
