#ifndef MEMSNAP_INJECTOR_UNWIND_CFI_H
#define MEMSNAP_INJECTOR_UNWIND_CFI_H

#include <stddef.h>
#include <stdint.h>

/*
 * What memsnap checks of an FDE and its CIE (the target's .eh_frame)
 * before libunwind parses them.  libunwind 1.6 indexes arrays of
 * DWARF_NUM_PRESERVED_REGS (@columns) with register numbers it reads
 * from them unchecked: a CIE's return-address column (its apply_reg_state
 * reads loc[column]), and the second register of DW_CFA_register (it
 * copies loc[reg2]).  A fuzzer over an instrumented libunwind found the
 * second (tests/fuzz/fuzz_unwind.c, bench/fuzz.sh).
 *
 * The check reads what libunwind will read, in its order, through @read
 * (the same budget of reads), and refuses anything outside the formats
 * linkers write for .eh_frame:
 *   - 32-bit lengths (not 0, not the 64-bit escape), a CIE id of 0;
 *   - CIE version 1 or 3; an augmentation of "z", "R", "P", "L", "S",
 *     "B" ("z" first), pointer encodings of fixed size;
 *   - every LEB128 at most 10 bytes;
 *   - every register number of the return-address column and of the
 *     CFA program (CIE and FDE, every operation) below @columns;
 *   - every operand inside its CIE or FDE, at most CFI_OPS_MAX
 *     operations each.
 */
typedef int (*cfi_read_fn)(void *arg, uint64_t addr, void *buf, size_t len);

#define CFI_OPS_MAX 65536

/* NULL when the FDE at @fde may be handed to libunwind, else why not
 * (a constant string: "return-address column 100000000"). */
const char *cfi_check_fde(cfi_read_fn read, void *arg, uint64_t fde,
			  unsigned int columns);

/*
 * The CIE at @cie checked as cfi_check_fde() checks an FDE's, and the
 * pointer encoding of its FDEs' addresses (its 'R' augmentation; 0,
 * DW_EH_PE_absptr, without) into *@enc: NULL, or why not.
 */
const char *cfi_check_cie(cfi_read_fn read, void *arg, uint64_t cie,
			  unsigned int columns, uint8_t *enc);

/* Bytes of a pointer in DWARF encoding @enc: 2, 4 or 8, or 0 for one
 * not accepted (DW_EH_PE_omit, the LEB128 forms, anything unknown). */
unsigned int cfi_enc_size(uint8_t enc);

#endif
