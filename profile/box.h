#ifndef MEMSNAP_PROFILE_BOX_H
#define MEMSNAP_PROFILE_BOX_H

#include "common/diag.h"
#include "common/voice.h"
#include "profile/report.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Reports of heap dumps, made in two processes (privilege separation,
 * as OpenSSH does it).  A dump and the ELF and DWARF files it names
 * are the target's bytes; libdw, libdwfl, the demangler and memsnap's
 * own parser and exporters read them.  All of that runs in a child
 * with no rights (common/sandbox.h): box_child.c and work.c.  memsnap,
 * the parent (box.c), does what needs rights and touches the file
 * system, by its own rules: the caller opens the dumps and hands their
 * descriptors in (a report never opens a dump by a path the child
 * names); the parent opens the files beneath --root the child asks
 * for, and debuginfod's (box_files.c), and -o; it writes the child's
 * report to -o within --max-size, or hands it to a sink, and passes
 * the child's lines on through the voice.  A parser that crashes costs
 * the report, not root's process.
 */

enum report_fmt {
	F_TEXT, F_FOLDED, F_JSON, F_SVG, F_PPROF, F_JEPROF, F_HTML
};

/* One dump to read: a descriptor the caller opened (profile_open(),
 * outdir_open_file()), and its name for messages. */
struct report_input {
	int fd;
	const char *name;
};

/*
 * Where the reports go when not to -o: report @k of the inputs begins,
 * its bytes, its end.  @end's @rc is 0 for a whole report, else -errno
 * (the dump was left out: the voice said why).  A member returning
 * -errno ends the run (DIAG_FAILED).
 */
struct report_sink {
	int (*begin)(void *arg, size_t k);
	int (*data)(void *arg, const void *bytes, size_t len);
	int (*end)(void *arg, size_t k, int rc);
	void *arg;
};

struct report_args {
	const struct report_input *in;	/* the dumps */
	size_t n;
	/*
	 * false: one report, of in[0], minus in[1] when n is 2 (--base),
	 * to -o (@out; NULL or "-": standard output).  true: a report of
	 * each input on its own, to @sink, in order; a dump that cannot
	 * be read is left out with a warning, not the end of the run.
	 */
	bool each;
	const struct report_sink *sink;
	const char *out;
	int out_dir;		/* >= 0: @out is a name in it, replaced whole
				   (output_open_at()); else -1 */
	const char *root;	/* --root, or NULL ("/") */
	enum report_fmt fmt;
	struct report_opts ro;
	bool debuginfod;
	bool alloc;		/* --alloc: allocated since, not in use */
	uint64_t max_size;	/* --max-size: each dump, and each report */
};

/*
 * Make the report(s) of @a in the child, serve it, write what it
 * makes.  0, or -1 with the failure's kind in *@kind after its error
 * line through @v: DIAG_BAD_INPUT for a dump that cannot be read (or
 * that the parser crashed on), DIAG_FAILED otherwise.
 */
int report_run(const struct report_args *a, const struct voice *v,
	       enum diag_kind *kind);

/*
 * The line for a dump @name that profile_open() or profile_read()
 * refused with @rc (@why: the parser's reason, or ""), into @buf; the
 * failure's kind: DIAG_BAD_INPUT, or DIAG_FAILED for -ENOMEM.
 */
enum diag_kind report_load_error(const char *name, int rc, const char *why,
				 uint64_t max, char *buf, size_t size);

#endif
