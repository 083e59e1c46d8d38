/*
 * memsnap COMMAND --help: each command's own help, on stdout (main.c
 * answers it before any process is looked at).  `memsnap --help` lists
 * them all; the man page has every detail.
 */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

static const struct {
	const char *name, *text;
} helps[] = {
	{ "info",
	  "usage: memsnap --pid PID info [--no-attach]\n"
	  "\n"
	  "The allocators found in the process, their control functions,\n"
	  "which one serves malloc, and their runtime state (one thread\n"
	  "borrowed briefly); --no-attach: the same without the runtime\n"
	  "state, the process never stopped.  The sampler's state when\n"
	  "memsnap's sampler is in the process.\n" },
	{ "dump",
	  "usage: memsnap --pid PID dump [-o FILE]\n"
	  "\n"
	  "A heap profile (jemalloc prof.dump, gperftools GetHeapProfile, or\n"
	  "memsnap's sampler when it is on), collected here; default\n"
	  "./memsnap.PID.YYYYmmdd-HHMMSS.heap.  Prints its path.  Then\n"
	  "memsnap report FILE.\n"
	  "\n"
	  "  -o, --output FILE  where the dump goes\n" },
	{ "prof",
	  "usage: memsnap --pid PID prof on|off\n"
	  "       memsnap --pid PID prof on --sampler [--sample-bytes SIZE]\n"
	  "                                        [--stack-bytes SIZE]\n"
	  "       memsnap --pid PID prof reset [--lg-sample N]\n"
	  "       memsnap --pid PID prof gdump on|off\n"
	  "\n"
	  "Start or stop heap profiling (jemalloc prof.active, gperftools\n"
	  "HeapProfilerStart/Stop); --sampler: memsnap's own sampler, for any\n"
	  "malloc, one sample every SIZE bytes on average (default 512K), its\n"
	  "stack (the first 16K, or 4K to 64K) unwound at dump time.  off\n"
	  "stops the sampler when it is on.  reset forgets the samples so\n"
	  "far (sampling every 2^N bytes); gdump dumps on every new heap\n"
	  "high.\n" },
	{ "stats",
	  "usage: memsnap --pid PID stats [--json|--raw]\n"
	  "\n"
	  "Allocator statistics (glibc, jemalloc, tcmalloc, mimalloc): a\n"
	  "summary per arena or cache; --raw the allocator's own report\n"
	  "(malloc_info XML, malloc_stats_print, ...), --json structured.\n" },
	{ "trim",
	  "usage: memsnap --pid PID trim\n"
	  "\n"
	  "Give free memory back to the system (malloc_trim, arena purge,\n"
	  "...); prints RSS before and after.\n" },
	{ "explain",
	  "usage: memsnap --pid PID explain [--json] [--no-attach]\n"
	  "\n"
	  "Where the resident memory is (heap in use, held free, metadata,\n"
	  "thread stacks, other anonymous, files, shared), adding up to RSS,\n"
	  "with findings and remedies, most bytes first; --no-attach: the\n"
	  "/proc part only, no thread stopped.\n" },
	{ "watch",
	  "usage: memsnap --pid PID watch -o DIR [--interval DUR]\n"
	  "                 [--for DUR | --count K] [--dump-every K]\n"
	  "                 [--sampler [--sample-bytes SIZE] [--stack-bytes SIZE]\n"
	  "                            [--sampler-lease DUR]] [--no-attach]\n"
	  "\n"
	  "Is it still growing?  What explain measures, every DUR, one line a\n"
	  "tick into DIR/series.tsv, and a heap dump every K ticks from the\n"
	  "first where one can be had; until --for, --count, Ctrl-C or the\n"
	  "process's exit.  Then memsnap report DIR: which parts of RSS still\n"
	  "grow and which levelled off, and the call sites that grew.\n"
	  "\n"
	  "  -o, --output DIR     where the series and the dumps go (made if\n"
	  "                       need be; one holding a series is refused)\n"
	  "  --interval DUR       between ticks (default 30s; 500ms, 5m, 2h)\n"
	  "  --for DUR            stop after DUR\n"
	  "  --count K            stop after K ticks\n"
	  "  --dump-every K       a dump every K ticks (default 10; 0 never)\n"
	  "  --sampler            memsnap's sampler on for the watch and off at\n"
	  "                       its end (a watch killed first leaves it\n"
	  "                       loaded: its report says so, and memsnap\n"
	  "                       --pid PID prof off switches it off)\n"
	  "  --sample-bytes SIZE  --stack-bytes SIZE  as prof on --sampler\n"
	  "  --sampler-lease DUR  the watch renews the sampler's lease every\n"
	  "                       tick; left unrenewed for DUR (a killed\n"
	  "                       watch), it takes no more samples (default\n"
	  "                       4 intervals, 1m at least)\n"
	  "  --no-attach          /proc only: no thread stopped, no dump\n"
	  "\n"
	  "exit status: 0 done (also when the process exited), 9 stopped by\n"
	  "SIGINT, SIGTERM or SIGHUP (the series whole), else as memsnap\n"
	  "--help says.\n" },
	{ "call",
	  "usage: memsnap --pid PID call SYMBOL [ARG...]\n"
	  "\n"
	  "Expert: call SYMBOL (or 0xADDR) in the target on one borrowed\n"
	  "thread and print its return value; ARG is an integer or a\n"
	  "\"string\" (placed on that thread's stack); the thread is restored\n"
	  "exactly, and by itself if memsnap dies.\n" },
};

bool print_command_help(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(helps) / sizeof(helps[0]); i++) {
		if (strcmp(helps[i].name, name))
			continue;
		fputs(helps[i].text, stdout);
		fputs("\nglobal options, exit codes: memsnap --help; every "
		      "detail: man memsnap\n", stdout);
		return true;
	}
	return false;
}
