/*
 * memsnap --pid N prof on|off | reset [--lg-sample N] | gdump on|off:
 * switch the allocator's heap profiling without a restart.
 */
#include "cli/cli.h"

#include "allocators/allocator.h"
#include "agent/dumpdir.h"
#include "cli/sampling.h"
#include "cli/session.h"
#include "common/json.h"
#include "common/util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char prof_usage[] =
	"prof: say on [--sampler [--sample-bytes SIZE] [--stack-bytes SIZE]], off, reset [--lg-sample N] or gdump on|off (see memsnap --help)";

/* prof on --sampler [--sample-bytes SIZE] [--stack-bytes SIZE]:
 * memsnap's own sampler. */
struct sampler_args {
	bool on;
	uint64_t mean, stack_bytes;
};

static int on_off(const char *s, bool *on)
{
	if (!s)
		return -EINVAL;
	if (!strcmp(s, "on")) {
		*on = true;
		return 0;
	}
	if (!strcmp(s, "off")) {
		*on = false;
		return 0;
	}
	return -EINVAL;
}

/* Is argv[*i] option @name ("--name V" or "--name=V")?  1 with its
 * value in *@v (*@i moved past it), 0 when it is another argument, -1
 * after an error line. */
static int option_value(int argc, char **argv, int *i, const char *name,
			const char **v)
{
	size_t n = strlen(name);

	if (strncmp(argv[*i], name, n) || (argv[*i][n] && argv[*i][n] != '='))
		return 0;
	if (argv[*i][n] == '=') {
		*v = argv[*i] + n + 1;
		return 1;
	}
	if (*i + 1 >= argc) {
		error("prof on: %s needs a size (see memsnap --help)", name);
		return -1;
	}
	*v = argv[++*i];
	return 1;
}

/* After "prof on": --sampler, --sample-bytes SIZE, --stack-bytes SIZE.
 * The index of the first argument not taken, or -1 after an error
 * line. */
static int parse_sampler(int argc, char **argv, int i, struct sampler_args *sa)
{
	const char *sizes = NULL, *v;
	int t;

	for (; i < argc; i++) {
		if (!strcmp(argv[i], "--sampler")) {
			sa->on = true;
		} else if ((t = option_value(argc, argv, &i, "--sample-bytes",
					     &v))) {
			if (t < 0)
				return -1;
			if (parse_size(v, &sa->mean) || !sa->mean ||
			    sa->mean > (1ull << 40)) {
				error("prof on: --sample-bytes %s: not a size "
				      "from 1 to 1T", v);
				return -1;
			}
			sizes = "--sample-bytes";
		} else if ((t = option_value(argc, argv, &i, "--stack-bytes",
					     &v))) {
			uint64_t b;

			if (t < 0)
				return -1;
			if (parse_size(v, &b) || !sampler_stack_bytes_ok(b)) {
				error("prof on: --stack-bytes %s: not one of "
				      "4K, 8K, 16K, 32K, 64K", v);
				return -1;
			}
			sa->stack_bytes = b;
			sizes = "--stack-bytes";
		} else {
			break;
		}
	}
	if (sizes && !sa->on) {
		error("prof on: %s goes with --sampler (see memsnap --help)",
		      sizes);
		return -1;
	}
	return i;
}

/* argv[0] is "prof". */
static int parse_args(int argc, char **argv, enum alloc_prof_op *op,
		      uint64_t *arg, struct sampler_args *sa)
{
	bool on;
	int i;

	*op = ALLOC_PROF_OFF;
	*arg = ALLOC_PROF_KEEP;
	*sa = (struct sampler_args){ 0 };
	if (argc < 2)
		return fail(DIAG_USAGE, "%s", prof_usage);
	if (!on_off(argv[1], &on)) {
		*op = on ? ALLOC_PROF_ON : ALLOC_PROF_OFF;
		i = on ? parse_sampler(argc, argv, 2, sa) : 2;
		if (i < 0)
			return diag_exit(DIAG_USAGE);
	} else if (!strcmp(argv[1], "gdump")) {
		if (on_off(argc > 2 ? argv[2] : NULL, &on))
			return fail(DIAG_USAGE, "prof gdump: say on or off (see memsnap --help)");
		*op = on ? ALLOC_PROF_GDUMP_ON : ALLOC_PROF_GDUMP_OFF;
		i = 3;
	} else if (!strcmp(argv[1], "reset")) {
		*op = ALLOC_PROF_RESET;
		for (i = 2; i < argc; i++) {
			const char *v = NULL;

			if (!strcmp(argv[i], "--lg-sample")) {
				if (i + 1 >= argc)
					return fail(DIAG_USAGE, "prof reset: --lg-sample needs a value (see memsnap --help)");
				v = argv[++i];
			} else if (!strncmp(argv[i], "--lg-sample=", 12)) {
				v = argv[i] + 12;
			} else {
				break;
			}
			/* 2^N bytes between samples; jemalloc caps at 63. */
			if (parse_u64(v, 10, arg) || *arg > 62)
				return fail(DIAG_USAGE, "prof reset: --lg-sample %s: not a number from 0 to 62",
					    v);
		}
	} else {
		return fail(DIAG_USAGE, "prof: unknown action '%s'; say on [--sampler [--sample-bytes SIZE] [--stack-bytes SIZE]], off, reset [--lg-sample N] or gdump on|off",
			    argv[1]);
	}
	if (i < argc)
		return fail(DIAG_USAGE, "prof: unexpected argument '%s' (see memsnap --help)",
			    argv[i]);
	return EXIT_OK;
}

static const char *onoff(bool b)
{
	return b ? "on" : "off";
}

