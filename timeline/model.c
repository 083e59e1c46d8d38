/*
 * memsnap report DIR: a watch's series (cli/watch.c) made into an
 * answer.  Is it still growing, what grows, and when does it reach its
 * limit:
 *
 *   - every part of RSS over the ticks, with its slope and its shape
 *     (timeline/trend.h says how a shape is decided);
 *   - the call sites whose bytes grew over the dumps, ranked by growth
 *     (the rise of the least-squares line through them, from the first
 *     dump to the last), each with its shape over the dumps: a site that
 *     grows in every interval is a leak suspect, one that fills and
 *     stops a cache, one that comes and goes a working set;
 *   - when RSS reaches the cgroup's memory limit at its slope.
 *
 * The directory is the caller's own (outdir_open()), and every file in
 * it is opened relative to it, a regular file, no link followed.  The
 * series is memsnap's own format, read back as untrusted
 * (series_parse()).  The dumps are the target's bytes: this process
 * hands their descriptors to the report's sandbox (profile/box.h),
 * which parses them one after another, and reads back only the folded
 * lines it writes, within a bound.  The growth between the first dump
 * read and the last is the difference of their folded lines.
 */
#include "timeline/timeline.h"
#include "timeline/timeline_internal.h"

#include "common/fsio.h"
#include "common/hidx.h"
#include "common/output.h"
#include "common/util.h"
#include "timeline/series.h"
#include "timeline/trend.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the series ---------------------------------------------------------- */

/* @name in @dir_fd, whole, NUL-ended: 0 or -errno (-EFBIG: over
 * @max). */
static int read_file(int dir_fd, const char *name, uint64_t max,
		     char **out, size_t *len)
{
	struct stat st;
	char *buf;
	ssize_t n;
	int fd;

	*out = NULL;
	fd = outdir_open_file(dir_fd, name, max);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) || !(buf = malloc((size_t)st.st_size + 1))) {
		close(fd);
		return -ENOMEM;
	}
	n = read_in_full(fd, buf, (size_t)st.st_size);
	close(fd);
	if (n < 0) {
		free(buf);
		return (int)n;
	}
	buf[n] = '\0';
	*out = buf;
	*len = (size_t)n;
	return 0;
}

static int load_series(int dir_fd, const struct timeline_opts *o,
		       const struct voice *v, struct series *s,
		       enum diag_kind *kind)
{
	char why[256];
	size_t len = 0;
	char *buf;
	int rc;

	*kind = DIAG_BAD_INPUT;
	rc = read_file(dir_fd, "series.tsv", o->max_size, &buf, &len);
	if (rc) {
		voice_error(v, "'%s/series.tsv': %s", o->dir,
			    rc == -ENOENT ? "no such file: not a directory "
					    "`memsnap watch` wrote"
			    : rc == -ELOOP ? "a symlink, not a series"
			    : rc == -EINVAL ? "not a regular file"
			    : rc == -EFBIG ? "larger than --max-size"
			    : strerror(-rc));
		if (rc == -ENOMEM)
			*kind = DIAG_FAILED;
		return -1;
	}
	rc = series_parse(buf, len, s, why, sizeof(why));
	free(buf);
	if (rc == -ENOMEM) {
		*kind = DIAG_FAILED;
		voice_error(v, "report: %s", strerror(ENOMEM));
		return -1;
	}
	if (rc) {
		voice_error(v, "'%s/series.tsv': not a watch's series: %s",
			    o->dir, why);
		return -1;
	}
	return 0;
}

/* The last tick's explain, at most SERIES_EXPLAIN_MAX bytes of it, or
 * NULL. */
