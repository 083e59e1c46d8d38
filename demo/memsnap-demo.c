/*
 * memsnap-demo: a small "server" on jemalloc that leaks, for trying
 * memsnap.  Run it with profiling compiled in and sampling on:
 *
 *   MALLOC_CONF=prof:true,lg_prof_sample:12 build/demo/memsnap-demo [WARM]
 *
 * It serves WARM requests at once (default 2000; 24000 leave about
 * 17 MiB of sessions, enough for explain's findings), prints "ready
 * PID" on stdout once its threads are up, then serves
 * fake requests until SIGINT or SIGTERM.  Each request allocates scratch
 * memory it frees; one request in eight also opens a "session" that is
 * never closed: the leak to find, always through
 * handle_request -> session_open -> session_buffer -> malloc.
 * Idle workers wait on a condition variable, in nanosleep and in read(),
 * the kinds of thread memsnap prefers to borrow.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int idle_pipe[2];

struct session {
	struct session *next;
	char *buf;
	size_t len;
};

static struct session *sessions;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

__attribute__((noinline)) static char *session_buffer(size_t len)
{
	char *p = malloc(len);

	if (p)
		memset(p, 0x5a, len);
	return p;
}

__attribute__((noinline)) static void session_open(unsigned int id)
{
	struct session *s = malloc(sizeof(*s));

	if (!s)
		return;
	s->len = 4096 + (id % 4) * 1024;
	s->buf = session_buffer(s->len);
	s->next = sessions;
	sessions = s; /* never closed: the leak */
}

__attribute__((noinline)) static void handle_request(unsigned int id)
{
	size_t n = 256 + (id % 16) * 64;
	char *scratch = malloc(n);

	if (scratch) {
		memset(scratch, (int)id, n);
		free(scratch);
	}
	if (id % 8 == 0)
		session_open(id);
}

static void *cond_waiter(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	while (!stop)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void *sleeper(void *arg)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 200 * 1000 * 1000 };

	(void)arg;
	while (!stop)
		nanosleep(&ts, NULL);
	return NULL;
}

static void *reader(void *arg)
{
	char c;

	(void)arg;
	while (!stop && read(idle_pipe[0], &c, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct timespec tick = { .tv_sec = 0, .tv_nsec = 2 * 1000 * 1000 };
	void *(*const workers[])(void *) = { cond_waiter, cond_waiter,
					     sleeper, reader };
	pthread_t tid[4];
	unsigned int id, warm = 2000;
	size_t i;

	if (argc > 1)
		warm = (unsigned int)strtoul(argv[1], NULL, 10);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (pipe(idle_pipe))
		return 1;
	for (i = 0; i < 4; i++)
		if (pthread_create(&tid[i], NULL, workers[i], NULL))
			return 1;
	/* Warm up so that the first dump already shows the leak. */
	for (id = 0; id < warm; id++)
		handle_request(id);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);

	while (!stop) {
		handle_request(id++);
		nanosleep(&tick, NULL);
	}

	pthread_mutex_lock(&lock);
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	if (write(idle_pipe[1], "x", 1) < 0)
		return 1;
	for (i = 0; i < 4; i++)
		pthread_join(tid[i], NULL);
	return 0;
}
