#ifndef MEMSNAP_PROC_TRIAGE_H
#define MEMSNAP_PROC_TRIAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * The threads of a process as /proc shows them, read without stopping
 * anything, to choose which one to borrow:
 *
 *   /proc/PID/task/TID/stat      "4243 (bio_close_file) S ..." -> 'S'
 *   /proc/PID/task/TID/syscall   "202 0x7f... ..." (the syscall number:
 *                                futex on x86-64), "running", or
 *                                "-1 ..." (stopped in user space)
 *   /proc/PID/task/TID/wchan     "futex_wait_queue" (may read "0"),
 *                                only on request
 *
 * The ranking of syscalls is the caller's (the numbers are per
 * architecture).
 */

struct thread_info {
	pid_t tid;
	char state;	  /* R S D T t Z X ... */
	long syscall;	  /* number; -1: in user space; -2: running */
	uint64_t sc_args[6], sc_sp, sc_pc; /* the rest of that line, when
				   * in a syscall: its arguments as it
				   * entered, the stack pointer and the pc
				   * after the syscall instruction */
	char wchan[48];
	char comm[32];
	bool children;	  /* it has child processes (task/TID/children;
			   * false where the kernel has no such file) */
	int score;	  /* set by the caller's ranking */
};

struct thread_list {
	struct thread_info *v;
	size_t n;
};

/* Every thread of @pid.  0, -ENOENT (no such process), -EACCES, -ENOMEM.
 * @wchan is left empty (see triage_wchan()). */
int triage_list(pid_t pid, struct thread_list *out);

/*
 * The same, but stop listing as soon as @enough returns true for a
 * thread just listed (it may set ->score): in a process with thousands
 * of threads, the first idle one will do.
 */
int triage_list_until(pid_t pid, bool (*enough)(void *, struct thread_info *),
		      void *arg, struct thread_list *out);

/* Only task/TID/syscall of @tid into @ti (syscall, sc_args, sc_sp,
 * sc_pc; the rest zero): read just before memsnap stops the thread,
 * whose registers at the stop may have lost an argument the file shows
 * now (AArch64's x0).  0 or -errno. */
int triage_syscall(pid_t pid, pid_t tid, struct thread_info *ti);

/* Only the thread ids of @pid, into *@out (malloc'ed; *@n of them):
 * nothing else read per thread.  0, -ENOENT, -EACCES, -ENOMEM. */
int triage_tids(pid_t pid, pid_t **out, size_t *n);

/*
 * The kernel's count of @pid's threads (the Threads: line of its
 * status), which a listing of task/ can fall short of: its walk ends
 * early at a thread that exits under it.  It counts a thread from its
 * clone() to its release (an exiting one, a zombie main thread too).
 * 0 or -errno; -EIO without the line.
 */
int triage_nr_threads(pid_t pid, unsigned long *n);

/* Whether thread @tid of @pid is still there, even as a zombie or
 * exiting: false once it is released, or when unreadable. */
bool triage_tid_exists(pid_t pid, pid_t tid);

/* Whether thread @tid of @pid has child processes now. */
bool triage_has_children(pid_t pid, pid_t tid);

/* Fill @ti->wchan ("" when unreadable). */
void triage_wchan(pid_t pid, struct thread_info *ti);

/* One thread (for --thread TID).  -ENOENT if @tid is not a thread of @pid. */
int triage_one(pid_t pid, pid_t tid, struct thread_info *out);

/* Sort by score, highest first (stable: lower tid first among equals). */
void triage_sort(struct thread_list *l);

void triage_free(struct thread_list *l);

/* What /proc/PID/task/TID/status says of one thread: the one parser. */
struct thread_status {
	pid_t tracer;		/* its own TracerPid (tracers attach per
				 * thread); 0: nobody */
	char text[4096];	/* the file, for what only the arch code
				 * reads (arch_thread_refused()) */
	unsigned long long pending; /* SigPnd | ShdPnd */
	unsigned long long blocked; /* SigBlk */
	int seccomp;		/* Seccomp: 0 off, 1 strict, 2 filter */
	int seccomp_filters;	/* Seccomp_filters: (-1: no such line) */
};

/* 1: thread @tid is gone, a zombie, exiting, or killed with SIGKILL
 * pending (an execve or exit in another thread kills it); 0: not;
 * -errno when it is unreadable. */
int thread_dying(pid_t pid, pid_t tid);

/* One read of @tid's status.  0 or -errno. */
int thread_status_read(pid_t pid, pid_t tid, struct thread_status *st);

#endif
