/*
 * The memory the sampler adds to a target (the `sampler` suite; see
 * test_sampler.c): through a long run of four threads that allocate
 * and free as fast as they can, the resident bytes of the sampler's
 * mappings, read from the target's smaps, stay under the bound
 * docs/DESIGN.md states ("The memory it adds"), however many samples
 * are taken; `info` says the same; after `prof off` they fall back to
 * the image's own.
 */
#include "sampler/layout.h"
#include "sampler-offsets.h"
#include "tests/lib/fault.h"
#include "tests/lib/sampler.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* Where the sampler's mappings are in the target, from its control
 * block, found as memsnap finds it (an anonymous r-x mapping exactly
 * the size of its code). */
struct where {
	uint64_t image, image_len, ctl, table, table_len, nrecs, stack_bytes;
	uint64_t mirror[SAMPLER_NFN];	/* each hook's mirror, 0: none */
};

static uint64_t page(void)
{
	return (uint64_t)sysconf(_SC_PAGESIZE);
}

static uint64_t round_up(uint64_t v)
{
	return (v + page() - 1) & ~(page() - 1);
}

static void read_target(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };

	cr_assert_eq(process_vm_readv(pid, &l, 1, &r, 1, 0), (ssize_t)len,
		     "reading %zu bytes at %#" PRIx64 ": %s", len, addr,
		     strerror(errno));
}

static void find_sampler(pid_t pid, struct where *w)
{
	char path[64], line[512];
	struct sampler_ctl *c = calloc(1, sizeof(*c));
	FILE *f;

	cr_assert_not_null(c);
	memset(w, 0, sizeof(*w));
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	while (!w->image && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8];
		int n = 0;

		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s%n", &lo, &hi, perms,
			   &n) >= 3 && !strcmp(perms, "r-xp") &&
		    line[n + strspn(line + n, " ")] == '\n' &&
		    hi - lo == round_up(SAMPLER_OFF_sampler_code_end))
			w->image = lo;
	}
	fclose(f);
	cr_assert_neq(w->image, 0, "no sampler in pid %d", (int)pid);
	w->image_len = round_up(SAMPLER_OFF_sampler_image_end);
	w->ctl = w->image + SAMPLER_OFF_sampler_ctl;
	read_target(pid, w->ctl, c, offsetof(struct sampler_ctl, log));
	cr_assert_eq(memcmp(c->signature, SAMPLER_SIGNATURE,
			    sizeof(c->signature)), 0);
	w->table = c->table;
	w->table_len = c->table_len;
	w->nrecs = c->nrecs;
	w->stack_bytes = c->stack_bytes;
	memcpy(w->mirror, c->mirror, sizeof(w->mirror));
	free(c);
	cr_assert_neq(w->table, 0);
	cr_assert_eq(w->table_len, sampler_table_len(w->nrecs, w->stack_bytes));
}

/*
 * The Rss of the target's mappings that lie in [@lo, @hi), and of those
 * that hold one of @w's mirrors, in bytes (@len: their length).
 */
static uint64_t rss_in(pid_t pid, uint64_t lo, uint64_t hi,
		       const struct where *w, uint64_t *len)
{
	char path[64], line[512];
	unsigned long a, b;
	uint64_t rss = 0, kb;
	bool in = false;
	size_t f;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
	fp = fopen(path, "re");
	cr_assert_not_null(fp, "%s: %s", path, strerror(errno));
	*len = 0;
	while (fgets(line, sizeof(line), fp)) {
		if (sscanf(line, "%lx-%lx ", &a, &b) == 2 &&
		    line[strcspn(line, " ") - 1] != ':') {
			in = a >= lo && b <= hi;
			for (f = 0; w && !in && f < SAMPLER_NFN; f++)
				in = w->mirror[f] >= a && w->mirror[f] < b;
			*len += in ? b - a : 0;
		} else if (in && sscanf(line, "Rss: %" SCNu64 " kB",
					&kb) == 1) {
			rss += kb << 10;
		}
	}
	fclose(fp);
	return rss;
}

/* The sampler's resident bytes: its table's into *@table, and those of
 * its image and mirrors. */
static uint64_t sampler_rss(pid_t pid, const struct where *w, uint64_t *table)
{
	uint64_t len;

	*table = rss_in(pid, w->table, w->table + w->table_len, NULL, &len);
	return *table + rss_in(pid, w->image, w->image + w->image_len, w,
			       &len);
}

/* The samples taken, as the thread slots count them. */
static uint64_t samples_taken(pid_t pid, const struct where *w)
{
	struct sampler_thread *t = calloc(SAMPLER_NTHREADS, sizeof(*t));
	uint64_t n = 0;
	size_t i;

	cr_assert_not_null(t);
	read_target(pid, w->ctl + offsetof(struct sampler_ctl, threads), t,
		    SAMPLER_NTHREADS * sizeof(*t));
	for (i = 0; i < SAMPLER_NTHREADS; i++)
		n += t[i].samples;
	free(t);
	return n;
}

