#ifndef MEMSNAP_TESTS_LIB_PROCSNAP_H
#define MEMSNAP_TESTS_LIB_PROCSNAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * What `prof off` must put back, taken from a live process without
 * memsnap's code (/proc/PID/maps, /proc/PID/mem, readelf): its file
 * mappings with their permissions, its program's code, and the GOT
 * slots of the functions the sampler hooks.  Take one before, one
 * after, and compare.  Every function fails the current Criterion test
 * when a step of its own fails.
 */

#define MAX_MAPPINGS 1024
#define MAX_SLOTS 512

/* The file mappings of a process, from /proc/PID/maps. */
struct maps_snap {
	struct {
		uint64_t start, end, off;
		char perms[8];
		char path[256];
	} v[MAX_MAPPINGS];
	size_t n;
};

void maps_take(pid_t pid, struct maps_snap *m);

/*
 * Every byte of every file mapping of @before is mapped in @after from
 * the same file with the same permissions: no page left writable (or
 * made read-only) by the GOT swap.  Compared by address range, so a
 * mapping split by mprotect and merged again still matches.
 */
void assert_same_perms(const struct maps_snap *before,
		       const struct maps_snap *after, const char *when);

/* The program's code: its r-x mapping, as /proc/PID/mem reads it. */
struct text_snap {
	uint64_t start;
	size_t len;
	unsigned char *bytes;	/* text_free() */
};

void text_take(pid_t pid, struct text_snap *t);
void text_free(struct text_snap *t);

/* Byte for byte the same code: every patched entry point put back. */
void assert_same_text(const struct text_snap *a, const struct text_snap *b,
		      const char *when);

/* The GOT slots of the functions the sampler hooks, and their values. */
struct got_snap {
	struct {
		char obj[256];
		char name[96];
		uint64_t addr, value;
		uint64_t lo, hi;	/* the span of the object's mappings */
		uint64_t plt_lo, plt_hi; /* its .plt, where lazy slots point */
	} v[MAX_SLOTS];
	size_t n;
};

/*
 * Every hooked GOT slot of every object of @pid with its value, found
 * without memsnap's code: the lowest offset-0 mapping of each file
 * minus its first PT_LOAD's page (readelf -lW), plus each JUMP_SLOT or
 * GLOB_DAT relocation's offset (readelf -rW), read from /proc/PID/mem.
 * The fixture calls every hooked function before its ready line, so
 * lazy binding does not change the executable's slots between two
 * snapshots; a library's own lazy slot may still be bound meanwhile
 * (assert_same_got() allows that one change).
 */
void got_take(pid_t pid, struct got_snap *g);

/*
 * Every slot of @before holds the same value in @after, but for the one
 * change a program makes itself: a lazy slot (pointing into its own
 * object's .plt) bound by the loader to a function (of a file-backed
 * object, never a hook), which AArch64's libc does the first time it
 * calls free itself.
 */
void assert_same_got(const struct got_snap *before,
		     const struct got_snap *after, const char *when);

#endif
