/*
 * The sampler's code inside the target, its records: the per-thread
 * countdowns and the table of sampled blocks (sampler/layout.h); the
 * chunks records live in and the reservoir of freed ones are
 * sampler/image/pool.c, the hooks that use them sampler/image/hooks.c,
 * and sampler/image/slots.c has the calls memsnap makes on a borrowed
 * thread to swap GOT slots to the hooks and back.  It is copied into
 * an anonymous mapping of the target, so it is freestanding: no libc,
 * no TLS, no data but the zero-filled control block (reached
 * PC-relatively), no relocations (sampler/image/image.mk checks the
 * objects and the link).  Nothing here takes a lock or allocates: a
 * signal handler may call a hook while the thread it interrupted is
 * inside another.  Only a sampled allocation makes system calls
 * (process_vm_readv, to copy a stack not known mapped without
 * faulting, and getpid once per process), and only when memsnap found
 * them allowed.
 */
#include "sampler/image/records.h"

struct sampler_ctl sampler_ctl;

/*
 * log2(r) for r >= 1, in 32.32 fixed point, by repeated squaring, to 20
 * bits of the fraction: what is left off is less than 2^-20, less than
 * a byte of a countdown at a mean of a MiB.  Without a branch in the
 * loop, whose every test is a coin toss the processor would guess
 * wrong half of the time: one is drawn at every sample.
 */
static uint64_t log2_q32(uint64_t r)
{
	int e = 63 - __builtin_clzll(r), i;
	uint64_t m = e >= 62 ? r >> (e - 62) : r << (62 - e); /* [1, 2) Q62 */
	uint64_t frac = 0, two;

	for (i = 31; i >= 12; i--) {
		m = (uint64_t)(((unsigned __int128)m * m) >> 62);
		two = m >> 63;	/* >= 2.0 */
		m >>= two;
		frac |= two << i;
	}
	return (uint64_t)e << 32 | frac;
}

/*
 * The bytes to the next sample: -mean * ln(u), u uniform in (0, 1], as
 * mean * ln2 * (53 - log2(r)) for a 53-bit draw r (xorshift64*).
 */
static int64_t next_interval(struct sampler_thread *t, uint64_t mean)
{
	uint64_t x = t->rng, r, nl2;
	unsigned __int128 v;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	t->rng = x;
	r = (x * 0x2545f4914f6cdd1dull) >> 11;
	if (!r)
		r = 1;
	nl2 = (53ull << 32) - log2_q32(r);
	v = (unsigned __int128)nl2 * 2977044472ull; /* ln 2 in Q32: Q64 */
	v = (v >> 32) * mean;			      /* Q32 */
	return (int64_t)(v >> 32) + 1;
}

/* The bucket of block @p among @n / SAMPLER_BUCKET. */
static inline uint64_t bucket_of(uint64_t p, uint64_t n)
{
	return sampler_bucket_hash(p) & (n / SAMPLER_BUCKET - 1);
}

/*
 * The pid, once asked, in the image's last page: memsnap marks that
 * page MADV_WIPEONFORK when it maps the image (ctl.wiped), so a fork
 * child reads 0 there and asks again.  A process that shares the
 * memory without being a fork (vfork, CLONE_VM) may leave its own pid
 * behind; the copy that then fails for want of that process asks
 * again (remote_read()).
 */
uint64_t sampler_pid __attribute__((section(".wipe")));

long self_pid(void)
{
	long pid;

	if (!LOAD(sampler_ctl.wiped))
		return raw_syscall6(SYS_getpid_nr, 0, 0, 0, 0, 0, 0);
	pid = (long)LOAD(sampler_pid);
	if (pid > 0)
		return pid;
	pid = raw_syscall6(SYS_getpid_nr, 0, 0, 0, 0, 0, 0);
	if (pid > 0)
		STORE(sampler_pid, (uint64_t)pid);
	return pid;
}

long remote_read(const struct iov *local, long nl, const struct iov *remote,
		 long nr)
{
	long pid = self_pid(), got;

	got = raw_syscall6(SYS_process_vm_readv_nr, pid, (long)local, nl,
			   (long)remote, nr, 0);
	if ((got == -3 /* ESRCH */ || got == -1 /* EPERM */) &&
	    LOAD(sampler_ctl.wiped)) {
		STORE(sampler_pid, 0);
		got = raw_syscall6(SYS_process_vm_readv_nr, self_pid(),
				   (long)local, nl, (long)remote, nr, 0);
	}
	return got;
}

uint64_t copy_self(void *to, uint64_t addr, uint64_t len)
{
	struct iov local = { (uint64_t)(uintptr_t)to, len },
		   remote = { addr, len };
	long n;

	if (LOAD(sampler_ctl.copy) != SAMPLER_COPY_VM_READV || !len)
		return 0;
	n = remote_read(&local, 1, &remote, 1);
	return n > 0 ? (uint64_t)n : 0;
}

