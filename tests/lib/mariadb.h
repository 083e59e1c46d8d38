#ifndef MEMSNAP_TESTS_MARIADB_H
#define MEMSNAP_TESTS_MARIADB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/*
 * A private Debian mariadbd for integration tests: a fresh data
 * directory in a temp dir (mariadb-install-db), no TCP port (a unix
 * socket), the InnoDB buffer pool of @pool ("64M").  Readiness comes
 * from mariadbd itself through the systemd notify protocol (READY=1 on
 * $NOTIFY_SOCKET), not from waiting.
 */
struct mariadb {
	pid_t pid;
	char dir[96];		/* its temp dir, removed by mariadb_stop() */
	char socket[128];
};

/* 0, -ENOENT when mariadb-server is not installed, or -errno (its log
 * is DIR/err). */
int mariadb_start(struct mariadb *m, const char *pool);

/* @sql through the mariadb client, as root: 0 with its output (tab
 * separated, no header) in @out, or -1 with the client's error there. */
int mariadb_sql(const struct mariadb *m, const char *sql, char *out,
		size_t size);

/* One session of the mariadb client, its statements written to the
 * stream (popen(3)): its user variables live until mariadb_end(). */
FILE *mariadb_session(const struct mariadb *m);
/* The session's exit status. */
int mariadb_end(FILE *session);

/* It answers SELECT 1. */
bool mariadb_alive(const struct mariadb *m);

void mariadb_stop(struct mariadb *m);

#endif
