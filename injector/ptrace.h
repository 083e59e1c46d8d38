#ifndef MEMSNAP_INJECTOR_PTRACE_H
#define MEMSNAP_INJECTOR_PTRACE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * One traced thread: PTRACE_SEIZE, PTRACE_INTERRUPT, and waiting for its
 * stops with a deadline.  Nothing here knows the architecture: registers
 * are regsets (a note type and a buffer).  Every function returns 0 or
 * -errno; -ESRCH means the thread is gone (or not in a ptrace-stop).
 *
 * Waiting: SIGCHLD is blocked while a tracee is held (tracee_hold()) and
 * waited for with sigtimedwait(), so a deadline needs no polling and
 * memsnap's own SIGINT/SIGTERM/SIGHUP (whose handlers only set a flag)
 * wake the wait at once.
 */

struct tracee {
	pid_t pid, tid;
	bool seized;
	int memfd;		/* /proc/PID/task/TID/mem, -1 until needed */
	unsigned int stops;	/* ptrace stops tracee_wait() reported */
};

/* What one waitpid() status means for a seized thread. */
enum stop_kind {
	STOP_EVENT,		/* PTRACE_EVENT_STOP, not a group-stop */
	STOP_GROUP,		/* group-stop (job control: SIGSTOP, ...) */
	STOP_SYSCALL,		/* syscall entry or exit (TRACESYSGOOD) */
	STOP_SIGNAL,		/* signal-delivery-stop: @sig is pending */
	STOP_EXIT,		/* PTRACE_EVENT_EXIT: the thread is exiting */
	STOP_EXEC,		/* PTRACE_EVENT_EXEC */
	STOP_CLONE,		/* PTRACE_EVENT_CLONE (tracee_seize_clones()):
				   the new thread's id in tracee_eventmsg() */
	STOP_OTHER_EVENT,
	STOP_GONE,		/* exited or killed (not a stop at all) */
};

struct stop {
	enum stop_kind kind;
	int sig;		/* STOP_SIGNAL, STOP_GROUP: the signal */
	int status;		/* raw waitpid() status */
};

/* PTRACE_SEIZE @tid (with TRACESYSGOOD, TRACEEXIT, TRACEEXEC), then
 * PTRACE_INTERRUPT.  Does not wait. */
int tracee_seize(struct tracee *t, pid_t pid, pid_t tid);

/*
 * The same with PTRACE_O_TRACECLONE: a thread @tid creates from then on
 * starts traced by us, in a stop before its first instruction (a
 * STOP_EVENT), with the same options, and @tid reports STOP_CLONE.
 * Such a stop satisfies the interrupt: none follows it.
 */
int tracee_seize_clones(struct tracee *t, pid_t pid, pid_t tid);

/* A thread the kernel attached to us (the new thread of a STOP_CLONE):
 * @t seized, its first stop still to be waited for. */
void tracee_adopt(struct tracee *t, pid_t pid, pid_t tid);

/* PTRACE_GETEVENTMSG: at a STOP_CLONE, the new thread's id. */
int tracee_eventmsg(struct tracee *t, unsigned long *msg);

/*
 * Wait for the next stop of @t until @deadline_us (CLOCK_MONOTONIC
 * microseconds, 0: no deadline).  -ETIMEDOUT at the deadline, -EINTR as
 * soon as *@interrupted is set (when @interrupted is not NULL).
 */
int tracee_wait(struct tracee *t, uint64_t deadline_us,
		volatile int *interrupted, struct stop *st);

/* PTRACE_INTERRUPT. */
int tracee_interrupt(struct tracee *t);
/* PTRACE_CONT / PTRACE_SYSCALL, delivering @sig (0: none). */
int tracee_cont(struct tracee *t, int sig);
int tracee_syscall(struct tracee *t, int sig);
/* PTRACE_SINGLESTEP, delivering no signal: one instruction, then a
 * SIGTRAP stop (si_code TRAP_TRACE). */
int tracee_step(struct tracee *t);
/* PTRACE_DETACH delivering @sig; closes the mem fd.  Idempotent. */
int tracee_detach(struct tracee *t, int sig);

/* PTRACE_GETREGSET/SETREGSET of @type into/from @buf (*@len: in the
 * buffer size, out the kernel's size). */
int tracee_getregset(struct tracee *t, int type, void *buf, size_t *len);
int tracee_setregset(struct tracee *t, int type, const void *buf,
		     size_t len);

/* PTRACE_GETSIGMASK / SETSIGMASK (a 64-bit kernel sigset). */
int tracee_getsigmask(struct tracee *t, uint64_t *mask);
int tracee_setsigmask(struct tracee *t, uint64_t mask);

/* PTRACE_GETSIGINFO into a siginfo_t-sized @buf (128 bytes). */
int tracee_getsiginfo(struct tracee *t, void *buf);

/*
 * Memory through /proc/PID/task/TID/mem: works on pages the target may
 * not write itself (FOLL_FORCE), such as an r-x code page.  A short
 * transfer is -EFAULT.
 */
int tracee_read(struct tracee *t, uint64_t addr, void *buf, size_t len);
int tracee_write(struct tracee *t, uint64_t addr, const void *buf,
		 size_t len);

/* CLOCK_MONOTONIC in microseconds. */
uint64_t now_us(void);

/*
 * Block SIGCHLD for the calling thread (so tracee_wait() can wait for
 * it), remembering the old mask in *@old; tracee_release() puts it back.
 */
void tracee_hold(sigset_t *old);
void tracee_release(const sigset_t *old);

/*
 * The @index-th seccomp filter of the stopped thread (0: the newest),
 * as struct sock_filter[] into @buf of @count instructions (0: only
 * count them).  The number of instructions, -ENOENT past the last one,
 * -EACCES/-EPERM without CAP_SYS_ADMIN, -E2BIG if @count is too small.
 */
int tracee_seccomp_filter(struct tracee *t, unsigned long index, void *buf,
			  size_t count);

#endif
