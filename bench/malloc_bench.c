/*
 * malloc_bench: THREADS threads doing nothing but malloc/free (a live
 * set of 256 blocks each, every block written and checked) for SECONDS
 * seconds after a line on standard input; prints
 *
 *   ops 412345678 cpu_ns 5998123456 bad 0
 *
 * (malloc/free pairs, the CPU time the threads ran, blocks whose
 * contents changed: pairs per CPU second are what a sampler costs, on
 * a machine whose other load takes the threads' CPUs away now and
 * then, as much as it is the wall window's pairs); SIGUSR1 ends the
 * window early (bench/sampler.sh soak-linked).  MAXSIZE: sizes
 * are uniform in 16 .. MAXSIZE bytes (default 4096: some 80 GB a second
 * on two cores, the bytes that decide how often a sampler samples; 512
 * is closer to the objects of real programs).  Built and run by
 * bench/sampler.sh:  malloc_bench THREADS SECONDS [MAXSIZE]
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LIVE 256

static atomic_int stop;
static pthread_barrier_t start;
static size_t max_size = 4096;
static atomic_ulong total_ops, total_bad, total_cpu_ns;

static unsigned long cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (unsigned long)ts.tv_sec * 1000000000ul +
	       (unsigned long)ts.tv_nsec;
}

static void *worker(void *arg)
{
	uint64_t x = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
	unsigned char *live[LIVE] = { 0 };
	size_t sizes[LIVE] = { 0 };
	unsigned long ops = 0, bad = 0, t0;
	unsigned int i;

	pthread_barrier_wait(&start);
	t0 = cpu_ns();
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		for (i = 0; i < 1024; i++) {
			unsigned int k;
			size_t size;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			k = (unsigned int)(x % LIVE);
			size = 16 + (size_t)((x >> 20) % (max_size - 15));
			if (live[k]) {
				if (live[k][0] != (unsigned char)k ||
				    live[k][sizes[k] - 1] != (unsigned char)k)
					bad++;
				free(live[k]);
			}
			live[k] = malloc(size);
			if (!live[k]) {
				bad++;
				continue;
			}
			sizes[k] = size;
			live[k][0] = live[k][size - 1] = (unsigned char)k;
			ops++;
		}
	}
	atomic_fetch_add(&total_cpu_ns, cpu_ns() - t0);
	for (i = 0; i < LIVE; i++)
		free(live[i]);
	atomic_fetch_add(&total_ops, ops);
	atomic_fetch_add(&total_bad, bad);
	return NULL;
}

int main(int argc, char **argv)
{
	struct timespec end;
	sigset_t usr1;
	int threads = argc > 1 ? atoi(argv[1]) : 2;
	double secs = argc > 2 ? atof(argv[2]) : 3;
	struct timespec ts = { (time_t)secs,
			       (long)((secs - (time_t)secs) * 1e9) };
	pthread_t t[64];
	char line[16];
	int i;

	if (argc > 3)
		max_size = (size_t)atol(argv[3]);
	if (threads < 1 || threads > 64 || secs <= 0 || max_size < 16)
		return 2;
	/* blocked in every thread (they inherit it): main waits for it */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	/* the threads exist before the line, as a server's do when it is
	 * profiled, and start together after it */
	pthread_barrier_init(&start, NULL, (unsigned int)threads + 1);
	for (i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	pthread_barrier_wait(&start);
	/* the window, or SIGUSR1; an EINTR (a debugger's stop) waits on */
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += ts.tv_sec;
	end.tv_nsec += ts.tv_nsec;
	if (end.tv_nsec >= 1000000000) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000;
	}
	while (sigtimedwait(&usr1, NULL, &ts) < 0 && errno == EINTR) {
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		ts.tv_sec = end.tv_sec - now.tv_sec;
		ts.tv_nsec = end.tv_nsec - now.tv_nsec;
		if (ts.tv_nsec < 0) {
			ts.tv_sec--;
			ts.tv_nsec += 1000000000;
		}
		if (ts.tv_sec < 0)
			break;
	}
	atomic_store(&stop, 1);
	for (i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	printf("ops %lu cpu_ns %lu bad %lu\n", atomic_load(&total_ops),
	       atomic_load(&total_cpu_ns), atomic_load(&total_bad));
	return 0;
}
