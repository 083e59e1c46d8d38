/*
 * Finding memsnap's sampler in a process (sampler/sampler.h): its image
 * by content among the maps, its control block read and checked, and
 * the ranges no borrowed thread may be in.  Nothing is stopped.
 */
#include "sampler/internal.h"

#include "allocators/allocator.h"
#include "common/util.h"
#include "proc/maps.h"
#include "proc/procfs.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The image, assembled in by sampler/image.S. */
extern const unsigned char sampler_image[];

/* An anonymous r-x mapping just the size of the code, holding it. */
static uint64_t find_image(pid_t pid, const struct maps *maps)
{
	uint64_t len = (CODE_LEN + page_size() - 1) & ~(page_size() - 1);
	unsigned char *buf = malloc(CODE_LEN);
	uint64_t found = 0;
	size_t i;

	if (!buf)
		return 0;
	for (i = 0; i < maps->n && !found; i++) {
		const struct map_entry *e = &maps->v[i];

		if (e->path || e->end - e->start != len ||
		    e->prot != (MAP_PROT_READ | MAP_PROT_EXEC) || e->shared)
			continue;
		if (!proc_read_mem(pid, e->start, buf, CODE_LEN) &&
		    !memcmp(buf, sampler_image, CODE_LEN))
			found = e->start;
	}
	free(buf);
	return found;
}

void sampler_fence(const struct sampler_status *st, struct alloc_fence *f)
{
	if (!st->image)
		return;
	alloc_fence_add(f, st->image, st->image + CODE_LEN,
			"memsnap's sampler");
	/* a trampoline runs the allocator's first instructions */
	if (st->patch_page)
		alloc_fence_add(f, st->patch_page,
				st->patch_page + st->patch_page_len,
				"memsnap's sampler trampolines");
}

int sampler_read_ctl(pid_t pid, uint64_t ctl, struct sampler_ctl *c)
{
	int rc = proc_read_mem(pid, ctl, c, CTL_HEAD);

	if (rc)
		return rc;
	if (!c->version && !c->signature[0] && !c->table && !c->nslots)
		return -ENODATA;	/* copied in, never switched on */
	if (memcmp(c->signature, SAMPLER_SIGNATURE, sizeof(c->signature)) ||
	    c->version != SAMPLER_VERSION)
		return -EPROTO;
	/* the geometry memsnap makes, no other: a dump's cost is bounded
	 * by it (dump.c) */
	if (c->table && (c->nrecs < NRECS_MIN ||
			 (c->nrecs & (c->nrecs - 1)) ||
			 c->nrecs > NRECS_MAX ||
			 !sampler_stack_bytes_ok(c->stack_bytes) ||
			 c->table_len != sampler_table_len(c->nrecs,
							   c->stack_bytes)))
		return -EPROTO;
	return 0;
}

/* The counts every thread slot of @c keeps, summed into @st (the
 * slots read from the control block at @ctl; none if they cannot be). */
static void sum_threads(pid_t pid, uint64_t ctl, struct sampler_ctl *c,
			struct sampler_status *st)
{
	size_t i;

	if (proc_read_mem(pid, ctl + offsetof(struct sampler_ctl, threads),
			  c->threads, sizeof(c->threads)))
		return;
	for (i = 0; i < SAMPLER_NTHREADS; i++) {
		st->samples += c->threads[i].samples;
		st->freed += c->threads[i].freed;
		st->dropped += c->threads[i].dropped;
		st->plain += c->threads[i].plain;
	}
}

int sampler_read_at(pid_t pid, uint64_t image, struct sampler_status *st,
		    struct sampler_ctl *c)
{
	int rc;

	memset(st, 0, sizeof(*st));
	if (!image)
		return -ENOENT;
	st->image = image;
	st->ctl = image + SAMPLER_OFF_sampler_ctl;
	rc = sampler_read_ctl(pid, st->ctl, c);
	if (!rc) {
		st->active = c->active != 0;
		st->mean = c->mean;
		st->nrecs = c->nrecs;
		st->stack_bytes = c->stack_bytes;
		sum_threads(pid, st->ctl, c, st);
		st->slots = c->nslots;
		st->started = c->started;
		st->dlopened = c->dlopened;
		st->stacks = c->copy == SAMPLER_COPY_VM_READV;
		st->patch_page = c->patch_page;
		st->patch_page_len = c->patch_page_len;
		st->since = c->since;
		st->lease_until = c->lease_until;
		st->lapsed_at = c->lapsed_at;
		st->table = c->table;
		st->table_len = c->table_len;
	}
	return rc;
}

int sampler_find(pid_t pid, const struct maps *maps, struct sampler_status *st)
{
	struct sampler_ctl *c = malloc(sizeof(*c));
	int rc;

	memset(st, 0, sizeof(*st));
	if (!c)
		return -ENOMEM;
	rc = sampler_read_at(pid, find_image(pid, maps), st, c);
	if (!rc)
		st->entries = sampler_direct_count(pid, c);
	free(c);
	/* Copied in by a memsnap killed before its first switch-on: a
	 * sampler, off, with no table yet. */
	return rc == -ENODATA ? 0 : rc;
}

