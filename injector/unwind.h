#ifndef MEMSNAP_INJECTOR_UNWIND_H
#define MEMSNAP_INJECTOR_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct inject_session;

/*
 * The call stack of thread @tid of the session's process, in a
 * ptrace-stop, innermost first, unwound with libunwind-ptrace.  The CFI
 * comes from the target's memory alone: each object's PT_GNU_EH_FRAME
 * table as loaded, found through the session's maps.  No file is opened
 * (a hostile process names what its maps show: a FIFO, a device).  All
 * of it is untrusted: the walk stops after @max frames, at a pc of 0,
 * when the unwinder gives up, or after a budget of memory reads.
 * Returns the number of frames (>= 1 when the first pc was readable) or
 * -errno (libunwind's errors map to -EIO, -ENOMEM).  *@whole (may be
 * NULL) says whether the walk reached the outermost frame with CFI for
 * every frame: only then are the frames all there are.
 */
int unwind_thread(const struct inject_session *s, pid_t tid, uint64_t *pcs,
		  size_t max, bool *whole);

#endif
