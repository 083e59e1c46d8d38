/*
 * A gperftools heap profile with memsnap's own buckets taken out
 * (allocators/tcmalloc.c reads it from the target's GetHeapProfile()).
 * The text is the target's: whatever it holds, it is only ever made
 * shorter, and left as it is when it does not parse.
 */
#include "allocators/allocator_internal.h"

#include <stdio.h>
#include <string.h>

/*
 * "  count:  bytes [ count:  bytes]" at the start of the line [@p, @e):
 * the four numbers, and the length up to the ']' (0: not a bucket).
 * sscanf on a copy: on the text itself it would measure the whole rest
 * of it (glibc's sscanf starts with a strlen), once a line, and read the
 * numbers across lines.  The ']' must be in the copy, right after the
 * last number, so that no number is one the copy cut short.
 */
static size_t bucket_counts(const char *p, const char *e, uint64_t v[4])
{
	unsigned long long a, b, c, d;
	char line[128];
	size_t n = (size_t)(e - p) < sizeof(line) - 1 ? (size_t)(e - p)
						     : sizeof(line) - 1;
	int end = 0;

	memcpy(line, p, n);
	line[n] = '\0';
	if (sscanf(line, " %llu: %llu [ %llu: %llu]%n", &a, &b, &c, &d,
		   &end) != 4 || end <= 0)
		return 0;
	v[0] = a;
	v[1] = b;
	v[2] = c;
	v[3] = d;
	return (size_t)end;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Does the line [@p, @e) name, after its '@', an address in [@lo, @hi):
 * "0x" and at most 16 hex digits, as gperftools writes them?  Not
 * strtoull, which would take a sign, blanks and the next line.
 */
static bool line_has_addr(const char *p, const char *e, uint64_t lo,
			  uint64_t hi)
{
	const char *q = memchr(p, '@', (size_t)(e - p));

	while (q && (q = memmem(q, (size_t)(e - q), "0x", 2))) {
		uint64_t a = 0;
		int n = 0, d;

		for (q += 2; q < e && (d = hex_digit(*q)) >= 0; q++, n++)
			a = a << 4 | (uint64_t)d;
		if (n && n <= 16 && a >= lo && a < hi)
			return true;
	}
	return false;
}

/*
 * gperftools 2.10's GetHeapProfile() mallocs its 1 MiB output buffer
 * through the hooked malloc, so the profile it returns records that
 * allocation, made by memsnap's own call: its stack returns into the stub
 * page [@lo, @hi).  Drop such buckets and take them out of the header's
 * totals, so that the dump shows the program, not memsnap.  @text holds
 * *@len bytes and a NUL after them; it is read no further.  Text that
 * does not parse, or whose header cannot hold the new totals, is left
 * as it is.
 */
void tcmalloc_drop_own_buckets(char *text, size_t *len, uint64_t lo,
			       uint64_t hi)
{
	uint64_t head[4], v[4];
	char *p, *e, *w, *end = text + *len, *maps, *tail, *nl;
	char line[160];
	size_t n, old, i;
	bool dropped = false;

	/* "heap profile: " the totals "] @ heapprofile" */
	nl = memchr(text, '\n', *len);
	if (!nl || *len < 13 || memcmp(text, "heap profile:", 13))
		return;
	n = bucket_counts(text + 13, nl, head);
	tail = text + 13 + n - 1;
	if (!n || nl - tail < 4 || memcmp(tail, "] @ ", 4))
		return;
	maps = memmem(nl, (size_t)(end - nl), "\nMAPPED_LIBRARIES:", 18);
	if (!maps)
		maps = end;

	/* The buckets to drop, and the header they leave. */
	for (p = nl + 1; p < maps; p = e) {
		e = memchr(p, '\n', (size_t)(maps - p));
		e = e ? e + 1 : maps;
		if (bucket_counts(p, e, v) && line_has_addr(p, e, lo, hi) &&
		    v[0] <= head[0] && v[1] <= head[1] && v[2] <= head[2] &&
		    v[3] <= head[3]) {
			for (i = 0; i < 4; i++)
				head[i] -= v[i];
			dropped = true;
		}
	}
	if (!dropped)
		return;
	/* The header again, same layout as gperftools writes it, never
	 * longer than before: blanks in front fill what the numbers no
	 * longer need.  If it does not fit, nothing changes. */
	n = (size_t)snprintf(line, sizeof(line),
			     "heap profile: %6llu: %8llu [%6llu: %8llu]",
			     (unsigned long long)head[0],
			     (unsigned long long)head[1],
			     (unsigned long long)head[2],
			     (unsigned long long)head[3]);
	old = (size_t)(tail + 1 - text);
	if (n >= sizeof(line) || old < n)
		return;

	/* The same walk, with the totals as they were: each line kept
	 * or dropped as above. */
	bucket_counts(text + 13, nl, head);
	for (p = w = nl + 1; p < maps; p = e) {
		e = memchr(p, '\n', (size_t)(maps - p));
		e = e ? e + 1 : maps;
		if (bucket_counts(p, e, v) && line_has_addr(p, e, lo, hi) &&
		    v[0] <= head[0] && v[1] <= head[1] && v[2] <= head[2] &&
		    v[3] <= head[3]) {
			for (i = 0; i < 4; i++)
				head[i] -= v[i];
			continue;
		}
		memmove(w, p, (size_t)(e - p));
		w += e - p;
	}
	memmove(w, maps, (size_t)(end - maps));
	w += end - maps;
	*len = (size_t)(w - text);
	text[*len] = '\0';
	memset(text, ' ', old);
	memcpy(text, line, 14);
	memcpy(text + old - (n - 14), line + 14, n - 14);
}
