/*
 * memsnap --pid N watch -o DIR [--interval DUR] [--for DUR | --count K]
 *                     [--dump-every K] [--sampler] [--no-attach]
 *
 * Is it still growing?  Every tick measures what `explain` measures
 * (RSS in parts, the allocator's own numbers: one borrowed thread,
 * briefly, as `stats`) and appends it to DIR/series.tsv
 * (timeline/series.h), one whole line per tick, so that a watch killed
 * at any moment leaves a series `memsnap report DIR` reads.  Every K
 * ticks, from the first, a heap profile too, DIR/dump-NNNN.heap, where
 * the process can give one (its allocator's profiler, or memsnap's
 * sampler: --sampler switches it on for the watch and off at its end).
 *
 * The dumps and the sampler's switches run as `memsnap dump` and
 * `memsnap prof` children: one that fails is a note in the series, not
 * the end of the watch.  The watch ends at --for, --count, SIGINT,
 * SIGTERM or SIGHUP (after the tick under way, whose thread is restored
 * first), or when the process exits; the series says which.
 */
#include "cli/cli.h"

#include "cli/explain.h"
#include "cli/session.h"
#include "cli/watch.h"
#include "common/fsio.h"
#include "common/util.h"
#include "proc/cgroup.h"
#include "timeline/series.h"
#include "timeline/trend.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_INTERVAL_MS 30000
#define DEFAULT_DUMP_EVERY 10
#define MIN_INTERVAL_MS 100
#define EXPLAIN_NEW SERIES_EXPLAIN ".new"
#define EXPLAIN_TXT SERIES_EXPLAIN

struct watch_args {
	const char *dir;
	uint64_t interval_ms, for_ms, count, dump_every;
	const char *sample_bytes;	/* --sample-bytes, for --sampler */
	const char *stack_bytes;	/* --stack-bytes, for --sampler */
	bool sampler, no_attach;
};

static const char watch_usage[] =
	"watch -o DIR [--interval DUR] [--for DUR | --count K] "
	"[--dump-every K] [--sampler [--sample-bytes SIZE] [--stack-bytes SIZE]] "
	"[--no-attach]";

static int usage(const char *what, const char *arg)
{
	return fail(DIAG_USAGE, "watch: %s '%s' (usage: %s)", what, arg, watch_usage);
}

static int parse_args(int argc, char **argv, struct watch_args *a)
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
			     !strcmp(o, "--stack-bytes");

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
			uint64_t size;

			if (parse_size(v, &size) || !size)
				return usage("not a size (bytes, or with K, M, "
					     "G):", v);
			a->sample_bytes = v;
		} else if (!strcmp(o, "--stack-bytes")) {
			uint64_t size;

			if (parse_size(v, &size) ||
			    !sampler_stack_bytes_ok(size))
				return usage("not one of 4K, 8K, 16K, 32K, 64K:",
					     v);
			a->stack_bytes = v;
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
	if ((a->sample_bytes || a->stack_bytes) && !a->sampler)
		return fail(DIAG_USAGE, "watch: %s goes with --sampler",
			    a->sample_bytes ? "--sample-bytes" : "--stack-bytes");
	if (a->sampler && a->no_attach)
		return fail(DIAG_USAGE, "watch: --sampler attaches, --no-attach does not; give "
			    "one");
	return EXIT_OK;
}

static uint64_t now_ms(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}


/* ---- one tick ------------------------------------------------------------ */

static void set(struct series_tick *t, enum series_col c, int64_t v)
{
	t->v[c] = v;
	t->known |= 1u << c;
}

/* What explain measured into tick @t. */
static void tick_from(const struct explain_run *r, struct series_tick *t)
{
	const struct explain *e = r->e;

	set(t, COL_RSS, (int64_t)e->rss);
	if (e->attached && e->heap_parts) {
		set(t, COL_HEAP_IN_USE, (int64_t)e->part[PART_HEAP_IN_USE]);
		set(t, COL_HEAP_FREE, (int64_t)e->part[PART_HEAP_FREE]);
		set(t, COL_METADATA, (int64_t)e->part[PART_METADATA]);
		set(t, COL_HEAP, (int64_t)(e->part[PART_HEAP_IN_USE] +
					   e->part[PART_HEAP_FREE] +
					   e->part[PART_METADATA]));
	} else {
		set(t, COL_HEAP, (int64_t)e->heap);
	}
	set(t, COL_STACKS, (int64_t)e->part[PART_STACKS]);
	set(t, COL_ANON_OTHER, (int64_t)e->part[PART_ANON_OTHER]);
	set(t, COL_FILE, (int64_t)e->part[PART_FILE]);
	set(t, COL_SHMEM, (int64_t)e->part[PART_SHMEM]);
	set(t, COL_UNACCOUNTED, e->unaccounted);
	set(t, COL_SWAP, (int64_t)e->swap);
	set(t, COL_THREADS, (int64_t)e->threads);
}

