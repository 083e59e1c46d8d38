/*
 * The walk of .eh_frame into a search table (injector/unwind/ehframe.h).
 * It runs in the unwinder's sandbox, whose filter allows no qsort() (it
 * asks the system for its memory size): the table is sorted here, by a
 * heap sort (no recursion, no memory).  ld writes the FDEs in address
 * order, mostly, but nothing makes a hostile target do so.
 */
#include "injector/unwind/ehframe.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* CIEs remembered: their encoding, or that they failed. */
#define CIES 16
#define CIE_BAD 0x100

/* DWARF pointer encodings: the size in the low four bits (bit 3: signed),
 * how it applies in bits 4 to 6, bit 7 indirect. */
#define DW_EH_PE_signed 0x08
#define DW_EH_PE_pcrel 0x10
#define DW_EH_PE_omit 0xff

struct walk {
	cfi_read_fn read;
	void *arg;
	unsigned int columns;
	uint64_t cie[CIES];		/* CIE address + 1, or 0 */
	unsigned int enc[CIES];		/* its encoding, or CIE_BAD */
};

/* The encoding of the FDEs of the CIE at @at, or CIE_BAD. */
static unsigned int cie_enc(struct walk *w, uint64_t at)
{
	size_t i = (size_t)(at * 0x9e3779b97f4a7c15ull >> 60);
	uint8_t enc;

	if (w->cie[i] == at + 1)
		return w->enc[i];
	w->cie[i] = at + 1;
	w->enc[i] = cfi_check_cie(w->read, w->arg, at, w->columns, &enc)
			    ? CIE_BAD : enc;
	return w->enc[i];
}

static uint64_t value(const unsigned char *p, unsigned int enc)
{
	unsigned int size = cfi_enc_size((uint8_t)enc);
	uint16_t v2;
	uint32_t v4;
	uint64_t v8;

	if (size == 2) {
		memcpy(&v2, p, 2);
		return enc & DW_EH_PE_signed ? (uint64_t)(int64_t)(int16_t)v2
					     : v2;
	}
	if (size == 4) {
		memcpy(&v4, p, 4);
		return enc & DW_EH_PE_signed ? (uint64_t)(int64_t)(int32_t)v4
					     : v4;
	}
	memcpy(&v8, p, 8);
	return v8;
}

/*
 * The FDE at @fde (its id at @fde + 4, @end past its last byte): its
 * entry, relative to @lo, into @e.  false when it is left out.
 */
static bool fde_entry(struct walk *w, uint64_t lo, uint64_t fde, uint64_t end,
		      uint32_t id, int32_t e[2])
{
	unsigned char buf[16];
	uint64_t cie = fde + 4 - id, at = fde + 8, pc;
	unsigned int enc, size;
	int64_t rel;

	/* its CIE before it, in the range (an id that points at itself
	 * or past it: a CIE of 0 bytes, or none) */
	if (id > fde + 4 - lo || cie + 8 > fde)
		return false;
	enc = cie_enc(w, cie);
	/* absolute or pc-relative (0x1b, pcrel sdata4, the linkers'),
	 * never indirect: no more memory behind it */
	if (enc == CIE_BAD || enc == DW_EH_PE_omit ||
	    (enc & 0x70 & ~DW_EH_PE_pcrel) || (enc & 0x80))
		return false;
	size = cfi_enc_size((uint8_t)enc);
	if (!size || end - at < 2 * (uint64_t)size ||
	    w->read(w->arg, at, buf, 2 * size))
		return false;
	pc = value(buf, enc);
	if (enc & DW_EH_PE_pcrel)
		pc += at;
	/* pc_range: no pc in an empty one (what a linker leaves of a
	 * discarded function) */
	if (!value(buf + size, enc & 0x0f & ~DW_EH_PE_signed))
		return false;
	rel = (int64_t)(pc - lo);
	if (rel != (int32_t)rel)
		return false;
	e[0] = (int32_t)rel;
	e[1] = (int32_t)(fde - lo);	/* below the range's length */
	return true;
}

