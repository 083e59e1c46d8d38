/*
 * Shared by the commands that call into an allocator (dump, prof, info):
 * load, pick, attach, detach (their errors become messages in
 * cli/message.c).
 */
#include "cli/session.h"

#include "proc/diagnose.h"
#include "agent/dumpdir.h"
#include "cli/progress.h"

#include "proc/procfs.h"
#include "common/json.h"
#include "proc/triage.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile int interrupted;

static void on_signal(int sig)
{
	interrupted = sig;
}

/* SIGINT/SIGTERM/SIGHUP while a thread is borrowed: the engine finishes
 * or restores, then the command exits with EXIT_INTERRUPTED. */
void target_catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	size_t i;

	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

bool target_interrupted(void)
{
	return interrupted != 0;
}

int target_signal(void)
{
	return interrupted;
}

void target_signal_clear(void)
{
	interrupted = 0;
}

static const char *cap_verb(unsigned int cap)
{
	switch (cap) {
	case ALLOC_CAN_DUMP:
		return "write a heap profile";
	case ALLOC_CAN_PROF:
		return "control heap profiling";
	case ALLOC_CAN_STATE:
		return "report its state";
	case ALLOC_CAN_STATS:
		return "report statistics";
	case ALLOC_CAN_TRIM:
		return "give memory back";
	default:
		return "do that";
	}
}

int target_pick(const struct options *opt, const char *cmd,
		unsigned int cap, struct target *t)
{
	const struct detection *d = &t->det;
	const struct allocator *srv = detection_serving(d), *only = NULL;
	size_t i, able = 0;

	if (!d->n && d->have_malloc && d->malloc_musl)
		return fail(DIAG_UNSUPPORTED, "%s %d: musl malloc: no control functions (`memsnap call` works)",
			    cmd, (int)t->pi.pid);
	if (!d->n)
		return fail(DIAG_UNSUPPORTED, "%s %d: no allocator control functions found (see memsnap --pid %d info)",
			    cmd, (int)t->pi.pid, (int)t->pi.pid);
	if (opt->allocator) {
		for (i = 0; i < d->n; i++)
			if (!strcmp(alloc_kind_name(d->v[i].kind),
				    opt->allocator))
				break;
		if (i == d->n)
			return fail(DIAG_UNSUPPORTED, "%s %d: no %s in this process (see memsnap --pid %d info)",
				    cmd, (int)t->pi.pid, opt->allocator,
				    (int)t->pi.pid);
		t->a = &d->v[i];
	} else {
		for (i = 0; i < d->n; i++)
			if (!cap || (alloc_caps(d->v[i].kind) & cap)) {
				able++;
				only = &d->v[i];
			}
		if (srv && (!cap || (alloc_caps(srv->kind) & cap)))
			t->a = srv;
		else if (able == 1)
			t->a = only;
		else
			t->a = srv ? srv : &d->v[0];
	}
	if (cap && !(alloc_caps(t->a->kind) & cap)) {
		char can[64];

		alloc_caps_text(alloc_caps(t->a->kind), can, sizeof(can));
		return fail(DIAG_UNSUPPORTED, "%s %d: %s%s cannot %s; with it memsnap can: %s%s", cmd,
			    (int)t->pi.pid, alloc_kind_title(t->a->kind),
			    t->a->serves_malloc ? " (serving malloc)" : "",
			    cap_verb(cap), can,
			    cap & (ALLOC_CAN_DUMP | ALLOC_CAN_PROF)
			    ? " (heap profiles need jemalloc or the full gperftools tcmalloc, or memsnap's sampler: prof on --sampler)"
			    : "");
	}
	return EXIT_OK;
}

int refuse_foreign_abi(const struct procinfo *pi)
{
	const char *what = procinfo_foreign_abi(pi->elf_class, pi->elf_machine);

	if (!what)
		return EXIT_OK;
	return fail(DIAG_UNSUPPORTED, "pid %d (%s) is %s; memsnap reaches 64-bit processes only",
		    (int)pi->pid, pi->comm, what);
}

/* "watch 4242: the process exited (its pid may now belong to
 * another)": EXIT_NO_PROCESS. */
static int pin_gone(const char *cmd, pid_t pid)
{
	return fail(DIAG_NO_PROCESS, "%s %d: %s", cmd, (int)pid, PROC_PIN_GONE);
}

int target_view(const struct options *opt, const char *cmd,
		struct target *t)
{
	struct object_source src = { .pid = opt->pid };
	char why[512];
	int rc;

