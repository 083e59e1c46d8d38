/*
 * The GOT slots through which an object reaches functions of other
 * objects (or its own exported ones): its JUMP_SLOT and GLOB_DAT
 * relocations against .dynsym, read from the file's SHT_RELA sections.
 * A call through the PLT, a -fno-plt call and a function pointer taken
 * from an import all load the function's address from one of these
 * 8-byte slots, which is what an interposer swaps.
 */
#include "symbols/elf_internal.h"

#include <elf.h>
#include <errno.h>
#include <string.h>

/* A relocation table this long is not a real one (glibc's: ~1 600). */
#define RELA_MAX (1u << 20)

/* @type is a GOT slot's relocation for @machine; *@plt: a JUMP_SLOT. */
static bool got_type(unsigned int machine, unsigned int type, bool *plt)
{
	switch (machine) {
	case EM_X86_64:
		*plt = type == R_X86_64_JUMP_SLOT;
		return type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT;
	case EM_AARCH64:
		*plt = type == R_AARCH64_JUMP_SLOT;
		return type == R_AARCH64_JUMP_SLOT ||
		       type == R_AARCH64_GLOB_DAT;
	default:
		return false;
	}
}

int elfobj_each_got_slot(struct elfobj *o,
			 int (*fn)(void *arg, const char *name,
				   uint64_t vaddr, bool plt),
			 void *arg)
{
	struct symtab *t = elf_dynsym(o);
	size_t dynsym = o->scn_dynsym ? elf_ndxscn(o->scn_dynsym) : 0;
	Elf_Scn *scn = NULL;
	unsigned long seen = 0;

	if (!t || !dynsym || o->ehdr.e_ident[EI_CLASS] != ELFCLASS64)
		return 0;
	while ((scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		size_t i, n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA ||
		    sh.sh_link != dynsym || sh.sh_entsize != sizeof(Elf64_Rela))
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf)
			continue;
		n = d->d_size / sizeof(Elf64_Rela);
		for (i = 0; i < n; i++) {
			GElf_Rela r;
			GElf_Sym s;
			const char *name;
			bool plt;
			int rc;

			if (++seen > RELA_MAX)
				return -E2BIG;
			if (!gelf_getrela(d, (int)i, &r) ||
			    !got_type(o->ehdr.e_machine,
				      (unsigned int)GELF_R_TYPE(r.r_info), &plt))
				continue;
			if (GELF_R_SYM(r.r_info) >= t->count ||
			    !gelf_getsym(t->syms, (int)GELF_R_SYM(r.r_info),
					 &s) ||
			    !(name = symtab_str(t, s.st_name)) || !*name)
				continue;
			rc = fn(arg, name, r.r_offset, plt);
			if (rc)
				return rc;
		}
	}
	return 0;
}

int elfobj_relro(const struct elfobj *o, uint64_t *vaddr, uint64_t *size)
{
	size_t i;

	for (i = 0; i < o->nphdrs; i++)
		if (o->phdrs[i].p_type == PT_GNU_RELRO) {
			*vaddr = o->phdrs[i].p_vaddr;
			*size = o->phdrs[i].p_memsz;
			return 0;
		}
	return -ENOENT;
}
