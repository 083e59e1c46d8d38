/*
 * sampler_read_ctl() (sampler/sampler.c) on control blocks in this
 * process's memory, read as memsnap reads a target's: a blank one (the
 * image copied in by a memsnap killed before its first switch-on) is
 * told apart from a foreign or damaged one, and a hostile geometry is
 * refused before memsnap sizes anything by it; and the hooked family
 * against the catalogue detection reads.
 */
#include "sampler/internal.h"

#include "sampler/family.h"
#include "proc/maps.h"
#include "symbols/objects.h"
#include "symbols/detect.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct sampler_ctl *blank(void)
{
	struct sampler_ctl *c = calloc(1, sizeof(*c));

	cr_assert_not_null(c);
	return c;
}

static int read_back(const struct sampler_ctl *c)
{
	struct sampler_ctl *out = blank();
	int rc = sampler_read_ctl(getpid(), (uint64_t)(uintptr_t)c, out);

	free(out);
	return rc;
}

static void sign(struct sampler_ctl *c)
{
	memcpy(c->signature, SAMPLER_SIGNATURE, sizeof(c->signature));
	c->version = SAMPLER_VERSION;
}

Test(sampler_ctl, blank_is_never_switched_on)
{
	struct sampler_ctl *c = blank();

	cr_assert_eq(read_back(c), -ENODATA);
	sign(c);
	cr_assert_eq(read_back(c), 0, "a signed block with no table");
	free(c);
}

Test(sampler_ctl, foreign_or_damaged_is_refused)
{
	struct sampler_ctl *c = blank();

	sign(c);
	c->version = SAMPLER_VERSION + 1;
	cr_assert_eq(read_back(c), -EPROTO, "another version");
	sign(c);
	c->signature[3] ^= 1;
	cr_assert_eq(read_back(c), -EPROTO, "another signature");
	free(c);
}

/* What a hostile target may claim of its table. */
Test(sampler_ctl, hostile_geometry_is_refused)
{
	struct sampler_ctl *c = blank();
	static const struct {
		uint64_t nrecs, stack_bytes;
		int64_t len_delta;
	} bad[] = {
		{ 4, 4096, 0 },			/* fewer than a bucket */
		{ (1u << 14) + 8, 4096, 0 },	/* not a power of two */
		{ 1ull << 40, 4096, 0 },	/* more than memsnap makes */
		{ 1u << 14, 1u << 20, 0 },	/* stacks of a megabyte */
		{ 1u << 14, 128u << 10, 0 },	/* past --stack-bytes 64K */
		{ 1u << 14, 2048, 0 },		/* below --stack-bytes 4K */
		{ 1u << 14, 12288, 0 },		/* not a power of two */
		{ 1u << 14, 4100, 0 },		/* not a multiple of 16 */
		{ 1u << 14, 4096, -1 },		/* a length that disagrees */
	};
	size_t i;

	sign(c);
	c->table = 0x10000;
	c->nrecs = 1u << 14;
	c->stack_bytes = 4096;
	c->table_len = sampler_table_len(c->nrecs, 4096);
	cr_assert_eq(read_back(c), 0, "the geometry memsnap makes");
	for (i = 4096; i <= 65536; i *= 2) {
		c->stack_bytes = i;
		c->table_len = sampler_table_len(c->nrecs, i);
		cr_assert_eq(read_back(c), 0, "--stack-bytes %zu", i);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		c->nrecs = bad[i].nrecs;
		c->stack_bytes = bad[i].stack_bytes;
		c->table_len = sampler_table_len(c->nrecs, c->stack_bytes) +
			       bad[i].len_delta;
		cr_assert_eq(read_back(c), -EPROTO, "case %zu", i);
	}
	free(c);
}

/*
 * Detection's catalogue of entry points (symbols/detect.c) is larger
 * than the family the sampler hooks, but holds every C function of it:
 * a hooked function it did not know would be taken for the allocation's
 * site in a report (profile/report.c), and a thread inside it would not
 * be fenced off from borrowing (allocators/allocator.c).
 */
Test(sampler_ctl, every_hooked_c_function_is_a_known_entry_point)
{
#define ROW(sym, FN, SHAPE, cxx, name) { name, cxx },
	static const struct {
		const char *name;
		int cxx;
	} rows[] = { SAMPLER_FAMILY(ROW) };
#undef ROW
	size_t i, c = 0;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		if (rows[i].cxx)
			continue;
		c++;
		cr_expect(alloc_is_entry_point(rows[i].name),
			  "%s is hooked and not in detection's catalogue",
			  rows[i].name);
	}
	cr_assert_geq(c, 10, "only %zu C functions in the family", c);
}

/* The one byte two addresses differ in: a mirror is one byte away from
 * the function its slots hold, or it is not used. */
