/*
 * The unwinder proper (injector/unwind_core.h): libunwind's remote
 * unwinder with memsnap's accessors.  libunwind's own lookup
 * (_UPT_find_proc_info) would open each object by the path its maps
 * line shows; here the ELF and program headers are read at the object's
 * first mapping, as loaded, and so is its PT_GNU_EH_FRAME search table.
 *
 * An object with no such header (gcc -static writes none) may come
 * with its .eh_frame's place, which memsnap found in its section
 * headers (injector/unwind_ehfile.c): the table is then made from the
 * records (injector/unwind_ehframe.c) and kept here.
 *
 * The FDE for a pc is found by memsnap in that table, it and its CIE
 * checked (injector/unwind_cfi.c), and libunwind is given a search table
 * of that one entry, at an address no process maps (SYNTH_TABLE, served
 * only during the search): what libunwind then parses is exactly what
 * memsnap checked.
 */
#include "injector/unwind_core.h"

#include "injector/unwind_cfi.h"
#include "injector/unwind_ehframe.h"
#include "injector/unwind_pages.h"

#include <elf.h>
#include <errno.h>
#include <libunwind.h>
#include <stdlib.h>
#include <string.h>

/* libunwind's table search: exported, used by libunwind-ptrace itself,
 * but declared in no public header. */
extern int UNW_OBJ(dwarf_search_unwind_table)(unw_addr_space_t as,
					      unw_word_t ip,
					      unw_dyn_info_t *di,
					      unw_proc_info_t *pi,
					      int need_unwind_info, void *arg);

#define PHDRS_MAX 64

/* DWARF pointer encodings the search table uses (LSB eh_frame_hdr). */
#define DW_EH_PE_udata4 0x03
#define DW_EH_PE_sdata4 0x0b
#define DW_EH_PE_datarel 0x30

/* The one-entry table handed to libunwind: in the first page after 0,
 * which the kernel never maps for a process (vm.mmap_min_addr). */
#define SYNTH_TABLE 0x1000u

/* FDEs remembered as checked (fde_checked()). */
#define CHECKED 1024

/* Entries of the tables made from .eh_frame, all objects: 16 MiB. */
#define EHFRAME_ENTRIES (2u << 20)

struct unwind_core {
	struct mapline *maps;		/* sorted by start */
	size_t nmaps;
	struct unwind_code extra;
	struct ehframe_table eh[UNWIND_EHFRAMES];
	size_t neh, eh_left;
	bool indexing;			/* pages for a table of eh[] */
	unw_addr_space_t as;
	struct page_cache *cache;
	uint64_t gen;			/* the unwind under way, from 1 */
	/* the unwind under way */
	const struct unwind_job *job;
	unsigned long reads;
	bool searching;			/* SYNTH_TABLE answers */
	const int32_t (*table)[2];	/* the pc's table in eh[], or NULL */
	int32_t synth[2];		/* its entry: start, FDE (datarel) */
	uint64_t checked[CHECKED];	/* FDE + 1 that passed, or 0 */
};

static int unw_err(int e)
{
	switch (e) {
	case -UNW_ENOMEM:
		return -ENOMEM;
	case -UNW_EINVAL:
		return -EINVAL;
	default:
		return -EIO;
	}
}

/* The mapping that holds @addr, or NULL. */
static const struct mapline *map_of(const struct unwind_core *c,
				    uint64_t addr)
{
	size_t lo = 0, hi = c->nmaps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addr < c->maps[mid].start)
			hi = mid;
		else if (addr >= c->maps[mid].end)
			lo = mid + 1;
		else
			return &c->maps[mid];
	}
	return NULL;
}

static bool in_extra(const struct unwind_core *c, uint64_t addr, size_t len)
{
	return c->extra.hi && addr >= c->extra.lo && addr < c->extra.hi &&
	       len <= c->extra.hi - addr;
}

/* Pages @addr..@addr+@len through the cache: kept between unwinds if
 * @keep, else only for this one. */
static int read_pages(struct unwind_core *c, uint64_t addr, void *buf,
		      size_t len, bool keep)
{
	return page_cache_read(c->cache, addr, buf, len, keep ? 0 : c->gen,
			       c->indexing);
}

