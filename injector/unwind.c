/*
 * The unwinder in a sandbox (injector/unwind.h).  libunwind parses the
 * target's unwind tables, and the target writes them: a bug in that
 * parser (libunwind 1.6 indexes an array with a CIE's return-address
 * column, unchecked) must cost a failed unwind, not root's memsnap.  So
 * the unwinder (injector/unwind_core.c) runs in a child with no rights
 * (common/sandbox.h), and memsnap only serves it pages of the target's
 * memory, by its own rules, and reads back a count and some numbers.
 *
 * The wire, one SOCK_SEQPACKET message each:
 *
 *   memsnap -> child   MAPS  the mappings, in chunks, then the extra range
 *                      JOB   registers, budget, a stack copy (saved)
 *                      PAGE  a page asked for, or "unreadable"
 *   child -> memsnap   WANT  a page of the target's memory
 *                      DONE  the frames, or -errno
 *
 * memsnap trusts nothing the child says: it answers only WANTs for the
 * pages the job may read (a saved thread: file mappings and the extra
 * range), at most a budget of them, within a time limit; it takes a DONE
 * of at most the frames it asked for; anything else ends the child.  A
 * child that dies or misbehaves is started again for the next unwind, a
 * few times at most.
 */
#include "injector/unwind.h"

#include "common/sandbox.h"
#include "injector/engine.h"
#include "injector/unwind_core.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* Memory reads one unwind of a stopped thread may make, and one of a
 * saved stack of the many a dump unwinds. */
#define READ_BUDGET 200000
#define SAVED_READ_BUDGET 20000
/* Pages memsnap serves one unwind, and the time it waits for one. */
#define PAGE_BUDGET 4096
#define SAVED_PAGE_BUDGET 512
#define JOB_MS 5000
/* Children started for one unwinder, at most. */
#define STARTS_MAX 4

#define FRAMES_MAX 256
#define STACK_MAX (64u << 10)
#define MAPS_CHUNK 1024u
#define MAPS_MAX (1u << 20)

enum uw_type { UW_MAPS = 1, UW_JOB, UW_PAGE, UW_WANT, UW_DONE };

struct uw_maps {
	uint32_t type, first, count, total;
	struct unwind_code extra;
	struct mapline v[];
};

struct uw_job {
	uint32_t type, max;
	uint64_t stack_lo, stack_len, budget;
	uint32_t saved, pad;
	struct arch_unw_regs regs;
	/* then stack_len bytes */
};

struct uw_page {
	uint32_t type;
	int32_t ok;
	uint64_t addr;
	unsigned char data[UNWIND_PAGE];
};

struct uw_want {
	uint32_t type, pad;
	uint64_t addr;
};

struct uw_done {
	uint32_t type;
	int32_t rc;		/* frames, or -errno */
	uint32_t whole, pad;
	uint64_t reads;
	uint64_t pcs[FRAMES_MAX];
};

#define MSG_MAX (sizeof(struct uw_job) + STACK_MAX)

struct unwinder {
	pid_t pid;
	struct sandbox sb;
	unsigned int starts;
	struct mapline *maps;
	size_t nmaps;
	struct unwind_code extra;
	bool maps_sent;
	unsigned long pages;	/* served to the unwind under way */
	char why[160];		/* why the last unwind failed, or "" */
};

/* ---- the child ----------------------------------------------------------- */

struct child {
	int fd;
	struct unwind_core *core;
	struct mapline *maps;
	uint32_t nmaps;
};

static int send_msg(int fd, const void *buf, size_t len)
{
	ssize_t n;

	do
		n = write(fd, buf, len);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)len ? 0 : -EPIPE;
}

static ssize_t recv_msg(int fd, void *buf, size_t len)
{
	ssize_t n;

	do
		n = read(fd, buf, len);
	while (n < 0 && errno == EINTR);
	return n;
}

/* The core's page source in the child: ask memsnap. */
static int child_page(void *arg, uint64_t addr, void *buf)
{
	struct child *ch = arg;
	struct uw_want w = { .type = UW_WANT, .addr = addr };
	static struct uw_page p;

	if (send_msg(ch->fd, &w, sizeof(w)) ||
	    recv_msg(ch->fd, &p, sizeof(p)) != (ssize_t)sizeof(p) ||
	    p.type != UW_PAGE || p.addr != addr)
		_exit(3);	/* memsnap went away or spoke nonsense */
	if (!p.ok)
		return -1;
	memcpy(buf, p.data, UNWIND_PAGE);
	return 0;
}

static int child_maps(struct child *ch, const struct uw_maps *m, size_t len)
{
	if (len < sizeof(*m) || m->count > MAPS_CHUNK ||
	    len != sizeof(*m) + m->count * sizeof(m->v[0]) ||
	    m->total > MAPS_MAX || m->first != (m->first ? ch->nmaps : 0) ||
	    m->count > m->total - m->first)
		return -EPROTO;
	if (!m->first) {
		free(ch->maps);
		ch->maps = calloc(m->total ? m->total : 1, sizeof(*ch->maps));
		if (!ch->maps)
			return -ENOMEM;
	}
	memcpy(ch->maps + m->first, m->v, m->count * sizeof(m->v[0]));
	ch->nmaps = m->first + m->count;
	if (ch->nmaps < m->total)
		return 0;
	return unwind_core_maps(ch->core, ch->maps, ch->nmaps, &m->extra);
}

