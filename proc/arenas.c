/*
 * glibc's arena heaps, as their own headers say (proc/smaps.h).  A
 * thread's arena lives in heaps glibc maps 64 MiB aligned (HEAP_MAX_SIZE
 * on 64-bit), each starting with its heap_info:
 *
 *   ar_ptr         the arena's state: in the first page of the arena's
 *                  first heap, just after its header
 *   prev           the heap before it in the arena: 0, or another heap
 *   size           bytes of the heap in use, from its start
 *   mprotect_size  bytes made read-write, at most 64 MiB
 *
 * A program's own 64 MiB mapping can be 64 MiB aligned too (MariaDB's
 * buffer pool was): its memory is the program's, and counting it as
 * the arenas' would let glibc's free chunks take its bytes.  So a
 * mapping of that shape is an arena heap only when its header reads as
 * one.  The header is the target's memory: it can make memsnap count a
 * mapping as the heap, never read past the few bytes it asked for.
 */
#include "proc/smaps.h"

#include "common/fsio.h"

#include <stdint.h>

#define HEAP_MAX (64ull << 20)
/* Headers read at most: a process with more such mappings is past
 * glibc's own bound of 8 arenas per CPU. */
#define ARENA_READS_MAX 4096

bool arena_heap_header(const uint64_t w[4])
{
	uint64_t state = w[0] & (HEAP_MAX - 1);

	return state >= 4 * sizeof(uint64_t) && state < 4096 &&
	       !(w[1] & (HEAP_MAX - 1)) && w[2] && w[2] <= w[3] &&
	       w[3] <= HEAP_MAX;
}

void proc_memory_vouch_arenas(struct proc_memory *m, int mem_fd)
{
	size_t i, reads = 0;

	for (i = 0; i < m->n && mem_fd >= 0 && reads < ARENA_READS_MAX; i++) {
		struct smap *s = &m->v[i];
		uint64_t w[4];

		if (s->kind != SMAP_ANON || s->shared || (s->prot & 3u) != 3u ||
		    s->start % HEAP_MAX || s->end - s->start > HEAP_MAX ||
		    s->start > (uint64_t)INT64_MAX || smap_name(m, s))
			continue;
		reads++;
		if (pread_in_full(mem_fd, w, sizeof(w), (off_t)s->start) ==
			    (ssize_t)sizeof(w) &&
		    arena_heap_header(w))
			s->arena_heap = true;
	}
}
