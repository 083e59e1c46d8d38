/*
 * mimalloc's mi_stats_print_out() text into the tables "memory",
 * "counts" and "process" (allocators/mimalloc.c captures it).  The text
 * is the target's: bounded by @len, trusted for nothing.
 *
 * The printed amounts are rounded ("64.0 MiB"): the tables carry them as
 * printed, turned into bytes, so they are approximate.
 */
#include "allocators/allocator_internal.h"

#include "common/util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const amount_cols[] = { "peak", "total", "freed",
					   "current", NULL };

/* Labels whose amounts are sizes even when printed without a unit. */
static const char *const byte_labels[] = {
	"reserved", "committed", "reset",  "purged", "touched",
	"page-committed", "normal", "large", "huge", "giant",
};

static bool is_byte_label(const char *label)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(byte_labels); i++)
		if (!strcmp(label, byte_labels[i]))
			return true;
	return false;
}

/*
 * One amount at *@p: "0", "12", "-37", "128.5 KiB", "64.0 MiB", "3 B".
 * *@bytes is set when a unit says it is a size.  Advances *@p.
 * -EINVAL when no number is there; -ERANGE for a negative amount (which
 * mimalloc prints for per-thread counters; not a quantity).
 */
static int parse_amount(const char **p, const char *end, uint64_t *out,
			bool *bytes)
{
	static const struct {
		const char *unit;
		double mul;
	} units[] = {
		{ "B", 1 },	      { "KiB", 1024.0 },
		{ "MiB", 1048576.0 }, { "GiB", 1073741824.0 },
		{ "TiB", 1099511627776.0 },
	};
	char num[32], *e;
	const char *q = *p;
	size_t n = 0, i;
	double v;

	while (q < end && *q == ' ')
		q++;
	while (q < end && n + 1 < sizeof(num) &&
	       (isdigit((unsigned char)*q) || *q == '.' || *q == '-'))
		num[n++] = *q++;
	num[n] = '\0';
	if (!n)
		return -EINVAL;
	v = strtod(num, &e);
	if (*e || !isfinite(v))
		return -EINVAL;
	*p = q;
	/* A unit follows after one blank. */
	if (q + 1 < end && *q == ' ' && isalpha((unsigned char)q[1])) {
		for (i = 0; i < ARRAY_SIZE(units); i++) {
			size_t ul = strlen(units[i].unit);

			if ((size_t)(end - q - 1) >= ul &&
			    !memcmp(q + 1, units[i].unit, ul) &&
			    (q + 1 + ul == end || q[1 + ul] == ' ' ||
			     q[1 + ul] == ',')) {
				v *= units[i].mul;
				*bytes = true;
				*p = q + 1 + ul;
				break;
			}
		}
	}
	if (v < 0)
		return -ERANGE;
	*out = v >= 1.8e19 ? UINT64_MAX : (uint64_t)(v + 0.5);
	return 0;
}

static bool printable(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return false;
	return true;
}

/* "name: value unit, name: value unit, ..." of the process line. */
static void parse_process(const char *p, const char *end,
			  struct alloc_stats *st)
{
	static const char *const cols[] = { "rss", "commit", "faults", NULL };
	struct alloc_stat_table *t = stats_table(st, "process", cols, 0x3);
	struct alloc_stat_row *row = stats_row(t, "process");
	size_t i;

	for (i = 0; row && cols[i]; i++) {
		char key[16];
		const char *q;
		uint64_t v;
		bool bytes = false;

		snprintf(key, sizeof(key), "%s: ", cols[i]);
		q = memmem(p, (size_t)(end - p), key, strlen(key));
		if (!q)
			continue;
		q += strlen(key);
		if (!parse_amount(&q, end, &v, &bytes))
			stats_set(t, row, cols[i], v);
	}
}

/*
 * Lines "  label:  peak  total  freed  current  ..." (fewer amounts for
 * some); a label starting with '-' belongs to the row above it
 * ("segments" then "-abandoned": "segments.abandoned").
 */
int mimalloc_parse_stats(const char *text, size_t len,
			 struct alloc_stats *st)
{
	struct alloc_stat_table *mem, *cnt;
	const char *p = text, *end = text + len;
	char parent[32] = "";
	size_t rows = 0;
	bool process = false;

	mem = stats_table(st, "memory", amount_cols, 0xf);
	cnt = stats_table(st, "counts", amount_cols, 0);
	if (!mem || !cnt)
		return -ENOMEM;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *colon, *q, *lab;
		char label[32], name[48];
		uint64_t v[4];
		bool bytes = false, sub;
		size_t n = 0, llen, i;

		if (!eol)
			eol = end;
		colon = memchr(p, ':', (size_t)(eol - p));
		lab = p;
		while (lab < eol && *lab == ' ')
			lab++;
		/* mimalloc's labels are words of ASCII; anything else (a
		 * NUL, an escape sequence for the terminal `stats` prints
		 * row names to) is not one of its lines */
		if (!colon || colon - lab < 1 ||
		    (size_t)(colon - lab) >= sizeof(label) ||
		    !printable(lab, (size_t)(colon - lab))) {
			p = eol + 1;
			continue;
		}
		llen = (size_t)(colon - lab);
		memcpy(label, lab, llen);
		label[llen] = '\0';
		if (!strcmp(label, "searches") || !strcmp(label, "elapsed") ||
		    !strcmp(label, "numa nodes") || !strcmp(label, "-")) {
			/* not amounts; "-" alone names no sub-row */
			p = eol + 1;
			continue;
		}
		if (!strcmp(label, "process")) {
			/* mimalloc prints one; a second would be a second
			 * table of the same name */
			if (!process)
				parse_process(colon + 1, eol, st);
			process = true;
			p = eol + 1;
			continue;
		}
		q = colon + 1;
		while (n < 4 && !parse_amount(&q, eol, &v[n], &bytes))
			n++;
		sub = label[0] == '-';
		if (!sub)
			snprintf(parent, sizeof(parent), "%s", label);
		/* a "-sub" line before any other has no row to belong to:
		 * its name would be ".sub" */
		if (n && !(sub && !parent[0])) {
			struct alloc_stat_table *t =
				bytes || is_byte_label(label) ? mem : cnt;
			struct alloc_stat_row *row;

			if (sub)
				snprintf(name, sizeof(name), "%s.%s", parent,
					 label + 1);
			else
				snprintf(name, sizeof(name), "%s", label);
			row = stats_row(t, "%s", name);
			if (!row)
				return -ENOMEM;
			for (i = 0; i < n; i++)
				stats_set(t, row, amount_cols[i], v[i]);
			rows++;
		}
		p = eol + 1;
	}
	return rows ? 0 : -EINVAL;
}
