/*
 * The sampler's in-target code, run in the test process: the image is
 * mapped at an address of the kernel's choosing as memsnap maps it in a
 * target (code r-x, the control block in the zero pages after it), its
 * originals are this process's allocator, and the hooks are called
 * directly.  What is checked: the countdown samples by bytes with the
 * right rate (the unsampled estimate finds the bytes really allocated),
 * records follow frees and reallocs, nothing is sampled while inactive,
 * threads that share the tables lose no record, a record carries the
 * registers and a copy of the stack, and sampler_on()/sampler_off()
 * swap slots (on a read-only page too) and put back exactly what was
 * there.
 */
#include "sampler/layout.h"
#include "sampler-offsets.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define NRECS (1u << 16)
/* The least memsnap makes: with less, the sampler's own frames (its
 * record's registers and chunk list live in remember()'s, larger on
 * AArch64) could leave no room for the caller's. */
#define STACK_BYTES 4096

static unsigned char *base;
static size_t base_len;
static struct sampler_ctl *ctl;
static uint64_t *keys;
static uint32_t *heads;
static struct sampler_kept *kept;
static unsigned char *pool;
static size_t table_len, chunk_bytes;
static long (*h_on)(struct sampler_on_args *, uint64_t seed);
static long (*h_off)(void);

static void *(*h_malloc)(size_t);
static void (*h_free)(void *);
static void *(*h_calloc)(size_t, size_t);
static void *(*h_realloc)(void *, size_t);
static int (*h_posix_memalign)(void **, size_t, size_t);
static void *(*h_aligned_alloc)(size_t, size_t);
static void *(*h_memalign)(size_t, size_t);