static long elapsed_ms(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 +
	       (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* info's "resident_bytes" of the sampler. */
static uint64_t info_resident(void)
{
	struct run r;
	const char *v;
	uint64_t bytes;

	memsnap(&r, "--json", "info", "--no-attach", NULL);
	cr_assert_eq(r.status, 0, "info: exit %d: %s", r.status, r.err);
	v = json_value(r.out, "resident_bytes");
	cr_assert_not_null(v, "%s", r.out);
	bytes = strtoull(v, NULL, 10);
	run_free(&r);
	return bytes;
}

/* The run: ten seconds at least, and enough samples that the
 * reservoir's slots are taken over fifty times and every slot of the
 * keys is hit; a minute and a half to take them (an emulated CPU). */
#define CHURN_MS 10000
#define CHURN_SAMPLES (50 * SAMPLER_KEPT)
#define CHURN_MS_MAX 90000
/* Live samples at once, at most: the fixture's 256 live blocks of at
 * most 8 KiB are each sampled with probability 1.6% at the default
 * mean (4 at once on average; 32 is some 15 standard deviations out). */
#define LIVE_MAX 32

/*
 * The bound docs/DESIGN.md states, for this table: the image (code and
 * control block), the arrays of the keys (each slot of which a long
 * run touches), and the chunks held at once: the reservoir's
 * SAMPLER_KEPT_CHUNKS, and at most SAMPLER_REC_CHUNKS for each live
 * sample, with their links in the free list; plus what four threads
 * keeping at the same moment may take past the reservoir's budget.
 */
static uint64_t bound(const struct where *w)
{
	uint64_t cb = sampler_chunk_bytes(w->stack_bytes), mirrors;
	uint64_t chunks = SAMPLER_KEPT_CHUNKS + 4 * SAMPLER_REC_CHUNKS +
			  LIVE_MAX * SAMPLER_REC_CHUNKS;

	/* the image's mapping and the mirrors', whole */
	rss_in(fx.pid, w->image, w->image + w->image_len, w, &mirrors);
	return mirrors + round_up(sampler_next_off(w->nrecs)) +
	       round_up(chunks * 4) + chunks * cb;
}

/*
 * At the default settings, ten seconds or more of four threads
 * allocating and freeing as fast as they can: the sampler's resident
 * memory in the target never passes the stated bound (some 3 MiB),
 * however many samples are taken; `info` reads the same; after `prof
 * off` the table is given back and what is left is the image's own
 * pages and the mirrors'.
 */
Test(sampler, resident_memory_stays_bounded_and_goes_back)
{
	uint64_t samples = 0, most = 0, rss, table, limit, mine, said;
	struct timespec t0, nap = { 0, 100 * 1000 * 1000 };
	char reply[256], state[256];
	struct where w;
	long ms;

	start("sampler-target", NULL);
	command_expect('t', "ok threads=4", reply, sizeof(reply));
	sampler_on(0);
	find_sampler(fx.pid, &w);
	limit = bound(&w);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (samples < CHURN_SAMPLES || elapsed_ms(&t0) < CHURN_MS) {
		ms = elapsed_ms(&t0);
		cr_assert_lt(ms, CHURN_MS_MAX, "%" PRIu64 " samples in %ld ms: "
			     "%s", samples, ms,
			     sampler_state(state, sizeof(state)));
		/* a look every tenth of a second, whatever the rate */
		nanosleep(&nap, NULL);
		samples = samples_taken(fx.pid, &w);
		rss = sampler_rss(fx.pid, &w, &table);
		if (rss > most)
			most = rss;
		cr_assert_leq(rss, limit, "the sampler holds %" PRIu64 " KiB "
			      "after %" PRIu64 " samples, past its bound of %"
			      PRIu64 " KiB", rss >> 10, samples, limit >> 10);
	}
	cr_log_info("sampler: at most %" PRIu64 " KiB resident through %"
		    PRIu64 " samples in %ld ms (bound %" PRIu64 " KiB)",
		    most >> 10, samples, elapsed_ms(&t0), limit >> 10);
	/* what info says is what smaps says, give or take what the
	 * threads changed in between */
	mine = sampler_rss(fx.pid, &w, &table);
	said = info_resident();
	cr_assert(said + (64 << 10) >= mine && said <= mine + (64 << 10),
		  "info says %" PRIu64 " KiB, smaps %" PRIu64 " KiB",
		  said >> 10, mine >> 10);
	command_expect('p', "ok", reply, sizeof(reply));

	sampler_off();
	/* A thread inside a hook when the table went back (one that lost
	 * its CPU there: four threads on fewer cores) writes its sample's
	 * pages in again when it runs on: a key's, a head's, its chunks'
	 * and the free list's, some 8 pages a thread at most. */
	rss = sampler_rss(fx.pid, &w, &table);
	cr_assert_leq(table, 4 * 8 * page(), "the table keeps %" PRIu64
		      " KiB after prof off", table >> 10);
	cr_assert_leq(rss - table, w.image_len + (64 << 10), "the sampler "
		      "keeps %" PRIu64 " KiB after prof off", rss >> 10);
	said = info_resident();
	mine = sampler_rss(fx.pid, &w, &table);
	cr_assert(said + (64 << 10) >= mine && said <= mine + (64 << 10),
		  "info says %" PRIu64 " KiB after prof off, smaps %" PRIu64
		  " KiB", said >> 10, mine >> 10);
	command_expect('p', "ok", reply, sizeof(reply));
	command_expect('T', "ok loops=", reply, sizeof(reply));
	assert_untouched(&fx, "after the long run");
}
