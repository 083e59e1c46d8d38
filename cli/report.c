/*
 * memsnap report DUMP [--base OLD] [--format F] [-o OUT] [--top N]
 *                [--root DIR] [--lines] [--inuse|--alloc] [--objects]
 *                [--max-size SIZE] [--drop-frames REGEX]...
 *
 * memsnap report DIR [--format text|json|svg|html] [-o OUT] [--top N]
 *                [--drop-frames REGEX]...
 *
 * Reads a heap dump (no process is touched), symbolizes it from the
 * objects its MAPPED_LIBRARIES name, and writes one of the exports; or
 * a watch's directory (timeline/timeline.h).  The command line is read
 * here, and the dumps opened; the parsing runs in a child with no
 * rights (profile/box.h).
 */
#include "cli/cli.h"
#include "cli/progress.h"

#include "common/output.h"
#include "common/util.h"
#include "profile/box.h"
#include "profile/profile.h"
#include "profile/wrappers.h"
#include "timeline/timeline.h"

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
	"                      [--max-size SIZE] [--drop-frames REGEX]...\n"
	"                      [--json] [-q]\n"
	"       memsnap report DIR [--format text|json|svg|html] [-o OUT]\n"
	"                      [--top N] [--save] ...\n"
	"\n"
	"Turn a heap dump (jemalloc heap_v2 or gperftools heap profile) into\n"
	"an answer: unsampled, symbolized, optionally diffed.  A directory of\n"
	"`memsnap watch` instead: its headline (which parts of RSS still\n"
	"grow, which levelled off), each part's pace and shape, the call\n"
	"sites that grew over its dumps and the other large ones (text,\n"
	"json, svg: the chart, or html: all of it in one page, with a flame\n"
	"graph of the growth).\n"
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
	"  --drop-frames REGEX\n"
	"                    one more allocator wrapper: a call site is the\n"
	"                    first frame past the allocator and its wrappers\n"
	"                    (zmalloc*, my_malloc, palloc, g_malloc*, xmalloc,\n"
	"                    operator new, __rust_alloc, PyMem_*, ...); REGEX,\n"
	"                    extended, matches a whole function name; again\n"
	"                    for more.  Flame graphs, folded, pprof and jeprof\n"
	"                    keep whole stacks\n"
	"  --max-size SIZE   refuse a dump (or OLD), or a report, larger than\n"
	"                    SIZE (default 1G; K, M, G, T)\n"
	"  --save            (DIR) every report into DIR itself: summary.txt,\n"
	"                    report.html, growth.txt and growth.svg (the\n"
	"                    growth from the first dump to the last)\n"
	"  -q, --quiet       no warnings\n"
	"\n"
	"The dump and the files it names are parsed in a process with no\n"
	"rights.  DIR must be yours, and no one else's to write into; the\n"
	"files in it are read as regular files, no symlink followed.\n"
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

/* --drop-frames given at most this many times */
#define DROP_FRAMES_MAX 64

/* What cmd_report() read of its command line. */
struct report_cmd {
	const char *dump;
	const char *base;	/* --base, or NULL */
	struct report_args a;	/* but its inputs */
	bool explicit_top;
	bool save;		/* --save: every report of DIR into DIR */
	const char *drop[DROP_FRAMES_MAX];	/* --drop-frames */
	size_t ndrop;
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
		return fail_errno(DIAG_BAD_INPUT, errno, "--root '%s'", root);
	close(fd);
	return EXIT_OK;
}

/* A dump named on the command line, opened here: its descriptor in
 * *@in, or the exit status after its line. */
static int open_dump(const char *path, uint64_t max, struct report_input *in)
{
	char msg[4096];
	int fd = profile_open(path, max);

	if (fd >= 0) {
		*in = (struct report_input){ fd, path };
		return EXIT_OK;
	}
	return fail(report_load_error(path, fd, "", max, msg, sizeof(msg)),
		    "%s", msg);
}