static void load(void)
{
	static unsigned char img[SAMPLER_OFF_sampler_data_start];
	long ps = sysconf(_SC_PAGESIZE);
	FILE *f = fopen(SAMPLER_IMG, "rb");
	size_t n;

	cr_assert_not_null(f, "%s: %s", SAMPLER_IMG, strerror(errno));
	n = fread(img, 1, sizeof(img), f);
	fclose(f);
	cr_assert_gt(n, 0);
	cr_assert_leq(n, SAMPLER_OFF_sampler_code_end);
	base_len = (SAMPLER_OFF_sampler_image_end + ps - 1) & ~(size_t)(ps - 1);
	base = mmap(NULL, base_len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(base, MAP_FAILED);
	memcpy(base, img, n);
	cr_assert_eq(mprotect(base, SAMPLER_OFF_sampler_data_start,
			      PROT_READ | PROT_EXEC), 0);
	ctl = (struct sampler_ctl *)(base + SAMPLER_OFF_sampler_ctl);
	table_len = sampler_table_len(NRECS, STACK_BYTES);
	keys = mmap(NULL, table_len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	cr_assert_neq(keys, MAP_FAILED);
	heads = (uint32_t *)((char *)keys + sampler_heads_off(NRECS));
	kept = (struct sampler_kept *)((char *)keys + sampler_kept_off(NRECS));
	pool = (unsigned char *)keys + sampler_pool_off(NRECS);
	chunk_bytes = sampler_chunk_bytes(STACK_BYTES);

	ctl->orig[SAMPLER_MALLOC] = (uintptr_t)malloc;
	ctl->orig[SAMPLER_FREE] = (uintptr_t)free;
	ctl->orig[SAMPLER_CALLOC] = (uintptr_t)calloc;
	ctl->orig[SAMPLER_REALLOC] = (uintptr_t)realloc;
	ctl->orig[SAMPLER_POSIX_MEMALIGN] = (uintptr_t)posix_memalign;
	ctl->orig[SAMPLER_ALIGNED_ALLOC] = (uintptr_t)aligned_alloc;
	ctl->orig[SAMPLER_MEMALIGN] = (uintptr_t)memalign;
	ctl->table = (uintptr_t)keys;
	ctl->table_len = table_len;
	ctl->nrecs = NRECS;
	ctl->counts = (uintptr_t)keys + sampler_counts_off(NRECS);
	ctl->bucket_mask = NRECS / SAMPLER_BUCKET - 1;
	ctl->stack_bytes = STACK_BYTES;
	ctl->copy = SAMPLER_COPY_VM_READV;
	ctl->mean = 64 * 1024;
	ctl->page_size = (uint64_t)ps;
	ctl->version = SAMPLER_VERSION;
	memcpy(ctl->signature, SAMPLER_SIGNATURE, sizeof(ctl->signature));

#define HOOK(v, name) (v = (__typeof__(v))(void *)(base + SAMPLER_OFF_##name))
	HOOK(h_malloc, sampler_malloc);
	HOOK(h_free, sampler_free);
	HOOK(h_calloc, sampler_calloc);
	HOOK(h_realloc, sampler_realloc);
	HOOK(h_posix_memalign, sampler_posix_memalign);
	HOOK(h_aligned_alloc, sampler_aligned_alloc);
	HOOK(h_memalign, sampler_memalign);
	HOOK(h_on, sampler_on);
	HOOK(h_off, sampler_off);
}

static void unload(void)
{
	munmap(base, base_len);
	munmap(keys, table_len);
}

TestSuite(sampler, .init = load, .fini = unload, .timeout = 120);

/* A count every thread slot keeps, summed. */
#define total(field)							\
	({								\
		uint64_t sum_ = 0;					\
		for (size_t i_ = 0; i_ < SAMPLER_NTHREADS; i_++)	\
			sum_ += ctl->threads[i_].field;			\
		sum_;							\
	})

/* The record in chunk @c of the pool. */
static struct sampler_rec *rec_in(uint64_t c)
{
	cr_assert(c && c < sampler_nchunks(NRECS), "chunk %" PRIu64, c);
	return (struct sampler_rec *)(pool + c * chunk_bytes);
}

/* Key @i's record, if it names a block and has one published for it. */
static struct sampler_rec *rec_of(size_t i)
{
	struct sampler_rec *r;

	if (!keys[i] || !heads[i])
		return NULL;
	r = rec_in(heads[i]);
	return r->ptr == keys[i] ? r : NULL;
}

static bool live(size_t i)
{
	return rec_of(i) != NULL;
}

/* The stack copy of @r, put together from its chunks into @out (at
 * least STACK_BYTES): its length. */
static size_t stack_of(const struct sampler_rec *r, unsigned char *out)
{
	size_t done = 0, k;
	uint32_t i;

	cr_assert_leq(r->stack_len, STACK_BYTES);
	cr_assert_leq(r->nchunks, SAMPLER_REC_CHUNKS);
	for (i = 0; i < r->nchunks && done < r->stack_len; i++) {
		const unsigned char *c = pool + r->chunk[i] * chunk_bytes;

		if (!i) {
			cr_assert_eq(c, (const unsigned char *)r);
			c += SAMPLER_REC_BYTES;
		}
		k = (i ? chunk_bytes : chunk_bytes - SAMPLER_REC_BYTES);
		if (k > r->stack_len - done)
			k = r->stack_len - done;
		memcpy(out + done, c, k);
		done += k;
	}
	cr_assert_eq(done, r->stack_len, "a record's chunks hold %zu of its "
		     "%" PRIu64 " bytes of stack", done, r->stack_len);
	return done;
}

/* The record kept in slot @i of the reservoir (its sequence even), or
 * NULL. */
static struct sampler_rec *kept_rec(size_t i)
{
	if (!kept[i].seq || (kept[i].seq & 1))
		return NULL;
	return rec_in(kept[i].head);
}

/* The records the reservoir holds. */
static uint64_t kept_records(void)
{
	uint64_t i, n = 0;

	for (i = 0; i < SAMPLER_KEPT; i++)
		n += kept_rec(i) != NULL;
	return n;
}

static size_t live_records(uint64_t *bytes)
{
	size_t i, n = 0;

	*bytes = 0;
	for (i = 0; i < NRECS; i++)
		if (live(i)) {
			n++;
			*bytes += rec_of(i)->size;
		}
	return n;
}

/* What a profile reader estimates from the live records: each sampled
 * block of s bytes stands for s / (1 - exp(-s/mean)) bytes. */
static double unsampled_bytes(void)
{
	double total = 0;
	size_t i;

	for (i = 0; i < NRECS; i++)
		if (live(i)) {
			double s = (double)rec_of(i)->size;

			total += s / (1 - exp(-s / (double)ctl->mean));
		}
	return total;
}

#define NBLOCKS 20000

static void *blocks[NBLOCKS];

/* Live blocks of mixed sizes: the estimate finds their total within 10%;
 * after the frees no record is left. */
Test(sampler, estimate_within_ten_percent)
{
	uint64_t bytes = 0, rb;
	double est;
	size_t i;

	ctl->active = 1;
	for (i = 0; i < NBLOCKS; i++) {
		size_t size = 64 + (i % 97) * 131;	/* 64 .. 12 640 */

		blocks[i] = h_malloc(size);
		cr_assert_not_null(blocks[i]);
		memset(blocks[i], 0x5a, size);
		bytes += size;
	}
	est = unsampled_bytes();
	cr_assert_gt(total(samples), 500, "only %lu samples",
		     (unsigned long)total(samples));
	cr_assert(fabs(est - (double)bytes) < 0.1 * (double)bytes,
		  "estimated %.0f bytes of %lu", est, (unsigned long)bytes);
	cr_assert_eq(live_records(&rb), total(samples));
	for (i = 0; i < NBLOCKS; i++)
		h_free(blocks[i]);
	cr_assert_eq(live_records(&rb), 0, "%lu bytes still recorded",
		     (unsigned long)rb);
	cr_assert_eq(total(freed), total(samples));
	cr_assert_eq(total(dropped), 0);
}

/*
 * Is return address @ra among the 8-byte words of @stack?  Compared on
 * the low 48 bits: on AArch64 with pointer authentication the saved
 * link register carries a signature in the bits above the address.
 */
static bool on_stack(const unsigned char *stack, size_t len, uint64_t ra)
{
	const uint64_t mask = (1ull << 48) - 1;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t w;

		memcpy(&w, stack + i, 8);
		if ((w & mask) == (ra & mask))
			return true;
	}
	return false;
}

/*
 * The pid a stack's copy uses is cached in the image's last page, which
 * memsnap marks MADV_WIPEONFORK: after a fork the child finds it zero,
 * and its samples copy its own stack (a pattern only the child wrote),
 * never the parent's memory at the same address.
 */
static __attribute__((noinline)) int child_sample(uint64_t *pid_cache)
{
	volatile unsigned char mark[256];
	static unsigned char stack[STACK_BYTES];
	uint64_t rb;
	size_t i, k, len;
	void *p;

	for (i = 0; i < sizeof(mark); i++)
		mark[i] = (unsigned char)(0xa5 ^ i);
	if (*pid_cache)
		return 10;	/* not wiped */
	p = ((void *(*volatile)(size_t))h_malloc)(4 << 20);
	if (*pid_cache != (uint64_t)getpid())
		return 11;
	for (k = 0; k < NRECS && !(live(k) && keys[k] == (uintptr_t)p); k++)
		;
	if (k == NRECS || !rec_of(k)->stack_len)
		return 12;
	len = stack_of(rec_of(k), stack);
	if (!memmem(stack, len, (const void *)mark, sizeof(mark)))
		return 13;	/* another process's stack */
	h_free(p);
	return live_records(&rb) ? 14 : 0;
}

Test(sampler, a_fork_child_copies_its_own_stack)
{
	long ps = sysconf(_SC_PAGESIZE);
	uint64_t *pid_cache =
		(uint64_t *)(base + SAMPLER_OFF_sampler_wipe_start);
	int status;
	pid_t c;
	void *p;

	cr_assert_eq(madvise(base + SAMPLER_OFF_sampler_wipe_start,
			     base_len - SAMPLER_OFF_sampler_wipe_start,
			     MADV_WIPEONFORK), 0, "%s", strerror(errno));
	cr_assert_eq(SAMPLER_OFF_sampler_wipe_start % ps, 0);
	ctl->wiped = 1;
	ctl->active = 1;
	p = ((void *(*volatile)(size_t))h_malloc)(4 << 20);
	cr_assert_eq(*pid_cache, (uint64_t)getpid(), "the pid, once asked, "
		     "is cached: %" PRIu64, *pid_cache);
	h_free(p);
	c = fork();
	cr_assert_geq(c, 0);
	if (!c)
		_exit(child_sample(pid_cache));
	cr_assert_eq(waitpid(c, &status, 0), c);
	cr_assert(WIFEXITED(status) && !WEXITSTATUS(status),
		  "the child's sample: status %#x (10 the cache survived the "
		  "fork, 11 not its pid, 12 no stack, 13 not its stack)",
		  status);
	cr_assert_eq(*pid_cache, (uint64_t)getpid());
}

/* The end of this process's mapping that holds @addr (0: none). */
static uint64_t mapping_end(uint64_t addr)
{
	unsigned long long lo, hi, end = 0;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "re");

	cr_assert_not_null(f);
	while (!end && fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx-%llx", &lo, &hi) == 2 && lo <= addr &&
		    addr < hi)
			end = hi;
	fclose(f);
	return end;
}

