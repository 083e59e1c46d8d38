/*
 * A language runtime's memory: the JVM's counters file (a real one,
 * tests/data/hsperf/, whose numbers jstat read from the same file, and
 * crafted hostile ones), Go's statistics and arenas, and the runtime
 * part's arithmetic, each number chosen so that the expected part is
 * known without memsnap.
 */
#include "explain/explain.h"
#include "proc/runtime.h"
#include "symbols/runtime.h"

#include "../lib/testdata.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1ull << 20)

/* ---- the JVM's hsperfdata ---------------------------------------------- */

/*
 * jdk17-g1.hsperf: OpenJDK 17.0.15 (Debian), -Xmx512m, G1, 150 MiB of
 * byte[] live.  What `jstat -J-Djstat.showUnsupported=true -snap
 * file:///...` printed from the same file:
 *   sun.gc.generation.0.capacity=79691800  .1.capacity=443547656
 *   sun.gc.generation.0.space.{0,1,2}.used=0, 0, 95008
 *   sun.gc.generation.1.space.0.used=315543552
 *   sun.gc.generation.0.maxCapacity=536870936  .1.maxCapacity=536870920
 *   sun.gc.metaspace.used=76496  sun.gc.metaspace.capacity=327680
 *   sun.gc.policy.name="GarbageFirst"  java.rt.vmArgs="-Xmx512m"
 *   java.property.java.vm.version="17.0.15+6-Debian-1deb12u1"
 */
Test(hsperf, a_real_file_reads_as_jstat_reads_it)
{
	struct runtime_info rt = { .kind = RUNTIME_JVM };
	size_t len;
	char *buf = testdata_slurp("hsperf", "jdk17-g1.hsperf", &len);

	cr_assert_eq(len, 32768);
	cr_assert_eq(hsperf_parse(buf, len, &rt), 0);
	cr_assert(rt.st.have_heap && rt.st.have_metaspace);
	cr_assert_eq(rt.st.heap_used, 0 + 0 + 95008 + 315543552ull);
	cr_assert_eq(rt.st.heap_committed, 79691800 + 443547656ull);
	cr_assert_eq(rt.st.heap_max, 536870936ull, "G1: the larger, not the sum");
	cr_assert_eq(rt.st.metaspace_used, 76496);
	cr_assert_eq(rt.st.metaspace_committed, 327680);
	cr_assert_str_eq(rt.st.collector, "GarbageFirst");
	cr_assert_str_eq(rt.version, "17.0.15+6-Debian-1deb12u1");
	cr_assert_str_eq(rt.settings, "-Xmx512m");
	free(buf);
}

/* A counters file written here: a prologue and entries, in either
 * byte order. */
struct perf {
	unsigned char b[4096];
	size_t len;
	bool le;
	unsigned int n;
};

static void put32(struct perf *p, size_t at, uint32_t v)
{
	int i;

	for (i = 0; i < 4; i++)
		p->b[at + (size_t)i] = (unsigned char)(p->le ? v >> (8 * i)
							   : v >> (8 * (3 - i)));
}

static void put64(struct perf *p, size_t at, uint64_t v)
{
	put32(p, at, (uint32_t)(p->le ? v : v >> 32));
	put32(p, at + 4, (uint32_t)(p->le ? v >> 32 : v));
}

static void perf_begin(struct perf *p, bool le)
{
	memset(p, 0, sizeof(*p));
	p->le = le;
	memcpy(p->b, "\xca\xfe\xc0\xc0", 4);
	p->b[4] = le;
	p->b[5] = 2;
	p->b[6] = 0;
	p->b[7] = 1;
	p->len = 32;
	put32(p, 24, 32);
}

