/*
 * Fuzz the parsers of what allocators print (allocators/
 * allocator_internal.h): `stats` captures the text of the target's
 * malloc_info(), mi_stats_print_out() or mallctl's JSON report, `dump`
 * the profile from gperftools' GetHeapProfile(), and a hostile target's
 * fake allocator can print anything.  Each input goes through all of
 * them.  What must hold:
 *
 *   - no read past the text: glibc's and mimalloc's parsers get exactly
 *     the input's bytes (AddressSanitizer), the profile its bytes up to
 *     the first NUL and that NUL, as alloc_read_string() gives it;
 *   - glibc_parse_malloc_info: rows are "arena N" (one per <heap with
 *     that nr) or "total"; every number it reports stands in the text
 *     as an attribute value, except the derived free (fast + rest, with
 *     rest in the text too) and in_use (system - free, never wrapped);
 *   - every table: no name twice, row names of printable ASCII (`stats`
 *     prints them on a terminal);
 *   - mimalloc_parse_stats: no more rows than lines,
 *     row names are labels of the text, each row's amounts fill its
 *     first columns, and each amount is a number of the text times a
 *     unit;
 *   - tcmalloc_drop_own_buckets: the text only shrinks and stays
 *     NUL-ended; unchanged unless a bucket is dropped; what remains is
 *     the input's lines in order, the header's counts lowered by exactly
 *     the dropped buckets' counts, and every dropped line names an
 *     address of memsnap's stub range;
 *   - json_valid (jemalloc's JSON report) agrees with the strict checker
 *     of tests/fuzz/json_check.h.
 */
#include "allocators/allocator_internal.h"
#include "common/json.h"

/* the harnesses' own checker, named apart from common/json.h's */
#define json_valid jc_json_valid
#include "tests/fuzz/json_check.h"
#undef json_valid

#include "tests/fuzz/fuzz.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

/* memsnap's stub page in a seed profile (tests/fuzz/make-seeds.sh) */
#define STUB_LO UINT64_C(0x7fff00000000)
#define STUB_HI UINT64_C(0x7fff00001000)

FUZZ_NOCOV
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

FUZZ_NOCOV
static const struct alloc_stat_table *find_table(const struct alloc_stats *st,
						 const char *name)
{
	for (size_t i = 0; i < st->nt; i++)
		if (!strcmp(st->t[i].name, name))
			return &st->t[i];
	return NULL;
}

FUZZ_NOCOV
static int col_of(const struct alloc_stat_table *t, const char *col)
{
	for (size_t i = 0; i < t->ncols; i++)
		if (!strcmp(t->cols[i], col))
			return (int)i;
	FUZZ_CHECK(!"no such column");
	return -1;
}

FUZZ_NOCOV
static bool has(const struct alloc_stat_row *r, int col, uint64_t *v)
{
	if (!r->have[col])
		return false;
	*v = r->v[col];
	return true;
}

FUZZ_NOCOV
static void check_names(const struct alloc_stats *st)
{
	for (size_t i = 0; i < st->nt; i++) {
		const struct alloc_stat_table *t = &st->t[i];

		for (size_t j = 0; j < i; j++)
			FUZZ_CHECK(strcmp(st->t[j].name, t->name));
		FUZZ_CHECK(t->nrows <= t->cap);
		/* `stats` prints row names on a terminal: printable
		 * ASCII only, whatever the target printed */
		for (size_t r = 0; r < t->nrows; r++) {
			const char *name = t->rows[r].name;
			size_t n = strnlen(name, sizeof(t->rows[r].name));

			FUZZ_CHECK(n > 0 && n < sizeof(t->rows[r].name));
			for (size_t k = 0; k < n; k++)
				FUZZ_CHECK((unsigned char)name[k] >= 0x20 &&
					   (unsigned char)name[k] <= 0x7e);
		}
	}
}

FUZZ_NOCOV
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The numbers written in @text as an attribute value ends, digits then
 * the closing quote, sorted into @out (room for @len): every tail of a
 * run of digits before a '"' that is the decimal form of a number
 * ("0012\"" holds 12 and 2).
 */
FUZZ_NOCOV
static size_t attr_values(const char *text, size_t len, uint64_t *out)
{
	size_t k = 0;

	for (size_t q = 0; q < len; q++) {
		size_t b = q;

		if (text[q] != '"')
			continue;
		while (b > 0 && q - b < 20 && text[b - 1] >= '0' &&
		       text[b - 1] <= '9')
			b--;
		for (size_t i = b; i < q; i++) {
			uint64_t v = 0;
			bool over = false;

			/* a leading 0: not how a number is written */
			if (text[i] == '0' && i + 1 < q)
				continue;
			for (size_t j = i; j < q; j++) {
				uint64_t d = (uint64_t)(text[j] - '0');

				over |= v > (UINT64_MAX - d) / 10;
				v = v * 10 + d;
			}
			if (!over)
				out[k++] = v;
		}
	}
	qsort(out, k, sizeof(*out), cmp_u64);
	return k;
}

