/*
 * A gperftools heap profile with memsnap's own buckets taken out
 * (allocators/tcmalloc.c reads it from the target's GetHeapProfile()).
 * The text is the target's: whatever it holds, it is only ever made
 * shorter, and left as it is when it does not parse.
 */
#include "allocators/allocator_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "  count:  bytes [ count:  bytes] @" at @p: the four numbers. */
static bool bucket_counts(const char *p, uint64_t v[4])
{
	unsigned long long a, b, c, d;

	if (sscanf(p, " %llu: %llu [ %llu: %llu]", &a, &b, &c, &d) != 4)
		return false;
	v[0] = a;
	v[1] = b;
	v[2] = c;
	v[3] = d;
	return true;
}

/* Does the line [@p, @e) hold an address in [@lo, @hi)? */
static bool line_has_addr(const char *p, const char *e, uint64_t lo,
			  uint64_t hi)
{
	const char *at = memchr(p, '@', (size_t)(e - p));

	while (at && at < e) {
		const char *x = memmem(at, (size_t)(e - at), "0x", 2);
		char *end;
		uint64_t a;

		if (!x)
			return false;
		a = strtoull(x + 2, &end, 16);
		if (a >= lo && a < hi)
			return true;
		at = end > x + 2 ? end : x + 2;
	}
	return false;
}

/*
 * gperftools 2.10's GetHeapProfile() mallocs its 1 MiB output buffer
 * through the hooked malloc, so the profile it returns records that
 * allocation, made by memsnap's own call: its stack returns into the stub
 * page [@lo, @hi).  Drop such buckets and take them out of the header's
 * totals, so that the dump shows the program, not memsnap.  Text that
 * does not parse is left as it is.
 */
void tcmalloc_drop_own_buckets(char *text, size_t *len, uint64_t lo,
			       uint64_t hi)
{
	uint64_t head[4], v[4];
	char *p, *w, *end = text + *len, *maps, *tail;
	char line[160];
	size_t n;
	bool dropped = false;

	if (strncmp(text, "heap profile:", 13) ||
	    !bucket_counts(text + 13, head))
		return;
	tail = strstr(text, "] @ ");
	p = memchr(text, '\n', *len);
	if (!p || !tail || tail > p)
		return;
	maps = strstr(text, "\nMAPPED_LIBRARIES:");
	if (!maps)
		maps = end;
	w = ++p;
	while (p < maps) {
		char *e = memchr(p, '\n', (size_t)(maps - p));

		e = e ? e + 1 : maps;
		if (bucket_counts(p, v) && line_has_addr(p, e, lo, hi) &&
		    v[0] <= head[0] && v[1] <= head[1] && v[2] <= head[2] &&
		    v[3] <= head[3]) {
			head[0] -= v[0];
			head[1] -= v[1];
			head[2] -= v[2];
			head[3] -= v[3];
			dropped = true;
		} else {
			memmove(w, p, (size_t)(e - p));
			w += e - p;
		}
		p = e;
	}
	if (!dropped)
		return;
	memmove(w, maps, (size_t)(end - maps));
	w += end - maps;
	*len = (size_t)(w - text);
	text[*len] = '\0';
	/* The header again, same layout as gperftools writes it. */
	n = (size_t)snprintf(line, sizeof(line),
			     "heap profile: %6llu: %8llu [%6llu: %8llu]",
			     (unsigned long long)head[0],
			     (unsigned long long)head[1],
			     (unsigned long long)head[2],
			     (unsigned long long)head[3]);
	tail = strstr(text, "] @ ");
	if (!tail || n >= sizeof(line))
		return;
	tail++;
	if ((size_t)(tail - text) >= n) {
		/* Never longer than before: fill with blanks in front. */
		size_t old = (size_t)(tail - text);

		memset(text, ' ', old);
		memcpy(text, line, 14);
		memcpy(text + old - (n - 14), line + 14, n - 14);
	}
}
