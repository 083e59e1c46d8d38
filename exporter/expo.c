/*
 * The text exposition format (exporter/expo.h).
 */
#include "exporter/expo.h"

#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void expo_init(struct expo *x)
{
	memset(x, 0, sizeof(*x));
}

void expo_free(struct expo *x)
{
	free(x->buf);
	memset(x, 0, sizeof(*x));
}

void expo_reset(struct expo *x)
{
	x->len = 0;
	x->err = 0;
	if (x->buf)
		x->buf[0] = '\0';
}

const char *expo_text(const struct expo *x)
{
	return x->buf && !x->err ? x->buf : "";
}

/* Room for @more bytes and the NUL. */
static bool room(struct expo *x, size_t more)
{
	void *v = x->buf;

	if (x->err)
		return false;
	if (more > SIZE_MAX / 2 - x->len ||
	    array_grow(&v, &x->cap, x->len + more + 1, 1)) {
		x->err = -ENOMEM;
		return false;
	}
	x->buf = v;
	return true;
}

void expo_raw(struct expo *x, const char *s, size_t len)
{
	if (!room(x, len))
		return;
	memcpy(x->buf + x->len, s, len);
	x->len += len;
	x->buf[x->len] = '\0';
}

static void put(struct expo *x, const char *s)
{
	expo_raw(x, s, strlen(s));
}

static void put_char(struct expo *x, char c)
{
	expo_raw(x, &c, 1);
}

/* HELP text: backslash and newline escaped, the rest as it is. */
static void put_help(struct expo *x, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			put(x, "\\\\");
		else if (*s == '\n')
			put(x, "\\n");
		else
			put_char(x, *s);
	}
}

void expo_family(struct expo *x, const char *name, const char *type,
		 const char *help)
{
	put(x, "# HELP ");
	put(x, name);
	put_char(x, ' ');
	put_help(x, help);
	put(x, "\n# TYPE ");
	put(x, name);
	put_char(x, ' ');
	put(x, type);
	put_char(x, '\n');
}

/*
 * @s as the inside of a label value's quotes: at most EXPO_LABEL_MAX
 * bytes of it, whole characters only; '\' and '"' escaped; C0 and C1
 * controls, DEL and bytes that are not UTF-8 as '?' (a newline too:
 * escaped, it would be legal, but a name with one is a forgery).
 */
static void put_value(struct expo *x, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t used = 0;

	while (*s) {
		size_t n = *s < 0x80 ? 1 : utf8_len(s);

		if (used + (n ? n : 1) > EXPO_LABEL_MAX)
			break;
		used += n ? n : 1;
		if (*s < 0x20 || *s == 0x7f || !n ||
		    (n == 2 && s[0] == 0xc2 && s[1] < 0xa0)) {
			put_char(x, '?');
			s += n ? n : 1;
			continue;
		}
		if (*s == '\\' || *s == '"')
			put_char(x, '\\');
		expo_raw(x, (const char *)s, n);
		s += n;
	}
}

void expo_label(struct expo *x, const char *name, const char *value)
{
	if (x->len)
		put_char(x, ',');
	put(x, name);
	put(x, "=\"");
	put_value(x, value);
	put_char(x, '"');
}

void expo_label_u64(struct expo *x, const char *name, uint64_t value)
{
	char num[24];

	snprintf(num, sizeof(num), "%" PRIu64, value);
	expo_label(x, name, num);
}

/* `@name{@labels,@lname="@lvalue"} ` */
static void put_series(struct expo *x, const char *name, const char *labels,
		       const char *lname, const char *lvalue)
{
	bool some = labels && labels[0];

	put(x, name);
	if (some || lname) {
		put_char(x, '{');
		if (some)
			put(x, labels);
		if (lname) {
			if (some)
				put_char(x, ',');
			put(x, lname);
			put(x, "=\"");
			put_value(x, lvalue ? lvalue : "");
			put_char(x, '"');
		}
		put_char(x, '}');
	}
	put_char(x, ' ');
}

/* The fewest digits of @v that read back as @v (0.001064, not
 * 0.0010640000000000001). */
static void shortest(double v, char *buf, size_t size)
{
	int digits;

	for (digits = 15; digits < 17; digits++) {
		snprintf(buf, size, "%.*g", digits, v);
		if (strtod(buf, NULL) == v)
			return;
	}
	snprintf(buf, size, "%.17g", v);
}

void expo_sample(struct expo *x, const char *name, const char *labels,
		 const char *lname, const char *lvalue, double value)
{
	char num[40];

	if (isnan(value))
		snprintf(num, sizeof(num), "NaN");
	else if (isinf(value))
		snprintf(num, sizeof(num), "%sInf", value > 0 ? "+" : "-");
	else if (value >= 0 && value <= 9007199254740992.0 &&
		 value == floor(value))
		snprintf(num, sizeof(num), "%" PRIu64, (uint64_t)value);
	else
		shortest(value, num, sizeof(num));
	put_series(x, name, labels, lname, lvalue);
	put(x, num);
	put_char(x, '\n');
}

void expo_sample_u64(struct expo *x, const char *name, const char *labels,
		     const char *lname, const char *lvalue, uint64_t value)
{
	char num[24];

	snprintf(num, sizeof(num), "%" PRIu64, value);
	put_series(x, name, labels, lname, lvalue);
	put(x, num);
	put_char(x, '\n');
}
