#ifndef MEMSNAP_CLI_EXPLAIN_PRINT_H
#define MEMSNAP_CLI_EXPLAIN_PRINT_H

#include "cli/target.h"
#include "explain/explain.h"

/* `explain`'s reply for a person: the verdict, the parts, the
 * findings; the target's strings through fputs_clean(). */
void explain_print_text(const struct target *t,
			const struct explain_input *in,
			const struct explain *e);

/* `explain --json`: one object (docs/json.md). */
void explain_print_json(const struct target *t,
			const struct explain_input *in,
			const struct explain *e);

#endif
