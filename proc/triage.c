#include "proc/triage.h"

#include "proc/procfs.h"
#include "common/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "202 0x7f.. 0x80 0x0 0x0 0x0 0x0 0x7ffd.. 0x7f.." into @ti; "-1 sp pc"
 * for a thread in user space.  What does not parse stays 0. */
static void parse_syscall_line(const char *buf, struct thread_info *ti)
{
	uint64_t v[8] = { 0 };
	char *end;
	int i, n;

	ti->syscall = strtol(buf, &end, 10);
	n = ti->syscall >= 0 ? 8 : 2;
	for (i = 0; i < n && *end == ' '; i++)
		v[i] = strtoull(end + 1, &end, 16);
	if (i < n)
		return;
	if (ti->syscall >= 0) {
		memcpy(ti->sc_args, v, sizeof(ti->sc_args));
		ti->sc_sp = v[6];
		ti->sc_pc = v[7];
	} else {
		ti->sc_sp = v[0];
		ti->sc_pc = v[1];
	}
}

int triage_one(pid_t pid, pid_t tid, struct thread_info *ti)
{
	char rel[64], buf[1024];
	const char *p;
	size_t len;
	int rc;

	memset(ti, 0, sizeof(*ti));
	ti->tid = tid;
	snprintf(rel, sizeof(rel), "task/%d/stat", (int)tid);
	rc = proc_read_small(pid, rel, buf, sizeof(buf), NULL);
	if (rc)
		return rc;
	/* The comm may hold spaces and parentheses: go by the last ')'. */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2])
		return -EIO;
	ti->state = p[2];
	p = strchr(buf, '(');
	if (p) {
		len = (size_t)(strrchr(buf, ')') - p - 1);
		if (len >= sizeof(ti->comm))
			len = sizeof(ti->comm) - 1;
		memcpy(ti->comm, p + 1, len);
	}

	ti->syscall = -2;
	snprintf(rel, sizeof(rel), "task/%d/syscall", (int)tid);
	if (!proc_read_small(pid, rel, buf, sizeof(buf), NULL)) {
		if (!strncmp(buf, "running", 7))
			ti->syscall = -2;
		else
			parse_syscall_line(buf, ti);
	}
	ti->children = triage_has_children(pid, tid);
	return 0;
}

int triage_syscall(pid_t pid, pid_t tid, struct thread_info *ti)
{
	char rel[64], buf[1024];
	int rc;

	memset(ti, 0, sizeof(*ti));
	ti->tid = tid;
	ti->syscall = -2;
	snprintf(rel, sizeof(rel), "task/%d/syscall", (int)tid);
	rc = proc_read_small(pid, rel, buf, sizeof(buf), NULL);
	if (!rc && strncmp(buf, "running", 7))
		parse_syscall_line(buf, ti);
	return rc;
}

#define PF_EXITING 0x4u	/* the kernel's task flag: in do_exit() */

int thread_dying(pid_t pid, pid_t tid)
{
	char rel[64], buf[1024];
	struct thread_status *st;
	unsigned int flags;
	const char *p;
	bool dying;
	int rc;

	snprintf(rel, sizeof(rel), "task/%d/stat", (int)tid);
	rc = proc_read_small(pid, rel, buf, sizeof(buf), NULL);
	if (rc == -ENOENT || rc == -ESRCH)
		return 1;
	if (rc)
		return rc;
	p = strrchr(buf, ')');
	/* state ppid pgrp session tty_nr tpgid flags */
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %u", &flags) != 1)
		return -EIO;
	if (p[2] == 'Z' || p[2] == 'X' || (flags & PF_EXITING))
		return 1;
	/*
	 * An exit or execve in another thread queues SIGKILL to this one,
	 * which a tracer of its exit then finds stopped at
	 * PTRACE_EVENT_EXIT, before PF_EXITING is set, while every ptrace
	 * request on it fails with ESRCH: dying all the same.
	 */
	st = malloc(sizeof(*st));
	if (!st)
		return -ENOMEM;
	rc = thread_status_read(pid, tid, st);
	dying = !rc && (st->pending & 1ull << (SIGKILL - 1));
	free(st);
	if (rc == -ENOENT || rc == -ESRCH)
		return 1;
	return rc ? rc : dying;
}

bool triage_has_children(pid_t pid, pid_t tid)
{
	char rel[64], buf[16];

	/* "123 456 ": the children this thread forked, one pid each */
	snprintf(rel, sizeof(rel), "task/%d/children", (int)tid);
	return !proc_read_small(pid, rel, buf, sizeof(buf), NULL) &&
	       buf[0] >= '1' && buf[0] <= '9';
}

void triage_wchan(pid_t pid, struct thread_info *ti)
{
	char rel[64];

	snprintf(rel, sizeof(rel), "task/%d/wchan", (int)ti->tid);
	if (proc_read_small(pid, rel, ti->wchan, sizeof(ti->wchan), NULL))
		ti->wchan[0] = '\0';
}

