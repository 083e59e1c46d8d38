#ifndef MEMSNAP_PROC_RUNTIME_H
#define MEMSNAP_PROC_RUNTIME_H

#include "proc/maps.h"
#include "proc/smaps.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A language runtime in a process, and what memsnap can learn of its
 * heap from outside, never calling into it: for explain, whose part
 * "runtime" is its memory.  symbols/runtime.c finds the runtime by its
 * objects' symbols and reads what its symbols and version make
 * readable (Go's runtime.memstats, CPython's arena count); this folder
 * reads what needs no symbols: the JVM's performance counters (the
 * hsperfdata file it maps, what jstat reads: proc/hsperf.c) and where
 * Go's heap arenas are (runtime_claims()).  Every byte of it is the
 * target's: bounded, checked, never trusted to be right.
 */

enum runtime_kind {
	RUNTIME_NONE,
	RUNTIME_GO,
	RUNTIME_JVM,
	RUNTIME_CPYTHON,
	RUNTIME_NODE,
	RUNTIME_DOTNET,
	RUNTIMES
};

/* Its own numbers, in bytes, each where its have_ flag says it was
 * read. */
struct runtime_stats {
	/* The JVM's (hsperfdata): the Java heap's spaces, summed */
	bool have_heap;
	uint64_t heap_used, heap_committed, heap_max;
	bool have_metaspace;
	uint64_t metaspace_used, metaspace_committed;
	char collector[32];	/* sun.gc.policy.name: "GarbageFirst" */
	/* Go's (runtime.memstats): spans holding objects (HeapInuse),
	 * the live objects in them (HeapAlloc), idle heap kept
	 * (HeapIdle - HeapReleased), given back (HeapReleased),
	 * goroutine stacks (StackInuse), all the heap holds (committed) */
	bool have_go;
	uint64_t go_inuse, go_alloc, go_idle, go_released, go_stacks,
		go_committed;
	/* CPython's pymalloc: its arenas (objects of up to 512 bytes) */
	bool have_arenas;
	uint64_t arenas, arena_size;
};

struct runtime_info {
	enum runtime_kind kind;
	char version[48];	/* "go1.19.8", "17.0.15+6", "3.11", "" */
	char object[96];	/* where it was found (a path's last part) */
	/* Why its own numbers could not be read ("" read, or none
	 * readable for this runtime) */
	char why[160];
	/* Settings it was started with that bound its heap, from its
	 * environment (GOMEMLIMIT=..., GOGC=..., PYTHONMALLOC=...) */
	char settings[160];
	struct runtime_stats st;
};

/* "go", "jvm", "cpython", "node", "dotnet"; "" for none. */
const char *runtime_name(enum runtime_kind k);

/* "Go", "the JVM", "CPython", "Node.js (V8)", ".NET"; "" for none. */
const char *runtime_title(enum runtime_kind k);

/*
 * The mappings of @m that a runtime's heap holds, claimed for it into
 * @out (at most @max): Go's heap arenas, which the runtime maps from
 * fixed hints up (0x00c000000000, then i << 40 above it on 64-bit), each
 * chain of adjacent mappings from a hint.  The other runtimes name no
 * place of theirs: none.  How many.
 */
size_t runtime_claims(const struct runtime_info *rt,
		      const struct proc_memory *m, struct smap_claim *out,
		      size_t max);

/*
 * The settings @rt's runtime reads from its environment that bound or
 * show its heap (GOMEMLIMIT, GOGC, GODEBUG; PYTHONMALLOC,
 * PYTHONTRACEMALLOC; NODE_OPTIONS; DOTNET_GCHeapHardLimit, ...), as
 * the process started with them, read through @proc_fd (a /proc/PID
 * directory proven to be it) into @rt->settings: "GOGC=50 GOMEMLIMIT=1GiB".
 */
void runtime_settings_at(int proc_fd, struct runtime_info *rt);

/* ---- the JVM's performance counters (proc/hsperf.c) ---------------------- */

/* The most of a hsperfdata file read (the JVM's default is 32 KiB,
 * -XX:PerfDataMemorySize). */
#define HSPERF_MAX (1u << 20)

/*
 * Parse the @len bytes of a hsperfdata file (any bytes) into @rt's
 * stats and version: the prologue (magic 0xcafec0c0, byte order,
 * version 2, the entries' offset and count), then each entry's name,
 * type and value, all bounded by @len.  0, or -EINVAL for what is not
 * one (then nothing was set).
 */
int hsperf_parse(const void *buf, size_t len, struct runtime_info *rt);

/*
 * The hsperfdata the JVM of @maps maps (a shared file mapping of
 * ".../hsperfdata_USER/PID"), read from the process's memory through
 * @proc_fd's "mem" (a /proc/PID directory proven to be it), and
 * parsed.  No file is opened: what the target mapped is read.  0,
 * -ENOENT when it maps none (-XX:-UsePerfData), or -errno.
 */
int hsperf_read_at(int proc_fd, const struct maps *maps,
		   struct runtime_info *rt);

#endif
