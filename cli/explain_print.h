#ifndef MEMSNAP_CLI_EXPLAIN_PRINT_H
#define MEMSNAP_CLI_EXPLAIN_PRINT_H

#include "cli/session.h"
#include "explain/explain.h"

/* The other allocators in the process (those that do not serve
 * malloc, unless --allocator chose one of them), as
 * alloc_account_state() read them. */
#define EXPLAIN_OTHERS_MAX 4

struct explain_others {
	struct alloc_account acc[EXPLAIN_OTHERS_MAX];
	bool serves_malloc[EXPLAIN_OTHERS_MAX];	/* --allocator chose
						   another one */
	size_t n;
};

/* `explain`'s reply for a person: the verdict, the parts, the
 * findings, malloc'ed (NULL: no memory); the target's strings as they
 * are. */
char *explain_text(const struct target *t, const struct explain_input *in,
		   const struct explain *e, const struct explain_others *o);

/* The same on standard output, the target's strings through
 * fputs_clean() on a terminal. */
void explain_print_text(const struct target *t,
			const struct explain_input *in,
			const struct explain *e,
			const struct explain_others *o);

/* `explain --json`: one object (docs/json.md). */
void explain_print_json(const struct target *t,
			const struct explain_input *in,
			const struct explain *e,
			const struct explain_others *o);

#endif
