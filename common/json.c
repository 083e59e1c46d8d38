#include "common/json.h"

#include "common/util.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

void json_init(struct json *j, FILE *f)
{
	memset(j, 0, sizeof(*j));
	j->f = f;
	j->first[0] = true;
}

void json_write_string(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	fputc('"', f);
	while (*s) {
		size_t n;

		switch (*s) {
		case '"':
			fputs("\\\"", f);
			s++;
			continue;
		case '\\':
			fputs("\\\\", f);
			s++;
			continue;
		case '\n':
			fputs("\\n", f);
			s++;
			continue;
		case '\t':
			fputs("\\t", f);
			s++;
			continue;
		case '\r':
			fputs("\\r", f);
			s++;
			continue;
		}
		if (*s < 0x20) {
			fprintf(f, "\\u%04x", *s);
			s++;
			continue;
		}
		n = utf8_len(s);
		if (n == 0) {
			fputs("\\ufffd", f);
			s++;
			continue;
		}
		fwrite(s, 1, n, f);
		s += n;
	}
	fputc('"', f);
}

static void indent(struct json *j)
{
	int i;

	for (i = 0; i < j->depth; i++)
		fputs("  ", j->f);
}

static void member(struct json *j, const char *key)
{
	if (j->depth > 0) {
		if (!j->first[j->depth])
			fputc(',', j->f);
		fputc('\n', j->f);
		indent(j);
	}
	j->first[j->depth] = false;
	if (key) {
		json_write_string(j->f, key);
		fputs(": ", j->f);
	}
}

static void open_scope(struct json *j, const char *key, char c)
{
	member(j, key);
	fputc(c, j->f);
	if (j->depth + 1 < JSON_MAX_DEPTH)
		j->depth++;
	j->first[j->depth] = true;
}

static void close_scope(struct json *j, char c)
{
	bool empty = j->first[j->depth];

	if (j->depth > 0)
		j->depth--;
	if (!empty) {
		fputc('\n', j->f);
		indent(j);
	}
	fputc(c, j->f);
}

void json_object_begin(struct json *j, const char *key)
{
	open_scope(j, key, '{');
}

void json_object_end(struct json *j)
{
	close_scope(j, '}');
}

void json_array_begin(struct json *j, const char *key)
{
	open_scope(j, key, '[');
}

void json_array_end(struct json *j)
{
	close_scope(j, ']');
}

void json_string(struct json *j, const char *key, const char *val)
{
	member(j, key);
	if (val)
		json_write_string(j->f, val);
	else
		fputs("null", j->f);
}

void json_u64(struct json *j, const char *key, uint64_t val)
{
	member(j, key);
	fprintf(j->f, "%" PRIu64, val);
}

void json_i64(struct json *j, const char *key, int64_t val)
{
	member(j, key);
	fprintf(j->f, "%" PRId64, val);
}

void json_double(struct json *j, const char *key, double val)
{
	member(j, key);
	if (isfinite(val))
		fprintf(j->f, "%.17g", val);
	else
		fputs("null", j->f);
}

void json_bool(struct json *j, const char *key, bool val)
{
	member(j, key);
	fputs(val ? "true" : "false", j->f);
}

void json_null(struct json *j, const char *key)
{
	member(j, key);
	fputs("null", j->f);
}

void json_hex(struct json *j, const char *key, uint64_t val)
{
	member(j, key);
	fprintf(j->f, "\"0x%" PRIx64 "\"", val);
}

void json_finish(struct json *j)
{
	fputc('\n', j->f);
}

void json_raw(struct json *j, const char *key, const char *text, size_t len)
{
	member(j, key);
	fwrite(text, 1, len, j->f);
}

/* ---- validation ---------------------------------------------------------- */

struct jv {
	const unsigned char *p, *end;
	int depth;
};

static void jv_blank(struct jv *v)
{
	while (v->p < v->end && (*v->p == ' ' || *v->p == '\t' ||
				 *v->p == '\n' || *v->p == '\r'))
		v->p++;
}

