/*
 * The call engine: run a function inside a live process on ONE borrowed
 * thread, restore that thread exactly, and make sure it restores itself
 * if memsnap dies at any moment.
 *
 * Protocol (docs/DESIGN.md, "One call, step by step"; the arch half is
 * injector/arch/):
 *
 * 1. Triage /proc/PID/task/TID/stat and syscall: prefer a thread asleep
 *    in a restartable syscall (futex, nanosleep, read, poll, ...), not
 *    the main thread.
 * 2. PTRACE_SEIZE + PTRACE_INTERRUPT that thread only; wait for its
 *    PTRACE_EVENT_STOP.  A signal that shows up first is re-injected at
 *    once; a group-stop means the process is job-stopped: let go, leave
 *    it stopped.
 * 3. Check: no CET shadow stack, 64 KiB of mapped stack below rsp, and no
 *    frame (libunwind-ptrace) in a forbidden range (allocator, ld.so,
 *    unwinder, fork: given by the caller).  A refused thread is put back
 *    as it was; the next candidate is tried, then all again a little
 *    later, a bounded number of times.
 * 4. Save registers, XSAVE state and signal mask.  epoll_wait() and its
 *    siblings fail with EINTR on any ptrace stop and are never restarted
 *    by the kernel: when no real signal is pending, the saved result is
 *    turned into a restart, so the thread never sees that EINTR.
 * 5. Every call returns into a stub in a one-page r-x mapping of our own
 *    (found again by its signature, so a page left behind by an earlier
 *    memsnap is reused; it is never unmapped, since a call left running
 *    by a timeout or a killed memsnap may still return into it).  The
 *    frame below the red zone holds, above the return address, a block
 *    with the thread's complete original context (syscall restart
 *    already applied: rax = the syscall's number, rip on its syscall
 *    instruction), its errno, its signal mask and its XSAVE image.  The
 *    stub puts all of that back in user space (rt_sigprocmask, xrstor,
 *    register loads, a jump through a slot just below the red zone), so
 *    if memsnap is gone when the callee returns, the thread carries on
 *    by itself and re-enters its syscall.  No rt_sigreturn: it would
 *    reset the restart block, and a thread asleep in restart_syscall
 *    (a nanosleep resumed after an earlier stop) would get EINTR.
 *    The page is created the first time by an injected mmap() executed
 *    at an existing "syscall; ret" sequence, with an rt_sigreturn frame
 *    underneath and a libc signal restorer as return address, so that
 *    step heals itself too.  No shared code is ever patched.
 * 6. Async signals are blocked with PTRACE_SETSIGMASK for the call
 *    (never SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS); they stay
 *    pending and are delivered after the restore.  Registers are set
 *    before the mask, so dying in between runs the call, which heals.
 * 7. The call runs under PTRACE_SYSCALL; it is over at the syscall-entry
 *    stop of the stub's rt_sigprocmask (pc and syscall number checked):
 *    the result is in the register the stub saved it to.  A fault is
 *    reported with where it happened, and the thread is restored.  A
 *    timeout leaves the call running: the thread's stack is recorded
 *    and memsnap detaches; the stub heals the thread when the call
 *    returns.  A half-run call is never unwound.
 * 8. Normal restore: at that syscall-entry stop, put back the signal
 *    mask, skip the syscall and put in the healed context (so dying now
 *    is still safe), PTRACE_INTERRUPT, continue, and at the
 *    PTRACE_EVENT_STOP put back the exact original registers and FP
 *    state (rax = -ERESTART*, orig_rax intact): the kernel's restart
 *    logic then runs exactly as if nothing had happened, nanosleep
 *    keeping its remaining time.  Then errno; detach.
 */
#include "injector/inject.h"

#include "attach/procinfo.h"
#include "attach/ptrace.h"
#include "attach/triage.h"
#include "attach/unwind.h"
#include "common/procfs.h"
#include "common/util.h"
#include "injector/arch.h"
#include "injector/seccomp.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define STACK_HEADROOM (64 * 1024)
#define DEFAULT_TIMEOUT_MS 10000
#define STOP_TIMEOUT_MS 2000
#define MAX_CANDIDATES 8
#define MAX_ROUNDS 3
#define MAX_FRAMES 64
#define STUB_CODE_OFF 16
#define STUB_HELPERS_OFF 512	/* the helpers, after the stub */
#define STUB_IMAGE_MAX 1024
#define GADGET_SCAN_MAX (256u << 20)
#define STACK_SCAN_MAX (512u << 10)
#define GOOD_ENOUGH 90		/* see arch_syscall_score() */

/* The first 16 bytes of memsnap's stub page. */
static const char stub_signature[STUB_CODE_OFF] = "memsnap-stub-v4";

/*
 * The stub page's contents: signature, stub, helpers.  Its length, or 0
 * if the arch code does not fit (a build error in practice).
 */
static size_t stub_image(unsigned char *page)
{
	if (STUB_CODE_OFF + arch_stub_len > STUB_HELPERS_OFF ||
	    STUB_HELPERS_OFF + arch_helpers_len > STUB_IMAGE_MAX)
		return 0;
	memset(page, arch_desc.trap_fill, STUB_IMAGE_MAX);
	memcpy(page, stub_signature, STUB_CODE_OFF);
	memcpy(page + STUB_CODE_OFF, arch_stub_code, arch_stub_len);
	memcpy(page + STUB_HELPERS_OFF, arch_helpers_code, arch_helpers_len);
	return STUB_HELPERS_OFF + arch_helpers_len;
}

enum where {
	AT_TRAP,	/* PTRACE_EVENT_STOP / group-stop: inside get_signal */
	AT_SIGNAL,	/* signal-delivery-stop (a fault in the callee) */
	AT_SYSCALL,	/* a syscall stop of our own making */
};

struct stale {
	struct tracee t;
	struct stale *next;
};

struct inject_session {
	pid_t pid;
	int pidfd;		/* the process triaged; -1 without pidfd_open */
	uint64_t start_time;
	uint64_t chain_flag;	/* the call's inject_chain.abandoned, or 0 */
	struct tracee t;
	struct arch_ctx *ctx;
	uint64_t sigmask;
	enum where where;
	bool dead, abandoned, group_stopped, mask_set, finished;
	int finish_rc;
	int round;		/* of thread choice */
	struct seccomp_filters *sc; /* the thread's, NULL: none */
	bool stub_sc_ok;	/* the stub's syscall passes them */
	pid_t busy_by;		/* a tracer in the way of the last round */
	bool busy_memsnap;	/* ... and it is another memsnap */
	char busy_comm[32];
	uint64_t stack_lo;
	uint64_t stub;		/* the stub's code */
	bool errno_saved;
	uint64_t errno_addr;
	int errno_val;
	int timeout_ms;
	volatile int *interrupted;
	sigset_t oldmask;
	struct stale *stale;	/* seized, never stopped: detach later */
	/* /proc/PID/maps read before any thread is stopped (a process with
	 * 1000 threads has 2000 lines: ~1 ms that no thread should wait). */
	struct mapline *maps;
	size_t nmaps, maps_cap;
	struct inject_timings tm;
	uint64_t pcs[MAX_FRAMES];
	size_t npcs;
	char detail[512];
};

