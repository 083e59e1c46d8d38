/*
 * Reading the sampler's records back for a dump (sampler/dump_read.h).
 */
#include "sampler/dump_read.h"

#include <stdlib.h>
#include <string.h>

/* The registers of a record, numbered for the unwinder. */
static const unsigned char reg_nums[SAMPLER_REGS_SAVED] = SAMPLER_REG_NUMS;

struct where where_of(const struct sampler_ctl *c)
{
	return (struct where){
		.keys = c->table,
		.heads = c->table + sampler_heads_off(c->nrecs),
		.kept = c->table + sampler_kept_off(c->nrecs),
		.pool = c->table + sampler_pool_off(c->nrecs),
		.nchunks = sampler_nchunks(c->nrecs),
		.chunk_bytes = sampler_chunk_bytes(c->stack_bytes),
	};
}

/* A batch with room for BATCH stacks of @c's slice and BATCH chunks. */
struct batch *batch_new(const struct sampler_ctl *c)
{
	struct batch *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->stacks = malloc((size_t)BATCH * c->stack_bytes);
	b->chunks = malloc((size_t)BATCH * sampler_chunk_bytes(c->stack_bytes));
	b->last.stack = malloc(c->stack_bytes);
	if (!b->stacks || !b->chunks || !b->last.stack) {
		free(b->stacks);
		free(b->chunks);
		free(b->last.stack);
		free(b);
		return NULL;
	}
	return b;
}

void batch_free(struct batch *b)
{
	if (!b)
		return;
	free(b->stacks);
	free(b->chunks);
	free(b->last.stack);
	free(b);
}

/* @n pieces of @b read, PROC_PIECES_MAX a call; where a call falls
 * short, each of its pieces alone, and a piece that cannot be read
 * clears its owner's ok. */
static void read_pieces(pid_t pid, struct batch *b, size_t n)
{
	size_t i, k, m;

	for (i = 0; i < n; i += m) {
		m = n - i < PROC_PIECES_MAX ? n - i : PROC_PIECES_MAX;
		if (!proc_read_pieces(pid, b->from + i, b->to + i, m))
			continue;
		for (k = i; k < i + m; k++)
			if (proc_read_mem(pid, b->from[k].addr,
					  (void *)(uintptr_t)b->to[k].addr,
					  b->to[k].len))
				b->ok[b->owner[k]] = false;
	}
}

/* Is @r, read from chunk @head, a record memsnap would have written? */
static bool rec_sane(const struct sampler_rec *r, uint64_t head,
		     const struct where *w, const struct sampler_ctl *c)
{
	uint32_t i;

	if (!r->size || !r->nchunks || r->nchunks > SAMPLER_REC_CHUNKS ||
	    r->chunk[0] != head)
		return false;
	for (i = 0; i < r->nchunks; i++)
		if (!r->chunk[i] || r->chunk[i] >= w->nchunks)
			return false;
	return r->stack_len <= c->stack_bytes &&
	       r->stack_len <= r->nchunks * w->chunk_bytes - SAMPLER_REC_BYTES;
}

/* The first chunk of each candidate of @b, and each record in it that
 * is sane and names the block asked for, with the first piece of its
 * stack (none once a budget is spent). */
static void read_heads(pid_t pid, const struct sampler_ctl *c,
		       const struct where *w, struct batch *b,
		       const struct sampler_dump *d)
{
	uint64_t cb = w->chunk_bytes, first = cb - SAMPLER_REC_BYTES, k;
	struct sampler_rec *r;

	for (k = 0; k < b->ncand; k++) {
		b->from[k] = (struct proc_piece){
			w->pool + b->cand[k].head * cb, cb };
		b->to[k] = (struct proc_piece){
			(uint64_t)(uintptr_t)(b->chunks + k * cb), cb };
		b->owner[k] = (int)k;
		b->ok[k] = b->cand[k].head && b->cand[k].head < w->nchunks;
	}
	read_pieces(pid, b, b->ncand);
	for (k = 0; k < b->ncand; k++) {
		r = &b->rec[k];
		memcpy(r, b->chunks + k * cb, sizeof(*r));
		b->ok[k] = b->ok[k] && rec_sane(r, b->cand[k].head, w, c) &&
			   (!b->cand[k].want || r->ptr == b->cand[k].want);
		if (d->spent)
			r->stack_len = 0;
		memcpy(b->stacks + k * c->stack_bytes,
		       b->chunks + k * cb + SAMPLER_REC_BYTES,
		       r->stack_len < first ? r->stack_len : first);
	}
}

