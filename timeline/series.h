#ifndef MEMSNAP_TIMELINE_SERIES_H
#define MEMSNAP_TIMELINE_SERIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * A watch's series: what `memsnap watch` measured at every tick, in
 * DIR/series.tsv, one line written whole per tick so that a watch
 * killed at any moment leaves a series that reads:
 *
 *   # memsnap watch series 1
 *   # pid	4242
 *   # command	redis-server
 *   # started	1764162000123		(Unix time, ms)
 *   # interval_ms	30000
 *   # limit	1073741824		(cgroup memory.max; "none")
 *   # allocator	jemalloc
 *   # sampler	on		(only when the watch switched it on;
 *				 "found" when it was on already)
 *   t_ms	rss	heap_in_use	heap_free	metadata	heap	...
 *   0	52428800	31457280	...	-
 *   30002	53477376	32505856	...	dump-0001.heap
 *   # note	30002	the call did not finish in time
 *   # end	60004	target exited
 *   # sampler	off		(the watch switched it off again)
 *
 * A value not measured is "-".  t_ms is the time since the first tick.
 * The columns are read by their names on the "t_ms" line, so a series
 * written before a column was added reads, without it.
 * The file is read back as untrusted: a line is at most
 * SERIES_LINE_MAX bytes, every number is checked, times must rise, a
 * dump's name is a plain file name in DIR; a line that breaks a rule
 * is skipped and counted.
 */

enum series_col {
	COL_RSS,
	COL_HEAP_IN_USE,
	COL_HEAP_FREE,
	COL_METADATA,
	COL_HEAP,		/* in use + free + metadata, or the heap
				   as one part when they are not known apart */
	COL_RUNTIME,		/* a language runtime's heap */
	COL_STACKS,
	COL_ANON_OTHER,
	COL_SAMPLER,		/* memsnap's sampler in the process */
	COL_FILE,
	COL_SHMEM,
	COL_UNACCOUNTED,	/* signed */
	COL_SWAP,
	COL_THREADS,
	SERIES_COLS,
};

/* Beside the series: the last tick's whole `explain` answer, replaced
 * at every tick; read back at most this long. */
#define SERIES_EXPLAIN "explain.txt"
#define SERIES_EXPLAIN_MAX (64u << 10)

#define SERIES_LINE_MAX 1024
#define SERIES_NAME_MAX 64
#define SERIES_MAX_TICKS (1u << 20)

/* The column's name in the file and in JSON: "rss", "heap_in_use", ... */
const char *series_col_name(enum series_col c);

struct series_tick {
	uint64_t t_ms;
	int64_t v[SERIES_COLS];
	uint32_t known;			/* bit c: v[c] was measured */
	char dump[SERIES_NAME_MAX];	/* "" none */
};

struct series {
	int version;
	int pid;
	char command[64];
	char allocator[32];
	uint64_t started_ms;		/* Unix time of the first tick */
	uint64_t interval_ms;
	uint64_t limit;			/* 0: none or unknown */
	/* the watch switched memsnap's sampler on (--sampler), and off
	 * again at its end: on and not off, it may still be on */
	bool sampler_on, sampler_off;
	bool sampler_found;		/* it was on before the watch */
	struct series_tick *v;
	size_t n, cap;
	char end[128];			/* "" a watch that did not end (killed) */
	uint64_t end_ms;
	size_t notes;			/* "# note" lines */
	char last_note[160];
	size_t bad;			/* lines skipped */
	size_t dumps;
	/* private: the column of each field of a tick line, from the
	 * "t_ms" line (-1: a column this memsnap does not know) */
	signed char field_col[SERIES_COLS + 8];
	size_t nfields;			/* 0: that line not seen yet */
};

/* The header of a new series, as lines into @f. */
void series_write_header(FILE *f, const struct series *s);

/* Tick @t as one line (with its newline) into @buf: its length, or 0
 * when it does not fit. */
size_t series_format_tick(const struct series_tick *t, char *buf,
			  size_t size);

/*
 * Parse the @len bytes at @buf (not NUL-terminated) into @s.  0, or
 * -ENOMEM, or -EINVAL with the reason in @why (not a series: its first
 * line is not the header).  A last line without its newline (a watch
 * killed in its write) is left out.
 */
int series_parse(const char *buf, size_t len, struct series *s, char *why,
		 size_t why_size);

void series_free(struct series *s);

/* Is @name a dump's name memsnap writes there (dump-NNNN.heap)? */
bool series_dump_name_ok(const char *name);

#endif