static int child_job(struct child *ch, const struct uw_job *j, size_t len)
{
	static struct uw_done d;
	struct unwind_job job;
	unsigned long reads;
	bool whole;

	if (len < sizeof(*j) || j->stack_len > STACK_MAX ||
	    len != sizeof(*j) + j->stack_len || j->max > FRAMES_MAX)
		return -EPROTO;
	job = (struct unwind_job){
		.regs = j->regs, .stack_lo = j->stack_lo,
		.stack = j->stack_len ? (const unsigned char *)(j + 1) : NULL,
		.stack_len = j->stack_len, .budget = j->budget,
		.saved = j->saved,
	};
	d.type = UW_DONE;
	d.rc = unwind_core_run(ch->core, &job, d.pcs, j->max, &whole, &reads);
	d.whole = whole;
	d.reads = reads;
	return send_msg(ch->fd, &d, offsetof(struct uw_done, pcs) +
			(d.rc > 0 ? (size_t)d.rc : 0) * sizeof(d.pcs[0]));
}

/* libunwind's start-up, before the filter: it opens a pipe once. */
static int prepare(void *arg)
{
	struct child *ch = arg;

	ch->core = unwind_core_new(child_page, ch);
	return ch->core ? 0 : -ENOMEM;
}

static int serve(int fd, void *arg)
{
	struct child *ch = arg;
	void *buf = malloc(MSG_MAX);
	int rc = 0;

	ch->fd = fd;
	if (!buf)
		return 2;
	while (!rc) {
		ssize_t n = recv_msg(fd, buf, MSG_MAX);
		uint32_t type;

		if (n <= 0)
			break;	/* memsnap is done */
		if ((size_t)n < sizeof(type))
			return 2;
		memcpy(&type, buf, sizeof(type));
		if (type == UW_MAPS)
			rc = child_maps(ch, buf, (size_t)n);
		else if (type == UW_JOB)
			rc = child_job(ch, buf, (size_t)n);
		else
			rc = -EPROTO;
	}
	return rc ? 2 : 0;
}

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
				       .extra = uw->extra };
		memcpy(m->v, uw->maps + first, n * sizeof(m->v[0]));
		rc = send_msg(uw->sb.fd, m, sizeof(*m) + n * sizeof(m->v[0]));
		first += n;
	} while (!rc && first < uw->nmaps);
	free(m);
	uw->maps_sent = !rc;
	return rc;
}

/* A child ready for a job: the one there, or a new one. */
static int ready(struct unwinder *uw)
{
	int rc;

	if (uw->sb.pid && uw->maps_sent)
		return 0;
	if (!uw->sb.pid) {
		struct child ch = { .fd = -1 };

		if (uw->starts >= STARTS_MAX)
			return -EIO;	/* uw->why says why the last one ended */
		uw->starts++;
		/* @ch is the child's: fork gives it its own copy */
		rc = sandbox_start(&uw->sb, arch_audit, prepare, serve, &ch);
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
	return rc;
}

/* May the child of a @saved job read the page at @addr? */
static bool page_allowed(const struct unwinder *uw, uint64_t addr, bool saved)
{
	size_t i;

	if (!saved)
		return true;	/* a stopped thread: its stack is live */
	if (uw->extra.hi && addr >= (uw->extra.lo & ~(uint64_t)(UNWIND_PAGE - 1)) &&
	    addr < uw->extra.hi)
		return true;
	for (i = 0; i < uw->nmaps; i++)
		if (uw->maps[i].inode && addr >= uw->maps[i].start &&
		    addr < uw->maps[i].end)
			return true;
	return false;
}

static int serve_page(struct unwinder *uw, const struct uw_want *w,
		      bool saved, unsigned long budget)
{
	static struct uw_page p;

	if (w->addr % UNWIND_PAGE || ++uw->pages > budget)
		return -E2BIG;
	p.type = UW_PAGE;
	p.addr = w->addr;
	p.ok = page_allowed(uw, w->addr, saved) &&
	       !proc_read_mem(uw->pid, w->addr, p.data, UNWIND_PAGE);
	return send_msg(uw->sb.fd, &p, sizeof(p));
}

/*
 * Run @j (with @stack) in the child: the frames into @pcs, or -errno with
 * uw->why saying what went wrong.
 */
static int run_job(struct unwinder *uw, const struct uw_job *j,
		   const unsigned char *stack, uint64_t *pcs, bool *whole)
{
	static struct uw_done d;
	struct iovec iov[2] = {
		{ (void *)j, sizeof(*j) },
		{ (void *)stack, j->stack_len },
	};
	uint64_t deadline = now_ms() + JOB_MS;
	unsigned long budget = j->saved ? SAVED_PAGE_BUDGET : PAGE_BUDGET;
	int rc = ready(uw);

	uw->why[0] = '\0';
	if (rc)
		return rc;
	uw->pages = 0;
	if (writev(uw->sb.fd, iov, j->stack_len ? 2 : 1) !=
	    (ssize_t)(sizeof(*j) + j->stack_len)) {
		end_child(uw, "would not take the job");
		return -EIO;
	}
	for (;;) {
		struct pollfd pf = { .fd = uw->sb.fd, .events = POLLIN };
		uint64_t t = now_ms();
		ssize_t n;
		uint32_t type;

		if (t >= deadline || poll(&pf, 1, (int)(deadline - t)) == 0) {
			end_child(uw, "took too long");
			return -ETIMEDOUT;
		}
		n = recv_msg(uw->sb.fd, &d, sizeof(d));
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			end_child(uw, "went away");
			return -EIO;
		}
		if ((size_t)n < sizeof(type))
			break;
		memcpy(&type, &d, sizeof(type));
		if (type == UW_WANT && (size_t)n == sizeof(struct uw_want)) {
			rc = serve_page(uw, (const struct uw_want *)(void *)&d,
					j->saved, budget);
			if (rc == -E2BIG) {
				end_child(uw, "wanted too many pages");
				return -E2BIG;
			}
			if (rc)
				break;
			continue;
		}
		if (type != UW_DONE || (size_t)n < offsetof(struct uw_done, pcs) ||
		    d.rc > (int32_t)j->max ||
		    (size_t)n != offsetof(struct uw_done, pcs) +
					 (d.rc > 0 ? (size_t)d.rc : 0) *
						 sizeof(d.pcs[0]))
			break;
		if (d.rc < 0) {
			snprintf(uw->why, sizeof(uw->why), "the unwinder "
				 "failed: %s", strerror(-d.rc));
			return d.rc < -4095 ? -EIO : d.rc;
		}
		memcpy(pcs, d.pcs, (size_t)d.rc * sizeof(*pcs));
		*whole = d.whole && d.reads < j->budget;
		return d.rc;
	}
	end_child(uw, "spoke out of turn");
	return -EPROTO;
}

