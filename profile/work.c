/*
 * The work of report's child (profile/box.h): each dump read from the
 * descriptor memsnap hands over, symbolized from the objects its
 * MAPPED_LIBRARIES name (each file opened by memsnap, through the
 * child's opener), built into a report, minus a base, and written in
 * the format asked.  In a run of each input, a dump that cannot be read
 * is left out with a warning and the next one read.
 */
#include "profile/box_internal.h"

#include "common/util.h"
#include "profile/profile.h"
#include "profile/report.h"
#include "symbols/symbolizer.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The objects warned about in this run: each said once, whichever
 * dump (or its base) maps it. */
#define WARNED_MAX 256

struct work {
	struct report_child *c;
	const struct report_args *a;
	char *warned[WARNED_MAX];	/* paths, copied */
	size_t nwarned;
};

enum diag_kind report_load_error(const char *path, int rc, const char *why,
				 uint64_t max, char *buf, size_t size)
{
	char b[32];

	if (rc == -ENOMEM) {
		snprintf(buf, size, "'%s': %s", path, strerror(ENOMEM));
		return DIAG_FAILED;
	}
	human_bytes(max, b, sizeof(b));
	if (rc == -EFBIG)
		snprintf(buf, size, "'%s': larger than --max-size (%s)", path,
			 b);
	else if (why[0])
		snprintf(buf, size, "'%s': not a readable heap profile: %s",
			 path, why);
	else if (rc == -EINVAL)
		snprintf(buf, size, "'%s': not a file or a pipe (a device?): "
			 "not a heap dump", path);
	else
		snprintf(buf, size, "'%s': %s", path, strerror(-rc));
	return DIAG_BAD_INPUT;
}

/*
 * Input @k failed: in a run of each input, a warning and the input left
 * out (0: go on); else the one error line and the child's status.
 */
