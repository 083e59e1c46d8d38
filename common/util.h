#ifndef MEMSNAP_COMMON_UTIL_H
#define MEMSNAP_COMMON_UTIL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/*
 * Make room for at least @need elements of @elsize bytes in *@v, whose
 * capacity is *@cap elements.  Grows geometrically; on overflow or
 * allocation failure returns -ENOMEM and leaves *@v and *@cap untouched.
 */
int array_grow(void **v, size_t *cap, size_t need, size_t elsize);

/*
 * Strict unsigned parse of the whole string @s in @base (0: C rules).
 * Rejects empty strings, leading white space, signs, trailing garbage
 * and overflow: -EINVAL or -ERANGE.
 */
int parse_u64(const char *s, int base, uint64_t *out);

/* A pid as a user types it: decimal, 1 .. PID_MAX_LIMIT.  -EINVAL/-ERANGE. */
int parse_pid(const char *s, pid_t *out);

/* "4096", "64K", "512M", "1G", "2T" (also "1GiB", "1GB": powers of 1024)
 * into bytes.  0, -EINVAL or -ERANGE. */
int parse_size(const char *s, uint64_t *out);

/* A duration: a number (fractions allowed) of seconds, or with a unit
 * ms, s, m (min), h or d: "30s", "0.5", "2h".  In milliseconds, at most
 * a year.  0, -EINVAL or -ERANGE. */
int parse_duration_ms(const char *s, uint64_t *out);

/*
 * An error that says memsnap itself ran short (of descriptors or
 * memory): never blamed on the target, never passed over as "this
 * object is unreadable" or "this thread is gone".
 */
static inline bool err_is_starved(int err)
{
	return err == -EMFILE || err == -ENFILE || err == -ENOMEM;
}

/*
 * Raise the soft limit on open files to the hard one.  0, or -EMFILE
 * when even that allows fewer than @need descriptors; *@limit is the
 * limit in force either way.
 */
int fd_limit_raise(unsigned long need, unsigned long *limit);

/*
 * ".memsnap-<16 hex digits><suffix>" into @buf: a name nobody can
 * guess (getrandom), for memsnap's temporary files and directories.
 * 0 or -errno.
 */
int random_name(char *buf, size_t size, const char *suffix);

/* @len random bytes (getrandom) into @buf.  0 or -errno. */
int random_fill(void *buf, size_t len);

/* 64 random bits; without randomness (getrandom refused), bits of this
 * moment and this process that nobody can know in advance: for seeds
 * and hash keys, not for secrets. */
uint64_t random_seed(void);

/* The kernel's page size (AT_PAGESZ): 4 KiB, 16 KiB or 64 KiB. */
size_t page_size(void);

/* true if @s ends with @suffix. */
bool str_ends_with(const char *s, const char *suffix);

/* This memsnap is the static binary (make static): it has no dynamic
 * section, and loads no library at run time (libdebuginfod). */
bool linked_statically(void);

/* Lower-case hex of @len bytes into @out, which holds 2 * @len + 1. */
/*
 * qsort() that accepts an empty array: qsort(NULL, 0, ...) is undefined
 * (glibc declares the base nonnull), and empty arrays come from empty
 * dumps and modules without symbols.
 */
void sort(void *base, size_t n, size_t size,
	  int (*cmp)(const void *, const void *));

/*
 * Length of the valid UTF-8 sequence at @s (1 to 4), or 0 if it is not
 * one (overlong, surrogate, past U+10FFFF, cut).  Reads at most up to
 * the first byte that ends the sequence, so a NUL-terminated string is
 * safe.
 */
size_t utf8_len(const unsigned char *s);

/*
 * Write @s for a terminal: control bytes (C0, DEL), C1 controls and bytes
 * that are not UTF-8 become '?', so that text from a target (a path in a
 * dump, a process name) cannot drive the reader's terminal.
 */
void fputs_clean(const char *s, FILE *f);

/* At most @max characters of @s as XML text or attribute value: the
 * five specials as entities, control bytes as '?', bytes that are not
 * UTF-8 as U+FFFD, ".." when cut. */
void xml_text(FILE *f, const char *s, size_t max);

/* The last component of @path ("libc.so.6"), or @path without a '/'. */
const char *path_base(const char *path);

/* @b as "512 B", "1.5 KiB", "3.2 GiB". */
void human_bytes(uint64_t b, char *buf, size_t size);

void hex_encode(const unsigned char *p, size_t len, char *out);

#endif
