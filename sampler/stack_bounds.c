/*
 * The stacks a sample may copy in place (sampler/image/records.c,
 * plain_end()), found before prof on stops anything: the main thread's
 * stack as /proc shows it, and where each thread's libc keeps the start
 * and size of the thread's stack mapping in its control block.
 *
 * That offset is learned from the process itself, not assumed for a
 * libc version: in the top of each thread stack the maps show (a
 * read-write anonymous mapping with a PROT_NONE guard just below), the
 * control block is where two words, the first and the third, hold its
 * own address (glibc's tcbhead_t on x86-64: the ABI's %fs:0, and
 * glibc's self), and the offset is where, from there, two words hold
 * that mapping's start and size (glibc's stackblock and
 * stackblock_size).  It counts only when every stack that has such a
 * pair agrees on one offset.
 *
 * AArch64's thread pointer points at no word of its own: it is the end
 * of glibc's struct pthread, whose size and tid offset glibc exports
 * for libthread_db (_thread_db_sizeof_pthread, _thread_db_pthread_tid).
 * There the control block is where the tid of one of the process's
 * threads is, and the offset (below the thread pointer) is found the
 * same way.  Another libc (musl's control block does not point at
 * itself twice, and exports no such sizes), or a process with no thread
 * stack yet: it stays 0, and only the main thread's stack is copied in
 * place.
 */
#include "sampler/internal.h"

#include "proc/maps.h"
#include "proc/procfs.h"
#include "proc/procinfo.h"
#include "proc/triage.h"
#include "symbols/objects.h"

#include <stdlib.h>
#include <string.h>

/* How much of each stack's top is read; how many stacks with a
 * control block are compared, and how many mappings read at most (a
 * process can map any number that look like stacks); the offset's
 * bound (within the control block's first page). */
#define TOP_BYTES 8192u
#define STACKS_COMPARED 16
#define READS_MAX 64
#define BLOCK_OFF_MAX 4096u

/* The thread pointer points at itself (x86-64's TLS ABI); else it is
 * the end of glibc's struct pthread (AArch64). */
#if defined(__x86_64__)
#define TP_SELF true
#else
#define TP_SELF false
#endif

/*
 * Where words [from, to) of @w (@n of them) hold the pair (@block,
 * @size): each offset, in bytes from word @tp, into @offs past its
 * @found first, @max at most.  The new count.
 */
static size_t pairs_at(const uint64_t *w, size_t n, size_t from, size_t to,
		       size_t tp, uint64_t block, uint64_t size,
		       uint64_t *offs, size_t found, size_t max)
{
	size_t i;

	for (i = from; i < to && i + 1 < n && found < max; i++)
		if (w[i] == block && w[i + 1] == size)
			offs[found++] = (uint64_t)(i - tp) * 8;
	return found;
}

uint64_t sampler_block_offsets(const uint64_t *w, size_t n, uint64_t at,
			       uint64_t block, uint64_t size, uint64_t *offs,
			       size_t max)
{
	size_t k, found = 0;

	for (k = 0; k + 2 < n && found < max; k++) {
		if (w[k] != at + k * 8 || w[k + 2] != w[k])
			continue;
		/* past the control block's first words, within the page
		 * after it */
		found = pairs_at(w, n, k + 2, k + BLOCK_OFF_MAX / 8, k, block,
				 size, offs, found, max);
	}
	return found;
}

static int cmp_tid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return x < y ? -1 : x > y;
}

uint64_t sampler_block_offsets_tid(const uint64_t *w, size_t n,
				   uint64_t block, uint64_t size,
				   uint32_t pthread_size, uint32_t tid_off,
				   const pid_t *tids, size_t ntids,
				   uint64_t *offs, size_t max)
{
	size_t k, found = 0, words = pthread_size / 8;

	if (pthread_size % 8 || (uint64_t)tid_off + 4 > pthread_size)
		return 0;
	for (k = 0; k + words <= n && found < max; k++) {
		pid_t tid;

		memcpy(&tid, (const char *)&w[k] + tid_off, sizeof(tid));
		if (tid <= 0 ||
		    !bsearch(&tid, tids, ntids, sizeof(*tids), cmp_tid))
			continue;
		/* the thread pointer is at w[k + words]: the pair below */
		found = pairs_at(w, n, k, k + words - 1, k + words, block,
				 size, offs, found, max);
	}
	return found;
}

/* glibc's struct pthread as it exports it for libthread_db, read from
 * process @pid: its size and the tid's offset.  false: not glibc, or
 * not believable. */
