/*
 * explain/: the parts add up to RSS, the allocator's claims are bounded
 * by the anonymous memory they can describe, and each finding appears
 * when its numbers say so and not otherwise.  The processes here are
 * built by hand: a few mappings and an allocator's account, each
 * number chosen so that the expected part is known without memsnap.
 */
#include "explain/explain.h"

#include <criterion/criterion.h>
#include <string.h>

#define MiB (1ull << 20)

struct proc {
	struct proc_memory pm;
	struct smap v[16];
	struct alloc_account acc;
};

static void map(struct proc *p, enum smap_kind kind, uint64_t rss,
		uint64_t anon)
{
	struct smap *s = &p->v[p->pm.n];
	uint64_t start = 0x7f0000000000ull + (uint64_t)p->pm.n * (1ull << 32);

	cr_assert_lt(p->pm.n, 16);
	memset(s, 0, sizeof(*s));
	s->start = start;
	s->end = start + (rss > 4096 ? rss : 4096);
	s->prot = 3;
	s->kind = kind;
	s->shared = kind == SMAP_SHMEM;
	s->rss = rss;
	s->anon = anon;
	p->pm.n++;
}

/* VmRSS = the sum of the mappings' Rss, plus @skew. */
static void finish(struct proc *p, int64_t skew)
{
	uint64_t rss = 0;
	size_t i;

	p->pm.v = p->v;
	for (i = 0; i < p->pm.n; i++)
		rss += p->v[i].rss;
	p->pm.have_status = true;
	p->pm.st.have_rss = true;
	p->pm.st.vm_rss = (uint64_t)((int64_t)rss + skew);
	p->pm.st.threads = 4;
	p->pm.page_size = 4096;
	snprintf(p->pm.thp, sizeof(p->pm.thp), "madvise");
}

static void run(struct proc *p, bool attached, struct explain *e)
{
	struct explain_input in = {
		.pid = 42,
		.pm = &p->pm,
		.acc = attached ? &p->acc : NULL,
		.allocator = "jemalloc",
		.can_prof = true,
		.ncpus = 4,
	};

	explain_compute(&in, e);
}

static uint64_t parts_sum(const struct explain *e)
{
	uint64_t s = e->heap;
	int i;

	for (i = 0; i < PARTS; i++)
		s += e->part[i];
	return s;
}

static void jemalloc(struct proc *p, uint64_t in_use, uint64_t free,
		     uint64_t meta)
{
	memset(&p->acc, 0, sizeof(p->acc));
	p->acc.kind = ALLOC_JEMALLOC;
	p->acc.have_in_use = p->acc.have_free = p->acc.have_metadata = true;
	p->acc.in_use = p->acc.allocated = in_use;
	p->acc.free = free;
	p->acc.metadata = meta;
	p->acc.active = in_use;
	p->acc.pdirty = free;
	p->acc.have_pdirty = true;
	p->acc.resident = in_use + free + meta;
	p->acc.have_resident = true;
}

Test(explain_math, parts_add_up_to_rss)
{
	struct proc p = { 0 };
	struct explain e;

	map(&p, SMAP_ANON, 300 * MiB, 300 * MiB);
	map(&p, SMAP_FILE, 50 * MiB, 2 * MiB);
	map(&p, SMAP_SHMEM, 20 * MiB, 0);
	map(&p, SMAP_STACK, 1 * MiB, 1 * MiB);
	finish(&p, 0);
	jemalloc(&p, 200 * MiB, 60 * MiB, 10 * MiB);
	run(&p, true, &e);
	cr_assert_eq(e.rss, 371 * MiB);
	cr_assert_eq(e.part[PART_HEAP_IN_USE], 200 * MiB);
	cr_assert_eq(e.part[PART_HEAP_FREE], 60 * MiB);
	cr_assert_eq(e.part[PART_METADATA], 10 * MiB);
	cr_assert_eq(e.part[PART_STACKS], 1 * MiB);
	/* 30 MiB of the pool, and the file's 2 MiB of copies on write */
	cr_assert_eq(e.part[PART_ANON_OTHER], 32 * MiB);
	cr_assert_eq(e.part[PART_FILE], 48 * MiB);
	cr_assert_eq(e.part[PART_SHMEM], 20 * MiB);
	cr_assert_eq(e.unaccounted, 0);
	cr_assert_eq(parts_sum(&e), e.rss);
	cr_assert_eq(e.clamped, 0);
}