/* One entry: @type 'J' with @v, or 'B' with the string @str. */
static void perf_entry(struct perf *p, const char *name, char type,
		       uint64_t v, const char *str)
{
	size_t at = p->len, nlen = strlen(name) + 1;
	size_t data = (20 + nlen + 7) & ~(size_t)7;
	size_t dlen = type == 'J' ? 8 : strlen(str) + 1;
	size_t elen = (data + dlen + 7) & ~(size_t)7;

	cr_assert_lt(at + elen, sizeof(p->b));
	put32(p, at, (uint32_t)elen);
	put32(p, at + 4, 20);
	put32(p, at + 8, type == 'J' ? 0 : (uint32_t)dlen);
	p->b[at + 12] = (unsigned char)type;
	put32(p, at + 16, (uint32_t)data);
	memcpy(p->b + at + 20, name, nlen);
	if (type == 'J')
		put64(p, at + data, v);
	else
		memcpy(p->b + at + data, str, dlen);
	p->len += elen;
	p->n++;
	put32(p, 8, (uint32_t)p->len);
	put32(p, 28, p->n);
}

static void serial_gc(struct perf *p, bool le)
{
	perf_begin(p, le);
	perf_entry(p, "sun.gc.policy.name", 'B', 0, "Copy:MSC");
	perf_entry(p, "sun.gc.generation.0.capacity", 'J', 10 * MiB, NULL);
	perf_entry(p, "sun.gc.generation.0.maxCapacity", 'J', 40 * MiB, NULL);
	perf_entry(p, "sun.gc.generation.0.space.0.used", 'J', 3 * MiB, NULL);
	perf_entry(p, "sun.gc.generation.0.space.1.used", 'J', 1 * MiB, NULL);
	perf_entry(p, "sun.gc.generation.1.capacity", 'J', 20 * MiB, NULL);
	perf_entry(p, "sun.gc.generation.1.maxCapacity", 'J', 80 * MiB, NULL);
	perf_entry(p, "sun.gc.generation.1.space.0.used", 'J', 12 * MiB, NULL);
	perf_entry(p, "sun.gc.metaspace.used", 'J', 5 * MiB, NULL);
	perf_entry(p, "sun.gc.metaspace.capacity", 'J', 6 * MiB, NULL);
	perf_entry(p, "java.property.java.vm.version", 'B', 0,
		   "21.0.1+12\x1b[2J");
}

Test(hsperf, either_byte_order_and_generations_summed)
{
	struct runtime_info rt;
	struct perf p;
	int le;

	for (le = 0; le < 2; le++) {
		memset(&rt, 0, sizeof(rt));
		serial_gc(&p, le);
		cr_assert_eq(hsperf_parse(p.b, p.len, &rt), 0);
		cr_assert_eq(rt.st.heap_used, 16 * MiB);
		cr_assert_eq(rt.st.heap_committed, 30 * MiB);
		cr_assert_eq(rt.st.heap_max, 120 * MiB, "not G1: the sum");
		cr_assert_eq(rt.st.metaspace_committed, 6 * MiB);
		cr_assert_str_eq(rt.st.collector, "Copy:MSC");
		cr_assert_str_eq(rt.version, "21.0.1+12?[2J",
				 "no control byte of the target's");
	}
}

Test(hsperf, what_is_not_one_is_refused)
{
	struct runtime_info rt = { 0 };
	struct perf p;

	serial_gc(&p, true);
	p.b[0] = 0xcb;
	cr_assert_eq(hsperf_parse(p.b, p.len, &rt), -EINVAL, "magic");
	serial_gc(&p, true);
	p.b[5] = 1;
	cr_assert_eq(hsperf_parse(p.b, p.len, &rt), -EINVAL, "version 1");
	serial_gc(&p, true);
	put32(&p, 24, 8);
	cr_assert_eq(hsperf_parse(p.b, p.len, &rt), -EINVAL,
		     "entries in the prologue");
	serial_gc(&p, true);
	put32(&p, 24, 1u << 30);
	cr_assert_eq(hsperf_parse(p.b, p.len, &rt), -EINVAL,
		     "entries past the end");
	cr_assert_eq(hsperf_parse(p.b, 31, &rt), -EINVAL, "short");
	cr_assert_not(rt.st.have_heap, "nothing set by what was refused");
}

