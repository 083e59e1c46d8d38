#ifndef MEMSNAP_EXPORTER_TEXTFILE_H
#define MEMSNAP_EXPORTER_TEXTFILE_H

#include <stddef.h>

/*
 * --textfile PATH: the exposition as a file for node_exporter's textfile
 * collector, which reads every *.prom file of one directory at each of
 * its scrapes (Debian: /var/lib/prometheus/node-exporter).  So the file
 * must never be seen half written: each write is a new file in the same
 * directory, ".memsnap-<random>.tmp" (a name the collector skips),
 * created with O_EXCL | O_NOFOLLOW relative to the directory's
 * descriptor, written whole, made 0644 (the collector runs as its own
 * user), then renamed over PATH.
 *
 * The directory is opened once, and refused unless it belongs to the
 * caller (its effective uid) and nobody else can write to it: in a
 * directory another user can write, that user could plant, swap or
 * remove what the collector reads under memsnap's name.  Everything
 * after is done relative to that descriptor.
 */
struct textfile {
	int dir;		/* -1: not open */
	char name[256];		/* PATH's last component: NAME.prom */
};

/*
 * Open PATH's directory under the rules above.  0, or -errno with one
 * line in @why saying what is wrong ("'/tmp' can be written by others
 * (mode 1777)", "'NAME' does not end in .prom: node_exporter reads
 * only *.prom files").
 */
int textfile_open(const char *path, struct textfile *tf, char *why,
		  size_t size);

/* Replace the file by @len bytes of @text, atomically.  0 or -errno
 * (nothing is left behind but the old file). */
int textfile_write(struct textfile *tf, const char *text, size_t len);

void textfile_close(struct textfile *tf);

#endif
