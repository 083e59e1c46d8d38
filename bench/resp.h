/*
 * One reply of a redis server, for the benchmark clients (getloop.c,
 * redis_verify.c): a status line, or a bulk string "$N\r\n...\r\n".
 */
#ifndef MEMSNAP_BENCH_RESP_H
#define MEMSNAP_BENCH_RESP_H

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Read one reply from @fd into @buf (NUL-ended).  0, or -1 on an error
 * reply, a closed connection or a reply longer than @size - 1. */
static int resp_reply(int fd, char *buf, size_t size)
{
	size_t got = 0, want = 0;

	for (;;) {
		ssize_t n = read(fd, buf + got, size - 1 - got);
		char *nl;

		if (n <= 0)
			return -1;
		got += (size_t)n;
		buf[got] = '\0';
		nl = strstr(buf, "\r\n");
		if (!nl)
			continue;
		if (buf[0] != '$')
			return buf[0] == '-' ? -1 : 0;
		if (!want) {
			long len = atol(buf + 1);

			if (len < 0)
				return 0;
			want = (size_t)(nl - buf) + 2 + (size_t)len + 2;
		}
		if (got >= want)
			return 0;
		if (got == size - 1)
			return -1;
	}
}

#endif
