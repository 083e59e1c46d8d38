#ifndef MEMSNAP_PROC_MAPS_H
#define MEMSNAP_PROC_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/*
 * The memory map of a process, as /proc/PID/maps prints it (and as a
 * jemalloc heap profile repeats it under MAPPED_LIBRARIES:):
 *
 *   7f1c2a428000-7f1c2a59d000 r-xp 00028000 fd:00 1835123   /usr/lib/x86_64-linux-gnu/libc.so.6
 *   7ffd4c1f0000-7ffd4c1f2000 r-xp 00000000 00:00 0         [vdso]
 *   7f1c29e00000-7f1c2a000000 rw-p 00000000 00:00 0
 *   55d0c8a00000-55d0c8a02000 r--p 00000000 08:01 77      /tmp/x (deleted)
 *
 * The path is everything after the inode and its padding, so it may hold
 * spaces; a trailing " (deleted)" is taken off and sets @deleted.  The
 * text comes from the target (file names) or from a dump (anything), so
 * the parser accepts nothing it does not understand and never trusts a
 * length.
 */

#define MAP_PROT_READ 1u
#define MAP_PROT_WRITE 2u
#define MAP_PROT_EXEC 4u

struct map_entry {
	uint64_t start, end; /* [start, end) */
	uint64_t offset;     /* file offset of start */
	uint64_t inode;
	uint32_t dev_major, dev_minor;
	unsigned int prot; /* MAP_PROT_* */
	bool shared;	   /* 's' rather than 'p' */
	bool deleted;	   /* the kernel said " (deleted)" */
	const char *path;  /* NULL when anonymous; owned by struct maps */
};

struct maps {
	struct map_entry *v; /* sorted by start */
	size_t n;
	size_t malformed; /* lines that were not maps lines */
	/* private */
	size_t cap;
	char **paths;
	size_t npaths, paths_cap;
	bool unsorted;
};

/*
 * Parse one line (no newline needed; @len bytes, need not be
 * NUL-terminated) into @e.  The path is returned as a pointer into
 * @line and a length (@pathlen 0 when anonymous); @e->path is left NULL.
 * Returns 0 or -EINVAL.
 */
int maps_parse_line(const char *line, size_t len, struct map_entry *e,
		    const char **path, size_t *pathlen);

/* An empty map set, to be filled with maps_add().  NULL on ENOMEM. */
struct maps *maps_new(void);

/* Append a parsed entry, copying the path (shared with the previous entry
 * when equal).  0 or -ENOMEM. */
int maps_add(struct maps *m, const struct map_entry *e, const char *path,
	     size_t pathlen);

/* Sort if entries came out of order.  Call once after the last add. */
void maps_finish(struct maps *m);

/*
 * Read maps lines from @f until EOF.  Lines longer than a kernel maps line
 * and lines that do not parse are counted in @malformed and skipped.
 */
int maps_read_file(FILE *f, struct maps **out);

/* Parse a buffer of maps lines (for tests and dumps). */
int maps_parse_buf(const char *buf, size_t len, struct maps **out);

/* /proc/@pid/maps.  -ENOENT (no process), -EACCES, -ENOMEM. */
int maps_load(pid_t pid, struct maps **out);

/* The entry containing @addr, or NULL. */
const struct map_entry *maps_find(const struct maps *m, uint64_t addr);

/* true for "[vdso]", "[heap]", "[stack]" and other kernel pseudo paths. */
bool map_is_pseudo(const struct map_entry *e);

void maps_free(struct maps *m);

#endif
