/*
 * The unwinder's lookup of a pc's FDE (injector/unwind/core.c says
 * why): the object's search table, read from its PT_GNU_EH_FRAME as
 * loaded, or made from its .eh_frame (injector/unwind/ehframe.c); the
 * entry found in it by memsnap; the FDE and its CIE checked
 * (injector/unwind/cfi.c) before libunwind sees them.
 */
#include "injector/unwind/core_internal.h"

#include "injector/unwind/cfi.h"

#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The first mapping (file offset 0) of the object @m belongs to: the
 * same file, mapped just below, offsets going down. */
static const struct mapline *object_start(const struct unwind_core *c,
					  const struct mapline *m)
{
	while (m->offset && m > c->maps) {
		const struct mapline *p = m - 1;

		if (!m->inode || p->inode != m->inode ||
		    p->dev_major != m->dev_major ||
		    p->dev_minor != m->dev_minor || p->offset >= m->offset)
			return NULL;
		m = p;
	}
	return m->offset ? NULL : m;
}

/*
 * Describe the search table of the object around @ip, as loaded, in @di.
 * 0, or -UNW_ENOINFO for anything unexpected: no mapping, no ELF header,
 * no PT_GNU_EH_FRAME, an encoding other than the one linkers write.
 */
static int search_table(struct unwind_core *c, uint64_t hdr, uint64_t hdr_len,
			uint64_t lo, uint64_t hi, unw_dyn_info_t *di)
{
	unsigned char h[4];
	uint32_t count;
	uint64_t len;

	/* version 1, eh_frame_ptr and fde_count 4 bytes each, then the
	 * table: (start, fde) pairs of 4-byte offsets from hdr */
	if (hdr_len < 12 || core_read_mem(c, hdr, h, sizeof(h)) ||
	    core_read_mem(c, hdr + 8, &count, sizeof(count)) || h[0] != 1 ||
	    ((h[1] & 0x0f) != DW_EH_PE_udata4 &&
	     (h[1] & 0x0f) != DW_EH_PE_sdata4) ||
	    (h[2] != DW_EH_PE_udata4 && h[2] != DW_EH_PE_sdata4) ||
	    h[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
		return -UNW_ENOINFO;
	len = (uint64_t)count * 8;
	if (!count || len > hdr_len - 12 || lo >= hi)
		return -UNW_ENOINFO;
	memset(di, 0, sizeof(*di));
	di->format = UNW_INFO_FORMAT_REMOTE_TABLE;
	di->start_ip = lo;
	di->end_ip = hi;
	di->u.rti.segbase = hdr;
	di->u.rti.table_data = hdr + 12;
	di->u.rti.table_len = len / sizeof(unw_word_t);
	return 0;
}

/* The table's reads: pages kept, the job's budget not spent (a walk
 * is bounded by the section's length). */
static int table_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct unwind_core *c = arg;

	return addr + len < addr ? -1 : core_read_pages(c, addr, buf, len, true);
}

/*
 * The table made from the .eh_frame memsnap found for the object whose
 * first mapping starts at @object, described in @di as search_table()
 * does (segbase: the .eh_frame), its entries in c->table.  0, or
 * -UNW_ENOINFO.
 */
static int ehframe_table(struct unwind_core *c, uint64_t object, uint64_t lo,
			 uint64_t hi, unw_dyn_info_t *di)
{
	struct ehframe_table *t = ehframe_table_of(c->eh, c->neh, object);
	int rc;

	if (!t || lo >= hi)
		return -UNW_ENOINFO;
	c->indexing = true;
	rc = ehframe_table_get(t, table_read, c, arch_unw_columns,
			       &c->eh_left);
	c->indexing = false;
	if (rc || !t->n)
		return -UNW_ENOINFO;
	memset(di, 0, sizeof(*di));
	di->format = UNW_INFO_FORMAT_REMOTE_TABLE;
	di->start_ip = lo;
	di->end_ip = hi;
	di->u.rti.segbase = t->d.addr;
	di->u.rti.table_len = t->n;	/* entries, as search_table()'s */
	c->table = (const int32_t (*)[2])t->tab;
	return 0;
}

int core_remote_table(struct unwind_core *c, uint64_t ip, unw_dyn_info_t *di)
{
	const struct mapline *m = core_map_of(c, ip), *m0;
	Elf64_Phdr ph[PHDRS_MAX];
	const Elf64_Phdr *eh = NULL, *text = NULL;
	Elf64_Ehdr e;
	uint64_t base;
	int i, have_base = 0;

	c->table = NULL;
	if (core_in_extra(c, ip, 1))
		return search_table(c, c->extra.eh_frame_hdr,
				    c->extra.hi - c->extra.eh_frame_hdr,
				    c->extra.lo, c->extra.hi, di);
	if (!m || m->perms[2] != 'x' || !(m0 = object_start(c, m)))
		return -UNW_ENOINFO;
	if (core_read_mem(c, m0->start, &e, sizeof(e)) ||
	    memcmp(e.e_ident, ELFMAG, SELFMAG) ||
	    e.e_ident[EI_CLASS] != ELFCLASS64 ||
	    e.e_phentsize != sizeof(Elf64_Phdr) || !e.e_phnum ||
	    e.e_phnum > PHDRS_MAX || e.e_phoff > m0->end - m0->start ||
	    e.e_phnum * sizeof(Elf64_Phdr) > m0->end - m0->start - e.e_phoff ||
	    core_read_mem(c, m0->start + e.e_phoff, ph,
		     e.e_phnum * sizeof(Elf64_Phdr)))
		return -UNW_ENOINFO;
	/* The load base: where file offset 0 went. */
	base = 0;
	for (i = 0; i < e.e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) {
			base = m0->start - ph[i].p_vaddr;
			have_base = 1;
			break;
		}
	if (!have_base)
		return -UNW_ENOINFO;
	for (i = 0; i < e.e_phnum; i++) {
		if (ph[i].p_type == PT_GNU_EH_FRAME)
			eh = &ph[i];
		else if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X) &&
			 ip - base >= ph[i].p_vaddr &&
			 ip - base - ph[i].p_vaddr < ph[i].p_memsz)
			text = &ph[i];
	}
	if (!text)
		return -UNW_ENOINFO;
	if (!eh)
		return ehframe_table(c, m0->start, base + text->p_vaddr,
				     base + text->p_vaddr + text->p_memsz, di);
	return search_table(c, base + eh->p_vaddr, eh->p_memsz,
			    base + text->p_vaddr,
			    base + text->p_vaddr + text->p_memsz, di);
}

