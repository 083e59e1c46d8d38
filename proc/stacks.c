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

/*
 * Near an anchor in @n words at @at, a pair (start, size) with start <=
 * @lo (a block starts at or below its mapping) and start + size == @hi
 * (it ends where its mapping ends), or, with @sp set, start <= @sp <
 * start + size <= @hi (a block in a mapping that holds more).
 */
static bool block_near_anchor(const uint64_t *w, size_t n, uint64_t at,
			      uint64_t lo, uint64_t sp, uint64_t hi,
			      const pid_t *tids, size_t ntids,
			      uint64_t *start, uint64_t *end)
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
			uint64_t b = w[i], size = w[i + 1];

			if (!b || size > BLOCK_MAX || b > UINT64_MAX - size)
				continue;
			if (sp ? b <= sp && sp < b + size && b + size <= hi
			       : b <= lo && b + size == hi) {
				*start = b;
				*end = b + size;
				return true;
			}
		}
	}
	return false;
}

bool stack_block_find(const uint64_t *w, size_t n, uint64_t at, uint64_t lo,
		      uint64_t hi, const pid_t *tids, size_t ntids,
		      uint64_t *block)
{
	uint64_t end;

	return block_near_anchor(w, n, at, lo, 0, hi, tids, ntids, block,
				 &end);
}

bool stack_block_holding(const uint64_t *w, size_t n, uint64_t at,
			 uint64_t lo, uint64_t sp, uint64_t hi,
			 const pid_t *tids, size_t ntids, uint64_t *from,
			 uint64_t *to)
{
	uint64_t start, end;

	if (!sp || sp < lo || sp >= hi ||
	    !block_near_anchor(w, n, at, lo, sp, hi, tids, ntids, &start,
			       &end))
		return false;
	*from = start > lo ? start : lo;
	*to = end;
	return true;
}

/* The threads whose stack pointer is looked up. */
#define SP_THREADS_MAX 65536

/* The threads of a process as read_sps() found them. */
struct threads {
	pid_t *tids;		/* sorted */
	size_t ntids, cap;
	uint64_t *sps;		/* the stack pointers marked in a mapping */
	size_t nsps, spcap;
};

static void add_sp(struct threads *t, uint64_t sp)
{
	if (t->nsps == t->spcap) {
		size_t cap = t->spcap ? t->spcap * 2 : 64;
		uint64_t *v = realloc(t->sps, cap * sizeof(*v));

		if (!v)
			return;
		t->sps = v;
		t->spcap = cap;
	}
	t->sps[t->nsps++] = sp;
}

/*
 * The stack pointer of every thread of @task_fd (a task directory, which
 * this closes), marked in @m; the thread ids and the stack pointers
 * marked into @t (at most SP_THREADS_MAX; fewer when out of memory).
 */