static int read_mem(struct unwind_core *c, uint64_t addr, void *buf,
		    size_t len)
{
	const struct unwind_job *j = c->job;
	const struct mapline *m;
	bool keep;

	/* counted up to the first one refused: libunwind may ask again */
	if (c->reads > j->budget || ++c->reads > j->budget || addr + len < addr)
		return -1;
	if (j->stack && addr >= j->stack_lo && len <= j->stack_len &&
	    addr - j->stack_lo <= j->stack_len - len) {
		memcpy(buf, j->stack + (addr - j->stack_lo), len);
		if (j->touched) {
			uint64_t w = (addr - j->stack_lo) / 8,
				 last = (addr - j->stack_lo + len - 1) / 8;

			for (; len && w <= last; w++)
				j->touched[w / 64] |= 1ull << (w % 64);
		}
		if (len == sizeof(uint64_t)) {
			/* A return address saved signed (AArch64 PAC): this
			 * libunwind does not strip it. */
			uint64_t w;

			memcpy(&w, buf, sizeof(w));
			w = arch_strip_pac(w);
			memcpy(buf, &w, sizeof(w));
		}
		return 0;
	}
	if (c->searching && addr >= SYNTH_TABLE &&
	    addr + len <= SYNTH_TABLE + sizeof(c->synth)) {
		memcpy(buf, (const char *)c->synth + (addr - SYNTH_TABLE), len);
		return 0;
	}
	m = map_of(c, addr);
	keep = in_extra(c, addr, len) ||
	       (m && m->inode && len <= m->end - addr);
	/* A saved thread's stack has moved on: only code and CFI. */
	if (j->saved && !keep)
		return -1;
	return read_pages(c, addr, buf, len, keep);
}

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
	if (hdr_len < 12 || read_mem(c, hdr, h, sizeof(h)) ||
	    read_mem(c, hdr + 8, &count, sizeof(count)) || h[0] != 1 ||
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

	return addr + len < addr ? -1 : read_pages(c, addr, buf, len, true);
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

static int remote_table(struct unwind_core *c, uint64_t ip, unw_dyn_info_t *di)
{
	const struct mapline *m = map_of(c, ip), *m0;
	Elf64_Phdr ph[PHDRS_MAX];
	const Elf64_Phdr *eh = NULL, *text = NULL;
	Elf64_Ehdr e;
	uint64_t base;
	int i, have_base = 0;

	c->table = NULL;
	if (in_extra(c, ip, 1))
		return search_table(c, c->extra.eh_frame_hdr,
				    c->extra.hi - c->extra.eh_frame_hdr,
				    c->extra.lo, c->extra.hi, di);
	if (!m || m->perms[2] != 'x' || !(m0 = object_start(c, m)))
		return -UNW_ENOINFO;
	if (read_mem(c, m0->start, &e, sizeof(e)) ||
	    memcmp(e.e_ident, ELFMAG, SELFMAG) ||
	    e.e_ident[EI_CLASS] != ELFCLASS64 ||
	    e.e_phentsize != sizeof(Elf64_Phdr) || !e.e_phnum ||
	    e.e_phnum > PHDRS_MAX || e.e_phoff > m0->end - m0->start ||
	    e.e_phnum * sizeof(Elf64_Phdr) > m0->end - m0->start - e.e_phoff ||
	    read_mem(c, m0->start + e.e_phoff, ph,
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
	return read_mem(c, di->u.rti.table_data + i * 8, e, 8);
}

/*
 * The entry of the table @di for @ip: the last whose start is not above
 * it, with its FDE's address.  0, or -UNW_ENOINFO.
 */
static int find_fde(struct unwind_core *c, const unw_dyn_info_t *di,
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
	return read_mem(arg, addr, buf, len);
}

/* Has the FDE at @fde passed cfi_check_fde() since the maps were set?
 * (A direct-mapped memory of those that did.) */
static bool fde_checked(struct unwind_core *c, uint64_t fde)
{
	size_t i = (size_t)((fde * 0x9e3779b97f4a7c15ull) >> 54);

	if (c->checked[i] == fde + 1)
		return true;
	if (cfi_check_fde(cfi_read, c, fde, arch_unw_columns))
		return false;
	c->checked[i] = fde + 1;
	return true;
}

static int find_proc_info(unw_addr_space_t as, unw_word_t ip,
			  unw_proc_info_t *pi, int need_unwind_info, void *arg)
{
	struct unwind_core *c = arg;
	unw_dyn_info_t di;
	uint64_t fde;
	int32_t entry[2];
	int rc = remote_table(c, ip, &di);

	if (!rc)
		rc = find_fde(c, &di, ip, entry, &fde);
	if (rc)
		return rc;
	if (!fde_checked(c, fde))
		return -UNW_ENOINFO;
	memcpy(c->synth, entry, sizeof(c->synth));
	di.u.rti.table_data = SYNTH_TABLE;
	/* in words: one (start, FDE) pair */
	di.u.rti.table_len = sizeof(c->synth) / (sizeof(unw_word_t));
	c->searching = true;
	rc = UNW_OBJ(dwarf_search_unwind_table)(as, ip, &di, pi,
						need_unwind_info, arg);
	c->searching = false;
	return rc;
}

static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi,
			    void *arg)
{
	(void)as;
	(void)arg;
	/* what dwarf_search_unwind_table() gave, as libunwind-ptrace's
	 * own _UPT_put_unwind_info() frees it */
	free(pi->unwind_info);
	pi->unwind_info = NULL;
}

/* Code registered at run time (JITs): not looked for. */
static int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *addr,
				  void *arg)
{
	(void)as;
	(void)addr;
	(void)arg;
	return -UNW_ENOINFO;
}

/* Reads only: the unwinder never writes to the target. */
static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val,
		      int write, void *arg)
{
	(void)as;
	if (write || read_mem(arg, addr, val, sizeof(*val)))
		return -UNW_EINVAL;
	return 0;
}

