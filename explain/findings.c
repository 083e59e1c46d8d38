/*
 * The findings and the verdict of `explain` (explain/explain.h): each
 * with the numbers that show it, the bytes at stake and a remedy, in
 * the spirit of Redis's MEMORY DOCTOR (a ratio over 1.1 and over 10 MB;
 * nothing to say about a process under 5 MB).  Findings may overlap
 * (glibc_arenas is one cause of heap_free): each says its own bytes.
 */
#include "explain/explain_internal.h"

#include "common/util.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct explain_finding *finding_add(struct explain *e, const char *id,
				    uint64_t bytes)
{
	struct explain_finding *f;

	if (e->nf >= EXPLAIN_MAX_FINDINGS)
		return NULL;
	f = &e->f[e->nf++];
	memset(f, 0, sizeof(*f));
	f->id = id;
	f->bytes = bytes;
	return f;
}

void say(char *buf, size_t size, const char *fmt, ...)
{
	size_t n = strlen(buf);
	va_list ap;

	if (n + 1 >= size)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + n, size - n, fmt, ap);
	va_end(ap);
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

const char *hb(uint64_t b)
{
	static char ring[8][32];
	static unsigned int next;
	char *s = ring[next++ % 8];

	human_bytes(b, s, sizeof(ring[0]));
	return s;
}

static void on_heap_free(const struct explain_input *in, struct explain *e)
{
	const struct alloc_account *a = in->acc;
	uint64_t free = e->part[PART_HEAP_FREE];
	uint64_t use = e->part[PART_HEAP_IN_USE];
	struct explain_finding *f;

	/* (in use + free) / in use > 1.1: the allocator's fragmentation */
	if (free < EXPLAIN_MIN_BYTES || free * 10 <= use)
		return;
	f = finding_add(e, "heap_free", free);
	if (!f)
		return;
	say(f->text, sizeof(f->text),
	    "%s holds %s free (%.0f%% of RSS) beside %s in use",
	    in->allocator, hb(free), explain_pct(e, free), hb(use));
	switch (a->kind) {
	case ALLOC_GLIBC:
		/* glibc's own figures, as far as the part holds them: free
		 * chunks malloc_trim() gave the pages of back are still
		 * free chunks to malloc_info() */
		say(f->text, sizeof(f->text),
		    ": free chunks in %u arena%s (%s of them outside the main arena)",
		    a->arenas, a->arenas == 1 ? "" : "s",
		    hb(min_u64(a->free_other_arenas, free)));
		if (a->have_keepcost)
			say(f->text, sizeof(f->text),
			    ", %s at the top of the main arena",
			    hb(min_u64(a->keepcost, free)));
		say(f->remedy, sizeof(f->remedy),
		    "now: `memsnap --pid %d trim` (malloc_trim(0) gives back the free pages of every arena); at the next start (a restart): MALLOC_ARENA_MAX=2 and GLIBC_TUNABLES=glibc.malloc.trim_threshold=131072 (M_TRIM_THRESHOLD)",
		    (int)in->pid);
		break;
	case ALLOC_JEMALLOC: {
		/* its two kinds of free, as far as the part holds them:
		 * dirty pages were written, so resident; what it counts
		 * beyond the part is of the active pages, some never
		 * touched */
		uint64_t dirty = min_u64(a->pdirty, free);
		uint64_t frag = min_u64(a->active > a->allocated
						? a->active - a->allocated
						: 0,
					free - dirty);

		say(f->text, sizeof(f->text),
		    ": dirty pages %s, unused space in active pages %s",
		    a->have_pdirty ? hb(dirty) : "?", hb(frag));
		if (a->have_dirty_decay)
			say(f->text, sizeof(f->text),
			    "; dirty_decay_ms %" PRId64 "%s, muzzy_decay_ms %" PRId64
			    ", background_thread %s",
			    a->dirty_decay_ms,
			    a->dirty_decay_ms < 0 ? " (never purged)" : "",
			    a->muzzy_decay_ms,
			    !a->have_background_thread ? "?"
			    : a->background_thread     ? "on"
						       : "off");
		/* Unused space inside active pages (fragmentation) is not
		 * purged: only dirty and muzzy pages are. */
		if (frag > dirty && in->alloc_defrag)
			say(f->remedy, sizeof(f->remedy),
			    "most of it is fragmentation inside pages still in use, which a purge cannot return: it is reused as the program allocates again; this jemalloc is Redis's own, with the hint active defragmentation needs: CONFIG SET activedefrag yes moves the live blocks together; `memsnap --pid %d trim` returns the dirty pages (%s) now",
			    (int)in->pid, hb(dirty));
		else if (frag > dirty)
			say(f->remedy, sizeof(f->remedy),
			    "most of it is fragmentation inside pages still in use, which a purge cannot return: it is reused as the program allocates again, or given back by a restart (a server's data saved first); active defragmentation needs a jemalloc built with its hint (Redis's own), which this one (%s) is not: Redis refuses CONFIG SET activedefrag with it; `memsnap --pid %d trim` returns the dirty pages (%s) now",
			    in->alloc_object ? in->alloc_object : "the system's",
			    (int)in->pid, hb(dirty));
		else
			say(f->remedy, sizeof(f->remedy),
			    "now: `memsnap --pid %d trim` (purges every arena); at the next start (a restart): %s=dirty_decay_ms:1000,muzzy_decay_ms:0,background_thread:true",
			    (int)in->pid,
			    a->conf_var[0] ? a->conf_var : "MALLOC_CONF");
		break;
	}
	case ALLOC_TCMALLOC:
	case ALLOC_TCMALLOC_MINIMAL:
		say(f->text, sizeof(f->text),
		    ": page heap free %s, caches %s (%s already unmapped)",
		    hb(a->pageheap_free), hb(a->caches),
		    hb(a->pageheap_unmapped));
		say(f->remedy, sizeof(f->remedy),
		    "now: `memsnap --pid %d trim` (ReleaseFreeMemory); at the next start (a restart): TCMALLOC_RELEASE_RATE=10 (default 1), TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES for the caches",
		    (int)in->pid);
		break;
	default:
		say(f->text, sizeof(f->text), ": committed %s, reserved %s",
		    hb(a->committed), hb(a->reserved));
		say(f->remedy, sizeof(f->remedy),
		    "now: `memsnap --pid %d trim` (mi_collect(true)); at the next start (a restart): MIMALLOC_PURGE_DELAY=0 (MIMALLOC_DECOMMIT_DELAY=0 before 2.1)",
		    (int)in->pid);
		break;
	}
	if (e->clamped)
		say(f->text, sizeof(f->text),
		    " (the allocator counted %s more than the anonymous RSS it lives in: left out)",
		    hb(e->clamped));
}