/*
 * RSS is the page walk, whatever VmRSS says: Linux 6.1's counter lags
 * it by up to 64 page faults of each thread (half of a small process's
 * RSS was seen), and a later kernel's by a little.  The parts add up to
 * the walk; VmRSS is kept beside it.  Without mappings to walk, RSS is
 * the counter, all of it unaccounted.
 */
Test(explain_math, rss_is_the_page_walk)
{
	struct proc p = { 0 };
	struct explain e;

	map(&p, SMAP_ANON, 100 * MiB, 100 * MiB);
	finish(&p, -3 * (int64_t)MiB);	/* status behind the page walk */
	jemalloc(&p, 50 * MiB, 0, 0);
	run(&p, true, &e);
	cr_assert_eq(e.rss, 100 * MiB);
	cr_assert_eq(e.vm_rss, 97 * MiB);
	cr_assert_eq(e.unaccounted, 0);
	cr_assert_eq(parts_sum(&e), e.rss);
	finish(&p, 5 * (int64_t)MiB);
	run(&p, true, &e);
	cr_assert_eq(e.rss, 100 * MiB);
	cr_assert_eq(e.vm_rss, 105 * MiB);
	cr_assert_eq(e.unaccounted, 0);

	p.pm.n = 0;
	run(&p, true, &e);
	cr_assert_eq(e.rss, 105 * MiB);
	cr_assert_eq(e.unaccounted, 105 * (int64_t)MiB);
}

Test(explain_math, allocator_claims_are_clamped_in_order)
{
	struct proc p = { 0 };
	struct explain e;

	/* jemalloc's resident beyond the anonymous RSS: untouched pages */
	map(&p, SMAP_ANON, 100 * MiB, 100 * MiB);
	map(&p, SMAP_FILE, 10 * MiB, 0);
	finish(&p, 0);
	jemalloc(&p, 80 * MiB, 50 * MiB, 15 * MiB);
	run(&p, true, &e);
	cr_assert_eq(e.part[PART_HEAP_IN_USE], 80 * MiB, "in use first");
	cr_assert_eq(e.part[PART_METADATA], 15 * MiB, "metadata next");
	cr_assert_eq(e.part[PART_HEAP_FREE], 5 * MiB, "free gets the rest");
	cr_assert_eq(e.cut[PART_HEAP_FREE], 45 * MiB);
	cr_assert_eq(e.clamped, 45 * MiB);
	cr_assert_eq(e.part[PART_ANON_OTHER], 0);
	cr_assert_eq(parts_sum(&e), e.rss);

	/* more in use than there is: everything to in use, nothing else */
	jemalloc(&p, 500 * MiB, 50 * MiB, 15 * MiB);
	run(&p, true, &e);
	cr_assert_eq(e.part[PART_HEAP_IN_USE], 100 * MiB);
	cr_assert_eq(e.part[PART_METADATA] + e.part[PART_HEAP_FREE], 0);
	cr_assert_eq(e.clamped, 465 * MiB);
	cr_assert_eq(parts_sum(&e), e.rss);
}

Test(explain_math, stacks_are_not_the_heap)
{
	struct proc p = { 0 };
	struct explain e;

	map(&p, SMAP_ANON, 40 * MiB, 40 * MiB);
	map(&p, SMAP_ANON, 30 * MiB, 30 * MiB);
	p.v[1].sp_in = true;
	finish(&p, 0);
	jemalloc(&p, 60 * MiB, 0, 0);
	run(&p, true, &e);
	cr_assert_eq(e.part[PART_STACKS], 30 * MiB);
	cr_assert_eq(e.part[PART_HEAP_IN_USE], 40 * MiB,
		     "bounded by the pool without the stack");
	cr_assert_eq(e.clamped, 20 * MiB);
}

