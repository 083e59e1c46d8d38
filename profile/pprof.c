/*
 * pprof export: profile.proto (github.com/google/pprof/proto/profile.proto)
 * encoded by hand, gzipped.  Only what a heap profile needs:
 *
 *   Profile  1 sample_type  2 sample  3 mapping  4 location  5 function
 *            6 string_table  11 period_type  12 period
 *            14 default_sample_type
 *   Sample   1 location_id (packed, leaf first)  2 value (packed)
 *   Mapping  1 id 2 memory_start 3 memory_limit 4 file_offset 5 filename
 *            6 build_id 7 has_functions 8 has_filenames 9 has_line_numbers
 *            10 has_inline_frames
 *   Location 1 id 2 mapping_id 3 address 4 line (innermost first)
 *   Line     1 function_id 2 line
 *   Function 1 id 2 name 3 system_name 4 filename
 */
#include "profile/report.h"
#include "profile/report_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/*
 * A message being encoded.  The profile itself goes to the gzip stream
 * as it is made (@gz set), a megabyte at a time: only the functions and
 * the string table, which come last, are kept whole.
 */
struct pb {
	unsigned char *b;
	size_t len, cap;
	bool oom;
	struct gz *gz;
};

struct gz {
	z_stream zs;
	FILE *f;
	int err;
	unsigned char out[65536];
};

/* Deflate @n bytes at @d (@flush: Z_NO_FLUSH, or Z_FINISH at the end). */
static void gz_put(struct gz *g, const unsigned char *d, size_t n, int flush)
{
	int zr;

	if (g->err)
		return;
	g->zs.next_in = (unsigned char *)d;
	do {
		/* avail_in is a uInt */
		size_t chunk = n > (1u << 30) ? 1u << 30 : n;

		g->zs.avail_in = (uInt)chunk;
		n -= chunk;
		do {
			g->zs.next_out = g->out;
			g->zs.avail_out = sizeof(g->out);
			zr = deflate(&g->zs, n ? Z_NO_FLUSH : flush);
			if (zr == Z_STREAM_ERROR) {
				g->err = -EIO;
				return;
			}
			fwrite(g->out, 1, sizeof(g->out) - g->zs.avail_out,
			       g->f);
		} while (g->zs.avail_out == 0 ||
			 (flush == Z_FINISH && !n && zr != Z_STREAM_END));
	} while (n);
	if (ferror(g->f))
		g->err = -EIO;
}

static void pb_spill(struct pb *p)
{
	if (p->gz && p->len >= (1u << 20)) {
		gz_put(p->gz, p->b, p->len, Z_NO_FLUSH);
		p->len = 0;
	}
}

static void pb_raw(struct pb *p, const void *d, size_t n)
{
	if (p->oom || !n)
		return;
	if (p->len + n > p->cap) {
		size_t ncap = p->cap ? p->cap * 2 : 4096;
		unsigned char *nb;

		while (ncap < p->len + n)
			ncap *= 2;
		nb = realloc(p->b, ncap);
		if (!nb) {
			p->oom = true;
			return;
		}
		p->b = nb;
		p->cap = ncap;
	}
	memcpy(p->b + p->len, d, n);
	p->len += n;
}

static void pb_varint(struct pb *p, uint64_t v)
{
	unsigned char t[10];
	size_t n = 0;

	do {
		t[n] = v & 0x7f;
		v >>= 7;
		if (v)
			t[n] |= 0x80;
		n++;
	} while (v);
	pb_raw(p, t, n);
}

static void pb_uint(struct pb *p, unsigned int field, uint64_t v)
{
	pb_varint(p, (uint64_t)field << 3 | 0);
	pb_varint(p, v);
}

static void pb_bytes(struct pb *p, unsigned int field, const void *d,
		     size_t n)
{
	pb_varint(p, (uint64_t)field << 3 | 2);
	pb_varint(p, n);
	pb_raw(p, d, n);
}

/* Append @sub as field @field and empty it. */
static void pb_msg(struct pb *p, unsigned int field, struct pb *sub)
{
	if (sub->oom)
		p->oom = true;
	pb_bytes(p, field, sub->b, sub->len);
	sub->len = 0;
	pb_spill(p);
}

/*
 * The strings and functions are written into the profile where they are
 * first needed, not gathered for the end: a repeated field may come in
 * pieces, and indexes are resolved once the whole profile is read.
 * Every string given is the symbolizer's or the maps', or a literal,
 * and outlives the export: the table keeps pointers, never copies.
 */
struct strings {
	struct strmap map;
	struct pb *out;
	bool oom;
};

static uint64_t str_id(struct strings *s, const char *str)
{
	size_t idx;
	bool added;

	if (strmap_get_static(&s->map, str, &idx, &added)) {
		s->oom = true;
		return 0;
	}
	if (added)
		pb_bytes(s->out, 6, str, strlen(str));
	return idx;
}

static void value_type(struct pb *p, struct pb *sub, unsigned int field,
		       struct strings *s, const char *type, const char *unit)
{
	pb_uint(sub, 1, str_id(s, type));
	pb_uint(sub, 2, str_id(s, unit));
	pb_msg(p, field, sub);
}

/* Profile.sample: each sample's locations and values (the four where
 * the dump counts allocations, @all). */
static void put_samples(const struct report *r, bool all, struct pb *body,
			struct pb *sub, struct pb *sub2)
{
	size_t i;

