/*
 * GOT slots (symbols/elfrel.c, object_each_got_slot()): the file's
 * JUMP_SLOT and GLOB_DAT relocations, compared with readelf's, and on a
 * live glibc process what each malloc slot holds and where RELRO is.
 */
#include "proc/maps.h"
#include "proc/procfs.h"
#include "symbols/elf.h"
#include "symbols/objects.h"
#include "tests/lib/fixture.h"

#include <criterion/criterion.h>

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIBC LIBDIR "libc.so.6"
#define MAX_SLOTS 8192

struct slot {
	char name[256];
	uint64_t addr;
	bool plt;
};

struct slots {
	struct slot v[MAX_SLOTS];
	size_t n;
};

static struct slots got, ref;

static int collect(void *arg, const char *name, uint64_t addr, bool plt)
{
	struct slots *s = arg;

	cr_assert_lt(s->n, MAX_SLOTS);
	snprintf(s->v[s->n].name, sizeof(s->v[s->n].name), "%s", name);
	s->v[s->n].addr = addr;
	s->v[s->n].plt = plt;
	s->n++;
	return 0;
}

static int cmp_slot(const void *a, const void *b)
{
	const struct slot *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* readelf -rW's JUMP_SLOT and GLOB_DAT lines: offset, type, name. */
static void readelf_slots(const char *path, struct slots *s)
{
	char cmd[PATH_MAX + 64], line[512];
	FILE *p;

	snprintf(cmd, sizeof(cmd), "readelf -rW '%s'", path);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	s->n = 0;
	while (fgets(line, sizeof(line), p)) {
		char type[64], name[240];
		unsigned long long off, info, value;

		if (sscanf(line, "%llx %llx %63s %llx %239s", &off, &info, type,
			   &value, name) != 5 ||
		    (!strstr(type, "JUMP_SLOT") && !strstr(type, "GLOB_DAT")))
			continue;
		*strchrnul(name, '@') = '\0';
		cr_assert_lt(s->n, MAX_SLOTS);
		snprintf(s->v[s->n].name, sizeof(s->v[s->n].name), "%s", name);
		s->v[s->n].addr = off;
		s->v[s->n].plt = strstr(type, "JUMP_SLOT") != NULL;
		s->n++;
	}
	pclose(p);
}

/* Every slot readelf shows in libc, with its name and kind; no other. */
Test(got, libc_slots_match_readelf)
{
	struct elfobj *o = NULL;
	size_t i, mallocs = 0;

	cr_assert_eq(elfobj_open_path(LIBC, &o), 0);
	got.n = 0;
	cr_assert_eq(elfobj_each_got_slot(o, collect, &got), 0);
	elfobj_close(o);
	readelf_slots(LIBC, &ref);
	cr_assert_gt(ref.n, 10, "readelf shows %zu slots", ref.n);
	cr_assert_eq(got.n, ref.n, "%zu slots, readelf shows %zu", got.n,
		     ref.n);
	qsort(got.v, got.n, sizeof(got.v[0]), cmp_slot);
	qsort(ref.v, ref.n, sizeof(ref.v[0]), cmp_slot);
	for (i = 0; i < got.n; i++) {
		cr_assert_eq(got.v[i].addr, ref.v[i].addr);
		cr_assert_str_eq(got.v[i].name, ref.v[i].name);
		cr_assert_eq(got.v[i].plt, ref.v[i].plt, "%s", got.v[i].name);
		mallocs += !strcmp(got.v[i].name, "malloc");
	}
	/* glibc calls its own malloc through its GOT */
	cr_assert_geq(mallocs, 1);
}

static struct fixture fx = { .pid = -1 };

static void stop(void)
{
	fixture_stop(&fx);
}

struct live {
	struct maps *m;
	size_t checked_relro;
	struct objects *os;
	struct object *obj;
	pid_t pid;
	uint64_t malloc_addr;
	size_t found, bound;
	uint64_t libc_slot;
};

/* object_relro() holds @slot exactly when the maps show its page
 * read-only (the loader's mprotect after relocating). */
static void check_relro(struct live *l, uint64_t slot)
{
	const struct map_entry *e = NULL;
	uint64_t lo, hi;
	bool in;
	size_t i;

	for (i = 0; i < l->m->n; i++)
		if (slot >= l->m->v[i].start && slot < l->m->v[i].end)
			e = &l->m->v[i];
	cr_assert_not_null(e, "no mapping holds 0x%" PRIx64, slot);
	in = !object_relro(l->os, l->obj, &lo, &hi) && slot >= lo &&
	     slot < hi;
	cr_assert_eq(in, !(e->prot & MAP_PROT_WRITE),
		     "%s: slot 0x%" PRIx64 " %s RELRO, its page is %s",
		     l->obj->path, slot, in ? "in" : "outside",
		     e->prot & MAP_PROT_WRITE ? "writable" : "read-only");
	l->checked_relro++;
}

static int check_malloc_slot(void *arg, const char *name, uint64_t slot,
			     bool plt)
{
	struct live *l = arg;
	uint64_t v;

	if (strcmp(name, "malloc"))
		return 0;
	cr_assert_eq(proc_read_mem(l->pid, slot, &v, sizeof(v)), 0);
	l->found++;
	/* bound to glibc's malloc, or (lazy binding) still at the PLT */
	if (v == l->malloc_addr)
		l->bound++;
	else
		cr_assert(plt && v >= l->obj->lo && v < l->obj->hi,
			  "%s's malloc slot 0x%" PRIx64 " holds 0x%" PRIx64,
			  l->obj->path, slot, v);
	if (strstr(l->obj->path, "/libc.so.6"))
		l->libc_slot = slot;
	check_relro(l, slot);
	return 0;
}

/* In a live process each malloc slot holds glibc's malloc (or its PLT
 * stub), and lies in RELRO exactly when its page is read-only. */
Test(got, live_malloc_slots, .fini = stop, .timeout = 60)
{
	char path[PATH_MAX];
	char *argv[] = { path, NULL };
	struct object_source src = { 0 };
	struct live l = { 0 };
	struct object *libc = NULL;
	struct symbol sym;
	struct maps *m;
	uint64_t lo, hi;
	size_t i;

	fixture_path("alloc-glibc", path, sizeof(path));
	cr_assert_eq(fixture_start(&fx, argv, NULL, 10000), 0);
	src.pid = fx.pid;
	l.pid = fx.pid;
	cr_assert_eq(maps_load(fx.pid, &m), 0);
	l.m = m;
	cr_assert_eq(objects_new(m, &src, &l.os), 0);
	for (i = 0; i < l.os->n; i++)
		if (strstr(l.os->v[i].path, "/libc.so.6"))
			libc = &l.os->v[i];
	cr_assert_not_null(libc);
	cr_assert_eq(object_lookup(l.os, libc, "malloc", ELFSYM_DYNAMIC_ONLY,
				   &sym), 0);
	l.malloc_addr = sym.addr;
	for (i = 0; i < l.os->n; i++) {
		l.obj = &l.os->v[i];
		if (object_each_got_slot(l.os, l.obj, check_malloc_slot, &l))
			continue;	/* not an ELF file (a font, a cache) */
	}
	cr_assert_geq(l.found, 2, "malloc slots: %zu", l.found);
	cr_assert_geq(l.bound, 1);
	cr_assert_neq(l.libc_slot, 0, "no malloc slot in libc");
	cr_assert_eq(l.checked_relro, l.found);
	/* libc is linked with -z relro: it has some */
	cr_assert_eq(object_relro(l.os, libc, &lo, &hi), 0);
	cr_assert_lt(lo, hi);
	objects_free(l.os);
	maps_free(m);
	fixture_assert_healthy(&fx);
}
