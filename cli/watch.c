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
 * The process is pinned once, as the watch starts (proc/pin.h): every
 * tick, dump and switch of the sampler acts on that process, or the
 * watch ends with "target exited" when it has gone; a pid taken by
 * another process since is never looked at, let alone called into.
 * Each step is a session of its own in this process, as the command it
 * stands for would make it (explain_measure(), dump_take(),
 * sampler_switch_on() and _off()): a dump that fails is a note in the
 * series, not the end of the watch.  The watch ends at --for, --count,
 * SIGINT, SIGTERM or SIGHUP (after the step under way, whose thread is
 * restored first; exit status 9), or when the process exits; the
 * series says which.
 */
#include "cli/cli.h"

#include "cli/dump.h"
#include "cli/explain.h"
#include "cli/sampling.h"
#include "cli/session.h"
#include "cli/watch.h"
#include "common/fsio.h"
#include "common/util.h"
#include "proc/cgroup.h"
#include "proc/pin.h"
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

static uint64_t now_ms(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}


/* ---- one tick ------------------------------------------------------------ */

struct watch {
	const struct options *opt;	/* with the pin: every step's */
	struct watch_args a;
	int fd, dir_fd;
	uint64_t t0;			/* CLOCK_MONOTONIC, ms */
	unsigned int ticks, dumps;
	unsigned int tried;		/* dumps tried: the next one's number */
	unsigned int failed;		/* ticks that measured nothing */
	bool dumping;			/* a dump may still work */
	bool tty;
	bool sampler_on;		/* --sampler switched it on */
	bool sampler_found;		/* it was on at the first tick */
	uint64_t sampler_image;		/* where, for its lease (0: none) */
	bool lease_lost;		/* said once: not renewed */
	double *t_s, *rss;		/* for the progress line's slope */
	size_t cap_t, cap_r;
	char note[256];			/* of the tick under way */
};

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
		return fail_errno(DIAG_FAILED, ENOMEM, "watch");
	ret = explain_measure(w->opt, "watch", w->a.no_attach, r);
	if (ret && ret != EXIT_NO_PROCESS && ret != EXIT_INTERRUPTED &&
	    !w->a.no_attach) {
		snprintf(w->note, sizeof(w->note), "the allocator's numbers "
			 "could not be read (exit %d): /proc only", ret);
		explain_run_free(r);
		ret = explain_measure(w->opt, "watch", true, r);
	}
	if (!ret && r->not_read[0] && !w->ticks) {
		/* nothing to call: /proc at every tick, and no dump to take */
		snprintf(w->note, sizeof(w->note), "allocator not read: %s: "
			 "/proc only", r->not_read);
		w->dumping = w->dumping && w->a.sampler;
	}
	if (!ret) {
		watch_tick_from(r, t);
		watch_keep_explain(w->dir_fd, r);
		if (comm)
			snprintf(comm, comm_size, "%s", r->t.pi.comm);
		if (comm)	/* on before the watch: its stacks count too */
			w->sampler_found = !r->t.sampler_rc &&
					   r->t.sampler.active;
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
static int maybe_dump(struct watch *w, struct series_tick *t)
{
	struct options opt = *w->opt;
	char name[SERIES_NAME_MAX];
	struct dump_to to = { .dir_fd = w->dir_fd, .name = name };
	struct dump_done *dd;
	int rc;

	/* the first tick has one: the growth is measured from there */
	if (!w->dumping || !w->a.dump_every ||
	    (w->ticks - 1) % w->a.dump_every)
		return EXIT_OK;
	dd = malloc(sizeof(*dd));
	if (!dd)
		return EXIT_OK;
	/* a name of its own even after one that failed: what made it fail
	 * may be there still */
	snprintf(name, sizeof(name), "dump-%04u.heap", ++w->tried);
	/* what a dump warns of, it warns of at every dump: said once */
	opt.quiet |= w->dumps > 0;
	rc = dump_take(&opt, &to, dd);
	free(dd);
	if (rc == EXIT_OK) {
		snprintf(t->dump, sizeof(t->dump), "%s", name);
		w->dumps++;
		return EXIT_OK;
	}
	if (rc == EXIT_NO_PROCESS || rc == EXIT_INTERRUPTED)
		return rc;
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
	return EXIT_OK;
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

/*
 * Renew the lease of the sampler the watch switched on: nothing is
 * stopped (sampler_renew()).  One that cannot be renewed is said once,
 * in the series: the sampler was switched off or on again by someone
 * else, and is theirs now.
 */
static void renew(struct watch *w, uint64_t t_ms)
{
	int rc;

	if (!w->sampler_image || w->lease_lost)
		return;
	rc = sampler_renew(w->opt->pin, w->sampler_image, watch_lease_of(&w->a));
	if (!rc || rc == -ESRCH)
		return;
	w->lease_lost = true;
	watch_append(w->fd, "# note\t%" PRIu64 "\tthe sampler's lease could "
		     "not be renewed: %s\n", t_ms,
		     rc == -ENOENT ? "switched off, or on again by another "
				     "prof on" : strerror(-rc));
}

/*
 * The sampler on (with the --sample-bytes and --stack-bytes of @a,
 * where given) or off, in the pinned process, as `prof on --sampler`
 * and `prof off` would: the exit code.  Off when it is no longer on
 * (switched off by someone else meanwhile) is not an error.
 */
static int sampler_switch(const struct options *opt, bool on,
			  const struct watch_args *a, uint64_t *image)
{
	struct sampler_start r;
	unsigned int slots, entries;
	struct target t;
	int ret = target_view(opt, "watch", &t);

	if (ret)
		goto out;
	if (on)
		ret = sampler_switch_on(opt, &t, a->sample_bytes,
					a->stack_bytes, watch_lease_of(a), &r);
	if (on && !ret) {
		*image = r.leased ? r.image : 0;
		if (!r.leased)
			warning(opt, "watch %d: the sampler has no lease (its "
				"seccomp filter forbids clock_gettime): a "
				"watch killed before its end leaves it "
				"sampling until `memsnap --pid %d prof off`",
				(int)opt->pid, (int)opt->pid);
	}
	else if (!t.sampler_rc && (t.sampler.active || t.sampler.entries))
		ret = sampler_switch_off(opt, &t, &slots, &entries);
out:
	target_free(&t);
	return ret;
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
	/* a report of a watch killed before it switched the sampler off
	 * says so, with the command that does; one that found it on says
	 * whose anonymous memory the copies of its stacks are */
	s.sampler_on = w->sampler_on;
	s.sampler_found = w->sampler_found && !w->sampler_on;
	/* read by its pid: the pinned process's if it is still there */
	if (proc_memory_limit(w->opt->pid, &s.limit) ||
	    proc_pin_check(w->opt->pin))
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

/*
 * One tick at @t->t_ms: measured, a dump where one is due, the line
 * appended.  EXIT_OK, or what ends the watch with *@end saying why:
 * EXIT_NO_PROCESS (it exited: not an error once a tick was taken),
 * EXIT_INTERRUPTED, or another exit code.
 */
static int tick(struct watch *w, struct series_tick *t, char *comm,
		size_t comm_size, const char **end)
{
	const char *allocator = NULL;
	char line[SERIES_LINE_MAX];
	size_t len;
	int rc;

	w->note[0] = '\0';
	if (w->tty && w->ticks)	/* what the tick says starts a line */
		fputs("\r\033[K", stderr);
	rc = measure(w, t, w->ticks ? NULL : comm, comm_size,
		     w->ticks ? NULL : &allocator);
	if (rc == EXIT_NO_PROCESS) {
		*end = "target exited";
		return w->ticks ? EXIT_OK : rc;	/* nothing to watch */
	}
	if (rc && rc != EXIT_INTERRUPTED) {
		if (!w->ticks)
			return rc;
		watch_append(w->fd, "# note\t%" PRIu64 "\ttick failed "
			   "(exit %d)\n", t->t_ms, rc);
		/* a failed tick counts towards --count and --for: a watch
		 * whose every tick fails still ends */
		w->failed++;
		*end = ended(w);
		return EXIT_OK;
	}
	if (rc)
		return rc;
	if (!w->ticks)
		write_header(w, comm, allocator);
	if (w->note[0])
		watch_append(w->fd, "# note\t%" PRIu64 "\t%s\n", t->t_ms,
			   w->note);
	w->ticks++;
	renew(w, t->t_ms);
	rc = maybe_dump(w, t);
	if (rc == EXIT_NO_PROCESS) {
		/* gone during the dump: the tick stands without one */
		*end = "target exited";
		rc = EXIT_OK;
	}
	len = series_format_tick(t, line, sizeof(line));
	if (!len || write_in_full(w->fd, line, len)) {
		*end = "the series could not be written";
		return fail(DIAG_FAILED, "watch %d: writing '%s/series.tsv': %s",
			    (int)w->opt->pid, w->a.dir,
			    len ? strerror(errno) : strerror(EOVERFLOW));
	}
	progress(w, t);
	if (!*end)
		*end = ended(w);
	return rc;
}

/* Ticks on a grid of the interval until the watch ends: why, in
 * *@end; the exit code. */
static int run(struct watch *w, const char **end, char *buf, size_t size)
{
	char comm[64] = "?";
	uint64_t next;
	int rc;

	w->t0 = now_ms(CLOCK_MONOTONIC);
	for (next = w->t0; !*end; next += w->a.interval_ms) {
		struct series_tick t = { 0 };

		wait_until(next);
		if (target_interrupted())
			break;
		t.t_ms = now_ms(CLOCK_MONOTONIC) - w->t0;
		/* a tick late by more than an interval (a slow call, a
		 * suspended memsnap) skips the ones it missed */
		if (now_ms(CLOCK_MONOTONIC) > next + w->a.interval_ms)
			next = now_ms(CLOCK_MONOTONIC);
		rc = tick(w, &t, comm, sizeof(comm), end);
		if (rc == EXIT_INTERRUPTED || target_interrupted())
			break;
		if (rc)
			return rc;
	}
	if (target_interrupted()) {
		*end = stopped_by(buf, size);
		return diag_exit(DIAG_INTERRUPTED);
	}
	return EXIT_OK;
}

int cmd_watch(const struct options *opt, int argc, char **argv)
{
	struct watch w = { .fd = -1, .dir_fd = -1 };
	struct proc_pin pin = PROC_PIN_NONE;
	struct options o = *opt;
	const char *end = NULL;
	char end_buf[64];
	int ret, rc;

	ret = watch_parse_args(argc, argv, &w.a);
	if (ret)
		return ret;
	if (!opt->pid)
		return fail(DIAG_USAGE, "watch: which process? give --pid PID");
	/* the process now, and no other, for the whole watch */
	rc = proc_pin_open(opt->pid, &pin);
	if (rc)
		return report_proc_error(opt->pid, "stat", rc);
	o.pin = &pin;
	w.opt = &o;
	w.tty = !opt->quiet && isatty(STDERR_FILENO);
	w.dumping = !w.a.no_attach;
	target_catch_signals();
	w.fd = watch_open_series(w.a.dir, &w.dir_fd);
	if (w.fd < 0) {
		ret = diag_exit(DIAG_FAILED);
		goto out;
	}
	if (w.a.sampler) {
		ret = sampler_switch(&o, true, &w.a, &w.sampler_image);
		if (ret) {
			error("watch %d: prof on --sampler failed (exit %d)",
			      (int)opt->pid, ret);
			goto out;
		}
		w.sampler_on = true;
	}
	ret = run(&w, &end, end_buf, sizeof(end_buf));
	if (w.tty)
		fputs("\r\033[K", stderr);
	if (w.ticks) {
		watch_append(w.fd, "# end\t%" PRIu64 "\t%s\n",
			   now_ms(CLOCK_MONOTONIC) - w.t0, end ? end : "?");
		printf("watch %d: %u tick%s, %u dump%s, %s: memsnap report %s\n",
		       (int)opt->pid, w.ticks, w.ticks == 1 ? "" : "s",
		       w.dumps, w.dumps == 1 ? "" : "s", end ? end : "?",
		       w.a.dir);
	}
out:
	if (w.fd >= 0 && !w.ticks) {
		/* nothing measured: no series, DIR free for another try */
		unlinkat(w.dir_fd, "series.tsv", 0);
	}
	if (w.sampler_on && !proc_pin_check(&pin)) {
		/* switched off even after a signal, which the watch has
		 * acted on (a second one cuts the switch short, its thread
		 * restored) */
		target_signal_clear();
		rc = sampler_switch(&o, false, &w.a, NULL);
		if (rc)
			error("watch %d: prof off failed (exit %d); `memsnap "
			      "--pid %d prof off` switches the sampler off",
			      (int)opt->pid, rc, (int)opt->pid);
		else if (w.fd >= 0)
			watch_append(w.fd, "# sampler\toff\n");
	}
	if (w.fd >= 0)
		close(w.fd);
	if (w.dir_fd >= 0)
		close(w.dir_fd);
	proc_pin_close(&pin);
	free(w.t_s);
	free(w.rss);
	return ret;
}
