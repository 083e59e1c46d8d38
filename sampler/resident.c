/*
 * The memory memsnap's sampler holds in a process (sampler/sampler.h),
 * as the kernel counts it: the resident pages of each mapping it made
 * there, read from /proc/PID/smaps.  Those are the image (its code, its
 * control block and the page after it), the table, the page of stubs
 * and trampolines near an allocator linked into the program, and the
 * mirrors of the hooks:
 *
 *   7f3a1c200000-7f3a1c204000 r-xp 00000000 00:00 0   the image's code
 *   Rss:                  16 kB
 *   7f3a1c204000-7f3a1c210000 ---p 00000000 00:00 0   the gap
 *   7f3a1c210000-7f3a1c250000 rw-p 00000000 00:00 0   the control block
 *   Rss:                  92 kB
 *   7f3a0c000000-7f3a14100000 rw-p 00000000 00:00 0   the table
 *   Rss:                 1540 kB
 *
 * Nothing is stopped.
 */
#include "sampler/internal.h"

#include "common/util.h"
#include "proc/smaps.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct span {
	uint64_t lo, hi;
};

/* The bytes of @s's Rss within [@lo, @hi): all of it when the mapping
 * lies inside, its share by length when it reaches past (a mapping the
 * kernel merged with a neighbour). */
static uint64_t rss_within(const struct smap *s, uint64_t lo, uint64_t hi)
{
	uint64_t a = s->start > lo ? s->start : lo;
	uint64_t b = s->end < hi ? s->end : hi;

	if (a >= b || s->end <= s->start)
		return 0;
	if (a == s->start && b == s->end)
		return s->rss;
	return (uint64_t)((double)s->rss * (double)(b - a) /
			  (double)(s->end - s->start));
}

/* The mappings the sampler at @st made, from its control block @c: the
 * number put in @v (room for 3 + SAMPLER_NFN). */
static size_t spans_of(const struct sampler_status *st,
		       const struct sampler_ctl *c, struct span *v)
{
	uint64_t ps = page_size();
	size_t n = 0, f, k;

	v[n++] = (struct span){ st->image,
				st->image + ((SAMPLER_IMAGE_LEN + ps - 1) &
					     ~(ps - 1)) };
	if (c->table)
		v[n++] = (struct span){ c->table, c->table + c->table_len };
	if (c->patch_page)
		v[n++] = (struct span){ c->patch_page,
					c->patch_page + c->patch_page_len };
	/* a mirror is a jump in a mapping of mirrors: the mapping, once */
	for (f = 0; f < SAMPLER_NFN; f++) {
		if (!c->mirror[f])
			continue;
		for (k = 0; k < n && !(c->mirror[f] >= v[k].lo &&
				       c->mirror[f] < v[k].hi);
		     k++)
			;
		if (k == n)
			v[n++] = (struct span){ c->mirror[f],
						c->mirror[f] + 1 };
	}
	return n;
}

int sampler_resident(pid_t pid, struct sampler_status *st)
{
	struct span v[3 + SAMPLER_NFN];
	struct proc_memory m;
	struct sampler_ctl *c;
	size_t i, k, n;
	int rc;

	st->resident = 0;
	if (!st->image)
		return -ENOENT;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	rc = sampler_read_ctl(pid, st->ctl, c);
	if (rc == -ENODATA)
		rc = 0;	/* copied in, never switched on: the image */
	n = rc ? 0 : spans_of(st, c, v);
	free(c);
	if (rc)
		return rc;
	rc = proc_smaps_read(pid, &m);
	if (rc)
		return rc;
	for (i = 0; i < m.n; i++) {
		const struct smap *s = &m.v[i];

		for (k = 0; k < n; k++) {
			/* a mirror's span is one byte: its whole mapping */
			if (v[k].hi == v[k].lo + 1 && v[k].lo >= s->start &&
			    v[k].lo < s->end) {
				st->resident += s->rss;
				break;
			}
			if (v[k].hi != v[k].lo + 1 &&
			    rss_within(s, v[k].lo, v[k].hi)) {
				st->resident += rss_within(s, v[k].lo, v[k].hi);
				break;
			}
		}
	}
	proc_memory_free(&m);
	return 0;
}