/* Every length of a file cut short, and entries that lie: bounded, no
 * read past what was given (ASan would say), numbers only from entries
 * that are whole. */
Test(hsperf, hostile_entries_are_bounded)
{
	struct runtime_info rt;
	struct perf p;
	unsigned char *cut;
	size_t n;

	serial_gc(&p, true);
	for (n = 0; n <= p.len; n++) {
		cut = malloc(n ? n : 1);
		memcpy(cut, p.b, n);
		memset(&rt, 0, sizeof(rt));
		(void)hsperf_parse(cut, n, &rt);
		cr_assert_leq(rt.st.heap_used, 16 * MiB);
		free(cut);
	}
	/* an entry of length 0: no endless loop */
	serial_gc(&p, true);
	put32(&p, 32, 0);
	memset(&rt, 0, sizeof(rt));
	cr_assert_eq(hsperf_parse(p.b, p.len, &rt), 0);
	cr_assert_not(rt.st.have_heap);
	/* an entry longer than the file, a name offset past its entry,
	 * a name with no end inside it, a data offset past it */
	serial_gc(&p, true);
	put32(&p, 32, 0x7fffffff);
	memset(&rt, 0, sizeof(rt));
	cr_assert_eq(hsperf_parse(p.b, p.len, &rt), 0);
	cr_assert_not(rt.st.have_heap);
	perf_begin(&p, true);
	perf_entry(&p, "sun.gc.generation.0.capacity", 'J', MiB, NULL);
	put32(&p, 32 + 4, 4000);
	memset(&rt, 0, sizeof(rt));
	cr_assert_eq(hsperf_parse(p.b, p.len, &rt), 0);
	cr_assert_not(rt.st.have_heap);
	perf_begin(&p, true);
	perf_entry(&p, "sun.gc.generation.0.capacity", 'J', MiB, NULL);
	memset(p.b + 32 + 20, 'x', p.len - 32 - 20);
	memset(&rt, 0, sizeof(rt));
	cr_assert_eq(hsperf_parse(p.b, p.len, &rt), 0);
	cr_assert_not(rt.st.have_heap);
	perf_begin(&p, true);
	perf_entry(&p, "sun.gc.generation.0.capacity", 'J', MiB, NULL);
	put32(&p, 32 + 16, 4000);
	memset(&rt, 0, sizeof(rt));
	cr_assert_eq(hsperf_parse(p.b, p.len, &rt), 0);
	cr_assert_not(rt.st.have_heap);
	/* a string whose length runs past its entry */
	perf_begin(&p, true);
	perf_entry(&p, "sun.gc.policy.name", 'B', 0, "G1");
	put32(&p, 32 + 8, 4000);
	memset(&rt, 0, sizeof(rt));
	cr_assert_eq(hsperf_parse(p.b, p.len, &rt), 0);
	cr_assert_str_eq(rt.st.collector, "");
	/* names that only look like counters */
	perf_begin(&p, true);
	perf_entry(&p, "sun.gc.generation..capacity", 'J', MiB, NULL);
	perf_entry(&p, "sun.gc.generation.12345.capacity", 'J', MiB, NULL);
	perf_entry(&p, "sun.gc.generation.0.capacityX", 'J', MiB, NULL);
	perf_entry(&p, "sun.gc.generation.0.space.x.used", 'J', MiB, NULL);
	memset(&rt, 0, sizeof(rt));
	cr_assert_eq(hsperf_parse(p.b, p.len, &rt), 0);
	cr_assert_not(rt.st.have_heap);
	cr_assert_eq(rt.st.heap_used, 0);
}

/* ---- Go ----------------------------------------------------------------- */

#define NCLASSES 4

