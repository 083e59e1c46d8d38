#ifndef MEMSNAP_SYMBOLS_SYMBOLIZER_INTERNAL_H
#define MEMSNAP_SYMBOLS_SYMBOLIZER_INTERNAL_H

/*
 * The symbolizer's private parts, shared by symbolizer.c (the libdwfl
 * session, modules, the cache, lookup) and symframes.c (the frames of
 * one address: DWARF inline chains, file and line, ELF symbols).
 */
#include "symbols/symbolizer.h"

#include "symbols/objects.h"

#include "common/hidx.h"

#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_INLINE 64	/* inline depth kept for one address */

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
	struct object *obj;
	Dwfl_Module *mod;
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
	char *root;		/* NULL: "/" */
	int root_fd;		/* the root, O_PATH: every file is beneath */
	char *debug_path;	/* for libdwfl, kept alive */
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

#endif