static struct unwinder *unwinder_alloc(pid_t pid, struct mapline *maps,
				       size_t nmaps,
				       const struct unwind_code *extra)
{
	struct unwinder *uw = calloc(1, sizeof(*uw));

	if (!uw)
		return NULL;
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
	uw = unwinder_alloc(pid, v, maps->n, extra);
	if (!uw)
		free(v);
	return uw;
}

void unwinder_free(struct unwinder *uw)
{
	if (!uw)
		return;
	end_child(uw, "ended");
	free(uw->maps);
	free(uw);
}

const char *unwinder_why(const struct unwinder *uw)
{
	return uw && uw->why[0] ? uw->why : NULL;
}

int unwind_saved(struct unwinder *uw, const struct unwind_saved *sv,
		 uint64_t *pcs, size_t max)
{
	struct uw_job j = {
		.type = UW_JOB,
		.max = (uint32_t)(max < FRAMES_MAX ? max : FRAMES_MAX),
		.stack_lo = sv->stack_lo,
		.stack_len = sv->stack && sv->stack_len <= STACK_MAX ?
				     sv->stack_len : 0,
		.budget = SAVED_READ_BUDGET,
		.saved = 1,
	};
	bool whole;

	if (!max)
		return 0;
	arch_unw_regs_saved(sv->regs, &j.regs);
	return run_job(uw, &j, sv->stack, pcs, &whole);
}

int unwind_thread(struct inject_session *s, pid_t tid, uint64_t *pcs,
		  size_t max, bool *whole)
{
	struct uw_job j = {
		.type = UW_JOB,
		.max = (uint32_t)(max < FRAMES_MAX ? max : FRAMES_MAX),
		.budget = READ_BUDGET,
	};
	struct tracee t = { .pid = s->pid, .tid = tid, .seized = true,
			    .memfd = -1 };
	struct mapline *v = NULL;
	bool w = false;
	int rc;

	if (whole)
		*whole = false;
	if (!max)
		return 0;
	if (!s->uw) {
		s->uw = unwinder_alloc(s->pid, NULL, 0, NULL);
		if (!s->uw)
			return -ENOMEM;
	}
	/* The session's maps, as they are now (it may have read them
	 * again since): a stopped thread's unwind is rare, they are sent
	 * each time. */
	if (s->nmaps) {
		v = malloc(s->nmaps * sizeof(*v));
		if (!v)
			return -ENOMEM;
		memcpy(v, s->maps, s->nmaps * sizeof(*v));
	}
	free(s->uw->maps);
	s->uw->maps = v;
	s->uw->nmaps = s->nmaps;
	s->uw->maps_sent = false;
	rc = arch_unw_regs_read(&t, &j.regs);
	if (rc)
		return rc;
	rc = run_job(s->uw, &j, NULL, pcs, &w);
	if (whole)
		*whole = w;
	return rc;
}
