#ifndef MEMSNAP_COMMON_SEQPACKET_H
#define MEMSNAP_COMMON_SEQPACKET_H

#include <stddef.h>
#include <sys/types.h>

/*
 * One message on a SOCK_SEQPACKET socket, with at most one descriptor
 * beside it (SCM_RIGHTS): how memsnap and a sandboxed child
 * (common/sandbox.h) hand each other files.  Every EINTR is retried.
 */

/*
 * Send @len bytes at @buf as one message, and @fd with it when >= 0
 * (the receiver gets its own descriptor for the same file; @fd stays
 * the caller's).  @flags: MSG_DONTWAIT, say.  0 or -errno (-EPIPE: the
 * other end is gone; -EAGAIN with MSG_DONTWAIT: it reads nothing).
 */
int seqpacket_send(int sock, const void *buf, size_t len, int fd, int flags);

/*
 * Receive one message into @buf: its length (0: the other end is gone),
 * or -errno: -EMSGSIZE when it did not fit in @size bytes, -EPROTO when
 * it carried anything but at most one descriptor.  The descriptor, if
 * one came, goes to *@fd (close-on-exec), else *@fd is -1; on an error
 * nothing received stays open.
 */
ssize_t seqpacket_recv(int sock, void *buf, size_t size, int *fd);

#endif
