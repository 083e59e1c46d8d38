/*
 * The metrics of one scrape (exporter/exporter_internal.h): each family
 * whole, its HELP and TYPE, then a sample per target that has one.
 * Names follow Prometheus's conventions: a memsnap_ prefix, base units
 * as a suffix (_bytes, _seconds), _total for counters.  Every series of
 * a target carries its labels (labels.c): pid and start together name
 * one process, so a pid reused is a new series.
 */
#include "exporter/exporter_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define G "gauge"
#define C "counter"

/* A live target this scrape measured. */
static bool shown(const struct target *t)
{
	return !t->ended && t->read && t->now.ok;
}

/* One gauge per target, @get its value (false: none). */
static void per_target(struct exporter *e, struct expo *x, const char *name,
		       const char *help,
		       bool (*get)(const struct exporter *e,
				   const struct target *t, double *v))
{
	bool head = false;
	size_t i;

	for (i = 0; i < e->n; i++) {
		const struct target *t = e->t[i];
		double v;

		if (!shown(t) || !get(e, t, &v))
			continue;
		if (!head)
			expo_family(x, name, G, help);
		head = true;
		expo_sample(x, name, expo_text(&t->labels), NULL, NULL, v);
	}
}

static bool get_rss(const struct exporter *e, const struct target *t,
		    double *v)
{
	(void)e;
	*v = (double)t->now.rss;
	return true;
}

static bool get_swap(const struct exporter *e, const struct target *t,
		     double *v)
{
	(void)e;
	*v = (double)t->now.swap;
	return true;
}

static bool get_hwm(const struct exporter *e, const struct target *t,
		    double *v)
{
	(void)e;
	*v = (double)t->now.vm_hwm;
	return t->now.vm_hwm != 0;
}

static bool get_threads(const struct exporter *e, const struct target *t,
			double *v)
{
	(void)e;
	*v = (double)t->st.threads;
	return true;
}

static bool get_start(const struct exporter *e, const struct target *t,
		      double *v)
{
	if (!e->boot_time || e->clk_tck <= 0)
		return false;
	*v = (double)e->boot_time +
	     (double)t->pin.proc.start_time / (double)e->clk_tck;
	return true;
}

static bool get_limit(const struct exporter *e, const struct target *t,
		      double *v)
{
	(void)e;
	*v = (double)t->now.limit;
	return t->now.have_limit;
}

static bool get_age(const struct exporter *e, const struct target *t,
		    double *v)
{
	(void)e;
	*v = (double)t->now.reading_age_ms / 1000.0;
	return t->now.have_reading;
}

static bool get_arenas(const struct exporter *e, const struct target *t,
		       double *v)
{
	(void)e;
	*v = (double)(t->r.acc.kind == ALLOC_JEMALLOC ? t->r.acc.narenas
						      : t->r.acc.arenas);
	return t->now.have_reading && *v > 0;
}

static bool get_sampler_loaded(const struct exporter *e,
			       const struct target *t, double *v)
{
	(void)e;
	*v = t->r.sampler_rc == 0;
	return t->r_ms && (t->r.sampler_rc == 0 ||
			   t->r.sampler_rc == -ENOENT);
}

static bool get_sampler_active(const struct exporter *e,
			       const struct target *t, double *v)
{
	(void)e;
	*v = t->r.sampler_active;
	return t->r_ms && t->r.sampler_rc == 0;
}

static void memory_parts(struct exporter *e, struct expo *x)
{
	static const char name[] = "memsnap_process_memory_bytes";
	size_t i;
	int p;

	expo_family(x, name, G,
		    "Resident memory in the parts of memsnap explain, adding "
		    "up to memsnap_process_rss_bytes: heap_in_use, heap_free "
		    "and allocator_metadata from the allocator's numbers last "
		    "read (else one part, heap: the anonymous memory an "
		    "allocator can live in), runtime (a language runtime's "
		    "heap and own memory), thread_stacks, anon_other, "
		    "memsnap_sampler, file, shmem.");
	for (i = 0; i < e->n; i++) {
		const struct target *t = e->t[i];
		const char *l = expo_text(&t->labels);

		if (!shown(t))
			continue;
		for (p = 0; p < PARTS; p++) {
			bool heap = p == PART_HEAP_IN_USE ||
				    p == PART_HEAP_FREE || p == PART_METADATA;

			if (heap && !t->now.heap_parts)
				continue;
			expo_sample_u64(x, name, l, "part",
					explain_part_name((enum explain_part)p),
					t->now.part[p]);
		}
		if (!t->now.heap_parts)
			expo_sample_u64(x, name, l, "part", "heap", t->now.heap);
	}
}

