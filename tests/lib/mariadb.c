#include "mariadb.h"
#include "fixture.h"
#include "notify.h"
#include "scratch.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MARIADBD "/usr/sbin/mariadbd"
#define INSTALL_DB "/usr/bin/mariadb-install-db"
#define CLIENT "/usr/bin/mariadb"

static void exec_server(const struct mariadb *m, const char *notify,
			const char *pool)
{
	char datadir[160], sock[160], err[160], bp[64];
	int null = open("/dev/null", O_RDWR);

	dup2(null, 0);
	dup2(null, 1);
	dup2(null, 2);
	setenv("NOTIFY_SOCKET", notify, 1);
	snprintf(datadir, sizeof(datadir), "--datadir=%s/data", m->dir);
	snprintf(sock, sizeof(sock), "--socket=%s", m->socket);
	snprintf(err, sizeof(err), "--log-error=%s/err", m->dir);
	snprintf(bp, sizeof(bp), "--innodb-buffer-pool-size=%s", pool);
	execl(MARIADBD, MARIADBD, "--no-defaults", datadir, sock, err,
	      "--skip-networking", "--user=root", bp,
	      "--innodb-log-file-size=16M", (char *)NULL);
	_exit(127);
}

int mariadb_start(struct mariadb *m, const char *pool)
{
	char notify[160], cmd[512];
	struct run r;
	int nfd, rc;

	memset(m, 0, sizeof(*m));
	m->pid = -1;
	if (access(MARIADBD, X_OK) || access(INSTALL_DB, X_OK) ||
	    access(CLIENT, X_OK))
		return -ENOENT;
	/* in /tmp itself, whatever $TMPDIR: a socket's path must be short */
	rc = scratch_make("/tmp/memsnap-mariadb", m->dir, sizeof(m->dir));
	if (rc)
		return rc;
	snprintf(m->socket, sizeof(m->socket), "%s/sock", m->dir);
	snprintf(notify, sizeof(notify), "%s/notify", m->dir);
	snprintf(cmd, sizeof(cmd), INSTALL_DB " --no-defaults --datadir='%s/data' "
		 "--user=root --auth-root-authentication-method=normal "
		 "--skip-test-db > '%s/install.log' 2>&1", m->dir, m->dir);
	if (run_shell(&r, cmd) || r.status) {
		rc = r.status ? -EIO : -errno;
		run_free(&r);
		return rc;
	}
	run_free(&r);
	nfd = notify_socket(notify);
	if (nfd < 0)
		return nfd;
	m->pid = fork();
	if (m->pid < 0) {
		rc = -errno;
		close(nfd);
		return rc;
	}
	if (m->pid == 0)
		exec_server(m, notify, pool);
	rc = notify_wait_ready(nfd, 60000);
	close(nfd);
	return rc;
}

int mariadb_sql(const struct mariadb *m, const char *sql, char *out,
		size_t size)
{
	char cmd[4096];
	struct run r;
	int rc;

	snprintf(cmd, sizeof(cmd), CLIENT " --no-defaults --socket='%s' -u root "
		 "-N -B -e \"%s\"", m->socket, sql);
	if (run_shell(&r, cmd)) {
		snprintf(out, size, "%s", strerror(errno));
		return -1;
	}
	rc = r.status ? -1 : 0;
	snprintf(out, size, "%s", rc ? r.err : r.out);
	run_free(&r);
	return rc;
}

FILE *mariadb_session(const struct mariadb *m)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), CLIENT " --no-defaults --socket='%s' -u root "
		 "-N -B > /dev/null", m->socket);
	return popen(cmd, "we");
}

int mariadb_end(FILE *session)
{
	return pclose(session);
}

bool mariadb_alive(const struct mariadb *m)
{
	char out[64];

	return !mariadb_sql(m, "SELECT 1", out, sizeof(out)) &&
	       !strcmp(out, "1\n");
}

void mariadb_stop(struct mariadb *m)
{
	if (m->pid > 0) {
		kill(m->pid, SIGKILL);
		while (waitpid(m->pid, NULL, 0) < 0 && errno == EINTR)
			;
		m->pid = -1;
	}
	if (m->dir[0])
		scratch_cleanup(m->dir);
}
