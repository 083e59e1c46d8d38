/*
 * memsnap exporter [--listen ADDR:PORT | --textfile PATH [--interval DUR]
 *                  [--once]] [--pid PID]... [--match REGEX]
 *                  [--min-rss SIZE] [--cgroup PATH] [--max-targets N]
 *                  [--attach-every DUR] [--no-attach]
 *
 * The memory of a set of processes for Prometheus: served over HTTP
 * (exporter/http.h) or written for node_exporter's textfile collector
 * (exporter/textfile.h), from the model of exporter/exporter.h.  This
 * file parses the command line, runs the loop, and gives the model its
 * reading of a process: `explain`'s measurement (cli/explain.h), made
 * quiet, of the process the model pinned (its pin passed on: a pid
 * taken by another process is refused as exited, never read).
 */
#include "cli/cli.h"

#include "cli/explain.h"
#include "cli/progress.h"
#include "cli/session.h"
#include "common/util.h"
#include "exporter/exporter.h"
#include "exporter/http.h"
#include "exporter/textfile.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_LISTEN "127.0.0.1:9853"
#define DEFAULT_INTERVAL_MS 30000
#define MIN_INTERVAL_MS 1000
#define MIN_ATTACH_EVERY_MS 1000
/* Readings done between two waits for HTTP requests, at most: a scrape
 * waits no longer than this for the loop. */
#define WORK_SLICE_MS 200

struct exporter_args {
	const char *listen, *textfile, *match, *cgroup;
	pid_t *pids;
	size_t npids;
	uint64_t interval_ms, min_rss, attach_every_ms, max_targets;
	bool once, no_attach;
};

static const char exporter_usage[] =
	"exporter [--listen ADDR:PORT | --textfile PATH [--interval DUR] "
	"[--once]] [--pid PID]... [--match REGEX] [--min-rss SIZE] "
	"[--cgroup PATH] [--max-targets N] [--attach-every DUR] [--no-attach]";

static int usage(const char *what, const char *arg)
{
	return fail(DIAG_USAGE, "exporter: %s '%s' (usage: %s)", what, arg,
		    exporter_usage);
}

static int add_pid(struct exporter_args *a, pid_t pid)
{
	pid_t *np = realloc(a->pids, (a->npids + 1) * sizeof(*np));

	if (!np)
		return fail(DIAG_FAILED, "exporter: %s", strerror(ENOMEM));
	a->pids = np;
	a->pids[a->npids++] = pid;
	return EXIT_OK;
}

static int parse_value(struct exporter_args *a, const char *o, const char *v)
{
	if (!strcmp(o, "--listen")) {
		a->listen = v;
	} else if (!strcmp(o, "--textfile")) {
		a->textfile = v;
	} else if (!strcmp(o, "--interval")) {
		if (parse_duration_ms(v, &a->interval_ms) ||
		    a->interval_ms < MIN_INTERVAL_MS)
			return usage("not an interval (1s at least, e.g. 30s):",
				     v);
	} else if (!strcmp(o, "--pid") || !strcmp(o, "-p")) {
		pid_t pid;

		if (parse_pid(v, &pid))
			return usage("not a process id:", v);
		return add_pid(a, pid);
	} else if (!strcmp(o, "--match")) {
		a->match = v;
	} else if (!strcmp(o, "--min-rss")) {
		if (parse_size(v, &a->min_rss) || !a->min_rss)
			return usage("not a size (bytes, or with K, M, G):", v);
	} else if (!strcmp(o, "--cgroup")) {
		a->cgroup = v;
	} else if (!strcmp(o, "--max-targets")) {
		if (parse_u64(v, 10, &a->max_targets) || !a->max_targets ||
		    a->max_targets > EXPORTER_MAX_TARGETS_LIMIT)
			return usage("not a count of targets (1 to 10000):", v);
	} else if (!strcmp(o, "--attach-every")) {
		if (parse_duration_ms(v, &a->attach_every_ms) ||
		    a->attach_every_ms < MIN_ATTACH_EVERY_MS)
			return usage("not a duration (1s at least, e.g. 60s):",
				     v);
	}
	return EXIT_OK;
}

static int parse_args(const struct options *opt, int argc, char **argv,
		      struct exporter_args *a)
{
	static const char *const with_value[] = {
		"--listen", "--textfile", "--interval", "--pid", "-p",
		"--match", "--min-rss", "--cgroup", "--max-targets",
		"--attach-every",
	};
	int i, ret;
	size_t k;

