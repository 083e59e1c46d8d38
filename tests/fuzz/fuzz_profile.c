/*
 * Fuzz the heap-profile reader (profile/profile.h) and everything
 * `memsnap report` does with what it read (profile/report.h): the dump
 * comes from the target, so its text is untrusted, and so are the names
 * its MAPPED_LIBRARIES: section gives the report.
 *
 * Input: a dump, optionally followed by a NUL byte and a second dump (the
 * --base of a difference; a NUL byte never parses as profile text, so it
 * cannot hide a valid first dump).
 *
 * The objects the maps name are looked for under $MEMSNAP_FUZZ_ROOT
 * (scripts/test-fuzz points it at tests/data/profiles/root, which holds
 * the prof-chain binary with its DWARF); without it, under a path that
 * is never a directory, so no file on this machine is read and every
 * frame is named object+0xoffset or 0x<pc>.
 *
 * Checked: profile_load() of the same bytes (from a memfd) agrees with
 * profile_parse(); -EINVAL always says why; a parsed profile's stacks
 * are 1..PROFILE_MAX_DEPTH deep and point into it; every exporter
 * succeeds, its text starts as documented, the JSON parses and the SVG
 * is UTF-8 (names from the target must not break them), neither the
 * text nor the SVG carries control bytes (a terminal escape in a mapped
 * path must not reach the user's terminal), folded lines end in a
 * count, and the dump inside the jeprof export reads back as the same
 * stacks without the frames the report dropped.
 */
#include "profile/profile.h"
#include "profile/report.h"
#include "profile/wrappers.h"
#include "symbols/symbolizer.h"

#include "tests/fuzz/fuzz.h"
#include "tests/fuzz/json_check.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#define NO_ROOT "/dev/null/memsnap-fuzz"

static const char *root = NO_ROOT;
static FILE *devnull;
/* the built-in list, and one pattern of the user's that names frames
 * unnamed frames are named by (0x<pc>), so that inputs reach both */
static struct wrappers *wrappers;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *r = getenv("MEMSNAP_FUZZ_ROOT");

	(void)argc;
	(void)argv;
	if (r && *r)
		root = r;
	/* a machine's debuginfod must never be asked about fuzz input */
	unsetenv("DEBUGINFOD_URLS");
	devnull = fopen("/dev/null", "w");
	FUZZ_CHECK(devnull != NULL);
	{
		const char *mine = "0x[0-9a-f]*[13]";
		char why[256];

		FUZZ_CHECK(!wrappers_new(&mine, 1, &wrappers, why,
					 sizeof(why)));
	}
	return 0;
}

/* Parse from memory, then the same bytes from a file: the same answer. */
static int parse(const char *buf, size_t len, struct profile **out)
{
	char why[256], why2[256], path[64];
	struct profile *p2;
	int rc, rc2, fd;
	size_t i;

	memset(why, 'x', sizeof(why));
	rc = profile_parse(buf, len, out, why, sizeof(why));
	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	FUZZ_CHECK(memchr(why, '\0', sizeof(why)));
	if (rc == -EINVAL)
		FUZZ_CHECK(!strncmp(why, "line ", 5));
	if (rc == 0)
		FUZZ_CHECK(why[0] == '\0');

	fd = fuzz_memfd(buf, len);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rc2 = profile_load(path, &p2, why2, sizeof(why2));
	close(fd);
	FUZZ_CHECK(rc2 == rc || rc2 == -ENOMEM || rc == -ENOMEM);
	if (rc2 == rc && rc == -EINVAL)
		FUZZ_CHECK(!strcmp(why, why2));
	if (rc2 == 0 && rc == 0) {
		FUZZ_CHECK(p2->n == (*out)->n && p2->format == (*out)->format &&
			   p2->period == (*out)->period &&
			   p2->maps->n == (*out)->maps->n);
		for (i = 0; i < p2->n; i++)
			FUZZ_CHECK(p2->v[i].depth == (*out)->v[i].depth &&
				   !memcmp(p2->v[i].pcs, (*out)->v[i].pcs,
					   p2->v[i].depth * sizeof(uint64_t)));
	}
	if (rc2 == 0)
		profile_free(p2);
	return rc;
}

