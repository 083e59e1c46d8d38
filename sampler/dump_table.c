/*
 * What a dump counts (sampler/dump_table.h): stacks interned, (stack,
 * size) pairs counted, the profile written.
 */
#include "sampler/dump_table.h"

#include "common/util.h"
#include "proc/maps.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

static uint64_t stack_hash_of(const void *ctx, size_t i)
{
	return ((const struct table *)ctx)->stacks[i].hash;
}

static uint64_t pair_hash(uint32_t stack, uint64_t size)
{
	return mix(mix(0, stack), size);
}

static uint64_t pair_hash_of(const void *ctx, size_t i)
{
	const struct pair *p = &((const struct table *)ctx)->pairs[i];

	return pair_hash(p->stack, p->size);
}

/* The index of stack @pcs (@depth frames), added if new. */
int table_intern(struct table *t, const uint64_t *pcs, uint32_t depth,
		 uint32_t *id)
{
	uint64_t h = mix(0, depth);
	uint32_t i;
	size_t j;

	for (i = 0; i < depth; i++)
		h = mix(h, pcs[i]);
	if (hidx_need(&t->stack_idx, t->nstacks + 1, 1024, stack_hash_of, t))
		return -ENOMEM;
	for (j = hidx_first(&t->stack_idx, h); t->stack_idx.slot[j];
	     j = hidx_next(&t->stack_idx, j)) {
		const struct stack *s = &t->stacks[t->stack_idx.slot[j] - 1];

		if (s->hash == h && s->depth == depth &&
		    !memcmp(t->pool + s->off, pcs, depth * sizeof(*pcs))) {
			*id = t->stack_idx.slot[j] - 1;
			return 0;
		}
	}
	/* past the budget, a record's caller alone: at most one frame a
	 * record, NRECS_MAX */
	if (depth > 1 && t->used + depth > DUMP_KEPT)
		return -E2BIG;
	if (array_grow((void **)&t->stacks, &t->cap_stacks, t->nstacks + 1,
		       sizeof(*t->stacks)) ||
	    array_grow((void **)&t->pool, &t->cap_pool, t->used + depth,
		       sizeof(*t->pool)))
		return -ENOMEM;
	memcpy(t->pool + t->used, pcs, depth * sizeof(*pcs));
	t->stacks[t->nstacks] = (struct stack){ .hash = h, .off = t->used,
						.depth = depth };
	t->used += depth;
	*id = (uint32_t)t->nstacks;
	t->stack_idx.slot[j] = (uint32_t)++t->nstacks;
	return 0;
}

/* @part: the record's part of the reservoir, or -1: a live record */
int table_count(struct table *t, uint32_t stack, uint64_t size, int part)
{
	uint64_t h = pair_hash(stack, size);
	struct pair *p;
	size_t j;

	if (hidx_need(&t->pair_idx, t->npairs + 1, 1024, pair_hash_of, t))
		return -ENOMEM;
	for (j = hidx_first(&t->pair_idx, h); t->pair_idx.slot[j];
	     j = hidx_next(&t->pair_idx, j)) {
		p = &t->pairs[t->pair_idx.slot[j] - 1];
		if (p->stack == stack && p->size == size)
			break;
	}
	if (!t->pair_idx.slot[j]) {
		if (array_grow((void **)&t->pairs, &t->cap_pairs,
			       t->npairs + 1, sizeof(*t->pairs)))
			return -ENOMEM;
		t->pairs[t->npairs] = (struct pair){ .stack = stack,
						     .size = size };
		t->pair_idx.slot[j] = (uint32_t)++t->npairs;
	}
	p = &t->pairs[t->pair_idx.slot[j] - 1];
	if (part < 0)
		p->count++;
	else
		p->kept[part]++;
	return 0;
}

void table_free(struct table *t)
{
	free(t->stacks);
	free(t->pool);
	free(t->pairs);
	hidx_free(&t->stack_idx);
	hidx_free(&t->pair_idx);
}

/* The order of the profile: by stack (depth, then frames), then size. */
static int by_stack_then_size(const void *pa, const void *pb, void *arg)
{
	const struct table *t = arg;
	const struct pair *a = pa, *b = pb;
	const struct stack *x = &t->stacks[a->stack];
	const struct stack *y = &t->stacks[b->stack];
	uint32_t i;

	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	for (i = 0; i < x->depth; i++) {
		uint64_t u = t->pool[x->off + i];
		uint64_t v = t->pool[y->off + i];

		if (u != v)
			return u < v ? -1 : 1;
	}
	return a->size < b->size ? -1 : a->size > b->size;
}

