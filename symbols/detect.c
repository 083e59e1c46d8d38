#include "symbols/detect.h"

#include "common/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kind_desc {
	const char *name, *title;
	const char *probe[2];	/* all must be defined (with the prefix) */
	const char *malloc_fn;	/* its own malloc, with the prefix */
	const char *funcs[ALLOC_MAX_FUNCS];
	const char *internal[3]; /* prefixes of its symbols */
	bool owns_prefix;	/* every symbol with them is the allocator's */
};

static const struct kind_desc kinds[ALLOC_KINDS] = {
	[ALLOC_JEMALLOC] = {
		.name = "jemalloc", .title = "jemalloc",
		.probe = { "mallctlnametomib", "malloc_stats_print" },
		.malloc_fn = "malloc",
		.funcs = { "mallctl", "mallctlnametomib",
			   "malloc_stats_print" },
		.internal = { "je_", "_rjem_" },
		.owns_prefix = true,
	},
	[ALLOC_GLIBC] = {
		.name = "glibc", .title = "glibc malloc",
		.probe = { "__libc_malloc", "malloc_info" },
		.malloc_fn = "__libc_malloc",
		.funcs = { "malloc_info", "malloc_trim", "mallinfo2" },
		.internal = { "__libc_" },
	},
	[ALLOC_TCMALLOC] = {
		.name = "tcmalloc", .title = "gperftools tcmalloc (full)",
		.probe = { "tc_malloc", "MallocExtension_GetStats" },
		.malloc_fn = "tc_malloc",
		.funcs = { "HeapProfilerStart", "HeapProfilerStop",
			   "HeapProfilerDump", "IsHeapProfilerRunning",
			   "GetHeapProfile", "MallocExtension_GetStats",
			   "MallocExtension_ReleaseFreeMemory" },
		.internal = { "tc_" },
		.owns_prefix = true,
	},
	[ALLOC_TCMALLOC_MINIMAL] = {
		.name = "tcmalloc_minimal",
		.title = "gperftools tcmalloc (minimal, no heap profiler)",
		.probe = { "tc_malloc", "MallocExtension_GetStats" },
		.malloc_fn = "tc_malloc",
		.funcs = { "MallocExtension_GetStats",
			   "MallocExtension_ReleaseFreeMemory" },
	},
	[ALLOC_MIMALLOC] = {
		.name = "mimalloc", .title = "mimalloc",
		.probe = { "mi_malloc", "mi_stats_print_out" },
		.malloc_fn = "mi_malloc",
		.funcs = { "mi_stats_print_out", "mi_collect", "mi_version" },
		.internal = { "mi_" },
		.owns_prefix = true,
	},
};

const char *alloc_kind_name(enum alloc_kind kind)
{
	return kinds[kind].name;
}

const char *alloc_kind_title(enum alloc_kind kind)
{
	return kinds[kind].title;
}

/*
 * The malloc family, by plain name: what a caller calls to allocate or
 * free (the standard functions, jemalloc's *allocx, mimalloc's C++
 * entries behind "mi_").  Every allocator's entry points are these,
 * bare or behind its prefix.
 */
static const char *const entry_points[] = {
	"malloc", "calloc", "realloc", "free", "reallocarray", "cfree",
	"posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc",
	"malloc_usable_size", "mallocx", "rallocx", "xallocx", "sallocx",
	"nallocx", "dallocx", "sdallocx", "sdallocx_noflags", "new",
	"newarray", "new_nothrow", "newarray_nothrow",
};

const char *alloc_entry_point(size_t i)
{
	return i < ARRAY_SIZE(entry_points) ? entry_points[i] : NULL;
}

/* The prefix of @name that some allocator puts before its entry points
 * and internals, or NULL. */
static const char *prefix_of(const char *name, bool *owned)
{
	size_t k, j;

	for (k = 0; k < ALLOC_KINDS; k++)
		for (j = 0; j < ARRAY_SIZE(kinds[k].internal) &&
			    kinds[k].internal[j]; j++) {
			const char *p = kinds[k].internal[j];

			if (!strncmp(name, p, strlen(p))) {
				*owned = kinds[k].owns_prefix;
				return p;
			}
		}
	return NULL;
}

