#include "agent/dumpdir.h"
#include "agent/agent.h"

#include "proc/procfs.h"
#include "proc/procinfo.h"
#include "common/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DUMP_NAME "dump.heap"
/* The agent answers at once; this only bounds a stopped or stuck one. */
#define AGENT_TIMEOUT_MS 10000

struct dumpdir {
	pid_t pid;
	struct agent_target t;	/* what the agent is to find */
	bool started;	/* the agent was (dumpdir_start()) */
	pid_t agent;	/* our child, with the target's credentials */
	int sock;	/* to the agent */
	uint64_t max;	/* the largest result taken */
	char name[32];	/* ".memsnap-0123456789abcdef" */
	char place[520];	/* "/tmp", in the target's view */
	char fname[64];		/* "dump.heap" */
	char file[PATH_MAX];	/* "/tmp/.memsnap-.../dump.heap" */
	char here[PATH_MAX + 64]; /* "/proc/PID/root/tmp/.memsnap-..." */
};

/* One reply from the agent (and the fd it passed, if @fd), within the
 * timeout.  0 or -errno: -ETIMEDOUT, -ECONNRESET (the agent died). */
static int agent_recv(struct dumpdir *d, struct agent_rep *r, int *fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = r, .iov_len = sizeof(*r) };
	struct msghdr m = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = cbuf,
		.msg_controllen = sizeof(cbuf),
	};
	struct pollfd p = { .fd = d->sock, .events = POLLIN };
	struct cmsghdr *c;
	ssize_t n;
	int rc;

	if (fd)
		*fd = -1;
	do
		rc = poll(&p, 1, AGENT_TIMEOUT_MS);
	while (rc < 0 && errno == EINTR);
	if (rc < 0)
		return -errno;
	if (rc == 0)
		return -ETIMEDOUT;
	do
		n = recvmsg(d->sock, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n != (ssize_t)sizeof(*r))
		return -ECONNRESET;
	r->text[sizeof(r->text) - 1] = '\0';
	for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		int got;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len != CMSG_LEN(sizeof(int)))
			continue;
		memcpy(&got, CMSG_DATA(c), sizeof(int));
		if (fd && *fd < 0)
			*fd = got;
		else
			close(got);
	}
	return 0;
}

static int agent_ask(struct dumpdir *d, enum agent_op op, const char *name,
		     struct agent_rep *r, int *fd)
{
	struct agent_req q = { .op = op };
	ssize_t n;

	snprintf(q.name, sizeof(q.name), "%s", name ? name : "");
	do
		n = send(d->sock, &q, sizeof(q), MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EPIPE ? -ECONNRESET : -errno;
	return agent_recv(d, r, fd);
}

/* Close the line and reap the agent (killed if it does not go). */
static void agent_stop(struct dumpdir *d, bool kill_it)
{
	if (d->sock >= 0)
		close(d->sock);
	d->sock = -1;
	if (d->agent <= 0)
		return;
	if (kill_it)
		kill(d->agent, SIGKILL);
	while (waitpid(d->agent, NULL, 0) < 0 && errno == EINTR)
		;
	d->agent = -1;
}

/* dumpdir_create() fails with @rc, @text saying why ("" if nothing
 * does): @err filled as dumpdir.h says.  Returns @rc. */
static int create_failed(struct diag *err, int rc, const char *text)
{
	err->hint[0] = '\0';
	/* -ENOENT with words is a place missing, not the process */
	if (rc == -ESRCH || rc == -ESTALE || (rc == -ENOENT && !text[0])) {
		err->kind = DIAG_NO_PROCESS;
		snprintf(err->what, sizeof(err->what), "%s",
			 text[0] ? text : "the process exited");
	} else {
		err->kind = DIAG_FAILED;
		snprintf(err->what, sizeof(err->what),
			 "no place the target can write to: %s",
			 text[0] ? text : strerror(-rc));
	}
	return rc;
}

int dumpdir_defer(const struct procinfo *pi, int pidfd, struct dumpdir **out,
		  struct diag *err)
{
	struct dumpdir *d;
	char probe[96];
	char why[96];

	/* No process: say so now, not through the agent. */
	proc_path(pi->pid, "root", probe, sizeof(probe));
	if (access(probe, F_OK) && errno == ENOENT)
		return create_failed(err, -ENOENT, "");
	/* Credentials the agent could not compare with its own reading
	 * would be no check at all. */
	if (!pi->have_creds) {
		snprintf(why, sizeof(why),
			 "the credentials of pid %d were not read",
			 (int)pi->pid);
		return create_failed(err, -EINVAL, why);
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return create_failed(err, -ENOMEM, "");
	d->pid = pi->pid;
	d->t = (struct agent_target){
		.pin = { .pid = pi->pid, .pidfd = pidfd > 0 ? pidfd : -1,
			 .start_time = pi->start_time },
		.creds = pi->creds,
	};
	d->sock = -1;
	d->agent = -1;
	d->max = 1ull << 30;
	snprintf(d->fname, sizeof(d->fname), DUMP_NAME);
	*out = d;
	return 0;
}

int dumpdir_start(struct dumpdir *d, struct diag *err)
{
	struct agent_rep r = { 0 };
	char fname[sizeof(d->fname)];
	int sv[2], rc;

	if (d->started)
		return d->agent > 0 ? 0 : create_failed(err, -ECHILD, "");
	d->started = true;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return create_failed(err, -errno, "");
	d->agent = fork();
	if (d->agent == 0) {
		close(sv[0]);
		agent_main(sv[1], &d->t);
	}
	close(sv[1]);
	d->sock = sv[0];
	if (d->agent < 0) {
		rc = create_failed(err, -errno, "");
		d->agent = -1;
		goto fail;
	}
	rc = agent_recv(d, &r, NULL);
	if (!rc)
		rc = r.rc;
	if (rc) {
		create_failed(err, rc,
			      r.text[0]		 ? r.text
			      : rc == -ETIMEDOUT ? "memsnap's file agent did not answer"
						 : "memsnap's file agent died");
		goto fail;
	}
	snprintf(d->place, sizeof(d->place), "%.*s", (int)sizeof(d->place) - 1,
		 r.text);
	snprintf(d->name, sizeof(d->name), "%.*s", (int)sizeof(d->name) - 1,
		 r.text + strlen(r.text) + 1);
	/* the name set before the start (a copy: it is rewritten) */
	memcpy(fname, d->fname, sizeof(fname));
	dumpdir_set_name(d, fname);
	return 0;
fail:
	agent_stop(d, true);
	return rc;
}

int dumpdir_create(const struct procinfo *pi, int pidfd, struct dumpdir **out,
		   struct diag *err)
{
	int rc = dumpdir_defer(pi, pidfd, out, err);

