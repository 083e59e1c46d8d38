/*
 * The sampling error `report` states (issue #45): each site's 95%
 * interval, from the samples behind it, holds the bytes the fixture
 * knows it allocated there in nearly every round, and is not so wide
 * that it says nothing.  tests/fixtures/sampler_target.c's fixed set
 * (seven sites of about 32 MiB, blocks of 1000 bytes to 1 MiB) sampled
 * every 2 MiB on average: some 16 samples a site, a standard error
 * near a quarter, so that a width off by a factor shows.  20 rounds,
 * each its own prof on (new samples drawn), 'a', dump, report, 'F',
 * prof off, in one fixture.
 */
#include "../lib/fault.h"
#include "../lib/fixture.h"
#include "../lib/sampler.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 20
#define MEAN (2L << 20)

/* The number after "@key": past the object of site @name in report
 * JSON @json. */
static long long site_number(const char *json, const char *name,
			     const char *key)
{
	char pat[96];
	const char *p;

	snprintf(pat, sizeof(pat), "\"name\": \"%s\",", name);
	p = strstr(json, "\"sites\": [");
	cr_assert(p && (p = strstr(p, pat)), "no site %s:\n%.3000s", name,
		  json);
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = strstr(p, pat);
	cr_assert(p, "site %s has no %s", name, key);
	return strtoll(p + strlen(pat), NULL, 10);
}

Test(sampler, each_sites_interval_holds_its_bytes)
{
	char dump[PATH_MAX + 32], name[16];
	int misses = 0, intervals = 0, round;
	double width = 0;
	struct counts c;
	struct run r;
	size_t s;

	start("sampler-target", NULL);
	for (round = 0; round < ROUNDS; round++) {
		sampler_on(MEAN);
		c = command_counts('a');
		snprintf(name, sizeof(name), "r%d", round);
		dump_to(name, MEAN, dump, sizeof(dump));
		cr_assert_eq(run_memsnap(&r, (const char *[]){
				     "report", dump, "--json", "--top", "0",
				     "-q", NULL }), 0);
		cr_assert_eq(r.status, 0, "report: %s", r.err);
		for (s = 0; s < NSITES; s++) {
			long long lo, hi, truth = c.v[s];

			if (!truth)
				continue;
			lo = site_number(r.out, site_name[s], "flat_low_95");
			hi = site_number(r.out, site_name[s], "flat_high_95");
			cr_assert_leq(lo, hi);
			intervals++;
			width += (double)(hi - lo) / (double)truth;
			if (truth < lo || truth > hi) {
				misses++;
				fprintf(stderr, "sampler_error: round %d, %s: "
					"%lld not within %lld to %lld\n",
					round, site_name[s], truth, lo, hi);
			}
		}
		run_free(&r);
		if (!round) {
			/* seven sites of 32 MiB each within a quarter or
			 * so: the text says their order may be chance, and
			 * what tells them apart */
			cr_assert_eq(run_memsnap(&r, (const char *[]){
					     "report", dump, "-q", NULL }), 0);
			cr_assert(strstr(r.out, "are within it of each other") &&
					  strstr(r.out, "--sample-bytes 256K") &&
					  strstr(r.out, "--lg-sample 18"),
				  "%s", r.out);
			run_free(&r);
		}
		command_counts('F');
		sampler_off();
	}
	fprintf(stderr, "sampler_error: %d of %d intervals missed, their "
		"width %.2f of the bytes on average\n", misses, intervals,
		width / intervals);
	/* 95% intervals: some 7 misses of 140 expected; 20 happen by
	 * chance once in some 10 000 runs, intervals a third too narrow
	 * miss 25 */
	cr_assert_leq(misses, 20, "%d of %d intervals missed their bytes",
		      misses, intervals);
	/* 1.96 standard errors each way, a quarter each: a width near 1 */
	cr_assert_lt(width / intervals, 1.6, "intervals too wide to say "
		     "anything: %.2f of the bytes", width / intervals);
	assert_untouched(&fx, "after the rounds");
}
