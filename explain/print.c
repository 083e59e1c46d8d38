/*
 * `explain`'s two replies: text for someone facing an RSS alert (the
 * verdict first, the parts that add up to RSS, the findings with their
 * numbers and remedy) and the JSON of docs/json.md.  The text is
 * written to a buffer; the caller cleans it for a terminal: the
 * process name is the target's.
 */
#include "explain/explain.h"

#include "common/json.h"
#include "common/util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const part_words[PARTS] = {
	[PART_HEAP_IN_USE] = "heap in use",
	[PART_HEAP_FREE] = "heap free (held by the allocator)",
	[PART_METADATA] = "allocator metadata",
	[PART_RUNTIME] = "a runtime's heap and own memory",
	[PART_STACKS] = "thread stacks",
	[PART_ANON_OTHER] = "other anonymous (not the allocator's)",
	[PART_MEMSNAP] = "memsnap's sampler (its code and table)",
	[PART_FILE] = "mapped files",
	[PART_SHMEM] = "shared memory",
};

static void row(FILE *f, const struct explain *e, const char *name,
		uint64_t bytes, bool minus, const char *note)
{
	char b[32];

	human_bytes(bytes, b, sizeof(b));
	fprintf(f, "  %-40s %s%10s %6.1f%%%s%s\n", name, minus ? "-" : " ", b,
		(minus ? -1.0 : 1.0) * explain_pct(e, bytes), note[0] ? "  " : "",
		note);
}

static bool has_runtime(const struct explain_input *in)
{
	return in->rt && in->rt->kind != RUNTIME_NONE;
}

/* "Go's heap and own memory", "the JVM's heap and own memory". */
static const char *runtime_label(const struct explain_input *in, char *buf,
				 size_t size)
{
	snprintf(buf, size, "%s's heap and own memory",
		 runtime_title(in->rt->kind));
	return buf;
}

static void print_parts(FILE *f, const struct explain_input *in,
			const struct explain *e)
{
	char note[128], b[32], label[64];
	int p;

	if (e->attached && !e->heap_parts) {
		snprintf(note, sizeof(note),
			 "%s counts no in use apart: trim, then explain again",
			 in->allocator);
		row(f, e, "heap (in use and free together)", e->heap, false,
		    note);
	}
	for (p = 0; p < PARTS; p++) {
		note[0] = '\0';
		if ((!e->heap_parts && p <= PART_METADATA) ||
		    (p == PART_MEMSNAP && !e->part[p]) ||
		    (p == PART_RUNTIME && !has_runtime(in)))
			continue;
		if (p == PART_STACKS) {
			human_bytes(e->largest_stack, b, sizeof(b));
			snprintf(note, sizeof(note),
				 "%lu thread%s, %zu stack%s found, largest %s%s",
				 e->threads, e->threads == 1 ? "" : "s",
				 e->nstacks, e->nstacks == 1 ? "" : "s", b,
				 has_runtime(in) && in->rt->kind == RUNTIME_GO &&
						 e->nstacks < e->threads
					 ? "; Go's threads run on stacks in its heap"
					 : "");
		}
		if (e->cut[p] >= (1u << 20)) {
			human_bytes(e->cut[p], b, sizeof(b));
			snprintf(note, sizeof(note),
				 "%s more counted by %s than is resident: left out",
				 b, in->allocator);
		}
		if (p == PART_ANON_OTHER && e->attached)
			snprintf(note, sizeof(note), "%s",
				 has_runtime(in)
					 ? "copies on write of its files"
					 : "the program's own mmaps, copies on write");
		row(f, e,
		    p == PART_RUNTIME ? runtime_label(in, label, sizeof(label))
		    : !e->attached && p == PART_ANON_OTHER
			    ? "copies on write of mapped files"
			    : part_words[p],
		    e->part[p], false, note);
	}
	if (!e->attached && !(has_runtime(in) && in->no_malloc))
		row(f, e, "heap and the program's own mmaps", e->heap, false,
		    in->not_read && strcmp(in->not_read, "--no-attach")
			    ? "allocator not read"
			    : "allocator not read: --no-attach");
	row(f, e, "unaccounted", e->unaccounted < 0
		? (uint64_t)-(e->unaccounted + 1) + 1 : (uint64_t)e->unaccounted,
	    e->unaccounted < 0,
	    e->unaccounted ? "no page walk of smaps to split it" : "");
	fprintf(f, "  %-40s %s\n", "", "----------");
	row(f, e, "RSS", e->rss, false, "the page walk of smaps");
	if (e->vm_rss && (e->vm_rss > e->rss + e->rss / 50 ||
			  e->vm_rss + e->rss / 50 < e->rss)) {
		human_bytes(e->vm_rss, b, sizeof(b));
		fprintf(f, "  %-40s  %10s          the kernel's counter, "
			"behind the walk before Linux 6.2\n", "VmRSS", b);
	}
	human_bytes(e->swap, b, sizeof(b));
	fprintf(f, "  %-40s  %10s          beside RSS\n", "swapped out", b);
	if (e->vm_hwm) {
		human_bytes(e->vm_hwm, b, sizeof(b));
		fprintf(f, "  %-40s  %10s          the high-water mark\n",
			"peak RSS (VmHWM)", b);
	}
}