/* Three generations of deltas whose sums are known. */
Test(go, memstats_generations_summed)
{
	static const uint16_t sizes[NCLASSES] = { 0, 8, 16, 32 };
	const size_t stride = 11 + 2 * NCLASSES;
	int64_t w[3 * (11 + 2 * NCLASSES)];
	struct runtime_stats st = { 0 };
	size_t g;

	memset(w, 0, sizeof(w));
	for (g = 0; g < 3; g++) {
		int64_t *d = w + g * stride;

		d[0] = 40 * (int64_t)MiB;	/* committed */
		d[1] = (int64_t)MiB;		/* released */
		d[2] = 30 * (int64_t)MiB;	/* in the heap */
		d[3] = (int64_t)MiB;		/* stacks */
		d[7] = 2 * (int64_t)MiB;	/* large allocated */
		d[9 + NCLASSES] = (int64_t)MiB;	/* large freed */
		d[9 + 3] = 1000;		/* 32-byte allocations */
		d[11 + NCLASSES + 3] = 600;	/* ... freed */
	}
	/* a generation's delta may be negative: only the sum counts */
	w[stride + 2] = -10 * (int64_t)MiB;
	w[2 * stride + 2] = 50 * (int64_t)MiB;
	cr_assert(runtime_go_stats((unsigned char *)w, sizeof(w), NCLASSES,
				   sizes, &st));
	cr_assert(st.have_go);
	cr_assert_eq(st.go_committed, 120 * MiB);
	cr_assert_eq(st.go_inuse, 70 * MiB);
	cr_assert_eq(st.go_stacks, 3 * MiB);
	cr_assert_eq(st.go_released, 3 * MiB);
	cr_assert_eq(st.go_idle, (120 - 3 - 70) * MiB);
	cr_assert_eq(st.go_alloc, 3 * MiB + 3 * 400 * 32);
	/* what cannot be statistics */
	w[2] = -200 * (int64_t)MiB;
	memset(&st, 0, sizeof(st));
	cr_assert_not(runtime_go_stats((unsigned char *)w, sizeof(w),
				       NCLASSES, sizes, &st));
	cr_assert_not(st.have_go);
	cr_assert_not(runtime_go_stats((unsigned char *)w, sizeof(w) - 8,
				       NCLASSES, sizes, &st), "short");
	cr_assert_not(runtime_go_stats((unsigned char *)w, sizeof(w), 0,
				       sizes, &st));
}

#define MAP(hdr, rss) hdr "\nRss: " rss " kB\nAnonymous: " rss " kB\n"

/* Go's arenas: the chains from its hints, and only for Go. */
Test(go, arenas_from_the_hints)
{
	static const char t[] =
		MAP("c000000000-c000400000 rw-p 00000000 00:00 0", "4096")
		MAP("c000400000-c004000000 ---p 00000000 00:00 0", "0")
		MAP("c004000000-c004400000 rw-p 00000000 00:00 0", "4096")
		/* not adjacent: not the heap's */
		MAP("c008000000-c008400000 rw-p 00000000 00:00 0", "4096")
		/* the next hint */
		MAP("1c000000000-1c000400000 rw-p 00000000 00:00 0", "4096")
		/* near a hint, not at it */
		MAP("2c000001000-2c000400000 rw-p 00000000 00:00 0", "4096");
	struct runtime_info go = { .kind = RUNTIME_GO };
	struct runtime_info py = { .kind = RUNTIME_CPYTHON };
	struct proc_memory m = { 0 };
	struct smap_claim c[8];

	cr_assert_eq(smaps_parse(t, strlen(t), &m), 0);
	cr_assert_eq(m.n, 6);
	cr_assert_eq(runtime_claims(&go, &m, c, 8), 2);
	cr_assert_eq(c[0].lo, 0xc000000000ull);
	cr_assert_eq(c[0].hi, 0xc004400000ull);
	cr_assert_eq(c[1].lo, 0x1c000000000ull);
	cr_assert_eq(c[1].hi, 0x1c000400000ull);
	cr_assert_eq(c[0].owner, SMAP_RUNTIME);
	cr_assert_eq(runtime_claims(&py, &m, c, 8), 0);
	cr_assert_eq(runtime_claims(NULL, &m, c, 8), 0);
	cr_assert_eq(runtime_claims(&go, &m, c, 1), 1, "bounded");
	proc_memory_free(&m);
}