	*a = (struct exporter_args){
		.interval_ms = DEFAULT_INTERVAL_MS,
		.attach_every_ms = EXPORTER_ATTACH_EVERY_DEFAULT_MS,
		.max_targets = EXPORTER_MAX_TARGETS_DEFAULT,
		.no_attach = opt->no_attach,
	};
	if (opt->pid && (ret = add_pid(a, opt->pid)))
		return ret;
	for (i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		bool value = false;

		for (k = 0; k < ARRAY_SIZE(with_value); k++)
			value |= !strcmp(o, with_value[k]);
		if (value && !v)
			return usage("needs a value:", o);
		if (value) {
			ret = parse_value(a, o, v);
			if (ret)
				return ret;
			i++;
		} else if (!strcmp(o, "--once")) {
			a->once = true;
		} else if (!strcmp(o, "--no-attach")) {
			a->no_attach = true;
		} else {
			return usage(o[0] == '-' ? "unknown option"
						 : "unexpected argument", o);
		}
	}
	if (a->listen && a->textfile)
		return fail(DIAG_USAGE, "exporter: --listen serves, --textfile writes a file; give one");
	if (!a->textfile && (a->once || a->interval_ms != DEFAULT_INTERVAL_MS))
		return fail(DIAG_USAGE, "exporter: %s goes with --textfile",
			    a->once ? "--once" : "--interval");
	if (!a->npids && !a->match && !a->min_rss && !a->cgroup)
		return fail(DIAG_USAGE, "exporter: which processes? give --pid, --match, --min-rss or --cgroup (usage: %s)",
			    exporter_usage);
	if (!a->listen)
		a->listen = DEFAULT_LISTEN;
	return EXIT_OK;
}

/* The kind of error behind exit status @code (cli/message.c's table,
 * read backwards). */
static enum diag_kind kind_of_exit(int code)
{
	static const enum diag_kind kinds[] = {
		[EXIT_FAILURE_OTHER] = DIAG_FAILED,
		[EXIT_USAGE] = DIAG_USAGE,
		[EXIT_NO_PROCESS] = DIAG_NO_PROCESS,
		[EXIT_PERMISSION] = DIAG_PERMISSION,
		[EXIT_NO_ALLOCATOR] = DIAG_UNSUPPORTED,
		[EXIT_UNSAFE] = DIAG_UNSAFE,
		[EXIT_TIMEOUT] = DIAG_TIMEOUT,
		[EXIT_ALLOCATOR_ERROR] = DIAG_REFUSED,
		[EXIT_INTERRUPTED] = DIAG_INTERRUPTED,
		[EXIT_BAD_INPUT] = DIAG_BAD_INPUT,
	};

	return code > 0 && (size_t)code < ARRAY_SIZE(kinds) ? kinds[code]
							    : DIAG_FAILED;
}

/* "exporter 4242: no thread was safe..." without "exporter 4242: ": the
 * log line names the process already. */
static void drop_prefix(char *line, pid_t pid)
{
	char head[32];
	size_t n;

	n = (size_t)snprintf(head, sizeof(head), "exporter %d: ", (int)pid);
	if (!strncmp(line, head, n))
		memmove(line, line + n, strlen(line + n) + 1);
}

/*
 * The reading of one process (struct exporter_reader): `explain`'s
 * measurement, its messages kept rather than printed, of the process
 * @p pins (pid and start time).
 */
static void read_process(void *ctx, const struct proc_pin *p, bool attach,
			 struct exporter_reading *out)
{
	const struct options *gopt = ctx;
	struct options opt = *gopt;
	struct explain_run *r = calloc(1, sizeof(*r));
	const struct inject_timings *tm;
	int ret;

	memset(out, 0, sizeof(*out));
	out->failed = DIAG_FAILED;
	if (!r) {
		snprintf(out->why, sizeof(out->why), "%s", strerror(ENOMEM));
		return;
	}
	opt.pid = p->pid;
	opt.pin = p;
	opt.json = opt.timings = false;
	opt.quiet = true;
	opt.all_numbers = true;
	messages_capture(out->why, sizeof(out->why));
	ret = explain_measure(&opt, "exporter", !attach, r);
	messages_capture(NULL, 0);
	drop_prefix(out->why, p->pid);
	out->ok = ret == EXIT_OK;
	out->failed = out->ok ? DIAG_FAILED : kind_of_exit(ret);
	if (r->loaded && r->t.have_det) {
		const struct allocator *a = r->t.a ? r->t.a
						   : detection_serving(&r->t.det);

		out->allocator = a ? alloc_kind_name(a->kind) : NULL;
		out->sampler_rc = r->t.sampler_rc;
		out->sampler_active = r->t.sampler.active;
		out->sampler_mean = r->t.sampler.mean;
		out->no_malloc = !r->t.det.have_malloc && !r->t.det.n;
	} else {
		out->sampler_rc = -ENOENT;
	}
	tm = &r->t.timings;
	out->stopped_us = tm->seize_us + tm->check_us + tm->save_us +
			  tm->call_us + tm->restore_us + tm->detach_us;
	if (out->ok) {
		out->rt = r->rt;
		out->nclaims = r->nclaims < SAMPLER_RANGES ? r->nclaims
							     : SAMPLER_RANGES;
		memcpy(out->claims, r->claims,
		       out->nclaims * sizeof(out->claims[0]));
		out->attached = attach;
		out->acc = r->acc;
		out->can_prof = r->in.can_prof;
	}
	explain_run_free(r);
	free(r);
}

static void log_note(void *ctx, const char *line)
{
	note(ctx, "exporter: %s", line);
}

struct serving {
	struct exporter *e;
	struct http *s;
};

