#ifndef MEMSNAP_SYMBOLS_OPENER_H
#define MEMSNAP_SYMBOLS_OPENER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/*
 * How the symbolizer (symbols/symbolizer.h) gets at the files a dump
 * names: every object of its maps, every debuginfo candidate, is opened
 * through one of these, never by a path of its own.
 *
 * In memsnap's process (opener_local_new()) that is today's rule: a
 * regular file beneath the root, no driver's open on the way
 * (open_regular_in_root()), a copy where libdw's mapping could be cut
 * (fd_steady()), debuginfod by build-id.  In `report`'s sandbox
 * (cli/report_child.c) each call is a request to memsnap, which opens
 * by the same rules and passes the descriptor back: the parser that
 * asks has no file system of its own.
 */
struct opener {
	/*
	 * @path beneath the root, a regular file only (@how: 0 or
	 * FSIO_NO_SYMLINKS, as open_regular_in_root()), read-only, its
	 * stat in *@st.  An fd, or -errno (-ENOEXEC: not a regular file).
	 */
	int (*open)(struct opener *op, const char *path, unsigned int how,
		    struct stat *st);
	/* fd_steady(@fd, @max): @fd is taken; the new fd or -errno. */
	int (*steady)(struct opener *op, int fd, uint64_t max);
	/*
	 * The debug file of build-id @id (@len bytes, 1 to 64) from
	 * debuginfod, when the environment asks for it (DEBUGINFOD_URLS):
	 * an fd, or -errno (-ENOENT: not asked, or not found).
	 */
	int (*debuginfod)(struct opener *op, const unsigned char *id,
			  size_t len);
	void *arg;	/* the implementation's */
};

/* A build-id is at most this long (libdwfl's bound). */
#define OPENER_ID_MAX 64

/*
 * The opener of memsnap's own process, for files beneath @root ("/"
 * when NULL).  A root that cannot be opened has no files (-ENOENT from
 * every open).  0, or -ENOMEM.
 */
int opener_local_new(const char *root, struct opener **out);

void opener_local_free(struct opener *op);

#endif