	if (!rc && (rc = dumpdir_start(*out, err))) {
		free(*out);
		*out = NULL;
	}
	return rc;
}

int dumpdir_set_name(struct dumpdir *d, const char *name)
{
	if (!name[0] || strchr(name, '/') || !strcmp(name, ".") ||
	    !strcmp(name, "..") || strlen(name) >= sizeof(d->fname))
		return -EINVAL;
	snprintf(d->fname, sizeof(d->fname), "%s", name);
	snprintf(d->file, sizeof(d->file), "%s/%s/%s",
		 strcmp(d->place, "/") ? d->place : "", d->name, d->fname);
	snprintf(d->here, sizeof(d->here), "/proc/%d/root%s", (int)d->pid,
		 d->file);
	return 0;
}

const char *dumpdir_file(const struct dumpdir *d)
{
	return d->file;
}

const char *dumpdir_here(const struct dumpdir *d)
{
	return d->here;
}

void dumpdir_set_max(struct dumpdir *d, uint64_t max)
{
	d->max = max;
}

const char *dumpdir_result_why(int rc)
{
	switch (rc) {
	case -ELOOP:
		return "a symlink is there, not the profile";
	case -EXDEV:
		return "something is mounted there, not the profile";
	case -EINVAL:
		return "not a regular file";
	case -EPERM:
		return "not a file of the target's own";
	case -EACCES:
		return "the target itself may not read it";
	default:
		return strerror(-rc);
	}
}

int dumpdir_open_result(struct dumpdir *d, uint64_t *size)
{
	struct agent_rep r = { 0 };
	int rc, fd;

	rc = agent_ask(d, AGENT_OPEN, d->fname, &r, &fd);
	if (!rc)
		rc = r.rc;
	if (!rc && fd < 0)
		rc = -EIO;
	if (!rc && r.size > d->max)
		rc = -EFBIG;
	if (rc) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	if (size)
		*size = r.size;
	return fd;
}

/* Open file descriptors of @pid and its RLIMIT_NOFILE soft limit. */
static bool fd_usage(pid_t pid, unsigned long *used, unsigned long *limit)
{
	char limits[4096];
	const char *p;
	struct dirent *e;
	DIR *dir;
	int fd;

	if (proc_read_small(pid, "limits", limits, sizeof(limits), NULL))
		return false;
	p = strstr(limits, "Max open files");
	if (!p || sscanf(p + strlen("Max open files"), "%lu", limit) != 1)
		return false;
	fd = proc_open(pid, "fd", O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return false;
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return false;
	}
	*used = 0;
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			(*used)++;
	closedir(dir);
	return true;
}

void dumpdir_explain(struct dumpdir *d, char *buf, size_t size)
{
	unsigned long used, limit;
	struct agent_rep r = { 0 };
	char *status = NULL;
	const char *p;

	buf[0] = '\0';
	if (fd_usage(d->pid, &used, &limit) && used + 1 >= limit) {
		snprintf(buf, size,
			 "pid %d has %lu of %lu file descriptors open (RLIMIT_NOFILE)",
			 (int)d->pid, used, limit);
		return;
	}
	if (!agent_ask(d, AGENT_EXPLAIN, d->fname, &r, NULL)) {
		switch (r.rc) {
		case 1:
			snprintf(buf, size, "%s is on a read-only file system",
				 d->place);
			return;
		case 2:
			snprintf(buf, size, "%s is full (%llu bytes free)",
				 d->place, (unsigned long long)r.size);
			return;
		case 3:
			snprintf(buf, size,
				 "it created %s but stopped after %llu bytes",
				 d->file, (unsigned long long)r.size);
			return;
		}
	}
	if (!proc_read_status(d->pid, "status", &status) &&
	    (p = strstr(status, "\nSeccomp:")) && atoi(p + 9) == 2)
		snprintf(buf, size,
			 "it could not create %s; it runs under a seccomp filter, which may refuse open()",
			 d->file);
	free(status);
}

int dumpdir_remove(struct dumpdir *d)
{
	struct agent_rep r = { 0 };
	int rc;

	if (!d)
		return 0;
	if (d->agent <= 0) {	/* never started, or it failed to */
		agent_stop(d, false);
		free(d);
		return 0;
	}
	rc = agent_ask(d, AGENT_REMOVE, NULL, &r, NULL);
	if (!rc)
		rc = r.rc;
	agent_stop(d, rc == -ETIMEDOUT);
	free(d);
	return rc;
}
