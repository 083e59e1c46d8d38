#ifndef MEMSNAP_ALLOCATORS_JEMALLOC_H
#define MEMSNAP_ALLOCATORS_JEMALLOC_H

#include "injector/inject.h"
#include "symbols/detect.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * jemalloc's mallctl() called inside the target through a borrowed
 * thread (injector/inject.h), every value marshalled in buffers on that
 * thread's stack, nothing allocated in the target:
 *
 *   int mallctl(const char *name, void *oldp, size_t *oldlenp,
 *               void *newp, size_t newlen);
 *
 * Any number of these run in one inject session (one attach).  Every
 * function returns 0, -EREMOTEIO when mallctl ran and returned an error
 * (then jemalloc_error() is that error), or -errno from the engine.
 * mallctl's errors (docs/DESIGN.md, "Allocators"):
 *
 *   ENOENT  unknown name, compiled out, or profiling off (opt.prof false)
 *   EPERM   read of a write-only or write of a read-only name
 *   EINVAL  size mismatch (the value's type differs in this version)
 *   EFAULT  prof.dump could not write the file
 *   EAGAIN  resources temporarily unavailable
 */

/* MALLCTL_ARENAS_ALL: "all arenas" in arena.<i>.* and stats.arenas.<i>.*
 * names since 5.0 (before, <i> = narenas meant all of them). */
#define JEMALLOC_ARENAS_ALL 4096

struct jemalloc {
	struct inject_session *s;
	pid_t pid;
	uint64_t mallctl;	/* runtime address of <prefix>mallctl */
	char prefix[ALLOC_MAX_PREFIX];
	int err;		/* mallctl's error after -EREMOTEIO */
};

/* 0, or -ENOENT when @a has no mallctl. */
int jemalloc_init(struct jemalloc *je, struct inject_session *s, pid_t pid,
		  const struct allocator *a);

int jemalloc_read_bool(struct jemalloc *je, const char *name, bool *out);
int jemalloc_read_size(struct jemalloc *je, const char *name, uint64_t *out);
int jemalloc_read_unsigned(struct jemalloc *je, const char *name,
			   unsigned int *out);
/* A "const char *" value, copied from the target into @buf. */
int jemalloc_read_string(struct jemalloc *je, const char *name, char *buf,
			 size_t size);

/* Write @val; the previous value to *@old if @old is not NULL. */
int jemalloc_write_bool(struct jemalloc *je, const char *name, bool val,
			bool *old);
int jemalloc_write_size(struct jemalloc *je, const char *name, uint64_t val);
/*
 * Write a "const char *" (prof.dump, prof.prefix): the string and the
 * pointer to it both go into the borrowed stack.  -E2BIG if it does not
 * fit there.
 */
int jemalloc_write_string(struct jemalloc *je, const char *name,
			  const char *val);
/* A name that acts without a value (prof.reset, prof.dump to the
 * default file). */
int jemalloc_write_void(struct jemalloc *je, const char *name);

/* Refresh the statistics snapshot (write "epoch"). */
int jemalloc_epoch(struct jemalloc *je);

static inline int jemalloc_error(const struct jemalloc *je)
{
	return je->err;
}

/* mallctl's error @err in words, for the name @name. */
const char *jemalloc_strerror(int err, const char *name);

/*
 * The environment variable this jemalloc reads its options from: the
 * upper-cased prefix + "MALLOC_CONF" ("MALLOC_CONF", "_RJEM_MALLOC_CONF",
 * "JE_MALLOC_CONF").
 */
void jemalloc_conf_var(const char *prefix, char *buf, size_t size);

#endif
