#ifndef MEMSNAP_PROFILE_WRAPPERS_H
#define MEMSNAP_PROFILE_WRAPPERS_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Allocator wrappers: the functions programs allocate through that say
 * nothing of where they allocate (Redis's zmalloc, MariaDB's my_malloc,
 * PostgreSQL's palloc, glib's g_malloc, C++'s operator new, ...).  The
 * report cuts the allocator's own frames (profile/report.h); a call
 * site is then the first frame from the leaf past a run of wrapper
 * frames at the leaf end:
 *
 *   main;processCommand;setCommand;createStringObject;_sdsnewlen;
 *   zmalloc_usable;ztrymalloc_usable_internal 16384
 *
 * is _sdsnewlen's.  Every report's sites are found so (the text's top
 * sites, the JSON's, report DIR's sites, the HTML pages' frames that
 * allocated most); the flame graphs, folded, pprof and jeprof keep whole
 * stacks.  One list, built in (wrappers.c), which the user extends
 * with patterns of their own (report --drop-frames REGEX, as pprof's
 * drop_frames: an extended regular expression that must match the
 * whole function name).
 */

struct wrappers;

/* Names longer than this are no wrapper's (no pattern is run over
 * them). */
#define WRAPPER_NAME_MAX 4096

/*
 * The built-in list and the @n patterns @extra of the user's.  0;
 * -EINVAL for a pattern that does not compile, with the pattern and
 * regcomp()'s reason in @why; or -ENOMEM.  wrappers_free() it.
 */
int wrappers_new(const char *const *extra, size_t n, struct wrappers **out,
		 char *why, size_t why_size);
void wrappers_free(struct wrappers *w);

/*
 * Is the function named by the @len bytes at @name (not NUL-ended) a
 * wrapper?  Each distinct name is matched once and remembered, so a
 * dump's stacks cost a lookup a frame.  @w NULL: no wrappers.  Out of
 * memory for the name, it is matched again the next time.
 */
bool wrappers_match(struct wrappers *w, const char *name, size_t len);

/* The built-in patterns, NULL-ended: for the docs and the tests. */
extern const char *const wrappers_builtin[];

#endif
