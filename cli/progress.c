/*
 * The progress line (cli/progress.h): a thread that wakes every 250 ms
 * and, once the current step is a second old, redraws "\r<step> (N s)".
 */
#include "cli/progress.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SHOW_AFTER_MS 1000
#define TICK_MS 250

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static bool enabled, started, shown;
static char step[200];
static struct timespec since;

static long ms_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - t->tv_sec) * 1000 +
	       (now.tv_nsec - t->tv_nsec) / 1000000;
}

/* With the lock held. */
static void erase(void)
{
	if (shown) {
		/* carriage return, erase to the end of the line */
		fputs("\r\033[K", stderr);
		fflush(stderr);
		shown = false;
	}
}

static void *ticker(void *arg)
{
	struct timespec until;

	(void)arg;
	pthread_mutex_lock(&lock);
	for (;;) {
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += TICK_MS * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&wake, &lock, &until);
		if (step[0] && ms_since(&since) >= SHOW_AFTER_MS) {
			fprintf(stderr, "\r\033[Kmemsnap: %s (%ld s)", step,
				ms_since(&since) / 1000);
			fflush(stderr);
			shown = true;
		}
	}
	return NULL;
}

void progress_init(bool quiet)
{
	enabled = !quiet && isatty(STDERR_FILENO);
}

void progress_set(const char *fmt, ...)
{
	pthread_t t;
	va_list ap;

	if (!enabled)
		return;
	pthread_mutex_lock(&lock);
	va_start(ap, fmt);
	vsnprintf(step, sizeof(step), fmt, ap);
	va_end(ap);
	clock_gettime(CLOCK_MONOTONIC, &since);
	if (!started) {
		pthread_attr_t attr;

		/* Detached: memsnap exits without joining it. */
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		started = !pthread_create(&t, &attr, ticker, NULL);
		pthread_attr_destroy(&attr);
	}
	pthread_mutex_unlock(&lock);
}

void progress_clear(void)
{
	if (!enabled)
		return;
	pthread_mutex_lock(&lock);
	step[0] = '\0';
	erase();
	pthread_mutex_unlock(&lock);
}