/* A block bigger than the mean is almost always sampled, and its record
 * names the size asked for and a return address in this test, and holds
 * registers taken inside the sampler's code with the stack above them. */
Test(sampler, records_size_and_caller)
{
	uint64_t rb;
	void *p[8];
	size_t i, k;

	ctl->active = 1;
	for (i = 0; i < 8; i++)
		p[i] = ((void *(*volatile)(size_t))h_malloc)(4 << 20);
	cr_assert_geq(total(samples), 7);
	for (k = 0; k < NRECS; k++) {
		static unsigned char stack[STACK_BYTES];
		const struct sampler_rec *r = rec_of(k);
		uint64_t sp, caller;

		if (!r)
			continue;
		cr_assert_eq(r->size, 4u << 20);
		caller = r->caller;
		cr_assert_neq(caller, 0);
		cr_assert(caller < (uintptr_t)base ||
			  caller >= (uintptr_t)base + base_len,
			  "the caller is the sampler itself");
		cr_assert(r->regs[0] >= (uintptr_t)base &&
			  r->regs[0] < (uintptr_t)base +
					    SAMPLER_OFF_sampler_code_end,
			  "the registers were not taken in the sampler");
		/* STACK_BYTES of it, or what is left up to the end of the
		 * stack's mapping: a test called from near the top (few
		 * frames above it, a small environment) has less */
		sp = r->regs[1];
		cr_assert(r->stack_len == STACK_BYTES ||
				  (r->stack_len > 0 &&
				   sp + r->stack_len == mapping_end(sp)),
			  "%" PRIu64 " bytes of stack copied from %#lx",
			  r->stack_len, (unsigned long)sp);
		/* The caller's return address is on the copied stack. */
		cr_assert(on_stack(stack, stack_of(r, stack), caller),
			  "the return address %#lx is not on the stack copied "
			  "from %#lx", (unsigned long)caller,
			  (unsigned long)sp);
	}
	for (i = 0; i < 8; i++)
		h_free(p[i]);
	cr_assert_eq(live_records(&rb), 0);
}

Test(sampler, inactive_samples_nothing)
{
	void *p = h_malloc(8 << 20), *q = h_calloc(1, 8 << 20);

	cr_assert_not_null(p);
	cr_assert_not_null(q);
	h_free(p);
	h_free(q);
	cr_assert_eq(total(samples), 0);
}

/* An allocator out of memory (the sanitizers abort on real ones). */
static size_t refused;

static void *no_realloc(void *p, size_t size)
{
	(void)p;
	(void)size;
	refused++;
	errno = ENOMEM;
	return NULL;
}

static void *no_calloc(size_t n, size_t size)
{
	(void)n;
	(void)size;
	refused++;
	errno = ENOMEM;
	return NULL;
}

/* realloc moves a record with the block; a failed realloc keeps it;
 * realloc to 0 forgets it; calloc that overflows passes through. */
Test(sampler, realloc_calloc_and_aligned)
{
	uint64_t rb;
	void *p, *q, *a = NULL;

	ctl->active = 1;
	p = h_malloc(4 << 20);
	cr_assert_eq(live_records(&rb), 1);
	q = h_realloc(p, 8 << 20);
	cr_assert_not_null(q);
	cr_assert_eq(live_records(&rb), 1);
	cr_assert_eq(rb, 8u << 20, "recorded %lu", (unsigned long)rb);
	ctl->orig[SAMPLER_REALLOC] = (uintptr_t)no_realloc;
	cr_assert_null(h_realloc(q, 16 << 20));
	cr_assert_eq(refused, 1);
	cr_assert_eq(live_records(&rb), 1, "a failed realloc lost the record");
	cr_assert_eq(rb, 8u << 20);
	ctl->orig[SAMPLER_REALLOC] = (uintptr_t)realloc;
	p = h_realloc(q, 16);
	cr_assert_not_null(p);
	h_free(p);
	cr_assert_eq(live_records(&rb), 0);

	ctl->orig[SAMPLER_CALLOC] = (uintptr_t)no_calloc;
	cr_assert_null(h_calloc((size_t)-1 / 2, 4));
	cr_assert_eq(refused, 2, "an overflowing calloc was not passed on");
	cr_assert_eq(live_records(&rb), 0);
	ctl->orig[SAMPLER_CALLOC] = (uintptr_t)calloc;
	p = h_calloc(1024, 4096);
	cr_assert_not_null(p);
	cr_assert_eq(((unsigned char *)p)[4095], 0);
	cr_assert_eq(h_posix_memalign(&a, 4096, 4 << 20), 0);
	cr_assert_eq((uintptr_t)a % 4096, 0);
	q = h_aligned_alloc(4096, 4 << 20);
	cr_assert_eq((uintptr_t)q % 4096, 0);
	cr_assert_eq(live_records(&rb), 3);
	h_free(p);
	h_free(a);
	h_free(q);
	q = h_memalign(64, 4 << 20);
	cr_assert_eq(live_records(&rb), 1);
	h_free(q);
	cr_assert_eq(live_records(&rb), 0);
	cr_assert_eq(total(dropped), 0);
}

