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
 *     with AddressSanitizer, whose shadow is terabytes of address space);
 *   - as root: drops its supplementary groups and becomes uid and gid
 *     65534 (nobody), which clears every capability;
 *   - PR_SET_DUMPABLE 0 (a process of that uid cannot trace it or read
 *     its memory), PR_SET_PDEATHSIG SIGKILL, PR_SET_NO_NEW_PRIVS 1;
 *   - installs a seccomp filter that allows read, write, the memory
 *     calls of malloc without PROT_EXEC (brk, mmap, munmap, mremap,
 *     mprotect, madvise), rt_sigprocmask (libunwind masks signals
 *     around its locks), rt_sigreturn and exit, for this CPU's system
 *     call convention only (@audit_arch, AUDIT_ARCH_*), and kills the
 *     process for anything else: no open, no exec, no socket, no ptrace,
 *     no signal to anyone.
 * Any step that fails kills the child before @serve runs.
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

/* Is the child still there?  (Reaps it when it is not.) */
bool sandbox_alive(struct sandbox *sb);

/*
 * How the child ended, for a message: "killed by SIGSEGV", "exited
 * with status 3", "running".  Reaps it if it has ended.
 */
const char *sandbox_status(struct sandbox *sb, char *buf, size_t size);

/* Close the socket, kill the child, reap it.  *@sb may be stopped twice. */
void sandbox_stop(struct sandbox *sb);

#endif