static void check_profile(const struct profile *p, size_t len)
{
	size_t i;

	FUZZ_CHECK(p->maps != NULL);
	FUZZ_CHECK(p->text_len == len && p->text[len] == '\0');
	FUZZ_CHECK(p->format == PROFILE_JEMALLOC ||
		   p->format == PROFILE_GPERFTOOLS);
	if (p->format == PROFILE_JEMALLOC)
		FUZZ_CHECK(p->period > 0);
	for (i = 0; i < p->n; i++) {
		const struct profile_stack *s = &p->v[i];

		FUZZ_CHECK(s->depth >= 1 && s->depth <= PROFILE_MAX_DEPTH);
		FUZZ_CHECK(s->pcs >= p->pool &&
			   s->pcs + s->depth <= p->pool + p->pool_n);
		FUZZ_CHECK(s->objs || !s->bytes);
		FUZZ_CHECK(s->uobjs >= 0 && s->ubytes >= 0);
		FUZZ_CHECK(s->aobjs || !s->abytes);
		FUZZ_CHECK(s->uaobjs >= 0 && s->uabytes >= 0);
		FUZZ_CHECK(!s->aobjs || p->has_alloc);
	}
}

/* Text for a terminal: no control bytes but newlines, whatever the dump
 * named (an escape sequence in a mapped path must not reach the user's
 * terminal). */
static bool no_controls(const char *buf, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (((unsigned char)buf[i] < 0x20 && buf[i] != '\n') ||
		    buf[i] == 0x7f)
			return false;
	return true;
}

/* Every line "root;...;leaf N" with N a non-zero integer. */
static void check_folded(const char *buf, size_t n)
{
	const char *p = buf, *end = buf + n;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *sp, *d;

		FUZZ_CHECK(nl != NULL);
		for (sp = nl; sp > p && sp[-1] != ' '; sp--)
			;
		FUZZ_CHECK(sp > p + 1);
		d = sp;
		if (*d == '-')
			d++;
		FUZZ_CHECK(d < nl && *d >= '1' && *d <= '9');
		for (; d < nl; d++)
			FUZZ_CHECK(*d >= '0' && *d <= '9');
		p = nl + 1;
	}
}

/*
 * The jeprof export: a symbol section, then the dump again, each stack
 * without the frames the report dropped.  That dump must read back as
 * the same stacks, cut.
 */
static void check_jeprof(const struct report *r, const char *buf, size_t n)
{
	static const char heap[] = "---\n--- heap\n";
	const struct profile *p = r->prof;
	const char *at = memmem(buf, n, heap, sizeof(heap) - 1);
	struct profile *back;
	char why[256];
	size_t i;
	int rc;

	FUZZ_CHECK(!strncmp(buf, "--- symbol\n", 11));
	FUZZ_CHECK(at != NULL);
	at += sizeof(heap) - 1;
	rc = profile_parse(at, (size_t)(buf + n - at), &back, why, sizeof(why));
	FUZZ_CHECK(rc == 0 || rc == -ENOMEM);
	if (rc)
		return;
	FUZZ_CHECK(back->n == p->n && back->format == p->format &&
		   back->period == p->period);
	for (i = 0; i < p->n; i++) {
		uint32_t cut = r->cuts[i];

		FUZZ_CHECK(cut < p->v[i].depth);
		FUZZ_CHECK(back->v[i].depth == p->v[i].depth - cut);
		FUZZ_CHECK(!memcmp(back->v[i].pcs, p->v[i].pcs + cut,
				   back->v[i].depth * sizeof(uint64_t)));
		FUZZ_CHECK(back->v[i].objs == p->v[i].objs &&
			   back->v[i].bytes == p->v[i].bytes);
	}
	profile_free(back);
}

typedef int (*export_fn)(const struct report *, const struct report_opts *,
			 FILE *);

/* Run one exporter into memory; the caller frees *@out. */
static int export(export_fn fn, const struct report *r,
		  const struct report_opts *o, char **out, size_t *n)
{
	FILE *f = open_memstream(out, n);
	int rc;

	FUZZ_CHECK(f != NULL);
	rc = fn(r, o, f);
	FUZZ_CHECK(!fclose(f));
	return rc;
}

