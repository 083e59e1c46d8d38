/*
 * The sampler's code inside the target, its records: the per-thread
 * countdowns and the table of sampled blocks (sampler/layout.h); the
 * hooks that use them are sampler/image/hooks.c, and sampler/image/slots.c has the
 * calls memsnap makes on a borrowed thread to swap GOT slots to the
 * hooks and back.  It is copied into an anonymous mapping of the
 * target, so it is freestanding: no libc, no TLS, no data but the
 * zero-filled control block (reached PC-relatively), no relocations
 * (sampler/image/image.mk checks the objects and the link).  Nothing here
 * takes a lock or allocates: a signal handler may call a hook while
 * the thread it interrupted is inside another.  Only a sampled
 * allocation makes system calls (process_vm_readv, to copy its stack
 * without faulting, and getpid once per process), and only when memsnap
 * found them allowed.
 */
#include "sampler/image/records.h"

struct sampler_ctl sampler_ctl;

/* Records are looked for this far from their hash slot, no farther: a
 * free of a pointer never sampled costs a bounded probe. */
#define PROBE_MAX 32


/* log2(r) for r >= 1, in 32.32 fixed point, by repeated squaring. */
static uint64_t log2_q32(uint64_t r)
{
	int e = 63 - __builtin_clzll(r), i;
	uint64_t m = e >= 62 ? r >> (e - 62) : r << (62 - e); /* [1, 2) Q62 */
	uint64_t frac = 0;

	for (i = 31; i >= 0; i--) {
		m = (uint64_t)(((unsigned __int128)m * m) >> 62);
		if (m >> 63) {	/* >= 2.0 */
			m >>= 1;
			frac |= 1ull << i;
		}
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

/* splitmix64's finalizer: every bit of @x reaches every bit. */
static uint64_t mix64(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The bucket of block @p among @n / SAMPLER_BUCKET. */
static inline uint64_t bucket_of(uint64_t p, uint64_t n)
{
	return ((p >> 4) * 0x9e3779b97f4a7c15ull >> 20) &
	       (n / SAMPLER_BUCKET - 1);
}

static inline struct sampler_rec *rec_of(uint64_t *keys, uint64_t n,
					 uint64_t i)
{
	return (struct sampler_rec *)((char *)keys + sampler_recs_off(n)) + i;
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

long remote_read(const struct iov *local, const struct iov *remote, long n)
{
	long pid = self_pid(), got;

	got = raw_syscall6(SYS_process_vm_readv_nr, pid, (long)local, n,
			   (long)remote, n, 0);
	if ((got == -3 /* ESRCH */ || got == -1 /* EPERM */) &&
	    LOAD(sampler_ctl.wiped)) {
		STORE(sampler_pid, 0);
		got = raw_syscall6(SYS_process_vm_readv_nr, self_pid(),
				   (long)local, n, (long)remote, n, 0);
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
	n = remote_read(&local, &remote, 1);
	return n > 0 ? (uint64_t)n : 0;
}

/* A thread's stack mapping bigger than this is not believed. */
#define BLOCK_MAX (1ull << 32)

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

/*
 * Copy the stack from @sp into @to, @len bytes at most: in place where
 * plain_end() knows it mapped, else by the kernel (copy_self()).  The
 * bytes copied.
 */
static uint64_t copy_stack(void *to, uint64_t sp, uint64_t len)
{
	uint64_t end;

	if (LOAD(sampler_ctl.copy) != SAMPLER_COPY_VM_READV || !len)
		return 0;
	end = plain_end(sp);
	if (!end || sp & 7)
		return copy_self(to, sp, len);
	if (end - sp < len)
		len = end - sp;
	len &= ~7ull;
	copy_words(to, (const void *)(uintptr_t)sp, len / 8);
	ADD(sampler_ctl.plain, 1);
	return len;
}

/* Are the 8 bytes at @a and at @b both mapped?  (One system call.) */
static bool mapped2(uint64_t a, uint64_t b)
{
	uint64_t scratch[2];
	struct iov local[2] = { { (uint64_t)(uintptr_t)&scratch[0], 8 },
				{ (uint64_t)(uintptr_t)&scratch[1], 8 } },
		   remote[2] = { { a, 8 }, { b, 8 } };

	return LOAD(sampler_ctl.copy) == SAMPLER_COPY_VM_READV &&
	       remote_read(local, remote, 2) == 16;
}

/* The slot among @p's 2 * SAMPLER_BUCKET that holds @p already (its
 * block freed where no hook saw it), or 2 * SAMPLER_BUCKET. */
static uint64_t stale_of(const uint64_t *keys, uint64_t n, uint64_t b,
			 uint64_t p)
{
	uint64_t i;

	for (i = 0; i < 2 * SAMPLER_BUCKET; i++)
		if (LOAD(keys[(b * SAMPLER_BUCKET + i) & (n - 1)]) == p)
			break;
	return i;
}

/*
 * Record block @p of @size from @caller: claim a free key of its
 * bucket or the next one, count it in its own bucket's byte, then fill
 * the record, the registers and the stack, and publish the record's ptr
 * last.  A stale key of the same address (freed where no hook saw it)
 * is taken over wherever it is in the two buckets, a free slot before
 * it or not: a second key would outlive the block's next free.  Not
 * inlined: its frame is where the registers are taken, and memsnap
 * unwinds out of it with the sampler's own CFI.
 */
__attribute__((noinline)) void remember(uint64_t p, uint64_t size,
					uint64_t caller, uint64_t fn)
{
	uint64_t n, b, i, *keys = keys_of(&n);

	if (!keys) {
		ADD(sampler_ctl.dropped, 1);
		return;
	}
	b = bucket_of(p, n);
	i = stale_of(keys, n, b, p);
	if (i == 2 * SAMPLER_BUCKET)
		i = 0;
	for (; i < 2 * SAMPLER_BUCKET; i++) {
		uint64_t j = (b * SAMPLER_BUCKET + i) & (n - 1), sb;
		uint64_t k = LOAD(keys[j]);
		struct sampler_rec *r;

		if ((k != 0 && k != p) ||
		    !__atomic_compare_exchange_n(&keys[j], &k, p, false,
						 __ATOMIC_ACQUIRE,
						 __ATOMIC_RELAXED))
			continue;
		if (!k)
			__atomic_fetch_add(&counts_of(keys, n)[b], 1,
					   __ATOMIC_RELAXED);
		r = rec_of(keys, n, j);
		STORE(r->ptr, 0);
		r->size = size;
		r->caller = caller;
		r->fn = fn;
		capture_regs(r->regs);
		/* the geometry as memsnap set it: a table the process
		 * wrote over must not send the copy past it */
		sb = LOAD(sampler_ctl.stack_bytes);
		r->stack_len = 0;
		if (sampler_table_len(n, sb) == LOAD(sampler_ctl.table_len))
			r->stack_len = copy_stack(
				(unsigned char *)keys +
					sampler_stacks_off(n) + j * sb,
				r->regs[SAMPLER_REG_SP], sb);
		__atomic_store_n(&r->ptr, p, __ATOMIC_RELEASE);
		ADD(sampler_ctl.samples, 1);
		return;
	}
	ADD(sampler_ctl.dropped, 1);
}

/*
 * Offer record @j of the table (its block @p being freed) to its part
 * of the reservoir of freed samples: the k-th offer to a part of m
 * slots since prof on is kept in its slot k-1 while there is room, then
 * with probability m / k in a slot drawn at random.  A slot being
 * written by another thread is not waited for: this offer is dropped
 * (kept_seen still counts it).  Called while the key still holds @p, so
 * the record cannot be taken for another block under the copy.  With
 * no process_vm_readv (no stacks) nothing is kept, and memsnap writes
 * no allocation counts.
 */
static void keep(uint64_t *keys, uint64_t n, uint64_t j, uint64_t p)
{
	uint64_t sb = LOAD(sampler_ctl.stack_bytes), k, q, seq, len, i;
	const unsigned char *src;
	unsigned char *dst;
	const struct sampler_rec *from = rec_of(keys, n, j);
	bool large = LOAD(from->size) / SAMPLER_KEPT_LARGE_MEANS >=
		     LOAD(sampler_ctl.mean);
	uint64_t first = large ? SAMPLER_KEPT_SMALL : 0;
	uint64_t m = large ? SAMPLER_KEPT - SAMPLER_KEPT_SMALL
			   : SAMPLER_KEPT_SMALL;
	struct sampler_rec *to;

	k = __atomic_add_fetch(&sampler_ctl.kept_seen[large], 1,
			       __ATOMIC_RELAXED);
	if (k <= m) {
		q = k - 1;
	} else {
		q = mix64(k * 0x9e3779b97f4a7c15ull ^ p ^
			  LOAD(sampler_ctl.threads[0].seed)) % k;
		if (q >= m)
			return;
	}
	q += first;
	to = (struct sampler_rec *)((char *)keys +
				    sampler_kept_off(n, sb)) + q;
	/* the geometry as memsnap set it, the slot probed: a table the
	 * process wrote over must not make it fault here (the stack's
	 * copy cannot: the kernel's) */
	if (sampler_table_len(n, sb) != LOAD(sampler_ctl.table_len) ||
	    !mapped2((uint64_t)(uintptr_t)to,
		     (uint64_t)(uintptr_t)(to + 1) - 8))
		return;
	seq = LOAD(to->ptr);
	if ((seq & 1) ||
	    !__atomic_compare_exchange_n(&to->ptr, &seq, seq | 1, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return;
	/* the odd sequence before any of the record (a seqlock's writer) */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	to->size = from->size;
	to->caller = from->caller;
	to->fn = from->fn;
	for (i = 0; i < SAMPLER_NREGS; i++)
		to->regs[i] = from->regs[i];
	len = from->stack_len <= sb ? from->stack_len : 0;
	src = (const unsigned char *)keys + sampler_stacks_off(n) + j * sb;
	dst = (unsigned char *)keys + sampler_kept_stacks_off(n, sb) + q * sb;
	to->stack_len = copy_self(dst, (uint64_t)(uintptr_t)src, len);
	__atomic_store_n(&to->ptr, seq + 2, __ATOMIC_RELEASE);
}

/*
 * Forget @p's record, if it has one (offered to the reservoir first);
 * its size into *@size.  The caller frees @p afterwards: once freed,
 * the address may be handed out and sampled again.  NULL has no record
 * and is asked for often (free(NULL)): a key of 0 is an empty slot, and
 * taking one for NULL's record would count NULL's bucket down under a
 * block that lives there, whose own free the one-byte filter would then
 * pass by, leaving its record live for good.
 */
__attribute__((noinline)) bool forget(uint64_t p, uint64_t *size)
{
	uint64_t n, b, i, *keys = keys_of(&n);

	if (!keys || !p)
		return false;
	b = bucket_of(p, n);
	for (i = 0; i < 2 * SAMPLER_BUCKET; i++) {
		uint64_t j = (b * SAMPLER_BUCKET + i) & (n - 1), k = p;

		if (LOAD(keys[j]) != p)
			continue;
		*size = LOAD(rec_of(keys, n, j)->size);
		keep(keys, n, j, p);
		if (!__atomic_compare_exchange_n(&keys[j], &k, 0, false,
						 __ATOMIC_RELEASE,
						 __ATOMIC_RELAXED))
			return false;
		__atomic_fetch_sub(&counts_of(keys, n)[b], 1,
				   __ATOMIC_RELAXED);
		ADD(sampler_ctl.freed, 1);
		return true;
	}
	return false;
}


/* The countdown of @t ran out on @size bytes: draw the next one.  true
 * when the block is to be recorded. */
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
	return true;
}



