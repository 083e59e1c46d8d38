#ifndef MEMSNAP_CLI_SAMPLING_H
#define MEMSNAP_CLI_SAMPLING_H

#include "sampler/sampler.h"
#include "cli/cli.h"
#include "cli/session.h"

#include <stdio.h>

struct json;

/* prof on --sampler on a loaded view @t (@mean, @stack_bytes: 0 for
 * the defaults); the exit code. */
int sampler_cmd_on(const struct options *opt, struct target *t,
		   uint64_t mean, uint64_t stack_bytes);

/* The same without a word on standard output (errors and warnings are
 * said), with a lease of @lease seconds (0: none; struct sampler_start):
 * what it did into *@r unless NULL.  The exit code. */
int sampler_switch_on(const struct options *opt, struct target *t,
		      uint64_t mean, uint64_t stack_bytes, uint64_t lease,
		      struct sampler_start *r);

/* prof off while the sampler is on; the exit code. */
int sampler_cmd_off(const struct options *opt, struct target *t);

/* The same without a word on standard output: the GOT slots and entry
 * points put back into *@slots and *@entries.  The exit code. */
int sampler_switch_off(const struct options *opt, struct target *t,
		       unsigned int *slots, unsigned int *entries);

/* The sampler's profile of @t into a new memfd (*@memfd), nothing
 * stopped; the exit code after one error line. */
int sampler_cmd_dump(const struct options *opt, struct target *t,
		     struct sampler_dump *d, int *memfd);

/* info's lines about a sampler found in the process. */
void sampler_info_text(FILE *f, const struct sampler_status *st);
void sampler_info_json(struct json *j, const struct sampler_status *st);

#endif
