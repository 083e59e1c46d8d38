/*
 * getloop: one redis client sending GET after GET for SECONDS seconds,
 * one request in flight at a time, and the latency of each; prints
 *
 *   requests 81234 errors 0 max_ms 0.412 p99_ms 0.031 p999_ms 0.058
 *
 * Built and run by bench/stall.sh:  getloop PORT SECONDS
 */
#include "resp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Send @req and read one reply. */
static int roundtrip(int fd, const char *req)
{
	char buf[4096];

	if (write(fd, req, strlen(req)) != (ssize_t)strlen(req))
		return -1;
	return resp_reply(fd, buf, sizeof(buf));
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	double end, t0, t, *lat;
	size_t n = 0, cap = 1 << 20, errors = 0;
	int fd, one = 1;

	if (argc != 3) {
		fprintf(stderr, "usage: getloop PORT SECONDS\n");
		return 2;
	}
	a.sin_port = htons((unsigned short)atoi(argv[1]));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		perror("getloop: connect");
		return 1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (roundtrip(fd, "SET getloop:key 0123456789abcdef\r\n"))
		return 1;
	lat = malloc(cap * sizeof(*lat));
	if (!lat)
		return 1;
	end = now_ms() + atof(argv[2]) * 1000;
	while ((t0 = now_ms()) < end) {
		if (roundtrip(fd, "GET getloop:key\r\n"))
			errors++;
		t = now_ms() - t0;
		if (n == cap) {
			cap *= 2;
			lat = realloc(lat, cap * sizeof(*lat));
			if (!lat)
				return 1;
		}
		lat[n++] = t;
	}
	if (!n)
		return 1;
	qsort(lat, n, sizeof(*lat), cmp);
	printf("requests %zu errors %zu max_ms %.3f p99_ms %.3f p999_ms %.3f\n",
	       n, errors, lat[n - 1], lat[n * 99 / 100], lat[n * 999 / 1000]);
	return 0;
}
