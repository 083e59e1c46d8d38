/*
 * The borrowed thread's unwind (injector/unwind.h): the session's
 * unwinder (host.c) with the session's maps, the thread's stack sent
 * with the job in one read, and the unwind made before the stop from
 * the thread's pc and stack pointer alone, which stands for the one at
 * the stop when nothing it read has changed.
 */
#include "injector/unwind.h"

#include "injector/engine.h"
#include "injector/unwind/core.h"
#include "injector/unwind/ehfile.h"
#include "injector/unwind/unwinder_internal.h"
#include "injector/unwind/wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The session's unwinder, with the session's maps as they are now
 * (the engine may have read them again since the last unwind). */
static int session_unwinder(struct inject_session *s)
{
	struct mapline *v = NULL;

	if (!s->uw) {
		s->uw = uw_alloc(s->pid, NULL, 0, NULL);
		if (!s->uw)
			return -ENOMEM;
	} else if (s->uw_maps_gen == s->maps_gen) {
		return 0;
	}
	if (s->nmaps) {
		v = malloc(s->nmaps * sizeof(*v));
		if (!v)
			return -ENOMEM;
		memcpy(v, s->maps, s->nmaps * sizeof(*v));
	}
	free(s->uw->maps);
	s->uw->maps = v;
	s->uw->nmaps = s->nmaps;
	s->uw->neh = unwind_ehframes_find(s->pid, v, s->nmaps, s->uw->eh);
	s->uw->maps_sent = false;
	s->uw_maps_gen = s->maps_gen;
	return 0;
}

/* The stack from @sp up to @top, STACK_MAX bytes at most (*@len), in
 * a buffer to free(); NULL if it cannot be read. */
static unsigned char *stack_read(pid_t pid, uint64_t sp, uint64_t top,
				 size_t *len)
{
	unsigned char *b;

	*len = top - sp < STACK_MAX ? (size_t)(top - sp) : STACK_MAX;
	b = malloc(*len);
	if (b && proc_read_mem(pid, sp, b, *len)) {
		free(b);
		b = NULL;
	}
	return b;
}

void unwind_prepare(struct inject_session *s, uint64_t pc, uint64_t sp,
		    uint64_t top)
{
	/* a saved stack's rules (its copy and the file mappings, nothing
	 * live: the thread runs on), every frame's CFI judged as for a
	 * live thread */
	struct uw_job j = { .max = FRAMES_MAX, .saved = 1,
			    .flags = UW_JOB_CFI | UW_JOB_TOUCHED,
			    .stack_lo = sp, .budget = READ_BUDGET };
	struct unwind_out out;
	const unsigned char *stacks[1];
	struct warm *w;

	/* tried again at the unwind */
	if (session_unwinder(s) || uw_ready(s->uw))
		return;
	if (!s->tm.unwinder)
		s->tm.unwinder = UNWINDER_BEFORE_STOP;
	w = &s->uw->warm;
	free(w->stack);
	w->stack = NULL;
	w->n = 0;
	if (!top || top <= sp)
		return;
	w->pc = pc;
	w->sp = sp;
	w->maps_gen = s->maps_gen;
	w->stack = stack_read(s->pid, sp, top, &w->len);
	if (!w->stack)
		return;
	arch_unw_regs_pc_sp(&j.regs, pc, sp);
	j.stack_len = w->len;
	stacks[0] = w->stack;
	out = (struct unwind_out){ .pcs = w->pcs, .touched = w->touched };
	if (!uw_run_jobs(s->uw, &j, stacks, 1, PAGE_BUDGET, &out) &&
	    out.whole && out.n > 0)
		w->n = (size_t)out.n;
}

/* Does the unwind before the stop stand for this one, from @r with
 * @len bytes of @stack at its stack pointer, @max frames at most? */
static bool warm_holds(const struct inject_session *s,
		       const struct arch_unw_regs *r,
		       const unsigned char *stack, size_t len, size_t max)
{
	const struct warm *w = &s->uw->warm;
	size_t i;

	/* n == max: an unwind cut at @max frames would not be whole */
	if (!w->n || w->n >= max || s->maps_gen != w->maps_gen || !stack ||
	    r->v[arch_unw_pc] != w->pc || r->v[arch_unw_sp] != w->sp)
		return false;
	for (i = 0; i < w->len; i += 8) {
		size_t k = i / 8, n = w->len - i < 8 ? w->len - i : 8;

		if (!(w->touched[k / 64] >> (k % 64) & 1))
			continue;
		if (i + n > len || memcmp(stack + i, w->stack + i, n))
			return false;
	}
	return true;
}

int unwind_thread(struct inject_session *s, pid_t tid, uint64_t *pcs,
		  size_t max, bool *whole)
{
	struct uw_job j = {
		.max = (uint32_t)(max < FRAMES_MAX ? max : FRAMES_MAX),
		.budget = READ_BUDGET,
	};
	struct tracee t = { .pid = s->pid, .tid = tid, .seized = true,
			    .memfd = -1 };
	struct unwind_out out = { .pcs = pcs };
	unsigned char *stack = NULL;
	uint64_t sp;
	int rc;

	if (whole)
		*whole = false;
	if (!max)
		return 0;
	rc = session_unwinder(s);
	if (!rc && !s->uw->sb.pid && !s->tm.unwinder)
		s->tm.unwinder = UNWINDER_AT_STOP;
	if (!rc)
		rc = arch_unw_regs_read(&t, &j.regs);
	/* The borrowed thread's stack goes with the job, in one read,
	 * rather than a page at a time while the thread waits. */
	sp = j.regs.v[arch_unw_sp];
	if (!rc && tid == s->t.tid && sp >= s->stack_lo && sp < s->stack_hi) {
		size_t len;

		stack = stack_read(s->pid, sp, s->stack_hi, &len);
		if (stack) {
			j.stack_lo = sp;
			j.stack_len = len;
		}
	}
	if (!rc && warm_holds(s, &j.regs, stack, j.stack_len, j.max)) {
		memcpy(pcs, s->uw->warm.pcs, s->uw->warm.n * sizeof(*pcs));
		out.n = (int)s->uw->warm.n;
		out.whole = true;
		s->tm.unwind_warm = true;
	} else if (!rc) {
		const unsigned char *stacks[1] = { stack };
		uint64_t pages = s->uw->pages;

		rc = uw_run_jobs(s->uw, &j, stacks, 1, PAGE_BUDGET, &out);
		s->tm.unwind_pages += (unsigned int)(s->uw->pages - pages);
	}
	free(stack);
	if (rc)
		return rc;
	if (whole)
		*whole = out.whole;
	return out.n;
}
