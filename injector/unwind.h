#ifndef MEMSNAP_INJECTOR_UNWIND_H
#define MEMSNAP_INJECTOR_UNWIND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * The call stack of a thread in a ptrace-stop, innermost first, unwound
 * with libunwind-ptrace (CFI from the mapped objects, frame pointers as
 * a fallback).  The memory read is the target's and untrusted: the walk
 * stops after @max frames, at a pc of 0, or when the unwinder gives up.
 * Returns the number of frames (>= 1 when the first pc was readable) or
 * -errno (libunwind's errors map to -EIO, -ENOMEM).
 */
int unwind_thread(pid_t tid, uint64_t *pcs, size_t max);

#endif
