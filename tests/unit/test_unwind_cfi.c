/*
 * injector/unwind/cfi.c: the FDEs and CIEs memsnap hands libunwind.
 * Each test builds a CIE and an FDE as an assembler writes them, spoils
 * one thing, and checks that the spoilt one is refused and the good one
 * passes (so that a refusal is the spoiling's, not a parser that refuses
 * all).
 */
#include "injector/unwind/cfi.h"

#include <criterion/criterion.h>
#include <string.h>

#define BASE 0x10000u
#define COLUMNS 17	/* x86-64's, as libunwind 1.6 has them */

static unsigned char mem[512];
static size_t used;

static int rd(void *arg, uint64_t addr, void *buf, size_t len)
{
	(void)arg;
	if (addr < BASE || addr - BASE > sizeof(mem) ||
	    len > sizeof(mem) - (addr - BASE))
		return -1;
	memcpy(buf, mem + (addr - BASE), len);
	return 0;
}

static void put(const void *p, size_t n)
{
	cr_assert_leq(used + n, sizeof(mem));
	memcpy(mem + used, p, n);
	used += n;
}

static void put32(uint32_t v)
{
	put(&v, 4);
}

/*
 * A CIE ("zR", version @version, return column @ra (@ra_len bytes, as
 * given), @prog its program) at BASE, then an FDE of @fprog: the FDE's
 * address.
 */
static uint64_t build(uint8_t version, const char *aug,
		      const unsigned char *ra, size_t ra_len,
		      const unsigned char *prog, size_t prog_len,
		      const unsigned char *fprog, size_t fprog_len)
{
	unsigned char head[64];
	size_t n = 0, cie_len, fde_at;

	memset(mem, 0, sizeof(mem));
	used = 0;
	head[n++] = version;
	memcpy(head + n, aug, strlen(aug) + 1);
	n += strlen(aug) + 1;
	head[n++] = 0x01;			/* code alignment 1 */
	head[n++] = 0x78;			/* data alignment -8 */
	memcpy(head + n, ra, ra_len);
	n += ra_len;
	if (aug[0] == 'z') {
		head[n++] = 0x01;		/* augmentation data: 1 byte */
		head[n++] = 0x1b;		/* pcrel | sdata4 */
	}
	cie_len = 4 + n + prog_len;
	put32((uint32_t)cie_len);
	put32(0);				/* CIE id */
	put(head, n);
	put(prog, prog_len);
	fde_at = used;
	put32((uint32_t)(4 + 4 + 4 + (aug[0] == 'z' ? 1 : 0) + fprog_len));
	put32((uint32_t)(fde_at + 4));		/* back to the CIE */
	put32(0x1000);				/* pc_begin */
	put32(0x20);				/* pc_range */
	if (aug[0] == 'z')
		put("\0", 1);			/* no augmentation data */
	put(fprog, fprog_len);
	return BASE + fde_at;
}

static const unsigned char ra16[] = { 0x10 };
/* DW_CFA_def_cfa rsp+8; DW_CFA_offset rip, cfa-8 */
static const unsigned char cie_prog[] = { 0x0c, 0x07, 0x08, 0x90, 0x01 };
/* advance 1; def_cfa_offset 16; offset rbp cfa-16; advance 3;
 * def_cfa_register rbp */
static const unsigned char fde_prog[] = { 0x41, 0x0e, 0x10, 0x86, 0x02,
					  0x43, 0x0d, 0x06 };

static const char *check(uint64_t fde)
{
	return cfi_check_fde(rd, NULL, fde, COLUMNS);
}

Test(unwind_cfi, what_gcc_writes_passes)
{
	uint64_t fde = build(1, "zR", ra16, 1, cie_prog, sizeof(cie_prog),
			     fde_prog, sizeof(fde_prog));

	cr_assert_null(check(fde), "%s", check(fde));
	fde = build(3, "zR", ra16, 1, cie_prog, sizeof(cie_prog), fde_prog,
		    sizeof(fde_prog));
	cr_assert_null(check(fde), "%s", check(fde));
}

/* The hole: `.cfi_return_column 100000000` with a version 3 CIE. */
Test(unwind_cfi, return_column_100000000_is_refused)
{
	static const unsigned char big[] = { 0x80, 0xc2, 0xd7, 0x2f };
	uint64_t fde = build(3, "zR", big, sizeof(big), cie_prog,
			     sizeof(cie_prog), fde_prog, sizeof(fde_prog));

	cr_assert_not_null(check(fde));
}

Test(unwind_cfi, return_column_just_past_the_registers_is_refused)
{
	static const unsigned char ra17[] = { COLUMNS };
	uint64_t fde = build(1, "zR", ra17, 1, cie_prog, sizeof(cie_prog),
			     fde_prog, sizeof(fde_prog));

	cr_assert_not_null(check(fde));
}

/* libunwind copies loc[reg2] of DW_CFA_register unchecked (found by
 * fuzzing it instrumented: index 80 of 17). */
