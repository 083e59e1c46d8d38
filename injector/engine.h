#ifndef MEMSNAP_INJECTOR_ENGINE_H
#define MEMSNAP_INJECTOR_ENGINE_H

/*
 * The call engine's own declarations, shared by its files and by no one
 * else: inject.c (the contract: open, getters), thread.c (choosing and
 * seizing one thread), mapline.c (its copy of the maps), stub.c (the
 * stub page), call.c (running a call), restore.c (putting the thread
 * back), world.c and world_patch.c (every thread stopped for a patch),
 * unwind.c (the sandboxed unwinder's memsnap side).  The protocol is
 * described at the top of inject.c.
 */

#include "proc/maps.h"
#include "proc/procinfo.h"
#include "proc/triage.h"
#include "proc/procfs.h"
#include "common/util.h"
#include "injector/arch.h"
#include "injector/syscalls.h"
#include "injector/inject.h"
#include "injector/mapline.h"
#include "injector/ptrace.h"
#include "injector/seccomp.h"
#include "injector/unwind.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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
#define GOOD_ENOUGH 90		/* see syscall_score() */

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
	bool list_all;		/* every thread listed, not the first good ones */
	struct thread_status tstat; /* the borrowed thread's, once stopped */
	struct seccomp_filters *sc; /* the thread's, NULL: none */
	bool stub_sc_ok;	/* the stub's syscall passes them */
	pid_t busy_by;		/* a tracer in the way of the last round */
	bool busy_memsnap;	/* ... and it is another memsnap */
	bool busy_wait;		/* ... or one that lets go soon (memsnap,
				   or a tracer that has just exited) */
	char busy_comm[32];
	uint64_t stack_lo, stack_hi; /* the borrowed thread's stack mapping */
	uint64_t stub;		/* the stub's code */
	uint64_t errno_location; /* to ask, before a call that may set it */
	bool errno_saved;
	uint64_t errno_addr;
	int errno_val;
	int timeout_ms;
	volatile int *interrupted;
	sigset_t oldmask;
	struct stale *stale;	/* seized, never stopped: detach later */
	struct unwinder *uw;	/* once a stack was unwound */
	/* /proc/PID/maps read before any thread is stopped (a process with
	 * 1000 threads has 2000 lines: ~1 ms that no thread should wait). */
	struct mapline *maps;
	size_t nmaps;
	unsigned int maps_gen;	/* bumped each time they are taken */
	unsigned int uw_maps_gen; /* the unwinder's copy is of this one */
	struct inject_timings tm;
	uint64_t pcs[MAX_FRAMES];
	size_t npcs;
	/* the failure said by inj_fail(): its rc, its kind (or
	 * INJ_KIND_OF_RC) and its line */
	int err_rc;
	int err_kind;
	char detail[512];
};

/* ---- /proc/PID/maps, the few things the engine needs ------------------ */

/*
 * The engine's one way to say what went wrong: it fails with @rc (the
 * return value), which means @kind here, or what the table of
 * errors.c says @rc means (INJ_KIND_OF_RC), and @fmt says what happened
 * in one line ("pid 4242 called execve during the call").  Said where
 * it is understood, for the rc it goes with: inject_diag() gives it for
 * that rc, composed with the table's words for that rc when the kind
 * is the table's.  Returns @rc.  (The thread choice's candidates, each
 * refused for a reason of its own, are listed by inj_why_add(): the
 * reasons behind its -EDEADLK.)
 */
#define INJ_KIND_OF_RC (-1)
int inj_fail(struct inject_session *s, int rc, int kind, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* inject_open()'s failure @rc into @o->diag (errors.c). */
void inj_open_diag(pid_t pid, const struct inject_opts *o, int rc);

void inj_why_add(const struct inject_opts *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

uint64_t inj_deadline_after(int ms);

void inj_mark_dead(struct inject_session *s, const struct stop *st);

bool inj_is_gone(const struct stop *st);

uint64_t inj_call_mask(uint64_t orig);

/* The engine's lines for @m, malloc'ed into *@out (NULL when empty). */
int inj_maplines(const struct maps *m, struct mapline **out);

int inj_maps_take(struct inject_session *s, const struct maps *m);

int inj_maps_snapshot(struct inject_session *s);

int inj_snapshot_each(struct inject_session *s,
		      int (*fn)(void *, const struct mapline *), void *arg);

bool inj_same_process(const struct inject_session *s);

int inj_choose_thread(struct inject_session *s, const struct inject_opts *o);

int inj_preflight(pid_t pid, const struct inject_opts *o);

int inj_ensure_stub(struct inject_session *s);

int inj_wait_syscall_stop(struct inject_session *s, uint64_t deadline,
			  uint64_t pc, long want, struct arch_peek *p);

void inj_describe_fault(struct inject_session *s);
/* Given up on a thread that is past the point where memsnap's frame puts
 * it back by itself: nothing more is done to it, and it is let go at
 * memsnap's exit.  -ETIMEDOUT; the caller says why (inj_fail()). */
int inj_left_healing(struct inject_session *s);

int inj_stack_write(struct inject_session *s, uint64_t addr,
		    const void *buf, size_t len);

int inj_save_errno(struct inject_session *s, uint64_t errno_location);

/* ---- checking a thread's stack (check.c) ---------------------------------- */

/*
 * Would the fast check of @ti pass, judged before the seizure from the
 * pc and stack /proc last showed (a thread asleep in a system call
 * keeps both)?  The unwinder's sandbox, a fork and its start-up, is
 * made before the stop only when it would not: a check that needs it
 * finds it ready, and the usual clean stack costs nothing more.  A
 * thread outside a system call, or one whose stack changed since, is
 * judged again at the stop, where the unwinder is started if needed.
 * *@top: the end of the stack's mapping, for a thread in a system call
 * (else 0).
 */
bool inj_looks_clean(struct inject_session *s, const struct inject_opts *o,
		     const struct thread_info *ti, uint64_t *top);

/*
 * The stopped, saved thread @tid may be called from: its stack pointer
 * in a writable mapping with STACK_HEADROOM below it (s->stack_lo and
 * s->stack_hi set), and no frame in a forbidden range, by the return
 * addresses on its stack or, when one of them looks like such a frame,
 * by the unwinder.  false: the reason added to why.
 */
bool inj_stack_safe(struct inject_session *s, const struct inject_opts *o,
		    pid_t tid);

#endif
