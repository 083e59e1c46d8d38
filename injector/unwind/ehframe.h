#ifndef MEMSNAP_INJECTOR_UNWIND_EHFRAME_H
#define MEMSNAP_INJECTOR_UNWIND_EHFRAME_H

/*
 * A search table for an object that has .eh_frame but no
 * PT_GNU_EH_FRAME (gcc -static writes none): what the linker would
 * have put in .eh_frame_hdr, made by walking the records.
 *
 * .eh_frame is a run of records, each a 32-bit length and a 32-bit id:
 * a CIE (id 0), or an FDE whose id is the distance back from the id to
 * its CIE, then its pc_begin in the CIE's pointer encoding ('R'):
 *
 *   14 00 00 00  00 00 00 00  01 7a 52 00 ...     CIE, "zR", 0x1b
 *   24 00 00 00  1c 00 00 00  c0 5f fe ff ...     FDE, its CIE 0x1c
 *                                                 back, pc_begin
 *                                                 pcrel sdata4
 *   ...
 *   00 00 00 00                                   the end
 *
 * Everything is the target's: each read goes through @read, inside
 * [@lo, @lo + @len); the walk ends at a zero length, at the end, or at
 * the first record that is not as linkers write it (a 64-bit length, a
 * length past the end, an id too short), keeping the FDEs before it;
 * each record advances it by its length, and at most EHFRAME_RECORDS
 * records are read.  An FDE is left out when its CIE is not before it
 * in the range or fails cfi_check_cie(), when its pc_begin is neither
 * absolute nor pc-relative, when it covers no byte, or when its
 * pc_begin is not within 2 GiB of @lo (the table's offsets are 32-bit).
 */
#include "injector/unwind/cfi.h"
#include "injector/unwind/core.h"

#include <stddef.h>
#include <stdint.h>

#define EHFRAME_RECORDS (4u << 20)

/*
 * The table of the .eh_frame at [@lo, @lo + @len): *@n entries of
 * (pc_begin - @lo, FDE - @lo), sorted by pc_begin, in *@tab (malloc'ed,
 * the caller frees it; NULL when *@n is 0), @columns as
 * cfi_check_cie() takes it.  0, -E2BIG past @max entries, or -ENOMEM.
 */
int ehframe_index(cfi_read_fn read, void *arg, uint64_t lo, uint64_t len,
		  unsigned int columns, size_t max, int32_t (**tab)[2],
		  size_t *n);

/*
 * The table of one struct unwind_ehframe, made on the first need and
 * then kept, as what failed is: a walk costs the reads of the whole
 * section.
 */
struct ehframe_table {
	struct unwind_ehframe d;
	int32_t (*tab)[2];
	size_t n;
	int state;		/* 0: not made yet; 1: made; -errno */
};

/*
 * @t's table, made through @read (the reads confined to @t's range)
 * if not yet, its entries taken from *@left (entries all tables may
 * still have).  0 (then @t->tab, @t->n), or -errno.
 */
int ehframe_table_get(struct ehframe_table *t, cfi_read_fn read, void *arg,
		      unsigned int columns, size_t *left);

/* The table of the object whose first mapping starts at @object, or
 * NULL. */
struct ehframe_table *ehframe_table_of(struct ehframe_table *v, size_t n,
				       uint64_t object);

/* Each of @v's tables freed, @v[i] emptied. */
void ehframe_tables_free(struct ehframe_table *v, size_t n);

#endif
