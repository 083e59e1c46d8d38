#ifndef MEMSNAP_COMMON_SANDBOX_H
#define MEMSNAP_COMMON_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * A child process with no rights, for parsers that read bytes a hostile
 * target wrote (its unwind tables, its registers and stacks).  A bug in
 * such a parser then costs a failed answer, never root's process: the
 * child can only read and write the one socket it shares with memsnap,
 * manage its own memory, and exit.
 *
 * Before running @serve the child, forked from memsnap:
 *   - closes every descriptor but its end of the socket;
 *   - sets RLIMIT_CORE, RLIMIT_FSIZE and RLIMIT_NPROC to 0, RLIMIT_NOFILE
 *     to what it holds, and RLIMIT_AS to SANDBOX_MEMORY (not in a build
 *     with AddressSanitizer, whose shadow is terabytes of address space),
 *     or what sandbox_opts says;
 *   - as root: drops its supplementary groups and becomes uid and gid
 *     65534 (nobody), which clears every capability;
 *   - PR_SET_DUMPABLE 0 (a process of that uid cannot trace it or read
 *     its memory), PR_SET_PDEATHSIG SIGKILL, PR_SET_NO_NEW_PRIVS 1;
 *   - installs a seccomp filter that allows read, write, the memory
 *     calls of malloc without PROT_EXEC (brk, mmap, munmap, mremap,
 *     mprotect, madvise), rt_sigprocmask (libunwind masks signals
 *     around its locks), rt_sigreturn and exit, for this CPU's system
 *     call convention only (@audit_arch, AUDIT_ARCH_*), and the few
 *     more one user lists (struct sandbox_call), and kills the process
 *     for anything else: no open, no exec, no socket, no ptrace, no
 *     signal to anyone.
 * Any step that fails kills the child before @serve runs.
 *
 * Under valgrind the child keeps its RLIMIT_NOFILE (valgrind refuses a
 * lower one: its own descriptors sit at the top) and its RLIMIT_FSIZE
 * (valgrind writes the child's errors to its log file), and installs no
 * filter (valgrind 3.19 fails seccomp(2) with ENOSYS, and a filter would
 * judge valgrind's own calls too); everything else is done.  Only the
 * operator can run memsnap under valgrind.
 *
 * The socket is SOCK_SEQPACKET: each write() is one message, each
 * read() one message (cut to the buffer).  memsnap must treat every
 * message from the child as it treats the target's bytes.
 */
struct sandbox {
	pid_t pid;		/* 0: none */
	int fd;			/* memsnap's end of the socket, -1: none */
	bool reaped;
	int status;		/* waitpid()'s, once reaped */
};

/* Bytes of address space the child may map. */
#define SANDBOX_MEMORY (1ull << 30)

/*
 * A system call one user of the sandbox allows beside the fixed list
 * above (a parser that reads files memsnap opens for it needs fstat,
 * pread64, close ...).  @arg < 0: whatever its arguments; else the low
 * 32 bits of argument @arg must be one of the @nok values in @ok
 * (fcntl's command, say), or the process is killed.  With @fail set,
 * the call is not made but fails with that errno, whatever its
 * arguments: for a library that asks for something the child may not
 * have and does without (libdw's realpath() of /proc/self/fd/N).
 */
struct sandbox_call {
	long nr;		/* SYS_*, this CPU's */
	int arg;
	unsigned int nok;
	uint32_t ok[4];
	int fail;		/* an errno, or 0 */
};

/* Extra calls one sandbox may allow, at most. */
#define SANDBOX_CALLS_MAX 32

/* sandbox_opts.memory: no RLIMIT_AS at all. */
#define SANDBOX_NO_LIMIT UINT64_MAX

struct sandbox_opts {
	const struct sandbox_call *calls;	/* may be NULL */
	size_t ncalls;				/* <= SANDBOX_CALLS_MAX */
	/* RLIMIT_AS: 0 is SANDBOX_MEMORY */
	uint64_t memory;
	/* RLIMIT_NOFILE: 0 is one past the socket's number (it can hold
	 * nothing more); else room for descriptors memsnap passes it */
	unsigned long files;
};

/*
 * The AUDIT_ARCH_* of memsnap itself (the filter checks each call's
 * architecture against it): from memsnap's own ELF header, its machine,
 * class and byte order, so that no CPU's name is written here.
 */
uint32_t sandbox_native_audit(void);

/*
 * Start a child running @serve(@fd, @arg) (its return value is the
 * child's exit status).  @prepare (may be NULL) runs in the child first,
 * before it sheds anything, for what needs more than the filter allows
 * and touches nothing of the target's (a library's start-up: libunwind
 * opens a pipe once); non-zero ends the child.  0 and *@sb filled, or
 * -errno.
 */
int sandbox_start(struct sandbox *sb, uint32_t audit_arch,
		  int (*prepare)(void *arg), int (*serve)(int fd, void *arg),
		  void *arg);

/*
 * sandbox_start() with @opts (NULL: as sandbox_start()): more calls in
 * the filter, other limits.  -EINVAL for more than SANDBOX_CALLS_MAX
 * calls or a call with more than 4 values.
 */
int sandbox_start_with(struct sandbox *sb, uint32_t audit_arch,
		       const struct sandbox_opts *opts,
		       int (*prepare)(void *arg),
		       int (*serve)(int fd, void *arg), void *arg);

/*
 * In the child: end it now with @status, as @serve's return does.  It
 * does not return, but is not declared so: a sanitized build precedes
 * each call to such a function (_exit() too) with a call the filter
 * forbids.
 */
void sandbox_exit(int status);

/* Is the child still there?  (Reaps it when it is not.) */
bool sandbox_alive(struct sandbox *sb);

/*
 * How the child ended, for a message: "killed by SIGSEGV", "exited
 * with status 3", "running".  Reaps it if it has ended.
 */
const char *sandbox_status(struct sandbox *sb, char *buf, size_t size);

/*
 * Wait at most @ms for the child to end by itself, and reap it: true if
 * it did (its status in @sb->status), false if it is still running.
 * (Before Linux 5.3, without pidfd_open(), the wait has no limit.)
 */
bool sandbox_wait(struct sandbox *sb, int ms);

/* Close the socket, kill the child, reap it.  *@sb may be stopped twice. */
void sandbox_stop(struct sandbox *sb);

#endif
