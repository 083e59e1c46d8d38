/*
 * The check of an FDE and its CIE before libunwind sees them
 * (injector/unwind/cfi.h).  A CIE, as a linker writes it for .eh_frame:
 *
 *   14 00 00 00   length
 *   00 00 00 00   CIE id
 *   01            version
 *   7a 52 00      "zR"
 *   01            code alignment (ULEB128)
 *   78            data alignment (SLEB128: -8)
 *   10            return-address column (v1: a byte; v3: ULEB128)
 *   01 1b         augmentation data: length, FDE pointer encoding
 *   0c 07 08      DW_CFA_def_cfa r7+8 (the stack pointer)
 *   90 01         DW_CFA_offset r16 (the pc), cfa-8
 *   00 00         padding (DW_CFA_nop)
 */
#include "injector/unwind/cfi.h"

#include <stdbool.h>
#include <string.h>

#define AUG_MAX 16

/* DWARF's pointer encodings: the low four bits give the size. */
#define DW_EH_PE_omit 0xff

struct cur {
	cfi_read_fn read;
	void *arg;
	uint64_t at, end;	/* bytes left: [at, end) */
	const char *bad;	/* the first thing wrong, or NULL */
};

static void refuse(struct cur *c, const char *why)
{
	if (!c->bad)
		c->bad = why;
}

static uint8_t u8(struct cur *c)
{
	uint8_t v = 0;

	if (c->bad)
		return 0;
	if (c->at >= c->end || c->read(c->arg, c->at, &v, 1))
		refuse(c, "an operand past its entry");
	else
		c->at++;
	return v;
}

static uint32_t u32(struct cur *c)
{
	uint32_t v = 0;

	if (c->bad)
		return 0;
	if (c->end - c->at < 4 || c->at > c->end ||
	    c->read(c->arg, c->at, &v, 4))
		refuse(c, "an operand past its entry");
	else
		c->at += 4;
	return v;
}