static void print_findings(FILE *f, const struct explain *e)
{
	char b[32];
	size_t i;

	if (!e->nf) {
		fprintf(f, "\nno findings: nothing over %llu MiB worth a change\n",
			EXPLAIN_MIN_BYTES >> 20);
		return;
	}
	fprintf(f, "\nfindings, most bytes first:\n");
	for (i = 0; i < e->nf; i++) {
		const struct explain_finding *x = &e->f[i];
		size_t c;

		human_bytes(x->bytes, b, sizeof(b));
		fprintf(f, "\n%zu. %s: %s (%.0f%% of RSS)\n   %s\n   remedy: %s\n",
			i + 1, x->id, b, explain_pct(e, x->bytes), x->text,
			x->remedy);
		for (c = 0; c < x->ncauses; c++) {
			human_bytes(x->causes[c].bytes, b, sizeof(b));
			fprintf(f, "   of it, %s (%s): %s\n     remedy: %s\n",
				x->causes[c].id, b, x->causes[c].text,
				x->causes[c].remedy);
		}
	}
}

/* The largest anonymous and shared mappings of a MiB or more, and what
 * each went to: "  7f1c29e00000-7f1c2de00000  64.0 MiB, 62.1 MiB
 * resident  anonymous  [anon:pool]" */
#define TOP_PRINTED 5

static void print_top(FILE *f, const struct explain *e)
{
	char sz[32], rss[32];
	size_t i, n = 0;

	for (i = 0; i < e->ntop && n < TOP_PRINTED; i++) {
		const struct explain_mapping *m = &e->top[i];

		if (m->rss < (1u << 20))
			break;
		if (!n++)
			fprintf(f, "\nlargest anonymous and shared mappings:\n");
		human_bytes(m->end - m->start, sz, sizeof(sz));
		human_bytes(m->rss, rss, sizeof(rss));
		fprintf(f, "  %012" PRIx64 "-%012" PRIx64 " %10s, %10s resident  %-16s %s\n",
			m->start, m->end, sz, rss, m->as, m->name);
	}
}

/* "also: glibc malloc (not serving malloc): 1.2 MiB in use, ..." */
static void print_others(FILE *f, const struct explain_others *o)
{
	char b1[32], b2[32];
	size_t i;

	for (i = 0; i < o->n; i++) {
		const struct alloc_account *a = &o->acc[i];

		fprintf(f, "also %s (%s):", alloc_kind_title(a->kind),
			o->serves_malloc[i] ? "serves malloc"
					    : "does not serve malloc");
		if (!a->have_in_use) {
			fprintf(f, " no numbers it can give\n");
			continue;
		}
		human_bytes(a->in_use, b1, sizeof(b1));
		fprintf(f, " %s in use", b1);
		if (a->have_free) {
			human_bytes(a->free, b2, sizeof(b2));
			fprintf(f, ", %s free", b2);
		}
		fprintf(f, " (within the parts above)\n");
	}
}

char *explain_text(const struct explain_who *w, const struct explain_input *in,
		   const struct explain *e, const struct explain_others *o)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	fprintf(f, "pid %d (%s): %s\n\n", (int)w->pid, w->comm, e->verdict);
	print_parts(f, in, e);
	if (e->attached && w->allocator && !w->serves_malloc)
		fprintf(f, "\n%s read through tid %d (--allocator); it does not serve malloc\n",
			in->allocator, (int)w->tid);
	else if (e->attached)
		fprintf(f, "\n%s serves malloc; read through tid %d\n",
			in->allocator, (int)w->tid);
	else if (w->allocator)
		fprintf(f, "\nallocator not read: --no-attach (%s serves malloc); no thread was stopped\n",
			in->allocator);
	else
		fprintf(f, "\nallocator not read: %s; these parts are /proc's alone, no thread was stopped\n",
			in->not_read ? in->not_read : "--no-attach");
	print_others(f, o);
	if (e->anon_huge || e->thp[0]) {
		char b[32];

		human_bytes(e->anon_huge, b, sizeof(b));
		fprintf(f, "THP %s, %s in huge pages; page size %" PRIu64 "\n",
			e->thp[0] ? e->thp : "unknown", b, e->page_size);
	}
	print_top(f, e);
	print_findings(f, e);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