/* The rest of each stack of @b, its chunks past the record's. */
static void read_stacks(pid_t pid, const struct sampler_ctl *c,
			const struct where *w, struct batch *b,
			struct table *t)
{
	uint64_t cb = w->chunk_bytes, first = cb - SAMPLER_REC_BYTES;
	uint64_t k, left, at;
	size_t n = 0;
	uint32_t i;

	for (k = 0; k < b->ncand; k++) {
		const struct sampler_rec *r = &b->rec[k];

		if (!b->ok[k] || r->stack_len <= first)
			continue;
		at = (uint64_t)(uintptr_t)(b->stacks + k * c->stack_bytes) +
		     first;
		left = r->stack_len - first;
		for (i = 1; left; i++, n++) {
			b->from[n].addr = w->pool + r->chunk[i] * cb;
			b->from[n].len = left < cb ? left : cb;
			b->to[n] = (struct proc_piece){ at, b->from[n].len };
			b->owner[n] = (int)k;
			at += b->from[n].len;
			left -= b->from[n].len;
		}
	}
	read_pieces(pid, b, n);
	for (k = 0; k < b->ncand; k++)
		if (b->ok[k])
			t->stack_read += b->rec[k].stack_len;
}

/* Each record of @b read again, and a kept one's slot: one that changed
 * while it was read (freed, kept, taken again) is passed over. */
static void read_again(pid_t pid, const struct where *w, struct batch *b)
{
	size_t k, n = 0;

	for (k = 0; k < b->ncand; k++) {
		if (!b->ok[k])
			continue;
		b->from[n] = (struct proc_piece){
			w->pool + b->cand[k].head * w->chunk_bytes,
			sizeof(b->again[k]) };
		b->to[n] = (struct proc_piece){
			(uint64_t)(uintptr_t)&b->again[k],
			sizeof(b->again[k]) };
		b->owner[n++] = (int)k;
		if (b->cand[k].part < 0)
			continue;
		b->from[n] = (struct proc_piece){
			w->kept + b->cand[k].slot * sizeof(b->now[k]),
			sizeof(b->now[k]) };
		b->to[n] = (struct proc_piece){
			(uint64_t)(uintptr_t)&b->now[k], sizeof(b->now[k]) };
		b->owner[n++] = (int)k;
	}
	read_pieces(pid, b, n);
	for (k = 0; k < b->ncand; k++)
		b->ok[k] = b->ok[k] &&
			   !memcmp(&b->again[k],
				   b->chunks + k * w->chunk_bytes,
				   sizeof(b->again[k])) &&
			   (b->cand[k].part < 0 ||
			    (b->now[k].seq == b->cand[k].seen.seq &&
			     b->now[k].head == b->cand[k].seen.head));
}

/*
 * The candidates of @b read (their records, their stacks, the records
 * again) and those that read whole made @b's records to unwind, each
 * with its stack's slice.
 */
void read_batch(pid_t pid, const struct sampler_ctl *c,
		       const struct where *w, struct batch *b,
		       struct table *t, const struct sampler_dump *d)
{
	size_t k;

	read_heads(pid, c, w, b, d);
	read_stacks(pid, c, w, b, t);
	read_again(pid, w, b);
	for (b->n = k = 0; k < b->ncand; k++) {
		if (!b->ok[k])
			continue;
		b->rec[b->n] = b->rec[k];
		b->sv[b->n] = (struct unwind_saved){
			.regs = b->rec[b->n].regs, .regnums = reg_nums,
			.nregs = SAMPLER_REGS_SAVED,
			.stack_lo = b->rec[b->n].regs[SAMPLER_REG_SP],
			.stack = b->stacks + k * c->stack_bytes,
			.stack_len = b->rec[b->n].stack_len,
		};
		b->out[b->n] = (struct unwind_out){ .pcs = b->raw[b->n] };
		b->part[b->n++] = b->cand[k].part;
	}
	b->ncand = 0;
}
