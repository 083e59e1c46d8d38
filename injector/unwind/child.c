/*
 * The sandboxed unwinder's child (unwind_wire.h): it takes the maps and
 * the jobs memsnap sends, runs injector/unwind/core.c on them, asks
 * memsnap for each page of the target's memory it needs, and sends the
 * frames back.  It trusts the wire no more than memsnap trusts it.
 */
#include "injector/unwind/wire.h"
#include "injector/unwind/core.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int uw_send(int fd, const void *buf, size_t len)
{
	ssize_t n;

	do
		n = write(fd, buf, len);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)len ? 0 : -EPIPE;
}

ssize_t uw_recv(int fd, void *buf, size_t len)
{
	ssize_t n;

	do
		n = read(fd, buf, len);
	while (n < 0 && errno == EINTR);
	return n;
}

/* The core's page source in the child: ask memsnap. */
static int child_page(void *arg, uint64_t addr, void *buf, bool index)
{
	struct uw_child *ch = arg;
	struct uw_want w = { .type = UW_WANT, .index = index, .addr = addr };
	static struct uw_page p;

	if (uw_send(ch->fd, &w, sizeof(w)) ||
	    uw_recv(ch->fd, &p, sizeof(p)) != (ssize_t)sizeof(p) ||
	    p.type != UW_PAGE || p.addr != addr)
		_exit(3);	/* memsnap went away or spoke nonsense */
	if (!p.ok)
		return -1;
	memcpy(buf, p.data, UNWIND_PAGE);
	return 0;
}

static int child_maps(struct uw_child *ch, const struct uw_maps *m, size_t len)
{
	if (len < sizeof(*m) || m->count > MAPS_CHUNK ||
	    len != sizeof(*m) + m->count * sizeof(m->v[0]) ||
	    m->total > MAPS_MAX || m->first != (m->first ? ch->nmaps : 0) ||
	    m->count > m->total - m->first || m->neh > UNWIND_EHFRAMES)
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
	return unwind_core_maps(ch->core, ch->maps, ch->nmaps, &m->extra,
				m->eh, m->neh);
}

static int child_jobs(struct uw_child *ch, const unsigned char *in, size_t len)
{
	struct uw_head h;
	size_t at = sizeof(h), out = sizeof(h);
	uint32_t i;

	memcpy(&h, in, sizeof(h));
	if (len < sizeof(h) || !h.count || h.count > JOBS_MAX)
		return -EPROTO;
	for (i = 0; i < h.count; i++) {
		struct uw_result r;
		struct uw_job j;
		struct unwind_job job;
		unsigned long reads;
		bool whole;

		if (len - at < sizeof(j))
			return -EPROTO;
		memcpy(&j, in + at, sizeof(j));
		at += sizeof(j);
		if (j.stack_len > STACK_MAX || len - at < j.stack_len ||
		    j.max > FRAMES_MAX)
			return -EPROTO;
		job = (struct unwind_job){
			.regs = j.regs, .stack_lo = j.stack_lo,
			.stack = j.stack_len ? in + at : NULL,
			.stack_len = j.stack_len, .budget = j.budget,
			.saved = j.saved, .cfi = j.flags & UW_JOB_CFI,
		};
		if (j.flags & UW_JOB_TOUCHED) {
			memset(ch->touched, 0, sizeof(ch->touched));
			job.touched = ch->touched;
		}
		at += j.stack_len;
		r.rc = unwind_core_run(ch->core, &job,
				       (uint64_t *)(void *)(ch->out + out +
							    sizeof(r)),
				       j.max, &whole, &reads);
		r.whole = whole;
		r.reads = reads;
		memcpy(ch->out + out, &r, sizeof(r));
		out += sizeof(r) + (r.rc > 0 ? (size_t)r.rc : 0) *
					   sizeof(uint64_t);
		if (job.touched) {
			memcpy(ch->out + out, ch->touched, TOUCHED_BYTES);
			out += TOUCHED_BYTES;
		}
	}
	if (at != len)
		return -EPROTO;
	h.type = UW_DONE;
	memcpy(ch->out, &h, sizeof(h));
	return uw_send(ch->fd, ch->out, out);
}

/* libunwind's start-up, before the filter: it opens a pipe once. */
int uw_child_prepare(void *arg)
{
	struct uw_child *ch = arg;

	ch->core = unwind_core_new(child_page, ch);
	ch->out = malloc(DONE_MAX);
	return ch->core && ch->out ? 0 : -ENOMEM;
}

int uw_child_serve(int fd, void *arg)
{
	struct uw_child *ch = arg;
	unsigned char *buf = malloc(MSG_MAX);
	int rc = 0;

	ch->fd = fd;
	if (!buf)
		return 2;
	while (!rc) {
		ssize_t n = uw_recv(fd, buf, MSG_MAX);
		uint32_t type;

		if (n <= 0)
			break;	/* memsnap is done */
		if ((size_t)n < sizeof(struct uw_head))
			return 2;
		memcpy(&type, buf, sizeof(type));
		if (type == UW_MAPS)
			rc = child_maps(ch, (const void *)buf, (size_t)n);
		else if (type == UW_JOBS)
			rc = child_jobs(ch, buf, (size_t)n);
		else
			rc = -EPROTO;
	}
	return rc ? 2 : 0;
}
