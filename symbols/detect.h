#ifndef MEMSNAP_SYMBOLS_DETECT_H
#define MEMSNAP_SYMBOLS_DETECT_H

#include "symbols/linkmap.h"
#include "symbols/objects.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Which allocators a process holds, found by their symbols (never by file
 * name), and which one serves the process's malloc.
 *
 *   jemalloc   <P>mallctl with <P>mallctlnametomib and <P>malloc_stats_print
 *              in the same object, for any prefix P ("", "je_", "_rjem_")
 *   glibc      __libc_malloc with malloc_info
 *   tcmalloc   tc_malloc with MallocExtension_GetStats; "full" when the
 *              heap profiler (HeapProfilerStart) is there, else "minimal"
 *   mimalloc   mi_malloc with mi_stats_print_out
 */

enum alloc_kind {
	ALLOC_JEMALLOC,
	ALLOC_GLIBC,
	ALLOC_TCMALLOC,
	ALLOC_TCMALLOC_MINIMAL,
	ALLOC_MIMALLOC,
	ALLOC_KINDS	/* how many: every table of kinds is indexed by these */
};

#define ALLOC_MAX_FUNCS 8
#define ALLOC_MAX_PREFIX 64

struct alloc_func {
	const char *role;  /* unprefixed name: "mallctl", "malloc_info" */
	bool found;
	uint64_t addr;	   /* runtime address */
	enum sym_source source;
};

struct allocator {
	enum alloc_kind kind;
	char prefix[ALLOC_MAX_PREFIX];
	struct object *obj;
	struct alloc_func funcs[ALLOC_MAX_FUNCS];
	size_t nfuncs;
	uint64_t malloc_addr;	/* its own malloc entry point, 0 if none */
	bool serves_malloc;
	/* A jemalloc with <prefix>get_defrag_hint: Redis's own build, the
	 * one its active defragmentation works with (Debian's redis-server
	 * uses the system's libjemalloc, which has none). */
	bool defrag_hint;
};

struct detection {
	struct allocator *v;
	size_t n;
	struct search_order order;
	bool have_malloc;	/* the symbol malloc binds to: */
	struct symbol malloc_sym;
	bool malloc_musl;	/* ... is musl's: no control functions at all */
	/* No malloc_sym because this object, searched before the one that
	 * defines malloc, could not be read (its err says why). */
	struct object *malloc_unknown;
	size_t unreadable;	/* executable objects that could not be read */
};

/* Short stable name: "jemalloc", "glibc", "tcmalloc", "tcmalloc_minimal",
 * "mimalloc". */
const char *alloc_kind_name(enum alloc_kind kind);

/* Human name: "jemalloc", "glibc malloc", "gperftools tcmalloc (full)". */
const char *alloc_kind_title(enum alloc_kind kind);

/*
 * The allocator catalogue's names, for everyone who must tell an
 * allocator's code from its caller's (report, the fences, a sampler):
 * the malloc family's entry points by plain name ("malloc",
 * "posix_memalign", "sdallocx", ...), NULL after the last.
 */
const char *alloc_entry_point(size_t i);

/* @name is an entry point, bare or behind an allocator's prefix
 * ("je_calloc", "__libc_malloc", "mi_new"), or demangled with its
 * arguments ("malloc(unsigned long)"). */
bool alloc_is_entry_point(const char *name);

/* @name can only be an allocator's own: it starts with a prefix that
 * jemalloc, tcmalloc or mimalloc keep for themselves ("je_", "_rjem_",
 * "tc_", "mi_"; glibc's "__libc_" is shared with the rest of libc). */
bool alloc_is_internal(const char *name);

/*
 * Look at every executable object of @os.  0 (possibly with no allocator
 * found), -ENOMEM, or -errno from reading /proc (-EACCES, -ENOENT).
 */
int detect_allocators(struct objects *os, struct detection *out);

/* The allocator function @role of @a, or NULL if the kind has none. */
const struct alloc_func *allocator_func(const struct allocator *a,
					const char *role);

/* The allocator that serves malloc, or NULL if none of those found. */
const struct allocator *detection_serving(const struct detection *d);

void detection_free(struct detection *d);

#endif
