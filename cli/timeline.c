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
 * The series is memsnap's own format, read back as untrusted
 * (series_parse()).  The dumps are the target's bytes: each is read by
 * `memsnap report DUMP --format folded`, a child of its own whose
 * parsing runs sandboxed as every report's does; this process reads
 * only the folded lines it prints, within a bound.
 *
 * Here: reading all that into a struct timeline, and the sentences
 * every output uses.  The command and its text and JSON are
 * timeline_text.c's, the chart timeline_svg.c's, the page
 * timeline_html.c's.
 */
#include "cli/timeline.h"

#include "cli/report.h"

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
#include <sys/wait.h>
#include <unistd.h>

/* ---- the series ---------------------------------------------------------- */

static int load_series(const char *dir, uint64_t max, struct series *s)
{
	char why[256];
	struct stat st;
	char *buf;
	ssize_t n;
	int dfd, fd, rc;

	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return fail(DIAG_BAD_INPUT, "'%s': %s", dir, strerror(errno));
	fd = openat(dfd, "series.tsv", O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
					      O_CLOEXEC);
	close(dfd);
	if (fd < 0)
		return fail(DIAG_BAD_INPUT, "'%s/series.tsv': %s", dir,
			    errno == ENOENT ? "no such file: not a directory "
			    "`memsnap watch` wrote"
			    : strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		error("'%s/series.tsv': not a regular file", dir);
		close(fd);
		return diag_exit(DIAG_BAD_INPUT);
	}
	if ((uint64_t)st.st_size > max) {
		error("'%s/series.tsv': larger than --max-size", dir);
		close(fd);
		return diag_exit(DIAG_BAD_INPUT);
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return fail(DIAG_FAILED, "report: %s", strerror(ENOMEM));
	}
	n = read_in_full(fd, buf, (size_t)st.st_size);
	close(fd);
	if (n < 0) {
		free(buf);
		return fail(DIAG_BAD_INPUT, "'%s/series.tsv': %s", dir, strerror((int)-n));
	}
	rc = series_parse(buf, (size_t)n, s, why, sizeof(why));
	free(buf);
	if (rc == -ENOMEM)
		return fail(DIAG_FAILED, "report: %s", strerror(ENOMEM));
	if (rc)
		return fail(DIAG_BAD_INPUT, "'%s/series.tsv': not a watch's series: %s", dir, why);
	return EXIT_OK;
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
	if (n && limit && tl->have[COL_RSS]) {
		rss = (uint64_t)tl->s.v[n - 1].v[COL_RSS];
		if (rss >= limit)
			tl->limit_hours = 0;
		else if (tl->parts[COL_RSS].per_hour > 0)
			tl->limit_hours = (double)(limit - rss) /
					  tl->parts[COL_RSS].per_hour;
	}
}

/* ---- the sites, from the dumps ------------------------------------------ */

/*
 * `memsnap report DIR/NAME --format folded` (--base DIR/@base unless
 * NULL): its standard output into *@out (NUL-terminated, at most
 * FOLDED_MAX bytes).  0, or -errno;
 * *@status the child's exit status (-1: killed).
 */
