/*
 * The findings of memory that is not the allocator's (explain/
 * explain.h): the program's own mappings, thread stacks, mapped files,
 * shared memory and transparent huge pages; the largest anonymous and
 * shared mappings behind them, by the kernel's names; and what explain
 * knows of a few servers whose own memory is where an RSS alert sends
 * people (a database's buffer pool, PostgreSQL's shared memory).
 */
#include "explain/explain_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/*
 * Servers whose own memory explain can name, by their process name
 * (comm): what their anonymous or shared memory mostly is, and the
 * setting that sizes it.
 */
static const struct program {
	const char *comm;
	const char *anon, *anon_setting;
	const char *shmem, *shmem_setting;
} programs[] = {
	{ "mariadbd", "InnoDB's buffer pool, which the server maps itself",
	  "innodb_buffer_pool_size (SET GLOBAL changes it while the server runs)",
	  NULL, NULL },
	{ "mysqld", "InnoDB's buffer pool, which the server maps itself",
	  "innodb_buffer_pool_size", NULL, NULL },
	{ "postgres",
	  "a backend's own memory: its sorts and hashes, temporary tables, its caches of the catalog",
	  "work_mem and hash_mem_multiplier, temp_buffers (per session)",
	  "PostgreSQL's shared memory: shared_buffers and the server's other shared structures, mapped by the postmaster and every backend it forks",
	  "shared_buffers in postgresql.conf (a restart)" },
};

const struct program *program_of(const struct explain_input *in)
{
	size_t i;

	for (i = 0; in->comm && i < sizeof(programs) / sizeof(programs[0]);
	     i++)
		if (!strcmp(in->comm, programs[i].comm))
			return &programs[i];
	return NULL;
}

/* What part the memory of @s (owned by @owner) went to, as far as a
 * mapping tells. */
static const char *mapping_as(const struct explain_input *in,
			      const struct smap *s, enum smap_owner owner)
{
	uint64_t anon = s->anon < s->rss ? s->anon : s->rss;

	/* a stack merged with more: named by what most of it is */
	if (smap_is_stack(s, owner) && smap_stack_anon(s) * 2 >= anon)
		return "thread stack";
	if (s->kind == SMAP_SHMEM)
		return "shared memory";
	if (owner == SMAP_MEMSNAP)
		return "memsnap_sampler";
	if (owner == SMAP_RUNTIME)
		return "runtime";
	if (s->kind == SMAP_HEAP)
		return "heap";
	if (s->arena_heap)
		return "heap";	/* a glibc arena's heap */
	/* in a runtime's process what malloc does not hold is the
	 * runtime's: with no malloc, all of it */
	if (in->rt && in->rt->kind != RUNTIME_NONE && in->no_malloc)
		return "runtime";
	if (in->rt && in->rt->kind != RUNTIME_NONE && in->acc)
		return "runtime or malloc";
	return "malloc or program";
}

void explain_top(const struct explain_input *in, const struct smap_claim *c,
		 size_t nc, struct explain *e)
{
	const struct proc_memory *m = in->pm;
	size_t i, j;

	e->ntop = 0;
	for (i = 0; i < m->n; i++) {
		const struct smap *s = &m->v[i];
		struct explain_mapping *t;
		const char *name;

		if ((s->kind != SMAP_ANON && s->kind != SMAP_HEAP &&
		     s->kind != SMAP_SHMEM) || !s->rss)
			continue;
		if (e->ntop == EXPLAIN_TOP_MAPPINGS &&
		    s->rss <= e->top[e->ntop - 1].rss)
			continue;
		j = e->ntop < EXPLAIN_TOP_MAPPINGS ? e->ntop++ : e->ntop - 1;
		for (; j && e->top[j - 1].rss < s->rss; j--)
			e->top[j] = e->top[j - 1];
		t = &e->top[j];
		t->start = s->start;
		t->end = s->end;
		t->rss = s->rss;
		name = smap_name(m, s);
		snprintf(t->name, sizeof(t->name), "%s",
			 name ? name : s->kind == SMAP_HEAP ? "[heap]" : "");
		t->as = mapping_as(in, s, smap_owner_of(s, c, nc));
	}
}