/* ---- the runtime part --------------------------------------------------- */

struct proc {
	struct proc_memory pm;
	struct smap v[8];
	struct alloc_account acc;
	struct runtime_info rt;
};

static void map(struct proc *p, uint64_t start, enum smap_kind kind,
		uint64_t rss, uint64_t anon)
{
	struct smap *s = &p->v[p->pm.n++];

	memset(s, 0, sizeof(*s));
	s->start = start;
	s->end = start + (rss > 4096 ? rss : 4096);
	s->prot = 3;
	s->kind = kind;
	s->rss = rss;
	s->anon = anon;
	p->pm.v = p->v;
	p->pm.have_status = p->pm.st.have_rss = true;
	p->pm.st.vm_rss += rss;
	p->pm.st.threads = 4;
	p->pm.page_size = 4096;
}

/* A Go program: an arena chain of 60 MiB, 20 MiB of the runtime's own
 * elsewhere, 2 MiB of a file. */
static void go_program(struct proc *p)
{
	memset(p, 0, sizeof(*p));
	map(p, 0xc000000000ull, SMAP_ANON, 60 * MiB, 60 * MiB);
	map(p, 0x7f0000000000ull, SMAP_ANON, 20 * MiB, 20 * MiB);
	map(p, 0x7f1000000000ull, SMAP_FILE, 2 * MiB, 0);
	p->rt.kind = RUNTIME_GO;
	snprintf(p->rt.version, sizeof(p->rt.version), "go1.19.8");
	snprintf(p->rt.settings, sizeof(p->rt.settings), "GOGC=50");
}

static uint64_t sum(const struct explain *e)
{
	uint64_t s = e->heap;
	int i;

	for (i = 0; i < PARTS; i++)
		s += e->part[i];
	return s;
}

Test(runtime_part, no_malloc_all_of_it_the_runtimes)
{
	struct proc p;
	struct explain e;
	struct explain_input in = {
		.pid = 42, .allocator = "the allocator", .ncpus = 2,
		.not_read = "no malloc in the process", .no_malloc = true,
	};

	go_program(&p);
	in.pm = &p.pm;
	in.rt = &p.rt;
	explain_compute(&in, &e);
	cr_assert_eq(e.part[PART_RUNTIME], 80 * MiB);
	cr_assert_eq(e.runtime_mapped, 60 * MiB);
	cr_assert_eq(e.heap, 0);
	cr_assert_eq(e.part[PART_ANON_OTHER], 0);
	cr_assert_eq(sum(&e), e.rss);
	cr_assert_eq(e.unaccounted, 0);
	cr_assert_gt(e.nf, 0);
	cr_assert_str_eq(e.f[0].id, "runtime");
	cr_assert_eq(e.f[0].bytes, 80 * MiB);
	cr_assert_not_null(strstr(e.f[0].text, "Go go1.19.8"), "%s", e.f[0].text);
	cr_assert_not_null(strstr(e.f[0].text, "GOGC=50"), "%s", e.f[0].text);
	cr_assert_not_null(strstr(e.f[0].remedy, "GOMEMLIMIT"));
	cr_assert_not_null(strstr(e.f[0].remedy, "memsnap --pid 42 watch"));
	cr_assert_not_null(strstr(e.f[0].remedy, "a restart"));
	cr_assert_not_null(strstr(e.verdict, "Go go1.19.8's memory"), "%s",
			   e.verdict);
	/* a goroutine's stack pointer in the arenas: no thread stack */
	p.v[0].sp_in = true;
	explain_compute(&in, &e);
	cr_assert_eq(e.part[PART_STACKS], 0);
	cr_assert_eq(e.part[PART_RUNTIME], 80 * MiB);
}

/* With malloc read, what it does not hold is the runtime's; with it
 * unread, only the runtime's own mappings are known apart. */