Test(sampler_mirror, one_byte_apart)
{
	cr_assert_eq(sampler_one_byte(0x7f1234567890ull, 0x7e1234567890ull),
		     5);
	cr_assert_eq(sampler_one_byte(0x7f1234567890ull, 0x7f0034567890ull),
		     4);
	cr_assert_eq(sampler_one_byte(0x10, 0x11), 0);
	cr_assert_eq(sampler_one_byte(0x10, 0x10), -1, "equal");
	cr_assert_eq(sampler_one_byte(0x7f1234567890ull, 0x7e1334567890ull),
		     -1, "two bytes");
	cr_assert_eq(sampler_one_byte(0, 0xff00000000000000ull), 7);
}

static struct maps *maps_of(const char *text)
{
	struct maps *m = NULL;

	cr_assert_eq(maps_parse_buf(text, strlen(text), &m), 0);
	return m;
}

/*
 * Where the copy of a span of the libraries goes: the same offsets in
 * the nearest free 4 GiB block below (then above), never over a
 * mapping, never past the top of the process's address space, and
 * nowhere when the span crosses a block's edge.
 */
Test(sampler_mirror, placed_in_a_free_block_one_byte_away)
{
	struct maps *m = maps_of(
		"7f3300100000-7f3300200000 rw-p 00000000 00:00 0\n"
		"7f3400000000-7f3400400000 r-xp 00000000 08:01 12 /lib/libc.so.6\n"
		"7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]\n"
		"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]\n");
	uint64_t lo = 0x7f3400100000ull, hi = 0x7f3400300000ull, at;

	/* by distance, below first: 0x33 is taken, so 0x35, then 0x32 */
	at = sampler_mirror_place(m, lo, hi, 0);
	cr_assert_eq(at, 0x7f3500100000ull, "%#lx", (unsigned long)at);
	cr_assert_eq(sampler_one_byte(lo, at), 4);
	cr_assert_eq(sampler_mirror_place(m, lo, hi, 1), 0x7f3200100000ull);
	cr_assert_eq(sampler_mirror_place(m, lo, hi, 2), 0x7f3600100000ull);
	/* across a block's edge: none */
	cr_assert_eq(sampler_mirror_place(m, 0x7f34fff00000ull,
					  0x7f3500100000ull, 0), 0);
	maps_free(m);

	/* the top block: nothing above the stack's end */
	m = maps_of("7fff00000000-7fff00400000 r-xp 00000000 08:01 12 /lib/libc.so.6\n"
		    "7fff80000000-7fff80021000 rw-p 00000000 00:00 0 [stack]\n");
	for (unsigned int i = 0; i < 300; i++) {
		at = sampler_mirror_place(m, 0x7fff00100000ull,
					  0x7fff00200000ull, i);
		if (!at)
			break;
		cr_assert_lt(at, 0x7fff00000000ull, "%#lx", (unsigned long)at);
	}
	cr_assert_eq(at, 0, "all 255 blocks below, then none");
	maps_free(m);

	/* a program low in memory: above is where room is */
	m = maps_of("00400000-00500000 r-xp 00000000 08:01 13 /usr/bin/prog\n"
		    "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]\n");
	at = sampler_mirror_place(m, 0x400000, 0x500000, 0);
	cr_assert_eq(at, 0x100400000ull, "%#lx", (unsigned long)at);
	maps_free(m);
}

/* ---- the stacks a sample copies in place (sampler/stack_bounds.c) ------ */

#define TOP_WORDS 1024

/* A thread stack's top as glibc lays it out on x86-64: the control
 * block at word @k (its address in words 0 and 2), its stack mapping's
 * start and size @off bytes further. */
static void fake_top(uint64_t *w, uint64_t at, size_t k, uint64_t off,
		     uint64_t block, uint64_t size)
{
	memset(w, 0, TOP_WORDS * 8);
	w[k] = w[k + 2] = at + k * 8;
	w[k + off / 8] = block;
	w[k + off / 8 + 1] = size;
}

Test(sampler_ctl, block_offset_found_from_the_control_block)
{
	static uint64_t w[TOP_WORDS];
	uint64_t at = 0x7f0000100000, offs[8];

	fake_top(w, at, 100, 0x690, 0x7f0000000000, 0x102000);
	cr_assert_eq(sampler_block_offsets(w, TOP_WORDS, at, 0x7f0000000000,
					   0x102000, offs, 8), 1);
	cr_assert_eq(offs[0], 0x690);
	/* another size, another mapping: not it */
	cr_assert_eq(sampler_block_offsets(w, TOP_WORDS, at, 0x7f0000000000,
					   0x101000, offs, 8), 0);
}

