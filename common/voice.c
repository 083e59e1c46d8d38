/*
 * A model's voice (common/voice.h): one formatted line handed on.
 */
#include "common/voice.h"

#include <stdio.h>

#define VOICE_LINE_MAX 4096

static void say(void (*fn)(void *, const char *), void *arg,
		const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

static void say(void (*fn)(void *, const char *), void *arg,
		const char *fmt, va_list ap)
{
	char line[VOICE_LINE_MAX];

	if (!fn)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	fn(arg, line);
}

void voice_warning(const struct voice *v, const char *fmt, ...)
{
	va_list ap;

	if (!v)
		return;
	va_start(ap, fmt);
	say(v->warning, v->arg, fmt, ap);
	va_end(ap);
}

void voice_error(const struct voice *v, const char *fmt, ...)
{
	va_list ap;

	if (!v)
		return;
	va_start(ap, fmt);
	say(v->error, v->arg, fmt, ap);
	va_end(ap);
}

void voice_progress(const struct voice *v, const char *fmt, ...)
{
	va_list ap;

	if (!v)
		return;
	va_start(ap, fmt);
	say(v->progress, v->arg, fmt, ap);
	va_end(ap);
}

void voice_progress_done(const struct voice *v)
{
	if (v && v->progress)
		v->progress(v->arg, NULL);
}
