#ifndef MEMSNAP_TESTS_LIB_SCRATCH_H
#define MEMSNAP_TESTS_LIB_SCRATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * A test's private directory, and its removal whole.  Neither function
 * fails the test: a .init asserts on scratch_make()'s result, a .fini
 * calls scratch_cleanup().
 */

/*
 * Make a new directory, mode 0700, named @prefix, a dot and six random
 * characters: "memsnap-test-dump" is /tmp/memsnap-test-dump.Kx3f9Q,
 * under $TMPDIR (/tmp when that is unset or empty).  A @prefix that is
 * an absolute path is taken as it is ("/tmp/memsnap-pub"): for a test
 * whose directory other users must reach, which $TMPDIR may not let
 * them.  Its path in @dir, @size bytes.  0 or -errno (-ENAMETOOLONG
 * when @size is too small); @dir is "" on failure.
 */
int scratch_make(const char *prefix, char *dir, size_t size);

/*
 * Remove @path and everything beneath it, as `rm -rf` would, without a
 * shell and without following a symlink: nothing but a directory is
 * ever opened (O_NOFOLLOW), so a symlink, FIFO, socket or device that a
 * target left in the tree is only unlinked.  0 once nothing is left (a
 * missing @path too), else the first -errno met; what can be removed
 * is removed either way.
 */
int scratch_remove(const char *path);

/*
 * For a .fini, safe to call twice: scratch_remove(@dir) if @dir is not
 * "", one line on stderr if some of it is left behind, then @dir is "".
 */
void scratch_cleanup(char *dir);

/*
 * @text as the whole of the file @path, made if need be, with mode
 * @mode whatever the umask; the test fails if it cannot be written.
 */
void write_file(const char *path, const char *text, mode_t mode);

/* @text written to the file @path that is there already (a cgroup's
 * control file): false if it cannot be. */
bool write_existing(const char *path, const char *text);

/* The tick lines a watch has written whole to @dir/series.tsv so far
 * (0 when there is none yet). */
int series_ticks(const char *dir);

#endif
