#include "symbols/linkmap.h"

#include "proc/procfs.h"

#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* More objects than any real process loads; a loop ends here. */
#define LINK_MAP_MAX 8192
#define DYNAMIC_MAX 4096

/* r_debug from DT_DEBUG in the executable's dynamic section; 0 if none. */
static uint64_t find_r_debug(struct objects *os, struct object *exe)
{
	uint64_t vaddr, size, addr, n, i;
	Elf64_Dyn d;

	if (object_open(os, exe) || elfobj_dynamic(exe->elf, &vaddr, &size))
		return 0;
	addr = exe->bias + vaddr;
	n = size / sizeof(d);
	for (i = 0; i < n && i < DYNAMIC_MAX; i++) {
		if (proc_read_mem(os->src.pid, addr + i * sizeof(d), &d,
				  sizeof(d)))
			return 0;
		if (d.d_tag == DT_NULL)
			break;
		if (d.d_tag == DT_DEBUG)
			return d.d_un.d_ptr;
	}
	return 0;
}

static bool listed(const struct search_order *so, const struct object *o)
{
	size_t i;

	for (i = 0; i < so->n; i++)
		if (so->v[i] == o)
			return true;
	return false;
}

static void append(struct search_order *so, struct object *o)
{
	if (o && !listed(so, o))
		so->v[so->n++] = o;
}

/* struct link_map's public head: l_addr, l_name, l_ld, l_next, l_prev. */
struct link_map64 {
	uint64_t l_addr, l_name, l_ld, l_next, l_prev;
};

static void walk_link_map(struct objects *os, struct search_order *so,
			  uint64_t r_debug)
{
	uint64_t lm;
	int steps;

	/* struct r_debug { int r_version; struct link_map *r_map; ... } */
	if (proc_read_mem(os->src.pid, r_debug + 8, &lm, sizeof(lm)))
		return;
	for (steps = 0; lm && steps < LINK_MAP_MAX; steps++) {
		struct link_map64 l;

		if (proc_read_mem(os->src.pid, lm, &l, sizeof(l)))
			break;
		/* l_ld lies in the object's own data mapping; [vdso] and
		 * anything that is not a file mapping finds no object. */
		append(so, objects_find(os, l.l_ld));
		lm = l.l_next;
	}
	so->from_link_map = so->n > 0;
}

int search_order_load(struct objects *os, struct search_order *out)
{
	struct search_order so = { 0 };
	uint64_t phdr, r_debug = 0;
	size_t i;
	int rc;

	so.v = calloc(os->n ? os->n : 1, sizeof(*so.v));
	if (!so.v)
		return -ENOMEM;
	/* No aux vector entry is fine (fall back below); no access is not. */
	{
		const struct proc_auxv *av;

		/* the executable's program headers at runtime */
		rc = objects_auxv(os, &av);
		phdr = av->phdr;
		if (!rc && !phdr)
			rc = -ENOENT;
	}
	if (rc && rc != -ENOENT) {
		free(so.v);
		return rc;
	}
	if (!rc)
		so.exe = objects_find(os, phdr);
	if (so.exe)
		r_debug = find_r_debug(os, so.exe);
	if (r_debug)
		walk_link_map(os, &so, r_debug);
	if (!so.from_link_map) {
		so.n = 0;
		append(&so, so.exe);
	}
	so.nsearched = so.n;
	/* Then everything else, so that lookups can fall back on it. */
	for (i = 0; i < os->n; i++)
		append(&so, &os->v[i]);
	*out = so;
	return 0;
}

void search_order_free(struct search_order *so)
{
	free(so->v);
	memset(so, 0, sizeof(*so));
}
