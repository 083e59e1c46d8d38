/*
 * The frames of one address (see symbols/symbolizer_internal.h): the
 * DWARF inline chain with files and lines, and the ELF symbol for
 * addresses without DWARF.
 */
#include "symbols/symbolizer.h"

#include "common/util.h"
#include "symbols/demangle.h"
#include "symbols/symbolizer_internal.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <stdlib.h>
#include <string.h>

/* Intern the demangled form of @name (or @name itself). */
static const char *intern_demangled(struct symbolizer *s, const char *name)
{
	char *d = demangle(name);
	const char *r;

	if (!d)
		return symbolizer_intern(s, name);
	r = symbolizer_intern(s, d);
	free(d);
	return r;
}

/* Name of a function DIE, following abstract origins and declarations. */
static const char *die_name(struct symbolizer *s, Dwarf_Die *die)
{
	Dwarf_Attribute a;
	const char *n;

	n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name,
						  &a));
	if (!n)
		n = dwarf_formstring(dwarf_attr_integrate(
			die, DW_AT_MIPS_linkage_name, &a));
	if (n)
		return intern_demangled(s, n);
	n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &a));
	return n ? symbolizer_intern(s, n) : NULL;
}

/*
 * Inline chain at @addr (module-relative DWARF address): the innermost
 * inlined body first, the containing function last.  Lines: the
 * innermost from the line table, each outer one from the DW_AT_call_line
 * of the inlined body inside it.
 */
void sym_dwarf_frames(struct symbolizer *s, struct module *m,
		      Dwarf_Addr addr, struct frames *f)
{
	Dwfl_Module *mod = m->mod;
	bool outer = false;
	Dwarf_Die *cu, *scopes = NULL;
	Dwarf_Addr bias;
	Dwarf_Files *files = NULL;
	size_t nfiles = 0;
	const char *file = NULL;
	int line = 0, n, i;
	Dwfl_Line *ln;

	if (!sym_dwarf_usable(s, m))
		return;
	cu = dwfl_module_addrdie(mod, addr, &bias);
	if (!cu)
		return;
	ln = dwfl_module_getsrc(mod, addr);
	if (ln) {
		const char *src = dwfl_lineinfo(ln, NULL, &line, NULL, NULL,
						NULL);

		file = src ? symbolizer_intern(s, src) : NULL;
	}
	n = dwarf_getscopes(cu, addr - bias, &scopes);
	if (n <= 0) {
		free(scopes);
		return;
	}
	dwarf_getsrcfiles(cu, &files, &nfiles);
	for (i = 0; i < n && f->n < MAX_INLINE; i++) {
		Dwarf_Die *d = &scopes[i];
		int tag = dwarf_tag(d);
		Dwarf_Attribute a;
		Dwarf_Word cf, cl;

		if (tag != DW_TAG_subprogram &&
		    tag != DW_TAG_inlined_subroutine)
			continue;
		f->v[f->n] = (struct dwsym_frame){
			.name = die_name(s, d),
			.file = file,
			.line = line > 0 ? (unsigned int)line : 0,
			.resolved = true,
			.inlined = tag == DW_TAG_inlined_subroutine,
		};
		if (tag == DW_TAG_subprogram) {
			outer = f->v[f->n].name != NULL;
			if (outer)
				f->n++;
			break;
		}
		if (f->v[f->n].name)
			f->n++;
		/* the caller's position is where this body was inlined */
		file = NULL;
		line = 0;
		if (dwarf_formudata(dwarf_attr(d, DW_AT_call_file, &a), &cf) ==
			    0 &&
		    files && cf < nfiles) {
			const char *src = dwarf_filesrc(files, cf, NULL, NULL);

			file = src ? symbolizer_intern(s, src) : NULL;
		}
		if (dwarf_formudata(dwarf_attr(d, DW_AT_call_line, &a), &cl) ==
			    0 &&
		    cl < 100000000)
			line = (int)cl;
	}
	free(scopes);
	/* The function the inlined bodies sit in, when its DIE gave no
	 * name: the ELF symbol, at the last call site found. */
	if (f->n && !outer && f->n < MAX_INLINE) {
		const char *name = sym_elf_symbol(s, m, addr);

		/* the same name: a symbol for the inlined copy itself */
		if (name && name != f->v[f->n - 1].name)
			f->v[f->n++] = (struct dwsym_frame){
				.name = name,
				.file = file,
				.line = line > 0 ? (unsigned int)line : 0,
				.resolved = true,
			};
	}
}

static int cmp_addrsym(const void *a, const void *b)
{
	const struct addrsym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* at equal addresses the global name last: found first below */
	return (int)x->global - (int)y->global;
}

static void build_syms(struct module *m)
{
	int n = dwfl_module_getsymtab(m->mod), i;
	size_t cap = 0;

	m->syms_built = true;
	for (i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name;
		int type;

		name = dwfl_module_getsym_info(m->mod, i, &sym, &addr, &shndx,
					       NULL, NULL);
		type = GELF_ST_TYPE(sym.st_info);
		if (!name || !*name || shndx == SHN_UNDEF ||
		    (type != STT_FUNC && type != STT_GNU_IFUNC &&
		     type != STT_OBJECT))
			continue;
		if (array_grow((void **)&m->syms, &cap, m->nsyms + 1,
			       sizeof(*m->syms)))
			break;	/* fewer names, not an error */
		m->syms[m->nsyms++] = (struct addrsym){
			.addr = addr,
			.size = sym.st_size,
			.name = name,
			.global = GELF_ST_BIND(sym.st_info) != STB_LOCAL,
		};
	}
	sort(m->syms, m->nsyms, sizeof(*m->syms), cmp_addrsym);
}

/* The symbol covering @addr, never a neighbour. */
const char *sym_elf_symbol(struct symbolizer *s, struct module *m,
			   uint64_t addr)
{
	size_t lo = 0, hi, k;

	if (!m->syms_built)
		build_syms(m);
	hi = m->nsyms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* the last one at or below, or one a few before that encloses a
	 * smaller symbol (a function around a local label) */
	for (k = 0; k < 8 && lo > k; k++) {
		const struct addrsym *e = &m->syms[lo - 1 - k];

		if (addr == e->addr || addr - e->addr < e->size)
			return intern_demangled(s, e->name);
	}
	return NULL;
}