/* The allocator's own numbers, each where it gave it. */
static void allocator_stats(struct exporter *e, struct expo *x)
{
	static const char name[] = "memsnap_allocator_bytes";
	size_t i;

	expo_family(x, name, G,
		    "The allocator's own numbers, last read (one thread "
		    "borrowed, at most every --attach-every): in_use, free, "
		    "metadata, resident for every allocator; jemalloc's "
		    "allocated, active, dirty, muzzy, retained; glibc's "
		    "system, mmapped, "
		    "releasable; tcmalloc's pageheap_free, pageheap_unmapped, "
		    "caches; mimalloc's committed, reserved.");
	for (i = 0; i < e->n; i++) {
		const struct target *t = e->t[i];
		const struct alloc_account *a = &t->r.acc;
		const char *l = expo_text(&t->labels);
		const struct {
			const char *stat;
			bool have;
			uint64_t v;
		} rows[] = {
			{ "in_use", a->have_in_use, a->in_use },
			{ "free", a->have_free, a->free },
			{ "metadata", a->have_metadata, a->metadata },
			{ "resident", a->have_resident, a->resident },
			{ "allocated", a->kind == ALLOC_JEMALLOC, a->allocated },
			{ "active", a->have_active, a->active },
			{ "dirty", a->have_pdirty, a->pdirty },
			{ "mapped", a->mapped != 0, a->mapped },
			{ "retained", a->have_retained, a->retained },
			{ "muzzy", a->have_muzzy, a->muzzy },
			{ "system", a->arena_system != 0, a->arena_system },
			{ "mmapped", a->kind == ALLOC_GLIBC, a->mmap_bytes },
			{ "releasable", a->have_keepcost, a->keepcost },
			{ "pageheap_free", a->pageheap_free != 0,
			  a->pageheap_free },
			{ "pageheap_unmapped", a->pageheap_unmapped != 0,
			  a->pageheap_unmapped },
			{ "caches", a->caches != 0, a->caches },
			{ "committed", a->committed != 0, a->committed },
			{ "reserved", a->reserved != 0, a->reserved },
		};
		size_t k;

		if (!shown(t) || !t->now.have_reading)
			continue;
		for (k = 0; k < sizeof(rows) / sizeof(rows[0]); k++)
			if (rows[k].have)
				expo_sample_u64(x, name, l, "stat", rows[k].stat,
						rows[k].v);
	}
}

/* A language runtime's own numbers, where its reading found them. */
static void runtime_stats(struct exporter *e, struct expo *x)
{
	static const char name[] = "memsnap_runtime_bytes";
	struct expo l;
	bool head = false;
	size_t i, k;

	expo_init(&l);
	for (i = 0; i < e->n; i++) {
		const struct target *t = e->t[i];
		const struct runtime_stats *st = &t->r.rt.st;
		const struct {
			const char *stat;
			bool have;
			uint64_t v;
		} rows[] = {
			{ "heap_used", st->have_heap, st->heap_used },
			{ "heap_committed", st->have_heap, st->heap_committed },
			{ "heap_max", st->have_heap, st->heap_max },
			{ "metaspace_used", st->have_metaspace, st->metaspace_used },
			{ "metaspace_committed", st->have_metaspace,
			  st->metaspace_committed },
			{ "heap_inuse", st->have_go, st->go_inuse },
			{ "heap_alloc", st->have_go, st->go_alloc },
			{ "heap_idle", st->have_go, st->go_idle },
			{ "heap_released", st->have_go, st->go_released },
			{ "stacks", st->have_go, st->go_stacks },
			{ "committed", st->have_go, st->go_committed },
			{ "arenas", st->have_arenas,
			  st->arenas * st->arena_size },
		};

		if (!shown(t) || !t->r_ms || t->r.rt.kind == RUNTIME_NONE)
			continue;
		expo_reset(&l);
		expo_raw(&l, expo_text(&t->labels), t->labels.len);
		expo_label(&l, "runtime", runtime_name(t->r.rt.kind));
		for (k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
			if (!rows[k].have)
				continue;
			if (!head)
				expo_family(x, name, G,
					    "A language runtime's own numbers, "
					    "read from outside, never calling "
					    "into it: the JVM's heap_used, "
					    "heap_committed, heap_max, "
					    "metaspace_used, metaspace_committed "
					    "(hsperfdata); Go's heap_inuse, "
					    "heap_alloc, heap_idle, "
					    "heap_released, stacks, committed "
					    "(runtime.memstats); CPython's "
					    "arenas.");
			head = true;
			expo_sample_u64(x, name, expo_text(&l), "stat",
					rows[k].stat, rows[k].v);
		}
	}
	expo_free(&l);
}

static void findings(struct exporter *e, struct expo *x)
{
	static const char name[] = "memsnap_finding_bytes";
	bool head = false;
	size_t i, k;

	for (i = 0; i < e->n; i++) {
		const struct target *t = e->t[i];

		if (!shown(t))
			continue;
		for (k = 0; k < t->now.nf; k++) {
			if (!head)
				expo_family(x, name, G,
					    "Bytes at stake in each finding of "
					    "memsnap explain, by its id (see "
					    "memsnap --pid PID explain for the "
					    "remedy).");
			head = true;
			expo_sample_u64(x, name, expo_text(&t->labels),
					"finding", t->now.fid[k],
					t->now.fbytes[k]);
		}
	}
}