static char *load_explain(int dir_fd)
{
	char *buf = malloc(SERIES_EXPLAIN_MAX + 1);
	ssize_t n;
	int fd;

	fd = outdir_open_file(dir_fd, SERIES_EXPLAIN, UINT64_MAX);
	if (fd < 0 || !buf) {
		if (fd >= 0)
			close(fd);
		free(buf);
		return NULL;
	}
	n = read_in_full(fd, buf, SERIES_EXPLAIN_MAX);
	close(fd);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

static void fit_parts(struct timeline *tl)
{
	size_t c, i, n = tl->s.n;
	double *v = malloc((n ? n : 1) * sizeof(*v));
	uint64_t rss, limit = tl->s.limit;

	tl->limit_hours = -1;
	if (!v)
		return;
	for (c = 0; c < SERIES_COLS; c++) {
		tl->have[c] = n > 0;
		for (i = 0; i < n; i++) {
			if (!(tl->s.v[i].known & (1u << c)))
				tl->have[c] = false;
			v[i] = (double)tl->s.v[i].v[c];
		}
		if (tl->have[c])
			trend_fit(tl->t, v, n, TREND_NOISE_PART, &tl->parts[c]);
	}
	free(v);
	timeline_judge(tl);
	if (n && limit && tl->have[COL_RSS]) {
		rss = (uint64_t)tl->s.v[n - 1].v[COL_RSS];
		if (rss >= limit)
			tl->limit_hours = 0;
		else if (tl->parts[COL_RSS].per_hour > 0)
			tl->limit_hours = (double)(limit - rss) /
					  tl->parts[COL_RSS].per_hour;
	}
}

/* ---- the dumps through the report's parser ------------------------------ */

/* What the sink of the dumps' reports holds while they are read. */
struct reading {
	struct timeline *tl;
	const struct timeline_opts *o;
	const struct voice *v;
	const size_t *dump;	/* per input: its place in tl->dump_tick */
	char *buf;		/* the folded lines being read */
	size_t len, cap;
	bool over;		/* more than FOLDED_MAX of them */
	char *first, *last;	/* of the first and last dumps read */
	size_t first_k, last_k;
	int rc;			/* of the sites' arithmetic */
};

static int sink_begin(void *arg, size_t k)
{
	struct reading *r = arg;

	(void)k;
	r->len = 0;
	r->over = false;
	return 0;
}

static int sink_data(void *arg, const void *bytes, size_t len)
{
	struct reading *r = arg;

	if (r->over || len > FOLDED_MAX - r->len) {
		r->over = true;
		return 0;
	}
	if (array_grow((void **)&r->buf, &r->cap, r->len + len + 1, 1))
		return -ENOMEM;
	memcpy(r->buf + r->len, bytes, len);
	r->len += len;
	return 0;
}

static int sink_end(void *arg, size_t k, int rc)
{
	struct reading *r = arg;
	struct timeline *tl = r->tl;
	size_t d = r->dump[k];
	const char *name = tl->s.v[tl->dump_tick[d]].dump;

	if (rc)		/* left out: the parser said why */
		return 0;
	if (r->over) {
		voice_warning(r->v, "'%s/%s': more than %u MiB of stacks; "
			      "left out", r->o->dir, name, FOLDED_MAX >> 20);
		return 0;
	}
	if (!r->buf && array_grow((void **)&r->buf, &r->cap, 1, 1))
		return -ENOMEM;
	r->buf[r->len] = '\0';
	r->rc = timeline_add_folded(tl, d, r->buf);
	if (r->rc)
		return r->rc;
	tl->dump_ok[d] = true;
	/* the first and the last read: the growth between them */
	if (!r->first) {
		r->first = r->buf;
		r->first_k = d;
	} else {
		free(r->last);
		r->last = r->buf;
		r->last_k = d;
	}
	r->buf = NULL;
	r->cap = r->len = 0;
	return 0;
}

/* One stack of the growth: its folded line's frames and its bytes. */
struct grown {
	const char *stack;
	size_t len;
	double bytes;
};

static uint64_t grown_hash(const void *ctx, size_t i)
{
	const struct grown *g = ctx;

	return timeline_name_hash(g[i].stack, g[i].len);
}

/* Add folded lines @buf to @g (of *@n, capacity *@cap, indexed by @h),
 * each stack's bytes times @sign. */
static int add_grown(struct grown **g, size_t *n, size_t *cap,
		     struct hidx *h, const char *buf, double sign)
{
	const char *line = buf;

	while (*line) {
		const char *nl = strchr(line, '\n'), *sp;
		size_t len = nl ? (size_t)(nl - line) : strlen(line), j;
		double v;

		sp = len ? memrchr(line, ' ', len) : NULL;
		if (sp && sp > line) {
			v = strtod(sp + 1, NULL);
			if (!isfinite(v))
				v = 0;
			if (hidx_need(h, *n + 1, 64, grown_hash, *g) ||
			    array_grow((void **)g, cap, *n + 1, sizeof(**g)))
				return -ENOMEM;
			for (j = hidx_first(h, timeline_name_hash(
						    line, (size_t)(sp - line)));
			     h->slot[j]; j = hidx_next(h, j)) {
				struct grown *e = &(*g)[h->slot[j] - 1];

				if (e->len == (size_t)(sp - line) &&
				    !memcmp(e->stack, line, e->len))
					break;
			}
			if (!h->slot[j]) {
				(*g)[*n] = (struct grown){
					line, (size_t)(sp - line), 0 };
				h->slot[j] = (uint32_t)++*n;
			}
			(*g)[h->slot[j] - 1].bytes += sign * v;
		}
		line = nl ? nl + 1 : line + len;
	}
	return 0;
}

/*
 * The stacks that grew from @first to @last, as folded lines with the
 * bytes they grew by: what `report LAST --base FIRST --format folded`
 * gives of them, from the two reports already read.  NULL: no memory.
 */
static char *growth_of(const char *first, const char *last)
{
	struct grown *g = NULL;
	struct hidx h = { 0 };
	size_t n = 0, cap = 0, i, len = 0;
	char *out = NULL;
	FILE *f;

	if (add_grown(&g, &n, &cap, &h, last, 1) ||
	    add_grown(&g, &n, &cap, &h, first, -1))
		goto out;
	f = open_memstream(&out, &len);
	if (!f)
		goto out;
	for (i = 0; i < n; i++)
		if (g[i].bytes >= 0.5)
			fprintf(f, "%.*s %.0f\n", (int)g[i].len, g[i].stack,
				g[i].bytes);
	if (fclose(f)) {
		free(out);
		out = NULL;
	}
out:
	free(g);
	hidx_free(&h);
	return out;
}

/* Each picked dump through the report's parser, one after another. */
static int read_dumps(struct timeline *tl, int dir_fd,
		      const struct timeline_opts *o, const struct voice *v,
		      enum diag_kind *kind)
{
	struct report_input in[SITE_DUMPS_MAX];
	size_t dump[SITE_DUMPS_MAX], n = 0, k;
	struct reading r = { .tl = tl, .o = o, .v = v, .dump = dump };
	const struct report_sink sink = {
		.begin = sink_begin, .data = sink_data, .end = sink_end,
		.arg = &r,
	};
	struct report_args a = {
		.in = in, .each = true, .sink = &sink, .root = o->root,
		.fmt = F_FOLDED, .debuginfod = o->debuginfod,
		.max_size = o->max_size, .out_dir = -1,
	};
	int rc = 0;

	for (k = 0; k < tl->ndumps; k++) {
		const char *name = tl->s.v[tl->dump_tick[k]].dump;
		int fd = outdir_open_file(dir_fd, name, o->max_size);

		if (fd < 0) {
			voice_warning(v, "'%s/%s': %s; left out", o->dir, name,
				      fd == -ELOOP ? "a symlink, not a dump"
				      : fd == -EINVAL ? "not a regular file"
				      : fd == -EFBIG ? "larger than --max-size"
				      : strerror(-fd));
			continue;
		}
		in[n] = (struct report_input){ fd, name };
		dump[n++] = k;
	}
	a.n = n;
	if (n && report_run(&a, v, kind))
		rc = -1;
	if (!rc && r.first && r.last) {
		tl->growth = growth_of(r.first, r.last);
		tl->growth_from = tl->s.v[tl->dump_tick[r.first_k]].dump;
		tl->growth_to = tl->s.v[tl->dump_tick[r.last_k]].dump;
	}
	for (k = 0; k < n; k++)
		close(in[k].fd);
	free(r.buf);
	free(r.first);
	free(r.last);
	if (!rc && r.rc) {
		*kind = DIAG_FAILED;
		voice_error(v, "report: %s", strerror(-r.rc));
		rc = -1;
	}
	return rc;
}

/* ---- loading ------------------------------------------------------------- */

int timeline_load(int dir_fd, const struct timeline_opts *o,
		  const struct voice *v, struct timeline *tl,
		  enum diag_kind *kind)
{
	size_t i;
	int rc;

	memset(tl, 0, sizeof(*tl));
	tl->wrappers = o->wrappers;
	if (load_series(dir_fd, o, v, &tl->s, kind))
		return -1;
	tl->t = calloc(tl->s.n ? tl->s.n : 1, sizeof(*tl->t));
	if (!tl->t) {
		*kind = DIAG_FAILED;
		voice_error(v, "report: %s", strerror(ENOMEM));
		return -1;
	}
	for (i = 0; i < tl->s.n; i++)
		tl->t[i] = (double)(tl->s.v[i].t_ms - tl->s.v[0].t_ms) / 1000.0;
	fit_parts(tl);
	tl->explain = load_explain(dir_fd);
	if (!o->sites)
		return 0;
	timeline_pick_dumps(tl);
	if (read_dumps(tl, dir_fd, o, v, kind))
		return -1;
	rc = timeline_fit_sites(tl);
	if (rc) {
		*kind = DIAG_FAILED;
		voice_error(v, "report: %s", strerror(-rc));
		return -1;
	}
	return 0;
}

void timeline_free(struct timeline *tl)
{
	free(tl->t);
	free(tl->sites);
	free(tl->growth);
	free(tl->explain);
	hidx_free(&tl->idx);
	series_free(&tl->s);
	memset(tl, 0, sizeof(*tl));
}