/* report DUMP [--base OLD]: one report, to -o. */
static int report_dumps(const struct options *opt, struct report_cmd *c)
{
	struct report_input in[2] = { { -1, NULL }, { -1, NULL } };
	struct voice v = cli_voice(opt);
	enum diag_kind kind;
	int ret;

	ret = open_dump(c->dump, c->a.max_size, &in[0]);
	if (!ret && c->base)
		ret = open_dump(c->base, c->a.max_size, &in[1]);
	if (!ret) {
		c->a.in = in;
		c->a.n = c->base ? 2 : 1;
		progress_init(opt->quiet);
		ret = report_run(&c->a, &v, &kind) ? diag_exit(kind) : EXIT_OK;
	}
	if (in[0].fd >= 0)
		close(in[0].fd);
	if (in[1].fd >= 0)
		close(in[1].fd);
	return ret;
}

/* The timeline in format @fmt on -o @out (as every report writes it: a
 * new file put in place whole, no symlink of another user followed),
 * or @out in @dir_fd (--save), or stdout. */
static int print_timeline(const struct timeline *tl, const struct report_cmd *c,
			  enum report_fmt fmt, int dir_fd, const char *out)
{
	struct output o;
	FILE *f;
	int rc, fd;

	if (!out || (!strcmp(out, "-") && dir_fd < 0)) {
		timeline_print(tl, c->dump, fmt, c->a.ro.top, stdout);
		return EXIT_OK;
	}
	rc = dir_fd >= 0 ? output_open_at(&o, dir_fd, out, true)
			 : output_open(&o, out, true);
	fd = rc ? -1 : dup(o.fd);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		if (!rc)
			output_abort(&o);
		if (rc == -ELOOP && o.refused[0])
			return fail(DIAG_FAILED, "report: '%s': '%s' is a symlink of another user; memsnap does not follow it",
				    out, o.refused);
		return fail(DIAG_FAILED, "report: '%s': %s", out,
			    strerror(rc ? -rc : errno));
	}
	timeline_print(tl, c->dump, fmt, c->a.ro.top, f);
	if (fclose(f) || (rc = output_commit(&o))) {
		if (!rc)
			output_abort(&o);
		return fail(DIAG_FAILED, "report: '%s': %s", out,
			    strerror(rc ? -rc : errno));
	}
	return EXIT_OK;
}

/* The growth from the first dump @tl read to the last, as `report LAST
 * --base FIRST` in format @fmt, into @name in @dir_fd. */
static int save_growth(const struct options *opt, const struct report_cmd *c,
		       const struct timeline *tl, int dir_fd,
		       enum report_fmt fmt, const char *name)
{
	struct report_input in[2] = {
		{ outdir_open_file(dir_fd, tl->growth_to, c->a.max_size),
		  tl->growth_to },
		{ outdir_open_file(dir_fd, tl->growth_from, c->a.max_size),
		  tl->growth_from },
	};
	struct report_args a = c->a;
	/* what the objects lack was said as the dumps were read */
	struct options quiet = *opt;
	struct voice v;
	enum diag_kind kind;
	int ret = EXIT_OK;

	quiet.quiet = true;
	v = cli_voice(&quiet);

	if (in[0].fd < 0 || in[1].fd < 0) {
		ret = fail(DIAG_BAD_INPUT, "report: '%s/%s': %s", c->dump,
			   in[0].fd < 0 ? tl->growth_to : tl->growth_from,
			   strerror(-(in[0].fd < 0 ? in[0].fd : in[1].fd)));
		goto out;
	}
	a.in = in;
	a.n = 2;
	a.each = false;
	a.sink = NULL;
	a.fmt = fmt;
	a.out = name;
	a.out_dir = dir_fd;
	a.ro.top = 30;
	a.ro.dump_name = tl->growth_to;
	if (report_run(&a, &v, &kind))
		ret = diag_exit(kind);
out:
	if (in[0].fd >= 0)
		close(in[0].fd);
	if (in[1].fd >= 0)
		close(in[1].fd);
	return ret;
}

