/*
 * Reading memsnap's sampler back (sampler/sampler.h): its live
 * records, each stack unwound here, written as a jemalloc heap_v2
 * profile.  Nothing in the target is stopped or written.
 *
 * The table is in the target's memory and the target can write all of
 * it: its geometry, every record, every register and stack word.  So
 * what a dump costs is bounded by memsnap, not by the table:
 *   - the geometry must be one memsnap makes (sampler_read_ctl(): the
 *     stack slice memsnap sets, at most NRECS_MAX records), the table in
 *     one anonymous mapping;
 *   - stacks are kept once each (interned): memory follows the distinct
 *     stacks and (stack, size) pairs, not the records;
 *   - a dump unwinds at most DUMP_FRAMES frames, keeps at most DUMP_KEPT
 *     distinct frames, reads at most DUMP_STACK_READ bytes of stack
 *     copies and has the unwinder served at most DUMP_PAGES pages: once
 *     one is spent, the records left keep their caller alone (no
 *     unwind, no stack read), and d->spent names it;
 *   - (stack, size) pairs are at most the records, NRECS_MAX;
 *   - the profile stops at @max_bytes as it is written (-EFBIG).
 */
#include "sampler/internal.h"

#include "common/hidx.h"
#include "common/util.h"
#include "injector/unwind.h"
#include "proc/maps.h"
#include "proc/procfs.h"
#include "symbols/symbolizer.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define FRAMES_MAX 128

/* One dump's budgets: a dump of 128 Ki live samples (a 64 GiB heap at
 * the default mean) with stacks of 32 frames stays within them, and a
 * table written to spend them costs seconds (bench/forged.sh). */
#define DUMP_FRAMES (4u << 20)
#define DUMP_KEPT (2u << 20)
#define DUMP_PAGES (1u << 16)
/* 128 Ki samples of 32 KiB of stack each: what the largest copies
 * (--stack-bytes 64K) of a forged table may make a dump read. */
#define DUMP_STACK_READ (4ull << 30)

/* Records read at a time: memsnap's memory follows the live records,
 * not the table's size (which a hostile target chooses). */
#define CHUNK 4096u
/* Records unwound at a time (the unwinder's round trip). */
#define BATCH 16u

/* The registers of a record, numbered for the unwinder. */
static const unsigned char reg_nums[SAMPLER_REGS_SAVED] = SAMPLER_REG_NUMS;

/* A distinct stack: its frames in the pool. */
struct stack {
	uint64_t hash;
	size_t off;
	uint32_t depth;
};

/* A distinct (stack, size): how many live records have it, and how
 * many records of each part of the reservoir of freed ones. */
struct pair {
	uint32_t stack;
	uint64_t size, count, kept[2];
	uint64_t alloc;		/* what they stand for (write_profile()) */
};