/* A thread's stack mapping bigger than this is not believed. */
#define BLOCK_MAX (1ull << 32)

/* CLOCK_REALTIME_COARSE, as the kernel numbers it on every CPU. */
#define CLOCK_REALTIME_COARSE_ID 5

/*
 * How far up from @sp the stack may be copied with plain loads, or 0
 * when only the kernel's copy is safe.  Two ranges stay mapped while
 * a thread runs on them (memsnap found both before prof on:
 * sampler/stack_bounds.c, and docs/DESIGN.md, "Stacks", says why):
 *
 *  - the main thread's stack, [main_lo, main_hi) as /proc showed it:
 *    the kernel grows it down and never shrinks it;
 *  - the thread's own stack mapping, whose start and size its libc
 *    keeps at block_off from the thread pointer: when it holds both sp
 *    and the thread pointer, every frame lies between the two (the
 *    thread's control block and TLS are at the mapping's top).
 *
 * Anything else (a fiber's stack, a sigaltstack, a thread whose libc
 * memsnap did not learn) gets 0.
 */
static uint64_t plain_end(uint64_t sp)
{
	uint64_t lo = LOAD(sampler_ctl.main_lo), hi = LOAD(sampler_ctl.main_hi);
	uint64_t off = LOAD(sampler_ctl.block_off), tp, b, n;

	if (sp >= lo && sp < hi)
		return hi;
	if (!off)
		return 0;
	tp = thread_pointer();
	b = *(const volatile uint64_t *)(uintptr_t)(tp + off);
	n = *(const volatile uint64_t *)(uintptr_t)(tp + off + 8);
	if (b && b <= sp && sp < tp && n <= BLOCK_MAX && tp - b < n)
		return tp;
	return 0;
}

bool geo_of(struct geo *g)
{
	uint64_t t = LOAD(sampler_ctl.table);

	g->n = LOAD(sampler_ctl.nrecs);
	g->stack_bytes = LOAD(sampler_ctl.stack_bytes);
	if (!t || g->n < SAMPLER_BUCKET || (g->n & (g->n - 1)) ||
	    !g->stack_bytes || g->stack_bytes > (1u << 20) ||
	    sampler_table_len(g->n, g->stack_bytes) !=
		    LOAD(sampler_ctl.table_len))
		return false;
	g->keys = (uint64_t *)(uintptr_t)t;
	g->counts = (unsigned char *)(uintptr_t)(t + sampler_counts_off(g->n));
	g->heads = (uint32_t *)(uintptr_t)(t + sampler_heads_off(g->n));
	g->kept = (struct sampler_kept *)(uintptr_t)(t +
						     sampler_kept_off(g->n));
	g->next = (uint32_t *)(uintptr_t)(t + sampler_next_off(g->n));
	g->pool = (unsigned char *)(uintptr_t)(t + sampler_pool_off(g->n));
	g->nchunks = sampler_nchunks(g->n);
	g->chunk_bytes = sampler_chunk_bytes(g->stack_bytes);
	return true;
}

/* Where piece @i of a record's stack is, in chunk @c, and how long: the
 * rest of the record's own chunk, then each other chunk whole. */
static unsigned char *piece(const struct geo *g, uint32_t c, uint32_t i,
			    uint64_t *len)
{
	unsigned char *at = g->pool + (uint64_t)c * g->chunk_bytes;

	*len = i ? g->chunk_bytes : g->chunk_bytes - SAMPLER_REC_BYTES;
	return i ? at : at + SAMPLER_REC_BYTES;
}

/*
 * Copy @len bytes of stack from @sp into the pieces of the @n chunks of
 * @chain, in place (@end: the end plain_end() knows mapped), or by the
 * kernel, which stops at an unmapped page instead of faulting: the
 * bytes copied.  (The chain, not the record: a release may zero the
 * record under this thread, never its own stack's copy of the chain.)
 */
static uint64_t copy_stack(const struct geo *g, const uint32_t *chain,
			   uint32_t n, uint64_t sp, uint64_t end, uint64_t len)
{
	struct iov local[SAMPLER_REC_CHUNKS], remote = { sp, len };
	uint64_t done = 0, k;
	uint32_t i;
	long got;

	for (i = 0; i < n && done < len; i++) {
		local[i].base = (uint64_t)(uintptr_t)piece(g, chain[i], i, &k);
		local[i].len = k < len - done ? k : len - done;
		if (end)
			copy_words((void *)(uintptr_t)local[i].base,
				   (const void *)(uintptr_t)(sp + done),
				   local[i].len / 8);
		done += local[i].len;
	}
	if (end) {
		ADD(this_thread()->plain, 1);
		return done;
	}
	got = remote_read(local, i, &remote, 1);
	return got > 0 ? (uint64_t)got : 0;
}