/*
 * Every chunk ever handed out is on the free list or held by a record
 * (the reservoir's: the tests free every block they sampled), each
 * once: none lost, none given twice.
 */
static void pool_accounted(void)
{
	uint64_t n = sampler_nchunks(NRECS), used = ctl->pool_fresh + 1;
	uint32_t *next = (uint32_t *)((char *)keys + sampler_next_off(NRECS));
	unsigned char *seen = calloc(n, 1);
	uint64_t c, listed = 0, held = 0, i;
	uint32_t k;

	cr_assert_not_null(seen);
	if (used > n)
		used = n;
	for (c = (uint32_t)ctl->pool_head; c; c = next[c], listed++) {
		cr_assert(c < used, "chunk %" PRIu64 " listed, never handed "
			  "out", c);
		cr_assert(!seen[c]++, "chunk %" PRIu64 " listed twice", c);
	}
	for (i = 0; i < SAMPLER_KEPT; i++) {
		const struct sampler_rec *r = kept_rec(i);

		for (k = 0; r && k < r->nchunks; k++, held++)
			cr_assert(!seen[r->chunk[k]]++, "chunk %u of kept "
				  "record %" PRIu64 " is listed or held "
				  "twice", r->chunk[k], i);
	}
	cr_assert_eq(listed + held, used - 1, "%" PRIu64 " chunks handed "
		     "out, %" PRIu64 " listed and %" PRIu64 " held",
		     used - 1, listed, held);
	cr_assert_leq(held, SAMPLER_KEPT_CHUNKS);
	free(seen);
}

#define NTHREADS 4
#define PER_THREAD 200000

static void *churn(void *arg)
{
	void *keep[64] = { 0 };
	unsigned int seed = (unsigned int)(uintptr_t)arg;
	size_t i;

	for (i = 0; i < PER_THREAD; i++) {
		size_t k = rand_r(&seed) % 64, size = 16 + rand_r(&seed) % 4096;

		h_free(keep[k]);
		keep[k] = i % 3 ? h_malloc(size) : h_realloc(NULL, size);
	}
	for (i = 0; i < 64; i++)
		h_free(keep[i]);
	return NULL;
}

/* Threads allocating and freeing at once: every record is freed again,
 * and the counters agree with the table. */
Test(sampler, threads_lose_no_record)
{
	pthread_t t[NTHREADS];
	uint64_t rb;
	size_t i;

	ctl->active = 1;
	for (i = 0; i < NTHREADS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, churn,
					    (void *)(uintptr_t)(i + 1)), 0);
	for (i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	cr_assert_gt(total(samples), 1000);
	cr_assert_eq(total(dropped), 0);
	cr_assert_eq(live_records(&rb), 0, "%lu bytes still recorded",
		     (unsigned long)rb);
	cr_assert_eq(total(freed), total(samples));
	pool_accounted();
}

/* The allocator of free_null_forgets_nothing: one block at an address
 * it chose, freed by no one. */
static uint64_t fixed_block;

static void *fixed_malloc(size_t size)
{
	(void)size;
	return (void *)(uintptr_t)fixed_block;
}

static void no_free(void *p)
{
	(void)p;
}

/*
 * free(NULL) is the commonest free there is, and NULL hashes to bucket
 * 0.  With a sampled block living in bucket 0, a free(NULL) must leave
 * the table alone: taken for a record (a key of 0 is an empty slot) it
 * would count bucket 0 down, and once the count read 0 the real block's
 * free would pass its record by, leaving it live for good.
 */
Test(sampler, free_null_forgets_nothing)
{
	static unsigned char arena[1 << 20] __attribute__((aligned(16)));
	uint64_t p, rb;
	size_t i;

	/* an address of the arena whose bucket is NULL's */
	for (p = (uintptr_t)arena; p < (uintptr_t)arena + sizeof(arena);
	     p += 16)
		if (!(sampler_bucket_hash(p) & (NRECS / SAMPLER_BUCKET - 1)))
			break;
	cr_assert_lt(p, (uintptr_t)arena + sizeof(arena), "no address found");
	fixed_block = p;
	ctl->orig[SAMPLER_MALLOC] = (uintptr_t)fixed_malloc;
	ctl->orig[SAMPLER_FREE] = (uintptr_t)no_free;
	ctl->active = 1;
	cr_assert_eq(h_malloc(8 << 20), (void *)(uintptr_t)p);
	cr_assert_eq(live_records(&rb), 1, "the block was not sampled");
	/* more than a count byte can hold */
	for (i = 0; i < 300; i++)
		h_free(NULL);
	cr_assert_eq(total(freed), 0, "free(NULL) counted as a sampled free");
	cr_assert_eq(ctl->kept_seen[0] + ctl->kept_seen[1], 0,
		     "free(NULL) offered to the reservoir");
	h_free((void *)(uintptr_t)p);
	cr_assert_eq(live_records(&rb), 0, "%lu bytes still recorded",
		     (unsigned long)rb);
	cr_assert_eq(total(freed), 1);
}

/* The first two addresses of @arena (@len bytes) in bucket @b. */
static void two_in_bucket(const unsigned char *arena, size_t len, uint64_t b,
			  uint64_t *p, uint64_t *q)
{
	uint64_t a, *out = p;

	*p = *q = 0;
	for (a = (uintptr_t)arena; a < (uintptr_t)arena + len && !*q; a += 16)
		if ((sampler_bucket_hash(a) & (NRECS / SAMPLER_BUCKET - 1)) ==
		    b) {
			*out = a;
			out = q;
		}
	cr_assert_neq(*q, 0, "no two addresses in bucket %" PRIu64, b);
}

