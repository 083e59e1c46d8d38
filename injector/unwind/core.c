/*
 * The unwinder proper (injector/unwind/core.h): libunwind's remote
 * unwinder with memsnap's accessors.  libunwind's own lookup
 * (_UPT_find_proc_info) would open each object by the path its maps
 * line shows; here the ELF and program headers are read at the object's
 * first mapping, as loaded, and so is its PT_GNU_EH_FRAME search table.
 *
 * An object with no such header (gcc -static writes none) may come
 * with its .eh_frame's place, which memsnap found in its section
 * headers (injector/unwind/ehfile.c): the table is then made from the
 * records (injector/unwind/ehframe.c) and kept here.
 *
 * The FDE for a pc is found by memsnap in that table, it and its CIE
 * checked (injector/unwind/cfi.c), and libunwind is given a search table
 * of that one entry, at an address no process maps (SYNTH_TABLE, served
 * only during the search): what libunwind then parses is exactly what
 * memsnap checked.
 */
#include "injector/unwind/core_internal.h"

#include "injector/unwind/cfi.h"
#include "injector/unwind/pages.h"

#include <elf.h>
#include <errno.h>
#include <libunwind.h>
#include <stdlib.h>
#include <string.h>


int core_unw_err(int e)
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
const struct mapline *core_map_of(const struct unwind_core *c,
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

bool core_in_extra(const struct unwind_core *c, uint64_t addr, size_t len)
{
	return c->extra.hi && addr >= c->extra.lo && addr < c->extra.hi &&
	       len <= c->extra.hi - addr;
}

/* Pages @addr..@addr+@len through the cache: kept between unwinds if
 * @keep, else only for this one. */
int core_read_pages(struct unwind_core *c, uint64_t addr, void *buf,
		    size_t len, bool keep)
{
	return page_cache_read(c->cache, addr, buf, len, keep ? 0 : c->gen,
			       c->indexing);
}

int core_read_mem(struct unwind_core *c, uint64_t addr, void *buf,
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
	m = core_map_of(c, addr);
	keep = core_in_extra(c, addr, len) ||
	       (m && m->inode && len <= m->end - addr);
	/* A saved thread's stack has moved on: only code and CFI. */
	if (j->saved && !keep)
		return -1;
	return core_read_pages(c, addr, buf, len, keep);
}

static int find_proc_info(unw_addr_space_t as, unw_word_t ip,
			  unw_proc_info_t *pi, int need_unwind_info, void *arg)
{
	struct unwind_core *c = arg;
	unw_dyn_info_t di;
	uint64_t fde;
	int32_t entry[2];
	int rc = core_remote_table(c, ip, &di);

	if (!rc)
		rc = core_find_fde(c, &di, ip, entry, &fde);
	if (rc)
		return rc;
	if (!core_fde_checked(c, fde))
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
	if (write || core_read_mem(arg, addr, val, sizeof(*val)))
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
		const struct mapline *m = core_map_of(c, eh[i].object);

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
		rc = core_unw_err(rc);
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
