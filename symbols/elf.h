#ifndef MEMSNAP_SYMBOLS_ELF_H
#define MEMSNAP_SYMBOLS_ELF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * One ELF file, read with libelf.  The file is untrusted (it is whatever
 * the target has mapped): every table is bounds-checked, hash chains are
 * walked a bounded number of steps, and the file is read (ELF_C_READ),
 * not mmap'ed, so a file truncated under us gives an error, not SIGBUS.
 * Only the sections a lookup needs are read.
 *
 * Symbols are looked up in three tables, in this order:
 *   .dynsym        through .gnu.hash or .hash when present
 *   .symtab        linear, only in unstripped objects
 *   .gnu_debugdata the xz-compressed ELF of MiniDebugInfo, its .symtab
 */

struct elfobj;

enum sym_source {
	SYMSRC_DYNSYM,
	SYMSRC_SYMTAB,
	SYMSRC_DEBUGDATA,
};

struct elfsym {
	const char *name; /* valid until elfobj_close() */
	uint64_t value;	  /* st_value: link-time address */
	uint64_t size;
	unsigned char type; /* STT_* */
	unsigned char bind; /* STB_* */
	enum sym_source source;
};

/* Only .dynsym: the symbols the dynamic linker binds to. */
#define ELFSYM_DYNAMIC_ONLY 1u

/*
 * Open the ELF file behind @fd, which the object then owns (closed by
 * elfobj_close(), also on failure).  @name is for messages only.
 * -ENOEXEC: not an ELF file or not one we can read; -ENOMEM.
 */
int elfobj_open(int fd, const char *name, struct elfobj **out);

/* Open a file by path (tests and tools). */
int elfobj_open_path(const char *path, struct elfobj **out);

void elfobj_close(struct elfobj *o);

/* The descriptor @o reads, still @o's (dup it to keep it). */
int elfobj_fd(const struct elfobj *o);

/* The ELF type, ET_EXEC or ET_DYN (or another ET_* for odd files). */
unsigned int elfobj_type(const struct elfobj *o);

/* The GNU build-id note, or -ENOENT.  *@id points into @o. */
int elfobj_build_id(const struct elfobj *o, const unsigned char **id,
		    size_t *len);

/*
 * The load bias of @o mapped at @map_start from file offset @map_offset:
 * runtime address = bias + link-time address.  -ENOENT if no PT_LOAD
 * segment starts at that offset.
 */
int elfobj_bias(const struct elfobj *o, uint64_t map_start,
		uint64_t map_offset, uint64_t page_size, uint64_t *bias);

/* Link-time address and size of the allocated section @name (".go.buildinfo"),
 * or -ENOENT. */
int elfobj_section(const struct elfobj *o, const char *name, uint64_t *vaddr,
		   uint64_t *size);

/* Link-time address and size of the PT_DYNAMIC segment, or -ENOENT. */
int elfobj_dynamic(const struct elfobj *o, uint64_t *vaddr, uint64_t *size);

/* Link-time address of the first PT_NOTE holding the build-id, -ENOENT. */
int elfobj_build_id_vaddr(const struct elfobj *o, uint64_t *vaddr);

/*
 * A defined symbol called exactly @name: global or weak before local,
 * the default version before hidden ones.  0, -ENOENT, or -ENOMEM.
 */
int elfobj_lookup(struct elfobj *o, const char *name, unsigned int flags,
		  struct elfsym *out);

/*
 * Call @fn for each defined symbol whose name ends with @suffix, in every
 * table (a name may come more than once), when what comes before the
 * suffix is at most ELF_SUFFIX_MAX_PREFIX bytes (symbol prefixes are
 * short; a crafted name of megabytes must not cost a lookup per byte).
 * Stops early and returns what @fn returns if that is non-zero.
 */
#define ELF_SUFFIX_MAX_PREFIX 63

int elfobj_each_suffix(struct elfobj *o, const char *suffix,
		       int (*fn)(void *arg, const char *name), void *arg);

/*
 * The function or object symbol that covers link-time address @vaddr
 * (st_value <= vaddr < st_value + st_size; a size-0 symbol covers only
 * its own address).  -ENOENT when none does: callers print
 * object+0xoffset rather than a neighbour.
 */
int elfobj_addr_lookup(struct elfobj *o, uint64_t vaddr, struct elfsym *out);

/*
 * The code around link-time address @vaddr that belongs with it: from
 * the end of the nearest exported function below that @member does not
 * accept (NULL: none) to the start of the nearest one above.  A translation unit's
 * local functions sit between its exported ones, so the span of
 * malloc() covers _int_malloc() and what malloc() tail-calls, which
 * leaves no frame of malloc() behind.  -ERANGE when no such border lies
 * within @max bytes on either side (stripped objects), -ENOMEM.
 */
int elfobj_span(struct elfobj *o, uint64_t vaddr,
		bool (*member)(const char *name, void *arg), void *arg,
		uint64_t max, uint64_t *lo, uint64_t *hi);

/*
 * Call @fn for each GOT slot of @o (a JUMP_SLOT or GLOB_DAT relocation
 * against .dynsym): the symbol's name, the slot's link-time address and
 * whether it is a PLT slot.  Stops early and returns what @fn returns
 * if that is non-zero; -E2BIG past a million relocations.
 */
int elfobj_each_got_slot(struct elfobj *o,
			 int (*fn)(void *arg, const char *name,
				   uint64_t vaddr, bool plt),
			 void *arg);

/* Link-time address and size of PT_GNU_RELRO (made read-only once the
 * loader has relocated), or -ENOENT. */
int elfobj_relro(const struct elfobj *o, uint64_t *vaddr, uint64_t *size);

/* What the symbol tables hold, for `info`: bit i set = source i has any. */
unsigned int elfobj_sources(struct elfobj *o);

#endif
