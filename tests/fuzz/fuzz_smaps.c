/*
 * Fuzz what `explain` reads of a process (proc/smaps.h) and the
 * arithmetic over it (explain/explain.h).  smaps is the kernel's text
 * with the target's paths in it; status, task/TID/syscall and the THP
 * mode are the kernel's, parsed with the same care.  The input is cut
 * in four at NUL bytes: smaps, status, a syscall line, a THP line.
 *
 *   - smaps_parse: never fails but for memory; every mapping has
 *     start < end; the sums never say more than the Rss they split
 *     (anon + file + shmem = rss, stacks and the pool inside anon);
 *   - proc_syscall_sp: a stack pointer only from a line that has one;
 *   - thp_mode_parse: a NUL-ended word of lower-case letters or "";
 *   - explain_compute, without an allocator and with one whose numbers
 *     come from the input (jemalloc's metadata on huge pages of any
 *     count and size too, and an allocator that counts in use and free
 *     together): the parts and unaccounted add up to RSS, each clamped
 *     part at most what the allocator said, findings at most
 *     EXPLAIN_MAX_FINDINGS, most bytes first.
 */
#include "explain/explain.h"
#include "proc/smaps.h"

#include "tests/fuzz/fuzz.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

/* The next piece of [*p, end) up to a NUL (or the end). */
static size_t piece(const char **p, const char *end, const char **out)
{
	const char *nul = memchr(*p, '\0', (size_t)(end - *p));
	size_t n = nul ? (size_t)(nul - *p) : (size_t)(end - *p);

	*out = *p;
	*p = nul ? nul + 1 : end;
	return n;
}

static uint64_t word(const char *s, size_t n, size_t i)
{
	uint64_t v = 0;

	if (n)
		memcpy(&v, s + (i * 8) % n, n - (i * 8) % n < 8 ? n - (i * 8) % n : 8);
	return v;
}

static void check_explain(const struct proc_memory *m,
			  const struct alloc_account *acc)
{
	struct explain_input in = {
		.pid = 1, .pm = m, .acc = acc, .allocator = "fuzz",
		.ncpus = 2,
	};
	static struct explain e;
	unsigned __int128 sum = 0;
	size_t i;

	explain_compute(&in, &e);
	for (i = 0; i < PARTS; i++)
		sum += e.part[i];
	sum += e.heap;
	/* what the sum can say in 64 bits: each part came from a
	 * saturated sum of the mappings */
	if (sum <= INT64_MAX && e.rss <= INT64_MAX)
		FUZZ_CHECK((int64_t)sum + e.unaccounted == (int64_t)e.rss);
	if (acc) {
		FUZZ_CHECK(!acc->have_in_use ||
			   e.part[PART_HEAP_IN_USE] <= acc->in_use);
		FUZZ_CHECK(!acc->have_free ||
			   e.part[PART_HEAP_FREE] <= acc->free);
		FUZZ_CHECK(e.part[PART_HEAP_IN_USE] + e.part[PART_HEAP_FREE] +
				   e.part[PART_METADATA] + (acc->in_use_with_free
								    ? e.heap
								    : 0) <=
			   e.pool);
		/* in use and free together: one part, none of the three */
		FUZZ_CHECK(!acc->in_use_with_free ||
			   (!e.heap_parts && e.heap <= acc->committed &&
			    !e.part[PART_HEAP_IN_USE] &&
			    !e.part[PART_METADATA]));
		FUZZ_CHECK(!explain_find(&e, "heap") || !e.heap_parts);
	}
	FUZZ_CHECK(e.nf <= EXPLAIN_MAX_FINDINGS);
	for (i = 1; i < e.nf; i++)
		FUZZ_CHECK(e.f[i - 1].bytes >= e.f[i].bytes);
	FUZZ_CHECK(memchr(e.verdict, '\0', sizeof(e.verdict)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size, *s;
	struct proc_memory m = { 0 };
	struct alloc_account acc;
	struct smaps_totals t;
	uint64_t sp;
	size_t n, i;
	char thp[16];

	{
		/* the top of a "stack": a control block's record, or not */
		static const pid_t tids[] = { 1, 4242 };
		uint64_t w[1024], block, lo, hi;
		size_t nw = size / 8 < 1024 ? size / 8 : 1024;

		memcpy(w, data, nw * 8);
		lo = nw ? w[0] : 0;
		hi = lo + (size & 0xffff) + 1;
		if (nw && stack_block_find(w, nw, lo, lo, hi, tids, 2, &block))
			FUZZ_CHECK(block <= lo);
	}
	n = piece(&p, end, &s);
	FUZZ_CHECK(smaps_parse(s, n, &m) == 0);
	for (i = 0; i < m.n; i++)
		FUZZ_CHECK(m.v[i].start < m.v[i].end);
	n = piece(&p, end, &s);
	m.have_status = !proc_mem_status_parse(s, n, &m.st);
	FUZZ_CHECK(!m.have_status || m.st.have_rss);
	n = piece(&p, end, &s);
	if (!proc_syscall_sp(s, n, &sp)) {
		FUZZ_CHECK(n >= 5);
		proc_memory_mark_sp(&m, sp);
	}
	n = piece(&p, end, &s);
	thp_mode_parse(s, n, thp, sizeof(thp));
	FUZZ_CHECK(memchr(thp, '\0', sizeof(thp)));
	for (i = 0; thp[i]; i++)
		FUZZ_CHECK(thp[i] >= 'a' && thp[i] <= 'z');
	memcpy(m.thp, thp, sizeof(thp));
	m.page_size = 4096u << (size % 5);
	smaps_total(&m, NULL, 0, &t);
	if (t.rss < UINT64_MAX) {
		/* each a part of Rss: none past it, none wrapped */
		FUZZ_CHECK(t.anon <= t.rss && t.file <= t.rss &&
			   t.shmem <= t.rss);
		FUZZ_CHECK(t.anon + t.file + t.shmem <= t.rss);
		FUZZ_CHECK(t.stacks <= t.anon);
		FUZZ_CHECK(t.anon_private <= t.anon);
	}
	check_explain(&m, NULL);
	/* an allocator saying anything: the rest of the input */
	n = (size_t)(end - p);
	memset(&acc, 0, sizeof(acc));
	acc.kind = (enum alloc_kind)(word(p, n, 0) % ALLOC_KINDS);
	acc.have_in_use = acc.have_free = acc.have_metadata = true;
	acc.in_use = acc.allocated = word(p, n, 1);
	acc.free = word(p, n, 2);
	acc.metadata = word(p, n, 3);
	acc.active = word(p, n, 4);
	acc.mmap_bytes = word(p, n, 5);
	acc.free_other_arenas = word(p, n, 6);
	acc.arenas = (unsigned int)word(p, n, 7);
	acc.page = word(p, n, 8);
	acc.pdirty = word(p, n, 9);
	/* jemalloc's metadata on huge pages, any count of any size */
	acc.have_metadata_thp_pages = word(p, n, 10) & 1;
	acc.metadata_thp_pages = word(p, n, 11);
	m.huge_page = word(p, n, 12);
	check_explain(&m, &acc);
	/* an allocator that counts in use and free together */
	acc.in_use_with_free = true;
	acc.have_in_use = acc.have_free = acc.have_metadata = false;
	acc.committed = word(p, n, 13);
	check_explain(&m, &acc);
	proc_memory_free(&m);
	return 0;
}
