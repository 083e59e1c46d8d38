#include "cli/cli.h"

#include "allocators/allocator.h"
#include "cli/progress.h"

#include "proc/diagnose.h"
#include "common/util.h"
#include "exporter/http.h"
#include "injector/inject.h"

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static const char usage_text[] =
	"usage: memsnap [OPTIONS] --pid PID COMMAND\n"
	"\n"
	"Reach the allocator inside a live process, one thread at a time.\n"
	"\n"
	"commands:\n"
	"  info              allocators found in the process, their control\n"
	"                    functions, which one serves malloc, and their\n"
	"                    runtime state (one thread borrowed briefly)\n"
	"  info --no-attach  the same without the runtime state: the process\n"
	"                    is never stopped\n"
	"  dump [-o FILE]    heap profile (jemalloc prof.dump, gperftools\n"
	"                    GetHeapProfile, or memsnap's sampler when it is\n"
	"                    on), collected here; default\n"
	"                    ./memsnap.PID.YYYYmmdd-HHMMSS.heap; prints its path\n"
	"  prof on|off       start or stop heap profiling (jemalloc prof.active,\n"
	"                    gperftools HeapProfilerStart/Stop); off stops\n"
	"                    memsnap's sampler when it is on\n"
	"  prof on --sampler [--sample-bytes SIZE] [--stack-bytes SIZE]\n"
	"                    memsnap's own sampler, for any malloc (glibc,\n"
	"                    jemalloc without prof:true, tcmalloc_minimal,\n"
	"                    mimalloc): one sample every SIZE bytes on average\n"
	"                    (default 512K), its stack (the first 16K, or 4K\n"
	"                    to 64K) unwound at dump time;\n"
	"                    an allocator linked into the program has its\n"
	"                    entry points patched (every thread stopped for\n"
	"                    that moment)\n"
	"  prof reset [--lg-sample N]\n"
	"                    forget the samples so far; sample every 2^N bytes\n"
	"  prof gdump on|off dump on every new heap high (prof.gdump)\n"
	"  stats [--json|--raw]\n"
	"                    allocator statistics (glibc, jemalloc, tcmalloc,\n"
	"                    mimalloc): a summary per arena or cache; --raw the\n"
	"                    allocator's own report (malloc_info XML,\n"
	"                    malloc_stats_print, ...), --json structured\n"
	"  explain [--json] [--no-attach]\n"
	"                    where the resident memory is (heap in use, held\n"
	"                    free, metadata, thread stacks, other anonymous,\n"
	"                    files, shared), adding up to RSS, with findings\n"
	"                    and remedies, most bytes first; --no-attach: the\n"
	"                    /proc part only, no thread stopped\n"
	"  watch -o DIR [--interval DUR] [--for DUR | --count K]\n"
	"        [--dump-every K] [--sampler [--sample-bytes SIZE]\n"
	"        [--stack-bytes SIZE] [--sampler-lease DUR]] [--no-attach]\n"
	"                    is it still growing: what explain measures every\n"
	"                    DUR (default 30s) into DIR/series.tsv, a heap\n"
	"                    dump every K ticks (default 10) where one can be\n"
	"                    had; until --for, --count, Ctrl-C or the\n"
	"                    process's exit; then memsnap report DIR;\n"
	"                    --sampler: memsnap's sampler on for the watch\n"
	"  trim              give free memory back to the system (malloc_trim,\n"
	"                    arena purge, ...); prints RSS before and after\n"
	"  call SYMBOL [ARG...]\n"
	"                    expert: call SYMBOL in the target on one borrowed\n"
	"                    thread and print its return value; ARG is an\n"
	"                    integer or a \"string\" (placed on that thread's\n"
	"                    stack); the thread is restored exactly, and by\n"
	"                    itself if memsnap dies\n"
	"  exporter [--listen ADDR:PORT | --textfile PATH [--interval DUR]\n"
	"           [--once]] [--pid PID]... [--match REGEX] [--min-rss SIZE]\n"
	"           [--cgroup PATH] [--max-targets N] [--attach-every DUR]\n"
	"           [--no-attach]\n"
	"                    many processes for Prometheus: what explain\n"
	"                    measures, served at http://ADDR:PORT/metrics\n"
	"                    (default 127.0.0.1:9853) or written to PATH\n"
	"                    (NAME.prom) for node_exporter's textfile\n"
	"                    collector every DUR (default 30s); the targets:\n"
	"                    each --pid, and the processes whose comm or\n"
	"                    executable matches REGEX, of SIZE RSS or more,\n"
	"                    in cgroup PATH (all filters given), at most N\n"
	"                    (default 100); the allocator read, one thread\n"
	"                    borrowed, at most every DUR (default 60s) each\n"
	"  report DUMP       a heap dump, unsampled and symbolized: top sites,\n"
	"                    --base OLD for growth, --format folded|json|svg|\n"
	"                    pprof|jeprof (memsnap report --help)\n"
	"\n"
	"options:\n"
	"  -p, --pid PID     the target process\n"
	"      --json        machine-readable output (see docs/json.md)\n"
	"  -q, --quiet       no warnings\n"
	"      --thread TID  borrow this thread (default: an idle one)\n"
	"      --timeout SEC give up on a call after SEC seconds\n"
	"      --timings     how long the borrowed thread was stopped, per phase\n"
	"      --allocator NAME  act on this allocator (jemalloc, glibc, ...)\n"
	"      --max-size SIZE   refuse a profile or report from the target\n"
	"                    larger than SIZE (default 1G; K, M, G, T)\n"
	"  -h, --help        this help\n"
	"  -V, --version     version and compiled-in features\n"
	"\n"
	"exit status:\n"
	"  0 success           1 operation failed      2 usage error\n"
	"  3 no such process (or zombie, kernel thread; or no longer the one\n"
	"    memsnap looked at: exited, or its credentials changed)\n"
	"  4 permission denied 5 no allocator found / not supported\n"
	"  6 no thread was safe to call from   7 the call timed out\n"
	"  8 the allocator refused (e.g. the dump could not be written)\n"
	"  9 interrupted (SIGINT/SIGTERM/SIGHUP); the target was restored\n"
	"  10 an input file is unreadable (or too large)\n"
	"\n"
	"examples:\n"
	"  memsnap -p $(pidof redis-server) info        what is in there\n"
	"  memsnap -p PID explain                       where is my memory?\n"
	"  memsnap -p PID stats; memsnap -p PID trim    any allocator\n"
	"  memsnap -p PID prof on                       a leak hunt: sample,\n"
	"  memsnap -p PID dump -o before.heap           dump now,\n"
	"  memsnap -p PID dump -o after.heap            dump later,\n"
	"  memsnap report after.heap --base before.heap and see what grew\n"
	"  memsnap -p PID prof off\n"
	"\n"
	"man memsnap: every option, troubleshooting; docs/json.md: --json\n";

