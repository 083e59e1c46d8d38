#ifndef MEMSNAP_PROC_PIN_H
#define MEMSNAP_PROC_PIN_H

#include <stdint.h>
#include <sys/types.h>

/*
 * One process, held by what makes it that process and not its pid.
 *
 * A pid names whichever process has it now: once the process exits and
 * is reaped, the kernel gives the number to the next one (pid_max is
 * 32768 on many systems: a user wraps it in seconds).  A pin is taken
 * once, when a command first looks at the process, and every later
 * step acts on the pinned process or stops:
 *
 *   - a pidfd (pidfd_open(), Linux 5.3) refers to the process itself:
 *     pidfd_send_signal(fd, 0) fails with ESRCH once it has exited,
 *     even if its number names another process by then;
 *   - without one, the start time (field 22 of /proc/PID/stat, in clock
 *     ticks since boot): two processes with one pid and one start time
 *     must have been started within one tick, which a reuse of the
 *     number cannot do in practice.
 *
 * Anything read through /proc/PID by number is that process's if the
 * pin still holds after the read (proc_pin_check()): the number is not
 * free for reuse while the process lives or is an unreaped zombie.  A
 * /proc/PID directory opened once (proc_pin_dir()) stays bound to the
 * process it named; files opened through it later are that process's
 * or fail with ESRCH.
 */
struct proc_pin {
	pid_t pid;
	int pidfd;		/* -1: none (before Linux 5.3) */
	uint64_t start_time;	/* field 22 of its stat */
};

#define PROC_PIN_NONE ((struct proc_pin){ .pidfd = -1 })

/*
 * Pin process @pid: its pidfd first, then its start time, then the
 * pidfd checked again (the start time read is the pinned process's).
 * 0; -ESRCH: no such process (or it exited meanwhile); -errno.
 */
int proc_pin_open(pid_t pid, struct proc_pin *p);

/*
 * The first half of proc_pin_open(), for a caller that reads the
 * process's stat itself next (procinfo_read()): the pidfd only.  The
 * caller then sets @p->start_time from what it read and checks the pin
 * (proc_pin_check()): what it read was the pinned process's if the pin
 * still holds.  0, -ESRCH or -errno.
 */
int proc_pin_begin(pid_t pid, struct proc_pin *p);

/*
 * Is @p still the process it pinned?  0, or -ESRCH: it exited, and its
 * pid may name another process now.  Call it after reading anything of
 * the process by its number.
 */
int proc_pin_check(const struct proc_pin *p);

/*
 * /proc/PID of @p (the stand-in's /proc/PID/task/TID when its main
 * thread has exited: proc_path()) as an O_PATH directory, proven to be
 * @p's: the pin is checked after the open.  The fd, -ESRCH (it exited)
 * or -errno.
 */
int proc_pin_dir(const struct proc_pin *p);

/* A copy of @p with a pidfd of its own (the caller's to close): 0 or
 * -errno. */
int proc_pin_dup(const struct proc_pin *p, struct proc_pin *copy);

/* Close its pidfd; @p becomes PROC_PIN_NONE. */
void proc_pin_close(struct proc_pin *p);

/* The sentence for a pin that no longer holds, for "watch 4242: ...". */
#define PROC_PIN_GONE "the process exited (its pid may now belong to another)"

#endif