bool alloc_is_entry_point(const char *name)
{
	bool owned;
	const char *p = prefix_of(name, &owned);
	size_t len, i;

	if (p)
		name += strlen(p);
	/* "malloc" but also a demangled "malloc(unsigned long)" */
	len = strcspn(name, "(");
	for (i = 0; i < ARRAY_SIZE(entry_points); i++)
		if (strlen(entry_points[i]) == len &&
		    !strncmp(name, entry_points[i], len))
			return true;
	return false;
}

bool alloc_is_internal(const char *name)
{
	bool owned = false;

	return prefix_of(name, &owned) && owned;
}

const struct alloc_func *allocator_func(const struct allocator *a,
					const char *role)
{
	size_t i;

	for (i = 0; i < a->nfuncs; i++)
		if (!strcmp(a->funcs[i].role, role))
			return &a->funcs[i];
	return NULL;
}

/* @prefix + @name looked up in @obj, any table. */
static bool lookup_prefixed(struct objects *os, struct object *obj,
			    const char *prefix, const char *name,
			    struct symbol *out)
{
	char full[ALLOC_MAX_PREFIX + 64];

	if ((size_t)snprintf(full, sizeof(full), "%s%s", prefix, name) >=
	    sizeof(full))
		return false;
	return object_lookup(os, obj, full, 0, out) == 0;
}

static int add_allocator(struct detection *d, size_t *cap,
			 struct objects *os, struct object *obj,
			 enum alloc_kind kind, const char *prefix)
{
	const struct kind_desc *k = &kinds[kind];
	struct allocator *a;
	struct symbol s;
	size_t i;
	int rc;

	rc = array_grow((void **)&d->v, cap, d->n + 1, sizeof(*d->v));
	if (rc)
		return rc;
	a = &d->v[d->n++];
	memset(a, 0, sizeof(*a));
	a->kind = kind;
	a->obj = obj;
	snprintf(a->prefix, sizeof(a->prefix), "%s", prefix);
	for (i = 0; i < ALLOC_MAX_FUNCS && k->funcs[i]; i++) {
		struct alloc_func *f = &a->funcs[a->nfuncs++];

		f->role = k->funcs[i];
		if (lookup_prefixed(os, obj, prefix, f->role, &s)) {
			f->found = true;
			f->addr = s.addr;
			f->source = s.source;
		}
	}
	if (lookup_prefixed(os, obj, prefix, k->malloc_fn, &s))
		a->malloc_addr = s.addr;
	/* Redis's own jemalloc: what its active defragmentation asks */
	a->defrag_hint = kind == ALLOC_JEMALLOC &&
			 lookup_prefixed(os, obj, prefix, "get_defrag_hint",
					 &s);
	return 0;
}

/* ---- jemalloc: any prefix --------------------------------------------- */

struct prefix_scan {
	struct objects *os;
	struct object *obj;
	struct detection *d;
	size_t *cap;
	size_t first; /* this object's first allocator in d->v */
	int err;
};

static int on_mallctl(void *arg, const char *name)
{
	struct prefix_scan *ps = arg;
	size_t plen = strlen(name) - strlen("mallctl");
	char prefix[ALLOC_MAX_PREFIX];
	struct symbol s;
	size_t i;

	if (plen >= sizeof(prefix))
		return 0;
	memcpy(prefix, name, plen);
	prefix[plen] = '\0';
	for (i = ps->first; i < ps->d->n; i++)
		if (!strcmp(ps->d->v[i].prefix, prefix))
			return 0; /* seen in another table */
	/* mallctl alone is not jemalloc (Redis has mallctl_int and
	 * friends; anyone may have a foo_mallctl): require the siblings. */
	for (i = 0; i < ARRAY_SIZE(kinds[ALLOC_JEMALLOC].probe); i++)
		if (!lookup_prefixed(ps->os, ps->obj, prefix,
				     kinds[ALLOC_JEMALLOC].probe[i], &s))
			return 0;
	ps->err = add_allocator(ps->d, ps->cap, ps->os, ps->obj,
				ALLOC_JEMALLOC, prefix);
	return ps->err;
}

