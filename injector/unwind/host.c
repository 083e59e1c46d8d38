/*
 * The unwinder in a sandbox (injector/unwind.h).  libunwind parses the
 * target's unwind tables, and the target writes them: a bug in that
 * parser (libunwind 1.6 indexes an array with a CIE's return-address
 * column, unchecked) must cost a failed unwind, not root's memsnap.  So
 * the unwinder (injector/unwind/core.c) runs in a child with no rights
 * (common/sandbox.h), and memsnap only serves it pages of the target's
 * memory, by its own rules, and reads back a count and some numbers.
 *
 * The wire, one SOCK_SEQPACKET message each:
 *
 *   memsnap -> child   MAPS  the mappings, in chunks, with the extra range
 *                            and the objects whose .eh_frame has no
 *                            header (unwind_ehfile.c found it)
 *                      JOBS  some unwinds: registers, budget, a stack copy
 *                            (saved) each
 *                      PAGE  a page asked for, or "unreadable"
 *   child -> memsnap   WANT  a page of the target's memory
 *                      DONE  each unwind's frames, or -errno
 *
 * A dump sends its saved stacks JOBS_MAX at a time: one round trip for
 * many, since each is a switch between two processes.
 *
 * memsnap trusts nothing the child says: it answers only WANTs for the
 * pages the job may read (a saved thread: file mappings and the extra
 * range), at most a budget of them, within a time limit (the pages of
 * those .eh_frame sections, which the child walks once for their
 * tables, from a budget of their own: each page twice per child and
 * maps); it takes a DONE
 * of at most the unwinds and frames it asked for; anything else ends the
 * child.  A
 * child that dies or misbehaves is started again for the next unwind, a
 * few times at most.
 */
#include "injector/unwind.h"

#include "common/sandbox.h"
#include "injector/engine.h"
#include "injector/unwind/core.h"
#include "injector/unwind/ehfile.h"
#include "injector/unwind/unwinder_internal.h"
#include "injector/unwind/wire.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- memsnap's side ------------------------------------------------------ */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void end_child(struct unwinder *uw, const char *what)
{
	char st[64];

	if (!uw->sb.pid)
		return;
	/* how it ended, before the kill makes it "killed by SIGKILL" */
	sandbox_alive(&uw->sb);
	if (uw->sb.reaped)
		snprintf(uw->why, sizeof(uw->why), "the unwinder %s",
			 sandbox_status(&uw->sb, st, sizeof(st)));
	else
		snprintf(uw->why, sizeof(uw->why), "the unwinder %s", what);
	sandbox_stop(&uw->sb);
	uw->sb = (struct sandbox){ .fd = -1 };
	uw->maps_sent = false;
}

static int send_maps(struct unwinder *uw)
{
	size_t first = 0;
	struct uw_maps *m = malloc(sizeof(*m) +
				   MAPS_CHUNK * sizeof(m->v[0]));
	int rc = 0;

	if (!m)
		return -ENOMEM;
	do {
		size_t n = uw->nmaps - first;

		if (n > MAPS_CHUNK)
			n = MAPS_CHUNK;
		*m = (struct uw_maps){ .type = UW_MAPS, .first = (uint32_t)first,
				       .count = (uint32_t)n,
				       .total = (uint32_t)uw->nmaps,
				       .extra = uw->extra,
				       .neh = (uint32_t)uw->neh };
		memcpy(m->eh, uw->eh, uw->neh * sizeof(uw->eh[0]));
		memcpy(m->v, uw->maps + first, n * sizeof(m->v[0]));
		rc = uw_send(uw->sb.fd, m, sizeof(*m) + n * sizeof(m->v[0]));
		first += n;
	} while (!rc && first < uw->nmaps);
	free(m);
	uw->maps_sent = !rc;
	return rc;
}

/* The pages of the .eh_frame sections a new child (or new maps) may
 * want for its tables: each twice (a CIE read again, far back). */
static uint64_t eh_pages(const struct unwinder *uw)
{
	uint64_t n = 0;
	size_t i;

	for (i = 0; i < uw->neh; i++)
		n += 2 * (uw->eh[i].len / UNWIND_PAGE + 2);
	return n;
}

/* Is the page at @addr one of an .eh_frame's, and may the child still
 * have it for a table?  (Past that, pages are "unreadable": the walk
 * ends there.) */
static bool eh_page_allowed(struct unwinder *uw, uint64_t addr)
{
	size_t i;

	for (i = 0; i < uw->neh; i++)
		if (addr + UNWIND_PAGE > uw->eh[i].addr &&
		    addr < uw->eh[i].addr + uw->eh[i].len && uw->eh_pages) {
			uw->eh_pages--;
			return true;
		}
	return false;
}