	for (i = 0; i < r->nsamples; i++) {
		const struct report_sample *smp = &r->samples[i];
		uint32_t k;

		for (k = 0; k < smp->n; k++)
			pb_varint(sub2, (uint64_t)smp->locs[k] + 1);
		pb_msg(sub, 1, sub2);
		if (all) {
			pb_varint(sub2,
				  (uint64_t)report_round(smp->alloc_objs));
			pb_varint(sub2,
				  (uint64_t)report_round(smp->alloc_bytes));
		}
		pb_varint(sub2, (uint64_t)report_round(smp->inuse_objs));
		pb_varint(sub2, (uint64_t)report_round(smp->inuse_bytes));
		pb_msg(sub, 2, sub2);
		pb_msg(body, 2, sub);
	}
}

/* Profile.mapping: the symbolizer's modules. */
static void put_mappings(const struct report *r, struct strings *s,
			 struct pb *body, struct pb *sub)
{
	const struct dwsym_module *mods;
	size_t nm = symbolizer_modules(r->sym, &mods), i;

	for (i = 0; i < nm; i++) {
		const struct dwsym_module *md = &mods[i];

		pb_uint(sub, 1, i + 1);
		pb_uint(sub, 2, md->start);
		pb_uint(sub, 3, md->limit);
		pb_uint(sub, 4, md->file_offset);
		pb_uint(sub, 5, str_id(s, md->path));
		if (md->build_id[0])
			pb_uint(sub, 6, str_id(s, md->build_id));
		pb_uint(sub, 7, md->err == 0);
		pb_uint(sub, 8, md->debuginfo);
		pb_uint(sub, 9, md->debuginfo);
		pb_uint(sub, 10, md->debuginfo);
		pb_msg(body, 3, sub);
	}
}

/* Profile.location, each with its lines, and Profile.function, each
 * once (a function is its name and its file).  0 or -ENOMEM. */
static int put_locations(const struct report *r, struct strings *s,
			 struct u64map *funcs, struct pb *body,
			 struct pb *sub, struct pb *sub2, struct pb *fn)
{
	size_t i;
	int rc = 0;

	for (i = 0; i < r->nlocs && !rc; i++) {
		const struct dwsym_loc *l = r->locs[i].sym;
		unsigned int k;

		pb_uint(sub, 1, i + 1);
		if (l->module >= 0)
			pb_uint(sub, 2, (uint64_t)l->module + 1);
		pb_uint(sub, 3, l->pc);
		for (k = 0; k < l->nframes; k++) {
			const struct dwsym_frame *fr = &l->frames[k];
			uint64_t name = str_id(s, fr->name);
			uint64_t file = str_id(s, fr->file ? fr->file : "");
			uint32_t fid;
			bool added;

			rc = u64map_get(funcs, name << 32 | file, &fid, &added);
			if (rc)
				break;
			if (added) {
				pb_uint(fn, 1, fid + 1);
				pb_uint(fn, 2, name);
				pb_uint(fn, 3, name);
				pb_uint(fn, 4, file);
				pb_msg(body, 5, fn);
			}
			pb_uint(sub2, 1, fid + 1);
			pb_uint(sub2, 2, fr->line);
			pb_msg(sub, 4, sub2);
		}
		pb_msg(body, 4, sub);
	}
	return rc;
}

int report_pprof(const struct report *r, const struct report_opts *o,
		 FILE *f)
{
	struct strings s = { 0 };
	struct u64map funcs = { 0 };
	struct pb body = { 0 }, sub = { 0 }, sub2 = { 0 }, fn = { 0 };
	struct gz *gz;
	bool all = r->prof->has_alloc;
	int rc = 0;

	(void)o;
	if (r->base)
		return -ENOTSUP;
	gz = calloc(1, sizeof(*gz));
	if (!gz)
		return -ENOMEM;
	/* the speed Go's runtime/pprof writes its profiles at */
	if (deflateInit2(&gz->zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK) {
		free(gz);
		return -ENOMEM;
	}
	gz->f = f;
	body.gz = gz;
	s.out = &body;
	str_id(&s, "");
	/* the four of Go's and tcmalloc's heap profiles, where the dump
	 * counts allocations; in use alone where it does not */
	if (all) {
		value_type(&body, &sub, 1, &s, "alloc_objects", "count");
		value_type(&body, &sub, 1, &s, "alloc_space", "bytes");
	}
	value_type(&body, &sub, 1, &s, "inuse_objects", "count");
	value_type(&body, &sub, 1, &s, "inuse_space", "bytes");

	put_samples(r, all, &body, &sub, &sub2);
	put_mappings(r, &s, &body, &sub);
	rc = put_locations(r, &s, &funcs, &body, &sub, &sub2, &fn);

	value_type(&body, &sub, 11, &s, "space", "bytes");
	pb_uint(&body, 12, r->prof->period ? r->prof->period : 1);
	pb_uint(&body, 14, str_id(&s, all && r->alloc ? "alloc_space"
							 : "inuse_space"));
	if (s.oom || body.oom || sub.oom || sub2.oom || fn.oom)
		rc = -ENOMEM;
	if (!rc) {
		gz_put(gz, body.b, body.len, Z_FINISH);
		rc = gz->err;
	}
	deflateEnd(&gz->zs);
	free(gz);
	strmap_free(&s.map);
	u64map_free(&funcs);
	free(body.b);
	free(sub.b);
	free(sub2.b);
	free(fn.b);
	return rc;
}
