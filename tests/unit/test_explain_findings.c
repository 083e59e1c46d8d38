/*
 * explain/findings.c: every finding appears when its numbers cross the
 * threshold (a ratio over 1.1 and over 10 MiB at stake, as Redis's
 * MEMORY DOCTOR) and stays silent just under it.  Each process is built
 * by hand, so the bytes a finding must name are known here.
 */
#include "explain/explain.h"
#include "allocators/allocator_internal.h"

#include <criterion/criterion.h>
#include <string.h>

#define MiB (1ull << 20)

struct proc {
	struct proc_memory pm;
	struct smap v[8];
	struct alloc_account acc;
	struct explain_input in;
	struct explain e;
};

static void map(struct proc *p, enum smap_kind kind, uint64_t rss,
		uint64_t anon, uint64_t huge)
{
	struct smap *s = &p->v[p->pm.n];
	uint64_t start = 0x7f0000000000ull + (uint64_t)p->pm.n * (1ull << 32);

	memset(s, 0, sizeof(*s));
	s->start = start;
	s->end = start + rss + 4096;
	s->prot = 3;
	s->kind = kind;
	s->rss = rss;
	s->anon = anon;
	s->anon_huge = huge;
	p->pm.n++;
}

/* A process of @anon anonymous and @file file RSS, its allocator of
 * @kind saying @in_use, @free, @meta. */
static void setup(struct proc *p, enum alloc_kind kind, uint64_t anon,
		  uint64_t file, uint64_t in_use, uint64_t free,
		  uint64_t meta)
{
	memset(p, 0, sizeof(*p));
	/* glibc's arenas: the brk heap */
	map(p, kind == ALLOC_GLIBC ? SMAP_HEAP : SMAP_ANON, anon, anon, 0);
	if (file)
		map(p, SMAP_FILE, file, 0, 0);
	p->pm.v = p->v;
	p->pm.have_status = true;
	p->pm.st.have_rss = true;
	p->pm.st.vm_rss = anon + file;
	p->pm.st.threads = 8;
	p->pm.page_size = 4096;
	snprintf(p->pm.thp, sizeof(p->pm.thp), "always");
	p->acc.kind = kind;
	p->acc.have_in_use = p->acc.have_free = p->acc.have_metadata = true;
	p->acc.in_use = p->acc.allocated = p->acc.active = in_use;
	p->acc.free = free;
	p->acc.metadata = meta;
	snprintf(p->acc.conf_var, sizeof(p->acc.conf_var), "MALLOC_CONF");
	p->in = (struct explain_input){
		.pid = 42, .pm = &p->pm, .acc = &p->acc,
		.allocator = kind == ALLOC_GLIBC ? "glibc" : "jemalloc",
		.can_prof = kind == ALLOC_JEMALLOC, .ncpus = 2,
	};
}

/* Cause @id inside finding @host of @e, or NULL. */
static const struct explain_cause *cause(const struct explain *e,
					 const char *host, const char *id)
{
	const struct explain_finding *f = explain_find(e, host);
	size_t i;

	for (i = 0; f && i < f->ncauses; i++)
		if (!strcmp(f->causes[i].id, id))
			return &f->causes[i];
	return NULL;
}

static const struct explain_finding *run(struct proc *p, const char *id)
{
	p->pm.st.vm_rss = 0;
	for (size_t i = 0; i < p->pm.n; i++)
		p->pm.st.vm_rss += p->v[i].rss;
	explain_compute(&p->in, &p->e);
	return explain_find(&p->e, id);
}

