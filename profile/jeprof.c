/*
 * jeprof's "symbolized profile": the names of every address, then the
 * dump itself, so jeprof draws its graphs without the binaries:
 *
 *   --- symbol
 *   binary=/usr/sbin/mariadbd
 *   0x55d0c8a01234 f2--f1_inlined_into_f2   innermost first, "--" apart
 *   ---
 *   --- heap
 *   heap_v2/524288
 *   ...
 *
 * jeprof looks every address up as it reads it, minus one for all but a
 * stack's first (return addresses), with leading zeros dropped; so both
 * forms are written.
 */
#include "profile/report.h"
#include "profile/report_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static int put_symbol(FILE *f, struct strmap *seen, uint64_t key,
		      const struct dwsym_loc *l)
{
	char hex[24];
	size_t idx;
	bool added;
	unsigned int i;
	int rc;

	snprintf(hex, sizeof(hex), "%" PRIx64, key);
	rc = strmap_get(seen, hex, 0, &idx, &added);
	if (rc || !added)
		return rc;
	fprintf(f, "0x%s ", hex);
	for (i = 0; i < l->nframes; i++) {
		const char *n;

		if (i)
			fputs("--", f);
		/* a name is one token up to the end of the line */
		for (n = l->frames[i].name; *n; n++)
			fputc(*n == '\n' || *n == '\r' ? ' ' : *n, f);
	}
	fputc('\n', f);
	return 0;
}

int report_jeprof(const struct report *r, FILE *f)
{
	const struct profile *p = r->prof;
	const struct dwsym_module *mods;
	struct strmap seen = { 0 };
	size_t i, nm;
	int rc = 0;

	if (r->base)
		return -ENOTSUP;
	fputs("--- symbol\n", f);
	/* the executable: the first object the maps name */
	nm = symbolizer_modules(r->sym, &mods);
	if (nm)
		fprintf(f, "binary=%s\n", mods[0].path);
	for (i = 0; i < p->n && !rc; i++) {
		const struct profile_stack *st = &p->v[i];
		uint32_t k;

		for (k = 0; k < st->depth && !rc; k++) {
			const struct dwsym_loc *l;
			uint64_t key = st->pcs[k];

			rc = symbolizer_lookup(r->sym, key, k > 0, &l);
			if (rc)
				break;
			rc = put_symbol(f, &seen, k > 0 ? key - 1 : key, l);
		}
	}
	strmap_free(&seen);
	if (rc)
		return rc;
	fputs("---\n--- heap\n", f);
	fwrite(p->text, 1, p->text_len, f);
	if (p->text_len && p->text[p->text_len - 1] != '\n')
		fputc('\n', f);
	return ferror(f) ? -EIO : 0;
}