Test(sampler_ctl, block_offset_needs_both_self_pointers)
{
	static uint64_t w[TOP_WORDS];
	uint64_t at = 0x7f0000100000, offs[8];

	/* a lone self pointer (an empty list's head) is no control block */
	fake_top(w, at, 100, 0x690, 0x7f0000000000, 0x102000);
	w[102] = 0;
	cr_assert_eq(sampler_block_offsets(w, TOP_WORDS, at, 0x7f0000000000,
					   0x102000, offs, 8), 0);
	/* a pair past the buffer's end is not read */
	fake_top(w, at, TOP_WORDS - 4, 16, 0x7f0000000000, 0x102000);
	w[TOP_WORDS - 2] = 0x7f0000000000;
	cr_assert_eq(sampler_block_offsets(w, TOP_WORDS, at, 0x7f0000000000,
					   0x102000, offs, 8), 0);
}

/* AArch64's glibc: the thread pointer at the end of a struct pthread
 * of 0x6c0 bytes, the tid at 0xd0 in it; a tid not the process's is
 * no control block. */
Test(sampler_ctl, block_offset_found_below_the_thread_pointer)
{
	static uint64_t w[TOP_WORDS];
	uint64_t offs[8];
	pid_t tids[] = { 4242, 4243 }, tid = 4243;	/* sorted */
	size_t pd = 200;

	memset(w, 0, sizeof(w));
	memcpy((char *)&w[pd] + 0xd0, &tid, sizeof(tid));
	w[pd + 0x600 / 8] = 0x7f0000000000;
	w[pd + 0x600 / 8 + 1] = 0x102000;
	cr_assert_eq(sampler_block_offsets_tid(w, TOP_WORDS,
					       0x7f0000000000, 0x102000, 0x6c0,
					       0xd0, tids, 2, offs, 8), 1);
	cr_assert_eq(offs[0], (uint64_t)(0x600 - 0x6c0));
	tids[1] = 4244;
	cr_assert_eq(sampler_block_offsets_tid(w, TOP_WORDS,
					       0x7f0000000000, 0x102000, 0x6c0,
					       0xd0, tids, 2, offs, 8), 0);
}

struct parked {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool ready, done;
	uint64_t tp, sp;
};

static void *park(void *arg)
{
	struct parked *p = arg;
	volatile char here;

	pthread_mutex_lock(&p->lock);
	p->tp = (uint64_t)(uintptr_t)__builtin_thread_pointer();
	p->sp = (uint64_t)(uintptr_t)&here;
	p->ready = true;
	pthread_cond_broadcast(&p->cond);
	while (!p->done)
		pthread_cond_wait(&p->cond, &p->lock);
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/*
 * Learned from this very process: the offset found in a live thread's
 * control block holds the start and size of a mapping that contains
 * both the thread's stack pointer and its thread pointer, as the
 * sampler's check wants (found from the control block's self pointers
 * on x86-64, from glibc's exported sizes and the tid on AArch64); and
 * the main thread's stack is [stack].
 */
Test(sampler_ctl, stack_bounds_of_this_process)
{
	struct parked p = { PTHREAD_MUTEX_INITIALIZER,
			    PTHREAD_COND_INITIALIZER, false, false, 0, 0 };
	struct object_source src = { .pid = getpid() };
	struct sampler_prep prep;
	struct objects *os;
	struct maps *m;
	pthread_t t;
	volatile char here;
	uint64_t sp = (uint64_t)(uintptr_t)&here;

	cr_assert_eq(pthread_create(&t, NULL, park, &p), 0);
	pthread_mutex_lock(&p.lock);
	while (!p.ready)
		pthread_cond_wait(&p.cond, &p.lock);
	pthread_mutex_unlock(&p.lock);
	cr_assert_eq(maps_load(getpid(), &m), 0);
	cr_assert_eq(objects_new(m, &src, &os), 0);
	memset(&prep, 0, sizeof(prep));
	sampler_stack_bounds(getpid(), os, m, &prep);
	objects_free(os);
	maps_free(m);
	/* Criterion runs a test on the process's main thread */
	cr_assert(prep.main_lo <= sp && sp < prep.main_hi,
		  "[stack] %#" PRIx64 "-%#" PRIx64 " misses %#" PRIx64,
		  prep.main_lo, prep.main_hi, sp);
	{
		const uint64_t *f = (const uint64_t *)(uintptr_t)(
			p.tp + prep.block_off);

		cr_assert_neq(prep.block_off, 0);
		cr_assert(f[0] && f[0] <= p.sp && p.sp < p.tp &&
				  p.tp - f[0] < f[1],
			  "at %#" PRIx64 ": %#" PRIx64 ", %#" PRIx64
			  " for sp %#" PRIx64 " tp %#" PRIx64,
			  prep.block_off, f[0], f[1], p.sp, p.tp);
	}
	pthread_mutex_lock(&p.lock);
	p.done = true;
	pthread_cond_broadcast(&p.cond);
	pthread_mutex_unlock(&p.lock);
	pthread_join(t, NULL);
}