/* A LEB128 of at most 10 bytes, the tenth holding bit 63 at most. */
static uint64_t leb(struct cur *c, bool is_signed)
{
	uint64_t v = 0;
	unsigned int shift = 0;
	uint8_t b;

	do {
		b = u8(c);
		if (c->bad)
			return 0;
		if (shift > 63 || (shift == 63 && (b & 0x7e))) {
			refuse(c, "a LEB128 past 64 bits");
			return 0;
		}
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (is_signed && shift < 64 && (b & 0x40))
		v |= ~(uint64_t)0 << shift;
	return v;
}

static void skip(struct cur *c, uint64_t n)
{
	if (c->bad)
		return;
	if (c->at > c->end || n > c->end - c->at)
		refuse(c, "an operand past its entry");
	else
		c->at += n;
}

static void reg(struct cur *c, unsigned int columns)
{
	if (leb(c, false) >= columns)
		refuse(c, "a register number libunwind cannot index with");
}

unsigned int cfi_enc_size(uint8_t enc)
{
	if (enc == DW_EH_PE_omit)
		return 0;
	switch (enc & 0x0f) {
	case 0x00:		/* absptr */
	case 0x04:		/* udata8 */
	case 0x0c:		/* sdata8 */
		return 8;
	case 0x02:		/* udata2 */
	case 0x0a:		/* sdata2 */
		return 2;
	case 0x03:		/* udata4 */
	case 0x0b:		/* sdata4 */
		return 4;
	default:
		return 0;
	}
}

/* A CFA program, [c->at, c->end): every register below @columns. */
static void program(struct cur *c, unsigned int ptr, unsigned int columns)
{
	unsigned int ops;

	for (ops = 0; c->at < c->end && !c->bad; ops++) {
		uint8_t op;

		if (ops == CFI_OPS_MAX) {
			refuse(c, "a CFA program too long");
			return;
		}
		op = u8(c);
		switch (op >> 6) {
		case 1:		/* advance_loc */
			continue;
		case 2:		/* offset: reg in the low bits, ULEB */
			if ((op & 0x3f) >= columns)
				refuse(c, "a register number libunwind cannot "
				     "index with");
			leb(c, false);
			continue;
		case 3:		/* restore */
			if ((op & 0x3f) >= columns)
				refuse(c, "a register number libunwind cannot "
				     "index with");
			continue;
		}
		switch (op) {
		case 0x00:	/* nop */
		case 0x0a:	/* remember_state */
		case 0x0b:	/* restore_state */
		case 0x2d:	/* GNU_window_save, AArch64 negate_ra_state */
			break;
		case 0x01:	/* set_loc */
			skip(c, ptr);
			break;
		case 0x02:	/* advance_loc1, 2, 4 */
			skip(c, 1);
			break;
		case 0x03:
			skip(c, 2);
			break;
		case 0x04:
			skip(c, 4);
			break;
		case 0x05:	/* offset_extended */
		case 0x0c:	/* def_cfa */
		case 0x14:	/* val_offset */
		case 0x2f:	/* GNU_negative_offset_extended */
			reg(c, columns);
			leb(c, false);
			break;
		case 0x11:	/* offset_extended_sf */
		case 0x12:	/* def_cfa_sf */
		case 0x15:	/* val_offset_sf */
			reg(c, columns);
			leb(c, true);
			break;
		case 0x06:	/* restore_extended */
		case 0x07:	/* undefined */
		case 0x08:	/* same_value */
		case 0x0d:	/* def_cfa_register */
			reg(c, columns);
			break;
		case 0x09:	/* register: both, libunwind reads the second
				 * as an index unchecked */
			reg(c, columns);
			reg(c, columns);
			break;
		case 0x0e:	/* def_cfa_offset */
		case 0x2e:	/* GNU_args_size */
			leb(c, false);
			break;
		case 0x13:	/* def_cfa_offset_sf */
			leb(c, true);
			break;
		case 0x0f:	/* def_cfa_expression */
			skip(c, leb(c, false));
			break;
		case 0x10:	/* expression */
		case 0x16:	/* val_expression */
			reg(c, columns);
			skip(c, leb(c, false));
			break;
		default:
			refuse(c, "a CFA operation libunwind does not know");
			break;
		}
	}
}

/*
 * The CIE at @cie: its pointer encoding for the FDE's addresses into
 * *@enc, its size into *@ptr, and whether it has sized augmentation
 * data ('z'); its own program checked.
 */
static void cie(struct cur *c, uint64_t at, unsigned int columns,
		uint8_t *enc, unsigned int *ptr, bool *sized)
{
	char aug[AUG_MAX + 1];
	uint64_t aug_end = 0;
	uint32_t len;
	uint8_t version;
	size_t i, n = 0;

	c->at = at;
	c->end = at + 4;
	len = u32(c);
	if (!c->bad && (len < 8 || len == 0xffffffffu))
		refuse(c, "a CIE length linkers do not write");
	c->end = at + 4 + len;
	if (c->end < at || u32(c))
		refuse(c, "not a CIE");
	version = u8(c);
	if (!c->bad && version != 1 && version != 3)
		refuse(c, "a CIE version linkers do not write for .eh_frame");
	for (;;) {
		char ch = (char)u8(c);

		if (c->bad || !ch)
			break;
		if (n == AUG_MAX || !strchr("zRPLSB", ch) ||
		    (ch == 'z' && n)) {
			refuse(c, "an augmentation libunwind may misread");
			break;
		}
		aug[n++] = ch;
	}
	aug[n] = '\0';
	leb(c, false);		/* code alignment */
	leb(c, true);		/* data alignment */
	if ((version == 1 ? u8(c) : leb(c, false)) >= columns)
		refuse(c, "a return-address column libunwind cannot index with");
	*sized = n && aug[0] == 'z';
	*enc = 0;		/* absptr without 'R' */
	*ptr = 8;
	if (*sized) {
		uint64_t size = leb(c, false);

		aug_end = c->at + size;
		if (!c->bad && (aug_end < c->at || aug_end > c->end))
			refuse(c, "augmentation data past the CIE");
	}
	for (i = *sized; i < n && !c->bad; i++) {
		uint8_t pers;

		switch (aug[i]) {
		case 'R':
			*enc = u8(c);
			*ptr = cfi_enc_size(*enc);
			if (!*ptr)
				refuse(c, "a pointer encoding of no fixed size");
			break;
		case 'L':
			u8(c);
			break;
		case 'P':
			pers = u8(c);
			if (!cfi_enc_size(pers))
				refuse(c, "a pointer encoding of no fixed size");
			skip(c, cfi_enc_size(pers));
			break;
		default:	/* 'S', 'B': no data */
			break;
		}
	}
	if (*sized && !c->bad) {
		if (c->at > aug_end)
			refuse(c, "augmentation data past its length");
		c->at = aug_end;
	}
	program(c, *ptr, columns);
}

const char *cfi_check_fde(cfi_read_fn read, void *arg, uint64_t fde,
			  unsigned int columns)
{
	struct cur c = { .read = read, .arg = arg, .at = fde, .end = fde + 4 };
	uint64_t fde_end;
	unsigned int ptr;
	uint32_t len;
	int32_t off;
	uint8_t enc;
	bool sized;

	len = u32(&c);
	if (!c.bad && (!len || len == 0xffffffffu))
		refuse(&c, "an FDE length linkers do not write");
	fde_end = fde + 4 + len;
	c.end = fde_end;
	off = (int32_t)u32(&c);
	if (!c.bad && (fde_end < fde || !off))
		refuse(&c, "not an FDE");
	if (c.bad)
		return c.bad;
	/* .eh_frame's CIE pointer: back from where it is stored */
	cie(&c, fde + 4 - (uint64_t)(int64_t)off, columns, &enc, &ptr, &sized);
	c.at = fde + 8;
	c.end = fde_end;
	skip(&c, 2 * (uint64_t)ptr);	/* pc_begin, pc_range */
	if (sized)
		skip(&c, leb(&c, false));
	program(&c, ptr, columns);
	return c.bad;
}

const char *cfi_check_cie(cfi_read_fn read, void *arg, uint64_t at,
			  unsigned int columns, uint8_t *enc)
{
	struct cur c = { .read = read, .arg = arg };
	unsigned int ptr;
	bool sized;

	cie(&c, at, columns, enc, &ptr, &sized);
	return c.bad;
}