	memset(t, 0, sizeof(*t));
	t->pin = PROC_PIN_NONE;
	if (!opt->pid)
		return fail(DIAG_USAGE, "%s: which process? give --pid PID", cmd);
	/* Pinned first: what is read next is this process's, or it exits
	 * and the checks below and the engine's will see so. */
	rc = opt->pin ? proc_pin_dup(opt->pin, &t->pin)
		      : proc_pin_begin(opt->pid, &t->pin);
	if (rc == -ESRCH && opt->pin)
		return pin_gone(cmd, opt->pid);
	if (rc)
		return report_proc_error(opt->pid, "stat", rc);
	rc = procinfo_read(opt->pid, &t->pi);
	if (rc == -ENOENT && opt->pin)
		return pin_gone(cmd, opt->pid);
	if (rc)
		return report_proc_error(opt->pid, "stat", rc);
	/* the pin's start time is the one just read, or the one the
	 * command pinned, which this process must have */
	if (!opt->pin)
		t->pin.start_time = t->pi.start_time;
	if (t->pi.start_time != t->pin.start_time || proc_pin_check(&t->pin))
		return opt->pin ? pin_gone(cmd, opt->pid)
				: report_proc_error(opt->pid, "stat", -ESRCH);
	if (t->pi.kernel_thread)
		return fail(DIAG_NO_PROCESS, "pid %d (%s) is a kernel thread: it has no allocator",
			    (int)t->pi.pid, t->pi.comm);
	if (t->pi.state == 'Z' || t->pi.state == 'X')
		return fail(DIAG_NO_PROCESS, "pid %d (%s) is a zombie: it has exited and holds no memory",
			    (int)t->pi.pid, t->pi.comm);
	if (refuse_foreign_abi(&t->pi))
		return diag_exit(DIAG_UNSUPPORTED);
	/* said now, not as objects that "could not be read" */
	if (diagnose_caps(&t->pi, why, sizeof(why)))
		return fail(DIAG_PERMISSION, "%s", why);
	rc = maps_load(opt->pid, &t->maps);
	if (rc)
		return report_proc_error(opt->pid, "maps", rc);
	rc = objects_new(t->maps, &src, &t->os);
	if (rc)
		return fail_errno(DIAG_FAILED, rc, "pid %d", (int)opt->pid);
	rc = detect_allocators(t->os, &t->det);
	if (rc)
		return report_proc_error(opt->pid, "auxv", rc);
	t->have_det = true;
	t->sampler_rc = sampler_find(t->pi.pid, t->maps, &t->sampler);
	/* the maps, the objects and the sampler's block were this
	 * process's only if it is still there */
	if (proc_pin_check(&t->pin))
		return opt->pin ? pin_gone(cmd, opt->pid)
				: report_proc_error(opt->pid, "maps", -ESRCH);
	return EXIT_OK;
}

int target_load(const struct options *opt, const char *cmd,
		unsigned int cap, struct target *t)
{
	int rc = target_view(opt, cmd, t);

	return rc ? rc : target_pick(opt, cmd, cap, t);
}

/* Has the main thread of @pid seccomp filters (or is that unknown)?
 * The others normally share them (TSYNC, or set before they started). */
static bool seccomp_filtered(pid_t pid)
{
	struct thread_status *st = malloc(sizeof(*st));
	bool filtered = !st || thread_status_read(pid, pid, st) ||
			st->seccomp != 0;

	free(st);
	return filtered;
}

int target_dumpdir(const struct target *t, const char *cmd,
		   enum dumpdir_need need, struct dumpdir **d)
{
	struct diag err;

	*d = NULL;
	/* A process under seccomp filters may refuse the memfd: its agent
	 * is made now rather than while its thread is held. */
	if (need == DUMPDIR_DEFERRED && seccomp_filtered(t->pi.pid))
		need = DUMPDIR_NEEDED;
	if (!(need == DUMPDIR_DEFERRED
		      ? dumpdir_defer(&t->pi, t->pin.pidfd, d, &err)
		      : dumpdir_create(&t->pi, t->pin.pidfd, d, &err)))
		return EXIT_OK;
	*d = NULL;
	if (err.kind != DIAG_NO_PROCESS && need == DUMPDIR_OPTIONAL)
		return EXIT_OK;
	return fail(err.kind, "%s %d: %s", cmd, (int)t->pi.pid, err.what);
}

bool target_has_thread(const struct target *t, pid_t tid)
{
	char task[32];
	int fd;

	/* Not the engine's "no such process": the user's thread. */
	snprintf(task, sizeof(task), "task/%d", (int)tid);
	fd = proc_open(t->pi.pid, task, O_RDONLY | O_DIRECTORY);
	if (fd >= 0)
		close(fd);
	return fd >= 0 || fd == -EACCES;
}

/* target_open_session() fails with @rc, which means @kind, saying what
 * happened in one line.  Returns @rc. */
