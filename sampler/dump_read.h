#ifndef MEMSNAP_SAMPLER_DUMP_READ_H
#define MEMSNAP_SAMPLER_DUMP_READ_H

/*
 * Reading the sampler's records back from the target for a dump
 * (sampler/dump.c): each record from the chunks of the pool its head
 * names, every chunk index checked against the pool, its stack no
 * longer than the slice memsnap set, and the record read again after
 * its stack, so that one changed meanwhile is passed over.  Batches of
 * BATCH records, read in a few process_vm_readv calls.
 */
#include "injector/unwind.h"
#include "proc/procfs.h"
#include "sampler/dump_table.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Frames of a record's unwind, at most. */
#define FRAMES_MAX 128
/* Records unwound at a time (the unwinder's round trip). */
#define BATCH 16u

/* Where the parts of @c's table are, for reading it back. */
struct where {
	uint64_t keys, heads, kept, pool, nchunks, chunk_bytes;
};

/* A record to read: its first chunk, the block it must name (0: a kept
 * one, whose block is gone), its part of the reservoir (-1: live), and
 * for a kept one its slot as read. */
struct cand {
	uint64_t head, want;
	int part;
	uint64_t slot;
	struct sampler_kept seen;
};

/* The last record unwound: its registers, stack copy and frames. */
struct last_unwind {
	uint64_t regs[SAMPLER_REGS_SAVED];
	unsigned char *stack;		/* a stack slice */
	size_t stack_len;
	uint64_t raw[FRAMES_MAX];
	int n;
	bool whole, valid;
};

/* Pieces a batch reads at most in one go: a stack's chunks past its
 * record's, for every record of a batch. */
#define PIECES (BATCH * SAMPLER_REC_CHUNKS)

struct batch {
	struct cand cand[BATCH];	/* to read */
	size_t ncand;
	/* read, to unwind */
	struct unwind_saved sv[BATCH];
	struct unwind_out out[BATCH];
	struct sampler_rec rec[BATCH];
	int part[BATCH];		/* of the reservoir, or -1: live */
	size_t n;
	unsigned char *stacks;		/* BATCH stack slices */
	unsigned char *chunks;		/* BATCH first chunks */
	struct proc_piece from[PIECES], to[PIECES];
	int owner[PIECES];
	bool ok[BATCH];
	struct sampler_rec again[BATCH];
	struct sampler_kept now[BATCH];
	uint64_t raw[BATCH][FRAMES_MAX];
	struct last_unwind last;	/* of the batch before */
};

/* Where the parts of @c's table are. */
struct where where_of(const struct sampler_ctl *c);

/* A batch with room for BATCH stacks of @c's slice and BATCH chunks,
 * or NULL. */
struct batch *batch_new(const struct sampler_ctl *c);
void batch_free(struct batch *b);

/*
 * The candidates of @b (b->cand, b->ncand) read: their records, their
 * stacks (none once @d's budget is spent; the bytes read counted in
 * @t), the records again; those that read whole become @b's records to
 * unwind (b->n), each with its stack's slice.  b->ncand is 0 after.
 */
void read_batch(pid_t pid, const struct sampler_ctl *c, const struct where *w,
		struct batch *b, struct table *t, const struct sampler_dump *d);

#endif