static void read_sps(struct proc_memory *m, int task_fd, struct threads *t)
{
	struct dirent *de;
	DIR *d;

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
		if (t->ntids == t->cap) {
			pid_t *nt = realloc(t->tids, (t->cap ? t->cap * 2 : 64) *
							     sizeof(*nt));

			if (nt) {
				t->tids = nt;
				t->cap = t->cap ? t->cap * 2 : 64;
			}
		}
		if (t->ntids < t->cap)
			t->tids[t->ntids++] = (pid_t)atoi(de->d_name);
		memcpy(rel, de->d_name, len);
		memcpy(rel + len, "/syscall", 9);
		fd = openat(dirfd(d), rel, O_RDONLY | O_CLOEXEC);
		n = fd >= 0 ? read_in_full(fd, buf, sizeof(buf) - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (n > 0 && !proc_syscall_sp(buf, (size_t)n, &sp) &&
		    proc_memory_mark_sp(m, sp)) {
			m->threads_sp++;
			add_sp(t, sp);
		} else {
			m->threads_no_sp++;
		}
	}
	closedir(d);
	if (t->tids)
		qsort(t->tids, t->ntids, sizeof(*t->tids), cmp_tid);
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

/*
 * A mapping that holds a thread's stack pointer can hold more than the
 * thread's stack.  Before Linux 6.7 a thread's stack (glibc maps it
 * with MAP_STACK, which changed nothing then) is one mapping with an
 * anonymous read-write mapping right above it: a 64 MiB buffer mapped
 * before a thread was started is, beside its 8 MiB stack, one 72 MiB
 * mapping (Debian 12's kernel is 6.1).  The thread's control block, at
 * its block's top, says where the stack ends: read first at the
 * mapping's top (a stack alone), else in the resident pages from the
 * stack pointer up, and the block's resident pages counted in
 * /proc/PID/pagemap.  Read from the target's memory, the block can
 * only move its own bytes between parts, and what is read is bounded.
 */
struct bound {
	const struct threads *t;
	int mem_fd, pagemap_fd;
	uint64_t page, budget;	/* bytes above stack pointers left to read */
	uint64_t *w;		/* SCAN_CHUNK */
};

/* Above a stack pointer, at most SCAN_BYTES are read for its block (a
 * default stack's size), in chunks that overlap by twice the distance
 * between an anchor and its pair; at most SCAN_BUDGET for all threads.
 * A stack deeper than that, or with a page not resident between its
 * stack pointer and its top, stays whole. */
#define SCAN_BYTES (8u << 20)
#define SCAN_CHUNK (256u << 10)
#define SCAN_OVERLAP (2u * NEAR_WORDS * 8)
#define SCAN_BUDGET (16ull << 20)
/* Of it, for the stacks of running threads: each fenced mapping no top
 * vouched for is read from its lowest resident page up. */
#define FENCED_BUDGET (8ull << 20)
#define PM_PRESENT (1ull << 63)
#define PM_FILE_OR_SHARED (1ull << 61)
#define PM_WORDS 512

/* What pages_resident() counts. */
enum pm_count {
	PM_RUN,		/* resident pages in a row */
	PM_ANON,	/* resident anonymous pages (not a file's or shared) */
	PM_BEFORE,	/* pages before the first resident one */
};

/* Of the @pages pages from @lo up, per pagemap, what @what counts;
 * -1 when pagemap cannot say. */
static int64_t pages_resident(const struct bound *b, uint64_t lo,
			      uint64_t pages, enum pm_count what)
{
	uint64_t e[PM_WORDS], first = lo / b->page, i, count = 0;
	size_t n, k;

	for (i = 0; i < pages; i += n) {
		n = pages - i < PM_WORDS ? (size_t)(pages - i) : PM_WORDS;
		if (first + i > (uint64_t)INT64_MAX / 8 ||
		    pread_in_full(b->pagemap_fd, e, n * 8,
				  (off_t)((first + i) * 8)) != (ssize_t)(n * 8))
			return -1;
		for (k = 0; k < n; k++) {
			bool in = e[k] & PM_PRESENT;

			if (what != PM_ANON && in != (what == PM_RUN))
				return (int64_t)count;
			count += what != PM_ANON ||
				 (in && !(e[k] & PM_FILE_OR_SHARED));
		}
	}
	return (int64_t)count;
}

/* Is @s a stack alone: its control block at its top, its block the
 * whole mapping? */
static bool block_is_mapping(const struct bound *b, const struct smap *s)
{
	uint64_t len = s->end - s->start < TOP_BYTES ? s->end - s->start
						       : TOP_BYTES, block;
	uint64_t at = s->end - len;

	return pages_resident(b, at, len / b->page, PM_RUN) ==
		       (int64_t)(len / b->page) &&
	       at <= (uint64_t)INT64_MAX &&
	       pread_in_full(b->mem_fd, b->w, len, (off_t)at) == (ssize_t)len &&
	       stack_block_find(b->w, len / 8, at, s->start, s->end,
				b->t->tids, b->t->ntids, &block);
}

/* The part of @s that is the block of the stack pointer @sp, looked
 * for from @sp up in the resident pages: into [*@from, *@to). */
static bool block_above(struct bound *b, const struct smap *s, uint64_t sp,
			uint64_t *from, uint64_t *to)
{
	uint64_t at = sp & ~(b->page - 1), len = s->end - at;
	int64_t run;

	if (len > SCAN_BYTES)
		len = SCAN_BYTES;
	run = pages_resident(b, at, len / b->page, PM_RUN);
	if (run <= 0)
		return false;
	len = (uint64_t)run * b->page;
	while (len && b->budget && at <= (uint64_t)INT64_MAX) {
		uint64_t n = len < SCAN_CHUNK ? len : SCAN_CHUNK;

		if (n > b->budget)
			n = b->budget;
		b->budget -= n;
		if (pread_in_full(b->mem_fd, b->w, n, (off_t)at) != (ssize_t)n)
			return false;
		if (stack_block_holding(b->w, n / 8, at, s->start, sp, s->end,
					b->t->tids, b->t->ntids, from, to))
			return true;
		if (n == len || n <= SCAN_OVERLAP)
			return false;
		at += n - SCAN_OVERLAP;
		len -= n - SCAN_OVERLAP;
	}
	return false;
}

/* The block holding @addr, in @s, found above it and its resident
 * anonymous pages counted as @s's stack; false when it is not found or
 * is the whole mapping. */
static bool bound_from(struct bound *b, struct smap *s, uint64_t addr)
{
	uint64_t from, to;
	int64_t anon;

	if (!block_above(b, s, addr, &from, &to) || to == s->end)
		return false;
	from &= ~(b->page - 1);
	anon = pages_resident(b, from, (to - from + b->page - 1) / b->page,
			      PM_ANON);
	if (anon < 0)
		return false;
	s->stack_anon += (uint64_t)anon * b->page;
	return true;
}

/* The stack of the thread whose stack pointer is @sp, in @s, bounded;
 * false when it cannot be (the mapping is then stack whole). */
static bool bound_one(struct bound *b, struct smap *s, uint64_t sp)
{
	return !block_is_mapping(b, s) && bound_from(b, s, sp);
}

/*
 * A running thread gives no stack pointer, and when its stack is merged
 * with more no top vouches for it: the deepest page it touched, the
 * lowest resident one of a fenced mapping, stands for its stack
 * pointer.  true if @s holds a stack block that ends below its end.
 */
static bool bound_fenced(struct bound *b, struct smap *s)
{
	uint64_t pages = (s->end - s->start < SCAN_BYTES ? s->end - s->start
							  : SCAN_BYTES) /
			 b->page;
	int64_t k = pages_resident(b, s->start, pages, PM_BEFORE);

	return k >= 0 && (uint64_t)k < pages &&
	       bound_from(b, s, s->start + (uint64_t)k * b->page);
}

static void bound_stacks(struct proc_memory *m, int proc_fd, int mem_fd,
			 const struct threads *t)
{
	struct bound b = { .t = t, .mem_fd = mem_fd,
			   .page = m->page_size, .budget = SCAN_BUDGET };
	size_t i, looks = 2 * m->threads_no_sp + 16;

	if (mem_fd < 0 || !b.page || (b.page & (b.page - 1)) ||
	    (!t->nsps && m->threads_no_sp <= m->stacks_vouched))
		return;
	b.pagemap_fd = openat(proc_fd, "pagemap", O_RDONLY | O_CLOEXEC);
	b.w = malloc(SCAN_CHUNK);
	if (b.pagemap_fd < 0 || !b.w)
		goto out;
	for (i = 0; i < t->nsps; i++) {
		struct smap *s = proc_memory_find(m, t->sps[i]);

		if (!s || s->kind != SMAP_ANON || s->stack_unbounded)
			continue;
		if (bound_one(&b, s, t->sps[i]))
			s->stack_bounded = true;
		else
			s->stack_unbounded = true;
	}
	/* the stacks of running threads no top vouched for */
	if (b.budget > FENCED_BUDGET)
		b.budget = FENCED_BUDGET;
	for (i = 0; i < m->n && looks &&
		    m->threads_no_sp > m->stacks_vouched; i++) {
		struct smap *s = &m->v[i];

		if (!candidate(m, i) || s->vouched)
			continue;
		looks--;
		if (bound_fenced(&b, s)) {
			s->vouched = s->stack_bounded = true;
			m->stacks_vouched++;
		}
	}
out:
	free(b.w);
	if (b.pagemap_fd >= 0)
		close(b.pagemap_fd);
}

void proc_memory_read_stacks(int proc_fd, int mem_fd, struct proc_memory *m)
{
	int task_fd = openat(proc_fd, "task",
			     O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct threads t = { 0 };

	if (task_fd < 0)
		return;
	read_sps(m, task_fd, &t);
	proc_memory_vouch_stacks(m, mem_fd, t.tids, t.ntids);
	bound_stacks(m, proc_fd, mem_fd, &t);
	free(t.tids);
	free(t.sps);
}
