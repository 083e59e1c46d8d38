#ifndef MEMSNAP_ALLOCATORS_ALLOCATOR_INTERNAL_H
#define MEMSNAP_ALLOCATORS_ALLOCATOR_INTERNAL_H

#include "allocators/allocator.h"

#include <stdarg.h>

/*
 * Between allocator.c (the session, the dispatch) and the backends.  A
 * backend implements the operations its caps promise; allocator.c checks
 * the caps first, so a NULL op is never called.
 */

#define ALLOC_MAX_RANGES 64

struct alloc_session {
	pid_t pid;
	struct objects *os;
	const struct detection *det;
	struct inject_session *inj;
	struct inject_range ranges[ALLOC_MAX_RANGES];
	char range_what[ALLOC_MAX_RANGES][96];
	size_t nranges;
	int alloc_errno;	/* the allocator's own error, or 0 */
	char why[512];
	char hint[512];
};

struct alloc_backend {
	enum alloc_kind kind;
	unsigned int caps;
	int (*dump)(struct alloc_session *s, const struct allocator *a,
		    const char *path);
	int (*prof)(struct alloc_session *s, const struct allocator *a,
		    enum alloc_prof_op op, uint64_t arg,
		    struct alloc_prof_result *res);
	int (*state)(struct alloc_session *s, const struct allocator *a,
		     struct alloc_state *st);
};

extern const struct alloc_backend jemalloc_backend;

/* Set alloc_why() / alloc_hint(). */
void alloc_set_why(struct alloc_session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void alloc_set_hint(struct alloc_session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Append an item to @st; NULL when full. */
struct alloc_item *alloc_state_add(struct alloc_state *st, const char *key,
				   enum alloc_item_type type);

#endif
