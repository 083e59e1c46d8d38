/*
 * The GOT slots `prof on` swaps (sampler/sampler.c switches them): each
 * slot prepare.c listed, read on the stopped thread and chosen when it
 * still reaches the function the process binds, its page's protection
 * and its hook's mirror decided; and the mirrors themselves, checked
 * or made.
 */
#include "sampler/internal.h"

#include "allocators/allocator.h"
#include "common/util.h"
#include "proc/maps.h"
#include "proc/procfs.h"
#include "symbols/objects.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

static const struct map_entry *map_at(const struct maps *m, uint64_t addr)
{
	size_t i;

	for (i = 0; i < m->n; i++)
		if (addr >= m->v[i].start && addr < m->v[i].end)
			return &m->v[i];
	return NULL;
}

static bool is_hook(const struct slot_scan *sc, uint64_t v)
{
	size_t i;

	for (i = 0; i < sampler_nhooks; i++)
		if (v == sc->image + sampler_hooks[i].off)
			return true;
	for (i = 0; i < SAMPLER_NFN; i++)
		if (sc->m.at[i] && v == sc->m.at[i])
			return true;
	return false;
}

/* An object with a swapped or known slot, counted once (its slots are
 * in a row: prepare.c keeps them in the order of the objects). */
static void count_object(struct slot_scan *sc, const struct object *obj)
{
	if (sc->counted != obj) {
		sc->counted = obj;
		sc->r->objects++;
	}
}

int sampler_scan_slot(struct slot_scan *sc, const struct sampler_got *g)
{
	const struct map_entry *e;
	struct sampler_slot *v;
	uint64_t cur;

	if (proc_read_mem(alloc_pid(sc->s), g->slot, &cur, sizeof(cur)))
		return 0;
	if (is_hook(sc, cur)) {
		sc->r->known++;
		count_object(sc, g->obj);
		return 0;
	}
	if (cur != sc->p->bound[g->h->fn] &&
	    !(g->plt && cur >= g->obj->lo && cur < g->obj->hi)) {
		sc->r->other++;
		return 0;
	}
	e = map_at(sc->maps, g->slot);
	if (!e)
		return 0;
	if (array_grow((void **)&sc->v, &sc->cap, sc->n + 1, sizeof(*sc->v)))
		return -ENOMEM;
	v = &sc->v[sc->n];
	*v = (struct sampler_slot){ .slot = g->slot, .from = cur,
				    .to = sc->image + g->h->off };
	if (!(e->prot & MAP_PROT_WRITE)) {
		/* to its mirror by memsnap, a byte written; else by the
		 * image, the page made writable around the swap (kept
		 * for a mirror too: off falls back to it) */
		bool poke = sampler_mirror_of(&sc->m, g->h->fn, cur);

		if (!poke && !sc->can_mprotect) {
			sc->r->readonly++;
			return 0;
		}
		v->page = g->slot & ~(uint64_t)(page_size() - 1);
		v->page_len = page_size();
		v->prot = (e->prot & MAP_PROT_READ ? PROT_READ : 0) |
			  (e->prot & MAP_PROT_EXEC ? PROT_EXEC : 0);
		if (poke) {
			v->to = sc->m.at[g->h->fn];
			v->result = SAMPLER_SLOT_POKE;
		}
	}
	sc->n++;
	count_object(sc, g->obj);
	return 0;
}

int sampler_scan_mirrors(struct alloc_session *s, const struct maps *maps,
			 const struct sampler_prep *p,
			 struct sampler_on_args *head, struct slot_scan *sc)
{
	const struct map_entry *e;
	size_t i;
	int rc;

	sampler_mirrors_check(alloc_pid(s), head->hook, &sc->m);
	for (i = 0; i < p->ngot; i++)
		if ((e = map_at(maps, p->got[i].slot)) &&
		    !(e->prot & MAP_PROT_WRITE))
			break;
	if (i < p->ngot) {
		rc = sampler_mirrors_make(s, maps, p->bound, head->hook,
					  &sc->m);
		if (rc == -ESRCH || rc == -ETIMEDOUT)
			return rc;
	}
	memcpy(head->mirror, sc->m.at, sizeof(head->mirror));
	memcpy(head->mirror_of, sc->m.of, sizeof(head->mirror_of));
	return 0;
}