/*
 * A block freed where no hook sees it leaves its key behind; when its
 * address is sampled again, that key is the one taken over, even with
 * a free slot before it: a second key for the same address would
 * outlive the block's next free as a record of nothing.
 */
Test(sampler, a_stale_record_is_taken_over)
{
	static unsigned char arena[4 << 20] __attribute__((aligned(16)));
	uint64_t p, q, rb;

	two_in_bucket(arena, sizeof(arena), 5, &p, &q);
	ctl->orig[SAMPLER_MALLOC] = (uintptr_t)fixed_malloc;
	ctl->orig[SAMPLER_FREE] = (uintptr_t)no_free;
	ctl->active = 1;
	fixed_block = q;
	cr_assert_eq(h_malloc(8 << 20), (void *)(uintptr_t)q);
	fixed_block = p;
	cr_assert_eq(h_malloc(8 << 20), (void *)(uintptr_t)p);
	cr_assert_eq(live_records(&rb), 2);
	/* its slot, the first of the bucket, free */
	h_free((void *)(uintptr_t)q);
	/* p freed unseen, then handed out and sampled again */
	cr_assert_eq(h_malloc(8 << 20), (void *)(uintptr_t)p);
	cr_assert_eq(live_records(&rb), 1, "two records of one block");
	h_free((void *)(uintptr_t)p);
	cr_assert_eq(live_records(&rb), 0, "%lu bytes still recorded",
		     (unsigned long)rb);
}

/* sampler_on()'s argument with room for @n slots. */
static struct sampler_on_args *on_args(size_t n)
{
	struct sampler_on_args *a =
		calloc(1, sizeof(*a) + n * sizeof(a->slots[0]));

	cr_assert_not_null(a);
	a->mean = 64 * 1024;
	a->copy = SAMPLER_COPY_VM_READV;
	a->can_mprotect = 1;
	a->nslots = n;
	return a;
}

/*
 * Two "GOT slots": one on a writable page, one on a page that is
 * read-only as RELRO leaves it.  sampler_on() swaps both (and logs
 * them), leaves a slot that no longer holds what memsnap read, gives the
 * read-only page its protection back, and says what it did per slot;
 * sampler_off() puts back exactly what each held and switches sampling
 * off.  A second sampler_on() knows the slots it already swapped.
 */
Test(sampler, on_and_off_swap_slots_and_restore_them)
{
	long ps = sysconf(_SC_PAGESIZE);
	uint64_t *rw = mmap(NULL, (size_t)ps, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t *ro = mmap(NULL, (size_t)ps, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t hook = (uintptr_t)base + SAMPLER_OFF_sampler_malloc;
	struct sampler_on_args *a = on_args(3);

	cr_assert_neq(rw, MAP_FAILED);
	cr_assert_neq(ro, MAP_FAILED);
	rw[3] = 0x1111;
	ro[5] = 0x2222;
	rw[7] = 0x3333;
	cr_assert_eq(mprotect(ro, (size_t)ps, PROT_READ), 0);
	a->slots[0] = (struct sampler_slot){ .slot = (uintptr_t)&rw[3],
					     .from = 0x1111, .to = hook };
	a->slots[1] = (struct sampler_slot){ .slot = (uintptr_t)&ro[5],
					     .from = 0x2222, .to = hook,
					     .page = (uintptr_t)ro,
					     .page_len = (uint64_t)ps,
					     .prot = PROT_READ };
	/* memsnap read 0x4444 there, but the slot holds 0x3333 now */
	a->slots[2] = (struct sampler_slot){ .slot = (uintptr_t)&rw[7],
					     .from = 0x4444, .to = hook };
	ctl->active = 0;
	cr_assert_eq(h_on(a, 1), 2);
	cr_assert_eq(a->slots[0].result, SAMPLER_SLOT_SWAPPED);
	cr_assert_eq(a->slots[1].result, SAMPLER_SLOT_SWAPPED);
	cr_assert_eq(a->slots[2].result, SAMPLER_SLOT_CHANGED);
	cr_assert_eq(rw[3], hook);
	cr_assert_eq(ro[5], hook);
	cr_assert_eq(rw[7], 0x3333, "a changed slot was overwritten");
	cr_assert_eq(ctl->active, 1);
	/* the changed slot is logged too, as never swapped */
	cr_assert_eq(ctl->nslots, 3);
	cr_assert_eq(ctl->started, 1);
	/* Read-only again, as the maps say. */
	{
		char line[256], want[64];
		FILE *f = fopen("/proc/self/maps", "r");
		bool seen = false;

		cr_assert_not_null(f);
		snprintf(want, sizeof(want), "%lx-", (unsigned long)ro);
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, want, strlen(want))) {
				seen = true;
				cr_assert_not_null(strstr(line, " r--p "),
						   "the page is %s", line);
			}
		fclose(f);
		cr_assert(seen, "no maps line for the read-only page");
	}

	/* Again: both known, nothing swapped twice. */
	a->slots[2].from = 0x3333;
	a->slots[2].result = 0;
	cr_assert_eq(h_on(a, 1), 1);
	cr_assert_eq(a->slots[0].result, SAMPLER_SLOT_KNOWN);
	cr_assert_eq(a->slots[1].result, SAMPLER_SLOT_KNOWN);
	cr_assert_eq(a->slots[2].result, SAMPLER_SLOT_SWAPPED);
	cr_assert_eq(ctl->nslots, 4);

	cr_assert_eq(h_off(), 3);
	cr_assert_eq(rw[3], 0x1111);
	cr_assert_eq(ro[5], 0x2222);
	cr_assert_eq(rw[7], 0x3333);
	cr_assert_eq(ctl->active, 0);
	cr_assert_eq(ctl->nslots, 0);
	cr_assert_eq(h_off(), 0, "off twice restored something");
	free(a);
	munmap(rw, (size_t)ps);
	munmap(ro, (size_t)ps);
}