Test(explain_findings, heap_free)
{
	struct proc p;
	const struct explain_finding *f;

	setup(&p, ALLOC_JEMALLOC, 300 * MiB, 0, 100 * MiB, 200 * MiB, 0);
	p.acc.pdirty = 200 * MiB;
	f = run(&p, "heap_free");
	cr_assert_not_null(f);
	cr_assert_eq(f->bytes, 200 * MiB);
	cr_assert(strstr(f->remedy, "trim"), "%s", f->remedy);
	cr_assert(strstr(f->remedy, "dirty_decay_ms"), "%s", f->remedy);
	/* fragmentation inside active pages: a purge cannot return it */
	p.acc.pdirty = 0;
	p.acc.active = 300 * MiB;
	f = run(&p, "heap_free");
	cr_assert_not_null(f);
	cr_assert(strstr(f->remedy, "fragmentation"), "%s", f->remedy);
	cr_assert(strstr(p.e.verdict, "fragmentation"), "%s", p.e.verdict);
	/* under 10 MiB: nothing to say */
	setup(&p, ALLOC_JEMALLOC, 300 * MiB, 0, 5 * MiB, 9 * MiB, 0);
	cr_assert_null(run(&p, "heap_free"));
	/* 20 MiB free beside 500 MiB in use: ratio 1.04 */
	setup(&p, ALLOC_JEMALLOC, 600 * MiB, 0, 500 * MiB, 20 * MiB, 0);
	cr_assert_null(run(&p, "heap_free"));
	/* 60 MiB beside 500: 1.12 */
	setup(&p, ALLOC_JEMALLOC, 600 * MiB, 0, 500 * MiB, 60 * MiB, 0);
	cr_assert_not_null(run(&p, "heap_free"));
}

Test(explain_findings, glibc_arenas)
{
	struct proc p;
	const struct explain_finding *f;

	setup(&p, ALLOC_GLIBC, 200 * MiB, 0, 20 * MiB, 150 * MiB, 0);
	p.acc.have_metadata = false;
	p.acc.arenas = 16;
	p.acc.free_other_arenas = 120 * MiB;
	const struct explain_cause *c;

	/* a cause of heap_free's bytes: inside it, never beside it */
	cr_assert_null(run(&p, "glibc_arenas"), "counted twice");
	c = cause(&p.e, "heap_free", "glibc_arenas");
	cr_assert_not_null(c);
	cr_assert_eq(c->bytes, 120 * MiB);
	cr_assert(strstr(c->remedy, "MALLOC_ARENA_MAX"), "%s", c->remedy);
	cr_assert(strstr(c->text, "16 glibc arenas"), "%s", c->text);
	/* the main arena and one more: normal */
	p.acc.arenas = 2;
	run(&p, "heap_free");
	cr_assert_null(cause(&p.e, "heap_free", "glibc_arenas"));
	/* many arenas holding little */
	p.acc.arenas = 16;
	p.acc.free_other_arenas = 8 * MiB;
	run(&p, "heap_free");
	cr_assert_null(cause(&p.e, "heap_free", "glibc_arenas"));
	/* bounded by what the free part holds after a trim, in its text
	 * too */
	p.acc.free_other_arenas = 120 * MiB;
	p.acc.free = 150 * MiB;
	p.acc.in_use = 20 * MiB;
	p.v[0].rss = p.v[0].anon = 50 * MiB;
	f = run(&p, "heap_free");
	cr_assert_not_null(f);
	cr_assert_eq(f->bytes, 30 * MiB);
	cr_assert(strstr(f->text, "(30.0 MiB of them outside the main arena)"),
		  "%s", f->text);
	c = cause(&p.e, "heap_free", "glibc_arenas");
	cr_assert_not_null(c);
	cr_assert_eq(c->bytes, 30 * MiB);
	/* no heap_free (a large heap in use beside it): on its own */
	setup(&p, ALLOC_GLIBC, 2200 * MiB, 0, 2000 * MiB, 150 * MiB, 0);
	p.acc.have_metadata = false;
	p.acc.arenas = 16;
	p.acc.free_other_arenas = 120 * MiB;
	cr_assert_null(run(&p, "heap_free"));
	f = explain_find(&p.e, "glibc_arenas");
	cr_assert_not_null(f);
	cr_assert_eq(f->bytes, 120 * MiB);
}

