/*
 * Which processes are targets: --pid, and those that pass --match,
 * --min-rss and --cgroup, found again at every scrape.  /proc is
 * listed and each stat read by number for a first look; a process that
 * could pass is pinned, and the filters are asked again of what is read
 * through the pin (select_passes()), which alone decides.
 */
#include "exporter/exporter_internal.h"

#include "common/util.h"
#include "proc/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int select_cgroup_arg(const char *arg, char *path, size_t size)
{
	static const char root[] = "/sys/fs/cgroup";
	const char *p = arg;
	size_t n;

	if (!strncmp(p, root, sizeof(root) - 1) &&
	    (!p[sizeof(root) - 1] || p[sizeof(root) - 1] == '/'))
		p += sizeof(root) - 1;
	while (*p == '/')
		p++;
	n = strlen(p);
	while (n && p[n - 1] == '/')
		n--;
	if (strstr(arg, "/../") || !strcmp(p, "..") || !strncmp(p, "../", 3) ||
	    strchr(arg, '\n') || n + 2 > size)
		return -EINVAL;
	snprintf(path, size, "/%.*s", (int)n, p);
	return 0;
}

/* Is cgroup @cg @want or beneath it? */
static bool cgroup_within(const char *cg, const char *want)
{
	size_t n = strlen(want);

	if (!strcmp(want, "/"))
		return cg[0] == '/';
	return !strncmp(cg, want, n) && (!cg[n] || cg[n] == '/');
}

/*
 * Does the process of directory @dir (/proc/PID, stat @st) pass every
 * filter of @e?  Its cgroup and executable are read into @t when a
 * filter needs them.
 */
static bool passes_at(const struct exporter *e, int dir,
		      const struct pin_stat *st, struct target *t)
{
	if (st->kernel_thread || st->state == 'Z' || st->state == 'X')
		return false;
	if (e->c.min_rss && st->rss_pages * page_size() < e->c.min_rss)
		return false;
	if (e->c.cgroup &&
	    (proc_cgroup_at(dir, t->cgroup, sizeof(t->cgroup)) ||
	     !cgroup_within(t->cgroup, e->cgroup)))
		return false;
	if (e->have_re && regexec(&e->re, st->comm, 0, NULL, 0)) {
		ssize_t n = readlinkat(dir, "exe", t->exe, sizeof(t->exe) - 1);

		t->exe[n > 0 ? (size_t)n : 0] = '\0';
		if (n <= 0 || regexec(&e->re, t->exe, 0, NULL, 0))
			return false;
	}
	return true;
}

bool select_passes(const struct exporter *e, const struct pin *p,
		   const struct pin_stat *st, struct target *t)
{
	return p->proc.pid != e->self && passes_at(e, p->dir, st, t) &&
	       pin_alive(p);
}

static bool is_target(const struct exporter *e, pid_t pid)
{
	size_t i;

	for (i = 0; i < e->n; i++)
		if (e->t[i]->pin.proc.pid == pid && !e->t[i]->ended)
			return true;
	return false;
}

struct candidate {
	pid_t pid;
	uint64_t rss;
};

static int by_rss(const void *a, const void *b)
{
	const struct candidate *x = a, *y = b;

	if (x->rss != y->rss)
		return x->rss > y->rss ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* A first look at /proc/@name, by number (the pin decides): its stat
 * and whether it passes, into @st. */
static bool first_look(const struct exporter *e, int proc, const char *name,
		       struct pin_stat *st)
{
	struct target *scratch;
	char buf[1024];
	ssize_t n;
	bool ok;
	int dir, fd;

	dir = openat(proc, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return false;
	fd = openat(dir, "stat", O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	ok = n > 0 && !pin_stat_parse(buf, (size_t)n, st);
	scratch = ok ? calloc(1, sizeof(*scratch)) : NULL;
	ok = scratch && passes_at(e, dir, st, scratch);
	free(scratch);
	close(dir);
	return ok;
}

ssize_t select_candidates(const struct exporter *e, pid_t **out)
{
	struct candidate *v = NULL;
	size_t n = 0, cap = 0, i;
	struct dirent *d;
	DIR *proc;
	int rc = 0;

	*out = NULL;
	proc = opendir("/proc");
	if (!proc)
		return -errno;
	while ((d = readdir(proc))) {
		struct pin_stat st;
		pid_t pid;

		if (parse_pid(d->d_name, &pid) || pid == e->self ||
		    is_target(e, pid) || !first_look(e, dirfd(proc), d->d_name, &st))
			continue;
		if (array_grow((void **)&v, &cap, n + 1, sizeof(*v))) {
			rc = -ENOMEM;
			break;
		}
		v[n].pid = pid;
		v[n++].rss = st.rss_pages;
	}
	closedir(proc);
	if (!rc && n)
		*out = malloc(n * sizeof(**out));
	if (!rc && n && !*out)
		rc = -ENOMEM;
	if (rc) {
		free(v);
		return rc;
	}
	sort(v, n, sizeof(*v), by_rss);
	for (i = 0; i < n; i++)
		(*out)[i] = v[i].pid;
	free(v);
	return (ssize_t)n;
}
