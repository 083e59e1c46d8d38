/*
 * The explain tests' reader of explain --json and their shared checks
 * (see test_explain_lib.h).  The JSON is flattened into (path, value)
 * pairs, "parts.heap_free" -> "1234", "findings[0].id" -> "heap_free",
 * after common/json.c's json_valid() accepted it.
 */
#include "test_explain_lib.h"
#include "../lib/fixture.h"
#include "common/json.h"

#include <criterion/criterion.h>
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const explain_part_names[P_COUNT] = {
	[P_HEAP_IN_USE] = "heap_in_use",
	[P_HEAP_FREE] = "heap_free",
	[P_ALLOCATOR_METADATA] = "allocator_metadata",
	[P_THREAD_STACKS] = "thread_stacks",
	[P_ANON_OTHER] = "anon_other",
	[P_FILE] = "file",
	[P_SHMEM] = "shmem",
	[P_RUNTIME] = "runtime",
	[P_MEMSNAP_SAMPLER] = "memsnap_sampler",
	[P_UNACCOUNTED] = "unaccounted",
	[P_SWAP] = "swap",
	[P_HEAP] = "heap",
};

struct jent {
	char path[96];
	char type;	/* 'n' number, 's' string, 'b' bool, 'z' null */
	char *val;
};

struct jdoc {
	struct jent *e;
	size_t n, cap;
};

/* The memory of every explain between explain_run() and explain_free()
 * (not the struct: a failed assertion leaves the test's frame). */
static struct {
	char *json;
	struct jdoc *doc;
} live[16];

static void jdoc_add(struct jdoc *d, const char *path, char type,
		     const char *val, size_t len)
{
	struct jent *x;

	if (d->n == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 64;
		d->e = realloc(d->e, d->cap * sizeof(*d->e));
		cr_assert_not_null(d->e);
	}
	x = &d->e[d->n++];
	snprintf(x->path, sizeof(x->path), "%s", path);
	x->type = type;
	x->val = strndup(val, len);
	cr_assert_not_null(x->val);
}

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
		p++;
	return p;
}

/* A string literal at @p (on its '"'), unescaped into @out (\u
 * escapes become '?'); returns the position after it. */
static const char *jstring(const char *p, char *out, size_t size)
{
	size_t n = 0;

	for (p++; *p && *p != '"'; p++) {
		char c = *p;

		if (c == '\\') {
			p++;
			switch (*p) {
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case 'r': c = '\r'; break;
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'u': c = '?'; p += 4; break;
			default: c = *p; break;
			}
		}
		if (n + 1 < size)
			out[n++] = c;
	}
	out[n] = '\0';
	return *p ? p + 1 : p;
}

static const char *jvalue(struct jdoc *d, const char *p, const char *path);

static const char *jcompound(struct jdoc *d, const char *p, const char *path)
{
	bool object = *p == '{';
	char key[96], sub[256];
	size_t i = 0;

	p = skip_ws(p + 1);
	if (*p == (object ? '}' : ']'))
		return p + 1;
	for (;;) {
		p = skip_ws(p);
		if (object) {
			p = skip_ws(jstring(p, key, sizeof(key)));
			p = skip_ws(p + 1);	/* ':' */
			snprintf(sub, sizeof(sub), "%s%s%s", path,
				 *path ? "." : "", key);
		} else {
			snprintf(sub, sizeof(sub), "%s[%zu]", path, i++);
		}
		p = skip_ws(jvalue(d, p, sub));
		if (*p == ',') {
			p++;
			continue;
		}
		return *p ? p + 1 : p;
	}
}