static void on_glibc_arenas(const struct explain_input *in, struct explain *e)
{
	const struct alloc_account *a = in->acc;
	struct explain_finding *f;
	/* the free of other arenas, as far as the free part holds it */
	uint64_t bytes = a->free_other_arenas < e->part[PART_HEAP_FREE]
				 ? a->free_other_arenas
				 : e->part[PART_HEAP_FREE];

	if (a->kind != ALLOC_GLIBC || a->arenas <= 2 ||
	    bytes < EXPLAIN_MIN_BYTES)
		return;
	f = finding_add(e, "glibc_arenas", bytes);
	if (!f)
		return;
	say(f->text, sizeof(f->text),
	    "%u glibc arenas for %lu threads on %u CPUs (glibc makes up to 8 per CPU): %s free in the arenas other than the main one",
	    a->arenas, e->threads, in->ncpus, hb(bytes));
	say(f->remedy, sizeof(f->remedy),
	    "at the next start (a restart): MALLOC_ARENA_MAX=2 (or 4 for many busy threads); now: `memsnap --pid %d trim` gives their free pages back",
	    (int)in->pid);
}

static void on_metadata(const struct explain_input *in, struct explain *e)
{
	const struct alloc_account *a = in->acc;
	uint64_t md = e->part[PART_METADATA], use = e->part[PART_HEAP_IN_USE];
	struct explain_finding *f;

	if (md < EXPLAIN_MIN_BYTES || md * 10 <= use)
		return;
	f = finding_add(e, "allocator_metadata", md);
	if (!f)
		return;
	say(f->text, sizeof(f->text),
	    "%s's own metadata takes %s (%.0f%% of RSS, %.0f%% of the heap in use)",
	    in->allocator, hb(md), explain_pct(e, md),
	    use ? 100.0 * (double)md / (double)use : 0.0);
	if (a->kind == ALLOC_JEMALLOC) {
		say(f->text, sizeof(f->text), ": %u arenas%s%s",
		    a->narenas, a->metadata_thp[0] ? ", metadata_thp " : "",
		    a->metadata_thp);
		if (e->metadata_huge)
			say(f->text, sizeof(f->text),
			    ", on %" PRIu64 " transparent huge pages of %s, each resident whole (stats.metadata counts %s in them)",
			    a->metadata_thp_pages, hb(e->huge_page),
			    hb(a->metadata));
		if (e->page_size > 4096)
			say(f->text, sizeof(f->text),
			    ", base allocations sized by the huge page size of a large-page kernel");
		say(f->remedy, sizeof(f->remedy),
		    "at the next start (a restart): %s=narenas:%u,metadata_thp:disabled (fewer arenas, no huge pages for metadata)%s",
		    a->conf_var[0] ? a->conf_var : "MALLOC_CONF",
		    in->ncpus ? in->ncpus : 4,
		    e->page_size > 4096
			    ? "; with 64 KiB pages, a jemalloc built with --with-lg-hugepage=21"
			    : "");
	} else {
		say(f->remedy, sizeof(f->remedy),
		    "fewer arenas or caches at the next start (a restart); compare with `memsnap --pid %d stats`",
		    (int)in->pid);
	}
}