static void account_json(struct json *j, const struct alloc_account *a)
{
	json_object_begin(j, "account");
	if (a->have_in_use)
		json_u64(j, "in_use", a->in_use);
	if (a->have_free)
		json_u64(j, "free", a->free);
	if (a->have_metadata)
		json_u64(j, "metadata", a->metadata);
	if (a->have_resident)
		json_u64(j, "resident", a->resident);
	json_bool(j, "in_use_with_free", a->in_use_with_free);
	switch (a->kind) {
	case ALLOC_GLIBC:
		json_u64(j, "arenas", a->arenas);
		json_u64(j, "arena_system", a->arena_system);
		json_u64(j, "mmap", a->mmap_bytes);
		json_u64(j, "free_other_arenas", a->free_other_arenas);
		if (a->have_keepcost)
			json_u64(j, "keepcost", a->keepcost);
		break;
	case ALLOC_JEMALLOC:
		json_u64(j, "allocated", a->allocated);
		if (a->have_active)
			json_u64(j, "active", a->active);
		if (a->narenas)
			json_u64(j, "arenas", a->narenas);
		if (a->have_internal)
			json_u64(j, "internal", a->internal);
		if (a->have_tcache_bytes)
			json_u64(j, "tcache_bytes", a->tcache_bytes);
		if (a->have_metadata_thp_pages)
			json_u64(j, "metadata_thp_pages",
				 a->metadata_thp_pages);
		if (a->have_pdirty)
			json_u64(j, "pdirty", a->pdirty);
		if (a->have_dirty_decay)
			json_i64(j, "dirty_decay_ms", a->dirty_decay_ms);
		if (a->have_muzzy_decay)
			json_i64(j, "muzzy_decay_ms", a->muzzy_decay_ms);
		if (a->have_background_thread)
			json_bool(j, "background_thread", a->background_thread);
		json_bool(j, "prof", a->prof);
		if (a->metadata_thp[0])
			json_string(j, "metadata_thp", a->metadata_thp);
		if (a->page)
			json_u64(j, "page", a->page);
		break;
	case ALLOC_TCMALLOC:
	case ALLOC_TCMALLOC_MINIMAL:
		json_u64(j, "pageheap_free", a->pageheap_free);
		json_u64(j, "pageheap_unmapped", a->pageheap_unmapped);
		json_u64(j, "caches", a->caches);
		break;
	default:
		json_u64(j, "committed", a->committed);
		json_u64(j, "reserved", a->reserved);
		break;
	}
	json_object_end(j);
}

/* A finding's "causes": what explains its bytes, inside it. */
static void causes_json(struct json *j, const struct explain_finding *x)
{
	size_t c;

	json_array_begin(j, "causes");
	for (c = 0; c < x->ncauses; c++) {
		json_object_begin(j, NULL);
		json_string(j, "id", x->causes[c].id);
		json_u64(j, "bytes", x->causes[c].bytes);
		json_string(j, "text", x->causes[c].text);
		json_string(j, "remedy", x->causes[c].remedy);
		json_object_end(j);
	}
	json_array_end(j);
}

/* "mappings": the largest anonymous and shared ones. */
static void mappings_json(struct json *j, const struct explain *e)
{
	char a[24];
	size_t i;

	json_array_begin(j, "mappings");
	for (i = 0; i < e->ntop; i++) {
		const struct explain_mapping *m = &e->top[i];

		json_object_begin(j, NULL);
		snprintf(a, sizeof(a), "0x%" PRIx64, m->start);
		json_string(j, "start", a);
		snprintf(a, sizeof(a), "0x%" PRIx64, m->end);
		json_string(j, "end", a);
		json_u64(j, "size", m->end - m->start);
		json_u64(j, "rss", m->rss);
		if (m->name[0])
			json_string(j, "name", m->name);
		else
			json_null(j, "name");
		json_string(j, "part", m->as);
		json_object_end(j);
	}
	json_array_end(j);
}

