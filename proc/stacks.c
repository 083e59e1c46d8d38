/*
 * Thread stacks, as the threads themselves say (proc/smaps.h): never
 * from the shape of mappings, which a program's own fenced mappings, a
 * runtime's heap or an allocator's guard pages can take as well.
 *
 * A thread blocked in a call, or stopped, gives its stack pointer in
 * /proc/PID/task/TID/syscall ("nr args.. sp pc", or "-1 sp pc"), read
 * without stopping it; a running one gives "running" (task/TID/stat's
 * kstkesp is 0 for every thread not dumping core since Linux 4.9).  A thread whose
 * libc mapped its stack also records that mapping in its control block
 * at the stack's top: glibc's struct pthread holds stackblock and
 * stackblock_size (the block with its guard), musl's map_base and
 * map_size.  The sampler finds the same record to copy stacks in place
 * (sampler/stack_bounds.c); here it vouches for the stacks of threads
 * that gave no stack pointer.  The record is the target's memory,
 * hostile like the rest: it can make memsnap count a mapping as a
 * stack, never read past the tops it chose to read.
 */
#include "proc/smaps.h"

#include "common/fsio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The top of a stack read for its control block: glibc's struct
 * pthread (about 2.3 KiB on x86-64) or musl's, with its TLS, sits there. */
#define TOP_BYTES 8192u
/* How far from the anchor the (start, size) pair may be, in words. */
#define NEAR_WORDS 512
/* Anchors tried in one top: a crafted top full of them costs no more. */
#define ANCHORS_MAX 64
/* A stack block is at most this big (ulimit -s unlimited gives glibc's
 * threads 2 MiB; a program may ask for more). */
#define BLOCK_MAX (1ull << 32)

static int cmp_tid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return x < y ? -1 : x > y;
}

/* Word @k of @w is a control block's anchor: its own address, or a
 * thread id of the process in either half. */
static bool anchor(const uint64_t *w, size_t k, uint64_t at,
		   const pid_t *tids, size_t ntids)
{
	uint32_t half[2];
	size_t i;

	if (w[k] == at + k * 8)
		return true;
	if (!ntids)
		return false;
	memcpy(half, &w[k], sizeof(half));
	for (i = 0; i < 2; i++) {
		pid_t tid = (pid_t)half[i];

		if (tid > 0 && bsearch(&tid, tids, ntids, sizeof(*tids),
				       cmp_tid))
			return true;
	}
	return false;
}

bool stack_block_find(const uint64_t *w, size_t n, uint64_t at, uint64_t lo,
		      uint64_t hi, const pid_t *tids, size_t ntids,
		      uint64_t *block)
{
	size_t k, i, anchors = 0;

	if (lo >= hi)
		return false;
	for (k = 0; k < n && anchors < ANCHORS_MAX; k++) {
		size_t from, to;

		if (!anchor(w, k, at, tids, ntids))
			continue;
		anchors++;
		from = k > NEAR_WORDS ? k - NEAR_WORDS : 0;
		to = k + NEAR_WORDS < n ? k + NEAR_WORDS : n;
		for (i = from; i + 1 < to; i++) {
			uint64_t start = w[i], size = w[i + 1];

			if (start && start <= lo && size <= BLOCK_MAX &&
			    size >= hi - lo && start <= UINT64_MAX - size &&
			    start + size == hi) {
				*block = start;
				return true;
			}
		}
	}
	return false;
}

/* The threads whose stack pointer is looked up. */
#define SP_THREADS_MAX 65536

/*
 * The stack pointer of every thread of @task_fd (a task directory, which
 * this closes), marked in @m; the thread ids into *@tids (sorted, at
 * most SP_THREADS_MAX; NULL when out of memory).
 */
static void read_sps(struct proc_memory *m, int task_fd, pid_t **tids,
		     size_t *ntids)
{
	size_t cap = 0;
	struct dirent *de;
	DIR *d;

	*tids = NULL;
	*ntids = 0;
	d = fdopendir(task_fd);
	if (!d) {
		close(task_fd);
		return;
	}
	while ((de = readdir(d))) {
		char rel[64], buf[256];
		size_t len = strlen(de->d_name);
		uint64_t sp;
		ssize_t n;
		int fd;

		if (de->d_name[0] < '1' || de->d_name[0] > '9' || len > 10)
			continue;
		if (m->threads_sp + m->threads_no_sp >= SP_THREADS_MAX) {
			m->threads_no_sp++;
			continue;
		}
		if (*ntids == cap) {
			pid_t *nt = realloc(*tids, (cap ? cap * 2 : 64) *
							   sizeof(*nt));

			if (nt) {
				*tids = nt;
				cap = cap ? cap * 2 : 64;
			}
		}
		if (*ntids < cap)
			(*tids)[(*ntids)++] = (pid_t)atoi(de->d_name);
		memcpy(rel, de->d_name, len);
		memcpy(rel + len, "/syscall", 9);
		fd = openat(dirfd(d), rel, O_RDONLY | O_CLOEXEC);
		n = fd >= 0 ? read_in_full(fd, buf, sizeof(buf) - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (n > 0 && !proc_syscall_sp(buf, (size_t)n, &sp) &&
		    proc_memory_mark_sp(m, sp))
			m->threads_sp++;
		else
			m->threads_no_sp++;
	}
	closedir(d);
	if (*tids)
		qsort(*tids, *ntids, sizeof(**tids), cmp_tid);
}

/* A mapping whose top may hold a thread's control block: private,
 * read-write, anonymous, with a PROT_NONE anonymous mapping right
 * below, and no stack pointer in it (those are stacks already). */
static bool candidate(const struct proc_memory *m, size_t i)
{
	const struct smap *s = &m->v[i], *g;

	if (!i || s->kind != SMAP_ANON || s->shared || s->sp_in ||
	    (s->prot & 3u) != 3u || smap_name(m, s))
		return false;
	g = &m->v[i - 1];
	return g->kind == SMAP_ANON && !g->shared && !g->prot &&
	       g->end == s->start;
}

void proc_memory_vouch_stacks(struct proc_memory *m, int mem_fd,
			      const pid_t *tids, size_t ntids)
{
	size_t i, budget = 2 * ntids + 256;
	uint64_t *w;

	if (mem_fd < 0)
		return;
	w = malloc(TOP_BYTES);
	if (!w)
		return;
	for (i = 0; i < m->n; i++) {
		struct smap *s = &m->v[i];
		uint64_t len = s->end - s->start, at, block;
		ssize_t got;

		if (!candidate(m, i))
			continue;
		if (m->stack_tops_read >= budget) {
			m->stack_tops_skipped++;
			continue;
		}
		if (len > TOP_BYTES)
			len = TOP_BYTES;
		at = s->end - len;
		m->stack_tops_read++;
		if (at > (uint64_t)INT64_MAX)
			continue;
		got = pread_in_full(mem_fd, w, len, (off_t)at);
		if (got != (ssize_t)len)
			continue;
		if (stack_block_find(w, len / 8, at, s->start, s->end, tids,
				     ntids, &block)) {
			s->vouched = true;
			m->stacks_vouched++;
		}
	}
	free(w);
}

void proc_memory_read_stacks(int proc_fd, int mem_fd, struct proc_memory *m)
{
	int task_fd = openat(proc_fd, "task",
			     O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	pid_t *tids = NULL;
	size_t ntids = 0;

	if (task_fd < 0)
		return;
	read_sps(m, task_fd, &tids, &ntids);
	proc_memory_vouch_stacks(m, mem_fd, tids, ntids);
	free(tids);
}
