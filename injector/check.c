/*
 * The call engine: is a thread's stack safe to call from?  No frame in
 * the allocator, the dynamic loader, the unwinder or fork (the ranges
 * the caller forbids), judged from the return addresses on the stack
 * first and by the unwinder when any of them looks like one; and stack
 * enough below the stack pointer.  See injector/engine.h.
 */
#include "injector/engine.h"

#include <inttypes.h>
#include <stdlib.h>

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
 * the stack pointer and the top of the stack, or in a register at the
 * stop (arch_return_addresses(): AArch64's link register), so if none
 * of them points into a forbidden range after a call instruction
 * (arch_may_be_call_site()), no frame is in one.  A signal frame (the thread may
 * be on an alternate stack, its other frames elsewhere) or a stack too
 * deep to read sends the caller to the unwinder.  true: clean.
 */
static bool words_clean(const struct inject_session *s,
			const struct inject_opts *o, uint64_t sp, uint64_t end)
{
	const struct inject_range *r;
	uint64_t *w;
	size_t len, i;
	bool clean = true;

	sp &= ~(uint64_t)7;
	if (end <= sp || end - sp > STACK_SCAN_MAX)
		return false;
	len = (size_t)(end - sp) & ~(size_t)7;
	w = malloc(len);
	if (!w || proc_read_mem(s->pid, sp, w, len)) {
		free(w);
		return false;
	}
	for (i = 0; i < len / 8 && clean; i++) {
		uint64_t a = arch_strip_pac(w[i]);
		unsigned char code[8];

		if (arch_sigframe_marker(w[i])) {
			clean = false;
			continue;
		}
		if (!pc_forbidden(o, a, &r))
			continue;
		/* Data that points there (a function pointer) is harmless;
		 * a return address follows a call instruction. */
		if (proc_read_mem(s->pid, a - 8, code, sizeof(code)) ||
		    arch_may_be_call_site(code))
			clean = false;
	}
	free(w);
	return clean;
}

static bool stack_clean(struct inject_session *s, const struct inject_opts *o,
			uint64_t sp, uint64_t end)
{
	const struct inject_range *r;
	uint64_t ra[4];
	size_t i, nra = arch_return_addresses(s->ctx, ra, 4);

	if (pc_forbidden(o, arch_reg(s->ctx, ARCH_PC), &r))
		return false;
	for (i = 0; i < nra; i++)
		if (pc_forbidden(o, ra[i], &r))
			return false;
	return words_clean(s, o, sp, end);
}

/* (engine.h) */
bool inj_looks_clean(struct inject_session *s, const struct inject_opts *o,
		     const struct thread_info *ti, uint64_t *top)
{
	struct find_stack fs = { .sp = ti->sc_sp };
	const struct inject_range *r;

	*top = 0;
	if (ti->syscall < 0)
		return false;
	inj_snapshot_each(s, find_stack_cb, &fs);
	*top = fs.hi;
	if (pc_forbidden(o, ti->sc_pc, &r))
		return false;
	return fs.lo && words_clean(s, o, ti->sc_sp, fs.hi);
}


/*
 * The stack of the stopped thread @tid as the unwinder finds it: every
 * frame's pc outside the forbidden ranges, and the unwind whole.
 */
static bool frames_safe(struct inject_session *s, const struct inject_opts *o,
			pid_t tid)
{
	const struct inject_range *r;
	bool whole;
	int i, n;

	n = unwind_thread(s, tid, s->pcs, MAX_FRAMES, &whole);
	if (n < 0 && unwinder_why(s->uw)) {
		/* A hostile or corrupt stack or unwind table: the unwinder
		 * failed in its sandbox, memsnap goes on. */
		inj_why_add(o, "tid %d: a return address into the allocator "
			    "is on its stack, and %s", (int)tid,
			    unwinder_why(s->uw));
		return false;
	}
	if (n <= 0) {
		/* At least the pc itself must be checked. */
		s->pcs[0] = arch_reg(s->ctx, ARCH_PC);
		n = 1;
	}
	s->npcs = (size_t)n;
	for (i = 0; i < n; i++) {
		if (pc_forbidden(o, s->pcs[i], &r)) {
			inj_why_add(o, "tid %d: frame #%d at 0x%" PRIx64
				    " is in %s", (int)tid, i, s->pcs[i],
				    r->what ? r->what : "a forbidden range");
			return false;
		}
	}
	/* The word the fast check saw may belong to a frame past the
	 * last one found. */
	if (!whole) {
		inj_why_add(o, "tid %d: a return address into the allocator is "
			    "on its stack and the unwinder stopped at frame #%d "
			    "(0x%" PRIx64 ") before the outermost one",
			    (int)tid, n - 1, s->pcs[n - 1]);
		return false;
	}
	s->npcs = 0;
	return true;
}

bool inj_stack_safe(struct inject_session *s, const struct inject_opts *o,
		    pid_t tid)
{
	struct find_stack fs = { .sp = arch_reg(s->ctx, ARCH_SP) };

	inj_snapshot_each(s, find_stack_cb, &fs);
	if (!fs.lo && !inj_maps_snapshot(s))
		inj_snapshot_each(s, find_stack_cb, &fs); /* a new stack */
	if (!fs.lo || !fs.writable) {
		inj_why_add(o, "tid %d: stack pointer 0x%" PRIx64
			    " is not in a writable mapping", (int)tid, fs.sp);
		return false;
	}
	if (fs.sp - fs.lo < STACK_HEADROOM + arch_desc.red_zone) {
		inj_why_add(o, "tid %d: only %" PRIu64 " bytes of stack left below "
			    "0x%" PRIx64 " (need %d)", (int)tid,
			    fs.sp - fs.lo, fs.sp, STACK_HEADROOM);
		return false;
	}
	s->stack_lo = fs.lo;
	s->stack_hi = fs.hi;
	/* Something looks like a forbidden frame: unwind to be sure. */
	return stack_clean(s, o, fs.sp, fs.hi) || frames_safe(s, o, tid);
}
