#ifndef MEMSNAP_PROC_PROCFS_H
#define MEMSNAP_PROC_PROCFS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Small helpers over /proc/PID.  They only read; none of them stops or
 * changes the target.  All return 0 (or an fd) on success, -errno on
 * failure; -ENOENT means the process (or that file) does not exist.
 */

/*
 * The thread whose /proc files stand for process @pid: @pid itself, or,
 * when its main thread has exited (pthread_exit) while others live, a
 * live thread: the main thread's maps, mem, auxv, environ, root and ns
 * are empty or gone then.  proc_stand_in_find() looks, once, when the
 * caller has read the leader's state (procinfo_read() does, for the
 * process a command reads); proc_stand_in() reads nothing: @pid itself
 * unless a stand-in was found for it.
 */
pid_t proc_stand_in(pid_t pid);
void proc_stand_in_find(pid_t pid, char leader_state);

/*
 * /proc/@pid/@rel (a status file: "status" or "task/TID/status") whole,
 * into a malloc'ed, NUL-ended buffer (*@out, free() it).  A status can
 * be long ("Groups:" lists up to 65536 groups, and most fields come
 * after it): a file over 1 MiB is -EFBIG, never read in part.
 */
int proc_read_status(pid_t pid, const char *rel, char **out);

/* "/proc/@pid/@rel", or "/proc/@pid/task/TID/@rel" for the stand-in
 * (never for "task" and under it).  0 or -ENAMETOOLONG. */
int proc_path(pid_t pid, const char *rel, char *buf, size_t size);

/* open(proc_path(@pid, @rel), @flags | O_CLOEXEC): an fd or -errno. */
int proc_open(pid_t pid, const char *rel, int flags);

/*
 * Read /proc/@pid/@rel into @buf (NUL-terminated, at most @size - 1
 * bytes; a longer file is cut, which suits stat/status/comm).  The length
 * goes to *@len when @len is not NULL.
 */
int proc_read_small(pid_t pid, const char *rel, char *buf, size_t size,
		    size_t *len);

/*
 * The value of variable @var in /proc/PID/environ (the environment the
 * process started with, first 64 KiB) into @buf; "" if it has none.
 * The file is read once per process and kept: every caller of one run
 * sees the same environment.  0, -ENOSPC if the value does not fit
 * (@buf ""), or -errno from reading.
 */
int proc_getenv(pid_t pid, const char *var, char *buf, size_t size);

/* The same, read afresh through @proc_fd, a directory fd of /proc/PID
 * (or /proc/PID/task/TID) that names the process for sure. */
int proc_getenv_at(int proc_fd, const char *var, char *buf, size_t size);

/*
 * Copy @len bytes at @addr in the target into @buf.  Uses
 * process_vm_readv: no stop, same permission as ptrace attach.  A short
 * read (unmapped page) is -EFAULT.
 */
int proc_read_mem(pid_t pid, uint64_t addr, void *buf, size_t len);

/* A piece of memory: the target's to read, or memsnap's to fill. */
struct proc_piece {
	uint64_t addr, len;
};

/*
 * Copy the @n pieces @from of the target's memory into memsnap's @to
 * (the same lengths, one for one), in one process_vm_readv: 0, or
 * -EFAULT when any was short.  At most PROC_PIECES_MAX pieces.
 */
#define PROC_PIECES_MAX 64
int proc_read_pieces(pid_t pid, const struct proc_piece *from,
		     const struct proc_piece *to, size_t n);

/*
 * Read a NUL-terminated string at @addr into @buf of @size bytes.  Reads
 * page-wise so a string near the end of a mapping is fine.  A string that
 * does not fit is -ENAMETOOLONG.
 */
int proc_read_cstr(pid_t pid, uint64_t addr, char *buf, size_t size);

#endif
