#include "cli/cli.h"

#include "attach/diagnose.h"
#include "common/util.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
	"usage: memsnap [OPTIONS] --pid PID COMMAND\n"
	"\n"
	"Reach the allocator inside a live process, one thread at a time.\n"
	"\n"
	"commands:\n"
	"  info              allocators found in the process, their control\n"
	"                    functions and which one serves malloc (does not\n"
	"                    stop the process)\n"
	"  report DUMP       a heap dump, unsampled and symbolized: top sites,\n"
	"                    --base OLD for growth, --format folded|json|svg|\n"
	"                    pprof|jeprof (memsnap report --help)\n"
	"\n"
	"options:\n"
	"  -p, --pid PID     the target process\n"
	"      --json        machine-readable output (see docs/json.md)\n"
	"  -q, --quiet       no warnings\n"
	"  -h, --help        this help\n"
	"  -V, --version     version and compiled-in features\n"
	"\n"
	"exit status:\n"
	"  0 success           1 operation failed      2 usage error\n"
	"  3 no such process (or zombie, kernel thread)\n"
	"  4 permission denied 5 no allocator found / not supported\n"
	"\n"
	"example:\n"
	"  memsnap --pid $(pidof redis-server) info\n";

void error(const char *fmt, ...)
{
	va_list ap;

	fputs("memsnap: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void warning(const struct options *opt, const char *fmt, ...)
{
	va_list ap;

	if (opt->quiet)
		return;
	fputs("memsnap: warning: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int report_proc_error(pid_t pid, const char *what, int err)
{
	char why[512];

	switch (err) {
	case -ENOENT:
	case -ESRCH:
		error("pid %d: no such process", (int)pid);
		return EXIT_NO_PROCESS;
	case -EACCES:
	case -EPERM:
		diagnose_access(pid, false, why, sizeof(why));
		error("pid %d: /proc/%d/%s: %s: %s", (int)pid, (int)pid, what,
		      strerror(-err), why);
		return EXIT_PERMISSION;
	default:
		error("pid %d: /proc/%d/%s: %s", (int)pid, (int)pid, what,
		      strerror(-err));
		return EXIT_FAILURE_OTHER;
	}
}

static int usage_error(const char *what, const char *why)
{
	error("%s%s%s (see memsnap --help)", what, why[0] ? ": " : "", why);
	return EXIT_USAGE;
}

static void print_version(void)
{
	printf("memsnap %s\n", MEMSNAP_VERSION);
	printf("features: libelf libdw liblzma(minidebuginfo)\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct options opt = { 0 };
	const char *cmd;
	int c, rc;

	/* report reads a file, never a process: its own options */
	if (argc > 1 && !strcmp(argv[1], "report"))
		return cmd_report(&opt, argc - 1, argv + 1);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:qhV", longopts, NULL)) != -1) {
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
		case 'h':
			fputs(usage_text, stdout);
			return EXIT_OK;
		case 'V':
			print_version();
			return EXIT_OK;
		case ':':
			return usage_error(argv[optind - 1], "needs a value");
		default:
			if (optopt) {
				char o[3] = { '-', (char)optopt, '\0' };

				return usage_error(o, "unknown option");
			}
			return usage_error(argv[optind - 1], "unknown option");
		}
	}
	if (optind >= argc)
		return usage_error("no command given", "");
	cmd = argv[optind];
	if (!strcmp(cmd, "info"))
		return cmd_info(&opt, argc - optind, argv + optind);
	return usage_error(cmd, "unknown command");
}
