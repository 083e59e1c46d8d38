#include "profile/profile.h"

#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A cursor over one line; never reads past @end. */
struct cur {
	const char *p, *end;
};

static void skip_blanks(struct cur *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
		c->p++;
}

static bool at_end(struct cur *c)
{
	skip_blanks(c);
	return c->p >= c->end;
}

static bool eat(struct cur *c, const char *s)
{
	size_t n = strlen(s);

	skip_blanks(c);
	if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n))
		return false;
	c->p += n;
	return true;
}

/* A decimal number without sign; false on overflow or no digit. */
static bool get_dec(struct cur *c, uint64_t *out)
{
	uint64_t v = 0;
	bool any = false;

	skip_blanks(c);
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		unsigned d = (unsigned)(*c->p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
		any = true;
		c->p++;
	}
	*out = v;
	return any;
}

/* "0x" and 1..16 hex digits. */
static bool get_hex(struct cur *c, uint64_t *out)
{
	uint64_t v = 0;
	int n = 0;

	skip_blanks(c);
	if (c->end - c->p < 3 || c->p[0] != '0' ||
	    (c->p[1] != 'x' && c->p[1] != 'X'))
		return false;
	c->p += 2;
	while (c->p < c->end) {
		char ch = *c->p;
		unsigned d;

		if (ch >= '0' && ch <= '9')
			d = (unsigned)(ch - '0');
		else if (ch >= 'a' && ch <= 'f')
			d = (unsigned)(ch - 'a' + 10);
		else if (ch >= 'A' && ch <= 'F')
			d = (unsigned)(ch - 'A' + 10);
		else
			break;
		if (++n > 16)
			return false;
		v = v << 4 | d;
		c->p++;
	}
	*out = v;
	return n > 0 && (c->p == c->end || *c->p == ' ' || *c->p == '\t');
}

/* "N: B" as in "t*: 13: 6688" or "1: 262144". */
static bool get_pair(struct cur *c, uint64_t *objs, uint64_t *bytes)
{
	return get_dec(c, objs) && eat(c, ":") && get_dec(c, bytes);
}

/* "[N: B]", the cumulative pair. */
static bool get_bracket(struct cur *c, uint64_t *objs, uint64_t *bytes)
{
	return eat(c, "[") && get_pair(c, objs, bytes) && eat(c, "]");
}

/* ... checked and ignored (a thread's line, the header's totals). */
static bool skip_bracket(struct cur *c)
{
	uint64_t a, b;

	return get_bracket(c, &a, &b);
}

const char *profile_format_name(enum profile_format f)
{
	return f == PROFILE_JEMALLOC ? "jemalloc" : "gperftools";
}

const char *profile_format_label(enum profile_format f)
{
	/* the format, not the allocator: memsnap's sampler writes heap_v2
	 * for any malloc */
	return f == PROFILE_JEMALLOC ? "heap_v2 (jemalloc's format)"
				     : "gperftools' format";
}

void profile_free(struct profile *p)
{
	if (!p)
		return;
	maps_free(p->maps);
	free(p->pool);
	free(p->v);
	free(p->text);
	free(p);
}

void profile_drop_text(struct profile *p)
{
	free(p->text);
	p->text = NULL;
	p->text_len = 0;
}

void profile_drop_stacks(struct profile *p)
{
	free(p->v);
	free(p->pool);
	p->v = NULL;
	p->pool = NULL;
	p->n = p->cap = p->pool_n = p->pool_cap = 0;
}

struct parser {
	struct profile *p;
	size_t line;
	char *why;
	size_t whylen;
	bool in_stack;	/* a "@ ..." line waits for its t*: line */
	uint32_t pending;	/* ... and has this many frames */
};

