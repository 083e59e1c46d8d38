/*
 * A strict JSON (RFC 8259) and UTF-8 checker for the fuzz harnesses:
 * memsnap writes names a target chose (paths, symbols) into JSON, and
 * whatever they hold, the document must still parse.  Header-only, for
 * the harnesses alone.
 */
#ifndef MEMSNAP_TESTS_FUZZ_JSON_CHECK_H
#define MEMSNAP_TESTS_FUZZ_JSON_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Length of the well-formed UTF-8 sequence at @s (@n bytes left), 0 if
 * there is none: no overlong forms, surrogates or values past U+10FFFF. */
static inline size_t jc_utf8_len(const unsigned char *s, size_t n)
{
	size_t len, i;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		len = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
	    (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

static inline bool utf8_valid(const char *buf, size_t n)
{
	const unsigned char *s = (const unsigned char *)buf;
	size_t i = 0;

	while (i < n) {
		size_t k = jc_utf8_len(s + i, n - i);

		if (!k)
			return false;
		i += k;
	}
	return true;
}

struct jc {
	const char *p, *end;
	int depth;
};

static inline void jc_ws(struct jc *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' ||
				 *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

static inline bool jc_lit(struct jc *c, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n))
		return false;
	c->p += n;
	return true;
}

static inline bool jc_hex4(struct jc *c)
{
	int i;

	for (i = 0; i < 4; i++, c->p++)
		if (c->p >= c->end || !strchr("0123456789abcdefABCDEF", *c->p) ||
		    !*c->p)
			return false;
	return true;
}

static inline bool jc_string(struct jc *c)
{
	if (c->p >= c->end || *c->p != '"')
		return false;
	c->p++;
	while (c->p < c->end) {
		unsigned char ch = (unsigned char)*c->p;
		size_t k;

		if (ch == '"') {
			c->p++;
			return true;
		}
		if (ch < 0x20)
			return false;
		if (ch == '\\') {
			c->p++;
			if (c->p >= c->end)
				return false;
			if (*c->p == 'u') {
				c->p++;
				if (!jc_hex4(c))
					return false;
				continue;
			}
			if (!*c->p || !strchr("\"\\/bfnrt", *c->p))
				return false;
			c->p++;
			continue;
		}
		k = jc_utf8_len((const unsigned char *)c->p,
				(size_t)(c->end - c->p));
		if (!k)
			return false;
		c->p += k;
	}
	return false;
}

static inline bool jc_digits(struct jc *c)
{
	const char *s = c->p;

	while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
		c->p++;
	return c->p > s;
}

static inline bool jc_number(struct jc *c)
{
	if (c->p < c->end && *c->p == '-')
		c->p++;
	if (c->p < c->end && *c->p == '0')
		c->p++;
	else if (!jc_digits(c))
		return false;
	if (c->p < c->end && *c->p == '.') {
		c->p++;
		if (!jc_digits(c))
			return false;
	}
	if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
		c->p++;
		if (c->p < c->end && (*c->p == '+' || *c->p == '-'))
			c->p++;
		if (!jc_digits(c))
			return false;
	}
	return true;
}

static inline bool jc_value(struct jc *c);

/* An object or array; @close is '}' or ']'. */
static inline bool jc_scope(struct jc *c, char close)
{
	bool first = true;

	if (++c->depth > 64)
		return false;
	c->p++;
	for (;;) {
		jc_ws(c);
		if (c->p < c->end && *c->p == close && first)
			break;
		if (!first) {
			if (c->p < c->end && *c->p == close)
				break;
			if (c->p >= c->end || *c->p != ',')
				return false;
			c->p++;
			jc_ws(c);
		}
		first = false;
		if (close == '}') {
			if (!jc_string(c))
				return false;
			jc_ws(c);
			if (c->p >= c->end || *c->p != ':')
				return false;
			c->p++;
		}
		if (!jc_value(c))
			return false;
	}
	c->p++;
	c->depth--;
	return true;
}

static inline bool jc_value(struct jc *c)
{
	jc_ws(c);
	if (c->p >= c->end)
		return false;
	switch (*c->p) {
	case '{':
		return jc_scope(c, '}');
	case '[':
		return jc_scope(c, ']');
	case '"':
		return jc_string(c);
	case 't':
		return jc_lit(c, "true");
	case 'f':
		return jc_lit(c, "false");
	case 'n':
		return jc_lit(c, "null");
	default:
		return jc_number(c);
	}
}

/* Is @buf (@n bytes) exactly one JSON document? */
static inline bool json_valid(const char *buf, size_t n)
{
	struct jc c = { .p = buf, .end = buf + n };

	if (!jc_value(&c))
		return false;
	jc_ws(&c);
	return c.p == c.end;
}

#endif
