/*
 * Reading memsnap's sampler back (allocators/sampler.h): its live
 * records, each stack unwound here, written as a jemalloc heap_v2
 * profile.  Nothing in the target is stopped or written.
 */
#include "allocators/sampler_internal.h"

#include "common/util.h"
#include "injector/unwind.h"
#include "proc/maps.h"
#include "proc/procfs.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define FRAMES_MAX 128

struct sample {
	uint64_t size;
	uint32_t depth;
	uint64_t *pcs;
};

static int by_stack_then_size(const void *pa, const void *pb)
{
	const struct sample *a = pa, *b = pb;
	uint32_t i;

	if (a->depth != b->depth)
		return a->depth < b->depth ? -1 : 1;
	for (i = 0; i < a->depth; i++)
		if (a->pcs[i] != b->pcs[i])
			return a->pcs[i] < b->pcs[i] ? -1 : 1;
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

/*
 * The frames of record @r (stack copy @stack), the sampler's own
 * dropped; its caller alone when nothing unwinds.  All are return
 * addresses, and readers of heap_v2 take frame 0 as it is (jemalloc's
 * is its own code) and every other as a return address: frame 0 is
 * given as the byte before, inside the call, so that it names the line
 * of the call and not what follows it (an inlined function, the next
 * function after a call that does not return).
 */
static uint32_t frames_of(struct unwinder *uw, const struct sampler_rec *r,
			  const unsigned char *stack, uint64_t image,
			  uint64_t *pcs, bool *unwound)
{
	struct unwind_saved sv = { .regs = r->regs, .stack_lo = r->regs[1],
				   .stack = stack, .stack_len = r->stack_len };
	uint64_t raw[FRAMES_MAX];
	int n = unwind_saved(uw, &sv, raw, FRAMES_MAX), i, k = 0;

	for (i = 0; i < n; i++) {
		if (raw[i] >= image && raw[i] < image + CODE_LEN && !k)
			continue;
		pcs[k++] = raw[i];
	}
	*unwound = k > 1;
	if (!k && r->caller)
		pcs[k++] = r->caller;
	if (k && pcs[0])
		pcs[0]--;
	return (uint32_t)k;
}

/* Records read at a time: memsnap's memory follows the live records,
 * not the table's size (which a hostile target chooses). */
#define CHUNK 4096u

struct samples {
	struct sample *v;
	size_t n, cap;
	uint64_t *pool;
	size_t used, pool_cap;
};

static int add_sample(struct samples *ss, uint64_t size, const uint64_t *pcs,
		      uint32_t depth)
{
	if (array_grow((void **)&ss->v, &ss->cap, ss->n + 1, sizeof(*ss->v)) ||
	    array_grow((void **)&ss->pool, &ss->pool_cap, ss->used + depth,
		       sizeof(*ss->pool)))
		return -ENOMEM;
	memcpy(ss->pool + ss->used, pcs, depth * sizeof(*pcs));
	/* an offset until the pool stops moving */
	ss->v[ss->n++] = (struct sample){ .size = size, .depth = depth,
					  .pcs = (uint64_t *)(uintptr_t)ss->used };
	ss->used += depth;
	return 0;
}

/* Every live record of the table of @c, unwound, into @ss. */
static int read_records(pid_t pid, const struct sampler_ctl *c,
			struct unwinder *uw, uint64_t image,
			struct samples *ss, struct sampler_dump *d)
{
	uint64_t stacks = c->table + sampler_stacks_off(c->nrecs);
	uint64_t *keys = malloc(CHUNK * sizeof(*keys));
	struct sampler_rec *recs = malloc(CHUNK * sizeof(*recs));
	unsigned char *stack = malloc(c->stack_bytes ? c->stack_bytes : 1);
	uint64_t pcs[FRAMES_MAX], base;
	int rc = 0;

	if (!keys || !recs || !stack) {
		rc = -ENOMEM;
		goto out;
	}
	for (base = 0; base < c->nrecs && !rc; base += CHUNK) {
		uint64_t n = c->nrecs - base < CHUNK ? c->nrecs - base : CHUNK;
		uint64_t i;

		rc = proc_read_mem(pid, c->table + base * sizeof(*keys), keys,
				   n * sizeof(*keys));
		if (!rc)
			rc = proc_read_mem(pid, c->table +
					   sampler_recs_off(c->nrecs) +
					   base * sizeof(*recs),
					   recs, n * sizeof(*recs));
		for (i = 0; i < n && !rc; i++) {
			struct sampler_rec *r = &recs[i];
			uint32_t depth;
			bool unwound;

			if (!keys[i] || r->ptr != keys[i] ||
			    !r->size)
				continue;
			if (r->stack_len > c->stack_bytes ||
			    proc_read_mem(pid, stacks + (base + i) *
						       c->stack_bytes,
					  stack, r->stack_len))
				r->stack_len = 0;
			depth = frames_of(uw, r, stack, image, pcs, &unwound);
			if (!depth)
				continue;
			d->unwound += unwound;
			rc = add_sample(ss, r->size, pcs, depth);
		}
	}
out:
	free(stack);
	free(recs);
	free(keys);
	return rc;
}

int sampler_dump(pid_t pid, const struct maps *maps, FILE *out,
		 struct sampler_dump *d)
{
	struct sampler_ctl *c = NULL;
	struct samples ss = { 0 };
	uint64_t total_bytes = 0;
	struct unwinder *uw = NULL;
	struct unwind_code code;
	size_t i, n;
	int rc;

	memset(d, 0, sizeof(*d));
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	rc = sampler_find_ctl(pid, maps, &d->st, c);
	if (rc == -ENODATA)
		rc = -ENOENT;	/* never switched on: no records */
	if (rc)
		goto out;
	if (!c->table) {
		rc = -ENOENT;
		goto out;
	}
	code = (struct unwind_code){
		.lo = d->st.image, .hi = d->st.image + CODE_LEN,
		.eh_frame_hdr = d->st.image + SAMPLER_OFF_sampler_eh_frame_hdr,
	};
	uw = unwinder_new(pid, maps, &code);
	if (!uw) {
		rc = -ENOMEM;
		goto out;
	}
	rc = read_records(pid, c, uw, d->st.image, &ss, d);
	if (rc)
		goto out;
	n = ss.n;
	for (i = 0; i < n; i++) {
		ss.v[i].pcs = ss.pool + (uintptr_t)ss.v[i].pcs;
		total_bytes += ss.v[i].size;
	}
	d->live = n;
	if (n)
		qsort(ss.v, n, sizeof(*ss.v), by_stack_then_size);
	fprintf(out, "heap_v2/%" PRIu64 "\n", c->mean);
	fprintf(out, "  t*: %zu: %" PRIu64 " [0: 0]\n", n, total_bytes);
	for (i = 0; i < n;) {
		const struct sample *v = ss.v;
		size_t j = i + 1;
		uint32_t k;

		while (j < n && !by_stack_then_size(&v[i], &v[j]))
			j++;
		if (!i || v[i].depth != v[i - 1].depth ||
		    memcmp(v[i].pcs, v[i - 1].pcs,
			   v[i].depth * sizeof(uint64_t)))
			d->stacks++;
		fputc('@', out);
		for (k = 0; k < v[i].depth; k++)
			fprintf(out, " 0x%" PRIx64, v[i].pcs[k]);
		fprintf(out, "\n  t*: %zu: %" PRIu64 " [0: 0]\n", j - i,
			(uint64_t)(j - i) * v[i].size);
		i = j;
	}
	fputs("\nMAPPED_LIBRARIES:\n", out);
	write_maps(out, maps);
	rc = ferror(out) ? -EIO : 0;
out:
	unwinder_free(uw);
	free(ss.pool);
	free(ss.v);
	free(c);
	return rc;
}
