#include "common/util.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

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

	/* strtoull accepts leading white space (newlines too) and a sign,
	 * which negates: "\n-5" would be 2^64 - 5.  We take digits. */
	if (!s || !*s || isspace((unsigned char)*s) || *s == '-' || *s == '+')
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

int random_fill(void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t k = getrandom((char *)buf + got, len - got, 0);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		got += (size_t)k;
	}
	return 0;
}

uint64_t random_seed(void)
{
	struct timespec ts;
	uint64_t v;

	/* never waits for the kernel's pool at boot */
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v))
		return v;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^
		(uint64_t)getpid() << 32 ^ (uint64_t)ts.tv_sec) ^
	       (uint64_t)(uintptr_t)&ts;
}

int random_name(char *buf, size_t size, const char *suffix)
{
	unsigned char r[8];
	char hex[2 * sizeof(r) + 1];
	int n, rc;

	rc = random_fill(r, sizeof(r));
	if (rc)
		return rc;
	hex_encode(r, sizeof(r), hex);
	n = snprintf(buf, size, ".memsnap-%s%s", hex, suffix);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

size_t page_size(void)
{
	static size_t size;

	if (!size) {
		unsigned long v = getauxval(AT_PAGESZ);

		size = v ? (size_t)v : 4096;
	}
	return size;
}

int fd_limit_raise(unsigned long need, unsigned long *limit)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return -errno;
	if (rl.rlim_cur < rl.rlim_max) {
		struct rlimit up = { rl.rlim_max, rl.rlim_max };

		if (!setrlimit(RLIMIT_NOFILE, &up))
			rl = up;
	}
	*limit = rl.rlim_cur == RLIM_INFINITY ? (unsigned long)-1
					       : (unsigned long)rl.rlim_cur;
	return *limit < need ? -EMFILE : 0;
}

int parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "KMGT";
	const char *u;
	uint64_t v, mul = 1;
	char *end;

	if (!s[0] || !strchr("0123456789", s[0]))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	if (*end && (u = strchr(units, *end & ~0x20))) {
		mul = 1ull << (10 * (u - units + 1));
		end++;
		if (!strcmp(end, "iB") || !strcmp(end, "B"))
			end += strlen(end);
	} else if (!strcmp(end, "B")) {
		end++;
	}
	if (*end)
		return -EINVAL;
	if (v > UINT64_MAX / mul)
		return -ERANGE;
	*out = v * mul;
	return 0;
}

int parse_duration_ms(const char *s, uint64_t *out)
{
	static const struct {
		const char *unit;
		double ms;
	} units[] = { { "", 1000 },	 { "s", 1000 },	    { "ms", 1 },
		      { "m", 60000 },	 { "min", 60000 },  { "h", 3600000 },
		      { "d", 86400000 } };
	double v;
	char *end;
	size_t i;

	if (!s[0] || !strchr("0123456789", s[0]))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || !(v >= 0))
		return -EINVAL;
	for (i = 0; i < ARRAY_SIZE(units); i++) {
		if (strcmp(end, units[i].unit))
			continue;
		v *= units[i].ms;
		/* a year at most: beyond it, a typo */
		if (v > 366.0 * 86400000)
			return -ERANGE;
		*out = (uint64_t)(v + 0.5);
		return 0;
	}
	return -EINVAL;
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

void sort(void *base, size_t n, size_t size,
	  int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, n, size, cmp);
}

/* Length of the valid UTF-8 sequence at @s, or 0 if it is not one. */
size_t utf8_len(const unsigned char *s)
{
	size_t n, i;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		n = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		n = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		n = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates and values past U+10FFFF. */
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) ||
	    (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

void fputs_clean(const char *str, FILE *f)
{
	const unsigned char *s = (const unsigned char *)str;

	while (*s) {
		size_t n = *s < 0x80 ? 1 : utf8_len(s);

		if (*s < 0x20 || *s == 0x7f || !n ||
		    (n == 2 && s[0] == 0xc2 && s[1] < 0xa0)) {
			fputc('?', f);
			s += n ? n : 1;
			continue;
		}
		fwrite(s, 1, n, f);
		s += n;
	}
}

const char *path_base(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

void xml_text(FILE *f, const char *s, size_t max)
{
	size_t n = 0;

	for (; *s && n < max; s++, n++) {
		unsigned char c = (unsigned char)*s;
		size_t len;

		switch (c) {
		case '<': fputs("&lt;", f); continue;
		case '>': fputs("&gt;", f); continue;
		case '&': fputs("&amp;", f); continue;
		case '"': fputs("&quot;", f); continue;
		}
		if (c < 0x20 || c == 0x7f) {
			/* control bytes are not XML */
			fputc('?', f);
			continue;
		}
		/* XML is UTF-8: a byte that is not becomes U+FFFD */
		len = utf8_len((const unsigned char *)s);
		if (!len) {
			fputs("\xef\xbf\xbd", f);
			continue;
		}
		fwrite(s, 1, len, f);
		s += len - 1;
	}
	if (*s)
		fputs("..", f);
}

/* Defined by the linker in every dynamic executable; a static one (not
 * static-pie) has none, and the weak reference stays NULL. */
extern const char _DYNAMIC[] __attribute__((weak));

bool linked_statically(void)
{
	return !_DYNAMIC;
}