/* "runtime": the language runtime, what it holds and what it says. */
static void runtime_json(struct json *j, const struct runtime_info *rt)
{
	const struct runtime_stats *st;

	if (!rt || rt->kind == RUNTIME_NONE) {
		json_null(j, "runtime");
		return;
	}
	st = &rt->st;
	json_object_begin(j, "runtime");
	json_string(j, "name", runtime_name(rt->kind));
	json_string(j, "version", rt->version);
	json_string(j, "object", rt->object);
	json_string(j, "settings", rt->settings);
	if (rt->why[0])
		json_string(j, "not_read", rt->why);
	else
		json_null(j, "not_read");
	if (st->have_heap) {
		json_u64(j, "heap_used", st->heap_used);
		json_u64(j, "heap_committed", st->heap_committed);
		json_u64(j, "heap_max", st->heap_max);
		json_string(j, "collector", st->collector);
	}
	if (st->have_metaspace) {
		json_u64(j, "metaspace_used", st->metaspace_used);
		json_u64(j, "metaspace_committed", st->metaspace_committed);
	}
	if (st->have_go) {
		json_u64(j, "heap_inuse", st->go_inuse);
		json_u64(j, "heap_alloc", st->go_alloc);
		json_u64(j, "heap_idle_kept", st->go_idle);
		json_u64(j, "heap_released", st->go_released);
		json_u64(j, "stack_inuse", st->go_stacks);
	}
	if (st->have_arenas) {
		json_u64(j, "arenas", st->arenas);
		json_u64(j, "arena_size", st->arena_size);
	}
	json_object_end(j);
}

void explain_json(const struct explain_who *w, const struct explain_input *in,
		  const struct explain *e, const struct explain_others *o,
		  FILE *f)
{
	const struct proc_mem_status *st = &in->pm->st;
	uint64_t sum = 0;
	struct json j;
	size_t i;
	int p;

	json_init(&j, f);
	json_object_begin(&j, NULL);
	json_u64(&j, "pid", (uint64_t)w->pid);
	json_u64(&j, "tid", e->attached ? (uint64_t)w->tid : 0);
	if (w->allocator)
		json_string(&j, "allocator", w->allocator);
	else
		json_null(&j, "allocator");
	json_bool(&j, "serves_malloc", w->allocator && w->serves_malloc);
	json_bool(&j, "attached", e->attached);
	if (in->not_read)
		json_string(&j, "not_read", in->not_read);
	else
		json_null(&j, "not_read");
	json_u64(&j, "rss", e->rss);
	json_object_begin(&j, "parts");
	for (p = 0; p < PARTS; p++) {
		if (!e->heap_parts && p <= PART_METADATA)
			json_null(&j, explain_part_name((enum explain_part)p));
		else
			json_u64(&j, explain_part_name((enum explain_part)p),
				 e->part[p]);
		sum += e->part[p];
	}
	if (!e->heap_parts)
		json_u64(&j, "heap", e->heap);
	sum += e->heap;
	json_i64(&j, "unaccounted", e->unaccounted);
	json_u64(&j, "swap", e->swap);
	json_object_end(&j);
	json_u64(&j, "parts_sum", sum);
	runtime_json(&j, in->rt);
	json_u64(&j, "clamped", e->clamped);
	json_object_begin(&j, "threads");
	json_u64(&j, "count", e->threads);
	json_u64(&j, "stacks", e->nstacks);
	json_u64(&j, "largest_stack", e->largest_stack);
	json_object_end(&j);
	json_object_begin(&j, "status");
	json_u64(&j, "vm_rss", st->vm_rss);
	json_u64(&j, "rss_anon", st->rss_anon);
	json_u64(&j, "rss_file", st->rss_file);
	json_u64(&j, "rss_shmem", st->rss_shmem);
	json_u64(&j, "vm_swap", st->vm_swap);
	json_u64(&j, "vm_hwm", st->vm_hwm);
	json_object_end(&j);
	json_u64(&j, "anon_huge", e->anon_huge);
	if (e->thp[0])
		json_string(&j, "thp", e->thp);
	else
		json_null(&j, "thp");
	json_u64(&j, "page_size", e->page_size);
	json_u64(&j, "huge_page", e->huge_page);
	if (in->acc)
		account_json(&j, in->acc);
	if (e->attached)
		json_array_begin(&j, "other_allocators");
	for (i = 0; e->attached && i < o->n; i++) {
		const struct alloc_account *a = &o->acc[i];

		json_object_begin(&j, NULL);
		json_string(&j, "allocator", alloc_kind_name(a->kind));
		json_bool(&j, "serves_malloc", o->serves_malloc[i]);
		if (a->have_in_use)
			json_u64(&j, "in_use", a->in_use);
		if (a->have_free)
			json_u64(&j, "free", a->free);
		if (a->have_metadata)
			json_u64(&j, "metadata", a->metadata);
		json_object_end(&j);
	}
	if (e->attached)
		json_array_end(&j);
	json_array_begin(&j, "findings");
	for (i = 0; i < e->nf; i++) {
		json_object_begin(&j, NULL);
		json_string(&j, "id", e->f[i].id);
		json_u64(&j, "bytes", e->f[i].bytes);
		json_string(&j, "text", e->f[i].text);
		json_string(&j, "remedy", e->f[i].remedy);
		causes_json(&j, &e->f[i]);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_string(&j, "verdict", e->verdict);
	mappings_json(&j, e);
	json_object_end(&j);
	json_finish(&j);
}