static bool jv_lit(struct jv *v, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(v->end - v->p) < n || memcmp(v->p, lit, n))
		return false;
	v->p += n;
	return true;
}

static bool jv_string(struct jv *v)
{
	if (v->p >= v->end || *v->p != '"')
		return false;
	v->p++;
	while (v->p < v->end) {
		unsigned char c = *v->p;
		size_t n;

		if (c == '"') {
			v->p++;
			return true;
		}
		if (c < 0x20)
			return false;
		if (c == '\\') {
			if (v->end - v->p < 2)
				return false;
			if (v->p[1] == 'u') {
				int i;

				if (v->end - v->p < 6)
					return false;
				for (i = 2; i < 6; i++)
					if (!strchr("0123456789abcdefABCDEF",
						    v->p[i]) || !v->p[i])
						return false;
				v->p += 6;
			} else if (v->p[1] && strchr("\"\\/bfnrt", v->p[1])) {
				v->p += 2;
			} else {
				return false;
			}
			continue;
		}
		/* utf8_seq_len reads up to 4 bytes: only where they exist. */
		if (c >= 0x80 && v->end - v->p < 4) {
			unsigned char tail[4] = { 0 };

			memcpy(tail, v->p, (size_t)(v->end - v->p));
			n = utf8_len(tail);
			if (!n || n > (size_t)(v->end - v->p))
				return false;
		} else {
			n = utf8_len(v->p);
			if (!n)
				return false;
		}
		v->p += n;
	}
	return false;
}

static bool jv_number(struct jv *v)
{
	const unsigned char *start = v->p;

	if (v->p < v->end && *v->p == '-')
		v->p++;
	if (v->p >= v->end || *v->p < '0' || *v->p > '9')
		return false;
	if (*v->p == '0')
		v->p++;
	else
		while (v->p < v->end && *v->p >= '0' && *v->p <= '9')
			v->p++;
	if (v->p < v->end && *v->p == '.') {
		v->p++;
		if (v->p >= v->end || *v->p < '0' || *v->p > '9')
			return false;
		while (v->p < v->end && *v->p >= '0' && *v->p <= '9')
			v->p++;
	}
	if (v->p < v->end && (*v->p == 'e' || *v->p == 'E')) {
		v->p++;
		if (v->p < v->end && (*v->p == '+' || *v->p == '-'))
			v->p++;
		if (v->p >= v->end || *v->p < '0' || *v->p > '9')
			return false;
		while (v->p < v->end && *v->p >= '0' && *v->p <= '9')
			v->p++;
	}
	return v->p > start;
}

static bool jv_value(struct jv *v);

static bool jv_container(struct jv *v, char close, bool object)
{
	v->p++;
	if (++v->depth > 256)
		return false;
	jv_blank(v);
	if (v->p < v->end && *v->p == close) {
		v->p++;
		v->depth--;
		return true;
	}
	for (;;) {
		jv_blank(v);
		if (object) {
			if (!jv_string(v))
				return false;
			jv_blank(v);
			if (v->p >= v->end || *v->p != ':')
				return false;
			v->p++;
		}
		if (!jv_value(v))
			return false;
		jv_blank(v);
		if (v->p >= v->end)
			return false;
		if (*v->p == close) {
			v->p++;
			v->depth--;
			return true;
		}
		if (*v->p != ',')
			return false;
		v->p++;
	}
}

static bool jv_value(struct jv *v)
{
	jv_blank(v);
	if (v->p >= v->end)
		return false;
	switch (*v->p) {
	case '{':
		return jv_container(v, '}', true);
	case '[':
		return jv_container(v, ']', false);
	case '"':
		return jv_string(v);
	case 't':
		return jv_lit(v, "true");
	case 'f':
		return jv_lit(v, "false");
	case 'n':
		return jv_lit(v, "null");
	default:
		return jv_number(v);
	}
}

bool json_valid(const char *text, size_t len)
{
	struct jv v = { (const unsigned char *)text,
			(const unsigned char *)text + len, 0 };

	if (!jv_value(&v))
		return false;
	jv_blank(&v);
	return v.p == v.end;
}
