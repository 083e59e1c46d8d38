/*
 * The sampler's in-target code, run in the test process: the image is
 * mapped at an address of the kernel's choosing as memsnap maps it in a
 * target (code r-x, the control block in the zero pages after it), its
 * originals are this process's allocator, and the hooks are called
 * directly.  What is checked: the countdown samples by bytes with the
 * right rate (the unsampled estimate finds the bytes really allocated),
 * records follow frees and reallocs, nothing is sampled while inactive,
 * and threads that share the tables lose no record.
 */
#include "sampler/sampler.h"
#include "sampler-offsets.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NRECS (1u << 16)

static unsigned char *base;
static size_t base_len;
static struct sampler_ctl *ctl;
static struct sampler_rec *recs;

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
	recs = mmap(NULL, NRECS * sizeof(*recs), PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(recs, MAP_FAILED);

	ctl->orig[SAMPLER_MALLOC] = (uintptr_t)malloc;
	ctl->orig[SAMPLER_FREE] = (uintptr_t)free;
	ctl->orig[SAMPLER_CALLOC] = (uintptr_t)calloc;
	ctl->orig[SAMPLER_REALLOC] = (uintptr_t)realloc;
	ctl->orig[SAMPLER_POSIX_MEMALIGN] = (uintptr_t)posix_memalign;
	ctl->orig[SAMPLER_ALIGNED_ALLOC] = (uintptr_t)aligned_alloc;
	ctl->orig[SAMPLER_MEMALIGN] = (uintptr_t)memalign;
	ctl->recs = (uintptr_t)recs;
	ctl->nrecs = NRECS;
	ctl->mean = 64 * 1024;
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
}

static void unload(void)
{
	munmap(base, base_len);
	munmap(recs, NRECS * sizeof(*recs));
}

TestSuite(sampler, .init = load, .fini = unload, .timeout = 120);

static size_t live_records(uint64_t *bytes)
{
	size_t i, n = 0;

	*bytes = 0;
	for (i = 0; i < NRECS; i++)
		if (recs[i].ptr > SAMPLER_GONE) {
			n++;
			*bytes += recs[i].size;
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
		if (recs[i].ptr > SAMPLER_GONE) {
			double s = (double)recs[i].size;

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
	cr_assert_gt(ctl->samples, 500, "only %lu samples",
		     (unsigned long)ctl->samples);
	cr_assert(fabs(est - (double)bytes) < 0.1 * (double)bytes,
		  "estimated %.0f bytes of %lu", est, (unsigned long)bytes);
	cr_assert_eq(live_records(&rb), ctl->samples);
	for (i = 0; i < NBLOCKS; i++)
		h_free(blocks[i]);
	cr_assert_eq(live_records(&rb), 0, "%lu bytes still recorded",
		     (unsigned long)rb);
	cr_assert_eq(ctl->freed, ctl->samples);
	cr_assert_eq(ctl->dropped, 0);
}

/* A block bigger than the mean is almost always sampled, and its record
 * names the size asked for and a return address in this test. */
Test(sampler, records_size_and_caller)
{
	uint64_t rb;
	void *p[8];
	size_t i, k;

	ctl->active = 1;
	for (i = 0; i < 8; i++)
		p[i] = h_malloc(4 << 20);
	cr_assert_geq(ctl->samples, 7);
	for (k = 0; k < NRECS; k++) {
		if (recs[k].ptr <= SAMPLER_GONE)
			continue;
		cr_assert_eq(recs[k].size, 4u << 20);
		cr_assert_neq(recs[k].pc, 0);
		cr_assert(recs[k].pc < (uintptr_t)base ||
			  recs[k].pc >= (uintptr_t)base + base_len,
			  "the caller is the sampler itself");
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
	cr_assert_eq(ctl->samples, 0);
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
	cr_assert_eq(ctl->dropped, 0);
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
	cr_assert_gt(ctl->samples, 1000);
	cr_assert_eq(ctl->dropped, 0);
	cr_assert_eq(live_records(&rb), 0, "%lu bytes still recorded",
		     (unsigned long)rb);
	cr_assert_eq(ctl->freed, ctl->samples);
}
