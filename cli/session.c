/*
 * Shared by the commands that call into an allocator (dump, prof, info):
 * load, pick, attach, detach, and the one place where engine and
 * allocator errors become messages and exit codes.
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

int target_view(const struct options *opt, const char *cmd,
		struct target *t)
{
	struct object_source src = { .pid = opt->pid };
	int rc;

	memset(t, 0, sizeof(*t));
	if (!opt->pid)
		return fail(DIAG_USAGE, "%s: which process? give --pid PID", cmd);
	/* Pinned first: what is read next is this process's, or it exits
	 * and the engine will see so.  Before Linux 5.3: the start time. */
	rc = (int)syscall(SYS_pidfd_open, opt->pid, 0);
	if (rc < 0 && errno == ESRCH)
		return report_proc_error(opt->pid, "stat", -ESRCH);
	t->pidfd = rc > 0 ? rc : 0;
	rc = procinfo_read(opt->pid, &t->pi);
	if (rc)
		return report_proc_error(opt->pid, "stat", rc);
	if (t->pi.kernel_thread)
		return fail(DIAG_NO_PROCESS, "pid %d (%s) is a kernel thread: it has no allocator",
			    (int)t->pi.pid, t->pi.comm);
	if (t->pi.state == 'Z' || t->pi.state == 'X')
		return fail(DIAG_NO_PROCESS, "pid %d (%s) is a zombie: it has exited and holds no memory",
			    (int)t->pi.pid, t->pi.comm);
	if (refuse_foreign_abi(&t->pi))
		return diag_exit(DIAG_UNSUPPORTED);
	rc = maps_load(opt->pid, &t->maps);
	if (rc)
		return report_proc_error(opt->pid, "maps", rc);
	rc = objects_new(t->maps, &src, &t->os);
	if (rc)
		return fail(DIAG_FAILED, "pid %d: %s", (int)opt->pid, strerror(-rc));
	rc = detect_allocators(t->os, &t->det);
	if (rc)
		return report_proc_error(opt->pid, "auxv", rc);
	t->have_det = true;
	t->sampler_rc = sampler_find(t->pi.pid, t->maps, &t->sampler);
	return EXIT_OK;
}

int target_load(const struct options *opt, const char *cmd,
		unsigned int cap, struct target *t)
{
	int rc = target_view(opt, cmd, t);

	return rc ? rc : target_pick(opt, cmd, cap, t);
}

int target_dumpdir(const struct target *t, const char *cmd, bool needed,
		   struct dumpdir **d)
{
	char why[1024];
	int rc;

	*d = NULL;
	rc = dumpdir_create(&t->pi, t->pidfd, d, why, sizeof(why));
	if (!rc)
		return EXIT_OK;
	*d = NULL;
	if (rc == -ESRCH || rc == -ESTALE || (rc == -ENOENT && !why[0]))
		return fail(DIAG_NO_PROCESS, "%s %d: %s", cmd, (int)t->pi.pid,
			    why[0] ? why : "the process exited");
	if (!needed)
		return EXIT_OK;
	return fail(DIAG_FAILED, "%s %d: no place the target can write to: %s", cmd,
		    (int)t->pi.pid, why[0] ? why : strerror(-rc));
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
		.start_time = t->pi.start_time,
		.pidfd = t->pidfd,
		.pi = &t->pi,
		.maps = t->maps,
	};
	t->why[0] = '\0';
	if (opt->tid && !target_has_thread(t, opt->tid))
		return -ECHILD;
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
		return -ENOMEM;
	sampler_fence(&t->sampler, extra);
	rc = alloc_open(t->pi.pid, t->os, &t->det, &t->iopts, extra, &t->s);
	free(extra);
	if (rc) {
		progress_clear();
		t->s = NULL;
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
		"; %u of %lu threads stopped\n",
		(int)t->pi.pid, (int)tid, total, tm->seize_us, tm->check_us,
		tm->save_us, tm->call_us, tm->restore_us, tm->detach_us,
		tm->threads_stopped, t->pi.threads);
	if (tm->world_threads)
		fprintf(stderr,
			"memsnap: timings: pid %d: %u threads stopped together "
			"for %" PRIu64 " us (entry points patched, %u "
			"stepped out of them)\n",
			(int)t->pi.pid, tm->world_threads, tm->world_us,
			tm->world_stepped);
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
		error("%s %d: restoring thread %d: %s", cmd, (int)t->pi.pid,
		      (int)t->tid, strerror(-rc));
		return diag_exit(rc == -ESRCH ? DIAG_NO_PROCESS : DIAG_FAILED);
	}
	return EXIT_OK;
}

