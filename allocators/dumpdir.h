#ifndef MEMSNAP_ALLOCATORS_DUMPDIR_H
#define MEMSNAP_ALLOCATORS_DUMPDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/*
 * Getting a file the target writes (a heap profile) to the caller,
 * without trusting any path on the way (DESIGN.md section 5).
 *
 * The target writes with its own uid, root and mount namespace, so:
 *
 *   dumpdir_create()   a fresh directory, mode 0700, unpredictable name
 *                      (".memsnap-<16 hex>"), in the first writable place
 *                      of the target's view ($TMPDIR of the target, /tmp,
 *                      /var/tmp, /dev/shm), reached through
 *                      /proc/PID/root with openat2(RESOLVE_IN_ROOT |
 *                      RESOLVE_NO_SYMLINKS) and owned by the target's
 *                      fsuid/fsgid.  Every later step is relative to the
 *                      directory's fd, so renaming or replacing anything
 *                      above it changes nothing.
 *   dumpdir_file()     the absolute path, as the target sees it, to hand
 *                      to the allocator: "/tmp/.memsnap-0123.../dump.heap"
 *   dumpdir_open_result()  the file the target wrote, opened with
 *                      O_NOFOLLOW | O_NONBLOCK and checked to be a regular
 *                      file: a symlink or FIFO planted there never
 *                      redirects the read nor blocks it
 *   dumpdir_remove()   removes every entry and the directory
 *
 * The directory is flock()ed while in use; dumpdir_create() also removes
 * unlocked ".memsnap-*" directories older than a minute in the same
 * place, which only a memsnap killed mid-dump leaves.
 *
 * and output_write_atomic() copies the result next to its final name
 * (O_CREAT | O_EXCL | O_NOFOLLOW temp file) and renames it into place: a
 * symlink, FIFO or file already at the final name is replaced, never
 * written through.
 */

struct dumpdir;

/*
 * Create the private directory for process @pid.  0 or -errno (-ENOENT:
 * no process; -EROFS or -EACCES: no writable place, -EPERM: cannot give
 * it to the target's uid).  On failure @why (if not NULL) says which
 * places were tried and why they failed.
 */
int dumpdir_create(pid_t pid, struct dumpdir **out, char *why,
		   size_t why_size);

/* The file name the target is to write, absolute in its own view. */
const char *dumpdir_file(const struct dumpdir *d);

/*
 * Name the file the target is to write next (default "dump.heap"): a
 * plain name inside the directory.  0 or -EINVAL.
 */
int dumpdir_set_name(struct dumpdir *d, const char *name);

/* The same place as reached from here, for messages:
 * "/proc/4242/root/tmp/.memsnap-0123.../dump.heap". */
const char *dumpdir_here(const struct dumpdir *d);

/*
 * Open what the target wrote: a read-only fd (its size in *@size), or
 * -ENOENT (nothing there), -ELOOP (a symlink), -EINVAL (not a regular
 * file: FIFO, socket, device, directory), -EPERM (owned by someone other
 * than the target's uid or us).
 */
int dumpdir_open_result(struct dumpdir *d, uint64_t *size);

/*
 * Why the target could not write its file, if anything explains it:
 * read-only file system, no space, the file descriptor limit of the
 * target, a partial file.  Leaves @buf empty otherwise.
 */
void dumpdir_explain(struct dumpdir *d, char *buf, size_t size);

/* Remove the directory and all it holds, free @d.  0 or the first
 * -errno; @d is freed either way.  NULL is fine. */
int dumpdir_remove(struct dumpdir *d);

/*
 * Copy @fd (from its current offset to EOF) to @path atomically: a temp
 * file beside it, then rename.  @replace false: never replace an existing
 * name (-EEXIST).  0 or -errno; no temp file is left behind.
 */
int output_write_atomic(int fd, const char *path, bool replace);

/*
 * The default output name in the caller's cwd for a dump taken at @when,
 * "memsnap.<pid>.<YYYYmmdd-HHMMSS>.heap" (local time), with "-2", "-3"
 * ... added before ".heap" when @attempt > 1.
 */
void output_default_name(pid_t pid, time_t when, unsigned int attempt,
			 char *buf, size_t size);

#endif
