/*
 * memsnap report DUMP [--base OLD] [--format F] [-o OUT] [--top N]
 *                [--root DIR] [--lines] [--inuse|--objects]
 *                [--max-size SIZE]
 *
 * Reads a heap dump (no process is touched), symbolizes it from the
 * objects its MAPPED_LIBRARIES name, and writes one of the exports.
 */
#include "cli/cli.h"

#include "cli/progress.h"

#include "common/output.h"
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
	"                      [--inuse|--objects] [--debuginfod]\n"
	"                      [--max-size SIZE] [--json] [-q]\n"
	"\n"
	"Turn a heap dump (jemalloc heap_v2 or gperftools heap profile) into\n"
	"an answer: unsampled, symbolized, optionally diffed.\n"
	"\n"
	"  --base OLD        show what grew and shrank since dump OLD\n"
	"  --format FORMAT   text (default), folded, json, svg, pprof, jeprof\n"
	"  --json            the same as --format json\n"
	"  -o, --output OUT  write there instead of stdout (as dump -o)\n"
	"  --top N           rows in text and json (default 30, 0 = all)\n"
	"  --root DIR        find the dump's objects under DIR (a container)\n"
	"  --lines           file:line of every frame\n"
	"  --inuse           bytes in use (default)\n"
	"  --objects         objects in use instead of bytes\n"
	"  --debuginfod      let libdw ask debuginfod ($DEBUGINFOD_URLS)\n"
	"  --max-size SIZE   refuse a dump (or OLD) larger than SIZE\n"
	"                    (default 1G; K, M, G, T)\n"
	"  -q, --quiet       no warnings\n"
	"\n"
	"exit status: 0 ok, 1 failed, 2 usage, 10 the dump is unreadable\n"
	"(or larger than --max-size, or --root is not a directory)\n";

enum fmt { F_TEXT, F_FOLDED, F_JSON, F_SVG, F_PPROF, F_JEPROF };

static const char *const fmt_names[] = {
	[F_TEXT] = "text",   [F_FOLDED] = "folded", [F_JSON] = "json",
	[F_SVG] = "svg",     [F_PPROF] = "pprof",   [F_JEPROF] = "jeprof",
};

static int report_usage_error(const char *what, const char *why)
{
	error("report: %s%s%s (see memsnap report --help)", what,
	      why[0] ? ": " : "", why);
	return EXIT_USAGE;
}

static void size_error(const char *path, uint64_t max)
{
	char b[32];

	human_bytes(max, b, sizeof(b));
	error("'%s': larger than --max-size (%s)", path, b);
}

/* --root: a directory, or nothing is done. */
static int check_root(const char *root)
{
	int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0) {
		error("--root '%s': %s", root, strerror(errno));
		return EXIT_BAD_INPUT;
	}
	close(fd);
	return EXIT_OK;
}

static int load(const char *path, uint64_t max, struct profile **out)
{
	char why[256];
	int rc = profile_load_max(path, max, out, why, sizeof(why));

	if (!rc)
		return EXIT_OK;
	if (rc == -ENOMEM) {
		error("'%s': %s", path, strerror(ENOMEM));
		return EXIT_FAILURE_OTHER;
	}
	if (rc == -EFBIG)
		size_error(path, max);
	else if (why[0])
		error("'%s': not a readable heap profile: %s", path, why);
	else if (rc == -EINVAL)
		error("'%s': not a file or a pipe (a device?): not a heap dump",
		      path);
	else
		error("'%s': %s", path, strerror(-rc));
	return EXIT_BAD_INPUT;
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

static void warn_objects(const struct options *opt, struct symbolizer *s)
{
	const struct dwsym_module *m;
	size_t n = symbolizer_modules(s, &m), i;

	for (i = 0; i < n; i++) {
		if (!m[i].used)
			continue;
		if (m[i].err)
			warning(opt, "'%s': %s: its frames are shown as "
				"%s+0xoffset", m[i].path, object_error(m[i].err),
				m[i].base);
		else if (m[i].mismatch)
			warning(opt, "'%s' is not the file the process had "
				"mapped (other inode): names may be wrong",
				m[i].path);
	}
}

static int write_report(const struct report *r, enum fmt fmt,
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
	}
	return -EINVAL;
}

/* -o: as for dump (common/output.h): "-" is stdout, a device is written
 * to, a file is replaced only when complete. */
