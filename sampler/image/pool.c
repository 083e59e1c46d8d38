/*
 * The sampler's chunks, inside the target (sampler/layout.h): the pool
 * a record and its stack copy are taken from and given back to, and the
 * reservoir of freed samples, which keeps some records of freed blocks
 * by taking over their chunks.  Freestanding, like records.c; nothing
 * here waits for another thread: a compare-and-swap that loses is tried
 * again, a bounded number of times.
 *
 * The free list is a stack of chunks linked through next[] (a chunk in
 * use is never on it), its head a tag and a chunk in one word: a thread
 * that read the head, then lost the processor while another took that
 * chunk and gave it back with another next, fails its compare-and-swap
 * on the tag.  Chunks never handed out come after it, from pool_fresh:
 * the pool's pages are touched only as far as the most chunks ever held
 * at once, and the last chunks given back are the first taken again,
 * on pages already touched.
 */
#include "sampler/image/records.h"

/* Tries of a compare-and-swap on the list before a taker settles for
 * chunks never used, or a giver drops its chunks: other threads won
 * each time, so the list moved on; only a table written over could
 * make it spin. */
#define TRIES 64

#define HEAD(h) ((uint32_t)(h))
#define TAG(h) ((h) >> 32)

/* Up to @want chunks of the free list into @chain: how many. */
static uint32_t take_listed(const struct geo *g, uint32_t want,
			    uint32_t *chain)
{
	uint64_t h, c;
	uint32_t got = 0, t;

	for (t = 0; t < TRIES; t++) {
		h = __atomic_load_n(&sampler_ctl.pool_head, __ATOMIC_ACQUIRE);
		/* a chain read while others change it is checked by the
		 * compare-and-swap below, and every index is checked
		 * before it is read through */
		for (got = 0, c = HEAD(h); got < want && c && c < g->nchunks;
		     got++) {
			chain[got] = (uint32_t)c;
			c = LOAD(g->next[c]);
		}
		if (!got)
			return 0;
		if (c >= g->nchunks)
			c = 0;
		if (__atomic_compare_exchange_n(&sampler_ctl.pool_head, &h,
						(TAG(h) + 1) << 32 | c, false,
						__ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED))
			return got;
	}
	return 0;
}

uint32_t chunks_take(const struct geo *g, uint32_t want, uint32_t *chain)
{
	uint32_t got = take_listed(g, want, chain);
	uint64_t f, i;

	if (got == want)
		return got;
	/* the rest never used: 1 + pool_fresh on, while there are any */
	f = __atomic_fetch_add(&sampler_ctl.pool_fresh, want - got,
			       __ATOMIC_RELAXED);
	for (i = f + 1; got < want && i < g->nchunks; i++)
		chain[got++] = (uint32_t)i;
	return got;
}

void chunks_give(const struct geo *g, const uint32_t *chain, uint32_t n)
{
	uint64_t h;
	uint32_t i, t;

	if (!n)
		return;
	for (i = 0; i + 1 < n; i++)
		STORE(g->next[chain[i]], chain[i + 1]);
	for (t = 0; t < TRIES; t++) {
		h = __atomic_load_n(&sampler_ctl.pool_head, __ATOMIC_ACQUIRE);
		STORE(g->next[chain[n - 1]], HEAD(h));
		if (__atomic_compare_exchange_n(&sampler_ctl.pool_head, &h,
						(TAG(h) + 1) << 32 | chain[0],
						false, __ATOMIC_RELEASE,
						__ATOMIC_RELAXED))
			return;
	}
}

/* The chunks @r names, those that are chunks of the pool: how many. */
static uint32_t chunks_of(const struct geo *g, const struct sampler_rec *r,
			  uint32_t *chain)
{
	uint32_t n = r->nchunks, i, k = 0;

	if (n > SAMPLER_REC_CHUNKS)
		n = SAMPLER_REC_CHUNKS;
	for (i = 0; i < n; i++)
		if (r->chunk[i] && r->chunk[i] < g->nchunks)
			chain[k++] = r->chunk[i];
	return k;
}

