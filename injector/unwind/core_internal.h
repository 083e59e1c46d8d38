#ifndef MEMSNAP_INJECTOR_UNWIND_CORE_INTERNAL_H
#define MEMSNAP_INJECTOR_UNWIND_CORE_INTERNAL_H

#include "injector/unwind/core.h"
#include "injector/unwind/ehframe.h"

#include <libunwind.h>
#include <stdbool.h>

/*
 * Between the unwinder's accessors (core.c) and its lookup of a pc's
 * FDE (lookup.c).
 */

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

/* A libunwind error as -errno. */
int core_unw_err(int e);

/* The mapping that holds @addr, or NULL. */
const struct mapline *core_map_of(const struct unwind_core *c, uint64_t addr);

/* Is [@addr, +@len) within the job's extra range? */
bool core_in_extra(const struct unwind_core *c, uint64_t addr, size_t len);

/* Pages @addr..@addr+@len through the cache: kept between unwinds if
 * @keep, else only for this one. */
int core_read_pages(struct unwind_core *c, uint64_t addr, void *buf,
		    size_t len, bool keep);

/* The target's memory as the job may read it (its stack copy, the
 * one-entry table, the mappings by its rules): 0, or -1 refused. */
int core_read_mem(struct unwind_core *c, uint64_t addr, void *buf,
		  size_t len);

/* The search table for @ip's object in *@di: 0 or a libunwind error. */
int core_remote_table(struct unwind_core *c, uint64_t ip, unw_dyn_info_t *di);

/* @ip's entry of @di (start, FDE, as the table holds them) in @entry
 * and its FDE's address in *@fde: 0 or a libunwind error. */
int core_find_fde(struct unwind_core *c, const unw_dyn_info_t *di,
		  uint64_t ip, int32_t entry[2], uint64_t *fde);

/* Has the FDE at @fde passed cfi_check_fde() since the maps were set?
 * It is checked now if not (and remembered when it passes). */
bool core_fde_checked(struct unwind_core *c, uint64_t fde);

#endif
