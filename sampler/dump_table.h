#ifndef MEMSNAP_SAMPLER_DUMP_TABLE_H
#define MEMSNAP_SAMPLER_DUMP_TABLE_H

/*
 * What a dump counts (sampler/dump.c reads and unwinds the records):
 * each distinct stack kept once, each (stack, size) pair counted, and
 * the jemalloc heap_v2 profile written from them.
 */
#include "common/hidx.h"
#include "sampler/internal.h"

#include <stdint.h>
#include <stdio.h>

/* Distinct frames kept by one dump, at most (16 MiB). */
#define DUMP_KEPT (2u << 20)

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
	uint64_t alloc;		/* what they stand for (table_write_profile()) */
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


/* The index of stack @pcs (@depth frames) in *@id, added if new.  0,
 * -ENOMEM, or -E2BIG when it would pass DUMP_KEPT frames (a stack of
 * one frame never does: at most one a record, NRECS_MAX). */
int table_intern(struct table *t, const uint64_t *pcs, uint32_t depth,
		 uint32_t *id);

/* One record of stack @stack and @size counted; @part: its part of the
 * reservoir of freed samples, or -1: a live record.  0 or -ENOMEM. */
int table_count(struct table *t, uint32_t stack, uint64_t size, int part);

void table_free(struct table *t);

/* The profile out of @t, the control block @c and the process's
 * mappings @maps; @seen: the offers each part of the reservoir counted.
 * 0, -EIO, or -EFBIG once it passes @max_bytes. */
int table_write_profile(FILE *out, const struct sampler_ctl *c,
			const struct maps *maps, struct table *t,
			uint64_t max_bytes, const uint64_t seen[2],
			struct sampler_dump *d);

#endif