void rec_give(const struct geo *g, struct sampler_rec *r)
{
	uint32_t chain[SAMPLER_REC_CHUNKS];

	/* taken before the pool last started afresh (a switch-on, a release):
	 * its chunks may be another record's by now */
	if (r->epoch != LOAD(sampler_ctl.round))
		return;
	chunks_give(g, chain, chunks_of(g, r, chain));
}

/*
 * Cut the record @r, about to be kept, to what the reservoir has room
 * for now that the record it replaces, of @old_n chunks, goes: each
 * record keeps its own chunk (with the first bytes of its stack, its
 * innermost frames), and the chunks past those, all records together,
 * are at most SAMPLER_KEPT_CHUNKS - SAMPLER_KEPT (counted in
 * kept_chunks).  So the reservoir never holds more than
 * SAMPLER_KEPT_CHUNKS, but for threads keeping at the same moment.
 */
static void fit(const struct geo *g, struct sampler_rec *r, uint32_t old_n)
{
	uint64_t used = LOAD(sampler_ctl.kept_chunks);
	uint64_t old = old_n ? old_n - 1 : 0, room, cap, n = r->nchunks;

	if (!n || n > SAMPLER_REC_CHUNKS)	/* keep() checked: never */
		return;
	used = used > old ? used - old : 0;
	room = SAMPLER_KEPT_CHUNKS - SAMPLER_KEPT;
	room = used < room ? room - used : 0;
	if (n - 1 > room) {
		n = 1 + room;
		chunks_give(g, r->chunk + n, (uint32_t)(r->nchunks - n));
		r->nchunks = (uint32_t)n;
	}
	cap = n * g->chunk_bytes - SAMPLER_REC_BYTES;
	if (r->stack_len > cap)
		r->stack_len = cap;
	__atomic_fetch_add(&sampler_ctl.kept_chunks, n - 1 - old,
			   __ATOMIC_RELAXED);
}

/*
 * The k-th offer to a part of m slots since prof on is kept in its slot
 * k-1 while there is room, then with probability m / k in a slot drawn
 * at random (Vitter's algorithm R), the record it replaces given back.
 * A slot being written by another thread is not waited for: this offer
 * is dropped (kept_seen still counts it).  A slot's sequence is odd
 * while it changes, so that a dump that read it before keeps nothing
 * it read.
 */
void keep(const struct geo *g, uint64_t head, struct sampler_rec *r)
{
	bool large = LOAD(r->size) / SAMPLER_KEPT_LARGE_MEANS >=
		     LOAD(sampler_ctl.mean);
	uint64_t first = large ? SAMPLER_KEPT_SMALL : 0;
	uint64_t m = large ? SAMPLER_KEPT - SAMPLER_KEPT_SMALL
			   : SAMPLER_KEPT_SMALL;
	struct sampler_kept *to;
	struct sampler_rec *old;
	uint64_t k, q, seq;

	/* a record of an earlier round (the table given back, or started
	 * afresh, while this thread was inside a hook) is nobody's now */
	if (LOAD(r->epoch) != LOAD(sampler_ctl.round) || !r->nchunks ||
	    r->nchunks > SAMPLER_REC_CHUNKS)
		return;
	k = __atomic_add_fetch(&sampler_ctl.kept_seen[large], 1,
			       __ATOMIC_RELAXED);
	if (k <= m) {
		q = k - 1;
	} else {
		q = mix64(k * 0x9e3779b97f4a7c15ull ^ head ^
			  LOAD(sampler_ctl.threads[0].seed)) % k;
		if (q >= m) {
			rec_give(g, r);
			return;
		}
	}
	to = &g->kept[first + q];
	seq = LOAD(to->seq);
	if ((seq & 1) ||
	    !__atomic_compare_exchange_n(&to->seq, &seq, seq | 1, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		rec_give(g, r);
		return;
	}
	/* the odd sequence before any of the slot (a seqlock's writer) */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	old = seq ? rec_at(g, LOAD(to->head)) : NULL;
	if (old && old->epoch != LOAD(sampler_ctl.round))
		old = NULL;
	fit(g, r, old ? old->nchunks : 0);
	STORE(to->head, head);
	__atomic_store_n(&to->seq, seq + 2, __ATOMIC_RELEASE);
	if (old)
		rec_give(g, old);
}
