/*
 * memsnap's heap sampler in a target (sampler/sampler.h): finding
 * and loading its image, and choosing the GOT slots to swap
 * (dump.c reads its records back).
 * The code that runs in the target is sampler/image/records.c; its layout is
 * sampler/layout.h.
 */
#include "sampler/internal.h"

#include "allocators/allocator_internal.h"
#include "common/util.h"
#include "injector/patch.h"
#include "injector/unwind.h"
#include "proc/maps.h"
#include "proc/procfs.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

/* The image, assembled in by sampler/image.S. */
extern const unsigned char sampler_image[];
extern const uint64_t sampler_image_len;

#define DATA_OFF SAMPLER_OFF_sampler_data_start
#define IMAGE_END SAMPLER_OFF_sampler_image_end

/* Records per table: at least, at most; and the heap it is sized for,
 * at least (the heap may grow after prof on). */
#define NRECS_MIN (1u << 14)
#define NRECS_MAX (1u << 21)
#define HEAP_MIN (1ull << 30)

static uint64_t round_up(uint64_t v, uint64_t to)
{
	return (v + to - 1) & ~(to - 1);
}

/* ---- finding it ---------------------------------------------------------- */

/* An anonymous r-x mapping just the size of the code, holding it. */
static uint64_t find_image(pid_t pid, const struct maps *maps)
{
	uint64_t len = round_up(CODE_LEN, page_size());
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
		st->samples = c->samples;
		st->freed = c->freed;
		st->dropped = c->dropped;
		st->plain = c->plain;
		st->slots = c->nslots;
		st->started = c->started;
		st->dlopened = c->dlopened;
		st->stacks = c->copy == SAMPLER_COPY_VM_READV;
		st->patch_page = c->patch_page;
		st->patch_page_len = c->patch_page_len;
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

/* ---- loading and switching ------------------------------------------------ */

/*
 * Copy the image in: code r-x, the gap up to the control block
 * inaccessible, the control block and the page after it (mark_wiped())
 * read-write and zero.  A memsnap
 * killed half-way leaves an unused mapping, never a hooked slot.
 */
static int load_image(struct alloc_session *s, const struct maps *maps,
		      const struct allocator *linked, uint64_t *image)
{
	uint64_t ps = page_size(), code = round_up(CODE_LEN, ps);
	uint64_t len = round_up(IMAGE_END, ps);
	int rc;

	if (sampler_image_len != CODE_LEN || code > DATA_OFF)
		return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
				  "memsnap's sampler image is %" PRIu64 " bytes, its "
				  "offsets say %lu: memsnap was built wrong",
				  sampler_image_len, (unsigned long)CODE_LEN);
	/* near an allocator linked into the program, whose entry points
	 * then jump to the hooks with no stub between */
	rc = sampler_mmap(s, sampler_near(linked, maps, len), len, 0, image);
	if (rc)
		return rc;
	rc = inject_write(s->inj, *image, sampler_image, CODE_LEN);
	if (!rc)
		rc = sampler_mprotect(s, *image, code, PROT_READ | PROT_EXEC);
	if (!rc && DATA_OFF > code)
		rc = sampler_mprotect(s, *image + code, DATA_OFF - code,
				     PROT_NONE);
	return rc;
}

/* Records for a process of @rss bytes (at least HEAP_MIN) at @mean:
 * twice the samples that heap would give, so that buckets stay a
 * quarter full on average, in bounds. */
static uint64_t table_records(uint64_t rss, uint64_t mean)
{
	uint64_t heap = rss > HEAP_MIN ? rss : HEAP_MIN;
	uint64_t want = mean ? heap / mean * 2 : 0, n = NRECS_MIN;

	while (n < want && n < NRECS_MAX)
		n <<= 1;
	return n;
}

struct slot_scan {
	struct alloc_session *s;
	const struct maps *maps;
	const struct sampler_prep *p;
	uint64_t image;
	bool can_mprotect;
	struct sampler_slot *v;
	size_t n, cap;
	struct sampler_start *r;
	const struct object *counted;	/* the last object counted */
	struct sampler_mirrors m;
};

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

/* GOT slot @g, read now: swap it if it reaches the function the process
 * binds (or its object's own lazy-binding stub). */