static const char *jvalue(struct jdoc *d, const char *p, const char *path)
{
	const char *q;

	p = skip_ws(p);
	if (*p == '{' || *p == '[')
		return jcompound(d, p, path);
	if (*p == '"') {
		size_t len = strlen(p);
		char *buf = malloc(len + 1);

		cr_assert_not_null(buf);
		q = jstring(p, buf, len + 1);
		jdoc_add(d, path, 's', buf, strlen(buf));
		free(buf);
		return q;
	}
	for (q = p; *q && !strchr(",}] \n\t\r", *q); q++)
		;
	jdoc_add(d, path, *p == 'n' ? 'z' : (*p == 't' || *p == 'f') ? 'b' : 'n',
		 p, (size_t)(q - p));
	return q;
}

static const struct jent *jget(const struct explain *e, const char *path)
{
	const struct jdoc *d = e->doc;
	size_t i;

	for (i = 0; i < d->n; i++)
		if (!strcmp(d->e[i].path, path))
			return &d->e[i];
	return NULL;
}

bool explain_num(const struct explain *e, const char *path, int64_t *v)
{
	const struct jent *x = jget(e, path);

	if (!x || x->type != 'n')
		return false;
	*v = strtoll(x->val, NULL, 10);
	return true;
}

const char *explain_str(const struct explain *e, const char *path)
{
	const struct jent *x = jget(e, path);

	return x && x->type == 's' ? x->val : NULL;
}

int64_t proc_rss(pid_t pid)
{
	char path[64], line[256];
	long long kb = -1;
	FILE *f;

	/* the kernel's page walk, as explain's: VmRSS lags it before
	 * Linux 6.2 */
	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	f = fopen(path, "re");
	cr_assert_not_null(f, "%s", path);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Rss: %lld kB", &kb) == 1)
			break;
	fclose(f);
	cr_assert_geq(kb, 0, "no Rss in %s", path);
	return (int64_t)kb * 1024;
}

int64_t smaps_field_at(pid_t pid, unsigned long start, const char *field)
{
	char path[64], line[512];
	size_t flen = strlen(field);
	long long kb = -1;
	bool in = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
	f = fopen(path, "re");
	cr_assert_not_null(f, "%s", path);
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;

		if (sscanf(line, "%lx-%lx ", &a, &b) == 2 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			if (in)
				break;
			in = a == start;
			continue;
		}
		if (in && !strncmp(line, field, flen) && line[flen] == ':') {
			kb = strtoll(line + flen + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return kb < 0 ? -1 : (int64_t)kb * 1024;
}

int64_t smaps_rss_named(pid_t pid, const char *name)
{
	char path[64], line[512];
	long long kb, sum = 0;
	bool in = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
	f = fopen(path, "re");
	cr_assert_not_null(f, "%s", path);
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;
		size_t len = strlen(line);

		if (sscanf(line, "%lx-%lx ", &a, &b) == 2 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			while (len && line[len - 1] == '\n')
				line[--len] = '\0';
			in = len >= strlen(name) &&
			     !strcmp(line + len - strlen(name), name);
			continue;
		}
		if (in && sscanf(line, "Rss: %lld kB", &kb) == 1)
			sum += kb;
	}
	fclose(f);
	return (int64_t)sum * 1024;
}

int64_t ready_num(const char *text, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "%s=", key);
	for (p = strstr(text, pat); p; p = strstr(p + 1, pat))
		if (p == text || p[-1] == ' ')
			return strtoll(p + strlen(pat), NULL, 0);
	cr_assert_fail("no %s= in the ready line: %s", key, text);
	return -1;
}