struct watch {
	const struct options *opt;
	struct watch_args a;
	int fd, dir_fd;
	uint64_t t0;			/* CLOCK_MONOTONIC, ms */
	unsigned int ticks, dumps;
	unsigned int failed;		/* ticks that measured nothing */
	bool dumping;			/* a dump may still work */
	bool tty;
	bool sampler_on;		/* --sampler switched it on */
	double *t_s, *rss;		/* for the progress line's slope */
	size_t cap_t, cap_r;
	char note[256];			/* of the tick under way */
};

/*
 * The tick's whole `explain` answer as DIR/explain.txt, for the HTML
 * report's page: a new file renamed over the last, so that a reader
 * never sees half of one.  Failing costs that page its text only.
 */
static void keep_explain(struct watch *w, const struct explain_run *r)
{
	char *text = explain_text(&r->t, &r->in, r->e, &r->others);
	int fd;

	if (!text)
		return;
	/* made new, never opened: DIR may be shared, and a FIFO or a
	 * hard link put there must not be written through */
	unlinkat(w->dir_fd, EXPLAIN_NEW, 0);
	fd = openat(w->dir_fd, EXPLAIN_NEW, O_WRONLY | O_CREAT | O_EXCL |
					       O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd >= 0) {
		if (write_in_full(fd, text, strlen(text)) | close(fd) ||
		    renameat(w->dir_fd, EXPLAIN_NEW, w->dir_fd, EXPLAIN_TXT))
			unlinkat(w->dir_fd, EXPLAIN_NEW, 0);
	}
	free(text);
}

/*
 * Measure once into @t: with the allocator's account unless
 * --no-attach, or when that failed (then /proc only, and the failure is
 * in w->note).  EXIT_OK, EXIT_NO_PROCESS (gone), EXIT_INTERRUPTED, or
 * another exit code of a failure that /proc also gave.
 */
static int measure(struct watch *w, struct series_tick *t, char *comm,
		   size_t comm_size, const char **allocator)
{
	struct explain_run *r = calloc(1, sizeof(*r));
	int ret;

	if (!r)
		return fail(DIAG_FAILED, "watch: %s", strerror(ENOMEM));
	ret = explain_measure(w->opt, "watch", w->a.no_attach, r);
	if (ret && ret != EXIT_NO_PROCESS && ret != EXIT_INTERRUPTED &&
	    !w->a.no_attach) {
		snprintf(w->note, sizeof(w->note), "the allocator's numbers "
			 "could not be read (exit %d): /proc only", ret);
		explain_run_free(r);
		ret = explain_measure(w->opt, "watch", true, r);
	}
	if (!ret) {
		tick_from(r, t);
		keep_explain(w, r);
		if (comm)
			snprintf(comm, comm_size, "%s", r->t.pi.comm);
		if (allocator && r->t.a)
			*allocator = alloc_kind_name(r->t.a->kind);
	}
	explain_run_free(r);
	free(r);
	return ret;
}

/* Every --dump-every ticks: dump-NNNN.heap, its name into @t; a failure
 * is a note, and one that says the process cannot give a profile stops
 * the dumps. */
static void maybe_dump(struct watch *w, struct series_tick *t)
{
	char path[PATH_MAX], name[SERIES_NAME_MAX];
	const char *args[] = { "dump", "-o", path, NULL };
	int rc;

	/* the first tick has one: the growth is measured from there */
	if (!w->dumping || !w->a.dump_every ||
	    (w->ticks - 1) % w->a.dump_every)
		return;
	snprintf(name, sizeof(name), "dump-%04u.heap", w->dumps + 1);
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", w->a.dir, name) >=
	    sizeof(path))
		return;
	rc = watch_run_self(w->opt, args);
	if (rc == EXIT_OK) {
		snprintf(t->dump, sizeof(t->dump), "%s", name);
		w->dumps++;
		return;
	}
	if (rc == EXIT_NO_ALLOCATOR || rc == EXIT_USAGE ||
	    rc == EXIT_PERMISSION) {
		w->dumping = false;
		watch_append(w->fd, "# note\t%" PRIu64 "\tno heap profile from "
			   "this process (dump: exit %d); the series goes "
			   "on without dumps\n", t->t_ms, rc);
	} else {
		watch_append(w->fd, "# note\t%" PRIu64 "\tdump: exit %d\n",
			   t->t_ms, rc);
	}
}