static int scan_slot(struct slot_scan *sc, const struct sampler_got *g)
{
	const struct map_entry *e;
	struct sampler_slot *v;
	uint64_t cur;

	if (proc_read_mem(sc->s->pid, g->slot, &cur, sizeof(cur)))
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

/*
 * The mirrors of @sc: those an earlier round made, checked, and, where
 * a read-only slot may need one, the missing ones made; into @head for
 * the control block.  Without them the slots go the image's way: an
 * engine error is the only failure.
 */
static int mirrors(struct alloc_session *s, const struct maps *maps,
		   const struct sampler_prep *p, struct sampler_on_args *head,
		   struct slot_scan *sc)
{
	const struct map_entry *e;
	size_t i;
	int rc;

	sampler_mirrors_check(s->pid, head->hook, &sc->m);
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

/* Which system calls the borrowed thread's seccomp filters allow. */
static bool allowed(struct alloc_session *s, long nr)
{
	uint64_t args[5] = { 0 };

	return !inject_check_syscall(s->inj, nr, args, 5);
}

/*
 * The image's last page zeroed in a fork child (MADV_WIPEONFORK, Linux
 * 4.14): the pid the sampler caches there (sampler/image/records.c) is
 * then always its own process's.  false where the kernel or a filter
 * says no: the pid is asked at every copy.
 */
static bool mark_wiped(struct alloc_session *s, uint64_t image)
{
	uint64_t at = SAMPLER_OFF_sampler_wipe_start;

	return allowed(s, SYS_madvise) &&
	       !sampler_madvise(s, image + at,
				round_up(IMAGE_END, page_size()) - at,
				MADV_WIPEONFORK);
}

/* sampler_on() with @n slots of @v (and the settings in @head), and
 * the round's random @seed. */
static int call_on(struct alloc_session *s, uint64_t image,
		   const struct sampler_on_args *head, uint64_t seed,
		   struct sampler_slot *v, size_t n, long *swapped)
{
	size_t len = sizeof(*head) + n * sizeof(*v);
	struct sampler_on_args *a = malloc(len);
	struct inject_call c = { .fn = image + SAMPLER_OFF_sampler_on,
				 .errno_kept = true,
				 .nargs = 2, .nbufs = 1 };
	struct inject_result res;
	int rc;

	if (!a)
		return -ENOMEM;
	memcpy(a, head, sizeof(*head));
	a->nslots = n;
	if (n)
		memcpy(a->slots, v, n * sizeof(*v));
	c.args[0] = (struct inject_arg){ .kind = INJECT_ARG_BUF, .buf = 0 };
	c.args[1] = (struct inject_arg){ .kind = INJECT_ARG_INT,
					 .value = seed };
	c.bufs[0] = (struct inject_buf){ .in = a, .out = a, .len = len };
	rc = alloc_call_function(s, &c, &res);
	if (!rc) {
		if (n)
			memcpy(v, a->slots, n * sizeof(*v));
		*swapped = (long)res.ret;
	}
	free(a);
	return rc;
}

/*
 * Switch the sampler at @image off: its entry points, then its slots.
 * In that order because only putting the entry points back can be
 * refused (a thread that cannot be stopped for the write): refused, the
 * sampler is still wholly on, and a later `prof off` finds it on.  The
 * hooks left in the slots for that moment call the trampolines, which
 * stay valid: they end in the entry's own bytes, written back as they
 * were.
 */
static int stop_at(struct alloc_session *s, uint64_t image,
		   unsigned int *restored, unsigned int *entries)
{
	struct sampler_ctl *c = malloc(sizeof(*c));
	struct inject_call off = { .fn = image + SAMPLER_OFF_sampler_off,
				   .errno_kept = true };
	struct inject_result res;
	unsigned int poked = 0;
	int rc;

	*restored = *entries = 0;
	if (!c)
		return -ENOMEM;
	rc = sampler_read_ctl(s->pid, image + SAMPLER_OFF_sampler_ctl, c);
	if (!rc && c->npatches)
		rc = sampler_direct_undo(s, c, entries);
	/* the slots memsnap swapped, back by memsnap: off passes them over */
	if (!rc)
		rc = sampler_unpoke(s, image, c, &poked);
	else if (rc == -ENODATA)
		rc = 0;
	free(c);
	if (rc)
		return rc;
	rc = alloc_call_function(s, &off, &res);
	if (!rc)
		*restored = poked + (unsigned int)res.ret;
	return rc;
}

/* Slots per call: the argument buffer lives on the borrowed stack. */
#define SLOTS_PER_CALL \
	((INJECT_MAX_BUF_BYTES - sizeof(struct sampler_on_args)) / \
	 sizeof(struct sampler_slot))

/* sampler_on() for the @n slots of @v, SLOTS_PER_CALL at a time (the
 * table of @head adopted by the first call; at least one call), each
 * slot's result counted into @r. */
static int switch_on(struct alloc_session *s, uint64_t image,
		     struct sampler_on_args *head, uint64_t seed,
		     struct sampler_slot *v, size_t n, struct sampler_start *r)
{
	size_t done = 0, k, j;
	int rc;

	do {
		long swapped = 0;

		k = n - done < SLOTS_PER_CALL ? n - done : SLOTS_PER_CALL;
		rc = call_on(s, image, head, seed, v + done, k, &swapped);
		if (rc)
			return rc;
		for (j = done; j < done + k; j++) {
			if (v[j].result == SAMPLER_SLOT_KNOWN)
				r->known++;
			else if (v[j].result != SAMPLER_SLOT_SWAPPED &&
				 v[j].result != SAMPLER_SLOT_POKE)
				r->other++;	/* changed, log full, ... */
		}
		r->swapped += (unsigned int)swapped;
		head->table = 0;	/* adopted by the first call */
		done += k;
	} while (done < n);
	return 0;
}

/*
 * The slots sampler_on() logged and left to memsnap, swapped to their
 * mirrors, a byte each.  One the kernel will not write (a kernel built
 * to refuse forced writes to /proc/PID/mem) goes the image's way after
 * all, its logged entry reused.
 */
static int poke_slots(struct alloc_session *s, struct slot_scan *sc,
		      struct sampler_on_args *head, uint64_t seed)
{
	size_t i, n = 0;
	unsigned int f;
	int rc;

	for (i = 0; i < sc->n; i++) {
		struct sampler_slot *v = &sc->v[i];

		if (v->result != SAMPLER_SLOT_POKE)
			continue;
		rc = sampler_poke(s, v->slot, v->from, v->to);
		if (!rc) {
			sc->r->swapped++;
			continue;
		}
		if (rc == -EAGAIN) {
			sc->r->other++;	/* changed since it was read */
			continue;
		}
		if (rc != -EFAULT && rc != -EPERM)
			return rc;	/* the engine's: the target is gone */
		if (!sc->can_mprotect) {
			sc->r->readonly++;
			continue;
		}
		for (f = 0; f < SAMPLER_NFN && sc->m.at[f] != v->to; f++)
			;
		if (f == SAMPLER_NFN)
			continue;
		v->to = head->hook[f];
		v->result = 0;
		sc->v[n++] = *v;
	}
	return n ? switch_on(s, sc->image, head, seed, sc->v, n, sc->r) : 0;
}

int sampler_start(struct alloc_session *s, const struct maps *maps,
		  const struct sampler_status *found,
		  const struct sampler_prep *p, struct sampler_start *r)
{
	struct slot_scan sc = { .s = s, .maps = maps, .p = p, .r = r };
	struct sampler_on_args head = { 0 };
	struct sampler_direct d = { 0 };
	struct sampler_ctl *c = NULL;
	struct sampler_status st;
	uint64_t seed = random_seed();
	size_t i;
	int rc;

	r->loaded = r->stacks = r->cxx = false;
	r->swapped = r->known = r->other = r->readonly = r->objects = 0;
	r->linked = NULL;
	r->entries = r->entries_written = 0;
	r->unpatched[0] = '\0';
	if (!r->mean)
		r->mean = SAMPLER_DEFAULT_MEAN;
	if (r->stack_bytes && !sampler_stack_bytes_ok(r->stack_bytes))
		return -EINVAL;
	r->cxx = p->cxx;
	/* a program linked statically has no GOT slot to malloc, but its
	 * entry points may still be patched */
	if ((!p->bound[SAMPLER_MALLOC] || !p->bound[SAMPLER_FREE]) &&
	    !p->linked) {
		return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
				  "no malloc and free bound in the process");
	}
	c = malloc(sizeof(*c));
	if (!c)
		return -ENOMEM;
	/* where the view found it; its control block again, now that
	 * the thread is stopped */
	rc = sampler_read_at(s->pid, found->image, &st, c);
	if (rc == -ENODATA)
		rc = 0;		/* copied in, never switched on */
	if (rc == -ENOENT) {
		rc = load_image(s, maps, p->linked, &sc.image);
		r->loaded = !rc;
		st.nrecs = 0;
		head.wiped = !rc && mark_wiped(s, sc.image);
	} else if (!rc) {
		sc.image = st.image;
		/* (an image copied in by a memsnap killed before it
		 * switched the sampler on has a zero control block) */
		head.wiped = c->version ? c->wiped : mark_wiped(s, sc.image);
		memcpy(sc.m.at, c->mirror, sizeof(sc.m.at));
		memcpy(sc.m.of, c->mirror_of, sizeof(sc.m.of));
	} else if (rc == -EPROTO) {
		rc = alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
				"a sampler at %#" PRIx64 " has a control block "
				"this memsnap does not know", st.image);
	}
	if (rc) {
		free(c);
		return rc;
	}

	/* an allocator linked into the program: its entry points, planned
	 * (or found in the log of an earlier prof on: the control block
	 * just read) */
	rc = sampler_direct_plan(s, maps, sc.image, r->loaded ? NULL : c, p,
				 &d);
	free(c);
	if (rc)
		goto out;
	r->linked = d.kind;
	snprintf(r->unpatched, sizeof(r->unpatched), "%s", d.why);
	for (i = 0; i < d.n; i++)
		head.direct[d.fns[i]] = d.plans[i].tramp;

	head.mean = r->mean;
	memcpy(head.orig, p->bound, sizeof(head.orig));
	/* A slot bound to a patched entry point: its hook calls the
	 * trampoline, or the entry's jump would count the bytes twice. */
	for (i = 0; i < d.n; i++) {
		size_t f;

		for (f = 0; f < SAMPLER_NFN; f++)
			if (head.orig[f] == d.plans[i].entry)
				head.orig[f] = d.plans[i].tramp;
	}
	for (i = 0; i < sampler_nhooks; i++) {
		if (!p->bound[sampler_hooks[i].fn])
			continue;
		head.hook[sampler_hooks[i].fn] = sc.image + sampler_hooks[i].off;
		snprintf(head.names[sampler_hooks[i].fn], SAMPLER_NAME_MAX, "%s",
			 sampler_hooks[i].name);
	}
	head.page_size = page_size();
	head.main_lo = p->main_lo;
	head.main_hi = p->main_hi;
	head.block_off = p->block_off;
	r->stacks = allowed(s, SYS_getpid) &&
		    allowed(s, SYS_process_vm_readv);
	head.copy = r->stacks ? SAMPLER_COPY_VM_READV : SAMPLER_COPY_NONE;
	if (!st.nrecs) {
		/* The first switch-on: a table sized to the process. */
		head.nrecs = table_records(r->rss, r->mean);
		head.stack_bytes = r->stack_bytes ? r->stack_bytes
						  : SAMPLER_STACK_BYTES;
		head.table_len = sampler_table_len(head.nrecs,
						   head.stack_bytes);
		/* address space only: pages are touched where records land,
		 * and must stay small pages (with transparent huge pages
		 * "always", each record touched would bring in 2 MiB, and a
		 * table sized for a 1 GiB heap at a 16 KiB mean, 2 GiB of
		 * address space, would be resident whole); a kernel without
		 * them, or a filter that forbids madvise, has none to avoid */
		rc = sampler_mmap(s, 0, head.table_len, MAP_NORESERVE,
				  &head.table);
		if (rc)
			goto out;
		if (allowed(s, SYS_madvise))
			(void)sampler_madvise(s, head.table, head.table_len,
					      MADV_NOHUGEPAGE);
		r->stack_bytes = head.stack_bytes;
	} else {
		r->stack_bytes = st.stack_bytes;	/* the table's, kept */
	}

	rc = mirrors(s, maps, p, &head, &sc);
	if (rc)
		goto out;
	sc.can_mprotect = allowed(s, SYS_mprotect);
	head.can_mprotect = sc.can_mprotect;
	/* prof off gives the table's pages back */
	head.can_madvise = allowed(s, SYS_madvise);
	for (i = 0; i < p->ngot; i++) {
		rc = scan_slot(&sc, &p->got[i]);
		if (rc)
			goto out;
	}
	rc = switch_on(s, sc.image, &head, seed, sc.v, sc.n, r);
	if (!rc)
		rc = poke_slots(s, &sc, &head, seed);
	/* the hooks know their originals now: the jumps can go in */
	if (!rc && d.n) {
		rc = sampler_direct_apply(s, sc.image, &d,
					  &r->entries_written);
		if (!rc) {
			r->entries = (unsigned int)d.n;
		} else {
			/* not half on: the slots and any entry written go
			 * back, and the error stands (@maps may predate the
			 * image: stopped where it is known to be) */
			unsigned int slots, entries;

			stop_at(s, sc.image, &slots, &entries);
		}
	}
out:
	sampler_direct_free(&d);
	free(sc.v);
	return rc;
}

int sampler_stop(struct alloc_session *s, const struct sampler_status *st,
		 unsigned int *restored, unsigned int *entries)
{
	*restored = *entries = 0;
	return st->image ? stop_at(s, st->image, restored, entries) : -ENOENT;
}