Test(explain_findings, allocator_metadata)
{
	struct proc p;
	const struct explain_finding *f;

	setup(&p, ALLOC_JEMALLOC, 400 * MiB, 0, 100 * MiB, 0, 250 * MiB);
	snprintf(p.acc.metadata_thp, sizeof(p.acc.metadata_thp), "always");
	p.acc.narenas = 64;
	f = run(&p, "allocator_metadata");
	cr_assert_not_null(f);
	cr_assert_eq(f->bytes, 250 * MiB);
	cr_assert(strstr(f->remedy, "metadata_thp"), "%s", f->remedy);
	cr_assert(strstr(f->text, "64 arenas"), "%s", f->text);
	/* 8 MiB of metadata: nothing */
	setup(&p, ALLOC_JEMALLOC, 400 * MiB, 0, 100 * MiB, 0, 8 * MiB);
	cr_assert_null(run(&p, "allocator_metadata"));
	/* 30 MiB beside 1 GiB in use: 3%, normal */
	setup(&p, ALLOC_JEMALLOC, 1100 * MiB, 0, 1024 * MiB, 0, 30 * MiB);
	cr_assert_null(run(&p, "allocator_metadata"));
}

/*
 * The arm64 case on x86-64: jemalloc with metadata_thp:always
 * and 32 arenas, its metadata (7 MiB by stats.metadata) on 34 huge
 * pages of 2 MiB, 66 MiB of them given by the kernel; the program holds
 * 3 MiB and maps nothing.  The huge pages are the allocator's metadata,
 * not memory outside the allocator.
 */
Test(explain_findings, allocator_metadata_on_huge_pages)
{
	struct proc p;
	const struct explain_finding *f;

	setup(&p, ALLOC_JEMALLOC, 70 * MiB, 3 * MiB, 3 * MiB, MiB / 2,
	      7 * MiB);
	p.v[0].anon_huge = 66 * MiB;
	p.pm.huge_page = 2 * MiB;
	p.acc.metadata_thp_pages = 34;
	p.acc.have_metadata_thp_pages = true;
	p.acc.narenas = 33;
	snprintf(p.acc.metadata_thp, sizeof(p.acc.metadata_thp), "always");
	f = run(&p, "allocator_metadata");
	cr_assert_not_null(f, "%s", p.e.verdict);
	cr_assert_eq(p.e.part[PART_METADATA], 66 * MiB);
	cr_assert_eq(f->bytes, 66 * MiB);
	cr_assert(strstr(f->text, "34 transparent huge pages"), "%s", f->text);
	cr_assert(strstr(f->remedy, "metadata_thp:disabled"), "%s", f->remedy);
	cr_assert_eq(p.e.part[PART_ANON_OTHER], 70 * MiB - 3 * MiB - 66 * MiB -
							 MiB / 2);
	cr_assert_null(explain_find(&p.e, "anon_other"));
	cr_assert(strstr(p.e.verdict, "allocator metadata"), "%s",
		  p.e.verdict);
	/* huge pages of the program's own: not jemalloc's metadata */
	p.acc.metadata_thp_pages = 0;
	cr_assert_null(run(&p, "allocator_metadata"));
	cr_assert_eq(p.e.part[PART_METADATA], 7 * MiB);
	cr_assert_not_null(explain_find(&p.e, "anon_other"));
}

