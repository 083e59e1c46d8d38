#ifndef MEMSNAP_TESTS_REDIS_H
#define MEMSNAP_TESTS_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * A private Debian redis-server for integration tests: no TCP port (a
 * unix socket in a temp dir), no persistence, started with @malloc_conf
 * as MALLOC_CONF (NULL: none).  Readiness comes from redis itself
 * through the systemd notify protocol (READY=1 on $NOTIFY_SOCKET), not
 * from waiting.
 */
struct redis {
	pid_t pid;
	char dir[64];	   /* its temp dir, removed by redis_stop() */
	char socket[96];   /* its unix socket (fits sun_path) */
};

/* 0, -ENOENT when redis-server is not installed, or -errno. */
int redis_start(struct redis *r, const char *malloc_conf);

/* Send one inline command ("SET k v"), read the first reply line
 * ("+OK", "$3" then the value for bulk replies is returned as "v").
 * 0 or -errno.  A connection of its own. */
int redis_command(const struct redis *r, const char *cmd, char *reply,
		  size_t size);

/* A connection to @r (close it), or -errno; and redis_command() on
 * it, for a client that keeps one. */
int redis_connect(const struct redis *r);
int redis_ask(int fd, const char *cmd, char *reply, size_t size);

/* SET PREFIX:N VALUE for each N in [@from, @to), all through one
 * connection, every command sent before a reply is read (redis reads
 * a value in the protocol's bulk form as it is, where an inline
 * command's is parsed a byte at a time).  0, -EPROTO when a reply is
 * not +OK, or -errno. */
int redis_set_keys(const struct redis *r, const char *prefix,
		   unsigned int from, unsigned int to, const char *value);

/* What a failed redis_command() met, for an assertion's message: the
 * error and the server's state ("Cannot allocate memory; redis-server
 * 123 is S (sleeping) in ep_poll"). */
const char *redis_why(const struct redis *r, int rc, char *buf,
		      size_t size);

/* PING answers PONG. */
bool redis_alive(const struct redis *r);

void redis_stop(struct redis *r);

#endif