FUZZ_NOCOV
static bool attr_in_text(const uint64_t *vals, size_t n, uint64_t v)
{
	return bsearch(&v, vals, n, sizeof(*vals), cmp_u64) != NULL;
}

/* ---- malloc_info XML ---------------------------------------------------- */

/* The tags that can make a row: <heap, <total, <system. */
FUZZ_NOCOV
static size_t count_tags(const char *xml, size_t size)
{
	size_t n = 0;

	for (size_t i = 0; i < size; i++) {
		size_t left = size - i;

		if (xml[i] != '<')
			continue;
		if ((left >= 5 && !memcmp(xml + i, "<heap", 5)) ||
		    (left >= 6 && !memcmp(xml + i, "<total", 6)) ||
		    (left >= 7 && !memcmp(xml + i, "<system", 7)))
			n++;
	}
	return n;
}

FUZZ_NOCOV
static void check_glibc(const char *data, size_t size)
{
	char *xml = malloc(size ? size : 1);
	uint64_t *vals = malloc((size + 1) * sizeof(*vals));
	struct alloc_stats st = { 0 };
	const struct alloc_stat_table *t;
	size_t nvals;
	int rc;

	FUZZ_CHECK(xml && vals);
	memcpy(xml, data, size);
	rc = glibc_parse_malloc_info(xml, size, &st);
	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	check_names(&st);
	t = find_table(&st, "arenas");
	FUZZ_CHECK(t != NULL);
	FUZZ_CHECK(t->nrows <= count_tags(xml, size));
	/* gathered only for a text that made rows: sorting costs */
	nvals = t->nrows ? attr_values(xml, size, vals) : 0;
	for (size_t i = 0; i < t->nrows; i++) {
		const struct alloc_stat_row *r = &t->rows[i];
		static const char *const direct[] = {
			"system", "system_max", "fastbin", "free_chunks",
			"mmap", "mmap_chunks",
		};
		uint64_t v, sys, fr, fast, use, nr;

		if (strcmp(r->name, "total")) {
			FUZZ_CHECK(sscanf(r->name, "arena %" SCNu64, &nr) == 1);
			FUZZ_CHECK(attr_in_text(vals, nvals, nr));
		}
		for (size_t c = 0; c < sizeof(direct) / sizeof(*direct); c++)
			if (has(r, col_of(t, direct[c]), &v))
				FUZZ_CHECK(attr_in_text(vals, nvals, v));
		/* free = fast + rest, all three known, no wrap */
		if (has(r, col_of(t, "free"), &fr)) {
			FUZZ_CHECK(has(r, col_of(t, "fastbin"), &fast));
			FUZZ_CHECK(fr >= fast);
			FUZZ_CHECK(attr_in_text(vals, nvals, fr - fast));
		}
		if (has(r, col_of(t, "in_use"), &use)) {
			FUZZ_CHECK(has(r, col_of(t, "system"), &sys));
			FUZZ_CHECK(has(r, col_of(t, "free"), &fr));
			FUZZ_CHECK(use <= sys && use == sys - fr);
		}
	}
	alloc_stats_free(&st);
	free(vals);
	free(xml);
}

/* ---- mi_stats_print_out text -------------------------------------------- */

FUZZ_NOCOV
static size_t count_lines(const char *text, size_t size)
{
	size_t n = 0;

	for (size_t i = 0; i < size; i++)
		n += text[i] == '\n';
	return n;
}

/* The numbers of @text as parse_amount() cuts them: runs of digits,
 * '.' and '-' that strtod takes whole. */
FUZZ_NOCOV
static size_t numbers_of(const char *text, size_t len, double *out,
			 size_t max)
{
	size_t n = 0, i = 0;

	while (i < len && n < max) {
		char num[32], *e;
		size_t k = 0;

		while (i < len && !(text[i] >= '0' && text[i] <= '9') &&
		       text[i] != '.' && text[i] != '-')
			i++;
		while (i < len && k + 1 < sizeof(num) &&
		       ((text[i] >= '0' && text[i] <= '9') ||
			text[i] == '.' || text[i] == '-'))
			num[k++] = text[i++];
		num[k] = '\0';
		if (!k)
			continue;
		out[n] = strtod(num, &e);
		if (!*e && isfinite(out[n]) && out[n] >= 0)
			n++;
		/* a run cut at 31 bytes goes on as another number */
	}
	return n;
}

#define NUM_MAX 4096
#define NMUL 5

