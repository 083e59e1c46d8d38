#ifndef MEMSNAP_EXPLAIN_EXPLAIN_INTERNAL_H
#define MEMSNAP_EXPLAIN_EXPLAIN_INTERNAL_H

/*
 * What the findings share between findings.c (the allocator's, the
 * kernel's and the verdict) and runtime.c (a language runtime's).
 */
#include "explain/explain.h"

#include <stddef.h>
#include <stdint.h>

/* A new finding @id of @bytes at stake in @e, its text and remedy
 * empty; NULL when @e holds EXPLAIN_MAX_FINDINGS already. */
struct explain_finding *finding_add(struct explain *e, const char *id,
				    uint64_t bytes);

/* Append to the string @buf of @size bytes, cut where it is full. */
void say(char *buf, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* @b in words ("12.5 MiB"), in one of eight buffers used in turn:
 * several per line. */
const char *hb(uint64_t b);

/* The findings of memory that is not the allocator's (mappings.c): the
 * program's own, thread stacks, files, shared memory, huge pages. */
void on_huge_pages(const struct explain_input *in, struct explain *e);
void on_thread_stacks(const struct explain_input *in, struct explain *e);
void on_anon_other(const struct explain_input *in, struct explain *e);
void on_file(const struct explain_input *in, struct explain *e);
void on_shmem(const struct explain_input *in, struct explain *e);

/* What explain knows of a few servers' own memory (mappings.c), by
 * @in's process name: what its own anonymous memory ("InnoDB's buffer
 * pool, ...") and its shared memory usually are, and the settings that
 * size them (any may be NULL); NULL for a program it does not know. */
struct program;
const struct program *program_of(const struct explain_input *in);

/* The largest anonymous and shared mappings of @in into @e->top, each
 * with the part its memory went to, under @c (@nc claims). */
void explain_top(const struct explain_input *in, const struct smap_claim *c,
		 size_t nc, struct explain *e);

/* The largest mapping of @e's top that went to part @as, or NULL. */
const struct explain_mapping *top_as(const struct explain *e, const char *as);

/* The runtime finding of @in's language runtime (runtime.c). */
void on_runtime(const struct explain_input *in, struct explain *e);

/* "the JVM 17.0.15+6" and the like, the runtime of @in, into @buf. */
void runtime_words(const struct explain_input *in, char *buf, size_t size);

#endif
