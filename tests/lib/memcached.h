#ifndef MEMSNAP_TESTS_LIB_MEMCACHED_H
#define MEMSNAP_TESTS_LIB_MEMCACHED_H

#include <stddef.h>

/* A client of memcached's text protocol, for the tests that start one
 * on a unix socket. */

/* Connect to the socket at @path: an fd, or -errno. */
int mc_connect(const char *path);

/* Send the @len bytes of @req, read until the reply ends with @end;
 * the reply in @buf (@size bytes, NUL-ended).  The test fails if
 * memcached does not answer within 10 s, closes, or says too much. */
void mc_request(int fd, const char *req, size_t len, const char *end,
		char *buf, size_t size);

/* Item @k's value, @size - 1 letters, the same at every call. */
void mc_value(unsigned int k, char *v, size_t size);

#endif