Test(explain_math, no_attach_reports_one_heap_part)
{
	struct proc p = { 0 };
	struct explain e;

	map(&p, SMAP_ANON, 200 * MiB, 200 * MiB);
	map(&p, SMAP_FILE, 10 * MiB, 1 * MiB);
	finish(&p, 0);
	run(&p, false, &e);
	cr_assert_not(e.attached);
	cr_assert_eq(e.heap, 200 * MiB);
	cr_assert_eq(e.part[PART_HEAP_IN_USE] + e.part[PART_HEAP_FREE] +
			     e.part[PART_METADATA], 0);
	cr_assert_eq(e.part[PART_ANON_OTHER], 1 * MiB);
	cr_assert_eq(parts_sum(&e), e.rss);
	cr_assert_null(explain_find(&e, "heap_free"));
	cr_assert_null(explain_find(&e, "heap_in_use"));
	cr_assert(strstr(e.verdict, "--no-attach"), "%s", e.verdict);
}

Test(explain_math, tiny_process_no_findings)
{
	struct proc p = { 0 };
	struct explain e;

	map(&p, SMAP_ANON, 3 * MiB, 3 * MiB);
	finish(&p, 0);
	jemalloc(&p, 0, 3 * MiB, 0);
	run(&p, true, &e);
	cr_assert_eq(e.nf, 0);
	cr_assert(strstr(e.verdict, "too small"), "%s", e.verdict);
}

Test(explain_math, findings_most_bytes_first)
{
	struct proc p = { 0 };
	struct explain e;
	size_t i;

	/* heap_free 250, file 150, anon_other 130 */
	map(&p, SMAP_ANON, 480 * MiB, 480 * MiB);
	map(&p, SMAP_FILE, 150 * MiB, 0);
	finish(&p, 0);
	jemalloc(&p, 100 * MiB, 250 * MiB, 0);
	run(&p, true, &e);
	cr_assert_eq(e.nf, 3);
	cr_assert_str_eq(e.f[1].id, "file");
	cr_assert_str_eq(e.f[2].id, "anon_other");
	for (i = 1; i < e.nf; i++)
		cr_assert_geq(e.f[i - 1].bytes, e.f[i].bytes);
	cr_assert_str_eq(e.f[0].id, "heap_free");
	cr_assert(strstr(e.verdict, "holds free"), "%s", e.verdict);
	for (i = 0; i < e.nf; i++)
		cr_assert(e.f[i].text[0] && e.f[i].remedy[0], "%s",
			  e.f[i].id);
}

Test(explain_math, glibc_free_bounded_by_its_arenas)
{
	struct proc p = { 0 };
	struct explain e;

	/* after malloc_trim(0): malloc_info still counts 300 MiB of free
	 * chunks, whose pages are gone; the program's own 200 MiB mmap and
	 * a 40 MiB chunk mmap'd by malloc are beside the arenas */
	map(&p, SMAP_HEAP, 30 * MiB, 30 * MiB);
	map(&p, SMAP_ANON, 20 * MiB, 20 * MiB);	/* an arena heap */
	p.v[1].arena_heap = true;	/* its heap_info said so */
	map(&p, SMAP_ANON, 200 * MiB, 200 * MiB);	/* the program's */
	map(&p, SMAP_ANON, 40 * MiB, 40 * MiB);	/* malloc's mmap */
	p.v[3].start += 4096;		/* not 64 MiB aligned */
	p.v[3].end += 4096;
	finish(&p, 0);
	memset(&p.acc, 0, sizeof(p.acc));
	p.acc.kind = ALLOC_GLIBC;
	p.acc.have_in_use = p.acc.have_free = true;
	p.acc.mmap_bytes = 40 * MiB;
	p.acc.in_use = 45 * MiB + p.acc.mmap_bytes;
	p.acc.free = 300 * MiB;
	run(&p, true, &e);
	cr_assert_eq(e.part[PART_HEAP_IN_USE], 85 * MiB);
	cr_assert_eq(e.part[PART_HEAP_FREE], 5 * MiB,
		     "what the arenas' mappings hold beyond the in use");
	cr_assert_eq(e.cut[PART_HEAP_FREE], 295 * MiB);
	cr_assert_eq(e.part[PART_ANON_OTHER], 200 * MiB,
		     "the program's own mmap stays its own");
	cr_assert_eq(parts_sum(&e), e.rss);
}
