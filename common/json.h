#ifndef MEMSNAP_COMMON_JSON_H
#define MEMSNAP_COMMON_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/*
 * A small streaming JSON writer for memsnap's --json output.  Keys are
 * NULL inside arrays and at the top level, a string everywhere else.
 * Strings are written as valid UTF-8: bytes that are not (a path from the
 * target can hold anything) become U+FFFD.  Output is indented with two
 * spaces, one member per line, so that diffs of two outputs are readable.
 */
#define JSON_MAX_DEPTH 32

struct json {
	FILE *f;
	int depth;
	bool first[JSON_MAX_DEPTH];
};

void json_init(struct json *j, FILE *f);
void json_object_begin(struct json *j, const char *key);
void json_object_end(struct json *j);
void json_array_begin(struct json *j, const char *key);
void json_array_end(struct json *j);
/* @val NULL writes null. */
void json_string(struct json *j, const char *key, const char *val);
void json_u64(struct json *j, const char *key, uint64_t val);
void json_i64(struct json *j, const char *key, int64_t val);
void json_double(struct json *j, const char *key, double val);
void json_bool(struct json *j, const char *key, bool val);
void json_null(struct json *j, const char *key);
/* An address as the string "0x..." (JSON numbers lose 64-bit precision). */
void json_hex(struct json *j, const char *key, uint64_t val);
/* Finish the document with a newline. */
void json_finish(struct json *j);

/* @len bytes of JSON text as the value of @key, as they are: only for
 * text json_valid() accepted. */
void json_raw(struct json *j, const char *key, const char *text, size_t len);

/*
 * Is @text (@len bytes) one well-formed JSON value (RFC 8259: UTF-8,
 * escapes, numbers), nested at most 256 deep?  For JSON that came from
 * the target before it is passed on.
 */
bool json_valid(const char *text, size_t len);

/* Write @s as a JSON string literal, quotes included. */
void json_write_string(FILE *f, const char *s);

#endif