static int open_failed(struct target *t, int rc, enum diag_kind kind,
		       const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int open_failed(struct target *t, int rc, enum diag_kind kind,
		       const char *fmt, ...)
{
	va_list ap;

	t->open_diag.hint[0] = '\0';
	va_start(ap, fmt);
	diag_vset(&t->open_diag, kind, fmt, ap);
	va_end(ap);
	t->open_rc = rc;
	return rc;
}

int target_open_session(const struct options *opt, struct target *t)
{
	struct alloc_fence *extra;
	int rc;

	target_catch_signals();
	t->iopts = (struct inject_opts){
		.tid = opt->tid,
		.timeout_ms = opt->timeout_ms,
		.interrupted = &interrupted,
		.why = t->why,
		.why_size = sizeof(t->why),
		.diag = &t->open_diag,
		.start_time = t->pi.start_time,
		.pidfd = t->pin.pidfd,
		.pi = &t->pi,
		.maps = t->maps,
	};
	t->why[0] = '\0';
	t->open_rc = 0;
	if (opt->tid && !target_has_thread(t, opt->tid))
		return open_failed(t, -ESRCH, DIAG_NO_PROCESS,
				   "thread %d is not a thread of pid %d",
				   (int)opt->tid, (int)t->pi.pid);
	/* The engine passes over such a thread on its own (thread.c). */
	if (opt->tid && t->pi.threads > 1 &&
	    triage_has_children(t->pi.pid, opt->tid))
		warning(opt, "thread %d has child processes: while it is "
			"borrowed, a child's exit can make another thread's "
			"epoll_wait or sigwaitinfo fail with EINTR",
			(int)opt->tid);
	progress_set("waiting for a thread of pid %d that is safe to borrow",
		     (int)t->pi.pid);
	/* a thread inside memsnap's own sampler is not borrowed either */
	extra = calloc(1, sizeof(*extra));
	if (!extra)
		return open_failed(t, -ENOMEM, DIAG_FAILED, "%s",
				   strerror(ENOMEM));
	sampler_fence(&t->sampler, extra);
	t->open_diag = (struct diag){ .kind = DIAG_FAILED };
	rc = alloc_open(t->pi.pid, t->os, &t->det, &t->iopts, extra, &t->s);
	free(extra);
	if (rc) {
		progress_clear();
		t->s = NULL;
		if (!t->open_diag.what[0])	/* not from the engine */
			open_failed(t, rc, diag_kind_of(rc), "%s",
				    strerror(-rc));
		t->open_rc = rc;
		return rc;
	}
	t->tid = alloc_tid(t->s);
	progress_set("calling into %s in pid %d, thread %d",
		     t->a ? alloc_kind_title(t->a->kind) : "the process",
		     (int)t->pi.pid, (int)t->tid);
	return 0;
}

int target_attach(const struct options *opt, const char *cmd,
		  struct target *t)
{
	int rc = target_open_session(opt, t);

	return rc ? target_error(t, cmd, rc) : EXIT_OK;
}

void target_json_begin(const struct target *t, struct json *j)
{
	json_init(j, stdout);
	json_object_begin(j, NULL);
	json_u64(j, "pid", (uint64_t)t->pi.pid);
	json_u64(j, "tid", (uint64_t)t->tid);
	json_string(j, "allocator",
		    t->a ? alloc_kind_name(t->a->kind) : "sampler");
}

void target_print_timings(const struct target *t, pid_t tid,
			  const struct inject_timings *tm)
{
	uint64_t total = tm->seize_us + tm->check_us + tm->save_us +
			 tm->call_us + tm->restore_us + tm->detach_us;

	fprintf(stderr,
		"memsnap: timings: pid %d tid %d stopped %" PRIu64
		" us: seize %" PRIu64 ", check %" PRIu64 ", save %" PRIu64
		", call %" PRIu64 ", restore %" PRIu64 ", detach %" PRIu64
		" (%u ptrace stops); %u of %lu threads stopped\n",
		(int)t->pi.pid, (int)tid, total, tm->seize_us, tm->check_us,
		tm->save_us, tm->call_us, tm->restore_us, tm->detach_us,
		tm->stops, tm->threads_stopped, t->pi.threads);
	if (tm->world_threads)
		fprintf(stderr,
			"memsnap: timings: pid %d: %u threads stopped together "
			"for %" PRIu64 " us (entry points patched, %u "
			"stepped out of them)\n",
			(int)t->pi.pid, tm->world_threads, tm->world_us,
			tm->world_stepped);
	if (tm->unwinder)
		fprintf(stderr,
			"memsnap: timings: pid %d: the unwinder's sandbox "
			"started %s; %u pages of the target read for it while "
			"the thread was held%s\n", (int)t->pi.pid,
			tm->unwinder == UNWINDER_BEFORE_STOP
				? "before the stop (a return address into the "
				  "allocator on the stack)"
				: "while the thread was held",
			tm->unwind_pages,
			tm->unwind_warm ? "; the unwind of its stack made "
					  "before the stop held"
					: "");
}

int target_detach(const struct options *opt, const char *cmd,
		  struct target *t)
{
	int rc;

	if (!t->s)
		return EXIT_OK;
	rc = alloc_close(t->s, &t->timings);
	t->s = NULL;
	progress_clear();
	if (opt->timings)
		target_print_timings(t, t->tid, &t->timings);
	if (rc) {
		error_errno(rc, "%s %d: restoring thread %d", cmd, (int)t->pi.pid,
			    (int)t->tid);
		return diag_exit(rc == -ESRCH ? DIAG_NO_PROCESS : DIAG_FAILED);
	}
	return EXIT_OK;
}

void target_free(struct target *t)
{
	if (t->s)
		alloc_close(t->s, NULL);
	if (t->have_det)
		detection_free(&t->det);
	objects_free(t->os);
	maps_free(t->maps);
	proc_pin_close(&t->pin);
	memset(t, 0, sizeof(*t));
	t->pin = PROC_PIN_NONE;
}
