#ifndef MEMSNAP_TESTS_LIB_NOTIFY_H
#define MEMSNAP_TESTS_LIB_NOTIFY_H

/* A datagram socket bound at @path, for a server's $NOTIFY_SOCKET: its
 * fd, or -errno. */
int notify_socket(const char *path);

/* Wait at most @timeout_ms for "READY=1" on @fd: 0, -ETIMEDOUT or
 * -errno. */
int notify_wait_ready(int fd, int timeout_ms);

#endif
