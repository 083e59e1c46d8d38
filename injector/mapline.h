#ifndef MEMSNAP_INJECTOR_MAPLINE_H
#define MEMSNAP_INJECTOR_MAPLINE_H

#include <stdbool.h>
#include <stdint.h>

/*
 * One line of /proc/PID/maps, the few things the engine and the
 * unwinder need (inj_maplines() makes them from a struct maps).
 * Plain data: it crosses into the unwinder's sandbox as it is.
 */
struct mapline {
	uint64_t start, end, offset, inode;
	uint32_t dev_major, dev_minor;
	char perms[5];		/* "r-xp" */
	bool has_path;
};

#endif