void explain_run(pid_t pid, const char *extra, struct explain *e,
		 int64_t *rss_lo, int64_t *rss_hi)
{
	char pidstr[16], path[64];
	const char *args[] = { "--pid", pidstr, "explain", "--json", extra,
			       NULL };
	struct jdoc *d;
	struct run r;
	int64_t before, after, v;
	size_t i;

	memset(e, 0, sizeof(*e));
	snprintf(pidstr, sizeof(pidstr), "%d", (int)pid);
	before = proc_rss(pid);
	cr_assert_eq(run_memsnap(&r, args), 0);
	after = proc_rss(pid);
	cr_assert_eq(r.status, 0, "explain --json%s%s: exit %d: %s",
		     extra ? " " : "", extra ? extra : "", r.status, r.err);
	cr_assert(json_valid(r.out, strlen(r.out)), "not JSON:\n%s", r.out);
	cr_assert_eq(r.out[0], '{', "not one object:\n%.300s", r.out);
	e->json = r.out;
	r.out = NULL;
	run_free(&r);
	if (rss_lo)
		*rss_lo = before < after ? before : after;
	if (rss_hi)
		*rss_hi = before > after ? before : after;

	d = calloc(1, sizeof(*d));
	cr_assert_not_null(d);
	e->doc = d;
	for (i = 0; i < sizeof(live) / sizeof(live[0]); i++)
		if (!live[i].doc) {
			live[i].json = e->json;
			live[i].doc = d;
			break;
		}
	jvalue(d, e->json, "");

	cr_assert(explain_num(e, "rss", &e->rss), "no rss:\n%s", e->json);
	for (i = 0; i < P_COUNT; i++) {
		snprintf(path, sizeof(path), "parts.%s", explain_part_names[i]);
		e->known[i] = explain_num(e, path, &e->part[i]);
	}
	for (i = 0; i < EXPLAIN_MAX_FINDINGS; i++) {
		struct explain_finding *f = &e->f[i];

		snprintf(path, sizeof(path), "findings[%zu].id", i);
		f->id = explain_str(e, path);
		if (!f->id)
			break;
		snprintf(path, sizeof(path), "findings[%zu].bytes", i);
		cr_assert(explain_num(e, path, &f->bytes),
			  "finding %s has no bytes:\n%s", f->id, e->json);
		snprintf(path, sizeof(path), "findings[%zu].text", i);
		f->text = explain_str(e, path);
		snprintf(path, sizeof(path), "findings[%zu].remedy", i);
		f->remedy = explain_str(e, path);
	}
	e->nfindings = i;
	e->verdict = explain_str(e, "verdict");
	e->allocator = explain_str(e, "allocator");
	e->threads = explain_num(e, "threads.count", &v) ? v : -1;
	e->largest_stack = explain_num(e, "threads.largest_stack", &v) ? v : -1;
	e->attached = -1;
	if (jget(e, "attached") && jget(e, "attached")->type == 'b')
		e->attached = jget(e, "attached")->val[0] == 't';
}

static void jdoc_free(struct jdoc *d, char *json)
{
	size_t i;

	for (i = 0; d && i < d->n; i++)
		free(d->e[i].val);
	if (d)
		free(d->e);
	free(d);
	free(json);
}

void explain_free(struct explain *e)
{
	size_t i;

	for (i = 0; i < sizeof(live) / sizeof(live[0]); i++)
		if (live[i].doc && live[i].doc == e->doc)
			live[i].doc = NULL;
	jdoc_free(e->doc, e->json);
	memset(e, 0, sizeof(*e));
}

void explain_free_all(void)
{
	size_t i;

	for (i = 0; i < sizeof(live) / sizeof(live[0]); i++)
		if (live[i].doc) {
			jdoc_free(live[i].doc, live[i].json);
			live[i].doc = NULL;
		}
}

const struct explain_finding *explain_finding(const struct explain *e,
					      const char *id)
{
	size_t i;

	for (i = 0; i < e->nfindings; i++)
		if (!strcmp(e->f[i].id, id))
			return &e->f[i];
	return NULL;
}

void assert_within_pct(int64_t got, int64_t want, double pct,
		       const char *what, const struct explain *e)
{
	int64_t d = got > want ? got - want : want - got;

	cr_assert_leq((double)d, (double)want * pct / 100.0,
		      "%s: %" PRId64 " against %" PRId64 " (off by %.1f%%, "
		      "allowed %.0f%%)\n%s", what, got, want,
		      want ? 100.0 * (double)d / (double)want : 100.0, pct,
		      e ? e->json : "");
}

