#ifndef MEMSNAP_TIMELINE_TIMELINE_INTERNAL_H
#define MEMSNAP_TIMELINE_TIMELINE_INTERNAL_H

#include "timeline/timeline.h"

/* Between model.c, which reads the watch, and sites.c, which makes its
 * call sites. */

/* The dumps to read into tl->dump_tick: every one, or SITE_DUMPS_MAX
 * spread evenly, the first and the last among them. */
void timeline_pick_dumps(struct timeline *tl);

/* Folded lines "root;...;leaf BYTES" (NUL-ended @buf), as dump @k's:
 * each stack's bytes to its site.  Sites are found by name; the number
 * of distinct sites is bounded by SITES_MAX.  0 or -ENOMEM. */
int timeline_add_folded(struct timeline *tl, size_t k, const char *buf);

/* Each site's trend and growth over the dumps read; the sites sorted,
 * most growth first.  0 or -ENOMEM. */
int timeline_fit_sites(struct timeline *tl);

#endif