/* Has the line [@p, @p + @len) come before @p in @text? */
static bool seen_line(const char *text, const char *p, size_t len)
{
	const char *q = text;

	while (q < p) {
		size_t n = strcspn(q, "\n");

		if (n == len && !strncmp(q, p, len))
			return true;
		q += n + (q[n] == '\n');
	}
	return false;
}

/* "name+0xoff (libfoo.so)", "libfoo.so+0xoff", "[memsnap-stub]" or
 * "" for @pc. */
static void describe_pc(const struct target *t, uint64_t pc, char *buf,
			size_t size)
{
	struct symbol sym;
	const char *base = NULL;

	/* first: the page may sit in a hole of an object's range (between
	 * ld.so's 64 KiB-aligned segments on arm64) */
	if (t->s && alloc_pc_in_stub(t->s, pc)) {
		snprintf(buf, size, "[memsnap-stub]");
		return;
	}
	if (!objects_symbolize(t->os, pc, &sym))
		base = path_base(sym.obj->path);
	if (base && sym.name)
		snprintf(buf, size, "%s+0x%" PRIx64 " (%s)", sym.name,
			 sym.offset, base);
	else if (base)
		snprintf(buf, size, "%s+0x%" PRIx64, base, sym.offset);
	else
		buf[0] = '\0';
}

/* Line @p (@n bytes) of the engine's reasons into @buf; one that names
 * an address ("... at 0x7f...") is followed by what is there. */
static void reason_line(const struct target *t, const char *p, size_t n,
			char *buf, size_t size)
{
	const char *at = memmem(p, n, " at 0x", 6);
	char sym[300] = "";

	if (at)
		describe_pc(t, strtoull(at + 4, NULL, 16), sym, sizeof(sym));
	snprintf(buf, size, "%.*s%s%s", (int)n, p, sym[0] ? ": " : "", sym);
}

/* The lines of @text (inject_open's reasons) after the first, which the
 * error line already holds, each once, indented. */
static void print_reasons(const struct target *t, const char *text)
{
	const char *p = text;

	while (*p) {
		size_t n = strcspn(p, "\n");
		char line[600];

		if (p != text && n && !seen_line(text, p, n)) {
			reason_line(t, p, n, line, sizeof(line));
			error("  %s", line);
		}
		p += n + (p[n] == '\n');
	}
}

/* The first line of @text into @buf. */
static void first_line(const struct target *t, const char *text, char *buf,
		       size_t size)
{
	reason_line(t, text, strcspn(text, "\n"), buf, size);
}