static int detect_in_object(struct detection *d, size_t *cap,
			    struct objects *os, struct object *obj)
{
	struct prefix_scan ps = {
		.os = os, .obj = obj, .d = d, .cap = cap, .first = d->n,
	};
	static const enum alloc_kind probed[] = {
		ALLOC_GLIBC, ALLOC_TCMALLOC, ALLOC_MIMALLOC,
	};
	enum alloc_kind kind;
	struct symbol s;
	size_t i;
	int rc;

	rc = elfobj_each_suffix(obj->elf, "mallctl", on_mallctl, &ps);
	if (rc)
		return ps.err ? ps.err : rc;

	for (i = 0; i < ARRAY_SIZE(probed); i++) {
		const struct kind_desc *k = &kinds[probed[i]];
		bool all = true;
		size_t j;

		for (j = 0; j < ARRAY_SIZE(k->probe) && all; j++)
			all = lookup_prefixed(os, obj, "", k->probe[j], &s);
		if (!all)
			continue;
		kind = probed[i];
		/* Only the full library has the heap profiler. */
		if (kind == ALLOC_TCMALLOC &&
		    !lookup_prefixed(os, obj, "", "HeapProfilerStart", &s))
			kind = ALLOC_TCMALLOC_MINIMAL;
		rc = add_allocator(d, cap, os, obj, kind, "");
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * The definition of malloc the dynamic linker binds to: the first object
 * in search order that exports one.  In a static executable, its own.
 */
static void find_malloc(struct objects *os, struct detection *d)
{
	size_t i;

	for (i = 0; i < d->order.nsearched; i++) {
		struct object *obj = d->order.v[i];
		unsigned int flags = d->order.from_link_map ?
					     ELFSYM_DYNAMIC_ONLY : 0;

		if (!object_lookup(os, obj, "malloc", flags, &d->malloc_sym)) {
			struct symbol m;

			d->have_malloc = true;
			/* musl's libc: its loader stage (__dls3) when
			 * dynamic, its start-up (__init_libc) when static. */
			d->malloc_musl =
				!object_lookup(os, obj, "__dls3", 0, &m) ||
				!object_lookup(os, obj, "__init_libc", 0, &m);
			return;
		}
		/* An object ld.so searches that we cannot read (replaced on
		 * disk, say) may well define malloc: then the answer is
		 * "unknown", not the next object's malloc. */
		if (!obj->elf && d->order.from_link_map) {
			d->malloc_unknown = obj;
			return;
		}
	}
}

/* Who serves malloc: the allocator whose own entry point it is (malloc is
 * an alias of je_malloc, __libc_malloc, tc_malloc, mi_malloc), else the
 * unprefixed allocator in the same object. */
static void mark_serving(struct detection *d)
{
	struct allocator *same_obj = NULL;
	size_t i;

	if (!d->have_malloc)
		return;
	for (i = 0; i < d->n; i++) {
		struct allocator *a = &d->v[i];

		if (a->malloc_addr && a->malloc_addr == d->malloc_sym.addr) {
			a->serves_malloc = true;
			return;
		}
		if (a->obj == d->malloc_sym.obj && !a->prefix[0] && !same_obj)
			same_obj = a;
	}
	if (same_obj)
		same_obj->serves_malloc = true;
}

int detect_allocators(struct objects *os, struct detection *out)
{
	struct detection d = { 0 };
	size_t cap = 0, i;
	int rc;

	rc = search_order_load(os, &d.order);
	if (rc)
		return rc;
	/* In search order, so the list reads like the process sees it. */
	for (i = 0; i < d.order.n; i++) {
		struct object *obj = d.order.v[i];

		if (!obj->exec)
			continue;
		rc = object_open(os, obj);
		if (err_is_starved(rc)) {
			detection_free(&d);
			return rc;
		}
		if (rc) {
			d.unreadable++;
			continue;
		}
		rc = detect_in_object(&d, &cap, os, obj);
		if (rc) {
			detection_free(&d);
			return rc;
		}
	}
	find_malloc(os, &d);
	mark_serving(&d);
	*out = d;
	return 0;
}

const struct allocator *detection_serving(const struct detection *d)
{
	size_t i;

	for (i = 0; i < d->n; i++)
		if (d->v[i].serves_malloc)
			return &d->v[i];
	return NULL;
}

void detection_free(struct detection *d)
{
	free(d->v);
	search_order_free(&d->order);
	memset(d, 0, sizeof(*d));
}