/* Every amount the numbers @nums make with a unit (or none), sorted:
 * as parse_amount() turns them into bytes. */
FUZZ_NOCOV
static size_t amounts_of(const double *nums, size_t n, uint64_t *out)
{
	static const double mul[NMUL] = { 1, 1024.0, 1048576.0, 1073741824.0,
					  1099511627776.0 };
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		for (size_t m = 0; m < NMUL; m++) {
			double d = nums[i] * mul[m];

			out[k++] = d >= 1.8e19 ? UINT64_MAX
					       : (uint64_t)(d + 0.5);
		}
	qsort(out, k, sizeof(*out), cmp_u64);
	return k;
}

/*
 * Is @name a label of @text: "label" there, or "parent.sub" for a
 * "-sub" line under "parent" (either may hold a '.'; the name may be
 * cut short at the row's 47 bytes)?
 */
FUZZ_NOCOV
static bool label_of_text(const char *text, size_t size, const char *name)
{
	size_t n = strlen(name);
	char sub[64];

	if (memmem(text, size, name, n))
		return true;
	for (size_t i = 1; i + 1 < n; i++) {
		if (name[i] != '.' || !memmem(text, size, name, i))
			continue;
		snprintf(sub, sizeof(sub), "-%s", name + i + 1);
		if (memmem(text, size, sub, strlen(sub)))
			return true;
	}
	return false;
}

FUZZ_NOCOV
static void check_mimalloc(const char *data, size_t size)
{
	char *text = malloc(size ? size : 1);
	struct alloc_stats st = { 0 };
	size_t lines = 1, rows = 0, nnums, namounts;
	static double nums[NUM_MAX];
	static uint64_t amounts[NUM_MAX * NMUL];
	int rc;

	FUZZ_CHECK(text != NULL);
	memcpy(text, data, size);
	rc = mimalloc_parse_stats(text, size, &st);
	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	check_names(&st);
	lines += count_lines(text, size);
	/* gathered only for a text that made rows: sorting costs */
	for (size_t i = 0; i < st.nt; i++)
		rows += st.t[i].nrows;
	nnums = rows ? numbers_of(text, size, nums, NUM_MAX) : 0;
	namounts = amounts_of(nums, nnums, amounts);
	rows = 0;
	for (size_t i = 0; i < st.nt; i++) {
		const struct alloc_stat_table *t = &st.t[i];
		bool process = !strcmp(t->name, "process");

		FUZZ_CHECK(process || !strcmp(t->name, "memory") ||
			   !strcmp(t->name, "counts"));
		FUZZ_CHECK(t->nrows <= (process ? 1 : lines));
		rows += t->nrows;
		for (size_t r = 0; r < t->nrows; r++) {
			const struct alloc_stat_row *row = &t->rows[r];
			bool gap = false;

			/* a label: up to the line's first ':' */
			FUZZ_CHECK(row->name[0] != '\0');
			FUZZ_CHECK(!strchr(row->name, ':'));
			FUZZ_CHECK(!strchr(row->name, '\n'));
			if (!process && t->nrows <= 64)
				FUZZ_CHECK(label_of_text(text, size,
							 row->name));
			for (size_t c = 0; c < t->ncols; c++) {
				if (!row->have[c]) {
					gap = true;
					continue;
				}
				FUZZ_CHECK(process || !gap);
				if (nnums < NUM_MAX)
					FUZZ_CHECK(bsearch(&row->v[c], amounts,
							   namounts,
							   sizeof(*amounts),
							   cmp_u64));
			}
		}
	}
	FUZZ_CHECK(rc != 0 || rows > 0);
	alloc_stats_free(&st);
	free(text);
}

/* ---- a gperftools heap profile ------------------------------------------ */

/* "  c:  b [ c:  b]" at the start of [@p, @e): the four numbers, read
 * from the whole line. */
FUZZ_NOCOV
static bool counts_of(const char *p, const char *e, uint64_t v[4])
{
	size_t n = (size_t)(e - p);
	char *line = malloc(n + 1);
	unsigned long long a, b, c, d;
	int end = 0;

	FUZZ_CHECK(line != NULL);
	memcpy(line, p, n);
	line[n] = '\0';
	if (sscanf(line, " %llu: %llu [ %llu: %llu]%n", &a, &b, &c, &d,
		   &end) != 4 || end <= 0) {
		free(line);
		return false;
	}
	free(line);
	v[0] = a;
	v[1] = b;
	v[2] = c;
	v[3] = d;
	return true;
}