static void on_page_size(const struct explain_input *in, struct explain *e)
{
	const struct alloc_account *a = in->acc;
	uint64_t free = e->part[PART_HEAP_FREE];
	uint64_t stake;
	bool mismatch = a && a->kind == ALLOC_JEMALLOC && a->page &&
			a->page != e->page_size;
	struct explain_finding *f;

	/* dirty pages are the decay's to return, whatever the page size:
	 * at stake are the unused space in pages and the metadata */
	if (a && a->have_pdirty)
		free = free > a->pdirty ? free - a->pdirty : 0;
	stake = free + e->part[PART_METADATA];
	if ((e->page_size <= 4096 && !mismatch) || stake < EXPLAIN_MIN_BYTES)
		return;
	f = finding_add(e, "page_size", stake);
	if (!f)
		return;
	say(f->text, sizeof(f->text),
	    "the kernel's pages are %s", hb(e->page_size));
	if (mismatch)
		say(f->text, sizeof(f->text),
		    ", jemalloc was built for %s pages", hb(a->page));
	say(f->text, sizeof(f->text),
	    ": every small allocation, free run and metadata block rounds up to them (%s unused in its pages or as metadata)",
	    hb(stake));
	say(f->remedy, sizeof(f->remedy),
	    "an allocator built for this page size (jemalloc: --with-lg-page=%d --with-lg-hugepage=21), or a kernel with 4 KiB pages",
	    e->page_size >= 65536 ? 16 : e->page_size >= 16384 ? 14 : 12);
}

static void on_heap_in_use(const struct explain_input *in, struct explain *e)
{
	uint64_t use = e->part[PART_HEAP_IN_USE];
	struct explain_finding *f;

	if (use < EXPLAIN_MIN_BYTES || use * 2 < e->rss)
		return;
	f = finding_add(e, "heap_in_use", use);
	if (!f)
		return;
	say(f->text, sizeof(f->text),
	    "the program holds %s of malloc'd memory (%.0f%% of RSS): a leak or a working set",
	    hb(use), explain_pct(e, use));
	if (in->sampler_on) {
		say(f->remedy, sizeof(f->remedy),
		    "first whether it grows: `memsnap --pid %d watch` (memory already held, a full cache, stays level); if it grows, which code allocates it: memsnap's sampler is on: `memsnap --pid %d dump -o a.heap`, later `dump -o b.heap`, then `memsnap report b.heap --base a.heap`; a profile sees only what was allocated since the sampler was switched on",
		    (int)in->pid, (int)in->pid);
		return;
	}
	say(f->remedy, sizeof(f->remedy),
	    "first whether it grows: `memsnap --pid %d watch` (memory already held, a full cache, stays level); if it grows, which code allocates it: `memsnap --pid %d prof on%s`, `dump -o a.heap`, later `dump -o b.heap`, then `memsnap report b.heap --base a.heap`; a profile sees only what is allocated after `prof on`, never the blocks held from before",
	    (int)in->pid, (int)in->pid, in->can_prof ? "" : " --sampler");
	if (!in->can_prof)
		say(f->remedy, sizeof(f->remedy),
		    " (%s cannot profile itself: memsnap's sampler)",
		    in->allocator);
}

