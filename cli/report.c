/*
 * memsnap report DUMP [--base OLD] [--format F] [-o OUT] [--top N]
 *                [--root DIR] [--lines] [--inuse|--alloc] [--objects]
 *                [--max-size SIZE]
 *
 * Reads a heap dump (no process is touched), symbolizes it from the
 * objects its MAPPED_LIBRARIES name, and writes one of the exports.
 * The command line is read here, in memsnap; the work, report_work(),
 * runs in a child with no rights (cli/report.h).
 */
#include "cli/report.h"

#include "common/util.h"
#include "profile/profile.h"
#include "profile/report.h"
#include "symbols/symbolizer.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char report_usage[] =
	"usage: memsnap report DUMP [--base OLD] [--format FORMAT] [-o OUT]\n"
	"                      [--top N] [--root DIR] [--lines]\n"
	"                      [--inuse|--alloc] [--objects] [--debuginfod]\n"
	"                      [--max-size SIZE] [--json] [-q]\n"
	"\n"
	"Turn a heap dump (jemalloc heap_v2 or gperftools heap profile) into\n"
	"an answer: unsampled, symbolized, optionally diffed.  A directory of\n"
	"`memsnap watch` instead: its timeline, each part's slope and shape,\n"
	"the call sites that grew over its dumps (text, json, svg: the\n"
	"chart, or html: all of it in one page, with a flame graph of the\n"
	"growth).\n"
	"\n"
	"  --base OLD        show what grew and shrank since dump OLD\n"
	"  --format FORMAT   text (default), folded, json, svg, html, pprof,\n"
	"                    jeprof\n"
	"  --json            the same as --format json\n"
	"  -o, --output OUT  write there instead of stdout (as dump -o)\n"
	"  --top N           rows in text and json (default 30, 0 = all)\n"
	"  --root DIR        find the dump's objects under DIR (a container)\n"
	"  --lines           file:line of every frame\n"
	"  --inuse           what is in use (default)\n"
	"  --alloc           what was allocated since profiling began, freed\n"
	"                    or not: churn (memsnap's sampler, gperftools;\n"
	"                    jemalloc with prof_accum:true)\n"
	"  --objects         objects instead of bytes\n"
	"  --debuginfod      ask debuginfod ($DEBUGINFOD_URLS) for debug files\n"
	"  --max-size SIZE   refuse a dump (or OLD), or a report, larger than\n"
	"                    SIZE (default 1G; K, M, G, T)\n"
	"  -q, --quiet       no warnings\n"
	"\n"
	"The dump and the files it names are parsed in a process with no\n"
	"rights.\n"
	"\n"
	"exit status: 0 ok, 1 failed, 2 usage, 10 the dump is unreadable\n"
	"(or larger than --max-size, or --root is not a directory, or the\n"
	"parser crashed on the dump or a file it names, or --alloc was asked\n"
	"of a dump that counts no allocations)\n";

static const char *const fmt_names[] = {
	[F_TEXT] = "text",   [F_FOLDED] = "folded", [F_JSON] = "json",
	[F_SVG] = "svg",     [F_PPROF] = "pprof",   [F_JEPROF] = "jeprof",
	[F_HTML] = "html",
};

static int report_usage_error(const char *what, const char *why)
{
	return fail(DIAG_USAGE, "report: %s%s%s (see memsnap report --help)", what,
		    why[0] ? ": " : "", why);
}

/* --root: a directory, or nothing is done. */
static int check_root(const char *root)
{
	int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return fail(DIAG_BAD_INPUT, "--root '%s': %s", root, strerror(errno));
	close(fd);
	return EXIT_OK;
}

