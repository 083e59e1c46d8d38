#ifndef MEMSNAP_TESTS_LIB_JSONGET_H
#define MEMSNAP_TESTS_LIB_JSONGET_H

#include <stddef.h>

/*
 * The string after the first "@key": " in the JSON text @s (NULL: none)
 * copied into @buf of @size bytes, and @buf returned: "" when the key
 * is absent or its string does not fit.  A test's reading of memsnap's
 * --json output, which never escapes a quote in the names it checks.
 */
const char *json_str_get(const char *s, const char *key, char *buf,
			 size_t size);

#endif