static int access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val,
		      int write, void *arg)
{
	const struct unwind_core *c = arg;
	const struct arch_unw_regs *r = &c->job->regs;

	(void)as;
	if (write)
		return -UNW_EINVAL;
	if (reg < 0 || reg >= ARCH_UNW_NREGS || !(r->valid >> reg & 1))
		return -UNW_EBADREG;
	*val = r->v[reg];
	return 0;
}

static int access_fpreg(unw_addr_space_t as, unw_regnum_t reg,
			unw_fpreg_t *val, int write, void *arg)
{
	(void)as;
	(void)reg;
	(void)val;
	(void)write;
	(void)arg;
	return -UNW_EBADREG;
}

static int resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
	(void)as;
	(void)c;
	(void)arg;
	return -UNW_EINVAL;
}

static unw_accessors_t accessors = {
	.find_proc_info = find_proc_info,
	.put_unwind_info = put_unwind_info,
	.get_dyn_info_list_addr = get_dyn_info_list_addr,
	.access_mem = access_mem,
	.access_reg = access_reg,
	.access_fpreg = access_fpreg,
	.resume = resume,
	.get_proc_name = NULL,	/* memsnap symbolizes itself */
};

struct unwind_core *unwind_core_new(unwind_page_fn page, void *arg)
{
	struct unwind_core *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->cache = page_cache_new(page, arg);
	c->as = unw_create_addr_space(&accessors, 0);
	if (!c->cache || !c->as) {
		unwind_core_free(c);
		return NULL;
	}
	/* The code does not change while memsnap reads: what libunwind
	 * learnt of one pc serves every stack that passes there.  Asked
	 * per thread (one here), since the global cache masks every
	 * signal with two system calls around each look; but libunwind
	 * (1.6 as 1.8) makes it global all the same (its configure never
	 * defines the HAVE___THREAD it asks for), so each frame stepped
	 * costs two rt_sigprocmask: most of a long unwind's time in an
	 * emulated guest.  sampler/dump.c unwinds alike records once. */
	unw_set_caching_policy(c->as, UNW_CACHE_PER_THREAD);
	return c;
}