void target_diag(const struct target *t, int rc, struct diag *d)
{
	char why[512], line[512];
	const char *detail = t->s ? alloc_detail(t->s) : "";
	size_t size = sizeof(d->what);
	char *buf = d->what;

	d->kind = alloc_error_kind(t->s, rc);
	d->hint[0] = '\0';
	first_line(t, t->why, line, sizeof(line));
	if (!t->s && rc == -EOPNOTSUPP) {
		/* From the attach: a seccomp filter or a shadow stack. */
		snprintf(buf, size, "%s%s",
			 line[0] ? line : "CET shadow stacks are on",
			 "; memsnap cannot call into this process safely");
		return;
	}
	switch (rc) {
	case -EOPNOTSUPP:
	case -EREMOTEIO:
		snprintf(buf, size, "%s",
			 t->s && alloc_why(t->s)[0] ? alloc_why(t->s)
			 : rc == -EOPNOTSUPP	    ? "not supported"
						    : "the allocator refused");
		if (t->s)
			snprintf(d->hint, sizeof(d->hint), "%s",
				 alloc_hint(t->s));
		return;
	case -ESRCH:
	case -ENOENT:
		snprintf(buf, size, "%s",
			 detail[0] ? detail : "the process exited");
		return;
	case -ECHILD:
		/* --thread names no thread of the process */
		d->kind = DIAG_NO_PROCESS;
		snprintf(buf, size, "thread %d is not a thread of pid %d",
			 (int)t->iopts.tid, (int)t->pi.pid);
		return;
	case -EPERM:
	case -EACCES:
		if (diagnose_access(t->pi.pid, true, why, sizeof(why)))
			snprintf(buf, size, "ptrace: %s: %s", strerror(-rc),
				 why);
		else
			snprintf(buf, size, "ptrace: %s%s%s", strerror(-rc),
				 line[0] ? ": " : "", line);
		return;
	case -EBUSY:
		/* attaching: a tracer in the way; after: a patch that could
		 * not be written (a thread inside it, or one that did not
		 * stop) */
		snprintf(buf, size, "%s",
			 line[0]		       ? line
			 : t->s && alloc_why(t->s)[0] ? alloc_why(t->s)
			 : detail[0]		       ? detail
						       : "already traced");
		return;
	case -ETIMEDOUT:
		snprintf(buf, size, "the call did not finish in time: %s",
			 detail[0] ? detail
				   : "it goes on in the target, whose thread restores itself when the call returns");
		return;
	case -EINTR:
		snprintf(buf, size, "interrupted; the target is restored");
		return;
	case -EAGAIN:
		snprintf(buf, size,
			 "the process is stopped (job control); left stopped (`kill -CONT %d` resumes it)",
			 (int)t->pi.pid);
		return;
	case -EDEADLK:
		snprintf(buf, size, "no thread was safe to call from%s%s",
			 line[0] ? ": " : "", line);
		return;
	case -ENOEXEC:
		snprintf(buf, size, "%s", msg_no_syscall_code);
		return;
	case -EFAULT:
		snprintf(buf, size,
			 "the call faulted: %s; thread %d was restored, but what the function changed (an allocator's state) may be inconsistent",
			 detail[0] ? detail : "no detail", (int)t->tid);
		return;
	default:
		snprintf(buf, size, "%s%s%s", strerror(-rc),
			 detail[0] || line[0] ? ": " : "",
			 detail[0] ? detail : line);
		return;
	}
}

/* The borrowed thread's stack after a timeout or a fault. */
static void print_stack(const struct target *t)
{
	uint64_t pcs[32];
	size_t n, i;

	if (!t->s)
		return;
	n = alloc_backtrace(t->s, pcs, 32);
	if (n)
		error("thread %d was at:", (int)t->tid);
	for (i = 0; i < n; i++) {
		char sym[300];

		describe_pc(t, pcs[i], sym, sizeof(sym));
		error("  #%zu 0x%" PRIx64 "%s%s", i, pcs[i], sym[0] ? " " : "",
		      sym);
	}
}

int target_error(const struct target *t, const char *cmd, int rc)
{
	struct diag d;

	target_diag(t, rc, &d);
	error("%s %d: %s", cmd, (int)t->pi.pid, d.what);
	if (d.hint[0])
		hint("%s", d.hint);
	/* Every refused thread, or where the call was stuck; not after a
	 * world stop found no safe moment (-EBUSY): the threads refused
	 * before the borrow are not why. */
	if ((rc == -ETIMEDOUT || (d.kind == DIAG_UNSAFE && rc != -EBUSY)) &&
	    strchr(t->why, '\n'))
		print_reasons(t, t->why);
	if (rc == -ETIMEDOUT || rc == -EFAULT)
		print_stack(t);
	return diag_exit(d.kind);
}

void target_free(struct target *t)
{
	if (t->s)
		alloc_close(t->s, NULL);
	if (t->have_det)
		detection_free(&t->det);
	objects_free(t->os);
	maps_free(t->maps);
	if (t->pidfd > 0)
		close(t->pidfd);
	memset(t, 0, sizeof(*t));
}