struct table {
	struct stack *stacks;
	size_t nstacks, cap_stacks;
	uint64_t *pool;
	size_t used, cap_pool;
	struct hidx stack_idx;
	struct pair *pairs;
	size_t npairs, cap_pairs;
	struct hidx pair_idx;
	uint64_t frames;	/* unwound, all records */
	uint64_t stack_read;	/* bytes of stack copies read */
};

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
static int intern(struct table *t, const uint64_t *pcs, uint32_t depth,
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
static int count_pair(struct table *t, uint32_t stack, uint64_t size,
		      int part)
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

static void table_free(struct table *t)
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

/*
 * The frames of a record as the profile gives them, from its unwind
 * @raw (@n frames, or -errno): the sampler's own dropped; its caller
 * alone when nothing unwinds.  All are return addresses, and readers of
 * heap_v2 take frame 0 as it is (jemalloc's is its own code) and every
 * other as a return address: frame 0 is given as the byte before,
 * inside the call, so that it names the line of the call and not what
 * follows it (an inlined function, the next function after a call that
 * does not return).
 */
static uint32_t frames_of(const uint64_t *raw, int n, uint64_t caller,
			  uint64_t image, uint64_t *pcs, bool *unwound)
{
	int i, k = 0;

	for (i = 0; i < n; i++) {
		if (raw[i] >= image && raw[i] < image + CODE_LEN && !k)
			continue;
		pcs[k++] = raw[i];
	}
	*unwound = k > 1;
	if (!k && caller)
		pcs[k++] = caller;
	if (k && pcs[0])
		pcs[0]--;
	return (uint32_t)k;
}

struct batch {
	struct unwind_saved sv[BATCH];
	struct unwind_out out[BATCH];
	const struct sampler_rec *rec[BATCH];
	int part[BATCH];		/* of the reservoir, or -1: live */
	uint64_t idx[BATCH];		/* the record's slot */
	unsigned char *stacks;		/* BATCH stack slices */
	uint64_t raw[BATCH][FRAMES_MAX];
	size_t n;
};

/* Record @r, in slot @idx of a table whose stack slices start at
 * @stacks, into @b with its stack (none once a budget is spent, or
 * whatever the target says of its length beyond the slice). */
static void batch_add(struct batch *b, pid_t pid, const struct sampler_ctl *c,
		      struct sampler_rec *r, uint64_t stacks, uint64_t idx,
		      int part, struct table *t, const struct sampler_dump *d)
{
	unsigned char *stack = b->stacks + b->n * c->stack_bytes;

	if (r->stack_len > c->stack_bytes || d->spent)
		r->stack_len = 0;
	if (r->stack_len &&
	    proc_read_mem(pid, stacks + idx * c->stack_bytes, stack,
			  r->stack_len))
		r->stack_len = 0;
	t->stack_read += r->stack_len;
	b->sv[b->n] = (struct unwind_saved){
		.regs = r->regs, .regnums = reg_nums,
		.nregs = SAMPLER_REGS_SAVED,
		.stack_lo = r->regs[SAMPLER_REG_SP],
		.stack = stack, .stack_len = r->stack_len,
	};
	b->out[b->n] = (struct unwind_out){ .pcs = b->raw[b->n] };
	b->part[b->n] = part;
	b->idx[b->n] = idx;
	b->rec[b->n++] = r;
}

/* The budget spent, if one is: the records left are not unwound. */
static void check_budgets(const struct table *t, const struct unwinder *uw,
			  struct sampler_dump *d)
{
	if (d->spent)
		return;
	if (t->frames >= DUMP_FRAMES)
		d->spent = "frames unwound";
	else if (t->used >= DUMP_KEPT)
		d->spent = "distinct stack frames kept";
	else if (t->stack_read >= DUMP_STACK_READ)
		d->spent = "bytes of stack read";
	else if (unwinder_pages(uw) >= DUMP_PAGES)
		d->spent = "pages of code and unwind tables read";
}

/* Count a record of @depth frames @pcs (or its caller alone, once the
 * distinct frames are spent) into @t. */
static int count_record(struct table *t, uint64_t *pcs, uint32_t depth,
			uint64_t caller, uint64_t size, int part,
			struct sampler_dump *d)
{
	uint32_t id;
	int rc = intern(t, pcs, depth, &id);

	if (rc == -E2BIG) {
		/* once a budget is spent, flush() counts each record cut */
		if (!d->spent) {
			d->spent = "distinct stack frames kept";
			d->cut++;
		}
		pcs[0] = caller ? caller - 1 : pcs[0];
		rc = intern(t, pcs, 1, &id);
	}
	return rc ? rc : count_pair(t, id, size, part);
}

/* Unwind the records of @b (unless a budget is spent), count them into
 * @t. */
static int flush(struct batch *b, struct unwinder *uw, uint64_t image,
		 struct table *t, struct sampler_dump *d)
{
	uint64_t pcs[FRAMES_MAX];
	size_t i;
	int rc = 0;

	if (!b->n)
		return 0;
	check_budgets(t, uw, d);
	if (!d->spent)
		unwind_saved(uw, b->sv, b->n, FRAMES_MAX, b->out);
	for (i = 0; i < b->n && !rc; i++) {
		const struct sampler_rec *r = b->rec[i];
		int n = b->out[i].n;
		uint32_t depth;
		bool unwound;

		if (d->spent) {
			n = 0;
			d->cut++;
		} else if (n < 0 && unwinder_why(uw)) {
			/* the unwinder failed on it: its caller only */
			d->lost++;
			snprintf(d->why, sizeof(d->why), "%s",
				 unwinder_why(uw));
		}
		depth = frames_of(b->raw[i], n, r->caller, image, pcs,
				  &unwound);
		if (!depth)
			continue;
		/* a stack cut before the thread's start says so, outermost;
		 * counted apart from those a budget or the unwinder left
		 * with their caller (d->cut, d->lost) */
		if (d->spent || n <= 0 || !b->out[i].whole) {
			if (depth == FRAMES_MAX)
				depth--;
			pcs[depth++] = SYM_PC_TRUNCATED;
			d->truncated += !d->spent && n > 0;
		}
		t->frames += (uint64_t)(n > 0 ? n : 0);
		d->unwound += unwound;
		if (b->part[i] >= 0)
			d->freed_kept[b->part[i]]++;
		else
			d->live++;
		rc = count_record(t, pcs, depth, r->caller, r->size,
				  b->part[i], d);
	}
	b->n = 0;
	return rc;
}

/* Every live record of the table of @c, unwound, into @t. */
static int read_records(pid_t pid, const struct sampler_ctl *c,
			struct unwinder *uw, uint64_t image,
			struct table *t, struct sampler_dump *d)
{
	uint64_t stacks = c->table + sampler_stacks_off(c->nrecs);
	uint64_t *keys = malloc(CHUNK * sizeof(*keys));
	struct sampler_rec *recs = malloc(CHUNK * sizeof(*recs));
	struct batch *b = calloc(1, sizeof(*b));
	uint64_t base;
	int rc = 0;

	if (b)
		b->stacks = malloc((size_t)BATCH * c->stack_bytes);
	if (!keys || !recs || !b || !b->stacks) {
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

			if (!keys[i] || r->ptr != keys[i] || !r->size)
				continue;
			batch_add(b, pid, c, r, stacks, base + i, -1, t, d);
			if (b->n == BATCH)
				rc = flush(b, uw, image, t, d);
		}
		/* the records of this chunk are read over by the next */
		if (!rc)
			rc = flush(b, uw, image, t, d);
	}
out:
	if (b)
		free(b->stacks);
	free(b);
	free(recs);
	free(keys);
	return rc;
}