/* A child ready for jobs: the one there, or a new one. */
int uw_ready(struct unwinder *uw)
{
	int rc;

	if (uw->sb.pid && uw->maps_sent)
		return 0;
	if (!uw->sb.pid) {
		struct uw_child ch = { .fd = -1 };

		if (uw->starts >= STARTS_MAX)
			return -EIO;	/* uw->why says why the last one ended */
		uw->starts++;
		/* @ch is the child's: fork gives it its own copy */
		rc = sandbox_start(&uw->sb, arch_audit, uw_child_prepare,
				   uw_child_serve, &ch);
		if (rc) {
			snprintf(uw->why, sizeof(uw->why), "the unwinder's "
				 "sandbox could not be made: %s",
				 strerror(-rc));
			uw->sb = (struct sandbox){ .fd = -1 };
			return rc;
		}
	}
	rc = send_maps(uw);
	if (rc)
		end_child(uw, "would not take the maps");
	uw->eh_pages = eh_pages(uw);	/* the child's tables are new */
	return rc;
}

/* May the child of a @saved job read the page at @addr? */
static bool page_allowed(const struct unwinder *uw, uint64_t addr, bool saved)
{
	size_t lo = 0, hi = uw->nmaps;

	if (!saved)
		return true;	/* a stopped thread: its stack is live */
	if (uw->extra.hi &&
	    addr >= (uw->extra.lo & ~(uint64_t)(UNWIND_PAGE - 1)) &&
	    addr < uw->extra.hi)
		return true;
	while (lo < hi) {	/* the maps are in order, as /proc has them */
		size_t mid = lo + (hi - lo) / 2;

		if (addr < uw->maps[mid].start)
			hi = mid;
		else if (addr >= uw->maps[mid].end)
			lo = mid + 1;
		else
			return uw->maps[mid].inode != 0;
	}
	return false;
}

/* The page @w asks for, or "unreadable" when @saved may not read it
 * or !@may. */
static int serve_page(struct unwinder *uw, const struct uw_want *w,
		      bool saved, bool may)
{
	static struct uw_page p;

	if (w->addr % UNWIND_PAGE)
		return -EPROTO;
	uw->pages++;
	p.type = UW_PAGE;
	p.addr = w->addr;
	p.ok = may && page_allowed(uw, w->addr, saved) &&
	       !proc_read_mem(uw->pid, w->addr, p.data, UNWIND_PAGE);
	return uw_send(uw->sb.fd, &p, sizeof(p));
}

/* Check DONE for the @n jobs @j and copy it out; -EPROTO if it lies. */
static int take_done(const unsigned char *m, size_t len,
		     const struct uw_job *j, size_t n, struct unwind_out *out)
{
	struct uw_head h;
	size_t at = sizeof(h), i;

	memcpy(&h, m, sizeof(h));
	if (h.count != n)
		return -EPROTO;
	for (i = 0; i < n; i++) {
		struct uw_result r;
		size_t frames;

		if (len - at < sizeof(r))
			return -EPROTO;
		memcpy(&r, m + at, sizeof(r));
		at += sizeof(r);
		frames = r.rc > 0 ? (size_t)r.rc : 0;
		if (r.rc > (int32_t)j[i].max || r.rc < -4095 ||
		    len - at < frames * sizeof(uint64_t))
			return -EPROTO;
		memcpy(out[i].pcs, m + at, frames * sizeof(uint64_t));
		at += frames * sizeof(uint64_t);
		if (j[i].flags & UW_JOB_TOUCHED) {
			if (len - at < TOUCHED_BYTES)
				return -EPROTO;
			memcpy(out[i].touched, m + at, TOUCHED_BYTES);
			at += TOUCHED_BYTES;
		}
		out[i].n = r.rc;
		out[i].whole = r.whole && r.reads < j[i].budget;
	}
	return at == len ? 0 : -EPROTO;
}

/*
 * Run the @n jobs @j (their stacks @stacks) in the child, the results
 * into @out.  0, or -errno for all of them with uw->why saying what went
 * wrong.
 */
