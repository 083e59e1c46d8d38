/*
 * memsnap --pid N explain [--json] [--no-attach]: where the resident
 * memory is, in parts that add up to RSS, and what to do about it.
 *
 * A /proc/PID directory pinned to the process of the view (proc_pin_dir())
 * first; then the allocator's account (allocators/account.h) in one
 * borrowed-thread session: the calls of `stats`, for jemalloc the
 * numbers and settings that can matter, guessed from smaps_rollup (no
 * allocator to call: no session, and why is said); then, every thread
 * running again, the /proc part (proc/smaps.h), memsnap's own sampler
 * in the process, the language runtime and what it says of its heap
 * without a call (symbols/runtime.h, proc/runtime.h), the arithmetic
 * and the findings (explain/explain.h), who else maps its shared
 * memory where that is a finding, and the replies (explain/print.c).
 */
#include "cli/cli.h"

#include "allocators/account.h"
#include "agent/dumpdir.h"
#include "cli/explain.h"
#include "cli/session.h"
#include "common/util.h"
#include "explain/explain.h"
#include "proc/smaps.h"
#include "symbols/runtime.h"

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
			return fail(DIAG_USAGE, "explain: %s '%s' (see memsnap --help)",
				    argv[i][0] == '-' ? "unknown option"
				    : "unexpected argument",
				    argv[i]);
		}
	}
	return EXIT_OK;
}

