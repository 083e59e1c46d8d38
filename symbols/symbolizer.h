#ifndef MEMSNAP_SYMBOLS_SYMBOLIZER_H
#define MEMSNAP_SYMBOLS_SYMBOLIZER_H

#include "proc/maps.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Address -> function, inline frames and file:line for a process that
 * may be gone, known only by its maps (a dump's MAPPED_LIBRARIES).  One
 * libdwfl session per symbolizer: every executable object of the maps is
 * found under @root ("/" when NULL; a container's filesystem otherwise),
 * opened beneath it (no symlink, a regular file only), and reported to
 * libdwfl at the address the maps say.  Separate debuginfo is found by
 * memsnap, not libdwfl, by build-id and .gnu_debuglink beside the object
 * and under ROOT/usr/lib/debug, beneath the root too and checked
 * (symbols/debuginfo.c); libdwfl reads .gnu_debugdata; debuginfod only
 * runs when the environment asks for it (DEBUGINFOD_URLS).  Every file
 * comes through one opener (symbols/opener.h), libdwfl opening none
 * itself: in report's sandbox the opener asks memsnap.
 *
 * Names are demangled (symbols/demangle.h).  An address that no symbol
 * covers is named "object+0xoffset" (the object's basename and its
 * link-time address, or the file offset when the file is missing),
 * never after the nearest symbol below it.  An address outside every
 * object is "0x<hex>".
 *
 * Everything returned stays valid until symbolizer_free(); strings are
 * interned, so two equal names are the same pointer.
 */

struct dwsym_frame {
	const char *name;	/* function, object+0xoffset or 0x.. */
	const char *file;	/* source file, NULL if unknown */
	unsigned int line;	/* 0 if unknown */
	bool resolved;		/* @name is a function name */
	bool inlined;		/*
 * The outermost "frame" of a stack that was cut before the thread's
 * start (memsnap's sampler kept too little of it, or the unwinder
 * stopped): no pc is ever there (the kernel's half), and the
 * symbolizer names it SYM_TRUNCATED_NAME.
 */
#define SYM_PC_TRUNCATED 0xfffffffffffff000ull
#define SYM_TRUNCATED_NAME "[truncated]"

/* inlined into the frame after it */
};

struct dwsym_module {
	const char *path;	/* as the maps say */
	const char *base;	/* its basename */
	uint64_t start, limit;	/* span of its mappings */
	uint64_t file_offset;	/* of the lowest mapping */
	char build_id[2 * 64 + 1];	/* hex, "" if none or unread */
	int err;		/* 0, or -errno why it could not be read */
	bool mismatch;		/* the file on disk is not the one mapped */
	bool debuginfo;		/* DWARF found (file:line, inlines) */
	bool allocator;		/* defines an allocator's API (detect.h) */
	bool executable;	/* a program (PT_INTERP or ET_EXEC), not a
				 * library */
	size_t used;		/* lookups that landed in it */
	size_t unnamed;		/* ... and found no name there */
};

struct dwsym_loc {
	uint64_t pc;		/* as given */
	int module;		/* index into the modules, -1 if none */
	const struct dwsym_frame *frames;	/* innermost first */
	unsigned int nframes;	/* >= 1 */
};

struct symbolizer;

/*
 * A symbolizer for the objects of @m (which must outlive it).  Objects
 * that cannot be read are remembered (dwsym_module.err), not fatal.
 * 0 or -ENOMEM.
 */
int symbolizer_new(const struct maps *m, const char *root,
		   struct symbolizer **out);

struct opener;

/*
 * The same, with every file (object, debuginfo candidate, debuginfod)
 * coming through @op (symbols/opener.h), which must outlive the
 * symbolizer; @root is only the name the files are known by in messages
 * ("/" when NULL).  symbolizer_new() is this with opener_local_new().
 */
int symbolizer_new_with(const struct maps *m, const char *root,
			struct opener *op, struct symbolizer **out);

/*
 * What is at @pc.  @caller: @pc is a return address (every frame but a
 * stack's first), so the call instruction before it is looked up.
 * Cached.  0 or -ENOMEM.
 */
int symbolizer_lookup(struct symbolizer *s, uint64_t pc, bool caller,
		      const struct dwsym_loc **out);

/* The modules, in address order. */
size_t symbolizer_modules(const struct symbolizer *s,
			  const struct dwsym_module **v);

/* A copy of @str kept as long as @s, equal strings at equal addresses.
 * NULL on ENOMEM. */
const char *symbolizer_intern(struct symbolizer *s, const char *str);

void symbolizer_free(struct symbolizer *s);

#endif
