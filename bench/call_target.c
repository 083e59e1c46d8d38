/*
 * Target for bench/call-vs-gdb.sh: N threads asleep in nanosleep (like
 * a server's idle workers) and a main thread in pause().  Prints its pid
 * once all threads exist.
 *
 *   call_target NTHREADS
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void *idle(void *arg)
{
	struct timespec ts = { 3600, 0 };

	(void)arg;
	for (;;)
		nanosleep(&ts, NULL);
	return NULL;
}

int main(int argc, char **argv)
{
	int i, n = argc > 1 ? atoi(argv[1]) : 10;
	pthread_attr_t a;
	pthread_t t;

	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 256 * 1024);
	for (i = 0; i < n; i++)
		if (pthread_create(&t, &a, idle, NULL))
			return 1;
	printf("%d\n", (int)getpid());
	fflush(stdout);
	for (;;)
		pause();
}