/* The progress line on a terminal: ticks, RSS now, its slope. */
static void progress(struct watch *w, const struct series_tick *t)
{
	char rss[32], slope[32];
	double per_hour;

	if (!w->tty)
		return;
	if (array_grow((void **)&w->t_s, &w->cap_t, w->ticks,
		       sizeof(double)) ||
	    array_grow((void **)&w->rss, &w->cap_r, w->ticks, sizeof(double)))
		return;
	w->t_s[w->ticks - 1] = (double)t->t_ms / 1000.0;
	w->rss[w->ticks - 1] = (double)t->v[COL_RSS];
	human_bytes((uint64_t)t->v[COL_RSS], rss, sizeof(rss));
	per_hour = trend_slope(w->t_s, w->rss, w->ticks) * 3600.0;
	human_bytes((uint64_t)(per_hour < 0 ? -per_hour : per_hour), slope,
		    sizeof(slope));
	fprintf(stderr, "\r\033[Kwatch %d: %u tick%s, %u dump%s, RSS %s",
		(int)w->opt->pid, w->ticks, w->ticks == 1 ? "" : "s", w->dumps,
		w->dumps == 1 ? "" : "s", rss);
	if (w->ticks > 1)
		fprintf(stderr, ", %s%s/h", per_hour < 0 ? "-" : "+", slope);
	fflush(stderr);
}

/* "stopped by SIGINT": the series says which signal ended it. */
static const char *stopped_by(char *buf, size_t size)
{
	const char *name = sigabbrev_np(target_signal());

	snprintf(buf, size, "stopped by %s%s", name ? "SIG" : "a signal",
		 name ? name : "");
	return buf;
}

/*
 * Until @deadline (CLOCK_MONOTONIC, ms) or a signal: with the signals
 * blocked but while waiting, so that one arriving just before the wait
 * is not slept through.
 */