Test(unwind_cfi, register_rule_from_register_80_is_refused)
{
	static const unsigned char good[] = { 0x09, 0x03, 0x06 };
	static const unsigned char bad[] = { 0x09, 0x03, 0x50 };
	uint64_t fde;

	fde = build(1, "zR", ra16, 1, cie_prog, sizeof(cie_prog), good,
		    sizeof(good));
	cr_assert_null(check(fde), "%s", check(fde));
	fde = build(1, "zR", ra16, 1, cie_prog, sizeof(cie_prog), bad,
		    sizeof(bad));
	cr_assert_not_null(check(fde));
	/* the same in the CIE's own program */
	fde = build(1, "zR", ra16, 1, bad, sizeof(bad), fde_prog,
		    sizeof(fde_prog));
	cr_assert_not_null(check(fde));
}

Test(unwind_cfi, every_register_operand_is_bounded)
{
	/* offset (low bits), restore (low bits), offset_extended,
	 * def_cfa, val_offset_sf, expression */
	static const unsigned char ops[][4] = {
		{ 0x80 | 40, 0x01 }, { 0xc0 | 40 }, { 0x05, 40, 0x01 },
		{ 0x0c, 40, 0x08 }, { 0x15, 40, 0x7f }, { 0x10, 40, 0x00 },
	};
	static const size_t lens[] = { 2, 1, 3, 3, 3, 3 };
	size_t i;

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		unsigned char op[4];
		uint64_t fde;

		memcpy(op, ops[i], lens[i]);
		fde = build(1, "zR", ra16, 1, cie_prog, sizeof(cie_prog), op,
			    lens[i]);
		cr_assert_not_null(check(fde), "operation %zu", i);
		/* register 6 (rbp) instead: passes */
		op[op[0] >= 0x40 ? 0 : 1] = op[0] >= 0x40 ?
						    (unsigned char)((op[0] & 0xc0) | 6) :
						    6;
		fde = build(1, "zR", ra16, 1, cie_prog, sizeof(cie_prog), op,
			    lens[i]);
		cr_assert_null(check(fde), "operation %zu: %s", i, check(fde));
	}
}

Test(unwind_cfi, operands_past_the_entry_are_refused)
{
	/* def_cfa_expression of 100 bytes in a 2-byte program */
	static const unsigned char expr[] = { 0x0f, 100 };
	/* advance_loc4 cut short */
	static const unsigned char cut[] = { 0x04, 0x01 };
	uint64_t fde;

	fde = build(1, "zR", ra16, 1, cie_prog, sizeof(cie_prog), expr,
		    sizeof(expr));
	cr_assert_not_null(check(fde));
	fde = build(1, "zR", ra16, 1, cie_prog, sizeof(cie_prog), cut,
		    sizeof(cut));
	cr_assert_not_null(check(fde));
}

Test(unwind_cfi, formats_linkers_do_not_write_are_refused)
{
	static const unsigned char long_leb[] = { 0x0e, 0x80, 0x80, 0x80, 0x80,
						  0x80, 0x80, 0x80, 0x80,
						  0x80, 0x80, 0x01 };
	static const unsigned char unknown_op[] = { 0x3f };
	uint64_t fde;

	fde = build(4, "zR", ra16, 1, cie_prog, sizeof(cie_prog), fde_prog,
		    sizeof(fde_prog));
	cr_assert_not_null(check(fde), "version 4");
	fde = build(1, "zRe", ra16, 1, cie_prog, sizeof(cie_prog), fde_prog,
		    sizeof(fde_prog));
	cr_assert_not_null(check(fde), "augmentation 'e'");
	fde = build(1, "zR", ra16, 1, cie_prog, sizeof(cie_prog), long_leb,
		    sizeof(long_leb));
	cr_assert_not_null(check(fde), "an 11-byte LEB128");
	fde = build(1, "zR", ra16, 1, cie_prog, sizeof(cie_prog), unknown_op,
		    sizeof(unknown_op));
	cr_assert_not_null(check(fde), "operation 0x3f");
	/* the 64-bit length escape */
	fde = build(1, "zR", ra16, 1, cie_prog, sizeof(cie_prog), fde_prog,
		    sizeof(fde_prog));
	memset(mem + (fde - BASE), 0xff, 4);
	cr_assert_not_null(check(fde), "64-bit FDE length");
	/* a CIE pointer of 0: a CIE, not an FDE */
	fde = build(1, "zR", ra16, 1, cie_prog, sizeof(cie_prog), fde_prog,
		    sizeof(fde_prog));
	memset(mem + (fde - BASE) + 4, 0, 4);
	cr_assert_not_null(check(fde), "CIE pointer 0");
}

/* Nothing is read outside what @read gives: an FDE whose CIE pointer
 * leads out of memory fails cleanly. */
Test(unwind_cfi, a_cie_out_of_reach_is_refused)
{
	uint64_t fde = build(1, "zR", ra16, 1, cie_prog, sizeof(cie_prog),
			     fde_prog, sizeof(fde_prog));
	int32_t far = 0x40000000;

	memcpy(mem + (fde - BASE) + 4, &far, 4);
	cr_assert_not_null(check(fde));
}