static int usage_error(const char *what, const char *why)
{
	return fail(DIAG_USAGE, "%s%s%s (see memsnap --help)", what, why[0] ? ": " : "", why);
}

static void print_version(void)
{
	bool have_debuginfod = false;
	void *h;
	size_t i;

	/* memsnap loads libdebuginfod, by this name, when `report
	 * --debuginfod` asks for it (symbols/opener.c): present or not is a
	 * fact of this host, whatever its library directories. */
	h = linked_statically() ? NULL
				: dlopen("libdebuginfod.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (h) {
		have_debuginfod = true;
		dlclose(h);
	}
	printf("memsnap %s\n", MEMSNAP_VERSION);
	printf("features: libelf libdw(symbols, DWARF lines, inlines) "
	       "liblzma(MiniDebugInfo) libunwind(stack checks, in a sandbox) "
	       "libiberty(C++/Rust demangling) zlib(pprof); report parses "
	       "in a sandbox\n");
	printf("debuginfod: %s\n",
	       have_debuginfod
		       ? "libdebuginfod (report --debuginfod, $DEBUGINFOD_URLS)"
		       : linked_statically()
		       ? "not in the static binary, which loads no library "
			 "(report --debuginfod has no effect)"
		       : "libdebuginfod.so.1 not installed (report --debuginfod has no effect)");
	printf("linked: %s\n", linked_statically() ? "statically" : "dynamically");
	if (http_available())
		printf("exporter: HTTP (%s) and --textfile\n", http_library());
	else
		printf("exporter: --textfile only; HTTP %s\n", http_library());
	printf("allocators:");
	for (i = 0; i < ALLOC_KINDS; i++) {
		char can[64];

		alloc_caps_text(alloc_caps((enum alloc_kind)i) &
					~ALLOC_CAN_STATE,
				can, sizeof(can));
		printf("%s %s (%s)", i ? "," : "",
		       alloc_kind_name((enum alloc_kind)i), can);
	}
	putchar('\n');
	printf("arch: %s\n", inject_arch_name());
}

/*
 * memsnap holds a descriptor per object file it reads and a few of its
 * own (the pidfd, /proc files, the agent's socket, the result): about 20
 * for a small process.  Raise the soft limit to the hard one, and refuse
 * up front below this many, rather than fail half-way with a message
 * that blames the target.
 */
#define FDS_NEEDED 64

static int fd_headroom(void)
{
	unsigned long limit;

	if (!fd_limit_raise(FDS_NEEDED, &limit))
		return EXIT_OK;
	return fail(DIAG_FAILED, "Too many open files: the limit (ulimit -n) is %lu, memsnap needs %d",
		    limit, FDS_NEEDED);
}

/*
 * The commands on a process.  report (a file, never a process) is
 * dispatched before the global options are parsed.  own_options: the
 * command has options of its own after its word (-o, --lg-sample,
 * --raw, --json), so the global options are those before it.
 */
static const struct command {
	const char *name;
	int (*fn)(const struct options *opt, int argc, char **argv);
	bool own_options;
} commands[] = {
	{ "info", cmd_info, false },   { "dump", cmd_dump, true },
	{ "prof", cmd_prof, true },    { "stats", cmd_stats, true },
	{ "trim", cmd_trim, true },    { "call", cmd_call, false },
	{ "explain", cmd_explain, true }, { "watch", cmd_watch, true },
	{ "exporter", cmd_exporter, true },
};

