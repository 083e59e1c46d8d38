#include "testdata.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

char *testdata_slurp(const char *dir, const char *name, size_t *len)
{
	const char *top = getenv("MEMSNAP_TESTDATA");
	char path[PATH_MAX];
	char *buf;
	FILE *f;
	long n;

	cr_assert_not_null(top, "MEMSNAP_TESTDATA is not set");
	snprintf(path, sizeof(path), "%s/%s/%s", top, dir, name);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}
