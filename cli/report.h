#ifndef MEMSNAP_CLI_REPORT_H
#define MEMSNAP_CLI_REPORT_H

#include "cli/cli.h"
#include "profile/report.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/*
 * memsnap report, in two processes (privilege separation, as OpenSSH
 * does it).  A dump and the ELF and DWARF files it names are the
 * target's bytes; libdw, libdwfl, the demangler and memsnap's own
 * parser and exporters read them.  All of that runs in a child with no
 * rights (common/sandbox.h): cli/report_child.c.  memsnap, the parent
 * (cli/report_box.c), does what needs rights and touches the file
 * system, by its own rules: it opens the dumps, the files beneath
 * --root the child asks for (cli/report_wire.h) and debuginfod's
 * (cli/report_files.c), and -o; it writes the child's report to -o
 * within --max-size, and prints the child's lines through
 * fputs_clean().  A parser that crashes costs the report, not root's
 * process.
 */

enum report_fmt {
	F_TEXT, F_FOLDED, F_JSON, F_SVG, F_PPROF, F_JEPROF, F_HTML
};

struct report_args {
	const char *dump;
	const char *base;	/* --base, or NULL */
	const char *root;	/* --root, or NULL ("/") */
	const char *out;	/* -o, or NULL: stdout ("-" too) */
	enum report_fmt fmt;
	struct report_opts ro;
	bool debuginfod;
	bool quiet;
	bool alloc;		/* --alloc: allocated since, not in use */
	uint64_t max_size;	/* --max-size: each dump, and the report */
};

/* Which input the child asks for. */
enum report_input { REPORT_DUMP, REPORT_BASE };

/*
 * The line for a dump at @path that profile_open() or profile_read()
 * refused with @rc (@why: the parser's reason, or ""), into @buf; the
 * exit status: EXIT_BAD_INPUT, or EXIT_FAILURE_OTHER for -ENOMEM.
 */
int report_load_error(const char *path, int rc, const char *why,
		      uint64_t max, char *buf, size_t size);

/* memsnap report DIR: a watch's series (cli/timeline.c).  The exit
 * status. */
int report_timeline(const struct options *opt, const struct report_args *a);

/* The parent: start the child, serve it, write its report.  The exit
 * status. */
int report_boxed(const struct options *opt, const struct report_args *a);

/*
 * The files memsnap hands the child (cli/report_files.c): beneath @root,
 * and from debuginfod when @debuginfod.  0 or -ENOMEM.
 */
struct report_files;

int report_files_new(const char *root, bool debuginfod,
		     struct report_files **out);
void report_files_free(struct report_files *f);

/*
 * The answer to the child's OPEN, STEADY or DEBUGINFOD (@type, its head's
 * @arg, @len bytes after it, the descriptor @given with it or -1, taken):
 * *@val (0 with a descriptor in *@fd for the child, RW_SAME, or -errno)
 * and *@fd (-1: none; the caller sends it, and closes it).  false: the
 * request breaks the rules (its form, a budget, a descriptor memsnap did
 * not hand over), the child speaks out of turn.
 */
bool report_files_answer(struct report_files *f, uint32_t type, int32_t arg,
			 const void *bytes, size_t len, int given,
			 int32_t *val, int *fd);

/* ---- in the child ---------------------------------------------------- */

struct report_child;

/* The child's whole work (cli/report.c): read, symbolize, build,
 * export.  Its exit status: EXIT_OK, EXIT_FAILURE_OTHER or
 * EXIT_BAD_INPUT, each but the first after report_child_error(). */
int report_work(struct report_child *c, const struct report_args *a);

/* The sandbox's serve(): report_work() on the socket @fd. */
int report_child_serve(int fd, void *arg);

/* The dump or the base, opened by memsnap (profile_open()): an fd.  If
 * memsnap cannot open it, it says why and ends the child. */
int report_child_input(struct report_child *c, enum report_input which);

/* The opener (symbols/opener.h) that asks memsnap for every file. */
struct opener *report_child_opener(struct report_child *c);

/* "symbolizing the frames of N mapped objects" on memsnap's progress
 * line. */
void report_child_progress(struct report_child *c, size_t objects);

void report_child_warning(struct report_child *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The one error line; @code, the exit status that follows it. */
int report_child_error(struct report_child *c, int code, const char *fmt,
		       ...) __attribute__((format(printf, 3, 4)));

/* Where the report goes (memsnap opens -o now), and its end: @rc is the
 * exporter's; the exit status. */
FILE *report_child_output(struct report_child *c);
int report_child_output_end(struct report_child *c, FILE *f, int rc);

#endif