/* flush() the reservoir's records of @b (of the records at @recs_at)
 * that were not rewritten while they were read. */
static int flush_kept(pid_t pid, uint64_t recs_at, struct batch *b,
		      struct unwinder *uw, uint64_t image, struct table *t,
		      struct sampler_dump *d)
{
	size_t k, n;

	for (k = n = 0; k < b->n; k++) {
		const struct sampler_rec *r = b->rec[k];
		struct sampler_rec now;

		/* all but the stack's length, which batch_add() may have
		 * refused */
		if (proc_read_mem(pid, recs_at + b->idx[k] * sizeof(now), &now,
				  sizeof(now)) ||
		    now.ptr != r->ptr || now.size != r->size ||
		    now.caller != r->caller || now.fn != r->fn ||
		    memcmp(now.regs, r->regs, sizeof(now.regs)))
			continue;
		b->sv[n] = b->sv[k];
		b->out[n] = (struct unwind_out){ .pcs = b->raw[n] };
		b->part[n] = b->part[k];
		b->idx[n] = b->idx[k];
		b->rec[n++] = b->rec[k];
	}
	b->n = n;
	return flush(b, uw, image, t, d);
}

/*
 * The records of the reservoir of freed samples, unwound, into @t, and
 * the offers each part had once they were read into @seen (from the
 * control block at @ctl; @c's if that cannot be read).  A record is
 * taken whole or not at all: its sequence is even (written whole) when
 * read, and it reads the same once its stack has been read.
 */
