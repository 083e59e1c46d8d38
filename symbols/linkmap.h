#ifndef MEMSNAP_SYMBOLS_LINKMAP_H
#define MEMSNAP_SYMBOLS_LINKMAP_H

#include "symbols/objects.h"

#include <stdbool.h>
#include <stddef.h>

/*
 * The order in which the dynamic linker searches objects for a symbol:
 * the executable, LD_PRELOAD objects, DT_NEEDED libraries breadth-first,
 * then dlopen()ed ones.  That is the order of the target's link map
 * (r_debug.r_map, found through DT_DEBUG in the executable's dynamic
 * section), read with process_vm_readv: the target is not stopped.  The
 * link map can be changing as we read it (dlopen in another thread); the
 * walk is bounded and every pointer is checked against the maps.
 */
struct search_order {
	struct object **v;	/* every object: the searched ones first */
	size_t n;
	size_t nsearched;	/* v[0 .. nsearched) are what ld.so searches */
	struct object *exe;	/* NULL if not found */
	bool from_link_map;	/* false: a static executable, or no r_debug
				   yet; then exe first, then address order */
};

/* 0, -ENOMEM, or -errno reading /proc/PID/auxv. */
int search_order_load(struct objects *os, struct search_order *out);

void search_order_free(struct search_order *so);

#endif
