/*
 * Unwinding a stopped thread with libunwind-ptrace, the CFI read from
 * the target's memory.  libunwind's own lookup (_UPT_find_proc_info)
 * opens each object by the path its maps line shows, under
 * /proc/PID/root: a process can name a FIFO there (memsnap hangs with a
 * thread stopped) or a symlink into the host's /dev (memsnap, root,
 * opens a device).  The loaded image holds what is needed: the ELF and
 * program headers at the object's first mapping, and the
 * PT_GNU_EH_FRAME search table, which dwarf_search_unwind_table()
 * reads remotely, as libunwind-ptrace does with the table it found.
 */
#include "injector/unwind.h"

#include "injector/engine.h"

#include <elf.h>
#include <errno.h>
#include <libunwind-ptrace.h>
#include <stdlib.h>
#include <string.h>

/* libunwind's table search: exported, used by libunwind-ptrace itself,
 * but declared in no public header. */
extern int UNW_OBJ(dwarf_search_unwind_table)(unw_addr_space_t as,
					      unw_word_t ip,
					      unw_dyn_info_t *di,
					      unw_proc_info_t *pi,
					      int need_unwind_info, void *arg);

/* Memory reads one unwind may make: a hostile FDE cannot keep memsnap
 * (and the stopped thread) busy for long. */
#define READ_BUDGET 200000
/* The same for one saved stack of the many a dump unwinds. */
#define SAVED_READ_BUDGET 20000

#define PHDRS_MAX 64

/* DWARF pointer encodings the search table uses (LSB eh_frame_hdr). */
#define DW_EH_PE_udata4 0x03
#define DW_EH_PE_sdata4 0x0b
#define DW_EH_PE_datarel 0x30

/* Pages of the target's code and CFI kept while unwinding many saved
 * stacks (a dump's records): direct-mapped, by page address. */
#define CACHE_PAGES 512
#define CACHE_PAGE 4096u

struct page_cache {
	uint64_t addr[CACHE_PAGES];	/* page address + 1; 0: empty */
	unsigned char data[CACHE_PAGES][CACHE_PAGE];
};

struct unw_arg {
	pid_t pid;
	const struct mapline *maps;
	size_t nmaps;
	void *upt;			/* libunwind-ptrace's, for registers */
	/* a saved thread instead of a stopped one (unwind_saved()) */
	const struct unwind_saved *saved;
	const struct unwinder *uw;
	unsigned long reads;
};