void unwind_core_free(struct unwind_core *c)
{
	if (!c)
		return;
	if (c->as)
		unw_destroy_addr_space(c->as);
	ehframe_tables_free(c->eh, c->neh);
	free(c->maps);
	page_cache_free(c->cache);
	free(c);
}

int unwind_core_maps(struct unwind_core *c, const struct mapline *v, size_t n,
		     const struct unwind_code *extra,
		     const struct unwind_ehframe *eh, size_t neh)
{
	struct mapline *copy = NULL;
	size_t i;

	if (neh > UNWIND_EHFRAMES)
		return -EINVAL;
	/* in order, as /proc prints them: the search bisects (and no
	 * qsort(), which asks the system for its memory size) */
	for (i = 0; i < n; i++)
		if (v[i].start >= v[i].end || (i && v[i].start < v[i - 1].end))
			return -EINVAL;
	if (n) {
		copy = malloc(n * sizeof(*copy));
		if (!copy)
			return -ENOMEM;
		memcpy(copy, v, n * sizeof(*copy));
	}
	free(c->maps);
	c->maps = copy;
	c->nmaps = n;
	/* Other objects: their tables are made again when needed. */
	ehframe_tables_free(c->eh, c->neh);
	c->neh = 0;
	c->eh_left = EHFRAME_ENTRIES;
	for (i = 0; i < neh; i++) {
		const struct mapline *m = map_of(c, eh[i].object);

		if (eh[i].len < 8 || eh[i].len > UNWIND_EHFRAME_MAX ||
		    eh[i].addr + eh[i].len < eh[i].addr || !m ||
		    m->start != eh[i].object || m->offset || !m->inode)
			continue;
		c->eh[c->neh++].d = eh[i];
	}
	c->extra = extra ? *extra : (struct unwind_code){ 0 };
	if (c->extra.lo >= c->extra.hi || c->extra.eh_frame_hdr < c->extra.lo ||
	    c->extra.eh_frame_hdr >= c->extra.hi)
		c->extra = (struct unwind_code){ 0 };
	/* Other mappings, other code: nothing learnt before holds. */
	page_cache_clear(c->cache);
	memset(c->checked, 0, sizeof(c->checked));
	unw_flush_cache(c->as, 0, 0);
	return 0;
}

int unwind_core_run(struct unwind_core *c, const struct unwind_job *j,
		    uint64_t *pcs, size_t max, bool *whole,
		    unsigned long *reads)
{
	unw_cursor_t cur;
	size_t n = 0;
	int rc, step = -1;
	bool cfi = true;

	*whole = false;
	*reads = 0;
	if (!max)
		return 0;
	c->job = j;
	c->reads = 0;
	c->gen++;
	rc = unw_init_remote(&cur, c->as, c);
	if (rc < 0) {
		rc = unw_err(rc);
		goto out;
	}
	do {
		unw_proc_info_t pi;
		unw_word_t ip;

		if (unw_get_reg(&cur, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		pcs[n++] = ip;
		/* Without CFI libunwind guesses (a frame-pointer chain), and
		 * a guess may skip frames or end early.  A signal trampoline
		 * needs none: libunwind knows it by its code and steps
		 * through the signal frame's saved registers (AArch64's, in
		 * the vdso, has no CFI by design).  (A saved stack's caller
		 * does not ask, unless it stands for a live one.) */
		if (!j->saved || j->cfi)
			cfi &= unw_get_proc_info(&cur, &pi) == 0 ||
			       unw_is_signal_frame(&cur) > 0;
	} while (n < max && (step = unw_step(&cur)) > 0);
	*whole = step == 0 && cfi && c->reads <= j->budget;
	rc = (int)n;
out:
	*reads = c->reads;
	c->job = NULL;
	c->searching = false;
	return rc;
}

void unwind_regs_numbered(const uint64_t *v, const unsigned char *num,
			  unsigned int n, struct arch_unw_regs *r)
{
	unsigned int i;

	memset(r, 0, sizeof(*r));
	for (i = 0; i < n; i++) {
		if (num[i] >= ARCH_UNW_NREGS)
			continue;
		r->v[num[i]] = arch_strip_pac(v[i]);
		r->valid |= 1ull << num[i];
	}
}