/*
 * A record for a sample whose registers are @regs: its chunks taken,
 * as many as its stack needs (a shallow stack takes one), the stack
 * copied from the registers' sp, in place where plain_end() knows it
 * mapped, else by the kernel (chunks it did not fill given back).  Its
 * ptr is 0 until it is published.  NULL: the pool is spent.
 */
static struct sampler_rec *take_record(const struct geo *g,
				       const uint64_t *regs, uint64_t *head)
{
	uint64_t sp = regs[SAMPLER_REG_SP], end = 0, len = 0, cap;
	uint32_t chain[SAMPLER_REC_CHUNKS], got, i;
	struct sampler_rec *r;

	if (LOAD(sampler_ctl.copy) == SAMPLER_COPY_VM_READV) {
		end = sp & 7 ? 0 : plain_end(sp);
		len = end ? end - sp : g->stack_bytes;
		if (len > g->stack_bytes)
			len = g->stack_bytes;
		len &= ~7ull;
	}
	got = chunks_take(g, (uint32_t)sampler_rec_chunks(len, g->chunk_bytes),
			  chain);
	if (!got)
		return NULL;
	r = (struct sampler_rec *)(g->pool +
				   (uint64_t)chain[0] * g->chunk_bytes);
	STORE(r->ptr, 0);
	r->epoch = LOAD(sampler_ctl.round);
	r->nchunks = got;
	for (i = 0; i < got; i++)
		r->chunk[i] = chain[i];
	for (i = 0; i < SAMPLER_NREGS; i++)
		r->regs[i] = regs[i];
	cap = got * g->chunk_bytes - SAMPLER_REC_BYTES;
	len = len ? copy_stack(g, chain, got, sp, end, len < cap ? len : cap)
		  : 0;
	r->stack_len = len;
	/* the kernel's copy may have stopped short */
	i = (uint32_t)sampler_rec_chunks(len, g->chunk_bytes);
	if (i < got) {
		chunks_give(g, chain + i, got - i);
		r->nchunks = i;
	}
	*head = chain[0];
	return r;
}

/* The slot among @p's 2 * SAMPLER_BUCKET that holds @p already (its
 * block freed where no hook saw it), or 2 * SAMPLER_BUCKET. */
static uint64_t stale_of(const struct geo *g, uint64_t b, uint64_t p)
{
	uint64_t i;

	for (i = 0; i < 2 * SAMPLER_BUCKET; i++)
		if (LOAD(g->keys[(b * SAMPLER_BUCKET + i) & (g->n - 1)]) == p)
			break;
	return i;
}

/*
 * Give block @p the record at chunk @head: claim a free key of its
 * bucket or the next one and count it in its own bucket's byte, then
 * name the record.  A stale key of the same address (freed where no
 * hook saw it) is taken over wherever it is in the two buckets, a free
 * slot before it or not (a second key would outlive the block's next
 * free), and its record given back.  false: no room.
 */
static bool claim(const struct geo *g, uint64_t p, uint64_t head)
{
	uint64_t b = bucket_of(p, g->n), i = stale_of(g, b, p);

	if (i == 2 * SAMPLER_BUCKET)
		i = 0;
	for (; i < 2 * SAMPLER_BUCKET; i++) {
		uint64_t j = (b * SAMPLER_BUCKET + i) & (g->n - 1);
		uint64_t k = LOAD(g->keys[j]), old;

		if ((k != 0 && k != p) ||
		    !__atomic_compare_exchange_n(&g->keys[j], &k, p, false,
						 __ATOMIC_ACQUIRE,
						 __ATOMIC_RELAXED))
			continue;
		old = __atomic_exchange_n(&g->heads[j], (uint32_t)head,
					  __ATOMIC_ACQ_REL);
		if (!k)
			__atomic_fetch_add(&g->counts[b], 1, __ATOMIC_RELAXED);
		else if (rec_at(g, old))
			rec_give(g, rec_at(g, old));
		return true;
	}
	return false;
}

/*
 * Record block @p of @size from @caller, by hook @fn: a record taken
 * from the pool and filled, the registers and the stack, then given a
 * key, and its ptr published last.  Not inlined: its frame is where the
 * registers are taken, and memsnap unwinds out of it with the sampler's
 * own CFI.
 */