static bool glibc_pthread(pid_t pid, struct objects *os, uint32_t *size,
			  uint32_t *tid_off)
{
	size_t i;

	for (i = 0; i < os->n; i++) {
		struct object *obj = &os->v[i];
		const char *base = obj->path ? strrchr(obj->path, '/') : NULL;
		struct symbol a, b;
		uint32_t sz, tid[3];

		if (!base || strncmp(base, "/libc.so", 8) ||
		    object_lookup(os, obj, "_thread_db_sizeof_pthread", 0,
				  &a) ||
		    object_lookup(os, obj, "_thread_db_pthread_tid", 0, &b))
			continue;
		/* { bits, count, offset } */
		if (proc_read_mem(pid, a.addr, &sz, sizeof(sz)) ||
		    proc_read_mem(pid, b.addr, tid, sizeof(tid)) ||
		    tid[0] != 32 || tid[1] != 1 || sz < 64 ||
		    sz > BLOCK_OFF_MAX || sz % 8 || tid[2] + 4 > sz)
			return false;
		*size = sz;
		*tid_off = tid[2];
		return true;
	}
	return false;
}

/* @off among @offs[0..@n)? */
static bool has(const uint64_t *offs, size_t n, uint64_t off)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (offs[i] == off)
			return true;
	return false;
}

/* The offset every thread stack of @maps that has one agrees on, or 0. */
static uint64_t learn_block_off(pid_t pid, struct objects *os,
				const struct maps *maps)
{
	uint64_t *w = NULL, common[8], offs[8], ncommon = 0;
	size_t i, stacks = 0, reads = 0, ntids = 0;
	uint32_t pthread_size = 0, tid_off = 0;
	pid_t *tids = NULL;

	if (!TP_SELF) {
		if (!glibc_pthread(pid, os, &pthread_size, &tid_off) ||
		    triage_tids(pid, &tids, &ntids))
			return 0;
		qsort(tids, ntids, sizeof(*tids), cmp_tid);
	}
	w = malloc(TOP_BYTES);
	if (!w) {
		free(tids);
		return 0;
	}
	for (i = 1; i < maps->n && stacks < STACKS_COMPARED &&
		    reads < READS_MAX;
	     i++) {
		const struct map_entry *g = &maps->v[i - 1], *e = &maps->v[i];
		uint64_t len = e->end - e->start, at, n, j, keep = 0;

		if (e->path || e->shared ||
		    e->prot != (MAP_PROT_READ | MAP_PROT_WRITE) || g->path ||
		    g->prot || g->end != e->start)
			continue;
		if (len > TOP_BYTES)
			len = TOP_BYTES;
		at = e->end - len;
		reads++;
		if (proc_read_mem(pid, at, w, len))
			continue;
		if (TP_SELF)
			n = sampler_block_offsets(w, len / 8, at, g->start,
						  e->end - g->start, offs, 8);
		else
			n = sampler_block_offsets_tid(
				w, len / 8, g->start, e->end - g->start,
				pthread_size, tid_off, tids, ntids, offs, 8);
		if (!n)
			continue;	/* not a thread's, or not its top */
		if (!stacks++) {
			memcpy(common, offs, n * sizeof(*offs));
			ncommon = n;
			continue;
		}
		for (j = 0; j < ncommon; j++)
			if (has(offs, n, common[j]))
				common[keep++] = common[j];
		ncommon = keep;
		if (!ncommon)
			break;
	}
	free(w);
	free(tids);
	return ncommon == 1 ? common[0] : 0;
}

void sampler_stack_bounds(pid_t pid, struct objects *os,
			  const struct maps *maps, struct sampler_prep *p)
{
	uint64_t top = 0;
	size_t i;

	p->main_lo = p->main_hi = 0;
	for (i = 0; i < maps->n; i++) {
		const struct map_entry *e = &maps->v[i];

		if (e->path && !strcmp(e->path, "[stack]") && !e->shared &&
		    (e->prot & (MAP_PROT_READ | MAP_PROT_WRITE)) ==
			    (MAP_PROT_READ | MAP_PROT_WRITE)) {
			p->main_lo = e->start;
			p->main_hi = e->end;
		}
	}
	/* Every frame of the main thread lies below where its stack
	 * pointer began (argc): the arguments, the environment and the aux
	 * vector above it, some KiB, are no unwinder's business, and a
	 * sample that copied them would keep them for its life. */
	if (!proc_start_stack(pid, &top) && top > p->main_lo &&
	    top < p->main_hi)
		p->main_hi = (top + 15) & ~(uint64_t)15;
	p->block_off = learn_block_off(pid, os, maps);
}
