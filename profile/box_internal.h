#ifndef MEMSNAP_PROFILE_BOX_INTERNAL_H
#define MEMSNAP_PROFILE_BOX_INTERNAL_H

#include "profile/box.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/*
 * Between the parts of a report's sandbox (profile/box.h): the parent
 * (box.c), the files it hands over (box_files.c), the child's side of
 * the wire (box_child.c) and the child's work (work.c).
 */

/* The child's exit statuses after its ERROR line: the failure's kind. */
#define BOX_FAILED 1
#define BOX_BAD_INPUT 10

/*
 * The files memsnap hands the child (box_files.c): beneath @root, and
 * from debuginfod when @debuginfod.  0 or -ENOMEM.
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

/* The child's whole work (work.c): read, symbolize, build, export, for
 * one report or each input.  Its exit status: 0, BOX_FAILED or
 * BOX_BAD_INPUT, each but the first after report_child_error(). */
int report_work(struct report_child *c, const struct report_args *a);

/* The sandbox's serve(): report_work() on the socket @fd. */
int report_child_serve(int fd, void *arg);

/* Input @k, opened by the caller: an fd.  If there is none, memsnap
 * ends the child. */
int report_child_input(struct report_child *c, size_t k);

/* The opener (symbols/opener.h) that asks memsnap for every file. */
struct opener *report_child_opener(struct report_child *c);

/* "symbolizing the frames of N mapped objects" on memsnap's progress
 * line. */
void report_child_progress(struct report_child *c, size_t objects);

void report_child_warning(struct report_child *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The one error line; @code (BOX_FAILED or BOX_BAD_INPUT), the exit
 * status that follows it. */
int report_child_error(struct report_child *c, int code, const char *fmt,
		       ...) __attribute__((format(printf, 3, 4)));

/* Input @k of a run of each input is left out (its warning said why). */
void report_child_skip(struct report_child *c, size_t k);

/* Where report @k goes (memsnap opens -o, or begins it at the sink),
 * and its end: @rc is the exporter's; the exit status. */
FILE *report_child_output(struct report_child *c, size_t k);
int report_child_output_end(struct report_child *c, FILE *f, int rc);

#endif