Test(explain_findings, huge_pages)
{
	struct proc p;
	const struct explain_finding *f;

	const struct explain_cause *c;

	/* inside the finding of the heap they are in */
	setup(&p, ALLOC_JEMALLOC, 300 * MiB, 0, 250 * MiB, 0, 0);
	p.v[0].anon_huge = 200 * MiB;
	cr_assert_null(run(&p, "huge_pages"), "counted twice");
	c = cause(&p.e, "heap_in_use", "huge_pages");
	cr_assert_not_null(c);
	cr_assert_eq(c->bytes, 200 * MiB);
	cr_assert(strstr(c->text, "always"), "the THP mode: %s", c->text);
	cr_assert(strstr(c->remedy, "transparent_hugepage"), "%s", c->remedy);
	p.v[0].anon_huge = 8 * MiB;
	run(&p, "heap_in_use");
	cr_assert_null(cause(&p.e, "heap_in_use", "huge_pages"));
	/* 20 MiB of 1 GiB: under a tenth */
	setup(&p, ALLOC_JEMALLOC, 1024 * MiB, 0, 900 * MiB, 0, 0);
	p.v[0].anon_huge = 20 * MiB;
	run(&p, "heap_in_use");
	cr_assert_null(cause(&p.e, "heap_in_use", "huge_pages"));
	/* no finding they can be in (the allocator not read): their own */
	setup(&p, ALLOC_JEMALLOC, 300 * MiB, 0, 250 * MiB, 0, 0);
	p.v[0].anon_huge = 200 * MiB;
	p.in.acc = NULL;
	f = run(&p, "huge_pages");
	cr_assert_not_null(f);
	cr_assert_eq(f->bytes, 200 * MiB);
}

Test(explain_findings, page_size)
{
	struct proc p;
	const struct explain_finding *f;

	setup(&p, ALLOC_JEMALLOC, 600 * MiB, 0, 100 * MiB, 200 * MiB,
	      300 * MiB);
	p.pm.page_size = 65536;
	p.acc.page = 4096;
	const struct explain_cause *c;

	/* inside the largest finding of the bytes it explains: the
	 * metadata's 300 MiB, of the 500 at stake */
	cr_assert_null(run(&p, "page_size"), "counted twice");
	c = cause(&p.e, "allocator_metadata", "page_size");
	cr_assert_not_null(c);
	cr_assert_eq(c->bytes, 300 * MiB);
	cr_assert(strstr(c->text, "64.0 KiB"), "%s", c->text);
	cr_assert(strstr(c->text, "built for 4.0 KiB"), "%s", c->text);
	cr_assert(strstr(c->text, "500.0 MiB"), "%s", c->text);
	cr_assert(strstr(c->remedy, "--with-lg-page=16"), "%s", c->remedy);
	/* 4 KiB pages, jemalloc built for them: nothing */
	p.pm.page_size = 4096;
	run(&p, "allocator_metadata");
	cr_assert_null(cause(&p.e, "allocator_metadata", "page_size"));
	/* the same page size on both sides of 64 KiB: still large */
	p.pm.page_size = 65536;
	p.acc.page = 65536;
	run(&p, "allocator_metadata");
	cr_assert_not_null(cause(&p.e, "allocator_metadata", "page_size"));
	/* no metadata nor free finding to be in: its own, and dirty
	 * pages are the decay's, not the page size's */
	setup(&p, ALLOC_JEMALLOC, 600 * MiB, 0, 400 * MiB, 20 * MiB, 8 * MiB);
	p.pm.page_size = 65536;
	p.acc.page = 4096;
	f = run(&p, "page_size");
	cr_assert_not_null(f);
	cr_assert_eq(f->bytes, 28 * MiB);
	p.acc.pdirty = 19 * MiB;
	p.acc.have_pdirty = true;
	cr_assert_null(run(&p, "page_size"), "1 MiB + 8 MiB at stake");
	/* large pages, nothing at stake */
	setup(&p, ALLOC_JEMALLOC, 600 * MiB, 0, 590 * MiB, 5 * MiB, 4 * MiB);
	p.pm.page_size = 65536;
	cr_assert_null(run(&p, "page_size"));
}