static void check_exports(const struct report *r,
			  const struct report_opts *o)
{
	char *buf;
	size_t n;
	FILE *f;
	int rc;

	rc = export(report_text, r, o, &buf, &n);
	FUZZ_CHECK(rc == 0 || rc == -ENOMEM);
	if (!rc)
		FUZZ_CHECK(!strncmp(buf, "Total: ", 7) && no_controls(buf, n));
	free(buf);

	rc = export(report_json, r, o, &buf, &n);
	FUZZ_CHECK(rc == 0 || rc == -ENOMEM);
	if (!rc)
		FUZZ_CHECK(json_valid(buf, n));
	free(buf);

	rc = export(report_folded, r, o, &buf, &n);
	FUZZ_CHECK(rc == 0 || rc == -ENOMEM);
	if (!rc)
		check_folded(buf, n);
	free(buf);

	/* XML: well-formed UTF-8, no control bytes */
	rc = export(report_svg, r, o, &buf, &n);
	FUZZ_CHECK(rc == 0 || rc == -ENOMEM);
	if (!rc)
		FUZZ_CHECK(!strncmp(buf, "<?xml", 5) && utf8_valid(buf, n) &&
			   no_controls(buf, n));
	free(buf);

	rc = report_pprof(r, o, devnull);
	FUZZ_CHECK(rc == 0 || rc == -ENOMEM || (rc == -ENOTSUP && r->base));
	if (r->base) {
		FUZZ_CHECK(report_jeprof(r, devnull) == -ENOTSUP);
		return;
	}
	buf = NULL;
	n = 0;
	f = open_memstream(&buf, &n);
	FUZZ_CHECK(f != NULL);
	rc = report_jeprof(r, f);
	FUZZ_CHECK(!fclose(f));
	FUZZ_CHECK(rc == 0 || rc == -ENOMEM);
	if (!rc)
		check_jeprof(r, buf, n);
	free(buf);
}

static void report(struct profile *p, struct profile *base, size_t size)
{
	/* the options from the input's length: all of them, over a run */
	struct report_opts o = {
		.objects = size & 1,
		.lines = (size & 2) != 0,
		.top = (size & 4) ? 3 : 0,
		.dump_name = "fuzz.heap",
		.wrappers = (size & 16) ? wrappers : NULL,
	};
	struct symbolizer *s = NULL, *bs = NULL;
	bool alloc = (size & 8) != 0;
	struct report *r;
	int rc;

	/* what --alloc counts, where the dumps count it */
	rc = profile_select(p, alloc);
	FUZZ_CHECK(rc == 0 || (rc == -ENODATA && alloc && !p->has_alloc));
	if (rc)
		return;
	if (base) {
		rc = profile_select(base, alloc);
		FUZZ_CHECK(rc == 0 ||
			   (rc == -ENODATA && alloc && !base->has_alloc));
		if (rc)
			return;
	}
	rc = symbolizer_new(p->maps, root, &s);
	FUZZ_CHECK(rc == 0 || rc == -ENOMEM);
	if (!rc && base) {
		rc = symbolizer_new(base->maps, root, &bs);
		FUZZ_CHECK(rc == 0 || rc == -ENOMEM);
	}
	if (!rc) {
		rc = report_build(p, s, base, bs, &r);
		FUZZ_CHECK(rc == 0 || rc == -ENOMEM);
	}
	if (!rc) {
		size_t i;

		FUZZ_CHECK(r->alloc == alloc);
		for (i = 0; i < r->nsamples; i++)
			FUZZ_CHECK(r->samples[i].n >= 1);
		check_exports(r, &o);
		report_free(r);
	}
	symbolizer_free(bs);
	symbolizer_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	const char *nul = memchr(buf, '\0', size);
	size_t len = nul ? (size_t)(nul - buf) : size;
	struct profile *p, *base = NULL;

	if (parse(buf, len, &p))
		return 0;
	check_profile(p, len);
	if (nul && !parse(nul + 1, size - len - 1, &base))
		check_profile(base, size - len - 1);
	report(p, base, size);
	profile_free(base);
	profile_free(p);
	return 0;
}