void explain_assert_sound(const struct explain *e, int64_t rss_lo,
			  int64_t rss_hi, bool attached)
{
	int64_t sum = 0, una, fsum;
	size_t i;

	cr_assert_gt(e->rss, 0, "%s", e->json);
	cr_assert_geq((double)e->rss, (double)rss_lo * 0.98,
		      "rss %" PRId64 " below the Rss of smaps_rollup read around it (%" PRId64
		      "..%" PRId64 ")\n%s", e->rss, rss_lo, rss_hi, e->json);
	cr_assert_leq((double)e->rss, (double)rss_hi * 1.02,
		      "rss %" PRId64 " above the Rss of smaps_rollup read around it (%" PRId64
		      "..%" PRId64 ")\n%s", e->rss, rss_lo, rss_hi, e->json);

	for (i = 0; i < P_COUNT; i++) {
		bool allocator = i == P_HEAP_IN_USE || i == P_HEAP_FREE ||
				 i == P_ALLOCATOR_METADATA;

		if (i == P_HEAP)
			continue;
		if (allocator && !attached) {
			cr_assert(!e->known[i],
				  "--no-attach gives the allocator's %s: %"
				  PRId64 " (not absent or null)\n%s",
				  explain_part_names[i], e->part[i], e->json);
			continue;
		}
		/* Attached to an allocator that does not tell them apart
		 * (Debian's mimalloc): null, and its memory as "heap". */
		if (allocator && !e->known[i] && e->known[P_HEAP])
			continue;
		cr_assert(e->known[i], "parts.%s missing or null\n%s",
			  explain_part_names[i], e->json);
		if (i != P_UNACCOUNTED)
			cr_assert_geq(e->part[i], 0, "parts.%s < 0\n%s",
				      explain_part_names[i], e->json);
		if (i != P_SWAP)
			sum += e->part[i];
	}
	if (!attached)
		cr_assert(e->known[P_HEAP], "--no-attach: no parts.heap\n%s",
			  e->json);
	if (e->known[P_HEAP]) {
		cr_assert(!e->known[P_HEAP_IN_USE] && !e->known[P_HEAP_FREE],
			  "parts.heap beside the heap's own parts\n%s", e->json);
		cr_assert_geq(e->part[P_HEAP], 0, "%s", e->json);
		sum += e->part[P_HEAP];
	}
	cr_assert_eq(sum, e->rss, "the parts but swap add up to %" PRId64
		     ", not rss %" PRId64 "\n%s", sum, e->rss, e->json);
	una = e->part[P_UNACCOUNTED] < 0 ? -e->part[P_UNACCOUNTED]
					 : e->part[P_UNACCOUNTED];
	cr_assert_leq((double)una, (double)e->rss * 0.02,
		      "unaccounted %" PRId64 " is more than 2%% of rss %"
		      PRId64 "\n%s", e->part[P_UNACCOUNTED], e->rss, e->json);

	for (i = 0; i < e->nfindings; i++) {
		const struct explain_finding *f = &e->f[i];

		cr_assert(f->id[0], "a finding without an id\n%s", e->json);
		cr_assert(f->text && f->text[0], "finding %s has no text\n%s",
			  f->id, e->json);
		cr_assert_geq(f->bytes, 0, "%s", e->json);
		if (i)
			cr_assert_leq(f->bytes, e->f[i - 1].bytes,
				      "findings not most bytes first: %s (%"
				      PRId64 ") after %s (%" PRId64 ")\n%s",
				      f->id, f->bytes, e->f[i - 1].id,
				      e->f[i - 1].bytes, e->json);
	}
	fsum = 0;
	for (i = 0; i < e->nfindings; i++) {
		const struct explain_finding *f = &e->f[i];
		char path[96];
		int64_t cb;
		size_t c;

		fsum += f->bytes;
		for (c = 0;; c++) {
			const char *id;
			size_t j;

			snprintf(path, sizeof(path), "findings[%zu].causes[%zu].id",
				 i, c);
			id = explain_str(e, path);
			if (!id)
				break;
			snprintf(path, sizeof(path),
				 "findings[%zu].causes[%zu].bytes", i, c);
			cr_assert(explain_num(e, path, &cb) && cb >= 0 &&
					  cb <= f->bytes,
				  "cause %s of %s counts more than it\n%s", id,
				  f->id, e->json);
			for (j = 0; j < e->nfindings; j++)
				cr_assert(strcmp(e->f[j].id, id),
					  "%s is a finding and a cause of %s\n%s",
					  id, f->id, e->json);
		}
	}
	cr_assert_leq(fsum, e->rss, "the findings count %" PRId64
		      " bytes of %" PRId64 ": some twice\n%s", fsum, e->rss,
		      e->json);
	cr_assert(e->verdict && e->verdict[0], "no verdict\n%s", e->json);
	cr_assert_null(strchr(e->verdict, '\n'), "verdict of many lines: %s",
		       e->verdict);
	if (attached)
		cr_assert_neq(e->attached, 0, "\"attached\": false\n%s",
			      e->json);
	else
		cr_assert_eq(e->attached, 0,
			     "--no-attach not marked \"attached\": false\n%s",
			     e->json);
}