int triage_list(pid_t pid, struct thread_list *out)
{
	return triage_list_until(pid, NULL, NULL, out);
}

int triage_list_until(pid_t pid, bool (*enough)(void *, struct thread_info *),
		      void *arg, struct thread_list *out)
{
	size_t cap = 0, i, n;
	pid_t *tids;
	int rc;

	out->v = NULL;
	out->n = 0;
	/* the ids first: reading a directory is cheap, the files of
	 * every thread are not, and listing stops at @enough */
	rc = triage_tids(pid, &tids, &n);
	if (rc)
		return rc;
	for (i = 0; i < n; i++) {
		rc = array_grow((void **)&out->v, &cap, out->n + 1,
				sizeof(*out->v));
		if (rc)
			break;
		/* A thread that exits meanwhile is simply not listed; memsnap
		 * short of descriptors is not a process that exited. */
		rc = triage_one(pid, tids[i], &out->v[out->n]);
		if (err_is_starved(rc))
			break;
		if (rc) {
			rc = 0;
			continue;
		}
		out->n++;
		if (enough && enough(arg, &out->v[out->n - 1]))
			break;
	}
	free(tids);
	if (!rc && out->n == 0)
		rc = -ENOENT;
	if (rc)
		triage_free(out);
	return rc;
}

int triage_tids(pid_t pid, pid_t **out, size_t *n)
{
	size_t cap = 0;
	struct dirent *de;
	DIR *d;
	int fd, rc = 0;

	*out = NULL;
	*n = 0;
	fd = proc_open(pid, "task", O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return fd;
	d = fdopendir(fd);
	if (!d) {
		rc = -errno;
		close(fd);
		return rc;
	}
	while ((de = readdir(d))) {
		pid_t tid;

		if (parse_pid(de->d_name, &tid))
			continue;
		rc = array_grow((void **)out, &cap, *n + 1, sizeof(**out));
		if (rc)
			break;
		(*out)[(*n)++] = tid;
	}
	closedir(d);
	if (!rc && !*n)
		rc = -ENOENT;
	if (rc) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

int triage_nr_threads(pid_t pid, unsigned long *n)
{
	const char *p;
	char *status;
	int rc;

	rc = proc_read_status(pid, "status", &status);
	if (rc)
		return rc;
	p = strstr(status, "\nThreads:");
	rc = p && sscanf(p + 9, "%lu", n) == 1 ? 0 : -EIO;
	free(status);
	return rc;
}

bool triage_tid_exists(pid_t pid, pid_t tid)
{
	char rel[64], buf[64];

	snprintf(rel, sizeof(rel), "task/%d/stat", (int)tid);
	return !proc_read_small(pid, rel, buf, sizeof(buf), NULL);
}

static int by_score(const void *a, const void *b)
{
	const struct thread_info *x = a, *y = b;

	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

void triage_sort(struct thread_list *l)
{
	if (l->n > 1)
		qsort(l->v, l->n, sizeof(*l->v), by_score);
}

void triage_free(struct thread_list *l)
{
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

static unsigned long long status_mask(const char *buf, const char *key)
{
	const char *p = strstr(buf, key);

	if (!p)
		return 0;
	return strtoull(p + strlen(key), NULL, 16);
}

static long status_num(const char *buf, const char *key, long dflt)
{
	const char *p = strstr(buf, key);

	return p ? strtol(p + strlen(key), NULL, 10) : dflt;
}

/* The Groups: line can be long: the copy for the arch code leaves it
 * out (see proc_read_status()). */
int thread_status_read(pid_t pid, pid_t tid, struct thread_status *st)
{
	char rel[64], *buf;
	const char *g, *eol;
	size_t keep;
	int rc;

	memset(st, 0, sizeof(*st));
	snprintf(rel, sizeof(rel), "task/%d/status", (int)tid);
	rc = proc_read_status(pid, rel, &buf);
	if (rc)
		return rc;
	/* the copy for the arch code: without the Groups line */
	g = strstr(buf, "\nGroups:");
	eol = g ? strchr(g + 1, '\n') : NULL;
	keep = g ? (size_t)(g - buf) : strlen(buf);
	if (keep >= sizeof(st->text))
		keep = sizeof(st->text) - 1;
	memcpy(st->text, buf, keep);
	if (eol)
		snprintf(st->text + keep, sizeof(st->text) - keep, "%s", eol);
	st->tracer = (pid_t)status_num(buf, "\nTracerPid:", 0);
	st->pending = status_mask(buf, "\nSigPnd:") |
		      status_mask(buf, "\nShdPnd:");
	st->blocked = status_mask(buf, "\nSigBlk:");
	st->seccomp = (int)status_num(buf, "\nSeccomp:", 0);
	st->seccomp_filters = (int)status_num(buf, "\nSeccomp_filters:", -1);
	free(buf);
	return 0;
}
