/*
 * The hooks' mirrors (sampler/internal.h): a GOT slot in read-only
 * memory (RELRO: most of a hardened server's slots) swapped with no
 * system call in the target.
 *
 * A slot holds a function's address A.  Its mirror is a 16-byte jump
 * to the hook at an address B that differs from A in byte 4 only (the
 * same offset in another 4 GiB block), so the swap is one byte written
 * through /proc/PID/task/TID/mem, which writes read-only private pages
 * as a debugger's breakpoint does.  A thread reading the slot at that
 * moment sees A or B whatever the kernel's copy does, byte by byte or
 * not: no other byte changes.  No mprotect() either way, each of which
 * costs the borrowed thread two ptrace stops while the call runs.
 *
 * Mirrors are made once per process (the mapping is never unmapped: a
 * thread may be in a jump); the control block keeps them for later
 * rounds and for children forked since.  Where the kernel refuses the
 * write (CONFIG_PROC_MEM_NO_FORCE) or no block is free, the slot is
 * swapped as before, by the image between two mprotect() calls.
 */
#include "sampler/internal.h"

#include "allocators/allocator.h"
#include "common/util.h"
#include "injector/inject.h"
#include "injector/patch.h"
#include "proc/maps.h"
#include "proc/procfs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "byte k of a slot is at slot + k");

#define MIRROR_BYTE 4		/* the byte that differs: a 4 GiB block */
#define MIRROR_JUMP PATCH_JUMP_LEN /* bytes per jump: the arch seam's */
#define MIRROR_SPAN (64ull << 20) /* one mapping covers this much at most */
#define MIRROR_TRIES 4		/* blocks tried per mapping, in the stop */
#define MIRROR_LOWEST (1ull << 20)

int sampler_one_byte(uint64_t a, uint64_t b)
{
	uint64_t x = a ^ b;
	int k;

	for (k = 0; x && k < 8; k++)
		if (!(x & ~(0xffull << (8 * k))))
			return k;
	return -1;
}

/* The highest address a mapping of the process reaches, below the
 * kernel's (x86-64's [vsyscall] is listed): where user space ends for
 * this process, whatever the width of its addresses. */
static uint64_t user_top(const struct maps *m)
{
	uint64_t top = 0;
	size_t i;

	for (i = 0; i < m->n; i++)
		if (m->v[i].end < (1ull << 56) && m->v[i].end > top)
			top = m->v[i].end;
	return top;
}

static bool is_free(const struct maps *m, uint64_t lo, uint64_t hi)
{
	size_t i;

	for (i = 0; i < m->n; i++)
		if (m->v[i].start < hi && lo < m->v[i].end)
			return false;
	return true;
}

uint64_t sampler_mirror_place(const struct maps *m, uint64_t lo, uint64_t hi,
			      unsigned int skip)
{
	uint64_t shift = 8 * MIRROR_BYTE, mask = 0xffull << shift;
	uint64_t b = (lo & mask) >> shift, top = user_top(m);
	unsigned int d, side;

	if (lo >> shift != (hi - 1) >> shift)
		return 0;	/* spans two blocks */
	/* the nearest blocks first; at each distance the one below
	 * (where the libraries' neighbours are free on both CPUs) before
	 * the one above */
	for (d = 1; d < 256; d++) {
		for (side = 0; side < 2; side++) {
			uint64_t v, at;

			if (side ? b + d > 0xff : d > b)
				continue;
			v = side ? b + d : b - d;
			at = (lo & ~mask) | v << shift;
			if (at < MIRROR_LOWEST || at + (hi - lo) > top ||
			    !is_free(m, at, at + (hi - lo)))
				continue;
			if (!skip--)
				return at;
		}
	}
	return 0;
}

struct mirror_fn {
	uint64_t a;
	unsigned int fn;
};

static int by_addr(const void *x, const void *y)
{
	const struct mirror_fn *a = x, *b = y;

	return a->a < b->a ? -1 : a->a > b->a ? 1 : (int)a->fn - (int)b->fn;
}

/* One mapping for @v[0..@n) (sorted, at least MIRROR_JUMP apart, one
 * block, within MIRROR_SPAN): mapped and written, into @m. */
static int make_group(struct alloc_session *s, const struct maps *maps,
		      const struct mirror_fn *v, size_t n,
		      const uint64_t *hook, struct sampler_mirrors *m)
{
	uint64_t ps = page_size(), lo = v[0].a & ~(ps - 1);
	uint64_t hi = (v[n - 1].a + MIRROR_JUMP + ps - 1) & ~(ps - 1);
	uint64_t at = 0;
	unsigned int t;
	size_t i;
	int rc = -ENOSPC;

	for (t = 0; t < MIRROR_TRIES; t++) {
		uint64_t args[5] = { 0, hi - lo, PROT_READ | PROT_EXEC,
				     MAP_PRIVATE | MAP_ANONYMOUS |
				     MAP_FIXED_NOREPLACE, 0 };
		int64_t ret;

		args[0] = sampler_mirror_place(maps, lo, hi, t);
		if (!args[0])
			return -ENOSPC;
		rc = inject_syscall(alloc_inject(s), SYS_mmap, args, 5, &ret);
		if (rc)
			return rc;
		if ((uint64_t)ret == args[0]) {
			at = args[0];
			break;
		}
		/* taken since the maps were read (-EEXIST), or a kernel
		 * without MAP_FIXED_NOREPLACE put it elsewhere: an empty
		 * mapping, harmless, and the next block */
		rc = ret < 0 ? (int)ret : -EEXIST;
	}
	if (!at)
		return rc;
	for (i = 0; i < n; i++) {
		unsigned char code[MIRROR_JUMP];
		uint64_t b = at + (v[i].a - lo);

		patch_native()->jump(code, hook[v[i].fn]);
		/* a kernel that forbids forced writes refuses this first */
		rc = inject_write(alloc_inject(s), b, code, sizeof(code));
		if (rc)
			return rc;
		m->at[v[i].fn] = b;
		m->of[v[i].fn] = v[i].a;
	}
	return 0;
}