int report_load_error(const char *path, int rc, const char *why,
		      uint64_t max, char *buf, size_t size)
{
	char b[32];

	if (rc == -ENOMEM) {
		snprintf(buf, size, "'%s': %s", path, strerror(ENOMEM));
		return diag_exit(DIAG_FAILED);
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
	return diag_exit(DIAG_BAD_INPUT);
}

/* In the child: the dump or the base, from memsnap's descriptor. */
static int load(struct report_child *c, const struct report_args *a,
		enum report_input which, struct profile **out)
{
	const char *path = which == REPORT_BASE ? a->base : a->dump;
	char why[256], msg[4096];
	int rc, code;

	rc = profile_read(report_child_input(c, which), a->max_size, out,
			  why, sizeof(why));
	if (!rc)
		return EXIT_OK;
	code = report_load_error(path, rc, why, a->max_size, msg, sizeof(msg));
	return report_child_error(c, code, "%s", msg);
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

static void warn_objects(struct report_child *c, struct symbolizer *s)
{
	const struct dwsym_module *m;
	size_t n = symbolizer_modules(s, &m), i;

	for (i = 0; i < n; i++) {
		if (!m[i].used)
			continue;
		if (m[i].err)
			report_child_warning(c, "'%s': %s: its frames are "
					     "shown as %s+0xoffset", m[i].path,
					     object_error(m[i].err), m[i].base);
		else if (m[i].mismatch)
			report_child_warning(c, "'%s' is not the file the "
					     "process had mapped (other inode): "
					     "names may be wrong", m[i].path);
		else if (m[i].unnamed * 2 > m[i].used)
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

int report_work(struct report_child *c, const struct report_args *a)
{
	struct profile *prof = NULL, *base = NULL;
	struct symbolizer *sym = NULL, *bsym = NULL;
	struct opener *op = report_child_opener(c);
	struct report *r = NULL;
	FILE *f;
	int rc, ret;

	ret = load(c, a, REPORT_DUMP, &prof);
	if (ret)
		goto out;
	if (a->base) {
		ret = load(c, a, REPORT_BASE, &base);
		if (ret)
			goto out;
	}
	if (profile_select(prof, a->alloc) ||
	    (base && profile_select(base, a->alloc))) {
		ret = report_child_error(
			c, diag_exit(DIAG_BAD_INPUT),
			"'%s' counts what is in use, not what was allocated: "
			"--alloc needs a dump that counts allocations "
			"(memsnap's sampler, gperftools; jemalloc with "
			"prof_accum:true)",
			base && base->n && !base->has_alloc ? a->base : a->dump);
		goto out;
	}
	/* only the jeprof export reads the dumps again */
	if (a->fmt != F_JEPROF) {
		profile_drop_text(prof);
		if (base)
			profile_drop_text(base);
	}
	report_child_progress(c, prof->maps->n);
	rc = symbolizer_new_with(prof->maps, a->root, op, &sym);
	if (!rc && base)
		rc = symbolizer_new_with(base->maps, a->root, op, &bsym);
	if (!rc)
		rc = report_build(prof, sym, base, bsym, &r);
	if (rc) {
		ret = report_child_error(c, diag_exit(DIAG_FAILED), "'%s': %s",
					 a->dump, strerror(-rc));
		goto out;
	}
	if (a->fmt != F_JEPROF) {
		profile_drop_stacks(prof);
		if (base)
			profile_drop_stacks(base);
	}
	warn_objects(c, sym);
	if (bsym)
		warn_objects(c, bsym);
	if (!prof->maps->n)
		report_child_warning(c, "'%s': no MAPPED_LIBRARIES: addresses "
				     "stay unnamed", a->dump);
	f = report_child_output(c);
	rc = f ? write_report(r, a->fmt, &a->ro, f) : -ENOMEM;
	ret = report_child_output_end(c, f, rc);
out:
	report_free(r);
	symbolizer_free(sym);
	symbolizer_free(bsym);
	profile_free(prof);
	profile_free(base);
	return ret;
}

int cmd_report(const struct options *gopt, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "base", required_argument, NULL, 'b' },
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "top", required_argument, NULL, 't' },
		{ "root", required_argument, NULL, 'r' },
		{ "lines", no_argument, NULL, 'l' },
		{ "inuse", no_argument, NULL, 'i' },
		{ "alloc", no_argument, NULL, 'a' },
		{ "objects", no_argument, NULL, 'O' },
		{ "debuginfod", no_argument, NULL, 'd' },
		{ "max-size", required_argument, NULL, 'S' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct options opt = *gopt;
	struct report_args a = {
		.fmt = gopt->json ? F_JSON : F_TEXT,
		.ro = { .top = 30 },
		.max_size = PROFILE_MAX_SIZE,
	};
	bool explicit_top = false;
	struct stat st;
	uint64_t v;
	size_t i;
	int c, ret;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:qh", longopts, NULL)) != -1) {
		switch (c) {
		case 'b':
			a.base = optarg;
			break;
		case 'f':
			for (i = 0; i < ARRAY_SIZE(fmt_names); i++)
				if (!strcmp(optarg, fmt_names[i]))
					break;
			if (i == ARRAY_SIZE(fmt_names))
				return report_usage_error(optarg,
							  "unknown format");
			a.fmt = (enum report_fmt)i;
			break;
		case 'o':
			if (!optarg[0])
				return report_usage_error("-o",
							  "needs a file name");
			a.out = optarg;
			break;
		case 't':
			if (parse_u64(optarg, 10, &v) || v > 1000000)
				return report_usage_error(optarg,
							  "not a row count");
			a.ro.top = (unsigned int)v;
			explicit_top = true;
			break;
		case 'r':
			a.root = optarg;
			break;
		case 'l':
			a.ro.lines = true;
			break;
		case 'i':
			a.alloc = false;
			break;
		case 'a':
			a.alloc = true;
			break;
		case 'O':
			a.ro.objects = true;
			break;
		case 'd':
			a.debuginfod = true;
			break;
		case 'S':
			if (parse_size(optarg, &a.max_size) || !a.max_size)
				return report_usage_error(
					optarg,
					"not a size (bytes, or with K, M, G, T)");
			break;
		case 'q':
			opt.quiet = true;
			break;
		case 'j':
			a.fmt = F_JSON;
			break;
		case 'h':
			fputs(report_usage, stdout);
			return EXIT_OK;
		case ':':
			return report_usage_error(argv[optind - 1],
						  "needs a value");
		default:
			return report_usage_error(argv[optind - 1],
						  "unknown option");
		}
	}
	if (optind >= argc)
		return report_usage_error("no dump given", "");
	if (optind + 1 < argc)
		return report_usage_error(argv[optind + 1],
					  "one dump at a time");
	a.dump = argv[optind];
	if (a.alloc && a.fmt == F_JEPROF)
		return report_usage_error("--alloc", "not with jeprof (use "
					  "jeprof --alloc_space)");
	if (a.base && (a.fmt == F_PPROF || a.fmt == F_JEPROF))
		return report_usage_error(
			"--base", a.fmt == F_PPROF
				? "not with pprof (use pprof -diff_base)"
				: "not with jeprof (use jeprof --base)");
	if (a.root) {
		ret = check_root(a.root);
		if (ret)
			return ret;
	}
	if (!a.debuginfod)
		unsetenv("DEBUGINFOD_URLS");
	a.ro.dump_name = a.dump;
	a.quiet = opt.quiet;
	if (!stat(a.dump, &st) && S_ISDIR(st.st_mode)) {
		if (a.alloc)
			return report_usage_error(
				"--alloc", "not with a watch directory (its "
				"timeline follows what is in use)");
		if (!explicit_top)
			a.ro.top = 10;
		return report_timeline(&opt, &a);
	}
	return report_boxed(&opt, &a);
}
