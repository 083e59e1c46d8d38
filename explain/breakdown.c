/*
 * The arithmetic of `explain` (explain/explain.h): parts that add up to
 * RSS, the allocator's numbers bounded by the memory they can describe.
 */
#include "explain/explain_internal.h"

#include <stdio.h>
#include <string.h>

static const char *const part_names[PARTS] = {
	[PART_HEAP_IN_USE] = "heap_in_use",
	[PART_HEAP_FREE] = "heap_free",
	[PART_METADATA] = "allocator_metadata",
	[PART_RUNTIME] = "runtime",
	[PART_STACKS] = "thread_stacks",
	[PART_ANON_OTHER] = "anon_other",
	[PART_MEMSNAP] = "memsnap_sampler",
	[PART_FILE] = "file",
	[PART_SHMEM] = "shmem",
};

const char *explain_part_name(enum explain_part p)
{
	return p < PARTS ? part_names[p] : "?";
}

double explain_pct(const struct explain *e, uint64_t bytes)
{
	return e->rss ? 100.0 * (double)bytes / (double)e->rss : 0.0;
}

const struct explain_finding *explain_find(const struct explain *e,
					   const char *id)
{
	size_t i;

	for (i = 0; i < e->nf; i++)
		if (!strcmp(e->f[i].id, id))
			return &e->f[i];
	return NULL;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Take up to @want bytes from *@left: what was taken. */
static uint64_t take(uint64_t *left, uint64_t want, uint64_t *cut)
{
	uint64_t got = min_u64(*left, want);

	*left -= got;
	*cut = add_sat(*cut, want - got);
	return got;
}

/*
 * In use, metadata, free: each bounded by what is left of the pool.
 * jemalloc's metadata on transparent huge pages (metadata_thp) is
 * resident by whole huge pages, which stats.metadata does not count.
 */
static void other_parts(const struct alloc_account *acc,
			const struct smaps_totals *t, uint64_t huge_page,
			uint64_t *left, struct explain *e)
{
	uint64_t md = acc->metadata;

	if (acc->kind == ALLOC_JEMALLOC) {
		md = alloc_account_metadata_resident(acc, t->anon_huge_private,
						     huge_page);
		e->metadata_huge = md > acc->metadata ? md : 0;
	}
	if (acc->have_in_use)
		e->part[PART_HEAP_IN_USE] =
			take(left, acc->in_use, &e->cut[PART_HEAP_IN_USE]);
	if (acc->have_metadata)
		e->part[PART_METADATA] =
			take(left, md, &e->cut[PART_METADATA]);
	if (acc->have_free)
		e->part[PART_HEAP_FREE] =
			take(left, acc->free, &e->cut[PART_HEAP_FREE]);
}

/*
 * glibc's arenas live in "[heap]" and in heaps of 64 MiB aligned: what
 * they hold in use and free is bounded by those mappings, so that free
 * chunks whose pages malloc_trim() gave back (still free chunks for
 * malloc_info) do not take the program's own mmaps.  Chunks mmap'd on
 * their own are anywhere: bounded by the rest of the pool.
 */
static void glibc_parts(const struct alloc_account *acc,
			const struct smaps_totals *t, uint64_t *left,
			struct explain *e)
{
	uint64_t arenas = min_u64(t->anon_arenas, *left), before = arenas;
	uint64_t in_arenas = acc->in_use > acc->mmap_bytes
				     ? acc->in_use - acc->mmap_bytes
				     : 0;
	uint64_t *cut_use = &e->cut[PART_HEAP_IN_USE];

	if (acc->have_in_use)
		e->part[PART_HEAP_IN_USE] = take(&arenas, in_arenas, cut_use);
	if (acc->have_free)
		e->part[PART_HEAP_FREE] =
			take(&arenas, acc->free, &e->cut[PART_HEAP_FREE]);
	*left -= before - arenas;
	if (acc->have_in_use)
		e->part[PART_HEAP_IN_USE] +=
			take(left, acc->in_use - in_arenas, cut_use);
}

/* The claims of @in and where its runtime's heap is, into @c: how many. */
static size_t all_claims(const struct explain_input *in, struct smap_claim *c,
			 size_t max)
{
	size_t n = in->nclaims < max ? in->nclaims : max;

	if (n)
		memcpy(c, in->claims, n * sizeof(*c));
	return n + runtime_claims(in->rt, in->pm, c + n, max - n);
}

static bool has_runtime(const struct explain_input *in)
{
	return in->rt && in->rt->kind != RUNTIME_NONE;
}

void explain_compute(const struct explain_input *in, struct explain *e)
{
	const struct proc_memory *pm = in->pm;
	const struct alloc_account *acc = in->acc;
	struct smap_claim claims[EXPLAIN_CLAIMS_MAX];
	struct smaps_totals t;
	uint64_t left, sum = 0;
	size_t i, nc;

	memset(e, 0, sizeof(*e));
	nc = all_claims(in, claims, EXPLAIN_CLAIMS_MAX);
	smaps_total(pm, claims, nc, &t);
	/* RSS is the page walk: exact on every kernel, where VmRSS lags
	 * it before Linux 6.2 (by half of a small process's RSS on 6.1);
	 * the counter only where there are no mappings to walk */
	e->vm_rss = pm->have_status && pm->st.have_rss ? pm->st.vm_rss : 0;
	e->rss = pm->n ? t.rss : e->vm_rss;
	e->swap = pm->have_status ? pm->st.vm_swap : t.swap;
	if (pm->have_status && t.swap > e->swap)
		e->swap = t.swap;
	e->threads = pm->have_status ? pm->st.threads : 0;
	e->vm_hwm = pm->have_status ? pm->st.vm_hwm : 0;
	e->nstacks = t.nstacks;
	e->largest_stack = t.largest_stack;
	e->anon_huge = t.anon_huge;
	e->page_size = pm->page_size;
	e->huge_page = pm->huge_page;
	snprintf(e->thp, sizeof(e->thp), "%s", pm->thp);
	e->pool = t.anon_private;
	e->part[PART_STACKS] = t.stacks;
	e->part[PART_FILE] = t.file;
	e->part[PART_SHMEM] = t.shmem;
	e->shmem_pss = t.shmem_pss;
	e->part[PART_MEMSNAP] = t.memsnap;
	e->part[PART_RUNTIME] = e->runtime_mapped = t.runtime;
	left = t.anon_private;
	if (acc && acc->in_use_with_free) {
		/* in use and free as one: what it committed, as far as the
		 * pool holds it (committed pages may never be touched) */
		e->attached = true;
		e->heap = take(&left, acc->committed, &e->clamped);
	} else if (acc) {
		e->attached = e->heap_parts = true;
		if (acc->kind == ALLOC_GLIBC)
			glibc_parts(acc, &t, &left, e);
		else
			other_parts(acc, &t, pm->huge_page, &left, e);
		for (i = 0; i < PARTS; i++)
			e->clamped = add_sat(e->clamped, e->cut[i]);
	} else if (!(has_runtime(in) && in->no_malloc)) {
		/* the allocator's and the program's own, as one */
		e->heap = left;
		left = 0;
	}
	/* in a runtime's process, what malloc does not hold is the
	 * runtime's, but for what native code maps itself */
	if (has_runtime(in)) {
		e->part[PART_RUNTIME] = add_sat(e->part[PART_RUNTIME], left);
		left = 0;
	}
	e->part[PART_ANON_OTHER] = add_sat(left, t.anon_in_files);
	for (i = 0; i < PARTS; i++)
		sum = add_sat(sum, e->part[i]);
	sum = add_sat(sum, e->heap);
	e->unaccounted = (int64_t)(e->rss - sum);
	if (e->rss < sum && sum - e->rss > (uint64_t)INT64_MAX)
		e->unaccounted = INT64_MIN;
	explain_top(in, claims, nc, e);
	explain_findings(in, e);
}