struct unwinder {
	pid_t pid;
	struct mapline *maps;
	size_t nmaps;
	struct unwind_code extra;
	unw_addr_space_t as;
	struct page_cache *cache;
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
static const struct mapline *map_of(const struct unw_arg *u, uint64_t addr)
{
	size_t i;

	for (i = 0; i < u->nmaps; i++)
		if (addr >= u->maps[i].start && addr < u->maps[i].end)
			return &u->maps[i];
	return NULL;
}

/* A read through the cache, for memory that does not change: the code
 * and CFI of a file mapping or of the extra code range. */
static int read_cached(struct unw_arg *u, uint64_t addr, void *buf,
		       size_t len)
{
	struct page_cache *c = u->uw->cache;
	unsigned char *out = buf;

	while (len) {
		uint64_t page = addr & ~(uint64_t)(CACHE_PAGE - 1);
		size_t off = (size_t)(addr - page), n = CACHE_PAGE - off;
		size_t slot = (size_t)(page / CACHE_PAGE) % CACHE_PAGES;

		if (n > len)
			n = len;
		if (c->addr[slot] != page + 1) {
			if (proc_read_mem(u->pid, page, c->data[slot],
					  CACHE_PAGE))
				return proc_read_mem(u->pid, addr, out, len) ?
					       -1 : 0;
			c->addr[slot] = page + 1;
		}
		memcpy(out, c->data[slot] + off, n);
		out += n;
		addr += n;
		len -= n;
	}
	return 0;
}

/*
 * A saved thread is read from its stack copy, and from the target's
 * code and CFI (file mappings, the extra code range) through the cache:
 * the live stack has moved on since, and anything else in the target is
 * no business of an unwinder.
 */
static int read_saved(struct unw_arg *u, uint64_t addr, void *buf,
		      size_t len)
{
	const struct unwind_saved *sv = u->saved;
	const struct mapline *m;

	if (addr >= sv->stack_lo && len <= sv->stack_len &&
	    addr - sv->stack_lo <= sv->stack_len - len) {
		memcpy(buf, sv->stack + (addr - sv->stack_lo), len);
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
	if (u->uw->extra.hi && addr >= u->uw->extra.lo &&
	    addr < u->uw->extra.hi && len <= u->uw->extra.hi - addr)
		return read_cached(u, addr, buf, len);
	m = map_of(u, addr);
	if (!m || !m->inode || len > m->end - addr)
		return -1;
	return read_cached(u, addr, buf, len);
}

static int read_remote(struct unw_arg *u, uint64_t addr, void *buf,
		       size_t len)
{
	if (++u->reads > (u->saved ? SAVED_READ_BUDGET : READ_BUDGET))
		return -1;
	if (u->saved)
		return read_saved(u, addr, buf, len);
	return proc_read_mem(u->pid, addr, buf, len) ? -1 : 0;
}

/* The first mapping (file offset 0) of the object @m belongs to: the
 * same file, mapped just below, offsets going down. */
static const struct mapline *object_start(const struct unw_arg *u,
					  const struct mapline *m)
{
	const struct mapline *first = u->maps;

	while (m->offset && m > first) {
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
static int search_table(struct unw_arg *u, uint64_t hdr, uint64_t hdr_len,
			uint64_t lo, uint64_t hi, unw_dyn_info_t *di)
{
	unsigned char h[4];
	uint32_t count;
	uint64_t len;

	/* version 1, eh_frame_ptr and fde_count 4 bytes each, then the
	 * table: (start, fde) pairs of 4-byte offsets from hdr */
	if (hdr_len < 12 || read_remote(u, hdr, h, sizeof(h)) ||
	    read_remote(u, hdr + 8, &count, sizeof(count)) || h[0] != 1 ||
	    ((h[1] & 0x0f) != DW_EH_PE_udata4 &&
	     (h[1] & 0x0f) != DW_EH_PE_sdata4) ||
	    (h[2] != DW_EH_PE_udata4 && h[2] != DW_EH_PE_sdata4) ||
	    h[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
		return -UNW_ENOINFO;
	len = (uint64_t)count * 8;
	if (!count || len > hdr_len - 12)
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

static int remote_table(struct unw_arg *u, unw_word_t ip, unw_dyn_info_t *di)
{
	const struct mapline *m = map_of(u, ip), *m0;
	Elf64_Phdr ph[PHDRS_MAX];
	const Elf64_Phdr *eh = NULL, *text = NULL;
	Elf64_Ehdr e;
	uint64_t base;
	int i, have_base = 0;

	if (u->uw && u->uw->extra.hi && ip >= u->uw->extra.lo &&
	    ip < u->uw->extra.hi)
		return search_table(u, u->uw->extra.eh_frame_hdr,
				    u->uw->extra.hi - u->uw->extra.eh_frame_hdr,
				    u->uw->extra.lo, u->uw->extra.hi, di);
	if (!m || m->perms[2] != 'x' || !(m0 = object_start(u, m)))
		return -UNW_ENOINFO;
	if (read_remote(u, m0->start, &e, sizeof(e)) ||
	    memcmp(e.e_ident, ELFMAG, SELFMAG) ||
	    e.e_ident[EI_CLASS] != ELFCLASS64 ||
	    e.e_phentsize != sizeof(Elf64_Phdr) || !e.e_phnum ||
	    e.e_phnum > PHDRS_MAX || e.e_phoff > m0->end - m0->start ||
	    e.e_phnum * sizeof(Elf64_Phdr) > m0->end - m0->start - e.e_phoff ||
	    read_remote(u, m0->start + e.e_phoff, ph,
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
	if (!eh || !text)
		return -UNW_ENOINFO;
	return search_table(u, base + eh->p_vaddr, eh->p_memsz,
			    base + text->p_vaddr,
			    base + text->p_vaddr + text->p_memsz, di);
}

static int find_proc_info(unw_addr_space_t as, unw_word_t ip,
			  unw_proc_info_t *pi, int need_unwind_info, void *arg)
{
	unw_dyn_info_t di;
	int rc = remote_table(arg, ip, &di);

	if (rc)
		return rc;
	return UNW_OBJ(dwarf_search_unwind_table)(as, ip, &di, pi,
						  need_unwind_info, arg);
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
	if (write || read_remote(arg, addr, val, sizeof(*val)))
		return -UNW_EINVAL;
	return 0;
}

static int access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val,
		      int write, void *arg)
{
	struct unw_arg *u = arg;
	int i;

	if (write)
		return -UNW_EINVAL;
	if (!u->saved)
		return _UPT_access_reg(as, reg, val, 0, u->upt);
	i = arch_unw_saved_index(reg);
	if (i < 0)
		return -UNW_EBADREG;
	*val = arch_strip_pac(u->saved->regs[i]);
	return 0;
}

static int access_fpreg(unw_addr_space_t as, unw_regnum_t reg,
			unw_fpreg_t *val, int write, void *arg)
{
	struct unw_arg *u = arg;

	if (write || u->saved)
		return -UNW_EINVAL;
	return _UPT_access_fpreg(as, reg, val, 0, u->upt);
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

int unwind_thread(const struct inject_session *s, pid_t tid, uint64_t *pcs,
		  size_t max, bool *whole)
{
	struct unw_arg u = { .pid = s->pid, .maps = s->maps,
			     .nmaps = s->nmaps };
	unw_addr_space_t as;
	unw_cursor_t cur;
	size_t n = 0;
	int rc, step = -1;
	bool cfi = true;

	if (whole)
		*whole = false;
	if (max == 0)
		return 0;
	as = unw_create_addr_space(&accessors, 0);
	if (!as)
		return -ENOMEM;
	u.upt = _UPT_create(tid);
	if (!u.upt) {
		unw_destroy_addr_space(as);
		return -ENOMEM;
	}
	rc = unw_init_remote(&cur, as, &u);
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
		 * a guess may skip frames or end early. */
		cfi &= unw_get_proc_info(&cur, &pi) == 0;
	} while (n < max && (step = unw_step(&cur)) > 0);
	if (whole)
		*whole = step == 0 && cfi && u.reads < READ_BUDGET;
	rc = (int)n;
out:
	_UPT_destroy(u.upt);
	unw_destroy_addr_space(as);
	return rc;
}

struct unwinder *unwinder_new(pid_t pid, const struct maps *maps,
			      const struct unwind_code *extra)
{
	struct unwinder *uw = calloc(1, sizeof(*uw));

	if (!uw)
		return NULL;
	uw->pid = pid;
	if (inj_maplines(maps, &uw->maps)) {
		free(uw);
		return NULL;
	}
	uw->nmaps = maps->n;
	if (extra)
		uw->extra = *extra;
	uw->cache = calloc(1, sizeof(*uw->cache));
	uw->as = unw_create_addr_space(&accessors, 0);
	if (!uw->cache || !uw->as) {
		unwinder_free(uw);
		return NULL;
	}
	/* The code does not change while memsnap reads: what libunwind
	 * learnt of one pc serves every stack that passes there. */
	unw_set_caching_policy(uw->as, UNW_CACHE_GLOBAL);
	return uw;
}

void unwinder_free(struct unwinder *uw)
{
	if (!uw)
		return;
	if (uw->as)
		unw_destroy_addr_space(uw->as);
	free(uw->maps);
	free(uw->cache);
	free(uw);
}

int unwind_saved(struct unwinder *uw, const struct unwind_saved *sv,
		 uint64_t *pcs, size_t max)
{
	struct unw_arg u = { .pid = uw->pid, .maps = uw->maps,
			     .nmaps = uw->nmaps, .saved = sv, .uw = uw };
	unw_cursor_t cur;
	size_t n = 0;
	int rc;

	if (max == 0)
		return 0;
	rc = unw_init_remote(&cur, uw->as, &u);
	if (rc < 0)
		return unw_err(rc);
	do {
		unw_word_t ip;

		if (unw_get_reg(&cur, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		pcs[n++] = ip;
	} while (n < max && unw_step(&cur) > 0);
	return (int)n;
}