int sampler_mirrors_make(struct alloc_session *s, const struct maps *maps,
			 const uint64_t *from, const uint64_t *hook,
			 struct sampler_mirrors *m)
{
	struct mirror_fn v[SAMPLER_NFN];
	size_t n = 0, kept = 0, i, g;
	int rc = 0;

	for (i = 0; i < SAMPLER_NFN; i++)
		if (from[i] && hook[i] && !m->at[i])
			v[n++] = (struct mirror_fn){ .a = from[i],
						     .fn = (unsigned int)i };
	qsort(v, n, sizeof(v[0]), by_addr);
	/* one jump per address (an alias keeps the first function's hook
	 * and its slots go the old way), none overlapping the last */
	for (i = 0; i < n; i++)
		if (!kept || v[i].a >= v[kept - 1].a + MIRROR_JUMP)
			v[kept++] = v[i];
	for (g = 0; g < kept && !rc; g = i) {
		for (i = g + 1; i < kept; i++)
			if (v[i].a >> 32 != v[g].a >> 32 ||
			    v[i].a - v[g].a >= MIRROR_SPAN)
				break;
		rc = make_group(s, maps, v + g, i - g, hook, m);
	}
	return rc;
}

void sampler_mirrors_check(pid_t pid, const uint64_t *hook,
			   struct sampler_mirrors *m)
{
	unsigned char want[MIRROR_JUMP], got[MIRROR_JUMP];
	size_t i;

	for (i = 0; i < SAMPLER_NFN; i++) {
		if (!m->at[i])
			continue;
		patch_native()->jump(want, hook[i]);
		if (!hook[i] || sampler_one_byte(m->at[i], m->of[i]) < 0 ||
		    proc_read_mem(pid, m->at[i], got, sizeof(got)) ||
		    memcmp(want, got, sizeof(got)))
			m->at[i] = m->of[i] = 0;
	}
}

bool sampler_mirror_of(const struct sampler_mirrors *m, unsigned int fn,
		       uint64_t cur)
{
	return m->at[fn] && m->of[fn] == cur &&
	       sampler_one_byte(cur, m->at[fn]) == MIRROR_BYTE;
}

int sampler_poke(struct alloc_session *s, uint64_t slot, uint64_t from,
		 uint64_t to)
{
	int k = sampler_one_byte(from, to);
	unsigned char byte;
	uint64_t cur;
	int rc;

	if (k < 0 || (slot & 7))
		return -EINVAL;
	rc = proc_read_mem(alloc_pid(s), slot, &cur, sizeof(cur));
	if (rc)
		return rc;
	if (cur != from)
		return -EAGAIN;
	byte = (unsigned char)(to >> (8 * k));
	rc = inject_write(alloc_inject(s), slot + (uint64_t)k, &byte, 1);
	if (rc)
		return rc;
	rc = proc_read_mem(alloc_pid(s), slot, &cur, sizeof(cur));
	return rc ? rc : cur == to ? 0 : -EAGAIN;
}

int sampler_unpoke(struct alloc_session *s, uint64_t image,
		   const struct sampler_ctl *c, unsigned int *restored)
{
	uint64_t log = image + SAMPLER_OFF_sampler_ctl +
		       offsetof(struct sampler_ctl, log);
	uint64_t n = c->nslots < SAMPLER_MAXSLOTS ? c->nslots
						  : SAMPLER_MAXSLOTS;
	struct sampler_slot *v;
	uint64_t i, zero = 0;
	int rc;

	*restored = 0;
	if (!n)
		return 0;
	v = calloc(n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	rc = proc_read_mem(alloc_pid(s), log, v, n * sizeof(*v));
	for (i = 0; !rc && i < n; i++) {
		if (v[i].result != SAMPLER_SLOT_POKE)
			continue;
		/* then its entry, which off passes over with no system
		 * call (killed in between, off reads the slot and finds
		 * it put back) */
		if (sampler_poke(s, v[i].slot, v[i].to, v[i].from))
			continue;
		(*restored)++;
		rc = inject_write(alloc_inject(s), log + i * sizeof(*v) +
				  offsetof(struct sampler_slot, result),
				  &zero, sizeof(zero));
	}
	free(v);
	return rc;
}