Test(runtime_part, beside_malloc)
{
	struct proc p;
	struct explain e;
	struct explain_input in = { .pid = 42, .allocator = "glibc",
				    .ncpus = 2 };

	go_program(&p);
	/* a [heap] of 8 MiB: glibc's main arena, 6 MiB in use */
	map(&p, 0x5500000000ull, SMAP_HEAP, 8 * MiB, 8 * MiB);
	p.acc.kind = ALLOC_GLIBC;
	p.acc.have_in_use = p.acc.have_free = true;
	p.acc.in_use = 6 * MiB;
	p.acc.free = 2 * MiB;
	in.pm = &p.pm;
	in.rt = &p.rt;
	in.acc = &p.acc;
	explain_compute(&in, &e);
	cr_assert_eq(e.part[PART_HEAP_IN_USE], 6 * MiB);
	cr_assert_eq(e.part[PART_HEAP_FREE], 2 * MiB);
	cr_assert_eq(e.part[PART_RUNTIME], 80 * MiB);
	cr_assert_eq(sum(&e), e.rss);

	in.acc = NULL;
	in.not_read = "--no-attach";
	explain_compute(&in, &e);
	cr_assert_eq(e.part[PART_RUNTIME], 60 * MiB, "its arenas only");
	cr_assert_eq(e.heap, 28 * MiB, "malloc's and the rest together");
	cr_assert_eq(sum(&e), e.rss);
	cr_assert_not_null(strstr(e.verdict, "--no-attach"), "%s", e.verdict);
}

/* No runtime: nothing changes, the part is 0 and has no finding. */
Test(runtime_part, none)
{
	struct proc p;
	struct explain e;
	struct explain_input in = { .pid = 42, .allocator = "glibc",
				    .ncpus = 2, .not_read = "--no-attach" };

	go_program(&p);
	p.rt.kind = RUNTIME_NONE;
	in.pm = &p.pm;
	in.rt = &p.rt;
	explain_compute(&in, &e);
	cr_assert_eq(e.part[PART_RUNTIME], 0);
	cr_assert_eq(e.heap, 80 * MiB);
	cr_assert_null(explain_find(&e, "runtime"));
}

/* Each runtime names its own tools. */
Test(runtime_part, each_names_its_own_tools)
{
	static const struct {
		enum runtime_kind kind;
		const char *text, *remedy;
	} want[] = {
		{ RUNTIME_JVM, "Java heap", "-Xmx" },
		{ RUNTIME_JVM, "Java heap", "NativeMemoryTracking" },
		{ RUNTIME_JVM, "Java heap", "GC.heap_info" },
		{ RUNTIME_CPYTHON, "pymalloc", "tracemalloc" },
		{ RUNTIME_CPYTHON, "pymalloc", "PYTHONMALLOC=malloc" },
		{ RUNTIME_NODE, "V8", "--max-old-space-size" },
		{ RUNTIME_NODE, "V8", "heap snapshot" },
		{ RUNTIME_DOTNET, "heap", "DOTNET_GCHeapHardLimit" },
		{ RUNTIME_GO, "arenas", "heap profile" },
	};
	struct explain_input in = { .pid = 42, .allocator = "glibc",
				    .ncpus = 2, .no_malloc = true };
	struct explain e;
	struct proc p;
	size_t i;

	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		go_program(&p);
		p.rt.kind = want[i].kind;
		if (want[i].kind != RUNTIME_GO)
			p.v[0].start = 0x7e0000000000ull;
		in.pm = &p.pm;
		in.rt = &p.rt;
		explain_compute(&in, &e);
		cr_assert_str_eq(e.f[0].id, "runtime");
		cr_assert_not_null(strstr(e.f[0].text, want[i].text), "%s",
				   e.f[0].text);
		cr_assert_not_null(strstr(e.f[0].remedy, want[i].remedy),
				   "%s", e.f[0].remedy);
		cr_assert_null(strstr(e.f[0].remedy, "not a leak"));
	}
}