static void set_detail(struct inject_session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void set_detail(struct inject_session *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->detail, sizeof(s->detail), fmt, ap);
	va_end(ap);
}

static void why_add(const struct inject_opts *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void why_add(const struct inject_opts *o, const char *fmt, ...)
{
	size_t len;
	va_list ap;

	if (!o->why || !o->why_size)
		return;
	len = strnlen(o->why, o->why_size);
	if (len + 2 >= o->why_size)
		return;
	if (len)
		o->why[len++] = '\n';
	va_start(ap, fmt);
	vsnprintf(o->why + len, o->why_size - len, fmt, ap);
	va_end(ap);
}

/* ---- /proc/PID/maps, the few things the engine needs ------------------ */

struct mapline {
	uint64_t start, end, inode;
	char perms[5];
	bool has_path;
};

/* Call @fn for each line of /proc/PID/maps until it returns non-zero. */
static int maps_each(pid_t pid, int (*fn)(void *, const struct mapline *),
		     void *arg)
{
	char path[96], line[4096 + 256];
	FILE *f;
	int rc = 0;

	proc_path(pid, "maps", path, sizeof(path));
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		struct mapline m = { 0 };
		unsigned long long s, e, ino;
		int n = 0;

		if (sscanf(line, "%llx-%llx %4s %*s %*s %llu %n", &s, &e,
			   m.perms, &ino, &n) < 4)
			continue;
		m.start = s;
		m.end = e;
		m.inode = ino;
		m.has_path = n > 0 && line[n] && line[n] != '\n';
		rc = fn(arg, &m);
		if (rc)
			break;
	}
	fclose(f);
	return rc > 0 ? 0 : rc;
}

