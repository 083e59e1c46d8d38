#ifndef MEMSNAP_SYMBOLS_SYMBOLIZER_INTERNAL_H
#define MEMSNAP_SYMBOLS_SYMBOLIZER_INTERNAL_H

/*
 * The symbolizer's private parts, shared by symbolizer.c (the libdwfl
 * session, modules, the cache, lookup), symframes.c (the frames of one
 * address: DWARF inline chains, file and line, ELF symbols) and
 * debuginfo.c (separate debuginfo, found beneath the root).
 */
#include "symbols/symbolizer.h"

#include "symbols/objects.h"
#include "symbols/opener.h"

#include "common/hidx.h"

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_INLINE 64	/* inline depth kept for one address */
/* An object or debug file libdwfl maps, copied when not root's
 * (fd_steady()): at most this big. */
#define STEADY_MAX (2ull << 30)

/* Interned strings, by id in the order added. */
struct strtab {
	char **v;
	size_t vcap, n;
	struct hidx idx;
};

struct addrsym {
	uint64_t addr, size;	/* runtime */
	const char *name;	/* libdwfl's, valid while the Dwfl lives */
	bool global;
};

struct module {
	struct dwsym_module pub;
	struct symbolizer *s;
	struct object *obj;
	Dwfl_Module *mod;	/* its userdata is this module */
	/* the object's .gnu_debuglink (in libdwfl's copy of the file) */
	const char *link;
	GElf_Word link_crc;
	/* debuginfo.c: where the debug file was found, beneath the root
	 * (NULL: none, or from debuginfod); none anywhere */
	char *debug_path;
	bool debug_missing;
	/* debuginfo.c: the supplementary (dwz) file, ours, and whether
	 * the DWARF may be read (sym_dwarf_usable()) */
	int alt_fd;
	Elf *alt_elf;
	Dwarf *alt;
	bool dwarf_checked, dwarf_ok;
	/* every function and object symbol libdwfl sees (.dynsym,
	 * .symtab, .gnu_debugdata, separate debuginfo), by address:
	 * dwfl_module_addrinfo() walks them all on each call */
	struct addrsym *syms;
	size_t nsyms;
	bool syms_built;
};

struct symbolizer {
	const struct maps *maps;
	struct objects *os;
	char *root;		/* NULL: "/"; for names only */
	/* every file, beneath the root, comes through it */
	struct opener *op;
	struct opener *own_op;	/* symbolizer_new()'s, freed with it */
	Dwfl_Callbacks cb;
	Dwfl *dwfl;
	struct module *mods;
	struct dwsym_module *pubs;	/* copies handed out */
	size_t nmods;
	struct strtab strs;
	/* the cache: (pc, caller) -> loc; each location's own pc and
	 * caller are its key */
	struct cached_loc **locs;
	size_t locs_cap, nlocs;
	struct hidx cache;
	/* where the cached locations, their frames and their synthesized
	 * names ("libx.so+0x1234") live: a hostile dump has millions of
	 * distinct addresses, none of them worth a malloc of its own */
	struct arena_chunk *arena;
	char *arena_next;
	size_t arena_left;
};

/* A location in the cache (symbolizer.c). */
struct cached_loc {
	struct dwsym_loc pub;
	bool caller;
	struct dwsym_frame frames[];
};

struct frames {
	struct dwsym_frame v[MAX_INLINE];
	unsigned int n;
};

/*
 * Inline chain at @addr (module-relative DWARF address) into @f: the
 * innermost inlined body first, the containing function last.
 */
void sym_dwarf_frames(struct symbolizer *s, struct module *m,
		      Dwarf_Addr addr, struct frames *f);

/* The ELF symbol covering @addr (module-relative), demangled and
 * interned; NULL if none. */
const char *sym_elf_symbol(struct symbolizer *s, struct module *m,
			   uint64_t addr);

/*
 * libdwfl's find_debuginfo callback (debuginfo.c): the debug file of a
 * module, beneath the root, checked, or -1.  The supplementary file
 * libdwfl asks for next is refused here: sym_dwarf_usable() finds it.
 */
int sym_find_debuginfo(Dwfl_Module *mod, void **userdata,
		       const char *modname, Dwarf_Addr base,
		       const char *file_name, const char *debuglink_file,
		       GElf_Word debuglink_crc, char **debuginfo_file_name);

/* libdwfl's find_elf callback: never anything (modules are reported
 * with their descriptors). */
int sym_find_elf(Dwfl_Module *mod, void **userdata, const char *modname,
		 Dwarf_Addr base, char **file_name, Elf **elfp);

/*
 * May @m's DWARF be read?  Its supplementary file, if it names one, is
 * found beneath the root and given to libdw first; without it, no: libdw
 * would look for it by itself at the first DIE that points into it.
 * Once per module.
 */
bool sym_dwarf_usable(struct symbolizer *s, struct module *m);

/* What debuginfo.c and the symbol index hold for @m; after dwfl_end(). */
void sym_module_free(struct module *m);

#endif
