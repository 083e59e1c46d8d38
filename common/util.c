#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Linux's PID_MAX_LIMIT on 64-bit: 4 * 1024 * 1024. */
#define PID_MAX_LIMIT (4 * 1024 * 1024)

int array_grow(void **v, size_t *cap, size_t need, size_t elsize)
{
	size_t ncap;
	void *nv;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap : 16;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return -ENOMEM;
		ncap *= 2;
	}
	if (ncap > SIZE_MAX / elsize)
		return -ENOMEM;
	nv = realloc(*v, ncap * elsize);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = ncap;
	return 0;
}

int parse_u64(const char *s, int base, uint64_t *out)
{
	unsigned long long v;
	char *end;

	/* strtoull accepts leading blanks and a sign: we do not. */
	if (!s || !*s || *s == ' ' || *s == '\t' || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, base);
	if (errno == ERANGE)
		return -ERANGE;
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

int parse_pid(const char *s, pid_t *out)
{
	uint64_t v;
	int rc;

	rc = parse_u64(s, 10, &v);
	if (rc)
		return rc;
	if (v == 0 || v > PID_MAX_LIMIT)
		return -ERANGE;
	*out = (pid_t)v;
	return 0;
}

bool str_ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !memcmp(s + n - m, suffix, m);
}

void hex_encode(const unsigned char *p, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < len; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * len] = '\0';
}

void human_bytes(uint64_t b, char *buf, size_t size)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	size_t u = 0;

	while (v >= 1024 && u + 1 < ARRAY_SIZE(units)) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, size, "%" PRIu64 " B", b);
	else
		snprintf(buf, size, "%.1f %s", v, units[u]);
}