static int read_kept(pid_t pid, const struct sampler_ctl *c, uint64_t ctl,
		     struct unwinder *uw, uint64_t image, struct table *t,
		     uint64_t seen[2], struct sampler_dump *d)
{
	uint64_t recs_at = c->table + sampler_kept_off(c->nrecs, c->stack_bytes);
	uint64_t stacks = c->table +
			  sampler_kept_stacks_off(c->nrecs, c->stack_bytes);
	struct sampler_rec *recs = malloc(SAMPLER_KEPT * sizeof(*recs));
	struct batch *b = calloc(1, sizeof(*b));
	uint64_t i;
	int rc = 0;

	if (b)
		b->stacks = malloc((size_t)BATCH * c->stack_bytes);
	if (!recs || !b || !b->stacks) {
		rc = -ENOMEM;
		goto out;
	}
	rc = proc_read_mem(pid, recs_at, recs, SAMPLER_KEPT * sizeof(*recs));
	/* the offers that the records read stand for: counted after */
	if (proc_read_mem(pid, ctl + offsetof(struct sampler_ctl, kept_seen),
			  seen, 2 * sizeof(*seen)))
		memcpy(seen, c->kept_seen, 2 * sizeof(*seen));
	for (i = 0; i < SAMPLER_KEPT && !rc; i++) {
		struct sampler_rec *r = &recs[i];

		if (!r->ptr || (r->ptr & 1) || !r->size)
			continue;
		batch_add(b, pid, c, r, stacks, i, i >= SAMPLER_KEPT_SMALL, t,
			  d);
		if (b->n == BATCH)
			rc = flush_kept(pid, recs_at, b, uw, image, t, d);
	}
	if (!rc)
		rc = flush_kept(pid, recs_at, b, uw, image, t, d);
out:
	if (b)
		free(b->stacks);
	free(b);
	free(recs);
	return rc;
}

/* Does the table lie in one anonymous, private mapping, as memsnap
 * mapped it?  (The kernel may have merged it with a neighbour.) */
static bool table_mapped(const struct maps *maps, const struct sampler_ctl *c)
{
	size_t i;

	for (i = 0; i < maps->n; i++) {
		const struct map_entry *e = &maps->v[i];

		if (c->table < e->start || c->table >= e->end)
			continue;
		return !e->path && !e->shared && !e->inode &&
		       c->table_len <= e->end - c->table;
	}
	return false;
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
static int write_profile(FILE *out, const struct sampler_ctl *c,
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

int sampler_dump(pid_t pid, const struct maps *maps,
		 const struct sampler_status *st, FILE *out,
		 uint64_t max_bytes, struct sampler_dump *d)
{
	struct sampler_ctl *c = NULL;
	struct table t = { 0 };
	struct unwinder *uw = NULL;
	struct unwind_code code;
	uint64_t seen[2] = { 0, 0 };
	int rc;

	memset(d, 0, sizeof(*d));
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	rc = sampler_read_at(pid, st->image, &d->st, c);
	if (rc == -ENODATA)
		rc = -ENOENT;	/* never switched on: no records */
	if (rc)
		goto out;
	if (!c->table) {
		rc = -ENOENT;
		goto out;
	}
	if (!table_mapped(maps, c)) {
		rc = -EPROTO;
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
	/* the freed first: a block freed between the two reads is then
	 * counted in neither, not in both */
	rc = read_kept(pid, c, d->st.ctl, uw, d->st.image, &t, seen, d);
	if (!rc)
		rc = read_records(pid, c, uw, d->st.image, &t, d);
	if (!rc)
		rc = write_profile(out, c, maps, &t, max_bytes, seen, d);
	d->frames = t.frames;
	d->kept = t.used;
out:
	unwinder_free(uw);
	table_free(&t);
	free(c);
	return rc;
}