/* The maps as the kernel prints them, for MAPPED_LIBRARIES:. */
static void write_maps(FILE *out, const struct maps *m)
{
	size_t i;

	for (i = 0; i < m->n; i++) {
		const struct map_entry *e = &m->v[i];

		fprintf(out, "%" PRIx64 "-%" PRIx64 " %c%c%c%c %08" PRIx64
			" %02x:%02x %" PRIu64 "%s%s%s\n",
			e->start, e->end, e->prot & MAP_PROT_READ ? 'r' : '-',
			e->prot & MAP_PROT_WRITE ? 'w' : '-',
			e->prot & MAP_PROT_EXEC ? 'x' : '-',
			e->shared ? 's' : 'p', e->offset, e->dev_major,
			e->dev_minor, e->inode, e->path ? "    " : "",
			e->path ? e->path : "",
			e->deleted ? " (deleted)" : "");
	}
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
	return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/*
 * Each pair's blocks allocated since prof on, into its alloc: its live
 * records, and its records of each part of the reservoir, each for
 * @per[part] freed ones.  Rounded with the remainder carried from pair
 * to pair, so that the sum is the estimate, not its pairs' roundings (a
 * record standing for 1.49 is not 1 each time); saturated, never
 * wrapped (the target wrote the counts).  None when @per is NULL.
 */
static void allocated(struct table *t, const double *per)
{
	double carry = 0;
	size_t i;

	for (i = 0; i < t->npairs; i++) {
		struct pair *p = &t->pairs[i];
		double v;
		uint64_t whole;

		if (!per) {
			p->alloc = 0;
			continue;
		}
		v = (double)p->kept[0] * per[0] + (double)p->kept[1] * per[1] +
		    carry;
		whole = v < 0x1p62 ? (uint64_t)v : 1ull << 62;
		carry = v < 0x1p62 ? v - (double)whole : 0;
		p->alloc = sat_add(p->count, whole);
	}
}

/* The profile out of @t; -EFBIG once it passes @max_bytes.  Each
 * count line is "t*: live objects: bytes [allocated objects: bytes]",
 * the second pair (jemalloc's with prof_accum) counting every block
 * sampled since prof on, freed or not. */
int table_write_profile(FILE *out, const struct sampler_ctl *c,
			const struct maps *maps, struct table *t,
			uint64_t max_bytes, const uint64_t seen[2],
			struct sampler_dump *d)
{
	uint64_t total_bytes = 0, live = 0, all = 0, all_bytes = 0;
	bool counts = true;
	double per[2];
	size_t i;

	/* each record kept stands for this many freed samples (at least
	 * itself: @seen was read after the records); freed ones counted
	 * but none kept (no stack copies, a table written over): no
	 * allocation counts at all, rather than wrong ones */
	for (i = 0; i < 2; i++) {
		per[i] = d->freed_kept[i] ? (double)seen[i] /
						    (double)d->freed_kept[i]
					  : 0;
		if (d->freed_kept[i] && per[i] < 1)
			per[i] = 1;
		counts &= !seen[i] || d->freed_kept[i];
	}
	if (t->npairs)
		qsort_r(t->pairs, t->npairs, sizeof(*t->pairs),
			by_stack_then_size, t);
	allocated(t, counts ? per : NULL);
	for (i = 0; i < t->npairs; i++) {
		const struct pair *p = &t->pairs[i];

		live = sat_add(live, p->count);
		total_bytes = sat_add(total_bytes, sat_mul(p->count, p->size));
		all = sat_add(all, p->alloc);
		all_bytes = sat_add(all_bytes, sat_mul(p->alloc, p->size));
	}
	fprintf(out, "heap_v2/%" PRIu64 "\n", c->mean);
	fprintf(out, "  t*: %" PRIu64 ": %" PRIu64 " [%" PRIu64 ": %" PRIu64
		"]\n", live, total_bytes, all, all_bytes);
	d->stacks = t->nstacks;
	for (i = 0; i < t->npairs; i++) {
		const struct pair *p = &t->pairs[i];
		const struct stack *s = &t->stacks[p->stack];
		uint32_t k;

		fputc('@', out);
		for (k = 0; k < s->depth; k++)
			fprintf(out, " 0x%" PRIx64, t->pool[s->off + k]);
		fprintf(out, "\n  t*: %" PRIu64 ": %" PRIu64 " [%" PRIu64
			": %" PRIu64 "]\n", p->count,
			sat_mul(p->count, p->size), p->alloc,
			sat_mul(p->alloc, p->size));
		if ((uint64_t)ftello(out) > max_bytes)
			return -EFBIG;
	}
	fputs("\nMAPPED_LIBRARIES:\n", out);
	write_maps(out, maps);
	if ((uint64_t)ftello(out) > max_bytes)
		return -EFBIG;
	return ferror(out) ? -EIO : 0;
}