__attribute__((format(printf, 2, 3)))
static int bad(struct parser *ps, const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	if (ps->whylen) {
		n = snprintf(ps->why, ps->whylen, "line %zu: ", ps->line);
		if (n < 0 || (size_t)n >= ps->whylen)
			n = 0;
		va_start(ap, fmt);
		vsnprintf(ps->why + n, ps->whylen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* Parse "0x.. 0x.." into the pool; the stack starts at pool_n. */
static int get_stack(struct parser *ps, struct cur *c, uint32_t *depth)
{
	struct profile *p = ps->p;
	uint32_t n = 0;
	uint64_t pc;

	while (!at_end(c)) {
		if (!get_hex(c, &pc))
			return bad(ps, "bad address in stack");
		if (n >= PROFILE_MAX_DEPTH)
			return bad(ps, "stack deeper than %u frames",
				   PROFILE_MAX_DEPTH);
		if (array_grow((void **)&p->pool, &p->pool_cap, p->pool_n + 1,
			       sizeof(*p->pool)))
			return -ENOMEM;
		p->pool[p->pool_n++] = pc;
		n++;
	}
	if (!n)
		return bad(ps, "empty stack");
	*depth = n;
	return 0;
}

/* One pair unsampled into *@uobjs and *@ubytes, added to the totals. */
static void unsample(uint64_t period, uint64_t objs, uint64_t bytes,
		     double *uobjs, double *ubytes, double *total_objs,
		     double *total_bytes)
{
	double scale = profile_scale(period, objs, bytes);

	*uobjs = (double)objs * scale;
	*ubytes = (double)bytes * scale;
	*total_objs += *uobjs;
	*total_bytes += *ubytes;
}

static int add_stack(struct parser *ps, uint32_t depth, uint64_t objs,
		     uint64_t bytes, uint64_t aobjs, uint64_t abytes)
{
	struct profile *p = ps->p;
	struct profile_stack *s;

	if ((objs == 0 && bytes != 0) || (aobjs == 0 && abytes != 0))
		return bad(ps, "%llu bytes in 0 objects",
			   (unsigned long long)(!objs && bytes ? bytes
							       : abytes));
	if (array_grow((void **)&p->v, &p->cap, p->n + 1, sizeof(*p->v)))
		return -ENOMEM;
	s = &p->v[p->n++];
	/* pcs become pointers once the pool stops moving */
	s->pcs = (const uint64_t *)(uintptr_t)(p->pool_n - depth);
	s->depth = depth;
	s->objs = objs;
	s->bytes = bytes;
	unsample(p->period, objs, bytes, &s->uobjs, &s->ubytes,
		 &p->total_objs, &p->total_bytes);
	s->aobjs = aobjs;
	s->abytes = abytes;
	unsample(p->period, aobjs, abytes, &s->uaobjs, &s->uabytes,
		 &p->total_aobjs, &p->total_abytes);
	p->has_alloc |= aobjs != 0;
	return 0;
}

int profile_select(struct profile *p, bool alloc)
{
	if (alloc && p->n && !p->has_alloc)
		return -ENODATA;
	p->alloc = alloc;
	return 0;
}

/* One line of a jemalloc heap_v2 body. */
static int jemalloc_line(struct parser *ps, struct cur *c)
{
	uint64_t objs, bytes, aobjs, abytes;

	if (eat(c, "@")) {
		if (ps->in_stack)
			return bad(ps, "stack without counts");
		ps->in_stack = true;
		return get_stack(ps, c, &ps->pending);
	}
	if (eat(c, "t*:")) {
		if (!get_pair(c, &objs, &bytes) ||
		    !get_bracket(c, &aobjs, &abytes) || !at_end(c))
			return bad(ps, "bad t*: line");
		if (!ps->in_stack)
			return 0;	/* the profile's own total */
		ps->in_stack = false;
		return add_stack(ps, ps->pending, objs, bytes, aobjs, abytes);
	}
	if (eat(c, "t")) {
		uint64_t tid;

		if (!get_dec(c, &tid) || !eat(c, ":") ||
		    !get_pair(c, &objs, &bytes) || !skip_bracket(c) ||
		    !at_end(c))
			return bad(ps, "bad thread line");
		return 0;
	}
	return bad(ps, "not a heap_v2 line");
}

/* "     1:   262144 [     1:   262144] @ 0x4005c5 0x7f2a1c021d0a" */
static int gperf_line(struct parser *ps, struct cur *c)
{
	uint64_t objs, bytes, aobjs, abytes;
	uint32_t depth;
	int rc;

	if (!get_pair(c, &objs, &bytes) || !get_bracket(c, &aobjs, &abytes) ||
	    !eat(c, "@"))
		return bad(ps, "not a heap profile line");
	rc = get_stack(ps, c, &depth);
	if (rc)
		return rc;
	return add_stack(ps, depth, objs, bytes, aobjs, abytes);
}

/* "heap_v2/524288" or "heap profile: ... @ heapprofile" */
static int header(struct parser *ps, struct cur *c)
{
	struct profile *p = ps->p;
	uint64_t a, b;

	if (eat(c, "heap_v2/")) {
		p->format = PROFILE_JEMALLOC;
		if (!get_dec(c, &p->period) || !at_end(c) || !p->period)
			return bad(ps, "bad sample period");
		return 0;
	}
	if (!eat(c, "heap profile:"))
		return bad(ps, "not a heap profile (expected heap_v2/ or "
			       "heap profile:)");
	p->format = PROFILE_GPERFTOOLS;
	if (!get_pair(c, &a, &b) || !skip_bracket(c) || !eat(c, "@"))
		return bad(ps, "bad heap profile header");
	if (eat(c, "heapprofile")) {
		p->period = 0;
	} else if (eat(c, "heap_v2/")) {
		if (!get_dec(c, &p->period) || !p->period)
			return bad(ps, "bad sample period");
	} else {
		return bad(ps, "unsupported heap profile kind");
	}
	if (!at_end(c))
		return bad(ps, "bad heap profile header");
	return 0;
}

/* Parse @text (@len bytes and room for a NUL), which the profile takes
 * over, also on failure. */
static int parse_text(char *text, size_t len, struct profile **out,
		      char *why, size_t whylen)
{
	struct parser ps = { .why = why, .whylen = whylen };
	const char *p, *end;
	struct profile *prof;
	bool body = false;
	size_t i;
	int rc = 0;

	if (whylen)
		why[0] = '\0';
	prof = calloc(1, sizeof(*prof));
	if (!prof) {
		free(text);
		return -ENOMEM;
	}
	prof->text = text;
	prof->text[len] = '\0';
	prof->text_len = len;
	ps.p = prof;
	p = prof->text;
	end = p + len;

	while (p < end && !rc) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		struct cur c = { p, nl ? nl : end };

		ps.line++;
		if (memchr(p, '\0', (size_t)(c.end - p))) {
			rc = bad(&ps, "NUL byte: not a text profile");
			break;
		}
		if (ps.line == 1) {
			rc = header(&ps, &c);
		} else if (!body && at_end(&c)) {
			/* blank lines between stacks */
		} else if (eat(&c, "MAPPED_LIBRARIES:")) {
			if (!at_end(&c)) {
				rc = bad(&ps, "bad MAPPED_LIBRARIES: line");
				break;
			}
			p = nl ? nl + 1 : end;
			rc = maps_parse_buf(p, (size_t)(end - p),
					    &prof->maps);
			p = end;
			break;
		} else if (prof->format == PROFILE_JEMALLOC) {
			rc = jemalloc_line(&ps, &c);
		} else {
			rc = gperf_line(&ps, &c);
		}
		p = nl ? nl + 1 : end;
	}
	if (!rc && ps.line == 0)
		rc = bad(&ps, "empty file");
	if (!rc && ps.in_stack)
		rc = bad(&ps, "truncated: stack without counts");
	if (!rc && !prof->maps)
		rc = maps_parse_buf("", 0, &prof->maps);
	if (rc) {
		profile_free(prof);
		return rc;
	}
	for (i = 0; i < prof->n; i++)
		prof->v[i].pcs = prof->pool + (uintptr_t)prof->v[i].pcs;
	*out = prof;
	return 0;
}

int profile_parse(const char *buf, size_t len, struct profile **out,
		  char *why, size_t whylen)
{
	char *text;

	if (whylen)
		why[0] = '\0';
	if (len > PROFILE_MAX_SIZE)
		return -EFBIG;
	text = malloc(len + 1);
	if (!text)
		return -ENOMEM;
	memcpy(text, buf, len);
	return parse_text(text, len, out, why, whylen);
}

/* Room for @max + 1 bytes, to see one more, and the NUL. */
static size_t read_limit(uint64_t max)
{
	return max < SIZE_MAX - 2 ? (size_t)max : SIZE_MAX - 2;
}

int profile_open(const char *path, uint64_t max)
{
	struct stat st;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	/* a device (/dev/zero) or a directory is never a dump; a pipe
	 * (<(zcat dump.gz)) may be */
	if (fstat(fd, &st)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
		close(fd);
		return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	}
	/* O_NONBLOCK was for the open of a FIFO without a writer; a
	 * pipe's writer may not have written yet (<(zcat dump.gz)): wait
	 * for it, or for the end once there is no writer */
	if (S_ISFIFO(st.st_mode) && fcntl(fd, F_SETFL, 0)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	/* too big is refused before a byte is read */
	if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > read_limit(max)) {
		close(fd);
		return -EFBIG;
	}
	return fd;
}

int profile_read(int fd, uint64_t max, struct profile **out, char *why,
		 size_t whylen)
{
	size_t len = 0, cap = 0, limit = read_limit(max);
	char *buf = NULL;
	struct stat st;
	int rc = 0;

	if (whylen)
		why[0] = '\0';
	if (fstat(fd, &st)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	if (S_ISREG(st.st_mode)) {
		/* one buffer of the file's size, as long as it does not
		 * grow */
		if ((uint64_t)st.st_size > limit) {
			close(fd);
			return -EFBIG;
		}
		cap = (size_t)st.st_size + 2;
		buf = malloc(cap);
		if (!buf) {
			close(fd);
			return -ENOMEM;
		}
	}
	for (;;) {
		ssize_t n;

		if (len + 1 >= cap) {
			size_t ncap = cap < 131072 ? 262144 : cap * 2;
			char *nb;

			if (ncap > limit + 2)
				ncap = limit + 2;
			nb = realloc(buf, ncap);
			if (!nb) {
				rc = -ENOMEM;
				break;
			}
			buf = nb;
			cap = ncap;
		}
		n = read(fd, buf + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > limit) {
			rc = -EFBIG;
			break;
		}
	}
	close(fd);
	if (rc) {
		free(buf);
		return rc;
	}
	/* the loop leaves room for the NUL: len < cap */
	return parse_text(buf, len, out, why, whylen);
}

int profile_load_max(const char *path, uint64_t max, struct profile **out,
		     char *why, size_t whylen)
{
	int fd;

	if (whylen)
		why[0] = '\0';
	fd = profile_open(path, max);
	if (fd < 0)
		return fd;
	return profile_read(fd, max, out, why, whylen);
}

int profile_load(const char *path, struct profile **out, char *why,
		 size_t whylen)
{
	return profile_load_max(path, PROFILE_MAX_SIZE, out, why, whylen);
}
