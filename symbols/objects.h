#ifndef MEMSNAP_SYMBOLS_OBJECTS_H
#define MEMSNAP_SYMBOLS_OBJECTS_H

#include "symbols/elf.h"
#include "proc/maps.h"
#include "proc/procinfo.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * The ELF objects a process has mapped, found from its maps, and the two
 * directions of symbol lookup over them:
 *
 *   name    -> runtime address   object_lookup()
 *   address -> object, symbol    objects_symbolize()
 *
 * Objects are opened lazily and only through paths that cannot be
 * redirected: for a live process /proc/PID/map_files/START-END (the very
 * file mapped, even if deleted or replaced on disk), else the path
 * resolved inside /proc/PID/root with openat2(RESOLVE_IN_ROOT), and then
 * checked to be the mapped file (device and inode, or the build-id in the
 * target's memory).  Nothing but regular files is ever opened: each path
 * is resolved to an O_PATH descriptor first, which opens nothing, and a
 * device, FIFO or socket there is refused (open_regular_in_root()).
 * A dump's objects, with no process, may come through an opener instead
 * (symbols/opener.h): report's sandbox asks memsnap for them.
 */

struct opener;

struct object_source {
	pid_t pid;	/* > 0: a live process */
	int root_fd;	/* pid == 0: the directory paths resolve beneath
			 * (the caller's, open while the objects are; -1:
			 * none, no object can be opened) */
	/* pid == 0: when set, paths are opened through it instead of
	 * beneath @root_fd (symbols/opener.h; it must outlive the
	 * objects) */
	struct opener *opener;
};

struct object {
	const char *path; /* as the maps say; owned by the maps */
	bool deleted;
	uint32_t dev_major, dev_minor;
	uint64_t inode;
	uint64_t lo, hi;	 /* span of all its mappings */
	/* Span of its executable mappings (0, 0: none).  Narrower than
	 * lo..hi: on arm64 the vDSO lands in the gap between ld.so's text
	 * and data, and its signal trampoline is not the loader's code. */
	uint64_t text_lo, text_hi;
	uint64_t map_start;	 /* its lowest mapping ... */
	uint64_t map_end;
	uint64_t map_offset;	 /* ... and that mapping's file offset */
	bool exec;		 /* some mapping is executable */
	/* Set by object_open(). */
	bool tried;
	int err;		 /* 0, or why it could not be opened */
	struct elfobj *elf;
	uint64_t bias;		 /* runtime = bias + link-time address */
	const char *via;	 /* "map_files", "root" or "path" */
};

struct objects {
	struct object *v; /* in address order */
	size_t n;
	struct object_source src;
	uint64_t page_size;
	/* private: the aux vector, read once (objects_auxv()) */
	struct proc_auxv auxv;
	int auxv_rc;
	bool auxv_read;
};

/*
 * The process's aux vector, read at the first call and kept: the link
 * map and the allocator fences both need it.  0, or the read's -errno
 * (a dump's objects, with no process: -ENOENT).
 */
int objects_auxv(struct objects *os, const struct proc_auxv **out);

struct symbol {
	struct object *obj;
	const char *name;    /* NULL when no symbol covers the address */
	uint64_t addr;	     /* runtime address of the symbol */
	uint64_t size;
	uint64_t offset;     /* query - addr, or query - obj->bias if no name */
	unsigned char type;  /* STT_* */
	enum sym_source source;
};

/* Group the file-backed mappings of @m into objects.  @m must outlive
 * the result.  0 or -ENOMEM. */
int objects_new(const struct maps *m, const struct object_source *src,
		struct objects **out);

/* Open @obj's ELF file and find its bias (idempotent).  0 or -errno, also
 * kept in @obj->err: -ENOEXEC not ELF, -ESTALE the file is not the one
 * mapped, -EACCES, -ENOENT. */
int object_open(struct objects *os, struct object *obj);

/* The object whose mappings span @addr, or NULL. */
struct object *objects_find(const struct objects *os, uint64_t addr);

/* The first object mapped from this device and inode, or NULL. */
struct object *objects_find_inode(const struct objects *os,
				  uint32_t dev_major, uint32_t dev_minor,
				  uint64_t inode);

/* @name in @obj, at its runtime address.  0, -ENOENT, or an open error. */
int object_lookup(struct objects *os, struct object *obj, const char *name,
		  unsigned int flags, struct symbol *out);

/* elfobj_span() at runtime address @addr of @obj, in runtime addresses. */
int object_span(struct objects *os, struct object *obj, uint64_t addr,
		bool (*member)(const char *name, void *arg), void *arg,
		uint64_t max, uint64_t *lo, uint64_t *hi);

/*
 * Each GOT slot of @obj (elfobj_each_got_slot()) at its runtime address,
 * 8-byte aligned and inside the object's mappings.  0, an open error, or
 * what @fn returned.
 */
int object_each_got_slot(struct objects *os, struct object *obj,
			 int (*fn)(void *arg, const char *name, uint64_t slot,
				   bool plt),
			 void *arg);

/* [*@lo, *@hi): the pages of @obj the loader made read-only after
 * relocating (PT_GNU_RELRO), or -ENOENT. */
int object_relro(struct objects *os, struct object *obj, uint64_t *lo,
		 uint64_t *hi);

/*
 * What is at runtime address @addr.  0 with @out->name set when a symbol
 * covers it; 0 with @out->name NULL and @out->offset the file-relative
 * offset (object+0xoffset) when only the object is known; -ENOENT when no
 * object maps it.
 */
int objects_symbolize(struct objects *os, uint64_t addr, struct symbol *out);

void objects_free(struct objects *os);

#endif
