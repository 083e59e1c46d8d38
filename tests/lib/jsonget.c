/* A string of memsnap's JSON output, for tests (jsonget.h). */
#include "jsonget.h"

#include <stdio.h>
#include <string.h>

const char *json_str_get(const char *s, const char *key, char *buf,
			 size_t size)
{
	char pat[96];
	const char *p, *q;

	buf[0] = '\0';
	snprintf(pat, sizeof(pat), "\"%s\": \"", key);
	p = s ? strstr(s, pat) : NULL;
	if (!p)
		return buf;
	p += strlen(pat);
	q = strchr(p, '"');
	if (q && (size_t)(q - p) < size) {
		memcpy(buf, p, (size_t)(q - p));
		buf[q - p] = '\0';
	}
	return buf;
}