static int snapshot_cb(void *arg, const struct mapline *m)
{
	struct inject_session *s = arg;

	if (s->nmaps == s->maps_cap) {
		size_t cap = s->maps_cap ? 2 * s->maps_cap : 256;
		struct mapline *v = realloc(s->maps, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->maps = v;
		s->maps_cap = cap;
	}
	s->maps[s->nmaps++] = *m;
	return 0;
}

static int maps_snapshot(struct inject_session *s)
{
	s->nmaps = 0;
	return maps_each(s->pid, snapshot_cb, s);
}

/* Call @fn on each line of the snapshot until it returns non-zero. */
static int snapshot_each(struct inject_session *s,
			 int (*fn)(void *, const struct mapline *), void *arg)
{
	size_t i;

	for (i = 0; i < s->nmaps; i++)
		if (fn(arg, &s->maps[i]))
			return 0;
	return 0;
}

struct find_stack {
	uint64_t sp, lo, hi;
	bool writable;
};

static int find_stack_cb(void *arg, const struct mapline *m)
{
	struct find_stack *fs = arg;

	if (fs->sp < m->start || fs->sp >= m->end)
		return 0;
	fs->lo = m->start;
	fs->hi = m->end;
	fs->writable = m->perms[0] == 'r' && m->perms[1] == 'w';
	return 1;
}

struct find_stub {
	struct inject_session *s;
	uint64_t found;
};

static int find_stub_cb(void *arg, const struct mapline *m)
{
	struct find_stub *fs = arg;
	unsigned char want[STUB_IMAGE_MAX], buf[STUB_IMAGE_MAX];
	size_t len = stub_image(want);

	if (!len || m->has_path || strcmp(m->perms, "r-xp") ||
	    m->end - m->start != page_size())
		return 0;
	if (tracee_read(&fs->s->t, m->start, buf, len) ||
	    memcmp(buf, want, len))
		return 0;
	fs->found = m->start;
	return 1;
}

/* Executable file mappings, to look for two code sequences in. */
struct exec_maps {
	struct mapline v[256];
	size_t n;
};

static int exec_maps_cb(void *arg, const struct mapline *m)
{
	struct exec_maps *em = arg;

	if (m->perms[0] != 'r' || m->perms[2] != 'x' || !m->has_path ||
	    em->n == sizeof(em->v) / sizeof(em->v[0]))
		return 0;
	em->v[em->n++] = *m;
	return 0;
}

static int by_size(const void *a, const void *b)
{
	const struct mapline *x = a, *y = b;
	uint64_t sx = x->end - x->start, sy = y->end - y->start;

	return sx < sy ? -1 : sx > sy;
}

static bool scan(const unsigned char *buf, size_t len, uint64_t base,
		 const unsigned char *pat, size_t plen, uint64_t *out)
{
	const unsigned char *p = buf, *end = buf + len;

	while (p + plen <= end) {
		p = memchr(p, pat[0], (size_t)(end - p) - plen + 1);
		if (!p)
			return false;
		if (!memcmp(p, pat, plen)) {
			*out = base + (uint64_t)(p - buf);
			return true;
		}
		p++;
	}
	return false;
}

/*
 * A "syscall; ret" sequence and a signal restorer in the target's code
 * (the smallest objects first: ld.so has both).
 */
static int find_gadgets(struct inject_session *s, uint64_t *sysret,
			uint64_t *restorer)
{
	enum { CHUNK = 1 << 16 };
	struct exec_maps *em = calloc(1, sizeof(*em));
	unsigned char *buf = malloc(CHUNK);
	uint64_t scanned = 0;
	size_t i;
	int rc;

	*sysret = *restorer = 0;
	if (!em || !buf) {
		rc = -ENOMEM;
		goto out;
	}
	rc = maps_each(s->pid, exec_maps_cb, em);
	if (rc)
		goto out;
	qsort(em->v, em->n, sizeof(em->v[0]), by_size);
	for (i = 0; i < em->n && !(*sysret && *restorer); i++) {
		uint64_t a;

		for (a = em->v[i].start; a < em->v[i].end; a += CHUNK - 16) {
			size_t len = em->v[i].end - a < CHUNK ?
					     (size_t)(em->v[i].end - a) : CHUNK;

			if (scanned > GADGET_SCAN_MAX ||
			    proc_read_mem(s->pid, a, buf, len))
				break;
			scanned += len;
			if (!*sysret)
				scan(buf, len, a, arch_pat_syscall_ret,
				     arch_pat_syscall_ret_len, sysret);
			if (!*restorer)
				scan(buf, len, a, arch_pat_sigreturn,
				     arch_pat_sigreturn_len, restorer);
			if ((*sysret && *restorer) || len < CHUNK)
				break;
		}
	}
	rc = *sysret && *restorer ? 0 : -ENOEXEC;
out:
	free(em);
	free(buf);
	return rc;
}

/* ---- stops ------------------------------------------------------------- */

static uint64_t deadline_after(int ms)
{
	return now_us() + (uint64_t)ms * 1000u;
}

static void mark_dead(struct inject_session *s, const struct stop *st)
{
	s->dead = true;
	switch (st->kind) {
	case STOP_EXEC:
		set_detail(s, "pid %d called execve during the call",
			   (int)s->pid);
		break;
	case STOP_EXIT:
		set_detail(s, "thread %d is exiting (the process exits or was "
			      "killed) during the call", (int)s->t.tid);
		break;
	default:
		if (WIFSIGNALED(st->status))
			set_detail(s, "thread %d was killed by signal %d (%s)",
				   (int)s->t.tid, WTERMSIG(st->status),
				   strsignal(WTERMSIG(st->status)));
		else
			set_detail(s, "thread %d exited", (int)s->t.tid);
		break;
	}
}

static bool is_gone(const struct stop *st)
{
	return st->kind == STOP_EXIT || st->kind == STOP_EXEC ||
	       st->kind == STOP_GONE;
}

/* Async signals to block during a call. */
static uint64_t call_mask(uint64_t orig)
{
	return orig | ~arch_sync_signals();
}

/* ---- opening: choose, seize, check, save -------------------------------- */

static int score_thread(pid_t pid, struct thread_info *ti)
{
	int score;

	if (ti->state == 'Z' || ti->state == 'X')
		return -1000;
	if (ti->syscall >= 0)
		score = arch_syscall_score(ti->syscall);
	else if (ti->syscall == -1)
		score = 20; /* stopped in user space */
	else
		score = 10; /* running: it will stop at once too */
	if (ti->state == 'D')
		score -= 60;
	if (ti->tid == pid)
		score -= 30; /* the main thread often serves requests */
	return score;
}

static bool pc_forbidden(const struct inject_opts *o, uint64_t pc,
			 const struct inject_range **r)
{
	size_t i;

	for (i = 0; i < o->nforbidden; i++) {
		if (pc >= o->forbidden[i].lo && pc < o->forbidden[i].hi) {
			*r = &o->forbidden[i];
			return true;
		}
	}
	return false;
}

/*
 * The fast stack check.  Every frame's return address is a word between
 * rsp and the top of the stack, so if no word there points into a
 * forbidden range, no frame is in one.  A signal frame (the thread may
 * be on an alternate stack, its other frames elsewhere) or a stack too
 * deep to read sends the caller to the unwinder.  true: clean.
 */
static bool stack_clean(struct inject_session *s, const struct inject_opts *o,
			uint64_t sp, uint64_t end)
{
	const struct inject_range *r;
	uint64_t *w;
	size_t len, i;
	bool clean = true;

	sp &= ~(uint64_t)7;
	if (pc_forbidden(o, arch_pc(s->ctx), &r) || end <= sp ||
	    end - sp > STACK_SCAN_MAX)
		return false;
	len = (size_t)(end - sp) & ~(size_t)7;
	w = malloc(len);
	if (!w || proc_read_mem(s->pid, sp, w, len)) {
		free(w);
		return false;
	}
	for (i = 0; i < len / 8 && clean; i++) {
		unsigned char code[8];

		if (arch_sigframe_marker(w[i])) {
			clean = false;
			continue;
		}
		if (!pc_forbidden(o, w[i], &r))
			continue;
		/* Data that points there (a function pointer) is harmless;
		 * a return address follows a call instruction. */
		if (proc_read_mem(s->pid, w[i] - 8, code, sizeof(code)) ||
		    arch_after_call(code))
			clean = false;
	}
	free(w);
	return clean;
}

/* Put back a thread we only looked at, and let it go. */
static void let_go(struct inject_session *s)
{
	if (s->ctx) {
		arch_restore(&s->t, s->ctx);
		arch_free(s->ctx);
		s->ctx = NULL;
	}
	tracee_detach(&s->t, 0);
}

/*
 * Seize @tid and wait for its interrupt stop.  0: stopped (AT_TRAP);
 * -EAGAIN: job-stopped; -ESRCH: gone; -ETIMEDOUT: it did not stop.
 */
static int seize_stop(struct inject_session *s, pid_t tid)
{
	uint64_t deadline = deadline_after(STOP_TIMEOUT_MS);
	struct stop st;
	int rc;

	rc = tracee_seize(&s->t, s->pid, tid);
	if (rc)
		return rc;
	for (;;) {
		rc = tracee_wait(&s->t, deadline, NULL, &st);
		if (rc == -ETIMEDOUT) {
			/* Cannot detach a running tracee: later. */
			struct stale *x = malloc(sizeof(*x));

			if (x) {
				x->t = s->t;
				x->next = s->stale;
				s->stale = x;
			}
			s->t.seized = false;
			return rc;
		}
		if (rc)
			return rc;
		switch (st.kind) {
		case STOP_EVENT:
			s->where = AT_TRAP;
			return 0;
		case STOP_GROUP:
			/* Leave it as it is: stopped. */
			tracee_detach(&s->t, 0);
			return -EAGAIN;
		case STOP_SIGNAL:
			/* Deliver it now; our interrupt stays pending. */
			rc = tracee_cont(&s->t, st.sig);
			break;
		case STOP_SYSCALL:
		case STOP_OTHER_EVENT:
			rc = tracee_cont(&s->t, 0);
			break;
		default:
			tracee_detach(&s->t, 0);
			return -ESRCH;
		}
		if (rc)
			return rc;
	}
}

/*
 * Another tracer on @tid (tracers attach per thread: another memsnap, an
 * strace -p TID): note who, in s->busy_by, and say so in why.
 */
static bool thread_traced(struct inject_session *s,
			  const struct inject_opts *o, pid_t tid)
{
	char comm[32] = "?";
	pid_t tracer = 0;

	if (thread_tracer(s->pid, tid, &tracer) || !tracer ||
	    tracer == getpid())
		return false;
	proc_comm(tracer, comm, sizeof(comm));
	s->busy_by = tracer;
	snprintf(s->busy_comm, sizeof(s->busy_comm), "%s", comm);
	s->busy_memsnap = !strcmp(comm, "memsnap");
	why_add(o, "tid %d is traced by pid %d (%s)", (int)tid, (int)tracer,
		comm);
	return true;
}

/*
 * Still the process that was triaged: its pidfd has not seen it exit (a
 * zombie keeps its pid too), else the same start time.
 */
static bool same_process(const struct inject_session *s)
{
	uint64_t t;

	if (s->pidfd >= 0)
		return syscall(SYS_pidfd_send_signal, s->pidfd, 0, NULL, 0) == 0;
	return !s->start_time ||
	       (!proc_start_time(s->pid, &t) && t == s->start_time);
}

/* A thread we seized that never stopped (uninterruptible sleep): ours
 * until it stops, so never seized again by this session. */
static bool held_stale(const struct inject_session *s, pid_t tid)
{
	const struct stale *x;

	for (x = s->stale; x; x = x->next)
		if (x->t.tid == tid)
			return true;
	return false;
}

/*
 * 0: @tid is ours and safe; -EDEADLK: refused (reason added to why);
 * -EALREADY: another tracer has it; -ETIMEDOUT: it did not stop.
 */
static int try_thread(struct inject_session *s, const struct inject_opts *o,
		      const struct thread_info *ti)
{
	struct find_stack fs = { 0 };
	const struct inject_range *r;
	struct thread_info now;
	unsigned long long pend, blk;
	uint64_t t0 = now_us(), t1;
	int rc, i, n;

	if (thread_has_shadow_stack(s->pid, ti->tid)) {
		why_add(o, "tid %d: CET shadow stack enabled", (int)ti->tid);
		return -EOPNOTSUPP;
	}
	if (held_stale(s, ti->tid))
		return -ETIMEDOUT;	/* said so the first time */
	if (thread_traced(s, o, ti->tid))
		return -EALREADY;
	rc = seize_stop(s, ti->tid);
	/* Seized by someone else just now: the same as above. */
	if (rc == -EPERM && thread_traced(s, o, ti->tid))
		return -EALREADY;
	if (rc == -ETIMEDOUT && triage_one(s->pid, ti->tid, &now) == 0 &&
	    now.state == 'D')
		why_add(o, "thread %d is in uninterruptible sleep (state D): "
			   "it did not stop within %d ms",
			(int)ti->tid, STOP_TIMEOUT_MS);
	else if (rc == -ETIMEDOUT)
		why_add(o, "tid %d: did not stop within %d ms (state %c)",
			(int)ti->tid, STOP_TIMEOUT_MS, ti->state);
	if (rc)
		return rc;
	/* The pid may have been reused since it was triaged: never touch
	 * the process that has it now. */
	if (!same_process(s)) {
		let_go(s);
		why_add(o, "pid %d exited; the pid now names another process",
			(int)s->pid);
		return -ESRCH;
	}
	t1 = now_us();
	s->tm.seize_us = t1 - t0;

	rc = arch_save(&s->t, &s->ctx);
	if (!rc)
		rc = tracee_getsigmask(&s->t, &s->sigmask);
	if (rc) {
		let_go(s);
		return rc;
	}
	/* At once: if memsnap dies from here on, the thread restarts. */
	if (!thread_signals(s->pid, ti->tid, &pend, &blk) &&
	    !(pend & ~blk) && arch_fix_spurious_eintr(s->ctx) &&
	    arch_restore(&s->t, s->ctx)) {
		let_go(s);
		return -EIO;
	}

	fs.sp = arch_sp(s->ctx);
	snapshot_each(s, find_stack_cb, &fs);
	if (!fs.lo && !maps_snapshot(s))
		snapshot_each(s, find_stack_cb, &fs); /* a new stack */
	if (!fs.lo || !fs.writable) {
		why_add(o, "tid %d: stack pointer 0x%" PRIx64
			   " is not in a writable mapping", (int)ti->tid,
			fs.sp);
		goto refuse;
	}
	if (fs.sp - fs.lo < STACK_HEADROOM + arch_desc.red_zone) {
		why_add(o, "tid %d: only %" PRIu64 " bytes of stack left below "
			   "0x%" PRIx64 " (need %d)", (int)ti->tid,
			fs.sp - fs.lo, fs.sp, STACK_HEADROOM);
		goto refuse;
	}
	s->stack_lo = fs.lo;

	if (stack_clean(s, o, fs.sp, fs.hi)) {
		s->tm.check_us = now_us() - t1;
		return 0;
	}
	/* Something looks like a forbidden frame: unwind to be sure. */
	n = unwind_thread(ti->tid, s->pcs, MAX_FRAMES);
	if (n <= 0) {
		/* At least the pc itself must be checked. */
		s->pcs[0] = arch_pc(s->ctx);
		n = 1;
	}
	s->npcs = (size_t)n;
	for (i = 0; i < n; i++) {
		if (pc_forbidden(o, s->pcs[i], &r)) {
			why_add(o, "tid %d: frame #%d at 0x%" PRIx64
				   " is in %s",
				(int)ti->tid, i, s->pcs[i],
				r->what ? r->what : "a forbidden range");
			goto refuse;
		}
	}
	s->npcs = 0;
	s->tm.check_us = now_us() - t1;
	return 0;
refuse:
	s->npcs = 0;
	let_go(s);
	return -EDEADLK;
}

/* The first round takes the first thread asleep where we like best. */
static bool good_enough(void *arg, struct thread_info *ti)
{
	const struct inject_session *s = arg;

	return !s->round && score_thread(s->pid, ti) >= GOOD_ENOUGH;
}

/*
 * While every thread we try is another memsnap's, wait for one: a call
 * takes milliseconds.  Up to this long, then "another memsnap is working
 * on PID N".
 */
#define BUSY_WAIT_MS 10000

static int choose_thread(struct inject_session *s, const struct inject_opts *o)
{
	struct thread_list l = { 0 };
	struct thread_info one;
	int rc = -EDEADLK, worst = 0, round;
	uint64_t busy_until = deadline_after(BUSY_WAIT_MS);
	size_t i, tries, traced;

	for (round = 0; round < MAX_ROUNDS; round++) {
		s->round = round;
		if (round)
			usleep(20000u * (unsigned int)round);
		if (o->interrupted && *o->interrupted)
			return -EINTR;
		if (o->tid) {
			rc = triage_one(s->pid, o->tid, &one);
			if (rc)
				return rc == -ENOENT ? -ESRCH : rc;
			l.v = &one;
			l.n = 1;
		} else {
			rc = triage_list_until(s->pid, good_enough, s, &l);
			if (rc)
				return rc == -ENOENT ? -ESRCH : rc;
			for (i = 0; i < l.n; i++)
				l.v[i].score = score_thread(s->pid, &l.v[i]);
			triage_sort(&l);
		}
		rc = -EDEADLK; /* until a thread is ours */
		s->busy_by = 0;
		for (i = 0, tries = 0, traced = 0;
		     i < l.n && tries < MAX_CANDIDATES; i++) {
			const struct thread_info *ti = &l.v[i];

			if (ti->state == 'Z' || ti->state == 'X') {
				if (!o->tid)
					continue;
				why_add(o, "tid %d is exiting (state %c)",
					(int)ti->tid, ti->state);
				return -ESRCH;
			}
			tries++;
			rc = try_thread(s, o, ti);
			if (!rc)
				break;
			if (rc == -ESRCH && !same_process(s)) {
				if (!o->tid)
					triage_free(&l);
				return -ESRCH;
			}
			if (rc == -EALREADY) {
				traced++;
				continue;
			}
			if (rc == -EAGAIN || rc == -EPERM || rc == -EACCES ||
			    rc == -EBUSY || rc == -ENOMEM)
				break;
			if (rc == -EOPNOTSUPP && !worst)
				worst = rc;
		}
		if (!o->tid)
			triage_free(&l);
		/* Only other tracers in the way: another memsnap lets go
		 * soon, so wait (a short random while: many may wait). */
		if (rc && traced && traced == tries && s->busy_memsnap &&
		    now_us() < busy_until) {
			usleep(2000u + (unsigned int)(now_us() % 8000u));
			round--;
			continue;
		}
		if (rc && traced && traced == tries)
			rc = -EBUSY;
		if (!rc || rc == -EAGAIN || rc == -EPERM || rc == -EACCES ||
		    rc == -EBUSY || rc == -ENOMEM)
			break;
		/* A shadow stack will not go away by waiting. */
		if (worst)
			break;
		/* A thread of ours that did not stop keeps a trap pending. */
	}
	if (rc && worst)
		rc = worst;
	if (rc == -EBUSY && s->busy_by && o->why && o->why_size) {
		/* The one line the caller prints first. */
		o->why[0] = '\0';
		if (s->busy_memsnap)
			why_add(o, "another memsnap (pid %d) is working on pid %d",
				(int)s->busy_by, (int)s->pid);
		else
			why_add(o, "%s %d is already traced by pid %d (%s)",
				o->tid ? "thread" : "every thread tried of pid",
				o->tid ? (int)o->tid : (int)s->pid,
				(int)s->busy_by, s->busy_comm);
	}
	if (rc && rc != -EAGAIN && rc != -EPERM && rc != -EACCES &&
	    rc != -EBUSY && rc != -ENOMEM && rc != -EOPNOTSUPP && rc != -EINTR)
		rc = o->tid && rc == -ESRCH ? -ESRCH : -EDEADLK;
	return rc;
}

/* Refuse before attaching when /proc already tells. */
static int preflight(pid_t pid, const struct inject_opts *o)
{
	struct procinfo pi;
	int rc = procinfo_read(pid, &pi);

	if (rc)
		return rc == -ENOENT ? -ESRCH : rc;
	/* A leader that called pthread_exit() is 'Z' with threads alive. */
	if (pi.kernel_thread ||
	    ((pi.state == 'Z' || pi.state == 'X') && pi.threads <= 1)) {
		why_add(o, "pid %d is %s", (int)pid,
			pi.kernel_thread ? "a kernel thread" : "a zombie");
		return -ESRCH;
	}
	if (pi.state == 'T') {
		why_add(o, "pid %d is stopped (job control); memsnap leaves it "
			   "stopped", (int)pid);
		return -EAGAIN;
	}
	/* Tracers attach per thread: choose_thread() passes them over. */
	return 0;
}

/* ---- running code in the thread ----------------------------------------- */

/*
 * Our thread vanished.  If another thread of the process (or ours, which
 * then takes the leader's id) called execve, the leader reports
 * PTRACE_EVENT_EXEC to us: say so and let it go.
 */
static void vanished(struct inject_session *s, const struct stop *st)
{
	struct tracee leader = { .pid = s->pid, .tid = s->pid, .seized = true,
				 .memfd = -1 };
	struct stop ls;

	s->dead = true;
	s->t.seized = false;
	if (st)
		mark_dead(s, st);
	else
		set_detail(s, "thread %d is gone", (int)s->t.tid);
	if (s->t.tid == s->pid)
		return;
	if (!tracee_wait(&leader, deadline_after(200), NULL, &ls) &&
	    ls.kind == STOP_EXEC) {
		set_detail(s, "pid %d called execve during the call",
			   (int)s->pid);
		tracee_detach(&leader, 0);
	}
}

/* Wait for the current step to reach a syscall stop of @want at @pc. */
static int wait_syscall_stop(struct inject_session *s, uint64_t deadline,
			     uint64_t pc, long want, struct arch_peek *p)
{
	struct stop st;
	int rc;

	for (;;) {
		rc = tracee_wait(&s->t, deadline, NULL, &st);
		if (rc == -ESRCH)
			vanished(s, NULL);
		if (rc)
			return rc;
		if (st.kind == STOP_GONE) {
			vanished(s, &st);
			return -ESRCH;
		}
		if (is_gone(&st)) {
			mark_dead(s, &st);
			return -ESRCH;
		}
		switch (st.kind) {
		case STOP_SYSCALL:
			rc = arch_peek(&s->t, p);
			if (rc)
				return rc;
			if (p->pc == pc && p->sysno == want) {
				s->where = AT_SYSCALL;
				return 0;
			}
			rc = tracee_syscall(&s->t, 0);
			break;
		case STOP_SIGNAL:
			if ((1ull << (st.sig - 1)) & arch_sync_signals() &&
			    st.sig != SIGSTOP && st.sig != SIGKILL) {
				s->where = AT_SIGNAL;
				return -EFAULT;
			}
			rc = tracee_syscall(&s->t, st.sig);
			break;
		case STOP_GROUP:
			s->group_stopped = true;
			rc = tracee_syscall(&s->t, 0);
			break;
		default:
			rc = tracee_syscall(&s->t, 0);
			break;
		}
		if (rc)
			return rc == -ESRCH ? (s->dead = true, -ESRCH) : rc;
	}
}

static void describe_fault(struct inject_session *s)
{
	siginfo_t si;
	struct arch_peek p = { 0 };
	const char *name;
	int n;

	memset(&si, 0, sizeof(si));
	tracee_getsiginfo(&s->t, &si);
	arch_peek(&s->t, &p);
	name = sigabbrev_np(si.si_signo);
	set_detail(s, "%s%s in the called function at pc 0x%" PRIx64
		      " (fault address 0x%" PRIx64 ", si_code %d)",
		   name ? "SIG" : "", name ? name : "a signal", p.pc,
		   (uint64_t)(uintptr_t)si.si_addr, si.si_code);
	n = unwind_thread(s->t.tid, s->pcs, MAX_FRAMES);
	s->npcs = n > 0 ? (size_t)n : 0;
}

/* Write @len bytes at @addr on the borrowed stack, checking the bounds. */
static int stack_write(struct inject_session *s, uint64_t addr,
		       const void *buf, size_t len)
{
	if (addr < s->stack_lo || addr + len > arch_sp(s->ctx))
		return -EFAULT;
	return tracee_write(&s->t, addr, buf, len);
}

/* Create the stub page (see the top of this file). */
static int make_stub(struct inject_session *s)
{
	unsigned char page[STUB_IMAGE_MAX];
	size_t len = stub_image(page);
	uint64_t sysret, restorer, lo, sp, args[6], after;
	struct arch_peek p;
	uint64_t deadline = deadline_after(STOP_TIMEOUT_MS);
	char act[64];
	void *frame;
	int rc;

	if (!len)
		return -EINVAL;
	rc = find_gadgets(s, &sysret, &restorer);
	if (rc)
		return rc;
	rc = arch_frame_build(s->ctx, arch_sp(s->ctx) - arch_desc.red_zone, restorer,
			      s->sigmask, 0, 0, &frame, &lo, &sp);
	if (rc)
		return rc;
	rc = stack_write(s, lo, frame, arch_sp(s->ctx) - arch_desc.red_zone - lo);
	free(frame);
	if (rc)
		return rc;
	args[0] = 0;
	args[1] = page_size();
	args[2] = 0x1 | 0x4;	/* PROT_READ | PROT_EXEC */
	args[3] = 0x02 | 0x20;	/* MAP_PRIVATE | MAP_ANONYMOUS */
	args[4] = (uint64_t)-1;
	args[5] = 0;
	/* Neither the mmap nor, if memsnap dies, the restorer's
	 * rt_sigreturn may be something a seccomp filter punishes. */
	after = sysret + arch_desc.syscall_insn_len;
	if (!seccomp_check(s->sc, arch_audit, arch_nr_mmap, args, after, act,
			   sizeof(act))) {
		set_detail(s, "its seccomp filter would %s for the mmap(PROT_READ|PROT_EXEC) of memsnap's stub page",
			   act);
		return -EOPNOTSUPP;
	}
	if (!seccomp_check(s->sc, arch_audit, arch_nr_rt_sigreturn, NULL,
			   restorer + arch_pat_sigreturn_len, act, sizeof(act))) {
		set_detail(s, "its seccomp filter would %s for rt_sigreturn",
			   act);
		return -EOPNOTSUPP;
	}
	rc = arch_set_syscall(&s->t, s->ctx, sysret, arch_nr_mmap, args, 6, sp);
	if (!rc)
		rc = tracee_syscall(&s->t, 0);
	/* Entry, then exit, both at the instruction after the syscall. */
	if (!rc)
		rc = wait_syscall_stop(s, deadline, after, arch_nr_mmap, &p);
	if (!rc)
		rc = tracee_syscall(&s->t, 0);
	if (!rc)
		rc = wait_syscall_stop(s, deadline, after, arch_nr_mmap, &p);
	if (rc == -EFAULT)
		describe_fault(s);
	if (rc)
		return rc;
	if (p.ret > (uint64_t)-4096 || (p.ret & (page_size() - 1)) || !p.ret) {
		set_detail(s, "mmap in the target failed: %s",
			   strerror((int)-(int64_t)p.ret));
		return -ENOMEM;
	}
	rc = tracee_write(&s->t, p.ret, page, len);
	if (rc)
		return rc;
	s->stub = p.ret + STUB_CODE_OFF;
	return 0;
}

static int ensure_stub(struct inject_session *s)
{
	struct find_stub fs = { .s = s };

	snapshot_each(s, find_stub_cb, &fs);
	if (fs.found) {
		s->stub = fs.found + STUB_CODE_OFF;
		return 0;
	}
	return make_stub(s);
}

static int timeout_ms(const struct inject_session *s)
{
	return s->timeout_ms > 0 ? s->timeout_ms : DEFAULT_TIMEOUT_MS;
}

/*
 * The call did not return in time: record where the thread is and let it
 * go on by itself (the stub heals it when the call returns).  If the
 * call returned just now, finish normally: 0 with *@p filled.
 */
static int abandon(struct inject_session *s, uint64_t done_pc,
		   struct arch_peek *p)
{
	uint64_t deadline = deadline_after(STOP_TIMEOUT_MS);
	struct stop st;
	int rc, n;

	rc = tracee_interrupt(&s->t);
	while (!rc) {
		rc = tracee_wait(&s->t, deadline, NULL, &st);
		if (rc)
			break;
		if (is_gone(&st)) {
			mark_dead(s, &st);
			return -ESRCH;
		}
		if (st.kind == STOP_SYSCALL && !arch_peek(&s->t, p) &&
		    p->pc == done_pc && p->sysno == arch_nr_stub_done) {
			s->where = AT_SYSCALL;
			return 0;
		}
		if (st.kind == STOP_EVENT || st.kind == STOP_GROUP ||
		    st.kind == STOP_SYSCALL)
			break;
		/* A signal: hand it on, wait for our interrupt. */
		rc = tracee_syscall(&s->t, st.kind == STOP_SIGNAL ? st.sig : 0);
	}
	/*
	 * A chain (INJECT_HELPER_CHAIN) in the call learns that it was
	 * given up, and cleans up when it ends: written while the thread is
	 * stopped, or at once if it could not be stopped.
	 */
	if (s->chain_flag) {
		const uint64_t one = 1;

		tracee_write(&s->t, s->chain_flag, &one, sizeof(one));
	}
	if (!rc) {
		n = unwind_thread(s->t.tid, s->pcs, MAX_FRAMES);
		s->npcs = n > 0 ? (size_t)n : 0;
		tracee_detach(&s->t, 0);
	} else {
		/* Still running (uninterruptible?): detached at our exit. */
		s->t.seized = false;
	}
	s->abandoned = true;
	set_detail(s, "the call did not return within %d ms; it goes on in "
		      "thread %d, which restores itself when it returns",
		   timeout_ms(s), (int)s->t.tid);
	return -ETIMEDOUT;
}

/* The highest address of a call's frame and buffers. */
static uint64_t frame_top(const struct inject_session *s)
{
	/* Below the red zone and the slot the stub jumps through. */
	return (arch_sp(s->ctx) - arch_desc.red_zone - arch_desc.pc_slot) &
	       ~(uint64_t)(arch_desc.stack_align - 1);
}

/*
 * At the stub's syscall-entry stop: put back the thread's errno, signal
 * mask and healed context now, so that the stub's restore block is no
 * longer needed.  The next call may then write its frame over that block:
 * if memsnap dies before the call's registers are set, the thread
 * resumes as itself, not in a stub reading a half-written block.
 */
static int heal_in_place(struct inject_session *s)
{
	int rc = 0;

	if (s->errno_saved &&
	    tracee_write(&s->t, s->errno_addr, &s->errno_val, sizeof(int)))
		rc = -EIO;
	if (s->mask_set) {
		if (tracee_setsigmask(&s->t, s->sigmask))
			rc = -EIO;
		else
			s->mask_set = false;
	}
	if (arch_restore_healed(&s->t, s->ctx))
		rc = -EIO;
	return rc;
}

static int run(struct inject_session *s, uint64_t fn, const uint64_t *args,
	       unsigned int nargs, uint64_t sret, uint64_t hi,
	       uint64_t errno_addr, uint64_t *ret)
{
	uint64_t done_pc = s->stub + arch_stub_done_pc;
	/* rt_sigprocmask(SIG_SETMASK, &mask, NULL, 8), as the stub makes it */
	const uint64_t done_args[6] = { 2, 0, 0, 8 };
	uint64_t lo, sp, slot, slot_val, t0;
	struct arch_peek p, at_exit;
	char act[64];
	void *frame;
	int rc;

	if (!s->stub_sc_ok) {
		if (!seccomp_check(s->sc, arch_audit, arch_nr_stub_done,
				   done_args, done_pc, act, sizeof(act))) {
			set_detail(s, "its seccomp filter would %s for rt_sigprocmask",
				   act);
			return -EOPNOTSUPP;
		}
		s->stub_sc_ok = true;
	}

	rc = arch_call_frame_build(s->ctx, hi, s->stub, s->sigmask, errno_addr,
				   s->errno_val, &frame, &lo, &sp, &slot,
				   &slot_val);
	if (rc)
		return rc;
	rc = stack_write(s, lo, frame, hi - lo);
	free(frame);
	if (!rc)
		rc = stack_write(s, slot, &slot_val, sizeof(slot_val));
	if (rc)
		return rc;
	/* Registers first: dying after this runs the call, which heals. */
	rc = arch_set_call(&s->t, s->ctx, fn, args, nargs, sret, sp);
	if (rc)
		return rc;
	if (!s->mask_set) {
		rc = tracee_setsigmask(&s->t, call_mask(s->sigmask));
		if (rc)
			return rc;
		s->mask_set = true;
	}
	t0 = now_us();
	rc = tracee_syscall(&s->t, 0);
	if (rc)
		return rc;
	rc = wait_syscall_stop(s, deadline_after(timeout_ms(s)), done_pc,
			       arch_nr_stub_done, &p);
	if (rc == -ETIMEDOUT)
		rc = abandon(s, done_pc, &p);
	s->tm.call_us += now_us() - t0;
	if (rc == -EFAULT)
		describe_fault(s);
	if (rc)
		return rc;
	if (p.sp != sp + arch_desc.return_pop) {
		set_detail(s, "the called function returned with a moved stack "
			      "(0x%" PRIx64 ", expected 0x%" PRIx64 ")",
			   p.sp, sp + arch_desc.return_pop);
	}
	*ret = p.result;
	/*
	 * Let the stub's own rt_sigprocmask run (it puts the thread's mask
	 * back) and heal at its exit stop: skipping it at the entry stop
	 * would make seccomp judge "syscall -1", which an allow-list filter
	 * punishes.  If memsnap dies in between, the stub heals the thread.
	 */
	rc = tracee_syscall(&s->t, 0);
	if (!rc)
		rc = wait_syscall_stop(s, deadline_after(STOP_TIMEOUT_MS),
				       done_pc, arch_nr_stub_done, &at_exit);
	if (rc)
		return rc;
	return heal_in_place(s);
}

static int save_errno(struct inject_session *s, uint64_t errno_location)
{
	uint64_t addr;
	int32_t val;
	int rc;

	rc = run(s, errno_location, NULL, 0, 0, frame_top(s), 0, &addr);
	if (rc)
		return rc;
	rc = tracee_read(&s->t, addr, &val, sizeof(val));
	if (rc)
		return rc;
	s->errno_addr = addr;
	s->errno_val = val;
	s->errno_saved = true;
	return 0;
}

/* ---- restoring ----------------------------------------------------------- */

/* At a trap stop (inside get_signal): everything back exactly. */
static int restore_at_trap(struct inject_session *s)
{
	int rc = 0;

	if (s->mask_set && tracee_setsigmask(&s->t, s->sigmask))
		rc = -EIO;
	if (arch_restore(&s->t, s->ctx) && !rc)
		rc = -EIO;
	return rc;
}

static int restore(struct inject_session *s)
{
	uint64_t deadline;
	struct stop st;
	int rc = 0;

	if (s->errno_saved &&
	    tracee_write(&s->t, s->errno_addr, &s->errno_val, sizeof(int)))
		rc = -EIO;
	if (s->where != AT_SYSCALL)
		return restore_at_trap(s) ?: rc;

	/*
	 * A syscall stop: the kernel's restart logic does not run from
	 * here.  Put in the healed context (safe if we die now), then get
	 * a trap stop and put in the exact one.
	 */
	if (s->mask_set && !tracee_setsigmask(&s->t, s->sigmask))
		s->mask_set = false;
	if (arch_restore_healed(&s->t, s->ctx))
		rc = -EIO;
	if (tracee_interrupt(&s->t) || tracee_cont(&s->t, 0))
		return -EIO;
	deadline = deadline_after(STOP_TIMEOUT_MS);
	for (;;) {
		int wrc = tracee_wait(&s->t, deadline, NULL, &st);

		if (wrc) {
			/* It runs healed; we can only detach at our exit. */
			s->t.seized = false;
			return wrc == -ETIMEDOUT ? rc : wrc;
		}
		if (is_gone(&st)) {
			mark_dead(s, &st);
			return -ESRCH;
		}
		if (st.kind == STOP_EVENT || st.kind == STOP_GROUP) {
			if (st.kind == STOP_GROUP)
				s->group_stopped = true;
			s->where = AT_TRAP;
			return restore_at_trap(s) ?: rc;
		}
		/* A pending signal now unblocked: deliver it as is. */
		if (tracee_cont(&s->t, st.kind == STOP_SIGNAL ? st.sig : 0))
			return -EIO;
	}
}

/* ---- the contract -------------------------------------------------------- */

int inject_open(pid_t pid, const struct inject_opts *opts,
		struct inject_session **out)
{
	struct inject_session *s;
	uint64_t t0;
	int rc;

	*out = NULL;
	if (opts->why && opts->why_size)
		opts->why[0] = '\0';
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->pid = pid;
	s->t.memfd = -1;
	s->timeout_ms = opts->timeout_ms;
	s->start_time = opts->start_time;
	/* Pin the process first, then check it is the one triaged. */
	s->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	s->interrupted = opts->interrupted;
	s->tm.threads_stopped = 1;
	tracee_hold(&s->oldmask);

	rc = preflight(pid, opts);
	if (!rc && opts->start_time) {
		uint64_t t;

		rc = proc_start_time(pid, &t);
		if (!rc && t != opts->start_time) {
			why_add(opts, "pid %d exited; the pid now names another process",
				(int)pid);
			rc = -ESRCH;
		}
	}
	if (!rc)
		rc = maps_snapshot(s);
	if (rc == -ENOENT)
		rc = -ESRCH;
	if (!rc)
		rc = choose_thread(s, opts);
	if (!rc) {
		char why[256] = "";

		rc = seccomp_load(&s->t, &s->sc, why, sizeof(why));
		if (rc == -EPERM) {
			why_add(opts, "%s; memsnap cannot prove its system calls are allowed",
				why);
			rc = -EOPNOTSUPP;
		}
	}
	if (rc) {
		inject_close(s);
		return rc;
	}
	t0 = now_us();
	rc = ensure_stub(s);
	if (!rc && opts->errno_location)
		rc = save_errno(s, opts->errno_location);
	if (!rc && s->interrupted && *s->interrupted)
		rc = -EINTR;
	s->tm.save_us = now_us() - t0;
	if (rc) {
		if (opts->why && s->detail[0])
			why_add(opts, "tid %d: %s", (int)s->t.tid, s->detail);
		inject_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

int inject_call(struct inject_session *s, struct inject_call *call,
		struct inject_result *res)
{
	uint64_t args[INJECT_MAX_ARGS], hi;
	size_t total = 0;
	unsigned int i;
	int rc;

	if (s->dead)
		return -ESRCH;
	if (s->abandoned)
		return -ETIMEDOUT;
	if (!same_process(s)) {
		set_detail(s, "pid %d exited", (int)s->pid);
		return -ESRCH;
	}
	if (call->nargs > INJECT_MAX_ARGS || call->nbufs > INJECT_MAX_BUFS ||
	    call->nrelocs > INJECT_MAX_RELOCS || call->chain_buf > call->nbufs ||
	    call->sret_buf > call->nbufs)
		return -EINVAL;
	for (i = 0; i < call->nrelocs; i++) {
		const struct inject_reloc *x = &call->relocs[i];

		if (x->buf >= call->nbufs || x->target >= call->nbufs ||
		    x->off > call->bufs[x->buf].len ||
		    call->bufs[x->buf].len - x->off < sizeof(uint64_t))
			return -EINVAL;
	}
	if (call->chain_buf &&
	    call->bufs[call->chain_buf - 1].len < sizeof(struct inject_chain))
		return -EINVAL;
	for (i = 0; i < call->nbufs; i++) {
		if (call->bufs[i].len > INJECT_MAX_BUF_BYTES)
			return -EINVAL;
		total += (call->bufs[i].len + 15) & ~(size_t)15;
	}
	if (total > INJECT_MAX_BUF_BYTES)
		return -EINVAL;
	if (s->interrupted && *s->interrupted)
		return -EINTR;

	/* Buffers right below the red zone, 16-byte aligned. */
	hi = frame_top(s);
	for (i = 0; i < call->nbufs; i++) {
		hi -= (call->bufs[i].len + 15) & ~(size_t)15;
		call->bufs[i].remote = hi;
	}
	for (i = 0; i < call->nbufs; i++) {
		struct inject_buf *b = &call->bufs[i];
		unsigned char *img;
		unsigned int k;

		if (!b->len)
			continue;
		img = b->in ? malloc(b->len) : calloc(1, b->len);
		if (!img)
			return -ENOMEM;
		if (b->in)
			memcpy(img, b->in, b->len);
		for (k = 0; k < call->nrelocs; k++)
			if (call->relocs[k].buf == i)
				memcpy(img + call->relocs[k].off,
				       &call->bufs[call->relocs[k].target].remote,
				       sizeof(uint64_t));
		rc = stack_write(s, b->remote, img, b->len);
		free(img);
		if (rc)
			return rc;
	}
	s->chain_flag = call->chain_buf
		? call->bufs[call->chain_buf - 1].remote +
			  offsetof(struct inject_chain, abandoned)
		: 0;
	for (i = 0; i < call->nargs; i++) {
		const struct inject_arg *a = &call->args[i];

		if (a->kind == INJECT_ARG_BUF) {
			if (a->buf >= call->nbufs)
				return -EINVAL;
			args[i] = call->bufs[a->buf].remote;
		} else {
			args[i] = a->value;
		}
	}
	rc = run(s, call->fn, args, call->nargs,
		 call->sret_buf ? call->bufs[call->sret_buf - 1].remote : 0, hi,
		 s->errno_addr, &res->ret);
	if (rc == -ESRCH && !s->detail[0])
		/* A ptrace request failed before any stop said why. */
		set_detail(s, "thread %d is gone (the process exited or "
			      "called execve)", (int)s->t.tid);
	if (rc)
		return rc;
	for (i = 0; i < call->nbufs; i++) {
		struct inject_buf *b = &call->bufs[i];

		if (b->out && b->len) {
			rc = tracee_read(&s->t, b->remote, b->out, b->len);
			if (rc)
				return rc;
		}
	}
	return 0;
}

int inject_finish(struct inject_session *s)
{
	struct stale *x;
	uint64_t t0;
	int rc = 0;

	if (!s || s->finished)
		return s ? s->finish_rc : 0;
	t0 = now_us();
	if (s->t.seized && s->ctx && !s->dead && !s->abandoned)
		rc = restore(s);
	s->tm.restore_us = now_us() - t0;
	t0 = now_us();
	if (s->t.seized && tracee_detach(&s->t, 0) && !rc && !s->dead)
		rc = -EIO;
	s->tm.detach_us = now_us() - t0;
	while ((x = s->stale)) {
		struct stop st;

		/* Stopped by now? Then let it go; else at our exit. */
		x->t.seized = true;
		if (!tracee_wait(&x->t, 1, NULL, &st) && !is_gone(&st))
			tracee_detach(&x->t, 0);
		s->stale = x->next;
		free(x);
	}
	tracee_release(&s->oldmask);
	s->finished = true;
	s->finish_rc = rc;
	return rc;
}

int inject_close(struct inject_session *s)
{
	int rc;

	if (!s)
		return 0;
	rc = inject_finish(s);
	arch_free(s->ctx);
	free(s->maps);
	seccomp_free(s->sc);
	if (s->pidfd >= 0)
		close(s->pidfd);
	free(s);
	return rc;
}

uint64_t inject_helper(const struct inject_session *s, enum inject_helper h)
{
	static const int arch_of[] = {
		[INJECT_HELPER_SYSCALL] = ARCH_HELPER_SYSCALL,
		[INJECT_HELPER_WRITE_CB] = ARCH_HELPER_WRITE_CB,
		[INJECT_HELPER_WRITE_CB_MSG_FIRST] =
			ARCH_HELPER_WRITE_CB_MSG_FIRST,
		[INJECT_HELPER_CHAIN] = ARCH_HELPER_CHAIN,
	};

	if (!s->stub || (unsigned int)h >= sizeof(arch_of) / sizeof(*arch_of))
		return 0;
	return s->stub - STUB_CODE_OFF + STUB_HELPERS_OFF +
	       arch_helper_off[arch_of[h]];
}

int inject_stub_range(const struct inject_session *s, uint64_t *lo,
		      uint64_t *hi)
{
	if (!s || !s->stub)
		return -ENOENT;
	*lo = s->stub - STUB_CODE_OFF;
	*hi = *lo + page_size();
	return 0;
}

const char *inject_arch_name(void)
{
	return arch_desc.name;
}

bool inject_pc_in_stub(const struct inject_session *s, uint64_t pc)
{
	uint64_t page = s && s->stub ? s->stub - STUB_CODE_OFF : 0;

	return page && pc >= page && pc - page < page_size();
}

int inject_check_syscall(struct inject_session *s, long nr,
			 const uint64_t *args, unsigned int nargs)
{
	uint64_t all[6] = { 0 };
	unsigned int i;
	char act[64];

	for (i = 0; i < nargs && i < 6; i++)
		all[i] = args[i];
	if (seccomp_check(s->sc, arch_audit, nr, all,
			  inject_helper(s, INJECT_HELPER_SYSCALL), act,
			  sizeof(act)))
		return 0;
	set_detail(s, "its seccomp filter would %s for system call %ld", act,
		   nr);
	return -EOPNOTSUPP;
}

int inject_syscall(struct inject_session *s, long nr, const uint64_t *args,
		   unsigned int nargs, int64_t *ret)
{
	struct inject_call c = { .fn = inject_helper(s, INJECT_HELPER_SYSCALL) };
	struct inject_result r;
	unsigned int i;
	int rc;

	if (nargs > INJECT_MAX_ARGS - 1)
		return -EINVAL;
	if (!c.fn)
		return -ENOEXEC;
	rc = inject_check_syscall(s, nr, args, nargs);
	if (rc)
		return rc;
	c.args[0] = (struct inject_arg){ .value = (uint64_t)nr };
	for (i = 0; i < nargs; i++)
		c.args[i + 1] = (struct inject_arg){ .value = args[i] };
	c.nargs = nargs + 1;
	rc = inject_call(s, &c, &r);
	if (!rc)
		*ret = (int64_t)r.ret;
	return rc;
}

pid_t inject_tid(const struct inject_session *s)
{
	return s->t.tid;
}

void inject_timings(const struct inject_session *s, struct inject_timings *t)
{
	*t = s->tm;
}

const char *inject_detail(const struct inject_session *s)
{
	return s->detail;
}

size_t inject_backtrace(const struct inject_session *s, uint64_t *pcs,
			size_t max)
{
	size_t n = s->npcs < max ? s->npcs : max;

	memcpy(pcs, s->pcs, n * sizeof(*pcs));
	return n;
}
