/*
 * memsnap watch's arguments (cli/watch.h).
 */
#include "cli/watch.h"

#include "common/util.h"
#include "sampler/sampler.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define DEFAULT_INTERVAL_MS 30000
#define DEFAULT_DUMP_EVERY 10
#define MIN_INTERVAL_MS 100

static const char watch_usage[] =
	"watch -o DIR [--interval DUR] [--for DUR | --count K] "
	"[--dump-every K] [--sampler [--sample-bytes SIZE] [--stack-bytes SIZE] "
	"[--sampler-lease DUR]] [--no-attach]";

static int usage(const char *what, const char *arg)
{
	return fail(DIAG_USAGE, "watch: %s '%s' (usage: %s)", what, arg, watch_usage);
}

int watch_parse_args(int argc, char **argv, struct watch_args *a)
{
	int i;

	*a = (struct watch_args){ .interval_ms = DEFAULT_INTERVAL_MS,
				  .dump_every = DEFAULT_DUMP_EVERY };
	for (i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		bool value = !strcmp(o, "-o") || !strcmp(o, "--output") ||
			     !strcmp(o, "--interval") || !strcmp(o, "--for") ||
			     !strcmp(o, "--count") || !strcmp(o, "--dump-every") ||
			     !strcmp(o, "--sample-bytes") ||
			     !strcmp(o, "--stack-bytes") ||
			     !strcmp(o, "--sampler-lease");

		if (value && !v)
			return usage("needs a value:", o);
		if (!strcmp(o, "-o") || !strcmp(o, "--output")) {
			a->dir = v;
		} else if (!strcmp(o, "--interval")) {
			if (parse_duration_ms(v, &a->interval_ms) ||
			    a->interval_ms < MIN_INTERVAL_MS)
				return usage("not an interval (0.1s at least, "
					     "e.g. 30s, 5m):", v);
		} else if (!strcmp(o, "--for")) {
			if (parse_duration_ms(v, &a->for_ms) || !a->for_ms)
				return usage("not a duration (e.g. 2h):", v);
		} else if (!strcmp(o, "--count")) {
			if (parse_u64(v, 10, &a->count) || !a->count ||
			    a->count > SERIES_MAX_TICKS)
				return usage("not a count of ticks:", v);
		} else if (!strcmp(o, "--dump-every")) {
			if (parse_u64(v, 10, &a->dump_every) ||
			    a->dump_every > SERIES_MAX_TICKS)
				return usage("not a count of ticks (0: never):",
					     v);
		} else if (!strcmp(o, "--sample-bytes")) {
			if (parse_size(v, &a->sample_bytes) ||
			    !a->sample_bytes || a->sample_bytes > (1ull << 40))
				return usage("not a size from 1 to 1T (bytes, "
					     "or with K, M, G):", v);
		} else if (!strcmp(o, "--stack-bytes")) {
			if (parse_size(v, &a->stack_bytes) ||
			    !sampler_stack_bytes_ok(a->stack_bytes))
				return usage("not one of 4K, 8K, 16K, 32K, 64K:",
					     v);
		} else if (!strcmp(o, "--sampler-lease")) {
			if (parse_duration_ms(v, &a->lease_ms) ||
			    a->lease_ms < 1000)
				return usage("not a lease (1s at least, e.g. "
					     "10m):", v);
		} else if (!strcmp(o, "--sampler")) {
			a->sampler = true;
		} else if (!strcmp(o, "--no-attach")) {
			a->no_attach = true;
		} else {
			return usage(o[0] == '-' ? "unknown option"
						 : "unexpected argument", o);
		}
		i += value;
	}
	if (!a->dir)
		return fail(DIAG_USAGE, "watch: -o DIR is needed: where the series goes (usage: "
			    "%s)", watch_usage);
	if (a->for_ms && a->count)
		return fail(DIAG_USAGE, "watch: --for and --count both say when to stop; give "
			    "one");
	if ((a->sample_bytes || a->stack_bytes || a->lease_ms) && !a->sampler)
		return fail(DIAG_USAGE, "watch: %s goes with --sampler",
			    a->sample_bytes ? "--sample-bytes"
			    : a->stack_bytes ? "--stack-bytes"
					     : "--sampler-lease");
	if (a->sampler && a->no_attach)
		return fail(DIAG_USAGE, "watch: --sampler attaches, --no-attach does not; give "
			    "one");
	return EXIT_OK;
}

/* The sampler's lease, in seconds: --sampler-lease, or 4 intervals and
 * a minute at least, so that late ticks (a slow dump, a loaded machine)
 * never let it lapse while the watch lives. */
uint64_t watch_lease_of(const struct watch_args *a)
{
	uint64_t ms = a->lease_ms ? a->lease_ms : 4 * a->interval_ms;

	if (!a->lease_ms && ms < 60000)
		ms = 60000;
	return (ms + 999) / 1000;
}