static void stopped(struct exporter *e, struct expo *x)
{
	static const char name[] = "memsnap_exporter_thread_stopped_seconds_total";
	size_t i;

	expo_family(x, name, C,
		    "Time a thread of the target was held stopped for the "
		    "exporter's readings.");
	for (i = 0; i < e->n; i++)
		if (shown(e->t[i]))
			expo_sample(x, name, expo_text(&e->t[i]->labels), NULL,
				    NULL, (double)e->t[i]->stopped_us / 1e6);
}

static void own(struct exporter *e, struct expo *x)
{
	static const char fail[] = "memsnap_exporter_attach_failures_total";
	size_t i;

	expo_family(x, "memsnap_exporter_targets", G,
		    "Processes the exporter reads now.");
	expo_sample_u64(x, "memsnap_exporter_targets", NULL, NULL, NULL, e->n);
	expo_family(x, "memsnap_exporter_targets_dropped", G,
		    "Processes that passed the filters at the last scrape "
		    "but were left out by --max-targets.");
	expo_sample_u64(x, "memsnap_exporter_targets_dropped", NULL, NULL,
			NULL, e->dropped);
	expo_family(x, "memsnap_exporter_targets_ended_total", C,
		    "Targets whose process exited.");
	expo_sample_u64(x, "memsnap_exporter_targets_ended_total", NULL, NULL,
			NULL, e->ended);
	expo_family(x, fail, C,
		    "Readings of a target's allocator that failed (a thread "
		    "borrowed, unless --no-attach), by reason.");
	for (i = 0; i < EXPORTER_REASONS; i++)
		if (i != DIAG_USAGE && i != DIAG_BAD_INPUT)
			expo_sample_u64(x, fail, NULL, "reason",
					exporter_reason((enum diag_kind)i),
					e->failures[i]);
	expo_family(x, "memsnap_exporter_proc_read_failures_total", C,
		    "Scrapes of a target whose /proc files could not be read.");
	expo_sample_u64(x, "memsnap_exporter_proc_read_failures_total", NULL,
			NULL, NULL, e->proc_failures);
	expo_family(x, "memsnap_exporter_scrapes_total", C,
		    "Scrapes served.");
	expo_sample_u64(x, "memsnap_exporter_scrapes_total", NULL, NULL, NULL,
			e->scrapes);
	expo_family(x, "memsnap_exporter_scrape_duration_seconds", G,
		    "How long this scrape took to find and measure its "
		    "targets.");
	expo_sample(x, "memsnap_exporter_scrape_duration_seconds", NULL, NULL,
		    NULL, e->last_scrape_s);
	expo_family(x, "memsnap_exporter_build_info", G,
		    "The memsnap that serves these metrics.");
	expo_sample_u64(x, "memsnap_exporter_build_info", NULL, "version",
			MEMSNAP_VERSION, 1);
}

int render_scrape(struct exporter *e, struct expo *x, uint64_t now_ms)
{
	(void)now_ms;
	per_target(e, x, "memsnap_process_rss_bytes",
		   "Resident memory: the Rss of every mapping (smaps).",
		   get_rss);
	memory_parts(e, x);
	per_target(e, x, "memsnap_process_swap_bytes",
		   "Memory of the process in swap.", get_swap);
	per_target(e, x, "memsnap_process_rss_peak_bytes",
		   "The largest RSS the process has had (VmHWM).", get_hwm);
	per_target(e, x, "memsnap_process_threads", "Threads of the process.",
		   get_threads);
	per_target(e, x, "memsnap_process_start_time_seconds",
		   "When the process started, in seconds since the epoch.",
		   get_start);
	per_target(e, x, "memsnap_cgroup_memory_limit_bytes",
		   "The memory limit of the process's cgroup (the smallest "
		   "memory.max from it up), where one applies.",
		   get_limit);
	allocator_stats(e, x);
	per_target(e, x, "memsnap_allocator_arenas",
		   "Arenas of the allocator (glibc's, jemalloc's).",
		   get_arenas);
	per_target(e, x, "memsnap_allocator_reading_age_seconds",
		   "Age of the allocator's numbers in this scrape.", get_age);
	runtime_stats(e, x);
	findings(e, x);
	per_target(e, x, "memsnap_sampler_loaded",
		   "memsnap's heap sampler is in the process (prof on "
		   "--sampler loaded it).",
		   get_sampler_loaded);
	per_target(e, x, "memsnap_sampler_active",
		   "memsnap's heap sampler is sampling.", get_sampler_active);
	stopped(e, x);
	own(e, x);
	return x->err;
}