/*
 * An allocator that counts what the program holds and what it keeps
 * free together (a mimalloc release build): neither a leak nor memory
 * held free can be named, so say so, and what tells them apart: trim
 * first (what it gives back was free), then a profile of what stays.
 */
static void on_heap(const struct explain_input *in, struct explain *e)
{
	uint64_t h = e->heap;
	struct explain_finding *f;

	if (e->heap_parts || h < EXPLAIN_MIN_BYTES || h * 10 < e->rss)
		return;
	f = finding_add(e, "heap", h);
	if (!f)
		return;
	say(f->text, sizeof(f->text),
	    "%s holds %s for the heap (%.0f%% of RSS), what the program holds and the pages it keeps free together: this build counts no blocks (a release build; committed %s, reserved %s), so it cannot tell a leak or a working set from freed memory it keeps",
	    in->allocator, hb(h), explain_pct(e, h), hb(in->acc->committed),
	    hb(in->acc->reserved));
	say(f->remedy, sizeof(f->remedy),
	    "first `memsnap --pid %d trim` (mi_collect(true) returns the pages it keeps free), then explain again: what stays is in use; if that grows, which code holds it: `memsnap --pid %d prof on --sampler`, `dump -o a.heap`, later `dump -o b.heap`, then `memsnap report b.heap --base a.heap`; at the next start (a restart) MIMALLOC_DECOMMIT_DELAY=0 (MIMALLOC_PURGE_DELAY=0 from 2.1) returns freed pages at once",
	    (int)in->pid, (int)in->pid);
}

/*
 * The findings that are causes of another's bytes, and the findings
 * they may explain, in order: each goes inside the one of those present
 * with the most bytes, so that no two findings count the same bytes.
 */
static const struct {
	const char *cause;
	const char *hosts[8];
} causes[] = {
	{ "glibc_arenas", { "heap_free" } },
	{ "page_size", { "heap_free", "allocator_metadata" } },
	/* thread stacks too: with THP "always", a stack's first deep call
	 * brings a 2 MiB page in whole (201 threads of 2.2 MiB each) */
	{ "huge_pages", { "heap_free", "runtime", "anon_other", "heap_in_use",
			  "heap", "allocator_metadata", "thread_stacks" } },
};

static struct explain_finding *host_of(struct explain *e, size_t c)
{
	struct explain_finding *best = NULL;
	size_t i, h;

	for (h = 0; h < 8 && causes[c].hosts[h]; h++)
		for (i = 0; i < e->nf; i++)
			if (!strcmp(e->f[i].id, causes[c].hosts[h]) &&
			    (!best || e->f[i].bytes > best->bytes))
				best = &e->f[i];
	return best;
}

static void fold_causes(struct explain *e)
{
	size_t c, i;

	for (c = 0; c < sizeof(causes) / sizeof(causes[0]); c++) {
		struct explain_finding *h = host_of(e, c), *f = NULL;
		struct explain_cause *k;

		for (i = 0; i < e->nf && !f; i++)
			if (!strcmp(e->f[i].id, causes[c].cause))
				f = &e->f[i];
		if (!f || !h || h->ncauses >= EXPLAIN_MAX_CAUSES)
			continue;
		k = &h->causes[h->ncauses++];
		k->id = f->id;
		k->bytes = min_u64(f->bytes, h->bytes);
		snprintf(k->text, sizeof(k->text), "%s", f->text);
		snprintf(k->remedy, sizeof(k->remedy), "%s", f->remedy);
		/* the host may move: it is found again for the next cause */
		memmove(f, f + 1, (size_t)(&e->f[--e->nf] - f) * sizeof(*f));
	}
}

/* Why the allocator was not read, for the verdict. */
static const char *not_read(const struct explain_input *in)
{
	return in->not_read ? in->not_read : "--no-attach";
}

static int by_bytes(const void *a, const void *b)
{
	const struct explain_finding *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return strcmp(x->id, y->id);
}

