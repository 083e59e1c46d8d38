#ifndef MEMSNAP_COMMON_VOICE_H
#define MEMSNAP_COMMON_VOICE_H

#include <stdarg.h>

/*
 * How a model below cli/ speaks while it works (a report's parser, a
 * timeline reading its dumps): its warnings, the error line a failure
 * comes with, and what it is doing now.  cli/ gives the voice
 * (cli_voice(), cli/message.c) and alone decides how a line is shown
 * (the target's text cleaned, --quiet) and which exit status a failure
 * gets: the model returns the failure's kind (common/diag.h).  A NULL
 * voice, or a NULL member, says nothing.
 */
struct voice {
	void (*warning)(void *arg, const char *line);
	void (*error)(void *arg, const char *line);
	/* what is being done, for a progress line; NULL @line: done */
	void (*progress)(void *arg, const char *line);
	void *arg;
};

void voice_warning(const struct voice *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void voice_error(const struct voice *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void voice_progress(const struct voice *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void voice_progress_done(const struct voice *v);

#endif