static void wait_until(uint64_t deadline)
{
	sigset_t block, old;

	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigprocmask(SIG_BLOCK, &block, &old);
	while (!target_interrupted()) {
		uint64_t now = now_ms(CLOCK_MONOTONIC);
		struct timespec ts;

		if (now >= deadline)
			break;
		ts.tv_sec = (time_t)((deadline - now) / 1000);
		ts.tv_nsec = (long)((deadline - now) % 1000) * 1000000;
		ppoll(NULL, 0, &ts, &old);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/* The sampler on (with the --sample-bytes and --stack-bytes of @a,
 * where given) or off, as a child: its exit status. */
static int sampler_switch(const struct options *opt, bool on,
			  const struct watch_args *a)
{
	const char *args_on[8] = { "prof", "on", "--sampler" };
	const char *args_off[] = { "prof", "off", NULL };
	size_t n = 3;

	if (a->sample_bytes) {
		args_on[n++] = "--sample-bytes";
		args_on[n++] = a->sample_bytes;
	}
	if (a->stack_bytes) {
		args_on[n++] = "--stack-bytes";
		args_on[n++] = a->stack_bytes;
	}
	args_on[n] = NULL;
	return watch_run_self(opt, on ? args_on : args_off);
}

static void write_header(struct watch *w, const char *comm,
			 const char *allocator)
{
	struct series s = { .pid = (int)w->opt->pid };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return;
	snprintf(s.command, sizeof(s.command), "%s", comm);
	snprintf(s.allocator, sizeof(s.allocator), "%s",
		 allocator ? allocator : "");
	s.started_ms = now_ms(CLOCK_REALTIME);
	s.interval_ms = w->a.interval_ms;
	if (proc_memory_limit(w->opt->pid, &s.limit))
		s.limit = 0;
	series_write_header(f, &s);
	fclose(f);
	if (buf)
		write_in_full(w->fd, buf, len);
	free(buf);
}

/* Why the watch ends after the tick just taken (or failed), or NULL
 * for on. */
static const char *ended(const struct watch *w)
{
	if (w->a.count && w->ticks + w->failed >= w->a.count)
		return "count reached";
	if (w->a.for_ms &&
	    now_ms(CLOCK_MONOTONIC) - w->t0 + w->a.interval_ms > w->a.for_ms)
		return "duration reached";
	return NULL;
}

int cmd_watch(const struct options *opt, int argc, char **argv)
{
	struct watch w = { .opt = opt, .fd = -1, .dir_fd = -1 };
	const char *end = NULL, *allocator = NULL;
	char end_buf[64];
	char comm[64] = "?";
	uint64_t next;
	int ret, rc;

	ret = parse_args(argc, argv, &w.a);
	if (ret)
		return ret;
	w.tty = !opt->quiet && isatty(STDERR_FILENO);
	w.dumping = !w.a.no_attach;
	target_catch_signals();
	w.fd = watch_open_series(w.a.dir, &w.dir_fd);
	if (w.fd < 0)
		return diag_exit(DIAG_FAILED);
	if (w.a.sampler) {
		rc = sampler_switch(opt, true, &w.a);
		if (rc) {
			error("watch %d: prof on --sampler failed (exit %d)",
			      (int)opt->pid, rc);
			ret = rc > 0 ? rc : diag_exit(DIAG_FAILED);
			goto out;
		}
		w.sampler_on = true;
	}
	w.t0 = now_ms(CLOCK_MONOTONIC);
	for (next = w.t0;; next += w.a.interval_ms) {
		struct series_tick t = { 0 };
		char line[SERIES_LINE_MAX];
		size_t len;

		wait_until(next);
		if (target_interrupted()) {
			end = stopped_by(end_buf, sizeof(end_buf));
			break;
		}
		t.t_ms = now_ms(CLOCK_MONOTONIC) - w.t0;
		/* a tick late by more than an interval (a slow call, a
		 * suspended memsnap) skips the ones it missed */
		if (now_ms(CLOCK_MONOTONIC) > next + w.a.interval_ms)
			next = now_ms(CLOCK_MONOTONIC);
		w.note[0] = '\0';
		rc = measure(&w, &t, w.ticks ? NULL : comm, sizeof(comm),
			     w.ticks ? NULL : &allocator);
		if (rc == EXIT_NO_PROCESS) {
			if (!w.ticks) {
				ret = rc;	/* nothing to watch */
				goto out;
			}
			end = "target exited";
			break;
		}
		if (rc == EXIT_INTERRUPTED) {
			end = stopped_by(end_buf, sizeof(end_buf));
			break;
		}
		if (rc) {
			if (!w.ticks) {
				ret = rc;
				goto out;
			}
			watch_append(w.fd, "# note\t%" PRIu64 "\ttick failed "
				   "(exit %d)\n", t.t_ms, rc);
			/* a failed tick counts towards --count and --for:
			 * a watch whose every tick fails still ends */
			w.failed++;
			end = ended(&w);
			if (end)
				break;
			continue;
		}
		if (!w.ticks)
			write_header(&w, comm, allocator);
		if (w.note[0])
			watch_append(w.fd, "# note\t%" PRIu64 "\t%s\n", t.t_ms,
				   w.note);
		w.ticks++;
		maybe_dump(&w, &t);
		len = series_format_tick(&t, line, sizeof(line));
		if (!len || (rc = write_in_full(w.fd, line, len))) {
			error("watch %d: writing '%s/series.tsv': %s",
			      (int)opt->pid, w.a.dir,
			      strerror(len ? -rc : EOVERFLOW));
			end = "the series could not be written";
			ret = diag_exit(DIAG_FAILED);
			break;
		}
		progress(&w, &t);
		end = ended(&w);
		if (end)
			break;
	}
	if (w.tty)
		fputs("\r\033[K", stderr);
	watch_append(w.fd, "# end\t%" PRIu64 "\t%s\n",
		   now_ms(CLOCK_MONOTONIC) - w.t0, end);
	printf("watch %d: %u tick%s, %u dump%s, %s: memsnap report %s\n",
	       (int)opt->pid, w.ticks, w.ticks == 1 ? "" : "s", w.dumps,
	       w.dumps == 1 ? "" : "s", end, w.a.dir);
out:
	if (w.fd >= 0 && !w.ticks) {
		/* nothing measured: no series, DIR free for another try */
		unlinkat(w.dir_fd, "series.tsv", 0);
	}
	if (w.sampler_on && strcmp(end ? end : "", "target exited")) {
		/* switched off even after a signal: the child is told
		 * nothing of it (the flag is ours) */
		rc = sampler_switch(opt, false, &w.a);
		if (rc)
			error("watch %d: prof off failed (exit %d); `memsnap "
			      "--pid %d prof off` switches the sampler off",
			      (int)opt->pid, rc, (int)opt->pid);
	}
	if (w.fd >= 0)
		close(w.fd);
	if (w.dir_fd >= 0)
		close(w.dir_fd);
	free(w.t_s);
	free(w.rss);
	return ret;
}
