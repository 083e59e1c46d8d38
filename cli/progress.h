#ifndef MEMSNAP_CLI_PROGRESS_H
#define MEMSNAP_CLI_PROGRESS_H

#include <stdbool.h>

/*
 * One progress line on stderr for work that takes more than a second
 * (waiting for a thread that is safe to borrow, a long call, reading a
 * large dump, symbolizing many objects):
 *
 *   memsnap: waiting for a thread of pid 4242 that is safe to borrow (3 s)
 *
 * Shown only when stderr is a terminal and not --quiet; redrawn in place
 * by a helper thread, so the work itself is never interrupted (no
 * signals).  progress_set() names the current step; progress_clear()
 * wipes the line before anything else is printed, and at the end.
 */
void progress_init(bool quiet);
void progress_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void progress_clear(void);

#endif
