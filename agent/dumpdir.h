#ifndef MEMSNAP_AGENT_DUMPDIR_H
#define MEMSNAP_AGENT_DUMPDIR_H

#include "common/diag.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Getting a file the target writes (a heap profile, an allocator's
 * report) to the caller, without memsnap touching the target's
 * filesystem view with its own rights (docs/DESIGN.md, "Files in the
 * target's view"; docs/SECURITY.md).
 *
 * Every operation there is done by an agent: a child of memsnap that
 * proved it found the process memsnap looked at (its pidfd, its start
 * time), with the credentials memsnap saw, then joined its user and
 * mount namespaces and root and took its uids, gids, groups and
 * capabilities, so the kernel enforces exactly the target's rights.
 * memsnap gets back only file descriptors.
 *
 *   dumpdir_create()   the agent makes a fresh directory, mode 0700,
 *                      unpredictable name (".memsnap-<16 hex>"), in the
 *                      first usable place of the target's view: $TMPDIR
 *                      (only if the target's own and not writable by
 *                      others unless sticky, and never for a target in
 *                      secure mode), /tmp, /var/tmp, /dev/shm
 *   dumpdir_file()     the absolute path, as the target sees it, to hand
 *                      to the allocator: "/tmp/.memsnap-0123.../dump.heap"
 *   dumpdir_open_result()  the agent opens what the target wrote: never
 *                      through a symlink or onto another mount, only a
 *                      regular file of the target's uid; memsnap gets
 *                      the descriptor
 *   dumpdir_remove()   the agent empties and removes the directory; it
 *                      does the same by itself if memsnap dies
 *
 * The directory is flock()ed while the agent lives; dumpdir_create() also
 * removes unlocked ".memsnap-*" directories of the target's older than a
 * minute in the same place, which only a killed agent leaves.
 */

struct dumpdir;
struct procinfo;

/*
 * Create the private directory for the process @pi describes, as
 * memsnap looked at it: @pidfd, opened before @pi was read (<= 0: none,
 * then its start time alone tells it from a process that got its pid),
 * and its credentials (@pi->have_creds is needed).  0 or -errno:
 * -ENOENT: no process; -ESRCH: it exited (its pid may name another
 * process now); -ESTALE: its credentials are not those of @pi (it
 * exec'ed a set-user-ID program, say): nothing was done for it;
 * -EROFS or -EACCES: no writable place; -EPERM: a place not fit for
 * it, or the target's credentials could not be taken.  On failure @err
 * says what it means: DIAG_NO_PROCESS (the first three, the process
 * gone or changed: "the process exited", or what changed) or
 * DIAG_FAILED ("no place the target can write to: " and which places
 * were tried and why they failed).
 */
int dumpdir_create(const struct procinfo *pi, int pidfd, struct dumpdir **out,
		   struct diag *err);

/*
 * The same in two steps, for a caller that may not need the directory
 * (an allocator's report goes to a memfd where it can): dumpdir_defer()
 * checks what needs no agent (the process is there, its credentials
 * were read) and keeps @pi's credentials and @pidfd, which must stay
 * open; dumpdir_start() forks the agent, which makes the directory, the
 * first time (0 at once after that; a start that failed fails again).
 * Errors as dumpdir_create()'s.  Before the start, dumpdir_file() and
 * dumpdir_here() name no real place, and dumpdir_remove() only frees.
 */
int dumpdir_defer(const struct procinfo *pi, int pidfd, struct dumpdir **out,
		  struct diag *err);
int dumpdir_start(struct dumpdir *d, struct diag *err);

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

/* Refuse (-EFBIG) a result larger than @max bytes (default 1 GiB). */
void dumpdir_set_max(struct dumpdir *d, uint64_t max);

/*
 * Open what the target wrote: a read-only fd (its size in *@size), or
 * -ENOENT (nothing there), -ELOOP (a symlink), -EXDEV (a mount point),
 * -EINVAL (not a regular file: FIFO, socket, device, directory), -EFBIG
 * (larger than the cap), -EPERM
 * (owned by someone other than the target's uid, or not readable by it),
 * -ETIMEDOUT or -ECONNRESET (the agent stopped answering).
 */
int dumpdir_open_result(struct dumpdir *d, uint64_t *size);

/* What dumpdir_open_result()'s @rc means, for people ("a symlink is
 * there, not the profile"). */
const char *dumpdir_result_why(int rc);

/*
 * Why the target could not write its file, if anything explains it:
 * read-only file system, no space, the file descriptor limit of the
 * target, a partial file.  Leaves @buf empty otherwise.
 */
void dumpdir_explain(struct dumpdir *d, char *buf, size_t size);

/* Remove the directory and all it holds, free @d.  0 or the first
 * -errno; @d is freed either way.  NULL is fine. */
int dumpdir_remove(struct dumpdir *d);

#endif