/* The protection of the page at @p, as /proc/self/maps shows it
 * ("r--p"), into @perm (5 bytes). */
static void page_perm(const void *p, char *perm)
{
	char line[256];
	unsigned long lo, hi;
	FILE *f = fopen("/proc/self/maps", "r");

	bool found = false;

	cr_assert_not_null(f);
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "%lx-%lx %4s", &lo, &hi, perm) == 3 &&
			(uintptr_t)p >= lo && (uintptr_t)p < hi;
	fclose(f);
	if (!found)
		strcpy(perm, "none");
}

/*
 * More slots than one batch (sampler_on() reads and swaps them in
 * batches), on three adjacent read-only pages (one run, made writable
 * once) and on a page unmapped since memsnap read it: each readable slot
 * is swapped and logged, the unmapped one fails alone with -EFAULT, the
 * pages are read-only again; sampler_off() puts every one back.
 */
Test(sampler, many_slots_in_batches_and_runs)
{
	long ps = sysconf(_SC_PAGESIZE);
	size_t per = (size_t)ps / 8, n = 3 * per / 2, i;
	uint64_t *ro = mmap(NULL, 4 * (size_t)ps, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t *gone = ro + 3 * per;
	uint64_t hook = (uintptr_t)base + SAMPLER_OFF_sampler_malloc;
	struct sampler_on_args *a;
	char perm[8];

	cr_assert_neq(ro, MAP_FAILED);
	if (n > SAMPLER_MAXSLOTS - 1)
		n = SAMPLER_MAXSLOTS - 1;
	cr_assert_gt(n, 64, "not more than one batch");
	a = on_args(n + 1);
	/* the slots every other word of pages 0..2, in order */
	for (i = 0; i < n; i++) {
		uint64_t *slot = ro + 2 * i;
		uint64_t page = (uintptr_t)slot & ~(uint64_t)(ps - 1);

		*slot = 0x1000 + i;
		a->slots[i] = (struct sampler_slot){
			.slot = (uintptr_t)slot, .from = 0x1000 + i,
			.to = hook, .page = page, .page_len = (uint64_t)ps,
			.prot = PROT_READ };
	}
	/* one on a page unmapped since: between the others */
	a->slots[n] = a->slots[n / 2];
	a->slots[n / 2] = (struct sampler_slot){ .slot = (uintptr_t)gone,
						 .from = 7, .to = hook };
	cr_assert_eq(mprotect(ro, 3 * (size_t)ps, PROT_READ), 0);
	cr_assert_eq(munmap(gone, (size_t)ps), 0);
	ctl->active = 0;
	ctl->nslots = 0;
	cr_assert_eq(h_on(a, 1), (long)n);
	for (i = 0; i <= n; i++)
		if (i == n / 2)
			cr_assert_eq(a->slots[i].result, (uint64_t)-EFAULT);
		else
			cr_assert_eq(a->slots[i].result, SAMPLER_SLOT_SWAPPED,
				     "slot %zu: %" PRIu64, i,
				     a->slots[i].result);
	for (i = 0; i < n; i++)
		cr_assert_eq(ro[2 * i], hook, "slot %zu not swapped", i);
	cr_assert_eq(ctl->nslots, n + 1);
	for (i = 0; i < 3; i++) {
		page_perm(ro + i * per, perm);
		cr_assert_str_eq(perm, "r--p", "page %zu left %s", i, perm);
	}
	cr_assert_eq(h_off(), (long)n);
	for (i = 0; i < n; i++)
		cr_assert_eq(ro[2 * i], 0x1000 + i, "slot %zu not put back", i);
	cr_assert_eq(ctl->nslots, 0);
	page_perm(ro + per, perm);
	cr_assert_str_eq(perm, "r--p");
	free(a);
	munmap(ro, 3 * (size_t)ps);
}

/*
 * Slots left to memsnap (a byte written, no mprotect): sampler_on() logs
 * them and writes nothing; asked again for a slot memsnap never wrote,
 * it logs it in place; sampler_off() passes over one memsnap put back
 * with no protection change (its logged protection, read-write, would
 * show one), and puts back through the page one that a killed memsnap
 * left to its mirror.
 */
Test(sampler, slots_left_to_memsnap)
{
	long ps = sysconf(_SC_PAGESIZE);
	uint64_t *ro = mmap(NULL, 2 * (size_t)ps, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t *ro2 = ro + ps / 8;
	uint64_t mirror = 0x7e0000001230ull, fn = 0x7f0000001230ull;
	struct sampler_on_args *a = on_args(2);
	char perm[8];

	cr_assert_neq(ro, MAP_FAILED);
	ro[1] = fn;
	ro2[1] = fn;
	cr_assert_eq(mprotect(ro, 2 * (size_t)ps, PROT_READ), 0);
	/* logged read-write: a protection change would show */
	a->slots[0] = (struct sampler_slot){ .slot = (uintptr_t)&ro[1],
		.from = fn, .to = mirror, .page = (uintptr_t)ro,
		.page_len = (uint64_t)ps, .prot = PROT_READ | PROT_WRITE,
		.result = SAMPLER_SLOT_POKE };
	a->slots[1] = (struct sampler_slot){ .slot = (uintptr_t)&ro2[1],
		.from = fn, .to = mirror, .page = (uintptr_t)ro2,
		.page_len = (uint64_t)ps, .prot = PROT_READ,
		.result = SAMPLER_SLOT_POKE };
	ctl->active = 0;
	ctl->nslots = 0;
	cr_assert_eq(h_on(a, 1), 0, "swapped a slot left to memsnap");
	cr_assert_eq(a->slots[0].result, SAMPLER_SLOT_POKE);
	cr_assert_eq(a->slots[1].result, SAMPLER_SLOT_POKE);
	cr_assert_eq(ro[1], fn);
	cr_assert_eq(ctl->nslots, 2);
	cr_assert_eq(ctl->log[0].result, SAMPLER_SLOT_POKE);

	/* memsnap died before writing: asked again, the same entries */
	a->slots[0].result = a->slots[1].result = SAMPLER_SLOT_POKE;
	cr_assert_eq(h_on(a, 1), 0);
	cr_assert_eq(a->slots[0].result, SAMPLER_SLOT_POKE);
	cr_assert_eq(ctl->nslots, 2, "logged twice");

	/* slot 0 as memsnap leaves it after putting it back (its entry
	 * cleared, or not: killed in between); slot 1 written, then
	 * memsnap killed */
	cr_assert_eq(mprotect(ro2, (size_t)ps, PROT_READ | PROT_WRITE), 0);
	ro2[1] = mirror;
	cr_assert_eq(mprotect(ro2, (size_t)ps, PROT_READ), 0);
	cr_assert_eq(h_off(), 1);
	cr_assert_eq(ro[1], fn);
	cr_assert_eq(ro2[1], fn, "a slot left at its mirror");
	page_perm(ro, perm);
	cr_assert_str_eq(perm, "r--p", "off changed the protection of a "
			 "slot memsnap had put back: %s", perm);
	page_perm(ro2, perm);
	cr_assert_str_eq(perm, "r--p");
	cr_assert_eq(ctl->nslots, 0);
	free(a);
	munmap(ro, 2 * (size_t)ps);
}

/* A slot that something else changed while sampling was on (a second
 * interposer, a lazy binding) is left as it is by sampler_off(). */
Test(sampler, off_leaves_a_slot_changed_since)
{
	uint64_t slot = 0x5555, hook = (uintptr_t)base + SAMPLER_OFF_sampler_free;
	struct sampler_on_args *a = on_args(1);

	a->slots[0] = (struct sampler_slot){ .slot = (uintptr_t)&slot,
					     .from = 0x5555, .to = hook };
	cr_assert_eq(h_on(a, 1), 1);
	cr_assert_eq(slot, hook);
	slot = 0x6666;
	cr_assert_eq(h_off(), 0);
	cr_assert_eq(slot, 0x6666);
	free(a);
}

/* Switching on after off forgets the records of the earlier run: a
 * block freed while the hooks were out would otherwise stay "live". */
Test(sampler, on_after_off_starts_empty)
{
	struct sampler_on_args *a = on_args(0);
	uint64_t rb;
	void *p;

	ctl->active = 1;
	p = h_malloc(8 << 20);
	cr_assert_eq(live_records(&rb), 1);
	cr_assert_eq(h_off(), 0);
	free(p);	/* not seen: the hooks are out */
	cr_assert_eq(live_records(&rb), 1);
	cr_assert_geq(h_on(a, 1), 0);
	cr_assert_eq(live_records(&rb), 0, "a record of the earlier run");
	cr_assert_eq(total(samples), 0);
	free(a);
}

/*
 * A sampled block freed goes to the reservoir of freed samples, whole
 * (its own record, size, caller, registers and stack as they were, its
 * sequence even), a large block to the large part; once a part is full,
 * more frees are still counted but only some kept: the kept stay a draw
 * of all.  The reservoir's chunks stay within its budget.
 */
Test(sampler, freed_samples_are_kept_in_the_reservoir)
{
	const size_t small = 64, n = 3 * SAMPLER_KEPT_SMALL;
	static unsigned char stack[STACK_BYTES], kstack[STACK_BYTES];
	struct sampler_rec live_copy, *k;
	size_t i, j, rewritten = 0, len;
	uint64_t held = 0;
	void *p;

	ctl->active = 1;
	ctl->mean = 4096;
	p = h_malloc(8 << 20);
	cr_assert_not_null(p);
	for (j = 0; j < NRECS && !(live(j) && rec_of(j)->size == 8 << 20); j++)
		;
	cr_assert_lt(j, (size_t)NRECS, "no live record of the block");
	live_copy = *rec_of(j);
	len = stack_of(rec_of(j), stack);
	h_free(p);
	cr_assert_eq(ctl->kept_seen[1], 1);
	cr_assert_eq(ctl->kept_seen[0], 0);
	cr_assert_eq(kept[SAMPLER_KEPT_SMALL].seq, 2, "sequence %#lx",
		     (unsigned long)kept[SAMPLER_KEPT_SMALL].seq);
	k = kept_rec(SAMPLER_KEPT_SMALL);
	cr_assert_eq(k->ptr, 0, "a kept record still names its block");
	cr_assert_eq(k->size, 8u << 20);
	cr_assert_eq(k->caller, live_copy.caller);
	cr_assert_eq(memcmp(k->regs, live_copy.regs, sizeof(k->regs)), 0);
	cr_assert_gt(k->stack_len, 0);
	cr_assert_eq(k->stack_len, live_copy.stack_len);
	cr_assert_eq(stack_of(k, kstack), len);
	cr_assert_eq(memcmp(kstack, stack, len), 0);

	/* small blocks, three times the small part's slots sampled */
	while (ctl->kept_seen[0] < n) {
		p = h_malloc(small);
		cr_assert_not_null(p);
		h_free(p);
	}
	for (i = 0; i < SAMPLER_KEPT; i++) {
		k = kept_rec(i);
		held += k ? k->nchunks : 0;
		if (i >= SAMPLER_KEPT_SMALL)
			continue;
		cr_assert_not_null(k, "slot %zu: sequence %#lx", i,
				   (unsigned long)kept[i].seq);
		cr_assert_eq(k->size, small, "slot %zu", i);
		/* a slot written again has a later sequence */
		rewritten += kept[i].seq > 2;
	}
	/* each offer after the first part-full is kept with probability
	 * m/k: about m * ln 3 = 843 rewrites; far from none, and fewer
	 * than one each */
	cr_assert(rewritten > SAMPLER_KEPT_SMALL / 4 &&
			  rewritten < SAMPLER_KEPT_SMALL,
		  "%zu slots rewritten", rewritten);
	cr_assert_eq(kept_rec(SAMPLER_KEPT_SMALL)->size, 8u << 20,
		     "a small block in the large part");
	cr_assert_eq(held, ctl->kept_chunks + kept_records(), "the reservoir "
		     "holds %" PRIu64 " chunks and counts %" PRIu64 " past "
		     "its records' first", held, ctl->kept_chunks);
	cr_assert_leq(held, SAMPLER_KEPT_CHUNKS);
}

/*
 * A run that samples and frees without end touches only the chunks it
 * holds at once: one live record here, and the reservoir's budget, how
 * many samples it takes.  The chunks are all accounted for after.
 */
Test(sampler, the_pool_follows_what_is_held)
{
	uint64_t rb;
	size_t i;

	ctl->active = 1;
	ctl->mean = 4096;
	for (i = 0; i < 200000; i++)
		h_free(h_malloc(8192));
	cr_assert_gt(total(samples), 100000);
	cr_assert_eq(live_records(&rb), 0);
	cr_assert_leq(ctl->pool_fresh, SAMPLER_KEPT_CHUNKS + SAMPLER_REC_CHUNKS,
		      "%" PRIu64 " chunks touched for %" PRIu64 " samples",
		      ctl->pool_fresh, total(samples));
	pool_accounted();
}

/* The pages of @len bytes at @p that are resident. */
static size_t resident_pages(const void *p, size_t len)
{
	long ps = sysconf(_SC_PAGESIZE);
	size_t n = (len + (size_t)ps - 1) / (size_t)ps, i, in = 0;
	unsigned char *v = malloc(n);

	cr_assert_not_null(v);
	cr_assert_eq(mincore((void *)p, len, v), 0, "%s", strerror(errno));
	for (i = 0; i < n; i++)
		in += v[i] & 1;
	free(v);
	return in;
}

/*
 * Switched off where madvise is allowed, the sampler gives the table's
 * pages back, and its records with them: none is left resident, the
 * counts say nothing is live, and switched on again it samples into a
 * pool started afresh.
 */
Test(sampler, off_gives_the_table_back)
{
	struct sampler_on_args *a = on_args(0);
	uint64_t rb, round;
	void *p[64], *q;
	size_t i;

	a->can_madvise = 1;
	a->page_size = (uint64_t)sysconf(_SC_PAGESIZE);
	cr_assert_geq(h_on(a, 1), 0);
	ctl->mean = 4096;
	for (i = 0; i < 64; i++)
		p[i] = h_malloc(1 << 20);
	cr_assert_eq(live_records(&rb), 64);
	for (i = 0; i < 32; i++)
		h_free(p[i]);
	cr_assert_gt(resident_pages(keys, table_len), 64);
	round = ctl->round;
	cr_assert_eq(h_off(), 0);
	cr_assert_eq(resident_pages(keys, table_len), 0,
		     "%zu pages of the table resident after off",
		     resident_pages(keys, table_len));
	cr_assert_eq(ctl->round, round + 1);
	cr_assert_eq(ctl->pool_fresh, 0);
	cr_assert_eq(total(samples) - total(freed), 0);
	/* a block of the last round freed now: nothing to forget */
	h_free(p[32]);
	cr_assert_eq(total(freed), 0);
	cr_assert_geq(h_on(a, 2), 0);
	ctl->mean = 4096;
	q = h_malloc(1 << 20);
	cr_assert_eq(live_records(&rb), 1);
	h_free(q);
	for (i = 33; i < 64; i++)
		free(p[i]);
	pool_accounted();
	free(a);
}

/* The countdown this thread drew first after a switch-on with @seed:
 * one small malloc starts it (the thread's slot is the one used). */
static int64_t first_countdown(struct sampler_on_args *a, uint64_t seed)
{
	int64_t left = 0;
	size_t i, used = 0;

	cr_assert_eq(h_off(), 0);
	ctl->started = 0;	/* the same round, but for the seed */
	cr_assert_geq(h_on(a, seed), 0);
	for (i = 0; i < SAMPLER_NTHREADS; i++)
		cr_assert_eq(ctl->threads[i].seed, seed, "slot %zu", i);
	free(h_malloc(16));
	for (i = 0; i < SAMPLER_NTHREADS; i++) {
		if (!ctl->threads[i].rng)
			continue;
		used++;
		left = ctl->threads[i].left;
	}
	cr_assert_eq(used, 1u, "%zu countdowns started", used);
	return left;
}

/* Each switch-on's seed reaches every thread slot and decides the
 * draws: the same seed in the same round, the same countdown on the
 * same thread; another seed, another. */
Test(sampler, the_seed_decides_the_draws)
{
	struct sampler_on_args *a = on_args(0);
	int64_t one = first_countdown(a, 0x1234567887654321ull);
	int64_t again = first_countdown(a, 0x1234567887654321ull);
	int64_t other = first_countdown(a, 0x0badc0ffee15900dull);

	cr_assert_eq(one, again);
	cr_assert_neq(one, other);
	free(a);
}

/* memsnap unwinds a record's first frames with the image's own CFI,
 * found through the offset of its .eh_frame_hdr: a header there, in the
 * one encoding memsnap's unwinder reads (version 1, a sorted table of
 * 4-byte offsets from the header), and a table that covers the hooks. */
Test(sampler, eh_frame_hdr_offset_names_the_header)
{
	const unsigned char *h = base + SAMPLER_OFF_sampler_eh_frame_hdr;
	uint32_t count;
	int32_t first;

	cr_assert_lt(SAMPLER_OFF_sampler_eh_frame_hdr,
		     SAMPLER_OFF_sampler_code_end);
	cr_assert_eq(h[0], 1, "version %u", h[0]);
	cr_assert_eq(h[3], 0x3b, "table encoding %#x", h[3]);
	memcpy(&count, h + 8, sizeof(count));
	cr_assert_gt(count, 10, "%u FDEs", count);
	memcpy(&first, h + 12, sizeof(first));
	/* the first entry's start, relative to the header: inside the code */
	cr_assert(SAMPLER_OFF_sampler_eh_frame_hdr + first <
			  SAMPLER_OFF_sampler_code_end,
		  "first FDE at %d from the header", first);
}
