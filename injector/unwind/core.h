#ifndef MEMSNAP_INJECTOR_UNWIND_CORE_H
#define MEMSNAP_INJECTOR_UNWIND_CORE_H

/*
 * The unwinder proper: libunwind's remote unwinder over memory that
 * comes page by page from a source memsnap chooses.  It knows neither
 * ptrace nor /proc: it runs inside the unwinder's sandbox
 * (injector/unwind/host.c), where the pages come over a socket, and in the
 * fuzz harness (tests/fuzz/fuzz_unwind.c), where they come from the
 * input.
 *
 * Everything it reads is the target's and may be hostile: registers,
 * stack words, the ELF and program headers of the objects the maps
 * show, their PT_GNU_EH_FRAME search tables (or, without one, their
 * .eh_frame records) and the FDEs and CIEs behind them.  So each unwind has a budget of memory reads, and
 * libunwind is handed no FDE or CIE that memsnap has not checked first
 * (injector/unwind/cfi.h: the formats linkers write, and register
 * numbers libunwind 1.6 can index with, arch_unw_columns), through a
 * one-entry search table memsnap makes for the FDE it found and
 * checked.
 */
#include "injector/arch.h"
#include "injector/mapline.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where the unwinder reads: page @addr (UNWIND_PAGE bytes, aligned)
 * into @buf, for one unwind or, @index, for the table of an .eh_frame
 * (struct unwind_ehframe: read once, by the first unwind that needs
 * it).  0, or -1 when it cannot be read. */
#define UNWIND_PAGE 4096u
typedef int (*unwind_page_fn)(void *arg, uint64_t addr, void *buf,
			      bool index);

/* Code with no ELF header around it (the sampler's image): [lo, hi)
 * and its .eh_frame_hdr. */
struct unwind_code {
	uint64_t lo, hi, eh_frame_hdr;
};

/*
 * An object with no PT_GNU_EH_FRAME (gcc -static writes none) and the
 * .eh_frame its section headers show: the start of its first mapping
 * (file offset 0), and where the section is loaded, [addr, addr + len).
 * Its table is made from the records on the first pc that needs it
 * (injector/unwind/ehframe.h) and kept until the next maps.  At most
 * UNWIND_EHFRAMES of them, UNWIND_EHFRAME_MAX bytes each.
 */
struct unwind_ehframe {
	uint64_t object, addr, len;
};

#define UNWIND_EHFRAMES 16
#define UNWIND_EHFRAME_MAX (64u << 20)

struct unwind_core;

/* A core reading through @page(@arg, ...).  NULL on ENOMEM. */
struct unwind_core *unwind_core_new(unwind_page_fn page, void *arg);
void unwind_core_free(struct unwind_core *c);

/*
 * The process's mappings (copied; in order and apart, as /proc prints
 * them, else -EINVAL), an extra code range (@extra may be NULL) and
 * the @neh objects @eh whose .eh_frame has no header (copied; at most
 * UNWIND_EHFRAMES, else -EINVAL; one longer than UNWIND_EHFRAME_MAX or
 * of no mapped object is left out), which find each pc's object and
 * its table.  The pages of file mappings and of @extra are kept
 * between unwinds (code and CFI do not change while memsnap reads);
 * others only for one unwind.  0, -EINVAL or -ENOMEM.
 */
int unwind_core_maps(struct unwind_core *c, const struct mapline *v, size_t n,
		     const struct unwind_code *extra,
		     const struct unwind_ehframe *eh, size_t neh);

/*
 * @r from @n registers @v, @v[i] being register @num[i] in DWARF's
 * numbering as libunwind extends it (numbers past the unwinder's are
 * left out), without pointer-authentication bits.
 */
void unwind_regs_numbered(const uint64_t *v, const unsigned char *num,
			  unsigned int n, struct arch_unw_regs *r);

/*
 * One unwind.  @stack (may be NULL): a copy of @stack_len bytes of the
 * stack taken at @stack_lo, read instead of the page source, with
 * pointer-authentication bits stripped from the words read there (AArch64
 * return addresses saved signed).  @saved: the thread is no longer where
 * its registers say (a sampler record), so nothing but the copy, the file
 * mappings and the extra range is read.  @cfi: whether every frame had
 * CFI is judged for a saved stack too.  @touched (may be NULL, zeroed by
 * the caller): a bit set for each word of the copy the unwind read.
 */
struct unwind_job {
	struct arch_unw_regs regs;
	uint64_t stack_lo;
	const unsigned char *stack;
	size_t stack_len;
	unsigned long budget;	/* memory reads, at most */
	bool saved, cfi;
	uint64_t *touched;	/* (stack_len + 7) / 8 bits */
};

/*
 * The frames of @j, innermost first, into @pcs (at most @max): the
 * count, or -errno (libunwind's errors: -EIO, -ENOMEM, -EINVAL).
 * *@whole: the walk reached the outermost frame, with CFI for every
 * frame (for a saved stack only with @cfi) and the budget not spent: the
 * frames are all there are.  *@reads: the memory reads it made.
 */
int unwind_core_run(struct unwind_core *c, const struct unwind_job *j,
		    uint64_t *pcs, size_t max, bool *whole,
		    unsigned long *reads);

#endif
