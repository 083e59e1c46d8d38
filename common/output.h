#ifndef MEMSNAP_COMMON_OUTPUT_H
#define MEMSNAP_COMMON_OUTPUT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/*
 * Writing memsnap's own output (-o PATH of dump and report), in the
 * caller's view, as the caller.  What -o does with PATH:
 *
 *   "-"                      standard output
 *   a new name               an O_TMPFILE in its directory, linked in
 *                            only when complete: a killed memsnap
 *                            leaves nothing behind
 *   an existing regular file replaced atomically (rename over it)
 *   an existing device, FIFO written to, never replaced or truncated
 *   or other non-regular     (/dev/null, /dev/stdout, a named pipe)
 *   a directory              -EISDIR
 *
 * Symlinks, in any component, are followed only when owned by root or
 * by the user running memsnap (its effective or real uid); any other
 * symlink is -ELOOP and its path goes to the output's @refused.  Magic links
 * of /proc (/dev/stdout -> /proc/self/fd/1) are the kernel's to follow.
 */

struct output {
	int fd;		/* write here */
	int dir_fd;	/* the directory to link into; -1: written in place */
	bool replace;
	bool linked;	/* a named temp file (no O_TMPFILE): tmp is on disk */
	char name[256];	/* the final name in dir_fd */
	char tmp[48];
	char refused[PATH_MAX];	/* after -ELOOP: the symlink refused */
};

/* Open @path for writing as described above.  0 or -errno (-EEXIST:
 * @replace is false and @path exists). */
int output_open(struct output *o, const char *path, bool replace);

/*
 * Open a new file @name (one component) in the directory @dir_fd for
 * writing, as output_open() does a new name: it appears there only
 * complete, by output_commit(): with @replace, renamed over whatever
 * is there (a symlink or a FIFO there is replaced, never written
 * through); without, -EEXIST at the commit if anything is there.
 * 0 or -errno.
 */
int output_open_at(struct output *o, int dir_fd, const char *name,
		   bool replace);

/*
 * A directory memsnap writes into and reads back (watch -o DIR, report
 * DIR): the rule for every such directory.  @path is walked as -o is
 * (a symlink followed only if it is root's or the caller's); with
 * @create, a missing last component is made, mode 0700.  The directory
 * must then be the caller's (its owner the effective uid) and no one
 * else's to write into (no group or other write bit): else -EPERM,
 * whatever other user could change in it (plant a symlink, a FIFO, a
 * hard link to a file of root's) being the attack.  A directory fd
 * (O_RDONLY), or -errno with why in @why ("it belongs to uid 1000, not
 * to you (uid 0): ...").  Files in it are then opened relative to the
 * fd: output_open_at(), outdir_open_file().
 */
int outdir_open(const char *path, bool create, char *why, size_t size);

/*
 * @name in @dir_fd for reading: a regular file, no symlink followed
 * (-ELOOP), no FIFO, device or socket opened at all (-EINVAL: only an
 * O_PATH descriptor of it is looked at, open_regular_at()), at most
 * @max bytes (-EFBIG).  An fd or -errno.
 */
int outdir_open_file(int dir_fd, const char *name, uint64_t max);

/* Put the written file in place (nothing to do for stdout and devices)
 * and close.  0 or -errno; on error nothing is left behind. */
int output_commit(struct output *o);

/* Close and leave nothing behind.  Safe after a failed commit. */
void output_abort(struct output *o);

/*
 * Copy @in from its offset to EOF into @out, at most @max bytes:
 * -EFBIG as soon as there is more.  The count goes to *@copied.
 */
int copy_fd_max(int in, int out, uint64_t max, uint64_t *copied);

/* Open, copy at most @max bytes of @in, commit: one call. */
int output_write_fd(int in, const char *path, bool replace, uint64_t max);

/*
 * The default output name in the caller's cwd for a dump taken at @when,
 * "memsnap.<pid>.<YYYYmmdd-HHMMSS>.heap" (local time), with "-2", "-3"
 * ... added before ".heap" when @attempt > 1.
 */
void output_default_name(pid_t pid, time_t when, unsigned int attempt,
			 char *buf, size_t size);

#endif
