/*
 * The sampler's GOT slots, inside the target (sampler/image/records.c
 * has the records, hooks.c the hooks): sampler_on() and sampler_off(),
 * which memsnap calls on a borrowed thread; dlopen.c swaps the slots of
 * objects loaded later.  Freestanding, like records.c.
 */
#include "sampler/image/records.h"

static long set_prot(uint64_t page, uint64_t len, uint64_t prot)
{
	return raw_syscall6(SYS_mprotect_nr, (long)page, (long)len,
			    (long)prot, 0, 0, 0);
}

/*
 * Log @s before it is swapped: whatever happens next, sampler_off() finds it
 * (an entry whose swap failed is harmless there: its slot does not hold
 * the hook).  Entries are reserved atomically, for a dlopen hook may
 * log from another thread at the same time.
 */
static struct sampler_slot *log_slot(const struct sampler_slot *s)
{
	struct sampler_ctl *c = &sampler_ctl;
	uint64_t i = __atomic_fetch_add(&c->nslots, 1, __ATOMIC_SEQ_CST);

	if (i >= SAMPLER_MAXSLOTS) {
		__atomic_fetch_sub(&c->nslots, 1, __ATOMIC_SEQ_CST);
		return NULL;
	}
	c->log[i] = *s;
	c->log[i].result = 0;
	return &c->log[i];
}

/* ---- many slots in one call ---------------------------------------------- */

/*
 * memsnap calls sampler_on() and sampler_off() on a borrowed thread and
 * waits at every system call the call makes (twice: entry and exit), so
 * they make as few as the work allows: the slots are read in batches of
 * SWAP_BATCH, two system calls each (more only past an unreadable one),
 * and each run of slots on adjacent pages of one protection is made
 * writable once and given its protection back once.
 */
#define SWAP_BATCH 64

/* The words at @v[i].slot into @seen[i]; @ok[i] false where unreadable
 * (a library dlclosed since memsnap read it).  Without process_vm_readv
 * every slot is taken as readable. */
static void read_slots(const struct sampler_slot *const *v, uint64_t n,
		       uint64_t *seen, bool *ok)
{
	struct iov local[SWAP_BATCH], remote[SWAP_BATCH];
	uint64_t i, k, full;
	long got;

	for (i = 0; i < n; i++)
		ok[i] = LOAD(sampler_ctl.copy) != SAMPLER_COPY_VM_READV;
	if (!n || ok[0])
		return;
	for (i = 0; i < n; i += full + (full < k)) {
		k = n - i < SWAP_BATCH ? n - i : SWAP_BATCH;
		for (full = 0; full < k; full++) {
			local[full].base = (uint64_t)(uintptr_t)&seen[i + full];
			local[full].len = 8;
			remote[full].base = v[i + full]->slot;
			remote[full].len = 8;
		}
		/* a partial read ends at an element that failed */
		got = remote_read(local, (long)k, remote, (long)k);
		full = got > 0 ? (uint64_t)got / 8 : 0;
		for (uint64_t j = 0; j < full; j++)
			ok[i + j] = true;
	}
}