/*
 * report DIR --save: every report of the watch into DIR itself, through
 * the one descriptor of DIR the reading was checked on (no path is
 * walked again): the timeline (summary.txt), its page (report.html),
 * and the growth from the first dump read to the last (growth.txt,
 * growth.svg).  Each replaces the one before, whole.
 */
static int save_all(const struct options *opt, const struct report_cmd *c,
		    const struct timeline *tl, int dir_fd)
{
	int ret;

	ret = print_timeline(tl, c, F_TEXT, dir_fd, "summary.txt");
	if (!ret)
		ret = print_timeline(tl, c, F_HTML, dir_fd, "report.html");
	if (ret)
		return ret;
	if (!tl->growth_from) {
		/* the series' last note says why, when a note does */
		printf("%s: summary.txt, report.html; %zu dump%s read: no "
		       "growth%s%s\n", c->dump, tl->ndumps,
		       tl->ndumps == 1 ? "" : "s",
		       tl->s.notes ? "; the watch's last note: " : "",
		       tl->s.notes ? tl->s.last_note : "");
		return EXIT_OK;
	}
	ret = save_growth(opt, c, tl, dir_fd, F_TEXT, "growth.txt");
	if (!ret)
		ret = save_growth(opt, c, tl, dir_fd, F_SVG, "growth.svg");
	if (!ret)
		printf("%s: summary.txt, report.html, growth.txt, growth.svg; "
		       "%zu dumps read\n", c->dump, tl->ndumps);
	return ret;
}

/* report DIR: a watch's directory, opened once; every file read in it
 * relative to it. */
static int report_dir(const struct options *opt, struct report_cmd *c)
{
	const struct timeline_opts o = {
		.dir = c->dump,
		.sites = c->a.fmt != F_SVG,
		.root = c->a.root,
		.debuginfod = c->a.debuginfod,
		.max_size = c->a.max_size,
		.wrappers = c->a.ro.wrappers,
	};
	struct voice v = cli_voice(opt);
	struct timeline tl;
	enum diag_kind kind;
	char why[512];
	int ret, dir_fd;

	if (c->save && (c->a.out || c->a.fmt != F_TEXT))
		return report_usage_error("--save", "writes every report into "
					  "DIR: no -o, no --format");
	if (c->base || (c->a.fmt != F_TEXT && c->a.fmt != F_JSON &&
			c->a.fmt != F_SVG && c->a.fmt != F_HTML))
		return fail(DIAG_USAGE, "report: '%s' is a watch's directory: "
			    "text, --format json, svg or html, and no --base "
			    "(see memsnap report --help)", c->dump);
	if (c->a.alloc)
		return report_usage_error("--alloc", "not with a watch "
					  "directory (its timeline follows "
					  "what is in use)");
	if (!c->explicit_top)
		c->a.ro.top = 10;
	dir_fd = outdir_open(c->dump, false, why, sizeof(why));
	if (dir_fd < 0)
		return fail(DIAG_BAD_INPUT, "report: '%s': %s", c->dump, why);
	progress_init(opt->quiet);
	ret = timeline_load(dir_fd, &o, &v, &tl, &kind) ? diag_exit(kind)
							: EXIT_OK;
	if (!ret && c->save)
		ret = save_all(opt, c, &tl, dir_fd);
	else if (!ret)
		ret = print_timeline(&tl, c, c->a.fmt, -1, c->a.out);
	close(dir_fd);
	timeline_free(&tl);
	return ret;
}

/* One option of report's command line (getopt_long's @ch, @arg) into
 * @c and @opt: EXIT_OK, or the exit status after one line (-1: --help
 * was printed). */
static int take_option(int ch, const char *arg, const char *name,
		       struct report_cmd *c, struct options *opt)
{
	struct report_args *a = &c->a;
	uint64_t v;
	size_t i;