/* @s with every number ("97.4", "3853") as '#': two runs of explain a
 * moment apart may see a page more or less. */
static char *numbers_masked(const char *s, size_t len)
{
	char *out = malloc(len + 1);
	size_t i, n = 0;

	cr_assert_not_null(out);
	for (i = 0; i < len; i++) {
		if (isdigit((unsigned char)s[i])) {
			while (i + 1 < len && (isdigit((unsigned char)s[i + 1]) ||
					       (s[i + 1] == '.' && i + 2 < len &&
						isdigit((unsigned char)s[i + 2]))))
				i++;
			out[n++] = '#';
		} else {
			out[n++] = s[i];
		}
	}
	out[n] = '\0';
	return out;
}

void explain_assert_text_verdict(pid_t pid, const struct explain *e)
{
	char *line, *verdict;
	char pidstr[16];
	const char *why = explain_str(e, "not_read");
	/* not attached for want of an allocator is not --no-attach */
	const char *args[] = { "--pid", pidstr, "explain",
			       why && !strcmp(why, "--no-attach")
				       ? "--no-attach" : NULL, NULL };
	struct run r;
	size_t n;

	snprintf(pidstr, sizeof(pidstr), "%d", (int)pid);
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "explain: exit %d: %s", r.status, r.err);
	n = strcspn(r.out, "\n");
	line = numbers_masked(r.out, n);
	verdict = numbers_masked(e->verdict, strlen(e->verdict));
	cr_assert(n > 0 && strstr(line, verdict),
		  "the first line is not the verdict \"%s\":\n%s", e->verdict,
		  r.out);
	free(line);
	free(verdict);
	run_free(&r);
}

bool explain_cause(const struct explain *e, const char *host, const char *id,
		   int64_t *bytes, const char **remedy)
{
	char path[96];
	size_t i, c;

	for (i = 0; i < e->nfindings; i++) {
		if (strcmp(e->f[i].id, host))
			continue;
		for (c = 0;; c++) {
			const char *cid;

			snprintf(path, sizeof(path), "findings[%zu].causes[%zu].id",
				 i, c);
			cid = explain_str(e, path);
			if (!cid)
				break;
			if (strcmp(cid, id))
				continue;
			snprintf(path, sizeof(path),
				 "findings[%zu].causes[%zu].bytes", i, c);
			if (bytes && !explain_num(e, path, bytes))
				return false;
			snprintf(path, sizeof(path),
				 "findings[%zu].causes[%zu].remedy", i, c);
			if (remedy)
				*remedy = explain_str(e, path);
			return true;
		}
	}
	return false;
}
