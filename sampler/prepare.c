/*
 * What prof on --sampler resolves before any thread is stopped
 * (sampler/sampler.h, sampler_prepare()): the functions of the malloc
 * family as the process binds them, the GOT slots that may reach them,
 * and the entry points of an allocator linked into the program, their
 * bodies read.  All of it comes from the view's objects and the
 * process's memory, none of it needs the process stopped, and a symbol
 * lookup may open an object's file: so sampler_start(), in the stop,
 * only reads the slots' values and writes.
 */
#include "sampler/internal.h"

#include "allocators/allocator.h"
#include "common/util.h"
#include "symbols/objects.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const struct sampler_hook *hook_named(const char *name)
{
	size_t i;

	for (i = 0; i < sampler_nhooks; i++)
		if (!strcmp(sampler_hooks[i].name, name))
			return &sampler_hooks[i];
	return NULL;
}

/*
 * The functions the process binds, by hook; the C++ operators only
 * where the object that serves malloc defines operator new itself (an
 * operator new on top of malloc is seen at its malloc, and hooking both
 * would count its bytes twice).
 */
static void bind_all(struct objects *os, const struct detection *det,
		     struct sampler_prep *p)
{
	struct symbol m, n, sym;
	size_t i;

	p->cxx = !alloc_bound_in(os, det, "malloc", &m) &&
		 !alloc_bound_in(os, det, "_Znwm", &n) && m.obj == n.obj;
	for (i = 0; i < sampler_nhooks; i++)
		if ((!sampler_hooks[i].cxx || p->cxx) &&
		    !alloc_bound_in(os, det, sampler_hooks[i].name, &sym))
			p->bound[sampler_hooks[i].fn] = sym.addr;
	/* the hook of reallocarray calls realloc */
	if (!p->bound[SAMPLER_REALLOC])
		p->bound[SAMPLER_REALLOCARRAY] = 0;
}

struct got_scan {
	struct sampler_prep *p;
	struct object *obj;
};

/* A GOT slot of s->obj named for a function the process binds: kept,
 * to be read in the stop. */
static int keep_slot(void *arg, const char *name, uint64_t slot, bool plt)
{
	struct got_scan *s = arg;
	struct sampler_prep *p = s->p;
	const struct sampler_hook *h = hook_named(name);

	if (!h || (h->cxx && !p->cxx) || !p->bound[h->fn])
		return 0;
	if (array_grow((void **)&p->got, &p->cap, p->ngot + 1,
		       sizeof(*p->got)))
		return -ENOMEM;
	p->got[p->ngot++] = (struct sampler_got){ .slot = slot,
						   .obj = s->obj, .h = h,
						   .plt = plt };
	return 0;
}

struct sampler_prep *sampler_prepare(pid_t pid, struct objects *os,
				     const struct maps *maps,
				     const struct detection *det)
{
	struct sampler_prep *p = calloc(1, sizeof(*p));
	struct got_scan s = { .p = p };
	size_t i;

	if (!p)
		return NULL;
	bind_all(os, det, p);
	sampler_stack_bounds(pid, os, maps, p);
	p->linked = sampler_linked_allocator(os, det);
	if (p->linked)
		sampler_direct_find(os, pid, p->linked, p);
	for (i = 0; i < os->n; i++) {
		s.obj = &os->v[i];
		if (object_each_got_slot(os, s.obj, keep_slot, &s) ==
		    -ENOMEM) {
			sampler_prep_free(p);
			return NULL;
		}
	}
	return p;
}

void sampler_prep_free(struct sampler_prep *p)
{
	size_t i;

	if (!p)
		return;
	for (i = 0; i < p->nentries; i++)
		free(p->entries[i].code);
	free(p->got);
	free(p);
}