/* Entry @i of the table @di: in memory, or c->table. */
static int entry_at(struct unwind_core *c, const unw_dyn_info_t *di,
		    uint64_t i, int32_t e[2])
{
	if (c->table) {
		memcpy(e, c->table[i], sizeof(c->table[i]));
		return 0;
	}
	return core_read_mem(c, di->u.rti.table_data + i * 8, e, 8);
}

/*
 * The entry of the table @di for @ip: the last whose start is not above
 * it, with its FDE's address.  0, or -UNW_ENOINFO.
 */
int core_find_fde(struct unwind_core *c, const unw_dyn_info_t *di,
		  uint64_t ip, int32_t entry[2], uint64_t *fde)
{
	uint64_t segbase = di->u.rti.segbase;
	uint64_t lo = 0, hi = di->u.rti.table_len;
	int64_t rel = (int64_t)(ip - segbase);
	int32_t e[2];

	/* what libunwind compares: ip - segbase, as a 32-bit offset */
	if (rel != (int32_t)rel)
		return -UNW_ENOINFO;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (entry_at(c, di, mid, e))
			return -UNW_ENOINFO;
		if (rel < e[0])
			hi = mid;
		else
			lo = mid + 1;
	}
	if (!hi || entry_at(c, di, hi - 1, entry))
		return -UNW_ENOINFO;
	*fde = segbase + (uint64_t)(int64_t)entry[1];
	return 0;
}

static int cfi_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	return core_read_mem(arg, addr, buf, len);
}

/* Has the FDE at @fde passed cfi_check_fde() since the maps were set?
 * (A direct-mapped memory of those that did.) */
bool core_fde_checked(struct unwind_core *c, uint64_t fde)
{
	size_t i = (size_t)((fde * 0x9e3779b97f4a7c15ull) >> 54);

	if (c->checked[i] == fde + 1)
		return true;
	if (cfi_check_fde(cfi_read, c, fde, arch_unw_columns))
		return false;
	c->checked[i] = fde + 1;
	return true;
}