int uw_run_jobs(struct unwinder *uw, const struct uw_job *j,
		const unsigned char *const *stacks, size_t n,
		unsigned long page_budget, struct unwind_out *out)
{
	struct uw_head h = { .type = UW_JOBS, .count = (uint32_t)n };
	struct iovec iov[1 + 2 * JOBS_MAX];
	uint64_t deadline = now_ms() + JOB_MS, pages = 0;
	size_t i, len = sizeof(h);
	int rc = uw_ready(uw);

	if (rc)
		return rc;	/* uw->why says why */
	iov[0] = (struct iovec){ &h, sizeof(h) };
	for (i = 0; i < n; i++) {
		iov[1 + 2 * i] = (struct iovec){ (void *)&j[i], sizeof(j[i]) };
		iov[2 + 2 * i] = (struct iovec){ (void *)stacks[i],
						 j[i].stack_len };
		len += sizeof(j[i]) + j[i].stack_len;
	}
	if (writev(uw->sb.fd, iov, (int)(1 + 2 * n)) != (ssize_t)len) {
		end_child(uw, "would not take the job");
		return -EIO;
	}
	for (;;) {
		struct pollfd pf = { .fd = uw->sb.fd, .events = POLLIN };
		uint64_t t = now_ms();
		ssize_t got;
		uint32_t type;

		if (t >= deadline || !(rc = poll(&pf, 1, (int)(deadline - t)))) {
			end_child(uw, "took too long");
			return -ETIMEDOUT;
		}
		if (rc < 0 && errno == EINTR)
			continue;	/* memsnap's own signal: it asks later */
		got = uw_recv(uw->sb.fd, uw->msg, DONE_MAX);
		if (got <= 0) {
			end_child(uw, "went away");
			return -EIO;
		}
		if ((size_t)got < sizeof(struct uw_head))
			break;
		memcpy(&type, uw->msg, sizeof(type));
		if (type == UW_WANT && (size_t)got == sizeof(struct uw_want)) {
			const struct uw_want *w = (const void *)uw->msg;

			if (w->index > 1)
				break;
			if (!w->index && pages++ >= page_budget) {
				end_child(uw, "wanted too many pages");
				return -E2BIG;
			}
			if (serve_page(uw, w, j[0].saved,
				       !w->index || eh_page_allowed(uw, w->addr)))
				break;
			continue;
		}
		if (type != UW_DONE ||
		    take_done(uw->msg, (size_t)got, j, n, out))
			break;
		uw->why[0] = '\0';
		for (i = 0; i < n; i++)
			if (out[i].n < 0 && !uw->why[0])
				snprintf(uw->why, sizeof(uw->why),
					 "the unwinder failed: %s",
					 strerror(-out[i].n));
		return 0;
	}
	end_child(uw, "spoke out of turn");
	return -EPROTO;
}

struct unwinder *uw_alloc(pid_t pid, struct mapline *maps, size_t nmaps,
			  const struct unwind_code *extra)
{
	struct unwinder *uw = calloc(1, sizeof(*uw));

	if (!uw)
		return NULL;
	uw->msg = malloc(DONE_MAX);
	if (!uw->msg) {
		free(uw);
		return NULL;
	}
	uw->pid = pid;
	uw->sb = (struct sandbox){ .fd = -1 };
	uw->maps = maps;
	uw->nmaps = nmaps;
	if (extra)
		uw->extra = *extra;
	return uw;
}

struct unwinder *unwinder_new(pid_t pid, const struct maps *maps,
			      const struct unwind_code *extra)
{
	struct mapline *v;
	struct unwinder *uw;

	if (inj_maplines(maps, &v))
		return NULL;
	uw = uw_alloc(pid, v, maps->n, extra);
	if (!uw)
		free(v);
	else
		uw->neh = unwind_ehframes_find(pid, v, maps->n, uw->eh);
	return uw;
}

void unwinder_free(struct unwinder *uw)
{
	if (!uw)
		return;
	end_child(uw, "ended");
	free(uw->warm.stack);
	free(uw->maps);
	free(uw->msg);
	free(uw);
}

const char *unwinder_why(const struct unwinder *uw)
{
	return uw && uw->why[0] ? uw->why : NULL;
}

uint64_t unwinder_pages(const struct unwinder *uw)
{
	return uw->pages;
}

int unwind_saved(struct unwinder *uw, const struct unwind_saved *sv,
		 size_t n, size_t max, struct unwind_out *out)
{
	struct uw_job j[JOBS_MAX];
	const unsigned char *stacks[JOBS_MAX];
	size_t i, done = 0;
	int rc = 0;

	while (done < n && !rc) {
		size_t k = 0, bytes = 0;

		for (; done + k < n && k < JOBS_MAX; k++) {
			const struct unwind_saved *s = &sv[done + k];
			size_t len = s->stack && s->stack_len <= STACK_MAX ?
					     s->stack_len : 0;

			if (k && bytes + len > JOBS_BYTES)
				break;
			bytes += len;
			j[k] = (struct uw_job){
				.max = (uint32_t)(max < FRAMES_MAX ?
							  max : FRAMES_MAX),
				.saved = 1, .stack_lo = s->stack_lo,
				.stack_len = len, .budget = SAVED_READ_BUDGET,
			};
			unwind_regs_numbered(s->regs, s->regnums, s->nregs,
					     &j[k].regs);
			stacks[k] = s->stack;
		}
		rc = uw_run_jobs(uw, j, stacks, k, SAVED_PAGE_BUDGET * k,
			      out + done);
		if (rc)
			for (i = done; i < done + k; i++)
				out[i].n = rc;
		done += k;
	}
	return rc;
}
