/*
 * memsnap --pid N explain [--json] [--no-attach]: where the resident
 * memory is, in parts that add up to RSS, and what to do about it.
 *
 * A /proc/PID directory pinned to the process of the view (agent_pin())
 * first; then the allocator's account (allocators/account.h) in one
 * borrowed-thread session: the calls of `stats`, for jemalloc the
 * numbers and settings that can matter, guessed from smaps_rollup;
 * then, every thread running again, the /proc part (proc/smaps.h),
 * the arithmetic and the findings (explain/explain.h) and the printing
 * (cli/explain_print.c).
 */
#include "cli/cli.h"

#include "allocators/account.h"
#include "allocators/dumpdir.h"
#include "allocators/dumpdir_agent.h"
#include "cli/explain_print.h"
#include "cli/target.h"
#include "explain/explain.h"
#include "proc/smaps.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int parse_args(int argc, char **argv, bool *json, bool *no_attach)
{
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			*json = true;
		} else if (!strcmp(argv[i], "--no-attach")) {
			*no_attach = true;
		} else {
			error("explain: %s '%s' (see memsnap --help)",
			      argv[i][0] == '-' ? "unknown option"
						: "unexpected argument",
			      argv[i]);
			return EXIT_USAGE;
		}
	}
	return EXIT_OK;
}

/* /proc/PID pinned to the process of the view, into *@fd. */
static int pin_proc(const struct target *t, int *fd)
{
	struct agent_target at = {
		.pid = t->pi.pid,
		.pidfd = t->pidfd > 0 ? t->pidfd : -1,
		.start_time = t->pi.start_time,
	};
	char why[512] = "";

	*fd = agent_pin(&at, why, sizeof(why));
	if (*fd == -ESRCH) {
		error("explain %d: %s", (int)t->pi.pid, why);
		return EXIT_NO_PROCESS;
	}
	if (*fd < 0)
		return report_proc_error(t->pi.pid, "", *fd);
	return EXIT_OK;
}

/* smaps, status and the threads' stacks, through the pinned /proc/PID. */
static int read_proc(const struct target *t, int fd, struct proc_memory *pm)
{
	int rc = proc_memory_read_at(fd, pm);

	if (rc)
		return report_proc_error(t->pi.pid, "smaps", rc);
	return EXIT_OK;
}

/* Does the allocator's account need a capture file (a report it
 * prints), as `stats` does? */
static bool needs_dumpdir(enum alloc_kind kind)
{
	return kind == ALLOC_GLIBC || kind == ALLOC_MIMALLOC;
}

/* The allocators that do not serve malloc, in the same session. */
static int account_others(struct target *t, struct explain_others *o)
{
	size_t i;
	int rc;

	for (i = 0; i < t->det.n && o->n < EXPLAIN_OTHERS_MAX; i++) {
		if (&t->det.v[i] == t->a)
			continue;
		rc = alloc_account_state(t->s, &t->det.v[i], &o->acc[o->n]);
		if (rc)
			return rc;
		o->serves_malloc[o->n++] = t->det.v[i].serves_malloc;
	}
	return 0;
}

static int account(const struct options *opt, struct target *t, int proc_fd,
		   struct alloc_account *acc, struct explain_others *o)
{
	struct alloc_account_want w = {
		.min_bytes = EXPLAIN_MIN_BYTES,
		.anon_huge = UINT64_MAX,	/* unknown: read what it bounds */
		.huge_page = proc_huge_page(),
	};
	struct dumpdir *d = NULL;
	int ret, rc;

	/* which numbers are worth a call: the totals of smaps_rollup */
	if (proc_rollup_read_at(proc_fd, &w.rss, &w.anon_huge))
		w.anon_huge = UINT64_MAX;

	ret = target_dumpdir(t, "explain", needs_dumpdir(t->a->kind), &d);
	if (ret)
		return ret;
	ret = target_attach(opt, "explain", t);
	if (ret)
		goto out;
	rc = alloc_account(t->s, t->a, d, &w, acc);
	if (!rc)
		rc = account_others(t, o);
	if (rc)
		ret = target_error(t, "explain",
				   target_interrupted() ? -EINTR : rc);
	rc = target_detach(opt, "explain", t);
	if (!ret)
		ret = rc;
	if (!ret && target_interrupted())
		ret = target_error(t, "explain", -EINTR);
out:
	if (d && (rc = dumpdir_remove(d)) && !ret) {
		error("explain %d: removing the temporary directory: %s",
		      (int)t->pi.pid, strerror(-rc));
		ret = EXIT_FAILURE_OTHER;
	}
	return ret;
}

int cmd_explain(const struct options *opt, int argc, char **argv)
{
	bool json = opt->json, no_attach = opt->no_attach;
	struct alloc_account acc;
	struct explain_others others = { .n = 0 };
	struct proc_memory pm = { 0 };
	struct explain_input in = { 0 };
	struct explain *e = NULL;
	struct target t;
	int proc_fd = -1;
	long ncpus;
	int ret;

	ret = parse_args(argc, argv, &json, &no_attach);
	if (ret)
		return ret;
	ret = no_attach ? target_view(opt, "explain", &t)
			: target_load(opt, "explain", ALLOC_CAN_STATS, &t);
	if (ret)
		goto out;
	ret = pin_proc(&t, &proc_fd);
	if (ret)
		goto out;
	if (!no_attach) {
		ret = account(opt, &t, proc_fd, &acc, &others);
		if (ret)
			goto out;
	}
	/*
	 * With every thread running again: reading smaps of a big process
	 * takes a while and walks all its page tables, and done just before
	 * the borrowed thread is checked it made that check slower (by a
	 * tenth of the time stopped, on redis).
	 */
	ret = read_proc(&t, proc_fd, &pm);
	if (ret)
		goto out;
	e = calloc(1, sizeof(*e));
	if (!e) {
		error("explain %d: %s", (int)t.pi.pid, strerror(ENOMEM));
		ret = EXIT_FAILURE_OTHER;
		goto out;
	}
	ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	in = (struct explain_input){
		.pid = t.pi.pid,
		.pm = &pm,
		.acc = no_attach ? NULL : &acc,
		.ncpus = ncpus > 0 ? (unsigned int)ncpus : 1,
	};
	if (!t.a && t.have_det)
		t.a = detection_serving(&t.det);
	in.allocator = t.a ? alloc_kind_name(t.a->kind) : NULL;
	in.can_prof = t.a && (alloc_caps(t.a->kind) & ALLOC_CAN_PROF) &&
		      (t.a->kind != ALLOC_JEMALLOC || no_attach || acc.prof);
	if (!in.allocator)
		in.allocator = "the allocator";
	explain_compute(&in, e);
	if (json)
		explain_print_json(&t, &in, e, &others);
	else
		explain_print_text(&t, &in, e, &others);
out:
	if (proc_fd >= 0)
		close(proc_fd);
	free(e);
	proc_memory_free(&pm);
	target_free(&t);
	return ret;
}
