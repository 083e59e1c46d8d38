#ifndef MEMSNAP_TESTS_LIB_TESTDATA_H
#define MEMSNAP_TESTS_LIB_TESTDATA_H

#include <stddef.h>

/* The file $MEMSNAP_TESTDATA/@dir/@name whole, NUL-ended, its length in
 * @len; the caller frees it.  Fails the test if it cannot be read. */
char *testdata_slurp(const char *dir, const char *name, size_t *len);

#endif