Test(explain_findings, thread_stacks)
{
	struct proc p;
	const struct explain_finding *f;
	size_t i;

	setup(&p, ALLOC_JEMALLOC, 100 * MiB, 0, 90 * MiB, 0, 0);
	for (i = 0; i < 3; i++) {
		map(&p, SMAP_ANON, 8 * MiB, 8 * MiB, 0);
		p.v[p.pm.n - 1].sp_in = true;
	}
	f = run(&p, "thread_stacks");
	cr_assert_not_null(f);
	cr_assert_eq(f->bytes, 24 * MiB);
	cr_assert(strstr(f->text, "largest 8.0 MiB"), "%s", f->text);
	p.v[1].rss = p.v[1].anon = p.v[2].rss = p.v[2].anon = 1 * MiB;
	p.v[3].rss = p.v[3].anon = 1 * MiB;
	cr_assert_null(run(&p, "thread_stacks"));
}

Test(explain_findings, anon_other)
{
	struct proc p;
	const struct explain_finding *f;

	/* a 1 GiB buffer pool mmap'd by the program, 100 MiB of heap */
	setup(&p, ALLOC_GLIBC, 100 * MiB, 0, 90 * MiB, 10 * MiB, 0);
	map(&p, SMAP_ANON, 1024 * MiB, 1024 * MiB, 0);
	f = run(&p, "anon_other");
	cr_assert_not_null(f);
	cr_assert_eq(f->bytes, 1024 * MiB);
	/* never "not a leak" when memsnap has not seen it grow */
	cr_assert_null(strstr(f->remedy, "not a"), "%s", f->remedy);
	cr_assert(strstr(f->remedy, "memsnap --pid 42 watch"), "%s",
		  f->remedy);
	cr_assert(strstr(f->remedy, "buffer pool"), "%s", f->remedy);
	cr_assert(strstr(f->text, "the largest such mapping"), "%s", f->text);
	cr_assert(strstr(p.e.verdict, "outside the allocator"), "%s",
		  p.e.verdict);
	cr_assert_null(strstr(p.e.verdict, "not a"), "%s", p.e.verdict);
	setup(&p, ALLOC_GLIBC, 1124 * MiB, 0, 1100 * MiB, 10 * MiB, 0);
	cr_assert_null(run(&p, "anon_other"));
}

Test(explain_findings, file)
{
	struct proc p;
	const struct explain_finding *f;

	setup(&p, ALLOC_JEMALLOC, 50 * MiB, 200 * MiB, 40 * MiB, 0, 0);
	f = run(&p, "file");
	cr_assert_not_null(f);
	cr_assert_eq(f->bytes, 200 * MiB);
	cr_assert(strstr(p.e.verdict, "mapped files"), "%s", p.e.verdict);
	setup(&p, ALLOC_JEMALLOC, 500 * MiB, 9 * MiB, 400 * MiB, 0, 0);
	cr_assert_null(run(&p, "file"));
}

Test(explain_findings, heap_in_use)
{
	struct proc p;
	const struct explain_finding *f;

	setup(&p, ALLOC_JEMALLOC, 500 * MiB, 10 * MiB, 480 * MiB, 5 * MiB, 0);
	f = run(&p, "heap_in_use");
	cr_assert_not_null(f);
	cr_assert_eq(f->bytes, 480 * MiB);
	cr_assert(strstr(f->remedy, "prof on`"), "%s", f->remedy);
	cr_assert(strstr(f->remedy, "--base"), "%s", f->remedy);
	/* watch first: a profile never sees what was held before it */
	cr_assert(strstr(f->remedy, "first whether it grows: `memsnap --pid 42 watch`"),
		  "%s", f->remedy);
	cr_assert(strstr(f->remedy, "only what is allocated after `prof on`"),
		  "%s", f->remedy);
	cr_assert(strstr(p.e.verdict, "heap in use"), "%s", p.e.verdict);
	cr_assert(strstr(p.e.verdict, "watch"), "%s", p.e.verdict);
	/* an allocator that cannot profile: memsnap's sampler */
	p.in.can_prof = false;
	f = run(&p, "heap_in_use");
	cr_assert_not_null(f);
	cr_assert(strstr(f->remedy, "prof on --sampler"), "%s", f->remedy);
	/* the sampler on already (watch --sampler): dumps, no prof on */
	p.in.sampler_on = true;
	f = run(&p, "heap_in_use");
	cr_assert_not_null(f);
	cr_assert_null(strstr(f->remedy, "prof on"), "%s", f->remedy);
	cr_assert_null(strstr(p.e.verdict, "prof on"), "%s", p.e.verdict);
	cr_assert(strstr(f->remedy, "dump -o a.heap"), "%s", f->remedy);
	/* a third of RSS: not dominant */
	setup(&p, ALLOC_JEMALLOC, 500 * MiB, 300 * MiB, 200 * MiB, 0, 0);
	cr_assert_null(run(&p, "heap_in_use"));
}