static void print_result(const struct options *opt, const struct target *t,
			 enum alloc_prof_op op,
			 const struct alloc_prof_result *r)
{
	int pid = (int)t->pi.pid;
	const char *what = op == ALLOC_PROF_RESET ? "reset"
			   : op == ALLOC_PROF_GDUMP_ON ||
					   op == ALLOC_PROF_GDUMP_OFF
				   ? "gdump"
				   : "sampling";

	if (opt->json) {
		struct json j;

		json_init(&j, stdout);
		json_object_begin(&j, NULL);
		json_u64(&j, "pid", (uint64_t)pid);
		json_string(&j, "allocator", alloc_kind_name(t->a->kind));
		json_string(&j, "action", what);
		if (op == ALLOC_PROF_RESET) {
			json_u64(&j, "lg_sample", r->lg_sample);
		} else {
			json_bool(&j, "was", r->was);
			json_bool(&j, "now", r->now);
		}
		json_object_end(&j);
		json_finish(&j);
		return;
	}
	if (op == ALLOC_PROF_RESET)
		printf("pid %d: profile reset, sampling every 2^%llu bytes on average\n",
		       pid, (unsigned long long)r->lg_sample);
	else
		printf("pid %d: %s %s (was %s)\n", pid,
		       op == ALLOC_PROF_ON || op == ALLOC_PROF_OFF
			       ? "heap profiling"
			       : "dump on every new heap high (gdump)",
		       onoff(r->now), onoff(r->was));
}

/* Can the allocator that serves malloc switch profiling itself? */
static bool can_profile(const struct target *t)
{
	const struct allocator *a = detection_serving(&t->det);

	return a && (alloc_caps(a->kind) & ALLOC_CAN_PROF);
}

int cmd_prof(const struct options *opt, int argc, char **argv)
{
	struct alloc_prof_result res;
	struct sampler_args sa;
	struct dumpdir *d = NULL;
	enum alloc_prof_op op;
	struct target t;
	uint64_t arg;
	int ret, rc;

	ret = parse_args(argc, argv, &op, &arg, &sa);
	if (ret)
		return ret;
	ret = target_view(opt, "prof", &t);
	if (ret)
		goto out;
	if (sa.on) {
		ret = sampler_cmd_on(opt, &t, sa.mean, sa.stack_bytes);
		goto out;
	}
	/* A sampler whose control block this memsnap cannot read (another
	 * version's, or written over) is not "no sampler": said, and left
	 * as it is. */
	if (op == ALLOC_PROF_OFF && !opt->allocator &&
	    t.sampler_rc == -EPROTO) {
		ret = fail(DIAG_UNSUPPORTED, "prof %d: its sampler's control "
			   "block or table is not one this memsnap made "
			   "(another version's, or written over): left as it "
			   "is", (int)t.pi.pid);
		hint("the memsnap that switched it on can switch it off");
		goto out;
	}
	/* Off: the sampler, if it is on (or an entry point of it still
	 * patched), or loaded and the allocator cannot profile (off twice
	 * is not an error); unless an allocator was named. */
	if (op == ALLOC_PROF_OFF && !opt->allocator &&
	    !t.sampler_rc &&
	    (t.sampler.active || t.sampler.entries || !can_profile(&t))) {
		ret = sampler_cmd_off(opt, &t);
		goto out;
	}
	/* reset and gdump are the allocator's profiler's: with the sampler
	 * on and no profiler to ask, say what the sampler does instead */
	if (op != ALLOC_PROF_OFF && op != ALLOC_PROF_ON && !opt->allocator &&
	    !t.sampler_rc && t.sampler.active && !can_profile(&t)) {
		ret = fail(DIAG_UNSUPPORTED, "prof %d: memsnap's sampler has "
			   "no %s: it keeps the blocks sampled and still live, "
			   "and forgets each when it is freed",
			   (int)t.pi.pid,
			   op == ALLOC_PROF_RESET ? "reset" : "gdump");
		if (op == ALLOC_PROF_RESET)
			hint("`memsnap --pid %d prof off`, then `prof on "
			     "--sampler`, starts it afresh", (int)t.pi.pid);
		goto out;
	}
	ret = target_pick(opt, "prof", ALLOC_CAN_PROF, &t);
	if (ret)
		goto out;
	/* A private directory for an allocator that wants a file prefix
	 * (gperftools), made before the thread is stopped; the others
	 * never need it. */
	ret = target_dumpdir(&t, "prof",
			     t.a->kind == ALLOC_TCMALLOC ? DUMPDIR_OPTIONAL
							 : DUMPDIR_DEFERRED,
			     &d);
	if (ret)
		goto out;
	ret = target_attach(opt, "prof", &t);
	if (ret)
		goto out;
	rc = alloc_prof(t.s, t.a, op, arg, d, &res);
	if (rc)
		ret = target_error(&t, "prof",
				   target_interrupted() ? -EINTR : rc);
	rc = target_detach(opt, "prof", &t);
	if (!ret)
		ret = rc;
	/* The switch was made (the call is never cut short); say so, and
	 * that we were interrupted. */
	if (!ret)
		print_result(opt, &t, op, &res);
	if (!ret && op == ALLOC_PROF_GDUMP_ON && !res.was) {
		char cwd[4096] = "?";
		char link[64];
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/%d/cwd", (int)t.pi.pid);
		n = readlink(link, cwd, sizeof(cwd) - 1);
		cwd[n > 0 ? n : 1] = '\0';
		warning(opt,
			"pid %d now writes a profile into its working directory (%s) at every new heap high; `memsnap --pid %d prof gdump off` stops that",
			(int)t.pi.pid, cwd, (int)t.pi.pid);
	}
	if (!ret && target_interrupted())
		ret = target_error(&t, "prof", -EINTR);
out:
	target_free(&t);
	dumpdir_remove(d);
	return ret;
}
