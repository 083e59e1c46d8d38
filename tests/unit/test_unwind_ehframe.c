/*
 * injector/unwind/ehframe.c: the search table made from .eh_frame when
 * an object has no PT_GNU_EH_FRAME.  Each test lays out records as a
 * linker writes them, then spoils one: the spoilt record is left out
 * or ends the walk, the good ones before it stay in the table, and the
 * walk reads only the section, a bounded number of times.
 */
#include "injector/unwind/ehframe.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define BASE 0x10000u
#define COLUMNS 17	/* x86-64's, as libunwind 1.6 has them */

static unsigned char mem[1 << 16];
static size_t used;
static unsigned long reads;

static int rd(void *arg, uint64_t addr, void *buf, size_t len)
{
	(void)arg;
	reads++;
	if (addr < BASE || addr - BASE > used || len > used - (addr - BASE))
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

static void reset(void)
{
	memset(mem, 0, sizeof(mem));
	used = 0;
	reads = 0;
}

/* DW_CFA_def_cfa rsp+8; DW_CFA_offset rip, cfa-8 */
static const unsigned char cie_prog[] = { 0x0c, 0x07, 0x08, 0x90, 0x01 };

/* A CIE with augmentation @aug ("zR": @enc its FDEs' encoding; "": no
 * 'R', absptr): its offset from BASE. */
static size_t cie(const char *aug, uint8_t enc)
{
	unsigned char b[32];
	size_t n = 0, at = used;

	b[n++] = 1;				/* version */
	memcpy(b + n, aug, strlen(aug) + 1);
	n += strlen(aug) + 1;
	b[n++] = 0x01;				/* code alignment 1 */
	b[n++] = 0x78;				/* data alignment -8 */
	b[n++] = 0x10;				/* return column 16 */
	if (aug[0] == 'z') {
		b[n++] = 1;			/* augmentation data: */
		b[n++] = enc;			/* the 'R' encoding */
	}
	put32((uint32_t)(4 + n + sizeof(cie_prog)));
	put32(0);
	put(b, n);
	put(cie_prog, sizeof(cie_prog));
	return at;
}

/* An FDE of the CIE at @cie_at ("zR" if @z), its pc_begin and pc_range
 * the @n bytes @pc as they are stored: its offset from BASE. */
static size_t fde_raw(size_t cie_at, const void *pc, size_t n, bool z)
{
	size_t at = used;

	put32((uint32_t)(4 + n + z + 1));
	put32((uint32_t)(at + 4 - cie_at));
	put(pc, n);
	if (z)
		put("\0", 1);			/* no augmentation data */
	put("\0", 1);				/* DW_CFA_nop */
	return at;
}

/* An FDE of a "zR" 0x1b (pcrel sdata4) CIE for [@pc, @pc + @range). */
static size_t fde(size_t cie_at, uint64_t pc, uint32_t range)
{
	int32_t v[2];

	/* pc_begin is relative to where it is stored: 8 bytes in */
	v[0] = (int32_t)(pc - (BASE + used + 8));
	v[1] = (int32_t)range;
	return fde_raw(cie_at, v, sizeof(v), true);
}

static size_t walk(size_t max, int32_t (**tab)[2], int want_rc)
{
	size_t n = 99;
	int rc = ehframe_index(rd, NULL, BASE, used, COLUMNS, max, tab, &n);

	cr_assert_eq(rc, want_rc, "ehframe_index: %d, not %d", rc, want_rc);
	return n;
}

static void assert_entry(int32_t (*tab)[2], size_t i, uint64_t pc,
			 size_t fde_at)
{
	cr_assert_eq(tab[i][0], (int32_t)(pc - BASE), "entry %zu: pc %d",
		     i, tab[i][0]);
	cr_assert_eq(tab[i][1], (int32_t)fde_at, "entry %zu: FDE %d", i,
		     tab[i][1]);
}

/* Three FDEs out of address order, as nothing makes a target write
 * them in order: the table sorted, each entry its own FDE. */
Test(unwind_ehframe, unsorted_fdes_sorted)
{
	int32_t (*tab)[2];
	size_t c, f1, f2, f3, n;

	reset();
	c = cie("zR", 0x1b);
	f1 = fde(c, 0x403000, 0x10);
	f2 = fde(c, 0x401000, 0x20);
	f3 = fde(c, 0x402000, 0x30);
	put32(0);				/* the end */
	n = walk(100, &tab, 0);
	cr_assert_eq(n, 3);
	assert_entry(tab, 0, 0x401000, f2);
	assert_entry(tab, 1, 0x402000, f3);
	assert_entry(tab, 2, 0x403000, f1);
	free(tab);
}

/* The last record's length runs past the section: the walk ends there,
 * the FDEs before it kept; a 64-bit length ends it too. */
Test(unwind_ehframe, truncated_record)
{
	int32_t (*tab)[2];
	size_t c, f1, n;

	reset();
	c = cie("zR", 0x1b);
	f1 = fde(c, 0x401000, 0x10);
	fde(c, 0x402000, 0x10);
	used -= 3;				/* its last bytes cut off */
	n = walk(100, &tab, 0);
	cr_assert_eq(n, 1);
	assert_entry(tab, 0, 0x401000, f1);
	free(tab);

	reset();
	c = cie("zR", 0x1b);
	f1 = fde(c, 0x401000, 0x10);
	put32(0xffffffffu);			/* 64-bit: not for .eh_frame */
	put32(40);
	put32(0);
	fde(c, 0x402000, 0x10);
	n = walk(100, &tab, 0);
	cr_assert_eq(n, 1);
	assert_entry(tab, 0, 0x401000, f1);
	free(tab);
}

/* A zero length is the end, whatever follows; a length below an id's
 * 4 bytes ends the walk too. */
Test(unwind_ehframe, zero_and_short_lengths)
{
	int32_t (*tab)[2];
	size_t c;

	reset();
	c = cie("zR", 0x1b);
	put32(0);
	fde(c, 0x401000, 0x10);
	cr_assert_eq(walk(100, &tab, 0), 0);
	cr_assert_null(tab);

	reset();
	c = cie("zR", 0x1b);
	put32(3);
	put32(0);
	fde(c, 0x401000, 0x10);
	cr_assert_eq(walk(100, &tab, 0), 0);
}

/*
 * 64 KiB of the smallest records there are (a length of 4, an id): the
 * walk advances by each, so it ends at the section's end after one read
 * per record, not in a loop.
 */
Test(unwind_ehframe, smallest_records_end)
{
	int32_t (*tab)[2];

	reset();
	while (used + 8 <= sizeof(mem)) {
		put32(4);
		put32(0x12345678);		/* an FDE id of no CIE */
	}
	cr_assert_eq(walk(100, &tab, 0), 0);
	cr_assert_leq(reads, sizeof(mem) / 8 + 1, "%lu reads", reads);
}

/*
 * An FDE's CIE pointer: to itself, past the section's start, to
 * another FDE, or to a CIE that fails cfi_check_cie(): the FDE is left
 * out, the good one after it kept.
 */
Test(unwind_ehframe, wrong_cie_pointers)
{
	int32_t (*tab)[2];
	size_t c, f1, good, n;

	reset();
	c = cie("zR", 0x1b);
	f1 = fde(c, 0x401000, 0x10);
	fde_raw(used, "\0\0\0\0\x10\0\0\0", 8, true);	/* id 4: itself */
	fde_raw(used + 1000, "\0\0\0\0\x10\0\0\0", 8, false); /* past BASE */
	fde_raw(f1, "\0\0\0\0\x10\0\0\0", 8, true);	/* an FDE */
	n = used;
	cie("zR", 0x1b);
	mem[n + 8] = 2;				/* version 2 */
	fde(n, 0x402000, 0x10);
	good = fde(c, 0x403000, 0x10);
	put32(0);
	n = walk(100, &tab, 0);
	cr_assert_eq(n, 2);
	assert_entry(tab, 0, 0x401000, f1);
	assert_entry(tab, 1, 0x403000, good);
	free(tab);
}

/*
 * pc_begin in each encoding a CIE may give: absolute (no 'R': 8 bytes;
 * udata4) and pc-relative (sdata2, sdata8) are read as such; indirect,
 * datarel, an empty range, and a pc more than 2 GiB from the section
 * are left out.
 */
Test(unwind_ehframe, pc_begin_encodings)
{
	int32_t (*tab)[2];
	uint64_t abs8[2] = { 0x401000, 0x10 };
	uint32_t abs4[2] = { 0x402000, 0x10 };
	uint64_t far8[2] = { BASE + (3ull << 30), 0x10 };
	int32_t in4[2] = { 0x400, 0x10 };
	size_t c0, c4, c2, c8, ci, cd, f0, f4, f2, f8, n;
	int16_t rel2[2];
	int64_t rel8[2];

	reset();
	c0 = cie("", 0);
	c4 = cie("zR", 0x03);			/* udata4 */
	c2 = cie("zR", 0x1a);			/* pcrel sdata2 */
	c8 = cie("zR", 0x1c);			/* pcrel sdata8 */
	ci = cie("zR", 0x9b);			/* indirect pcrel sdata4 */
	cd = cie("zR", 0x3b);			/* datarel sdata4 */
	f0 = fde_raw(c0, abs8, sizeof(abs8), false);
	f4 = fde_raw(c4, abs4, sizeof(abs4), true);
	rel2[0] = (int16_t)(BASE + 0x4000 - (BASE + used + 8));
	rel2[1] = 0x10;
	f2 = fde_raw(c2, rel2, sizeof(rel2), true);
	rel8[0] = (int64_t)(0x404000 - (BASE + used + 8));
	rel8[1] = 0x10;
	f8 = fde_raw(c8, rel8, sizeof(rel8), true);
	fde_raw(ci, in4, sizeof(in4), true);
	fde_raw(cd, in4, sizeof(in4), true);
	fde(c4, 0x405000, 0);			/* an empty range */
	fde_raw(c0, far8, sizeof(far8), false);
	put32(0);
	n = walk(100, &tab, 0);
	cr_assert_eq(n, 4, "%zu entries", n);
	assert_entry(tab, 0, BASE + 0x4000, f2);
	assert_entry(tab, 1, 0x401000, f0);
	assert_entry(tab, 2, 0x402000, f4);
	assert_entry(tab, 3, 0x404000, f8);
	free(tab);
}

/* More FDEs than the caller has room for: -E2BIG, no table. */
Test(unwind_ehframe, too_many_fdes)
{
	int32_t (*tab)[2];
	size_t c, i;

	reset();
	c = cie("zR", 0x1b);
	for (i = 0; i < 5; i++)
		fde(c, 0x401000 + 0x100 * i, 0x10);
	cr_assert_eq(walk(4, &tab, -E2BIG), 0);
	cr_assert_null(tab);
	cr_assert_eq(walk(5, &tab, 0), 5);
	free(tab);
}

/*
 * ehframe_table_get(): the walk reads only inside its section (a CIE
 * before it is not read), once: what it made, or failed to, is kept,
 * and its entries come out of the caller's allowance.
 */
static int confined_only(void *arg, uint64_t addr, void *buf, size_t len)
{
	const struct ehframe_table *t = arg;

	cr_assert(addr >= t->d.addr && addr + len <= t->d.addr + t->d.len,
		  "read at 0x%llx, outside the section",
		  (unsigned long long)addr);
	return rd(NULL, addr, buf, len);
}

Test(unwind_ehframe, table_kept_and_confined)
{
	struct ehframe_table t = { 0 };
	size_t c, f, left = 10;
	unsigned long after;

	reset();
	c = cie("zR", 0x1b);
	fde(c, 0x401000, 0x10);			/* its CIE outside below */
	t.d = (struct unwind_ehframe){ .object = 0x400000,
				       .addr = BASE + used };
	f = used;
	fde(c, 0x402000, 0x10);
	fde_raw(c, "\0\0\0\0\x10\0\0\0", 8, true);
	cie("zR", 0x1b);
	put32(0);
	t.d.len = used - f;
	cr_assert_eq(ehframe_table_get(&t, confined_only, &t, COLUMNS, &left),
		     0);
	cr_assert_eq(t.n, 0, "an FDE whose CIE is outside: %zu", t.n);
	after = reads;
	cr_assert_eq(ehframe_table_get(&t, confined_only, &t, COLUMNS, &left),
		     0);
	cr_assert_eq(reads, after, "walked again");
	ehframe_tables_free(&t, 1);
	cr_assert_null(t.tab);

	reset();
	c = cie("zR", 0x1b);
	f = fde(c, 0x401000, 0x10);
	fde(c, 0x402000, 0x10);
	t.d = (struct unwind_ehframe){ .object = 0x400000, .addr = BASE,
				       .len = used };
	left = 1;
	cr_assert_eq(ehframe_table_get(&t, confined_only, &t, COLUMNS, &left),
		     -E2BIG);
	left = 2;
	cr_assert_eq(ehframe_table_get(&t, confined_only, &t, COLUMNS, &left),
		     -E2BIG, "a failure not kept");
	ehframe_tables_free(&t, 1);
	t.d = (struct unwind_ehframe){ .object = 0x400000, .addr = BASE,
				       .len = used };
	cr_assert_eq(ehframe_table_get(&t, confined_only, &t, COLUMNS, &left),
		     0);
	cr_assert_eq(t.n, 2);
	cr_assert_eq(left, 0);
	assert_entry(t.tab, 0, 0x401000, f);
	ehframe_tables_free(&t, 1);
}