static int serve_metrics(void *ctx, char **text, size_t *len)
{
	struct serving *sv = ctx;
	struct expo x;

	expo_init(&x);
	exporter_scrape(sv->e, &x);
	http_render(sv->s, &x);
	if (x.err) {
		expo_free(&x);
		return -ENOMEM;
	}
	*len = x.len;
	*text = x.buf ? x.buf : strdup("");
	return *text ? 0 : -ENOMEM;
}

static void block_signals(sigset_t *old)
{
	sigset_t block;

	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigprocmask(SIG_BLOCK, &block, old);
}

static int run_http(const struct options *opt, const struct exporter_args *a,
		    struct exporter *e)
{
	struct serving sv = { .e = e };
	struct http_handler h = { .metrics = serve_metrics, .ctx = &sv };
	char where[128], why[256];
	int rc;

	rc = http_open(a->listen, &h, &sv.s, where, sizeof(where), why,
		       sizeof(why));
	if (rc)
		return fail(rc == -ENOSYS ? DIAG_UNSUPPORTED : DIAG_FAILED,
			    "exporter: %s", why);
	exporter_find(e);
	exporter_work(e, 0);
	note(opt, "exporter: serving http://%s/metrics; targets: %zu", where,
	     exporter_targets(e, NULL, 0));
	while (!target_interrupted()) {
		uint64_t next = exporter_work(e, WORK_SLICE_MS);
		sigset_t old;

		block_signals(&old);
		rc = target_interrupted() ? 0
					  : http_run(sv.s, next < 1000 ? next : 1000,
						     &old);
		sigprocmask(SIG_SETMASK, &old, NULL);
		if (rc) {
			http_close(sv.s);
			return fail(DIAG_FAILED, "exporter: serving %s: %s", where,
				    strerror(-rc));
		}
	}
	http_close(sv.s);
	return EXIT_OK;
}

/* Until @ms from now, or a signal (as run_http()'s wait). */
static void wait_for(uint64_t ms)
{
	struct timespec ts = { .tv_sec = (time_t)(ms / 1000),
			       .tv_nsec = (long)(ms % 1000) * 1000000 };
	sigset_t old;

	block_signals(&old);
	if (!target_interrupted())
		ppoll(NULL, 0, &ts, &old);
	sigprocmask(SIG_SETMASK, &old, NULL);
}

static int run_textfile(const struct options *opt,
			const struct exporter_args *a, struct exporter *e)
{
	struct textfile tf;
	char why[512];
	struct expo x;
	int rc;

	rc = textfile_open(a->textfile, &tf, why, sizeof(why));
	if (rc)
		return fail(rc == -EPERM    ? DIAG_PERMISSION
			    : rc == -EINVAL ? DIAG_USAGE
					    : DIAG_FAILED,
			    "exporter: --textfile: %s", why);
	expo_init(&x);
	if (!a->once)
		note(opt, "exporter: writing '%s' every %.3gs", a->textfile,
		     (double)a->interval_ms / 1000.0);
	while (!target_interrupted()) {
		uint64_t start = exporter_now_ms(), took;

		exporter_find(e);
		exporter_work(e, 0);
		expo_reset(&x);
		rc = exporter_scrape(e, &x);
		if (!rc)
			rc = textfile_write(&tf, x.buf ? x.buf : "", x.len);
		if (rc && a->once)
			break;
		if (rc)
			error("exporter: writing '%s': %s", a->textfile,
			      strerror(-rc));
		if (a->once)
			break;
		took = exporter_now_ms() - start;
		wait_for(took < a->interval_ms ? a->interval_ms - took : 0);
	}
	expo_free(&x);
	textfile_close(&tf);
	if (rc && a->once)
		return fail(DIAG_FAILED, "exporter: writing '%s': %s",
			    a->textfile, strerror(-rc));
	return EXIT_OK;
}

int cmd_exporter(const struct options *opt, int argc, char **argv)
{
	struct exporter_config c;
	struct exporter_args a;
	struct exporter *e;
	char why[256];
	int ret;

	ret = parse_args(opt, argc, argv, &a);
	if (ret) {
		free(a.pids);
		return ret;
	}
	c = (struct exporter_config){
		.pids = a.pids,
		.npids = a.npids,
		.match = a.match,
		.min_rss = a.min_rss,
		.cgroup = a.cgroup,
		.max_targets = (unsigned int)a.max_targets,
		.attach_every_ms = a.attach_every_ms,
		.no_attach = a.no_attach,
		.reader = { .read = read_process, .note = log_note,
			    .ctx = (void *)opt },
	};
	progress_init(true);
	target_catch_signals();
	signal(SIGPIPE, SIG_IGN);
	ret = exporter_new(&c, &e, why, sizeof(why));
	free(a.pids);
	if (ret == -EINVAL)
		return fail(DIAG_USAGE, "exporter: %s", why);
	if (ret == -ESRCH)
		return fail(DIAG_NO_PROCESS, "exporter: %s", why);
	if (ret)
		return fail(diag_kind_of(ret), "exporter: %s", why[0] ? why : strerror(-ret));
	ret = a.textfile ? run_textfile(opt, &a, e) : run_http(opt, &a, e);
	exporter_free(e);
	return ret;
}
