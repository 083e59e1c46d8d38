/*
 * jeprof's "symbolized profile": the names of every address, then the
 * dump, so jeprof draws its graphs without the binaries:
 *
 *   --- symbol
 *   binary=/usr/sbin/mariadbd
 *   0x55d0c8a01234 ns::Widget::make(int)--inner   caller first
 *   ---
 *   --- heap
 *   heap_v2/524288
 *   ...
 *
 * jeprof looks every address up as it reads it, the first of a stack as
 * it is and the others minus one (return addresses), leading zeros
 * dropped.  It skips allocator frames by name only, and the allocator's
 * internals are usually unnamed, so the stacks are written without the
 * frames the report dropped: jeprof then sees the same leaves.
 */
#include "profile/report.h"
#include "profile/report_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static int put_symbol(FILE *f, struct u64map *seen, uint64_t key,
		      const struct dwsym_loc *l)
{
	unsigned int i;
	uint32_t id;
	bool added;
	int rc;

	rc = u64map_get(seen, key, &id, &added);
	if (rc || !added)
		return rc;
	fprintf(f, "0x%" PRIx64 " ", key);
	/* jeprof keeps inline chains caller first */
	for (i = l->nframes; i-- > 0;) {
		const char *n;

		if (i + 1 < l->nframes)
			fputs("--", f);
		/* a name is one token up to the end of the line */
		for (n = l->frames[i].name; *n; n++)
			fputc(*n == '\n' || *n == '\r' ? ' ' : *n, f);
	}
	fputc('\n', f);
	return 0;
}

/* Is this line a stack ("@ 0x.." in heap_v2, "N: B [N: B] @ 0x.." in a
 * gperftools profile after its header)?  Then where its addresses
 * start. */
static const char *stack_addrs(const char *line, const char *eol,
			       enum profile_format fmt, bool first)
{
	const char *at;

	if (first)
		return NULL;
	if (fmt == PROFILE_JEMALLOC) {
		/* blanks before the '@' as the parser allows them */
		while (line < eol && (*line == ' ' || *line == '\t'))
			line++;
		return line < eol && line[0] == '@' ? line + 1 : NULL;
	}
	at = memchr(line, '@', (size_t)(eol - line));
	return at ? at + 1 : NULL;
}

int report_jeprof(const struct report *r, FILE *f)
{
	const struct profile *p = r->prof;
	const struct dwsym_module *mods;
	struct u64map seen = { 0 };
	const char *line, *end;
	size_t i, nm, stack = 0;
	int rc = 0;

	if (r->base)
		return -ENOTSUP;
	fputs("--- symbol\n", f);
	/* the executable: the first object the maps name */
	nm = symbolizer_modules(r->sym, &mods);
	for (i = 0; i < nm; i++)
		if (mods[i].executable || i + 1 == nm)
			break;
	if (nm)
		fprintf(f, "binary=%s\n", mods[i].path);
	for (i = 0; i < p->n && !rc; i++) {
		const struct profile_stack *st = &p->v[i];
		uint32_t k;

		for (k = r->cuts[i]; k < st->depth && !rc; k++) {
			const struct dwsym_loc *l;
			bool first = k == r->cuts[i];

			rc = symbolizer_lookup(r->sym, st->pcs[k], true, &l);
			if (!rc)
				rc = put_symbol(f, &seen,
						first ? st->pcs[k]
						      : st->pcs[k] - 1, l);
		}
	}
	u64map_free(&seen);
	if (rc)
		return rc;
	fputs("---\n--- heap\n", f);
	/* the dump, stacks without the allocator's frames */
	line = p->text;
	end = p->text + p->text_len;
	while (line < end) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		const char *eol = nl ? nl : end;
		const char *addrs = stack_addrs(line, eol, p->format,
						line == p->text);

		if (addrs && stack < p->n) {
			const struct profile_stack *st = &p->v[stack];
			uint32_t k;

			fwrite(line, 1, (size_t)(addrs - line), f);
			for (k = r->cuts[stack]; k < st->depth; k++)
				fprintf(f, " 0x%" PRIx64, st->pcs[k]);
			fputc('\n', f);
			stack++;
		} else {
			fwrite(line, 1, (size_t)(eol - line), f);
			fputc('\n', f);
		}
		if (!nl)
			break;
		/* nothing after MAPPED_LIBRARIES: is a stack */
		if (!strncmp(line, "MAPPED_LIBRARIES:", 17)) {
			fwrite(nl + 1, 1, (size_t)(end - nl - 1), f);
			break;
		}
		line = nl + 1;
	}
	return ferror(f) ? -EIO : 0;
}