static void verdict(const struct explain_input *in, struct explain *e)
{
	static const char *const words[PARTS] = {
		[PART_HEAP_IN_USE] = "heap in use",
		[PART_HEAP_FREE] = "memory the allocator holds free",
		[PART_METADATA] = "allocator metadata",
		[PART_RUNTIME] = "a language runtime's memory",
		[PART_STACKS] = "thread stacks",
		[PART_ANON_OTHER] = "anonymous memory outside the allocator",
		[PART_MEMSNAP] = "memsnap's sampler",
		[PART_FILE] = "mapped files",
		[PART_SHMEM] = "shared memory",
	};
	static const char *const next[PARTS] = {
		[PART_METADATA] = "see allocator_metadata",
		[PART_STACKS] = "see thread_stacks",
		[PART_ANON_OTHER] = "memory the program maps itself, such as buffer pools and caches: see anon_other",
		[PART_MEMSNAP] = "memsnap's, not the program's: `prof off` stops the sampling, its table stays until the program exits",
		[PART_FILE] = "code and mapped files, reclaimable by the kernel: not a leak",
		[PART_SHMEM] = "counted in every process that maps it: see shmem",
	};
	char *v = e->verdict;
	size_t n = sizeof(e->verdict);
	uint64_t top = e->heap;
	int p, best = -1;

	say(v, n, "RSS %s: ", hb(e->rss));
	if (e->rss < EXPLAIN_SMALL_RSS) {
		say(v, n, "too small to say anything about");
		return;
	}
	for (p = 0; p < PARTS; p++)
		if (e->part[p] > top) {
			top = e->part[p];
			best = p;
		}
	if (best < 0 && e->attached) {
		say(v, n, "%.0f%% %s's heap, in use and free together (it does not count them apart: `memsnap --pid %d trim` first, then explain again; see heap)",
		    explain_pct(e, e->heap), in->allocator, (int)in->pid);
		return;
	}
	if (best < 0) {
		say(v, n, "%.0f%% anonymous memory of the allocator and the program's own mappings (allocator not read: %s)",
		    explain_pct(e, e->heap), not_read(in));
		return;
	}
	if (best == PART_RUNTIME) {
		char who[96];

		runtime_words(in, who, sizeof(who));
		say(v, n, "%.0f%% %s's memory, outside malloc (whether it grows: `memsnap --pid %d watch`; see runtime)",
		    explain_pct(e, top), who, (int)in->pid);
		if (!e->attached)
			say(v, n, "; allocator not read: %s", not_read(in));
		return;
	}
	say(v, n, "%.0f%% %s", explain_pct(e, top), words[best]);
	if (best == PART_HEAP_IN_USE)
		say(v, n, " (a leak or a working set: first `memsnap --pid %d watch`, whether it grows; see heap_in_use)",
		    (int)in->pid);
	else if (best == PART_HEAP_FREE && in->acc &&
		 in->acc->kind == ALLOC_JEMALLOC &&
		 in->acc->active > in->acc->allocated + in->acc->pdirty)
		say(v, n, " (fragmentation inside pages still in use, which a purge cannot return: see heap_free)");
	else if (best == PART_HEAP_FREE)
		say(v, n, " (`memsnap --pid %d trim` returns what it can now; see heap_free)",
		    (int)in->pid);
	else
		say(v, n, " (%s)", next[best]);
	if (!e->attached)
		say(v, n, "; allocator not read: %s", not_read(in));
}

void explain_findings(const struct explain_input *in, struct explain *e)
{
	e->nf = 0;
	if (e->rss >= EXPLAIN_SMALL_RSS) {
		if (e->attached && in->acc) {
			on_heap_free(in, e);
			on_glibc_arenas(in, e);
			on_metadata(in, e);
			on_page_size(in, e);
			on_heap_in_use(in, e);
			on_heap(in, e);
		}
		on_runtime(in, e);
		on_huge_pages(in, e);
		on_thread_stacks(in, e);
		on_anon_other(in, e);
		on_file(in, e);
		on_shmem(in, e);
		fold_causes(e);
		qsort(e->f, e->nf, sizeof(e->f[0]), by_bytes);
	}
	e->verdict[0] = '\0';
	verdict(in, e);
}