	switch (ch) {
	case 'b':
		c->base = arg;
		break;
	case 'f':
		for (i = 0; i < ARRAY_SIZE(fmt_names); i++)
			if (!strcmp(arg, fmt_names[i]))
				break;
		if (i == ARRAY_SIZE(fmt_names))
			return report_usage_error(arg, "unknown format");
		a->fmt = (enum report_fmt)i;
		break;
	case 'o':
		if (!arg[0])
			return report_usage_error("-o", "needs a file name");
		a->out = arg;
		break;
	case 't':
		if (parse_u64(arg, 10, &v) || v > 1000000)
			return report_usage_error(arg, "not a row count");
		a->ro.top = (unsigned int)v;
		c->explicit_top = true;
		break;
	case 'r':
		a->root = arg;
		break;
	case 'l':
		a->ro.lines = true;
		break;
	case 'i':
	case 'a':
		a->alloc = ch == 'a';
		break;
	case 'O':
		a->ro.objects = true;
		break;
	case 'd':
		a->debuginfod = true;
		break;
	case 'D':
		if (c->ndrop == DROP_FRAMES_MAX)
			return report_usage_error("--drop-frames",
						  "given too often");
		c->drop[c->ndrop++] = arg;
		break;
	case 'S':
		if (parse_size(arg, &a->max_size) || !a->max_size)
			return report_usage_error(
				arg, "not a size (bytes, or with K, M, G, T)");
		break;
	case 'q':
		opt->quiet = true;
		break;
	case 'j':
		a->fmt = F_JSON;
		break;
	case 's':
		c->save = true;
		break;
	case 'h':
		fputs(report_usage, stdout);
		return -1;
	case ':':
		return report_usage_error(name, "needs a value");
	default:
		return report_usage_error(name, "unknown option");
	}
	return EXIT_OK;
}

/* What the options ask, checked together. */
static int check_options(const struct report_cmd *c)
{
	const struct report_args *a = &c->a;

	if (a->alloc && a->fmt == F_JEPROF)
		return report_usage_error("--alloc", "not with jeprof (use "
					  "jeprof --alloc_space)");
	if (c->base && (a->fmt == F_PPROF || a->fmt == F_JEPROF))
		return report_usage_error(
			"--base", a->fmt == F_PPROF
				? "not with pprof (use pprof -diff_base)"
				: "not with jeprof (use jeprof --base)");
	return a->root ? check_root(a->root) : EXIT_OK;
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
		{ "drop-frames", required_argument, NULL, 'D' },
		{ "max-size", required_argument, NULL, 'S' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "json", no_argument, NULL, 'j' },
		{ "save", no_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct options opt = *gopt;
	struct report_cmd c = {
		.a = {
			.fmt = gopt->json ? F_JSON : F_TEXT,
			.ro = { .top = 30 },
			.max_size = PROFILE_MAX_SIZE,
			.out_dir = -1,
		},
	};
	char why[256];
	struct stat st;
	int ch, ret;

	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":o:qh", longopts, NULL)) != -1) {
		ret = take_option(ch, optarg, argv[optind - 1], &c, &opt);
		if (ret)
			return ret < 0 ? EXIT_OK : ret;
	}
	if (optind >= argc)
		return report_usage_error("no dump given", "");
	if (optind + 1 < argc)
		return report_usage_error(argv[optind + 1],
					  "one dump at a time");
	c.dump = argv[optind];
	ret = check_options(&c);
	if (ret)
		return ret;
	if (!c.a.debuginfod)
		unsetenv("DEBUGINFOD_URLS");
	c.a.ro.dump_name = c.dump;
	ret = wrappers_new(c.drop, c.ndrop, &c.a.ro.wrappers, why, sizeof(why));
	if (ret == -EINVAL)
		return report_usage_error("--drop-frames", why);
	if (ret)
		return fail(DIAG_FAILED, "report: %s", strerror(-ret));
	if (!stat(c.dump, &st) && S_ISDIR(st.st_mode))
		ret = report_dir(&opt, &c);
	else if (c.save)
		ret = report_usage_error("--save", "for a watch's directory");
	else
		ret = report_dumps(&opt, &c);
	wrappers_free(c.a.ro.wrappers);
	return ret;
}