static void sift(int32_t (*t)[2], size_t i, size_t n)
{
	for (;;) {
		size_t k = 2 * i + 1;
		int32_t x[2];

		if (k >= n)
			return;
		if (k + 1 < n && t[k + 1][0] > t[k][0])
			k++;
		if (t[i][0] >= t[k][0])
			return;
		memcpy(x, t[i], sizeof(x));
		memcpy(t[i], t[k], sizeof(x));
		memcpy(t[k], x, sizeof(x));
		i = k;
	}
}

static void heap_sort(int32_t (*t)[2], size_t n)
{
	size_t i;

	for (i = n / 2; i-- > 0;)
		sift(t, i, n);
	for (i = n; i-- > 1;) {
		int32_t x[2];

		memcpy(x, t[0], sizeof(x));
		memcpy(t[0], t[i], sizeof(x));
		memcpy(t[i], x, sizeof(x));
		sift(t, 0, i);
	}
}

static bool sorted(int32_t (*t)[2], size_t n)
{
	size_t i;

	for (i = 1; i < n; i++)
		if (t[i - 1][0] > t[i][0])
			return false;
	return true;
}

int ehframe_index(cfi_read_fn read, void *arg, uint64_t lo, uint64_t len,
		  unsigned int columns, size_t max, int32_t (**tab)[2],
		  size_t *n)
{
	struct walk w = { .read = read, .arg = arg, .columns = columns };
	int32_t (*t)[2] = NULL;
	uint64_t at = lo, end = lo + len;
	size_t cap = 0, got = 0, records;

	*tab = NULL;
	*n = 0;
	/* the table's offsets from lo are 32-bit: so are the FDEs' */
	if (end < lo || len > INT32_MAX)
		return -E2BIG;
	for (records = 0; records < EHFRAME_RECORDS && end - at >= 8;
	     records++) {
		uint32_t h[2];		/* length, id */
		uint64_t next;
		int32_t e[2];

		if (read(arg, at, h, sizeof(h)) || !h[0] ||
		    h[0] == 0xffffffffu || h[0] < 4 || h[0] > end - at - 4)
			break;	/* the end, or nothing past here we trust */
		next = at + 4 + h[0];
		if (h[1] && fde_entry(&w, lo, at, next, h[1], e)) {
			if (got == max) {
				free(t);
				return -E2BIG;
			}
			if (got == cap) {
				size_t c = cap ? 2 * cap : 256;
				void *p;

				if (c > max)
					c = max;
				p = realloc(t, c * sizeof(*t));
				if (!p) {
					free(t);
					return -ENOMEM;
				}
				t = p;
				cap = c;
			}
			memcpy(t[got++], e, sizeof(e));
		}
		at = next;
	}
	if (!sorted(t, got))
		heap_sort(t, got);
	*tab = t;
	*n = got;
	return 0;
}

struct confined {
	cfi_read_fn read;
	void *arg;
	uint64_t lo, hi;
};

static int confined_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	const struct confined *r = arg;

	if (addr < r->lo || addr > r->hi || len > r->hi - addr)
		return -1;
	return r->read(r->arg, addr, buf, len);
}

int ehframe_table_get(struct ehframe_table *t, cfi_read_fn read, void *arg,
		      unsigned int columns, size_t *left)
{
	struct confined r = { .read = read, .arg = arg, .lo = t->d.addr,
			      .hi = t->d.addr + t->d.len };

	if (!t->state) {
		t->state = ehframe_index(confined_read, &r, t->d.addr,
					 t->d.len, columns, *left, &t->tab,
					 &t->n);
		if (!t->state) {
			*left -= t->n;
			t->state = 1;
		}
	}
	return t->state < 0 ? t->state : 0;
}

struct ehframe_table *ehframe_table_of(struct ehframe_table *v, size_t n,
				       uint64_t object)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (v[i].d.object == object)
			return &v[i];
	return NULL;
}

void ehframe_tables_free(struct ehframe_table *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(v[i].tab);
		v[i] = (struct ehframe_table){ 0 };
	}
}
