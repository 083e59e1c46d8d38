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

struct pb {
	unsigned char *b;
	size_t len, cap;
	bool oom;
};

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
}

struct strings {
	struct strmap map;
	struct pb tab;	/* the string_table fields, in index order */
	size_t n;
	bool oom;
};

static uint64_t str_id(struct strings *s, const char *str)
{
	size_t idx;
	bool added;

	if (strmap_get(&s->map, str, s->n, &idx, &added)) {
		s->oom = true;
		return 0;
	}
	if (added) {
		pb_bytes(&s->tab, 6, str, strlen(str));
		s->n++;
	}
	return idx;
}

static int gzip_out(const unsigned char *d, size_t n, FILE *f)
{
	unsigned char out[65536];
	z_stream zs = { 0 };
	int zr;

	if (deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	zs.next_in = (unsigned char *)d;
	zs.avail_in = (uInt)n;	/* profiles stay far below 4 GiB */
	do {
		zs.next_out = out;
		zs.avail_out = sizeof(out);
		zr = deflate(&zs, Z_FINISH);
		if (zr == Z_STREAM_ERROR)
			break;
		fwrite(out, 1, sizeof(out) - zs.avail_out, f);
	} while (zr != Z_STREAM_END);
	deflateEnd(&zs);
	if (zr != Z_STREAM_END)
		return -EIO;
	return ferror(f) ? -EIO : 0;
}

static void value_type(struct pb *p, struct pb *sub, unsigned int field,
		       struct strings *s, const char *type, const char *unit)
{
	pb_uint(sub, 1, str_id(s, type));
	pb_uint(sub, 2, str_id(s, unit));
	pb_msg(p, field, sub);
}

int report_pprof(const struct report *r, const struct report_opts *o,
		 FILE *f)
{
	struct strings s = { 0 };
	struct strmap funcs = { 0 };
	struct pb body = { 0 }, sub = { 0 }, sub2 = { 0 }, all = { 0 };
	const struct dwsym_module *mods;
	size_t nm, i, nfuncs = 0;
	int rc = 0;

	(void)o;
	if (r->base)
		return -ENOTSUP;
	str_id(&s, "");
	value_type(&body, &sub, 1, &s, "inuse_objects", "count");
	value_type(&body, &sub, 1, &s, "inuse_space", "bytes");

	for (i = 0; i < r->nsamples; i++) {
		const struct report_sample *smp = &r->samples[i];
		uint32_t k;

		for (k = 0; k < smp->n; k++)
			pb_varint(&sub2, (uint64_t)smp->locs[k] + 1);
		pb_msg(&sub, 1, &sub2);
		pb_varint(&sub2, (uint64_t)report_round(smp->objs));
		pb_varint(&sub2, (uint64_t)report_round(smp->bytes));
		pb_msg(&sub, 2, &sub2);
		pb_msg(&body, 2, &sub);
	}

	nm = symbolizer_modules(r->sym, &mods);
	for (i = 0; i < nm; i++) {
		const struct dwsym_module *md = &mods[i];

		pb_uint(&sub, 1, i + 1);
		pb_uint(&sub, 2, md->start);
		pb_uint(&sub, 3, md->limit);
		pb_uint(&sub, 4, md->file_offset);
		pb_uint(&sub, 5, str_id(&s, md->path));
		if (md->build_id[0])
			pb_uint(&sub, 6, str_id(&s, md->build_id));
		pb_uint(&sub, 7, md->err == 0);
		pb_uint(&sub, 8, md->debuginfo);
		pb_uint(&sub, 9, md->debuginfo);
		pb_uint(&sub, 10, md->debuginfo);
		pb_msg(&body, 3, &sub);
	}

	for (i = 0; i < r->nlocs && !rc; i++) {
		const struct dwsym_loc *l = r->locs[i].sym;
		unsigned int k;

		pb_uint(&sub, 1, i + 1);
		if (l->module >= 0)
			pb_uint(&sub, 2, (uint64_t)l->module + 1);
		pb_uint(&sub, 3, l->pc);
		for (k = 0; k < l->nframes; k++) {
			const struct dwsym_frame *fr = &l->frames[k];
			const char *file = fr->file ? fr->file : "";
			struct sbuf key = { 0 };
			size_t fid;
			bool added;

			rc = sbuf_add(&key, fr->name);
			if (!rc)
				rc = sbuf_add(&key, "\001");
			if (!rc)
				rc = sbuf_add(&key, file);
			if (!rc)
				rc = strmap_get(&funcs, key.s, nfuncs + 1,
						&fid, &added);
			free(key.s);
			if (rc)
				break;
			if (added) {
				struct pb fn = { 0 };

				nfuncs++;
				pb_uint(&fn, 1, fid);
				pb_uint(&fn, 2, str_id(&s, fr->name));
				pb_uint(&fn, 3, str_id(&s, fr->name));
				pb_uint(&fn, 4, str_id(&s, file));
				pb_msg(&all, 5, &fn);
				free(fn.b);
			}
			pb_uint(&sub2, 1, fid);
			pb_uint(&sub2, 2, fr->line);
			pb_msg(&sub, 4, &sub2);
		}
		pb_msg(&body, 4, &sub);
	}
	/* functions were gathered on the side, in order */
	pb_raw(&body, all.b, all.len);
	if (all.oom)
		body.oom = true;

	value_type(&body, &sub, 11, &s, "space", "bytes");
	pb_uint(&body, 12, r->prof->period ? r->prof->period : 1);
	pb_uint(&body, 14, str_id(&s, "inuse_space"));
	pb_raw(&body, s.tab.b, s.tab.len);
	if (s.oom || s.tab.oom || body.oom || sub.oom || sub2.oom)
		rc = -ENOMEM;
	if (!rc)
		rc = gzip_out(body.b, body.len, f);
	strmap_free(&s.map);
	strmap_free(&funcs);
	free(s.tab.b);
	free(body.b);
	free(sub.b);
	free(sub2.b);
	free(all.b);
	return rc;
}