__attribute__((noinline)) void remember(uint64_t p, uint64_t size,
					uint64_t caller, uint64_t fn)
{
	uint64_t regs[SAMPLER_NREGS], head = 0, i;
	struct sampler_rec *r;
	struct geo g;

	/* a loop, not an initializer: that could become a call to memset */
	for (i = SAMPLER_REGS_SAVED; i < SAMPLER_NREGS; i++)
		regs[i] = 0;
	capture_regs(regs);
	if (!geo_of(&g) || !(r = take_record(&g, regs, &head))) {
		ADD(this_thread()->dropped, 1);
		return;
	}
	r->size = size;
	r->caller = caller;
	r->fn = fn;
	if (!claim(&g, p, head)) {
		rec_give(&g, r);
		ADD(this_thread()->dropped, 1);
		return;
	}
	__atomic_store_n(&r->ptr, p, __ATOMIC_RELEASE);
	ADD(this_thread()->samples, 1);
}

/*
 * Forget @p's record, if it has one (offered to the reservoir); its
 * size into *@size.  The caller frees @p afterwards: once freed, the
 * address may be handed out and sampled again.  The record leaves its
 * key before the reservoir has it, so that a dump, which reads the
 * reservoir first, counts it once at most.  NULL has no record and is
 * asked for often (free(NULL)): a key of 0 is an empty slot, and taking
 * one for NULL's record would count NULL's bucket down under a block
 * that lives there, whose own free the one-byte filter would then pass
 * by, leaving its record live for good.
 */
__attribute__((noinline)) bool forget(uint64_t p, uint64_t *size)
{
	uint64_t b, i, head;
	struct sampler_rec *r;
	struct geo g;

	if (!p || !geo_of(&g))
		return false;
	b = bucket_of(p, g.n);
	for (i = 0; i < 2 * SAMPLER_BUCKET; i++) {
		uint64_t j = (b * SAMPLER_BUCKET + i) & (g.n - 1), k = p;

		if (LOAD(g.keys[j]) != p)
			continue;
		/* the key holds @p: its record is this thread's alone */
		head = __atomic_exchange_n(&g.heads[j], 0, __ATOMIC_ACQ_REL);
		r = rec_at(&g, head);
		if (!__atomic_compare_exchange_n(&g.keys[j], &k, 0, false,
						 __ATOMIC_RELEASE,
						 __ATOMIC_RELAXED)) {
			if (r)
				rec_give(&g, r);
			return false;
		}
		__atomic_fetch_sub(&g.counts[b], 1, __ATOMIC_RELAXED);
		ADD(this_thread()->freed, 1);
		*size = 0;
		if (!r)
			return true;
		*size = LOAD(r->size);
		__atomic_store_n(&r->ptr, 0, __ATOMIC_RELEASE);
		keep(&g, head, r);
		return true;
	}
	return false;
}

/* The countdown of @t ran out on @size bytes: draw the next one.  true
 * when the block is to be recorded. */
/*
 * Is the lease of the watch that switched sampling on past?  Asked at a
 * sample only (one a mean's bytes), so its system call costs the fast
 * path nothing: a watch killed before its prof off leaves the target
 * the hooks' fast path and this, no records.  The first sample to find
 * it past says when.  A clock that cannot be read takes the sample.
 */
static bool lease_lapsed(void)
{
	uint64_t until = LOAD(sampler_ctl.lease_until);
	struct {
		long sec, nsec;
	} now;

	if (!until ||
	    raw_syscall6(SYS_clock_gettime_nr, CLOCK_REALTIME_COARSE_ID,
			 (long)(uintptr_t)&now, 0, 0, 0, 0) ||
	    (uint64_t)now.sec <= until)
		return false;
	if (!LOAD(sampler_ctl.lapsed_at))
		STORE(sampler_ctl.lapsed_at, (uint64_t)now.sec);
	return true;
}

bool redraw(struct sampler_thread *t, uint64_t size)
{
	uint64_t mean = LOAD(sampler_ctl.mean);
	int64_t left;

	if (!mean || !LOAD(sampler_ctl.active)) {
		/* a countdown that ticks on while off: seldom here */
		STORE(t->left, INT64_MAX / 2);
		return false;
	}
	if (!t->rng) {
		/* First use of this slot: start its countdown here, from
		 * the round's random seed (memsnap's getrandom at prof on)
		 * mixed with this thread, the round's count and the
		 * table's address, so that neither the same allocations
		 * after the next prof on nor the same program run again
		 * draws the same samples */
		t->rng = mix64(LOAD(t->seed) ^ thread_pointer() ^
			       (uint64_t)(uintptr_t)t ^
			       (LOAD(sampler_ctl.started) + 1) *
				       0x9e3779b97f4a7c15ull ^
			       LOAD(sampler_ctl.table) * 0xbf58476d1ce4e5b9ull);
		if (!t->rng)
			t->rng = 1;
		left = (int64_t)((uint64_t)next_interval(t, mean) - size);
		if (left > 0) {
			STORE(t->left, left);
			return false;
		}
	}
	STORE(t->left, next_interval(t, mean));
	return !lease_lapsed();
}