FUZZ_NOCOV
static bool names_stub(const char *p, const char *e)
{
	const char *at = memchr(p, '@', (size_t)(e - p));

	for (; at && at + 2 < e; at++) {
		uint64_t a = 0;
		const char *q = at + 2;
		int digits = 0;

		if (at[0] != '0' || at[1] != 'x')
			continue;
		while (q < e && digits < 17 &&
		       ((*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'f') ||
			(*q >= 'A' && *q <= 'F'))) {
			a = a << 4 | (uint64_t)(*q <= '9' ? *q - '0'
						 : (*q | 0x20) - 'a' + 10);
			q++;
			digits++;
		}
		if (digits && digits <= 16 && a >= STUB_LO && a < STUB_HI)
			return true;
	}
	return false;
}

FUZZ_NOCOV
static const char *line_end(const char *p, const char *end)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));

	return nl ? nl + 1 : end;
}

FUZZ_NOCOV
static void check_tcmalloc(const char *data, size_t size)
{
	size_t len = strnlen(data, size), n;
	char *text = malloc(len + 1), *orig = malloc(len + 1);
	const char *p, *q, *e, *pe, *qe, *oend, *tend, *maps;
	uint64_t head[4], nhead[4], drop[4] = { 0 }, v[4];

	FUZZ_CHECK(text && orig);
	memcpy(text, data, len);
	text[len] = '\0';
	memcpy(orig, text, len + 1);
	n = len;
	tcmalloc_drop_own_buckets(text, &n, STUB_LO, STUB_HI);
	FUZZ_CHECK(n <= len);
	FUZZ_CHECK(text[n] == '\0');
	if (n == len) {
		/* nothing dropped: not a byte changed */
		FUZZ_CHECK(!memcmp(text, orig, len));
		goto out;
	}
	/* the header: same first 14 bytes, same tail from "] @ " */
	oend = orig + len;
	tend = text + n;
	pe = line_end(orig, oend);
	qe = line_end(text, tend);
	FUZZ_CHECK(!memcmp(text, "heap profile: ", 14));
	FUZZ_CHECK(pe - orig == qe - text);
	q = memmem(orig, (size_t)(pe - orig), "] @ ", 4);
	FUZZ_CHECK(q && !memcmp(text + (q - orig), q, (size_t)(pe - q)));
	FUZZ_CHECK(counts_of(orig + 13, pe, head));
	FUZZ_CHECK(counts_of(text + 13, qe, nhead));
	/* the buckets: the input's lines in order, some dropped; the last
	 * one ends where "\nMAPPED_LIBRARIES:" begins, and from there on
	 * the text is the input's */
	maps = strstr(orig, "\nMAPPED_LIBRARIES:");
	if (!maps)
		maps = oend;
	for (p = pe, q = qe; p < maps; p = e) {
		e = line_end(p, maps);
		if (q < tend && (size_t)(tend - q) >= (size_t)(e - p) &&
		    !memcmp(q, p, (size_t)(e - p))) {
			q += e - p;
			continue;
		}
		/* dropped: a bucket naming the stub */
		FUZZ_CHECK(names_stub(p, e));
		FUZZ_CHECK(counts_of(p, e, v));
		for (int i = 0; i < 4; i++) {
			FUZZ_CHECK(drop[i] + v[i] >= drop[i]);
			drop[i] += v[i];
		}
	}
	FUZZ_CHECK((size_t)(tend - q) == (size_t)(oend - maps));
	FUZZ_CHECK(!memcmp(q, maps, (size_t)(oend - maps)));
	for (int i = 0; i < 4; i++)
		FUZZ_CHECK(drop[i] <= head[i] && nhead[i] == head[i] - drop[i]);
out:
	free(text);
	free(orig);
}

/* ---- JSON ---------------------------------------------------------------- */

/* Brackets in strings count too: an upper bound of the nesting. */
FUZZ_NOCOV
static size_t nesting_bound(const char *text, size_t size)
{
	size_t depth = 0, max = 0;

	for (size_t i = 0; i < size; i++) {
		if (text[i] == '[' || text[i] == '{')
			max = ++depth > max ? depth : max;
		else if ((text[i] == ']' || text[i] == '}') && depth)
			depth--;
	}
	return max;
}

FUZZ_NOCOV
static void check_json(const char *data, size_t size)
{
	char *text = malloc(size ? size : 1);
	size_t max;

	FUZZ_CHECK(text != NULL);
	memcpy(text, data, size);
	max = nesting_bound(text, size);
	/* the checker stops at 64 levels, memsnap at 256 */
	if (max <= 64)
		FUZZ_CHECK(json_valid(text, size) == jc_json_valid(text, size));
	else
		(void)json_valid(text, size);
	free(text);
}

FUZZ_NOCOV
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;

	check_glibc(text, size);
	check_mimalloc(text, size);
	check_tcmalloc(text, size);
	check_json(text, size);
	return 0;
}