/* Slot @s's CAS from @from to @to, its page writable: its result. */
static uint64_t cas_slot(const struct sampler_slot *s, uint64_t seen,
			 uint64_t from, uint64_t to)
{
	uint64_t *slot = (uint64_t *)(uintptr_t)s->slot;

	if (LOAD(sampler_ctl.copy) == SAMPLER_COPY_VM_READV && seen != from)
		return SAMPLER_SLOT_CHANGED;
	if (!__atomic_compare_exchange_n(slot, &from, to, false,
					 __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		return SAMPLER_SLOT_CHANGED;
	return SAMPLER_SLOT_SWAPPED;
}

/* Swap each slot of @v (at most SWAP_BATCH) from its @from to its @to,
 * or back when @back, its result into @res[i]. */
static void swap_batch(const struct sampler_slot *const *v, uint64_t n,
		       bool back, uint64_t *res)
{
	uint64_t seen[SWAP_BATCH], i, j, k, lo, hi;
	bool ok[SWAP_BATCH];
	long rc = 0;

	read_slots(v, n, seen, ok);
	/* a slot read holding anything but what it would be swapped from
	 * is left as it is, with no system call for its page (memsnap
	 * wrote it back already, or another tool changed it) */
	for (i = 0; i < n; i++) {
		res[i] = 0;
		if (ok[i] && LOAD(sampler_ctl.copy) == SAMPLER_COPY_VM_READV &&
		    seen[i] != (back ? v[i]->to : v[i]->from)) {
			ok[i] = false;
			res[i] = SAMPLER_SLOT_CHANGED;
		}
	}
	for (i = 0; i < n; i = j) {
		j = i + 1;
		if (!ok[i]) {
			if (!res[i])
				res[i] = (uint64_t)-14; /* -EFAULT */
			continue;
		}
		if (v[i]->page_len && !LOAD(sampler_ctl.can_mprotect)) {
			res[i] = (uint64_t)-1; /* -EPERM: a filter forbids it */
			continue;
		}
		/* the run [i, j): readable slots on adjacent pages of one
		 * protection, made writable together */
		lo = v[i]->page;
		hi = lo + v[i]->page_len;
		for (; v[i]->page_len && j < n && ok[j] && v[j]->page_len &&
		       v[j]->prot == v[i]->prot && v[j]->page >= lo &&
		       v[j]->page <= hi; j++)
			if (v[j]->page + v[j]->page_len > hi)
				hi = v[j]->page + v[j]->page_len;
		if (v[i]->page_len) {
			rc = set_prot(lo, hi - lo, 3 /* PROT_READ|WRITE */);
			if (rc && j > i + 1) {
				/* one page of the run went: each on its own */
				j = i + 1;
				hi = lo + v[i]->page_len;
				rc = set_prot(lo, hi - lo, 3);
			}
		}
		for (k = i; k < j; k++)
			res[k] = rc ? (uint64_t)rc
				    : cas_slot(v[k], seen[k],
					       back ? v[k]->to : v[k]->from,
					       back ? v[k]->from : v[k]->to);
		if (v[i]->page_len && !rc)
			set_prot(lo, hi - lo, v[i]->prot);
		rc = 0;
	}
}

uint64_t log_and_swap(const struct sampler_slot *s)
{
	struct sampler_slot *l = log_slot(s);
	const struct sampler_slot *v[1] = { l };

	if (!l)
		return (uint64_t)-28; /* -ENOSPC */
	swap_batch(v, 1, false, &l->result);
	return l->result;
}

/* The @n slots of sampler_on()'s @batch (logged; @args[i] is the
 * argument's entry of each) swapped: the number swapped. */
static uint64_t swap_logged(struct sampler_slot **batch,
			    struct sampler_slot **args, uint64_t n)
{
	uint64_t res[SWAP_BATCH], i, swapped = 0;

	if (!n)
		return 0;
	swap_batch((const struct sampler_slot *const *)batch, n, false, res);
	for (i = 0; i < n; i++) {
		batch[i]->result = args[i]->result = res[i];
		swapped += res[i] == SAMPLER_SLOT_SWAPPED;
	}
	return swapped;
}

/* The bucket counts of no table: nothing is sampled there. */
static unsigned char no_counts;

/* The settings of @a adopted: a table of 0 keeps the current one, and
 * originals already set stay. */
static void adopt(const struct sampler_on_args *a)
{
	struct sampler_ctl *c = &sampler_ctl;
	struct geo g;
	uint64_t i, j;

	for (i = 0; i < SAMPLER_NFN; i++) {
		if (!c->orig[i])
			c->orig[i] = a->orig[i];
		if (!c->hook[i])
			c->hook[i] = a->hook[i];
		if (!c->direct[i])
			c->direct[i] = a->direct[i];
		if (a->mirror[i]) {	/* memsnap checked or made it */
			c->mirror_of[i] = a->mirror_of[i];
			c->mirror[i] = a->mirror[i];
		}
		for (j = 0; j < SAMPLER_NAME_MAX; j++)
			c->names[i][j] = a->names[i][j];
	}
	c->page_size = a->page_size;
	c->can_mprotect = a->can_mprotect;
	c->can_madvise = a->can_madvise;
	if (a->table) {
		c->table = a->table;
		c->table_len = a->table_len;
		c->nrecs = a->nrecs;
		c->stack_bytes = a->stack_bytes;
		if (geo_of(&g)) {
			c->bucket_mask = g.n / SAMPLER_BUCKET - 1;
			c->counts = (uint64_t)(uintptr_t)g.counts;
		}
	}
	/* no table: the free hooks' filter reads a zero byte */
	if (!c->counts) {
		c->bucket_mask = 0;
		c->counts = (uint64_t)(uintptr_t)&no_counts;
	}
	c->copy = a->copy;
	/* each a bound memsnap found, old or new: a hook reading them
	 * meanwhile gets a range that was mapped either way */
	STORE(c->main_lo, a->main_lo);
	STORE(c->main_hi, a->main_hi);
	STORE(c->block_off, a->block_off);
	STORE(c->wiped, a->wiped);
	STORE(c->mean, a->mean);
}

/* Zero @n words at @w, reading each first: a page never written stays
 * the zero page, and one given back stays given back. */
static void clear(uint64_t *w, uint64_t n)
{
	uint64_t i;

	for (i = 0; i < n; i++)
		if (LOAD(w[i]))
			STORE(w[i], 0);
}

/* The pool as new, in a new round: chunks taken before are the new
 * round's to hand out again. */
static void pool_afresh(void)
{
	struct sampler_ctl *c = &sampler_ctl;
	uint64_t h = __atomic_load_n(&c->pool_head, __ATOMIC_ACQUIRE), i;

	__atomic_add_fetch(&c->round, 1, __ATOMIC_SEQ_CST);
	/* the tag on: a taker that read the list before fails */
	while (!__atomic_compare_exchange_n(&c->pool_head, &h,
					    ((h >> 32) + 1) << 32, false,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		;
	STORE(c->pool_fresh, 0);
	STORE(c->kept_chunks, 0);
	for (i = 0; i < SAMPLER_NTHREADS; i++) {
		STORE(c->threads[i].samples, 0);
		STORE(c->threads[i].freed, 0);
		STORE(c->threads[i].dropped, 0);
		STORE(c->threads[i].plain, 0);
	}
	STORE(c->kept_seen[0], 0);
	STORE(c->kept_seen[1], 0);
}

/* A switch-on from off: countdowns afresh from @seed, every record of
 * the last round forgotten (a block freed while the hooks were out
 * would otherwise stay live), the pool and the counters new. */
static void start_round(uint64_t seed)
{
	struct sampler_ctl *c = &sampler_ctl;
	struct geo g;
	uint64_t i;

	/* Countdowns parked while off start afresh (a first draw, not a
	 * sample at the next allocation), from this round's random seed. */
	for (i = 0; i < SAMPLER_NTHREADS; i++) {
		STORE(c->threads[i].left, 0);
		c->threads[i].rng = 0;
		c->threads[i].seed = seed;
	}
	if (geo_of(&g)) {
		clear(g.keys, g.n);
		clear((uint64_t *)g.counts, (g.n / SAMPLER_BUCKET + 7) / 8);
		clear((uint64_t *)g.heads, g.n / 2);
		clear((uint64_t *)g.kept,
		      SAMPLER_KEPT * sizeof(*g.kept) / sizeof(uint64_t));
	}
	pool_afresh();
}

/* Each slot of @a logged, then swapped to its hook (or left to
 * memsnap, to its mirror): the number swapped. */
static uint64_t swap_all(struct sampler_on_args *a)
{
	struct sampler_ctl *c = &sampler_ctl;
	struct sampler_slot *batch[SWAP_BATCH], *args[SWAP_BATCH];
	uint64_t i, j, swapped = 0, nlog, nlog0, nb = 0;

	/* each logged before any is swapped: whatever happens next,
	 * sampler_off() finds it */
	nlog0 = __atomic_load_n(&c->nslots, __ATOMIC_SEQ_CST);
	for (i = 0; i < a->nslots; i++) {
		struct sampler_slot *s = &a->slots[i], *l;
		bool poke = s->result == SAMPLER_SLOT_POKE;

		nlog = __atomic_load_n(&c->nslots, __ATOMIC_SEQ_CST);
		for (j = 0; j < nlog; j++)
			if (c->log[j].slot == s->slot &&
			    (c->log[j].result == SAMPLER_SLOT_SWAPPED ||
			     c->log[j].result == SAMPLER_SLOT_POKE ||
			     j >= nlog0))
				break;
		if (j < nlog0 && c->log[j].result == SAMPLER_SLOT_POKE) {
			/* left to a memsnap that never wrote it (memsnap
			 * only passes a slot that holds what it did
			 * before): logged again in place, as asked now */
			l = &c->log[j];
			STORE(l->result, 0);
			l->from = s->from;
			l->to = s->to;
			l->page = s->page;
			l->page_len = s->page_len;
			l->prot = s->prot;
		} else if (j < nlog) {
			s->result = SAMPLER_SLOT_KNOWN;
			continue;
		} else if (!(l = log_slot(s))) {
			s->result = (uint64_t)-28; /* -ENOSPC */
			continue;
		}
		if (poke) {
			STORE(l->result, SAMPLER_SLOT_POKE);
			s->result = SAMPLER_SLOT_POKE;
			continue;
		}
		batch[nb] = l;
		args[nb++] = s;
		if (nb == SWAP_BATCH) {
			swapped += swap_logged(batch, args, nb);
			nb = 0;
		}
	}
	return swapped + swap_logged(batch, args, nb);
}

/*
 * Switch sampling on: adopt the settings and the table of @a, start a
 * new round with @seed when it was off, then swap each slot of @a to
 * its hook and log it for sampler_off().  The number of slots swapped;
 * each slot's result says what happened to it.
 */
long sampler_on(struct sampler_on_args *a, uint64_t seed)
{
	struct sampler_ctl *c = &sampler_ctl;
	uint64_t i, swapped;

	adopt(a);
	if (!LOAD(c->active)) {
		start_round(seed);
		STORE(c->since, a->since);
	}
	/* the lease of this switch-on, or none: an earlier one's ends */
	STORE(c->lease_until, a->lease_until);
	STORE(c->lapsed_at, 0);
	c->version = SAMPLER_VERSION;
	for (i = 0; i < sizeof(c->signature); i++)
		c->signature[i] = SAMPLER_SIGNATURE[i];
	STORE(c->active, 1);
	swapped = swap_all(a);
	STORE(c->started, c->started + 1);
	return (long)swapped;
}

/* [@lo, @hi) given back to the kernel, whole pages of it: read as zeros
 * from now on.  A thread still inside a hook reads zeros or writes a
 * page back in; nothing of it is unmapped. */
static void give_back(uint64_t lo, uint64_t hi)
{
	uint64_t ps = LOAD(sampler_ctl.page_size);

	if (!ps || ps & (ps - 1))
		return;
	lo = (lo + ps - 1) & ~(ps - 1);
	hi &= ~(ps - 1);
	if (lo < hi)
		raw_syscall6(SYS_madvise_nr, (long)lo, (long)(hi - lo),
			     4 /* MADV_DONTNEED */, 0, 0, 0);
}

/*
 * Once off, the table's pages go back, where memsnap found madvise
 * allowed: the records are read only while sampling is on, and the
 * next switch-on starts them afresh.  One system call, two more ptrace
 * stops for prof off; the control block (its countdowns and slot log,
 * some tens of KiB) stays.  The pool starts afresh first: a thread
 * still inside a hook gives back no chunk of this round into the next
 * one.
 */
static void release(void)
{
	struct geo g;

	if (!LOAD(sampler_ctl.can_madvise))
		return;
	pool_afresh();
	if (geo_of(&g))
		give_back((uint64_t)(uintptr_t)g.keys,
			  (uint64_t)(uintptr_t)g.keys +
				  LOAD(sampler_ctl.table_len));
}

/*
 * Switch sampling off: every logged slot that still holds its hook gets
 * back what it held; one that was changed since is left as it is.  Then
 * the table's memory goes back (release()).  The number of slots put
 * back.
 */
long sampler_off(void)
{
	struct sampler_ctl *c = &sampler_ctl;
	uint64_t i, restored = 0;

	__atomic_store_n(&c->active, 0, __ATOMIC_SEQ_CST);
	/* A dlopen hook that saw it on finishes its swaps first (bounded:
	 * a thread stopped in one cannot hold this up for ever). */
	for (i = 0; __atomic_load_n(&c->busy, __ATOMIC_SEQ_CST) &&
		    i < (1ull << 30); i++)
		__asm__ volatile("" ::: "memory");
	for (i = __atomic_load_n(&c->nslots, __ATOMIC_SEQ_CST); i > 0;) {
		const struct sampler_slot *batch[SWAP_BATCH];
		uint64_t res[SWAP_BATCH], nb = 0, k;

		/* the newest first; an entry whose swap failed never held
		 * the hook */
		for (; i > 0 && nb < SWAP_BATCH; i--)
			if (c->log[i - 1].result == SAMPLER_SLOT_SWAPPED ||
			    c->log[i - 1].result == SAMPLER_SLOT_POKE)
				batch[nb++] = &c->log[i - 1];
		swap_batch(batch, nb, true, res);
		for (k = 0; k < nb; k++)
			restored += res[k] == SAMPLER_SLOT_SWAPPED;
		__atomic_store_n(&c->nslots, i, __ATOMIC_RELEASE);
	}
	release();
	return (long)restored;
}
