#ifndef MEMSNAP_SYMBOLS_ELF_INTERNAL_H
#define MEMSNAP_SYMBOLS_ELF_INTERNAL_H

/*
 * The ELF reader's private parts, shared by elf.c (opening, sections,
 * build-id, bias, MiniDebugInfo) and elfsym.c (symbol tables, lookup by
 * name and by address).
 */

#include "symbols/elf.h"

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BUILD_ID_MAX 64

struct symtab {
	bool tried, present;
	Elf *elf;	    /* the file it lives in: main or debugdata */
	Elf_Data *syms;
	size_t count;
	const char *strs; /* string table bytes */
	size_t strs_len;
	const GElf_Versym *versym; /* .dynsym only; NULL if absent or bad */
	const uint32_t *gnuhash;   /* .dynsym only */
	size_t gnuhash_words;
	const uint32_t *sysvhash; /* .dynsym only */
	size_t sysvhash_words;
};

struct addr_ent {
	uint64_t value, size;
	const char *name;
	unsigned char type, bind, source;
};

struct elfobj {
	int fd;
	char *name;
	Elf *elf;
	GElf_Ehdr ehdr;
	GElf_Phdr *phdrs;
	size_t nphdrs;
	unsigned char build_id[BUILD_ID_MAX];
	size_t build_id_len;
	uint64_t build_id_vaddr;
	bool build_id_has_vaddr;
	Elf_Scn *scn_dynsym, *scn_symtab, *scn_gnuhash, *scn_hash;
	Elf_Scn *scn_versym, *scn_debugdata;
	struct symtab tabs[3]; /* indexed by enum sym_source */
	char *debugdata;       /* unpacked MiniDebugInfo image */
	Elf *debugdata_elf;
	struct addr_ent *index;
	size_t nindex;
	bool index_built;
};

/* @o's .dynsym, loaded on first use; NULL when it has none. */
struct symtab *elf_dynsym(struct elfobj *o);

/* The NUL-terminated name at @off in @t's string table, or NULL. */
const char *symtab_str(const struct symtab *t, size_t off);

/* Unpack @o's .gnu_debugdata (MiniDebugInfo, xz) into o->debugdata and
 * open it as o->debugdata_elf.  0 or -errno. */
int elf_unpack_debugdata(struct elfobj *o);

#endif
