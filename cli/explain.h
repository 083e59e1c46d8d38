#ifndef MEMSNAP_CLI_EXPLAIN_H
#define MEMSNAP_CLI_EXPLAIN_H

#include "cli/session.h"
#include "explain/explain.h"
#include "proc/runtime.h"
#include "proc/smaps.h"

/*
 * One measurement of `explain`, for explain itself and for every tick
 * of `watch`: the view of the process, the allocator's account (one
 * borrowed thread, unless @no_attach), smaps, and the parts computed.
 */
struct explain_run {
	struct target t;
	bool loaded;		/* t holds something to free */
	struct proc_memory pm;
	struct alloc_account acc;
	struct explain_others others;
	struct explain_input in;
	struct explain *e;	/* set when explain_measure() returned 0 */
	struct explain_who who;	/* of @t, for the replies */
	int proc_fd;
	char not_read[160];	/* why no allocator was read, "" if one was */
	struct runtime_info rt;	/* the language runtime it runs, if any */
	struct proc_sharers sharers;	/* of its largest shared memory */
	struct smap_claim claims[SAMPLER_RANGES];	/* memsnap's sampler */
	size_t nclaims;
};

/* Measure process @opt->pid for command @cmd (its name in messages)
 * into @r: EXIT_OK, or the exit code after one error line.  A process
 * with no allocator memsnap can call is measured from /proc alone, and
 * @r->not_read says what is missing.  explain_run_free() @r in both
 * cases. */
int explain_measure(const struct options *opt, const char *cmd,
		    bool no_attach, struct explain_run *r);

void explain_run_free(struct explain_run *r);

#endif