const struct explain_mapping *top_as(const struct explain *e, const char *as)
{
	size_t i;

	for (i = 0; i < e->ntop; i++)
		if (!strcmp(e->top[i].as, as))
			return &e->top[i];
	return NULL;
}

void on_huge_pages(const struct explain_input *in, struct explain *e)
{
	struct explain_finding *f;

	(void)in;
	if (e->anon_huge < EXPLAIN_MIN_BYTES || e->anon_huge * 10 < e->rss)
		return;
	f = finding_add(e, "huge_pages", e->anon_huge);
	if (!f)
		return;
	say(f->text, sizeof(f->text),
	    "%s of anonymous memory is in transparent huge pages (%.0f%% of RSS; THP mode %s): a 2 MiB page stays resident whole while any of it is used",
	    hb(e->anon_huge), explain_pct(e, e->anon_huge),
	    e->thp[0] ? e->thp : "unknown");
	if (!strcmp(e->thp, "always"))
		say(f->remedy, sizeof(f->remedy),
		    "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (system-wide: only programs that ask get huge pages)");
	else
		say(f->remedy, sizeof(f->remedy),
		    "the program asks for them (madvise(MADV_HUGEPAGE)): its own setting, or echo never > /sys/kernel/mm/transparent_hugepage/enabled");
	say(f->remedy, sizeof(f->remedy),
	    "; or prctl(PR_SET_THP_DISABLE) before the program starts%s",
	    in->acc && in->acc->kind == ALLOC_JEMALLOC
		    ? "; for jemalloc also MALLOC_CONF=thp:never,metadata_thp:disabled"
		    : "");
}

void on_thread_stacks(const struct explain_input *in, struct explain *e)
{
	uint64_t st = e->part[PART_STACKS];
	struct explain_finding *f;

	(void)in;
	if (st < EXPLAIN_MIN_BYTES)
		return;
	f = finding_add(e, "thread_stacks", st);
	if (!f)
		return;
	say(f->text, sizeof(f->text),
	    "%lu thread%s, %zu stack%s found, %s resident in them (%.0f%% of RSS), the largest %s",
	    e->threads, e->threads == 1 ? "" : "s", e->nstacks,
	    e->nstacks == 1 ? "" : "s", hb(st), explain_pct(e, st),
	    hb(e->largest_stack));
	say(f->remedy, sizeof(f->remedy),
	    "fewer threads (the program's thread pool settings), or smaller stacks at the next start (a restart: ulimit -s, pthread_attr_setstacksize): a deep recursion once leaves its stack pages resident");
}

void on_anon_other(const struct explain_input *in, struct explain *e)
{
	uint64_t o = e->part[PART_ANON_OTHER];
	uint64_t heap = e->part[PART_HEAP_IN_USE] + e->part[PART_HEAP_FREE] +
			e->part[PART_METADATA] + e->heap;
	const struct explain_mapping *big = top_as(e, "malloc or program");
	const struct program *prog = program_of(in);
	const char *what = prog ? prog->anon : NULL;
	struct explain_finding *f;

	if (!e->attached || o < EXPLAIN_MIN_BYTES || o * 10 < e->rss)
		return;
	f = finding_add(e, "anon_other", o);
	if (!f)
		return;
	say(f->text, sizeof(f->text),
	    "%s of anonymous memory (%.0f%% of RSS) is outside what %s accounts for (%s): memory the program maps itself (buffer pools, caches, JIT code), another allocator's, or copies of its files' pages",
	    hb(o), explain_pct(e, o), in->allocator, hb(heap));
	if (big && big->rss <= o)
		say(f->text, sizeof(f->text),
		    "; the largest such mapping %" PRIx64 "-%" PRIx64 ", %s, %s resident%s%s",
		    big->start, big->end, hb(big->end - big->start),
		    hb(big->rss), big->name[0] ? ", " : "", big->name);
	if (what)
		say(f->text, sizeof(f->text),
		    "; in %s the largest of it is usually %s", in->comm,
		    what);
	say(f->remedy, sizeof(f->remedy),
	    "whether it grows: `memsnap --pid %d watch` (a pool or cache sized by a setting levels off, a leak keeps growing); what sizes it: %s; `memsnap --pid %d info` lists every allocator in the process",
	    (int)in->pid,
	    what ? prog->anon_setting
		 : "the program's own settings (a database's buffer pool, a cache's size)",
	    (int)in->pid);
}