/*
 * mimalloc's release build (Debian's) prints what it committed and no
 * in use: a program holding 8 MiB after freeing 64 MiB, which mimalloc
 * keeps committed and resident (72 MiB of the pool).  Neither a leak
 * nor a working set can be named: no heap in use, no heap_in_use
 * finding; one part "heap" and a finding that offers trim first.
 */
Test(explain_findings, heap_in_use_and_free_together)
{
	static const char *const cols[] = { "peak", "total", "freed",
					    "current", NULL };
	struct alloc_stats st = { 0 };
	struct alloc_stat_table *t;
	const struct explain_finding *f;
	struct proc p;

	setup(&p, ALLOC_MIMALLOC, 72 * MiB, 2 * MiB, 0, 0, 0);
	t = stats_table(&st, "memory", cols, 0xf);
	stats_set(t, stats_row(t, "reserved"), "current", 96 * MiB);
	stats_set(t, stats_row(t, "committed"), "current", 96 * MiB);
	cr_assert_eq(alloc_account_from_stats(ALLOC_MIMALLOC, &st, &p.acc), 0);
	alloc_stats_free(&st);
	p.in.allocator = "mimalloc";
	p.in.can_prof = false;
	cr_assert_null(run(&p, "heap_in_use"), "%s", p.e.verdict);
	cr_assert_not(p.e.heap_parts);
	cr_assert_eq(p.e.part[PART_HEAP_IN_USE], 0);
	cr_assert_eq(p.e.part[PART_HEAP_FREE], 0);
	/* what it committed, as far as the pool holds it */
	cr_assert_eq(p.e.heap, 72 * MiB);
	cr_assert_eq(p.e.clamped, 24 * MiB);
	cr_assert_eq(p.e.part[PART_ANON_OTHER], 0);
	cr_assert_eq(p.e.unaccounted, 0);
	f = explain_find(&p.e, "heap");
	cr_assert_not_null(f, "%s", p.e.verdict);
	cr_assert_eq(f->bytes, 72 * MiB);
	cr_assert(strstr(f->text, "cannot tell"), "%s", f->text);
	/* trim first: it gives back what was free */
	cr_assert(strstr(f->remedy, "first `memsnap --pid 42 trim`"), "%s",
		  f->remedy);
	cr_assert_null(strstr(p.e.verdict, "heap in use"), "%s", p.e.verdict);
	cr_assert_null(strstr(p.e.verdict, "leak"), "%s", p.e.verdict);
	cr_assert(strstr(p.e.verdict, "trim"), "%s", p.e.verdict);
	/* a debug build counts its bins: the parts as for every other */
	setup(&p, ALLOC_MIMALLOC, 72 * MiB, 2 * MiB, 8 * MiB, 64 * MiB, 0);
	p.acc.have_metadata = false;
	cr_assert_null(run(&p, "heap"));
	cr_assert(p.e.heap_parts);
	cr_assert_eq(p.e.part[PART_HEAP_IN_USE], 8 * MiB);
}
