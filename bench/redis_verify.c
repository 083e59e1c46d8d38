/*
 * redis_verify: one redis client that SETs a key to a value it can
 * recompute and GETs it back, for SECONDS seconds; any error reply, lost
 * connection or value that comes back different is counted:
 *
 *   requests 81234 errors 0 mismatches 0
 *
 * Built and run by bench/sampler.sh:  redis_verify PORT SECONDS SEED
 */
#include "resp.h"

#include <arpa/inet.h>
#include <signal.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	unsigned long requests = 0, errors = 0, mismatches = 0, i;
	double end;
	int fd, one = 1;
	char req[512], want[256], buf[4096];

	struct sigaction sa = { .sa_handler = on_term, .sa_flags = SA_RESTART };

	if (argc != 4)
		return 2;
	sigaction(SIGTERM, &sa, NULL);
	a.sin_port = htons((unsigned short)atoi(argv[1]));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	end = now_s() + atof(argv[2]);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)))
		return 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (i = 0; !stop && now_s() < end; i++) {
		char key[64];
		int vlen;

		snprintf(key, sizeof(key), "verify:%s:%lu", argv[3], i % 5000);
		vlen = snprintf(want, sizeof(want), "v%lu-%s-%0*lu", i,
				argv[3], (int)(i % 150), i * 2654435761ul);
		snprintf(req, sizeof(req),
			 "*3\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n$%d\r\n%s\r\n",
			 strlen(key), key, vlen, want);
		if (write(fd, req, strlen(req)) != (ssize_t)strlen(req) ||
		    resp_reply(fd, buf, sizeof(buf)) || strncmp(buf, "+OK", 3)) {
			errors++;
			break;
		}
		snprintf(req, sizeof(req), "*2\r\n$3\r\nGET\r\n$%zu\r\n%s\r\n",
			 strlen(key), key);
		if (write(fd, req, strlen(req)) != (ssize_t)strlen(req) ||
		    resp_reply(fd, buf, sizeof(buf))) {
			errors++;
			break;
		}
		{
			char *nl = strstr(buf, "\r\n");

			if (buf[0] != '$' || atol(buf + 1) != vlen || !nl ||
			    strncmp(nl + 2, want, (size_t)vlen))
				mismatches++;
		}
		requests += 2;
	}
	printf("requests %lu errors %lu mismatches %lu\n", requests, errors,
	       mismatches);
	return errors || mismatches;
}