static int output(const struct report *r, enum fmt fmt,
		  const struct report_opts *ro, const char *out)
{
	struct output o;
	FILE *f;
	int fd, rc;

	if (!out || !strcmp(out, "-")) {
		rc = write_report(r, fmt, ro, stdout);
		if (!rc && fflush(stdout))
			rc = -errno;
		return rc;
	}
	rc = output_open(&o, out, true);
	if (rc)
		return rc;
	fd = dup(o.fd);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		output_abort(&o);
		return rc;
	}
	rc = write_report(r, fmt, ro, f);
	if (fclose(f) && !rc)
		rc = -EIO;
	if (rc) {
		output_abort(&o);
		return rc;
	}
	return output_commit(&o);
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
		{ "objects", no_argument, NULL, 'O' },
		{ "debuginfod", no_argument, NULL, 'd' },
		{ "max-size", required_argument, NULL, 'S' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct options opt = *gopt;
	struct report_opts ro = { .top = 30 };
	const char *base_path = NULL, *out = NULL, *root = NULL, *dump;
	struct profile *prof = NULL, *base = NULL;
	struct symbolizer *sym = NULL, *bsym = NULL;
	struct report *r = NULL;
	bool debuginfod = false;
	uint64_t max_size = PROFILE_MAX_SIZE;
	enum fmt fmt = gopt->json ? F_JSON : F_TEXT;
	uint64_t v;
	size_t i;
	int c, rc, ret;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:qh", longopts, NULL)) != -1) {
		switch (c) {
		case 'b':
			base_path = optarg;
			break;
		case 'f':
			for (i = 0; i < ARRAY_SIZE(fmt_names); i++)
				if (!strcmp(optarg, fmt_names[i]))
					break;
			if (i == ARRAY_SIZE(fmt_names))
				return report_usage_error(optarg,
							  "unknown format");
			fmt = (enum fmt)i;
			break;
		case 'o':
			if (!optarg[0])
				return report_usage_error("-o",
							  "needs a file name");
			out = optarg;
			break;
		case 't':
			if (parse_u64(optarg, 10, &v) || v > 1000000)
				return report_usage_error(optarg,
							  "not a row count");
			ro.top = (unsigned int)v;
			break;
		case 'r':
			root = optarg;
			break;
		case 'l':
			ro.lines = true;
			break;
		case 'i':
			ro.objects = false;
			break;
		case 'O':
			ro.objects = true;
			break;
		case 'd':
			debuginfod = true;
			break;
		case 'S':
			if (parse_size(optarg, &max_size) || !max_size)
				return report_usage_error(
					optarg,
					"not a size (bytes, or with K, M, G, T)");
			break;
		case 'q':
			opt.quiet = true;
			break;
		case 'j':
			fmt = F_JSON;
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
	dump = argv[optind];
	if (base_path && (fmt == F_PPROF || fmt == F_JEPROF))
		return report_usage_error(
			"--base", fmt == F_PPROF
				? "not with pprof (use pprof -diff_base)"
				: "not with jeprof (use jeprof --base)");
	if (root) {
		ret = check_root(root);
		if (ret)
			return ret;
	}
	if (!debuginfod)
		unsetenv("DEBUGINFOD_URLS");
	ro.dump_name = dump;

	progress_init(opt.quiet);
	progress_set("reading %s", dump);
	ret = load(dump, max_size, &prof);
	if (ret)
		goto out;
	if (base_path) {
		ret = load(base_path, max_size, &base);
		if (ret)
			goto out;
	}
	/* only the jeprof export reads the dumps again */
	if (fmt != F_JEPROF) {
		profile_drop_text(prof);
		if (base)
			profile_drop_text(base);
	}
	progress_set("symbolizing the frames of %zu mapped objects",
		     prof->maps->n);
	rc = symbolizer_new(prof->maps, root, &sym);
	if (!rc && base)
		rc = symbolizer_new(base->maps, root, &bsym);
	if (!rc)
		rc = report_build(prof, sym, base, bsym, &r);
	if (rc) {
		error("'%s': %s", dump, strerror(-rc));
		ret = EXIT_FAILURE_OTHER;
		goto out;
	}
	if (fmt != F_JEPROF) {
		profile_drop_stacks(prof);
		if (base)
			profile_drop_stacks(base);
	}
	warn_objects(&opt, sym);
	if (bsym)
		warn_objects(&opt, bsym);
	if (!prof->maps->n)
		warning(&opt, "'%s': no MAPPED_LIBRARIES: addresses stay "
			"unnamed", dump);
	progress_clear();
	rc = output(r, fmt, &ro, out);
	if (rc == -ELOOP && output_refused()[0]) {
		error("'%s': '%s' is a symlink of another user; memsnap does not follow it",
		      out, output_refused());
		ret = EXIT_FAILURE_OTHER;
	} else if (rc) {
		error("%s%s%s: %s", out ? "'" : "", out ? out : "stdout",
		      out ? "'" : "", strerror(-rc));
		ret = EXIT_FAILURE_OTHER;
	}
out:
	report_free(r);
	symbolizer_free(sym);
	symbolizer_free(bsym);
	profile_free(prof);
	profile_free(base);
	return ret;
}