/* /proc/PID pinned to the process of the view, into *@fd. */
static int pin_proc(const char *cmd, const struct target *t, int *fd)
{
	*fd = proc_pin_dir(&t->pin);
	if (*fd == -ESRCH)
		return fail(DIAG_NO_PROCESS, "%s %d: %s", cmd, (int)t->pi.pid,
			    PROC_PIN_GONE);
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

static int account(const struct options *opt, const char *cmd,
		   struct target *t, int proc_fd, struct alloc_account *acc,
		   struct explain_others *o)
{
	struct alloc_account_want w = {
		.min_bytes = EXPLAIN_MIN_BYTES,
		.anon_huge = UINT64_MAX,	/* unknown: read what it bounds */
		.huge_page = proc_huge_page(),
		.all = opt->all_numbers,
	};
	struct dumpdir *d = NULL;
	int ret, rc;

	/*
	 * Which of jemalloc's numbers are worth a call: the totals of
	 * smaps_rollup.  Only for jemalloc: the page walk costs the check
	 * of the borrowed thread's stack a little, as smaps did.
	 */
	if (t->a->kind == ALLOC_JEMALLOC &&
	    proc_rollup_read_at(proc_fd, &w.rss, &w.anon_huge))
		w.anon_huge = UINT64_MAX;

	ret = target_dumpdir(t, cmd, DUMPDIR_DEFERRED, &d);
	if (ret)
		return ret;
	ret = target_attach(opt, cmd, t);
	if (ret)
		goto out;
	rc = alloc_account(t->s, t->a, d, &w, acc);
	if (!rc)
		rc = account_others(t, o);
	if (rc)
		ret = target_error(t, cmd,
				   target_interrupted() ? -EINTR : rc);
	rc = target_detach(opt, cmd, t);
	if (!ret)
		ret = rc;
	if (!ret && target_interrupted())
		ret = target_error(t, cmd, -EINTR);
out:
	if (d && (rc = dumpdir_remove(d)) && !ret) {
		ret = fail_errno(DIAG_FAILED, rc, "%s %d: removing the temporary directory", cmd,
				 (int)t->pi.pid);
	}
	return ret;
}

/*
 * Why @d holds no allocator memsnap can call, into @buf: no malloc at
 * all (a static binary with a heap of its own: Go), musl's, or a malloc
 * of no allocator memsnap knows.  Not an error for explain: /proc
 * still says where the memory is.
 */
static void why_none(const struct detection *d, char *buf, size_t size)
{
	if (d->malloc_unknown)
		snprintf(buf, size, "the object that defines malloc could not be read (%s)",
			 d->malloc_unknown->path ? d->malloc_unknown->path : "?");
	else if (d->have_malloc && d->malloc_musl)
		snprintf(buf, size, "musl's malloc has no control functions to call");
	else if (d->have_malloc)
		snprintf(buf, size, "malloc is %s's, an allocator memsnap knows no control functions of",
			 d->malloc_sym.obj && d->malloc_sym.obj->path
				 ? d->malloc_sym.obj->path : "an unknown object");
	else
		snprintf(buf, size, "no malloc in the process (a static binary with a heap of its own)");
}

/* The language runtime the process runs, and what can be read of it
 * without calling into it: its symbols' numbers, the JVM's counters,
 * the settings it started with.  What is not known stays unsaid. */
static void read_runtime(struct explain_run *r)
{
	if (runtime_detect(r->t.pi.pid, r->t.os, &r->rt) ||
	    r->rt.kind == RUNTIME_NONE)
		return;
	if (r->rt.kind == RUNTIME_JVM &&
	    hsperf_read_at(r->proc_fd, r->t.maps, &r->rt))
		snprintf(r->rt.why, sizeof(r->rt.why),
			 "it maps no hsperfdata (-XX:-UsePerfData), or it did not read as one");
	runtime_settings_at(r->proc_fd, &r->rt);
}

/* The processes that map the largest shared memory of @r's too. */
static bool find_sharers(struct explain_run *r)
{
	const struct smap *s = smaps_largest(&r->pm, SMAP_SHMEM);

	return s && !proc_sharers(r->t.pi.pid, s->dev_major, s->dev_minor,
				  s->inode, &r->sharers);
}

/* memsnap's sampler in the process (the view found it): its memory is
 * memsnap's, never the program's. */
static void sampler_claims(struct explain_run *r)
{
	uint64_t lo[SAMPLER_RANGES], hi[SAMPLER_RANGES];
	size_t i, n = r->t.sampler_rc ? 0 : sampler_memory(&r->t.sampler,
							    lo, hi);

	for (i = 0; i < n; i++)
		r->claims[r->nclaims++] = (struct smap_claim){
			lo[i], hi[i], SMAP_MEMSNAP };
}

/* What @r measured, as explain's input and who it is, for the
 * replies. */
static void fill_input(struct explain_run *r, bool no_attach)
{
	long ncpus = sysconf(_SC_NPROCESSORS_ONLN);

	r->in = (struct explain_input){
		.pid = r->t.pi.pid,
		.pm = &r->pm,
		.acc = no_attach ? NULL : &r->acc,
		.not_read = r->not_read[0] ? r->not_read
			    : no_attach ? "--no-attach" : NULL,
		.claims = r->claims,
		.nclaims = r->nclaims,
		.rt = &r->rt,
		.no_malloc = !r->t.det.have_malloc && !r->t.det.n,
		.comm = r->t.pi.comm,
		.ncpus = ncpus > 0 ? (unsigned int)ncpus : 1,
	};
	if (!r->t.a && r->t.have_det)
		r->t.a = detection_serving(&r->t.det);
	r->in.allocator = r->t.a ? alloc_kind_name(r->t.a->kind) : NULL;
	if (r->t.a) {
		const char *o = r->t.a->obj && r->t.a->obj->path
					? strrchr(r->t.a->obj->path, '/')
					: NULL;

		r->in.alloc_defrag = r->t.a->defrag_hint;
		r->in.alloc_object = o ? o + 1 : NULL;
	}
	r->in.can_prof = r->t.a && (alloc_caps(r->t.a->kind) & ALLOC_CAN_PROF) &&
			 (r->t.a->kind != ALLOC_JEMALLOC || no_attach ||
			  r->acc.prof);
	/* watch --sampler, or prof on --sampler before: dumps are had */
	r->in.sampler_on = !r->t.sampler_rc && r->t.sampler.active;
	if (!r->in.allocator)
		r->in.allocator = "the allocator";
	r->who = (struct explain_who){
		.pid = r->t.pi.pid,
		.comm = r->t.pi.comm,
		.tid = r->t.tid,
		.allocator = r->t.a ? alloc_kind_name(r->t.a->kind) : NULL,
		.serves_malloc = r->t.a && r->t.a->serves_malloc,
	};
}

int explain_measure(const struct options *opt, const char *cmd,
		    bool no_attach, struct explain_run *r)
{
	int ret;

	memset(r, 0, sizeof(*r));
	r->proc_fd = -1;
	ret = target_view(opt, cmd, &r->t);
	r->loaded = true;
	if (ret)
		return ret;
	/* nothing to call is not an error: /proc alone, and say why */
	if (!no_attach && !opt->allocator && !r->t.det.n) {
		why_none(&r->t.det, r->not_read, sizeof(r->not_read));
		no_attach = true;
	}
	if (!no_attach) {
		ret = target_pick(opt, cmd, ALLOC_CAN_STATS, &r->t);
		if (ret)
			return ret;
	}
	ret = pin_proc(cmd, &r->t, &r->proc_fd);
	if (ret)
		return ret;
	if (!no_attach) {
		ret = account(opt, cmd, &r->t, r->proc_fd, &r->acc, &r->others);
		if (ret)
			return ret;
	}
	/*
	 * With every thread running again: reading smaps of a big process
	 * takes a while and walks all its page tables, and done just before
	 * the borrowed thread is checked it made that check slower (by a
	 * tenth of the time stopped, on redis).
	 */
	ret = read_proc(&r->t, r->proc_fd, &r->pm);
	if (ret)
		return ret;
	r->e = calloc(1, sizeof(*r->e));
	if (!r->e)
		return fail_errno(DIAG_FAILED, ENOMEM, "%s %d", cmd, (int)r->t.pi.pid);
	sampler_claims(r);
	read_runtime(r);
	fill_input(r, no_attach);
	explain_compute(&r->in, r->e);
	/* shared memory worth a finding: who else maps it, then again */
	if (r->e->part[PART_SHMEM] >= EXPLAIN_MIN_BYTES &&
	    r->e->part[PART_SHMEM] * 10 >= r->e->rss &&
	    find_sharers(r)) {
		r->in.sharers = &r->sharers;
		explain_compute(&r->in, r->e);
	}
	return EXIT_OK;
}

void explain_run_free(struct explain_run *r)
{
	if (r->proc_fd >= 0)
		close(r->proc_fd);
	r->proc_fd = -1;
	free(r->e);
	r->e = NULL;
	proc_memory_free(&r->pm);
	if (r->loaded)
		target_free(&r->t);
	r->loaded = false;
}

int cmd_explain(const struct options *opt, int argc, char **argv)
{
	bool json = opt->json, no_attach = opt->no_attach;
	struct explain_run *r;
	int ret;

	ret = parse_args(argc, argv, &json, &no_attach);
	if (ret)
		return ret;
	r = calloc(1, sizeof(*r));
	if (!r)
		return fail_errno(DIAG_FAILED, ENOMEM, "explain");
	ret = explain_measure(opt, "explain", no_attach, r);
	if (!ret && json) {
		explain_json(&r->who, &r->in, r->e, &r->others, stdout);
	} else if (!ret) {
		char *text = explain_text(&r->who, &r->in, r->e, &r->others);

		/* the process's name is the target's */
		if (text && isatty(STDOUT_FILENO))
			fputs_clean(text, stdout);
		else if (text)
			fputs(text, stdout);
		free(text);
	}
	explain_run_free(r);
	free(r);
	return ret;
}
