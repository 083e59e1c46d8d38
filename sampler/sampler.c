/*
 * memsnap's heap sampler in a target (sampler/sampler.h): loading its
 * image, choosing the GOT slots to swap, and switching it on and off
 * (find.c finds it, dump.c reads its records back).  The code that
 * runs in the target is sampler/image/; its layout is
 * sampler/layout.h.
 */
#include "sampler/internal.h"

#include "allocators/allocator.h"
#include "common/util.h"
#include "injector/patch.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>

/* The image, assembled in by sampler/image.S. */
extern const unsigned char sampler_image[];
extern const uint64_t sampler_image_len;

#define DATA_OFF SAMPLER_OFF_sampler_data_start
#define IMAGE_END SAMPLER_OFF_sampler_image_end

/* The heap a table is sized for, at least (the heap may grow after
 * prof on). */
#define HEAP_MIN (1ull << 30)

static uint64_t round_up(uint64_t v, uint64_t to)
{
	return (v + to - 1) & ~(to - 1);
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
	rc = inject_write(alloc_inject(s), *image, sampler_image, CODE_LEN);
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

/* Which system calls the borrowed thread's seccomp filters allow. */
static bool allowed(struct alloc_session *s, long nr)
{
	uint64_t args[5] = { 0 };

	return !inject_check_syscall(alloc_inject(s), nr, args, 5);
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
	rc = sampler_read_ctl(alloc_pid(s), image + SAMPLER_OFF_sampler_ctl, c);
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

/*
 * What switching on takes, worked out on the stopped thread before any
 * hook is in: the image (copied in when the process has none), the
 * entry points of a linked allocator, the settings and the table that
 * sampler_on() adopts, the mirrors, and every GOT slot read and chosen.
 * start_apply() then switches, and can fail only in the engine.
 */
struct plan {
	struct slot_scan sc;
	struct sampler_on_args head;
	struct sampler_direct d;
	uint64_t nrecs, stack_bytes;	/* the table found (0: none yet) */
	uint64_t seed;
};

/* @r's results as nothing done yet; its settings checked. */
static int start_reset(struct sampler_start *r)
{
	r->loaded = r->stacks = r->cxx = r->leased = false;
	r->image = 0;
	r->swapped = r->known = r->other = r->readonly = r->objects = 0;
	r->linked = NULL;
	r->entries = r->entries_written = 0;
	r->unpatched[0] = '\0';
	if (!r->mean)
		r->mean = SAMPLER_DEFAULT_MEAN;
	return r->stack_bytes && !sampler_stack_bytes_ok(r->stack_bytes)
		       ? -EINVAL
		       : 0;
}

/*
 * The image: the one the view found, its control block read again now
 * that the thread is stopped, or a new one copied in; and the entry
 * points of an allocator linked into the program, planned (or found in
 * the log of an earlier prof on: the control block just read).
 */
static int plan_image(struct alloc_session *s, const struct maps *maps,
		      const struct sampler_status *found,
		      const struct sampler_prep *p, struct sampler_start *r,
		      struct plan *pl)
{
	struct sampler_ctl *c = malloc(sizeof(*c));
	struct sampler_status st;
	int rc;

	if (!c)
		return -ENOMEM;
	rc = sampler_read_at(alloc_pid(s), found->image, &st, c);
	if (rc == -ENODATA)
		rc = 0;		/* copied in, never switched on */
	if (rc == -ENOENT) {
		rc = load_image(s, maps, p->linked, &pl->sc.image);
		r->loaded = !rc;
		pl->head.wiped = !rc && mark_wiped(s, pl->sc.image);
	} else if (!rc) {
		pl->sc.image = st.image;
		pl->nrecs = st.nrecs;
		pl->stack_bytes = st.stack_bytes;
		/* (an image copied in by a memsnap killed before it
		 * switched the sampler on has a zero control block) */
		pl->head.wiped = c->version ? c->wiped
					    : mark_wiped(s, pl->sc.image);
		memcpy(pl->sc.m.at, c->mirror, sizeof(pl->sc.m.at));
		memcpy(pl->sc.m.of, c->mirror_of, sizeof(pl->sc.m.of));
	} else if (rc == -EPROTO) {
		rc = alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
				"a sampler at %#" PRIx64 " has a control block "
				"this memsnap does not know", st.image);
	}
	if (!rc)
		rc = sampler_direct_plan(s, maps, pl->sc.image,
					 r->loaded ? NULL : c, p, &pl->d);
	free(c);
	return rc;
}

/* sampler_on()'s settings: the originals, the hooks and their names,
 * the stacks it may copy, which system calls it may make. */
static void plan_settings(struct alloc_session *s,
			  const struct sampler_prep *p,
			  struct sampler_start *r, struct plan *pl)
{
	struct sampler_on_args *h = &pl->head;
	const struct sampler_direct *d = &pl->d;
	size_t i, f;

	r->linked = d->kind;
	snprintf(r->unpatched, sizeof(r->unpatched), "%s", d->why);
	for (i = 0; i < d->n; i++)
		h->direct[d->fns[i]] = d->plans[i].tramp;
	h->mean = r->mean;
	memcpy(h->orig, p->bound, sizeof(h->orig));
	/* A slot bound to a patched entry point: its hook calls the
	 * trampoline, or the entry's jump would count the bytes twice. */
	for (i = 0; i < d->n; i++)
		for (f = 0; f < SAMPLER_NFN; f++)
			if (h->orig[f] == d->plans[i].entry)
				h->orig[f] = d->plans[i].tramp;
	for (i = 0; i < sampler_nhooks; i++) {
		if (!p->bound[sampler_hooks[i].fn])
			continue;
		h->hook[sampler_hooks[i].fn] =
			pl->sc.image + sampler_hooks[i].off;
		snprintf(h->names[sampler_hooks[i].fn], SAMPLER_NAME_MAX, "%s",
			 sampler_hooks[i].name);
	}
	h->page_size = page_size();
	h->main_lo = p->main_lo;
	h->main_hi = p->main_hi;
	h->block_off = p->block_off;
	r->stacks = allowed(s, SYS_getpid) &&
		    allowed(s, SYS_process_vm_readv);
	h->copy = r->stacks ? SAMPLER_COPY_VM_READV : SAMPLER_COPY_NONE;
	pl->sc.can_mprotect = allowed(s, SYS_mprotect);
	h->can_mprotect = pl->sc.can_mprotect;
	/* prof off gives the table's pages back */
	h->can_madvise = allowed(s, SYS_madvise);
	/* the lease: a sample reads the clock once it is set */
	h->since = (uint64_t)time(NULL);
	r->leased = r->lease && allowed(s, SYS_clock_gettime);
	h->lease_until = r->leased ? h->since + r->lease : 0;
}

/*
 * The table: at the first switch-on, mapped and sized to the process;
 * after that the one made then, with its stack size.  Address space
 * only: pages are touched as chunks are taken, and must stay small
 * pages (with transparent huge pages "always", the first record would
 * bring in 2 MiB, and a table sized for a 1 GiB heap at a 16 KiB mean,
 * gigabytes of address space, could become resident whole); a kernel
 * without them, or a filter that forbids madvise, has none to avoid.
 */
static int plan_table(struct alloc_session *s, struct sampler_start *r,
		      struct plan *pl)
{
	struct sampler_on_args *h = &pl->head;
	int rc;

	if (pl->nrecs) {
		r->stack_bytes = pl->stack_bytes;	/* the table's, kept */
		return 0;
	}
	h->nrecs = table_records(r->rss, r->mean);
	h->stack_bytes = r->stack_bytes ? r->stack_bytes : SAMPLER_STACK_BYTES;
	h->table_len = sampler_table_len(h->nrecs, h->stack_bytes);
	rc = sampler_mmap(s, 0, h->table_len, MAP_NORESERVE, &h->table);
	if (rc)
		return rc;
	if (allowed(s, SYS_madvise))
		(void)sampler_madvise(s, h->table, h->table_len,
				      MADV_NOHUGEPAGE);
	r->stack_bytes = h->stack_bytes;
	return 0;
}

static int start_plan(struct alloc_session *s, const struct maps *maps,
		      const struct sampler_status *found,
		      const struct sampler_prep *p, struct sampler_start *r,
		      struct plan *pl)
{
	size_t i;
	int rc = plan_image(s, maps, found, p, r, pl);

	if (rc)
		return rc;
	plan_settings(s, p, r, pl);
	rc = plan_table(s, r, pl);
	if (!rc)
		rc = sampler_scan_mirrors(s, maps, p, &pl->head, &pl->sc);
	for (i = 0; i < p->ngot && !rc; i++)
		rc = sampler_scan_slot(&pl->sc, &p->got[i]);
	return rc;
}

/*
 * Switch on as planned: the slots (the image's swaps, then memsnap's
 * bytes for the mirrors), then, the hooks knowing their originals, the
 * entry points' jumps.  Those failing, not half on: the slots and any
 * entry written go back, and the error stands (@maps may predate the
 * image: stopped where it is known to be).
 */
static int start_apply(struct alloc_session *s, struct plan *pl,
		       struct sampler_start *r)
{
	unsigned int slots, entries;
	int rc;

	rc = switch_on(s, pl->sc.image, &pl->head, pl->seed, pl->sc.v,
		       pl->sc.n, r);
	if (!rc)
		rc = poke_slots(s, &pl->sc, &pl->head, pl->seed);
	if (rc || !pl->d.n)
		return rc;
	rc = sampler_direct_apply(s, pl->sc.image, &pl->d,
				  &r->entries_written);
	if (!rc)
		r->entries = (unsigned int)pl->d.n;
	else
		stop_at(s, pl->sc.image, &slots, &entries);
	return rc;
}

int sampler_start(struct alloc_session *s, const struct maps *maps,
		  const struct sampler_status *found,
		  const struct sampler_prep *p, struct sampler_start *r)
{
	struct plan *pl;
	int rc = start_reset(r);

	if (rc)
		return rc;
	r->cxx = p->cxx;
	/* a program linked statically has no GOT slot to malloc, but its
	 * entry points may still be patched */
	if ((!p->bound[SAMPLER_MALLOC] || !p->bound[SAMPLER_FREE]) &&
	    !p->linked)
		return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
				  "no malloc and free bound in the process");
	pl = calloc(1, sizeof(*pl));
	if (!pl)
		return -ENOMEM;
	pl->sc = (struct slot_scan){ .s = s, .maps = maps, .p = p, .r = r };
	pl->seed = random_seed();
	rc = start_plan(s, maps, found, p, r, pl);
	if (!rc)
		rc = start_apply(s, pl, r);
	if (!rc)
		r->image = pl->sc.image;
	sampler_direct_free(&pl->d);
	free(pl->sc.v);
	free(pl);
	return rc;
}

int sampler_stop(struct alloc_session *s, const struct sampler_status *st,
		 unsigned int *restored, unsigned int *entries)
{
	*restored = *entries = 0;
	return st->image ? stop_at(s, st->image, restored, entries) : -ENOENT;
}