void on_file(const struct explain_input *in, struct explain *e)
{
	uint64_t fb = e->part[PART_FILE];
	struct explain_finding *f;

	(void)in;
	if (fb < EXPLAIN_MIN_BYTES || fb * 10 < e->rss)
		return;
	f = finding_add(e, "file", fb);
	if (!f)
		return;
	say(f->text, sizeof(f->text),
	    "%s of mapped files is resident (%.0f%% of RSS): code, libraries and files the program maps",
	    hb(fb), explain_pct(e, fb));
	say(f->remedy, sizeof(f->remedy),
	    "not a leak: these pages are the page cache, shared with other processes and reclaimed by the kernel under pressure (Pss in /proc/PID/smaps_rollup is this process's share)");
}

/* "pid 4243 (postgres), pid 4244 (postgres) and 10 more" */
static void sharers_text(const struct proc_sharers *sh, char *buf,
			 size_t size)
{
	size_t i;

	buf[0] = '\0';
	for (i = 0; i < sh->n; i++)
		say(buf, size, "%spid %d (%s)", i ? ", " : "", (int)sh->pid[i],
		    sh->comm[i]);
	if (sh->total > sh->n)
		say(buf, size, " and %zu more", sh->total - sh->n);
	if (sh->cut)
		say(buf, size, " (the first %zu processes looked at)",
		    sh->scanned);
}

/*
 * Shared memory: resident here, and in every process that touched it.
 * PSS, this process's share of each page, tells how widely; who else
 * maps the largest piece says who they are; what sizes it is the
 * program's setting.
 */
void on_shmem(const struct explain_input *in, struct explain *e)
{
	uint64_t sh = e->part[PART_SHMEM];
	const struct explain_mapping *big = top_as(e, "shared memory");
	const struct program *prog = program_of(in);
	const char *what = prog ? prog->shmem : NULL;
	struct explain_finding *f;
	char who[384];

	if (sh < EXPLAIN_MIN_BYTES || sh * 10 < e->rss)
		return;
	f = finding_add(e, "shmem", sh);
	if (!f)
		return;
	say(f->text, sizeof(f->text),
	    "%s of shared memory is resident in this process (%.0f%% of RSS), and counted again in every process that touched it: its share here (PSS) is %s",
	    hb(sh), explain_pct(e, sh), hb(e->shmem_pss));
	if (e->shmem_pss && e->shmem_pss * 11 <= sh * 10)
		say(f->text, sizeof(f->text),
		    ", as if %.1f processes shared each page",
		    (double)sh / (double)e->shmem_pss);
	if (big)
		say(f->text, sizeof(f->text),
		    "; the largest piece %" PRIx64 "-%" PRIx64 ", %s, %s resident%s%s",
		    big->start, big->end, hb(big->end - big->start),
		    hb(big->rss), big->name[0] ? ", " : "", big->name);
	if (in->sharers && in->sharers->total) {
		sharers_text(in->sharers, who, sizeof(who));
		say(f->text, sizeof(f->text), ", also mapped by %s", who);
	} else if (in->sharers) {
		say(f->text, sizeof(f->text),
		    ", mapped by no other process now");
	}
	if (what)
		say(f->text, sizeof(f->text), "; in %s it is %s", in->comm,
		    what);
	say(f->remedy, sizeof(f->remedy),
	    "not this process's alone: to count it once, add up PSS (Pss_Shmem of /proc/PID/smaps_rollup) over the processes that map it; what sizes it: %s; a leak of this process would be in its private memory: `memsnap --pid %d watch` shows which part grows",
	    what ? prog->shmem_setting
		 : "the program's own setting (a database's shared buffers, a shared cache)",
	    (int)in->pid);
}