int timeline_folded(const struct report_args *a, const char *dir,
		     const char *name, const char *base, char **out,
		     size_t *len, int *status)
{
	char path[PATH_MAX], bpath[PATH_MAX], max[32];
	const char *argv[16];
	size_t n = 0, cap = 0;
	char *buf = NULL;
	int pfd[2], st, rc = 0;
	pid_t child;

	*out = NULL;
	*len = 0;
	*status = -1;
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >=
		    sizeof(path) ||
	    (base && (size_t)snprintf(bpath, sizeof(bpath), "%s/%s", dir,
				      base) >= sizeof(bpath)))
		return -ENAMETOOLONG;
	snprintf(max, sizeof(max), "%" PRIu64, a->max_size);
	argv[n++] = "memsnap";
	argv[n++] = "report";
	argv[n++] = path;
	argv[n++] = "--format";
	argv[n++] = "folded";
	if (base) {
		argv[n++] = "--base";
		argv[n++] = bpath;
	}
	argv[n++] = "--quiet";
	argv[n++] = "--max-size";
	argv[n++] = max;
	if (a->root) {
		argv[n++] = "--root";
		argv[n++] = a->root;
	}
	if (a->debuginfod)
		argv[n++] = "--debuginfod";
	argv[n] = NULL;
	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	child = fork();
	if (child < 0) {
		rc = -errno;
		close(pfd[0]);
		close(pfd[1]);
		return rc;
	}
	if (child == 0) {
		dup2(pfd[1], STDOUT_FILENO);
		execv("/proc/self/exe", (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	for (;;) {
		ssize_t r;

		if (array_grow((void **)&buf, &cap, *len + 65537, 1)) {
			rc = -ENOMEM;
			break;
		}
		r = read(pfd[0], buf + *len, 65536);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			break;
		}
		if (!r)
			break;
		*len += (size_t)r;
		if (*len > FOLDED_MAX) {
			rc = -EFBIG;
			break;
		}
	}
	close(pfd[0]);
	if (rc)
		kill(child, SIGKILL);
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st))
		*status = WEXITSTATUS(st);
	if (!rc && *status)
		rc = -EIO;
	if (rc) {
		free(buf);
		*len = 0;
		return rc;
	}
	if (!buf && array_grow((void **)&buf, &cap, 1, 1))
		return -ENOMEM;
	buf[*len] = '\0';
	*out = buf;
	return 0;
}