static int failed(struct work *w, size_t k, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int failed(struct work *w, size_t k, int code, const char *fmt, ...)
{
	char msg[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!w->a->each)
		return report_child_error(w->c, code, "%s", msg);
	report_child_warning(w->c, "%s; left out", msg);
	report_child_skip(w->c, k);
	return 0;
}

/* Input @k, from memsnap's descriptor: 0, or its failure's status (0
 * in a run of each input, which goes on without it) with *@out NULL. */
static int load(struct work *w, size_t k, struct profile **out)
{
	const struct report_args *a = w->a;
	char why[256], msg[4096];
	int rc;

	*out = NULL;
	rc = profile_read(report_child_input(w->c, k), a->max_size, out,
			  why, sizeof(why));
	if (!rc)
		return 0;
	*out = NULL;
	return failed(w, k, report_load_error(a->in[k].name, rc, why,
					      a->max_size, msg, sizeof(msg)) ==
				    DIAG_FAILED ? BOX_FAILED : BOX_BAD_INPUT,
		      "%s", msg);
}

static const char *object_error(int err)
{
	switch (err) {
	case -ESTALE:
		return "not the file that was mapped (no segment at the "
		       "mapped offset)";
	case -ENOEXEC:
		return "not an ELF file";
	case -EEXIST:
		return "its addresses overlap another object of the dump";
	default:
		return strerror(-err);
	}
}

/* Most frames in @m found no name: it is stripped, and no debug file
 * was found for it; say where one goes. */
static void warn_stripped(struct report_child *c,
			  const struct dwsym_module *m)
{
	char where[200] = "";

	if (strlen(m->build_id) > 2)
		snprintf(where, sizeof(where),
			 " or put them at /usr/lib/debug/.build-id/%.2s/%s.debug",
			 m->build_id, m->build_id + 2);
	report_child_warning(c, "'%s' has no symbols (stripped) and no debug "
			     "file was found: %zu of its %zu frames are shown "
			     "as %s+0xoffset; install its debug symbols "
			     "(Debian: its -dbgsym package)%s", m->path,
			     m->unnamed, m->used, m->base, where);
}

/* Has @path been warned about in this run?  If not, it is now. */
static bool warned(struct work *w, const char *path)
{
	size_t i;

	for (i = 0; i < w->nwarned; i++)
		if (!strcmp(w->warned[i], path))
			return true;
	if (w->nwarned < WARNED_MAX &&
	    (w->warned[w->nwarned] = strdup(path)))
		w->nwarned++;
	return false;
}

/* What was wrong with the objects @s read: each object once a run. */
static void warn_objects(struct work *w, struct symbolizer *s)
{
	struct report_child *c = w->c;
	const struct dwsym_module *m;
	size_t n = symbolizer_modules(s, &m), i;

	for (i = 0; i < n; i++) {
		if (!m[i].used || (!m[i].err && !m[i].mismatch &&
				   m[i].unnamed * 2 <= m[i].used))
			continue;
		if (warned(w, m[i].path))
			continue;
		if (m[i].err)
			report_child_warning(c, "'%s': %s: its frames are "
					     "shown as %s+0xoffset", m[i].path,
					     object_error(m[i].err), m[i].base);
		else if (m[i].mismatch)
			report_child_warning(c, "'%s' is not the file the "
					     "process had mapped (other inode): "
					     "names may be wrong", m[i].path);
		else
			warn_stripped(c, &m[i]);
	}
}

static int write_report(const struct report *r, enum report_fmt fmt,
			const struct report_opts *ro, FILE *f)
{
	switch (fmt) {
	case F_TEXT:
		return report_text(r, ro, f);
	case F_FOLDED:
		return report_folded(r, ro, f);
	case F_JSON:
		return report_json(r, ro, f);
	case F_SVG:
		return report_svg(r, ro, f);
	case F_PPROF:
		return report_pprof(r, ro, f);
	case F_JEPROF:
		return report_jeprof(r, f);
	case F_HTML:
		return report_html(r, ro, f);
	}
	return -EINVAL;
}

/*
 * Report of input @k, minus input @b unless it is -1.  0, or the
 * failure's status (in a run of each input: 0 once it is left out).
 */
static int one(struct work *w, size_t k, long b)
{
	const struct report_args *a = w->a;
	struct profile *prof = NULL, *base = NULL;
	struct symbolizer *sym = NULL, *bsym = NULL;
	struct opener *op = report_child_opener(w->c);
	struct report *r = NULL;
	FILE *f;
	int rc, ret;

	ret = load(w, k, &prof);
	if (ret || !prof)
		goto out;
	if (b >= 0) {
		ret = load(w, (size_t)b, &base);
		if (ret || !base)
			goto out;
	}
	if (profile_select(prof, a->alloc) ||
	    (base && profile_select(base, a->alloc))) {
		ret = failed(w, k, BOX_BAD_INPUT,
			     "'%s' counts what is in use, not what was "
			     "allocated: --alloc needs a dump that counts "
			     "allocations (memsnap's sampler, gperftools; "
			     "jemalloc with prof_accum:true)",
			     base && base->n && !base->has_alloc
				     ? a->in[b].name : a->in[k].name);
		goto out;
	}
	/* only the jeprof export reads the dumps again */
	if (a->fmt != F_JEPROF) {
		profile_drop_text(prof);
		if (base)
			profile_drop_text(base);
	}
	report_child_progress(w->c, prof->maps->n);
	rc = symbolizer_new_with(prof->maps, a->root, op, &sym);
	if (!rc && base)
		rc = symbolizer_new_with(base->maps, a->root, op, &bsym);
	if (!rc)
		rc = report_build(prof, sym, base, bsym, &r);
	if (rc) {
		ret = failed(w, k, BOX_FAILED, "'%s': %s", a->in[k].name,
			     strerror(-rc));
		goto out;
	}
	if (a->fmt != F_JEPROF) {
		profile_drop_stacks(prof);
		if (base)
			profile_drop_stacks(base);
	}
	warn_objects(w, sym);
	if (bsym)
		warn_objects(w, bsym);
	if (!prof->maps->n)
		report_child_warning(w->c, "'%s': no MAPPED_LIBRARIES: "
				     "addresses stay unnamed", a->in[k].name);
	f = report_child_output(w->c, k);
	rc = f ? write_report(r, a->fmt, &a->ro, f) : -ENOMEM;
	ret = report_child_output_end(w->c, f, rc);
out:
	report_free(r);
	symbolizer_free(sym);
	symbolizer_free(bsym);
	profile_free(prof);
	profile_free(base);
	return ret;
}

int report_work(struct report_child *c, const struct report_args *a)
{
	struct work w = { .c = c, .a = a };
	size_t k, i;
	int ret = 0;

	if (!a->each)
		ret = one(&w, 0, a->n > 1 ? 1 : -1);
	for (k = 0; a->each && k < a->n && !ret; k++)
		ret = one(&w, k, -1);
	for (i = 0; i < w.nwarned; i++)
		free(w.warned[i]);
	return ret;
}