static const struct command *find_command(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(commands); i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

/* Where the command's word is in @argv (the first that is no option nor
 * an option's value), or @argc. */
static int command_at(int argc, char **argv)
{
	static const char *const with_value[] = { "-p", "--pid", "--thread",
						  "--timeout", "--allocator",
						  "--max-size" };
	int i;
	size_t k;

	for (i = 1; i < argc; i++) {
		if (argv[i][0] != '-')
			return i;
		for (k = 0; k < sizeof(with_value) / sizeof(*with_value); k++)
			if (!strcmp(argv[i], with_value[k])) {
				i++;	/* its value: never a command */
				break;
			}
	}
	return argc;
}

/* The argc to give getopt_long() for the global options. */
static int global_argc(int argc, char **argv)
{
	int i = command_at(argc, argv);
	const struct command *c = i < argc ? find_command(argv[i]) : NULL;

	return c && c->own_options ? i : argc;
}

/* -h or --help after the command's word @at (call's: right after it;
 * later, the global options' own -h answers). */
static bool command_help_asked(int argc, char **argv, int at)
{
	int i, last = strcmp(argv[at], "call") ? argc - 1 : at + 1;

	for (i = at + 1; i <= last && i < argc; i++)
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return true;
	return false;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "thread", required_argument, NULL, 'T' },
		{ "timeout", required_argument, NULL, 't' },
		{ "timings", no_argument, NULL, 'M' },
		{ "allocator", required_argument, NULL, 'A' },
		{ "max-size", required_argument, NULL, 'S' },
		{ "no-attach", no_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct options opt = { .max_size = MAX_SIZE_DEFAULT };
	const struct command *command;
	int c, rc;

	/* report reads a file, never a process: its own options (and
	 * --json or -q given before it) */
	for (c = 1; c < argc; c++) {
		if (!strcmp(argv[c], "--json"))
			opt.json = true;
		else if (!strcmp(argv[c], "-q") || !strcmp(argv[c], "--quiet"))
			opt.quiet = true;
		else
			break;
	}
	if (c < argc && !strcmp(argv[c], "report"))
		return (rc = fd_headroom()) ? rc
					    : cmd_report(&opt, argc - c, argv + c);
	opt.json = opt.quiet = false;
	c = command_at(argc, argv);
	if (c < argc && find_command(argv[c]) &&
	    command_help_asked(argc, argv, c) && print_command_help(argv[c]))
		return EXIT_OK;
	opterr = 0;
	while ((c = getopt_long(global_argc(argc, argv), argv, ":p:qhV",
				longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			rc = parse_pid(optarg, &opt.pid);
			if (rc == -ERANGE)
				return usage_error(optarg, "pid out of range");
			if (rc)
				return usage_error(optarg, "not a process id");
			break;
		case 'j':
			opt.json = true;
			break;
		case 'q':
			opt.quiet = true;
			break;
		case 'T':
			if (parse_pid(optarg, &opt.tid))
				return usage_error(optarg, "not a thread id");
			break;
		case 't': {
			char *end;
			double sec = strtod(optarg, &end);

			if (end == optarg || *end || !(sec > 0) || sec > 86400)
				return usage_error(optarg,
						   "not a timeout in seconds");
			opt.timeout_ms = (int)(sec * 1000 + 0.5);
			if (!opt.timeout_ms)
				opt.timeout_ms = 1;
			break;
		}
		case 'M':
			opt.timings = true;
			break;
		case 'A':
			if (!optarg[0])
				return usage_error("--allocator",
						   "needs a name (jemalloc, glibc, tcmalloc, tcmalloc_minimal, mimalloc)");
			opt.allocator = optarg;
			break;
		case 'S':
			if (parse_size(optarg, &opt.max_size) || !opt.max_size)
				return usage_error(optarg,
						   "not a size (bytes, or with K, M, G, T)");
			break;
		case 'N':
			opt.no_attach = true;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return EXIT_OK;
		case 'V':
			print_version();
			return EXIT_OK;
		case ':':
			return usage_error(argv[optind - 1], "needs a value");
		default:
			/* a long option (--json=yes): its own spelling, not
			 * getopt's internal short name */
			if (!strncmp(argv[optind - 1], "--", 2))
				return usage_error(argv[optind - 1],
						   "unknown option");
			if (optopt) {
				char o[3] = { '-', (char)optopt, '\0' };

				return usage_error(o, "unknown option");
			}
			return usage_error(argv[optind - 1], "unknown option");
		}
	}
	if (optind >= argc)
		return usage_error("no command given", "");
	rc = fd_headroom();
	if (rc)
		return rc;
	progress_init(opt.quiet);
	command = find_command(argv[optind]);
	if (command)
		return command->fn(&opt, argc - optind, argv + optind);
	return usage_error(argv[optind], "unknown command");
}