uint64_t timeline_name_hash(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;	/* FNV-1a */
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t site_hash(const void *ctx, size_t i)
{
	const struct timeline *tl = ctx;

	return timeline_name_hash(tl->sites[i].name,
				  strlen(tl->sites[i].name));
}

/* The site named by the @len bytes at @name (cut to SITE_NAME_MAX - 1),
 * added if new; OTHER_SITES once SITES_MAX are there.  NULL: no
 * memory. */
static struct site *site_named(struct timeline *tl, const char *name,
			       size_t len)
{
	struct site *s;
	size_t j;

	if (len >= SITE_NAME_MAX)
		len = SITE_NAME_MAX - 1;
	if (tl->nsites >= SITES_MAX) {
		name = OTHER_SITES;
		len = strlen(OTHER_SITES);
	}
	if (hidx_need(&tl->idx, tl->nsites + 1, 64, site_hash, tl))
		return NULL;
	for (j = hidx_first(&tl->idx, timeline_name_hash(name, len));
	     tl->idx.slot[j];
	     j = hidx_next(&tl->idx, j)) {
		s = &tl->sites[tl->idx.slot[j] - 1];
		if (!strncmp(s->name, name, len) && !s->name[len])
			return s;
	}
	if (array_grow((void **)&tl->sites, &tl->cap, tl->nsites + 1,
		       sizeof(*tl->sites)))
		return NULL;
	s = &tl->sites[tl->nsites];
	memset(s, 0, sizeof(*s));
	memcpy(s->name, name, len);
	tl->idx.slot[j] = (uint32_t)++tl->nsites;
	return s;
}

/* Folded lines "root;...;site BYTES": each stack's bytes to its site
 * (the frame that called the allocator), as dump @k's.  Sites are
 * found by name; the number of distinct sites is bounded by the
 * report's own bound on stacks. */
static int add_folded(struct timeline *tl, size_t k, const char *buf)
{
	const char *line = buf;

	while (*line) {
		const char *nl = strchr(line, '\n'), *sp, *leaf;
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char num[32];
		double v;
		struct site *s;

		sp = len ? memrchr(line, ' ', len) : NULL;
		if (sp && (size_t)(line + len - sp - 1) < sizeof(num)) {
			memcpy(num, sp + 1, (size_t)(line + len - sp - 1));
			num[line + len - sp - 1] = '\0';
			v = strtod(num, NULL);
			if (!isfinite(v))
				v = 0;
			leaf = memrchr(line, ';', (size_t)(sp - line));
			leaf = leaf ? leaf + 1 : line;
			s = site_named(tl, leaf, (size_t)(sp - leaf));
			if (!s)
				return -ENOMEM;
			s->bytes[k] += v;
		}
		line = nl ? nl + 1 : line + len;
	}
	return 0;
}

static int cmp_growth(const void *a, const void *b)
{
	const struct site *x = a, *y = b;

	return x->growth < y->growth ? 1 : x->growth > y->growth ? -1
				   : strcmp(x->name, y->name);
}

/* The dumps to read: every one, or SITE_DUMPS_MAX spread evenly. */
static void pick_dumps(struct timeline *tl)
{
	size_t i, n = 0, total = 0;

	for (i = 0; i < tl->s.n; i++)
		total += tl->s.v[i].dump[0] != '\0';
	for (i = 0; i < tl->s.n && tl->ndumps < SITE_DUMPS_MAX; i++) {
		if (!tl->s.v[i].dump[0])
			continue;
		/* the n-th dump of total: taken where it lands on a new
		 * slot of SITE_DUMPS_MAX, and always the last */
		if (total <= SITE_DUMPS_MAX || n == total - 1 ||
		    n * (SITE_DUMPS_MAX - 1) / (total - 1) >= tl->ndumps)
			tl->dump_tick[tl->ndumps++] = i;
		n++;
	}
}

static int read_sites(struct timeline *tl, const struct report_args *a,
		      const char *dir, bool quiet)
{
	size_t k, i, m, ok = 0;
	double *t, *v;

	pick_dumps(tl);
	for (k = 0; k < tl->ndumps; k++) {
		const char *name = tl->s.v[tl->dump_tick[k]].dump;
		size_t len;
		char *buf;
		int status, rc = timeline_folded(a, dir, name, NULL, &buf, &len,
					   &status);

		if (rc) {
			if (!quiet)
				fprintf(stderr, "memsnap: warning: report: "
					"'%s/%s' left out (%s)\n", dir, name,
					status > 0 ? "its report failed, above"
						   : strerror(-rc));
			continue;
		}
		rc = add_folded(tl, k, buf);
		free(buf);
		if (rc)
			return rc;
		tl->dump_ok[k] = true;
		ok++;
	}
	if (!ok)
		return 0;
	t = calloc(tl->ndumps, sizeof(*t));
	v = calloc(tl->ndumps, sizeof(*v));
	if (!t || !v) {
		free(t);
		free(v);
		return -ENOMEM;
	}
	for (i = 0; i < tl->nsites; i++) {
		struct site *s = &tl->sites[i];
		for (k = 0, m = 0; k < tl->ndumps; k++) {
			if (!tl->dump_ok[k])
				continue;
			t[m] = tl->t[tl->dump_tick[k]];
			v[m++] = s->bytes[k];
		}
		/* the fitted line's rise from the first dump read to the
		 * last: a working set caught high in its last dump and low
		 * in its first does not pass for a leak */
		trend_fit(t, v, m, TREND_NOISE_SITE, &s->tr);
		s->growth = m > 1 ? s->tr.per_hour / 3600.0 * (t[m - 1] - t[0])
				  : 0;
	}
	free(t);
	free(v);
	sort(tl->sites, tl->nsites, sizeof(*tl->sites), cmp_growth);
	return 0;
}

/* ---- the words every output uses ---------------------------------------- */

void timeline_signed_bytes(double v, char *buf, size_t size)
{
	if (size < 2)
		return;
	buf[0] = v < 0 ? '-' : '+';
	human_bytes((uint64_t)fabs(v), buf + 1, size - 1);
}

void timeline_duration(double s, int digits, char *buf, size_t size)
{
	if (s < 120)
		snprintf(buf, size, "%.*f s", digits, s);
	else if (s < 7200)
		snprintf(buf, size, "%.*f min", digits, s / 60);
	else if (s < 172800)
		snprintf(buf, size, "%.1f h", s / 3600);
	else
		snprintf(buf, size, "%.1f days", s / 86400);
}

void timeline_column(const struct timeline *tl, enum series_col c, double *v)
{
	size_t i;

	for (i = 0; i < tl->s.n; i++)
		v[i] = (double)tl->s.v[i].v[c];
}

/* The part (but RSS, and the heap as a whole when its parts are known)
 * with the steepest slope, or -1. */
static int steepest(const struct timeline *tl)
{
	int c, best = -1;

	for (c = COL_HEAP_IN_USE; c < COL_UNACCOUNTED; c++) {
		if (!tl->have[c] || (c == COL_HEAP && tl->have[COL_HEAP_IN_USE]))
			continue;
		if (best < 0 || tl->parts[c].per_hour > tl->parts[best].per_hour)
			best = c;
	}
	return best;
}

const char *timeline_shape_words(enum trend_shape s)
{
	switch (s) {
	case TREND_GROWING:
		return "still growing";
	case TREND_PLATEAU:
		return "grew, then levelled off";
	case TREND_SAWTOOTH:
		return "rises and falls (saw-tooth)";
	case TREND_SHRINKING:
		return "shrinking";
	case TREND_FLAT:
		return "flat";
	case TREND_IRREGULAR:
		return "irregular";
	case TREND_FEW:
		break;
	}
	return "too few ticks for a shape";
}

/* "RSS 10 MiB -> 14 MiB, +2.0 MiB/h: still growing; most of it heap in
 * use (+1.8 MiB/h)" */
void timeline_rss_sentence(const struct timeline *tl, char *buf, size_t size)
{
	const struct trend *r = &tl->parts[COL_RSS];
	char a[40], b[40], c[40];
	int steep = steepest(tl);
	size_t n;

	human_bytes((uint64_t)r->first, a, sizeof(a));
	human_bytes((uint64_t)r->last, b, sizeof(b));
	timeline_signed_bytes(r->per_hour, c, sizeof(c));
	n = (size_t)snprintf(buf, size, "RSS %s -> %s, %s/h: %s", a, b, c,
			     timeline_shape_words(r->shape));
	if (n < size && steep >= 0 && r->shape != TREND_FLAT &&
	    tl->parts[steep].per_hour > 0) {
		timeline_signed_bytes(tl->parts[steep].per_hour, c, sizeof(c));
		snprintf(buf + n, size - n, "; most of it %s (%s/h)",
			 series_col_name((enum series_col)steep), c);
	}
}

/* What the memory limit means at this slope; false when there is
 * none. */
bool timeline_limit_sentence(const struct timeline *tl, char *buf,
			   size_t size)
{
	char a[40], b[40];

	if (!tl->s.limit)
		return false;
	human_bytes(tl->s.limit, a, sizeof(a));
	if (tl->limit_hours == 0) {
		snprintf(buf, size, "the memory limit (%s) is reached", a);
	} else if (tl->limit_hours > 0) {
		timeline_duration(tl->limit_hours * 3600, 1, b, sizeof(b));
		snprintf(buf, size, "at this slope RSS reaches the memory "
			 "limit (%s) in %s", a, b);
	} else {
		snprintf(buf, size, "memory limit %s; RSS is not growing "
			 "towards it", a);
	}
	return true;
}

/* ---- loading ------------------------------------------------------------- */

int timeline_load(const struct report_args *a, bool quiet, struct timeline *tl)
{
	size_t i;
	int ret, rc;

	ret = load_series(a->dump, a->max_size, &tl->s);
	if (ret)
		return ret;
	tl->t = calloc(tl->s.n ? tl->s.n : 1, sizeof(*tl->t));
	if (!tl->t)
		return diag_exit(DIAG_FAILED);
	for (i = 0; i < tl->s.n; i++)
		tl->t[i] = (double)(tl->s.v[i].t_ms - tl->s.v[0].t_ms) / 1000.0;
	fit_parts(tl);
	rc = a->fmt == F_SVG ? 0 : read_sites(tl, a, a->dump, quiet);
	if (rc)
		return fail(DIAG_FAILED, "report: %s", strerror(-rc));
	return EXIT_OK;
}

void timeline_free(struct timeline *tl)
{
	free(tl->t);
	free(tl->sites);
	hidx_free(&tl->idx);
	series_free(&tl->s);
	memset(tl, 0, sizeof(*tl));
}
