#include "proc/maps.h"

#include "proc/procfs.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* No maps line the kernel writes is longer: PATH_MAX plus the fields. */
#define MAPS_MAX_LINE (4096 + 256)

static const char deleted_suffix[] = " (deleted)";

/* Parse up to 16 hex digits at *@p, stopping at anything else. */
static int parse_hex(const char **p, const char *end, uint64_t *out)
{
	uint64_t v = 0;
	int digits = 0;

	while (*p < end) {
		char c = **p;
		unsigned int d;

		if (c >= '0' && c <= '9')
			d = (unsigned int)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned int)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			d = (unsigned int)(c - 'A' + 10);
		else
			break;
		if (++digits > 16)
			return -EINVAL;
		v = v << 4 | d;
		(*p)++;
	}
	if (!digits)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_dec(const char **p, const char *end, uint64_t *out)
{
	uint64_t v = 0;
	int digits = 0;

	while (*p < end && **p >= '0' && **p <= '9') {
		unsigned int d = (unsigned int)(**p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
		digits++;
		(*p)++;
	}
	if (!digits)
		return -EINVAL;
	*out = v;
	return 0;
}

static int expect(const char **p, const char *end, char c)
{
	if (*p >= end || **p != c)
		return -EINVAL;
	(*p)++;
	return 0;
}

int maps_parse_line(const char *line, size_t len, struct map_entry *e,
		    const char **path, size_t *pathlen)
{
	const char *p = line, *end = line + len;
	uint64_t major, minor;

	memset(e, 0, sizeof(*e));
	*path = NULL;
	*pathlen = 0;
	while (end > p && (end[-1] == '\n' || end[-1] == '\r'))
		end--;

	if (parse_hex(&p, end, &e->start) || expect(&p, end, '-') ||
	    parse_hex(&p, end, &e->end) || expect(&p, end, ' '))
		return -EINVAL;
	if (e->end <= e->start)
		return -EINVAL;

	if (end - p < 5)
		return -EINVAL;
	if (p[0] == 'r')
		e->prot |= MAP_PROT_READ;
	else if (p[0] != '-')
		return -EINVAL;
	if (p[1] == 'w')
		e->prot |= MAP_PROT_WRITE;
	else if (p[1] != '-')
		return -EINVAL;
	if (p[2] == 'x')
		e->prot |= MAP_PROT_EXEC;
	else if (p[2] != '-')
		return -EINVAL;
	if (p[3] == 's')
		e->shared = true;
	else if (p[3] != 'p')
		return -EINVAL;
	p += 4;

	if (expect(&p, end, ' ') || parse_hex(&p, end, &e->offset) ||
	    expect(&p, end, ' ') || parse_hex(&p, end, &major) ||
	    expect(&p, end, ':') || parse_hex(&p, end, &minor) ||
	    expect(&p, end, ' ') || parse_dec(&p, end, &e->inode))
		return -EINVAL;
	if (major > UINT32_MAX || minor > UINT32_MAX)
		return -EINVAL;
	e->dev_major = (uint32_t)major;
	e->dev_minor = (uint32_t)minor;

	if (p < end && *p != ' ' && *p != '\t')
		return -EINVAL;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p == end)
		return 0;

	if ((size_t)(end - p) > sizeof(deleted_suffix) - 1 &&
	    !memcmp(end - (sizeof(deleted_suffix) - 1), deleted_suffix,
		    sizeof(deleted_suffix) - 1)) {
		e->deleted = true;
		end -= sizeof(deleted_suffix) - 1;
	}
	if (memchr(p, '\0', (size_t)(end - p)))
		return -EINVAL;
	*path = p;
	*pathlen = (size_t)(end - p);
	return 0;
}

struct maps *maps_new(void)
{
	return calloc(1, sizeof(struct maps));
}

int maps_add(struct maps *m, const struct map_entry *e, const char *path,
	     size_t pathlen)
{
	struct map_entry *ne;
	const char *prev = m->npaths ? m->paths[m->npaths - 1] : NULL;
	int rc;

	rc = array_grow((void **)&m->v, &m->cap, m->n + 1, sizeof(*m->v));
	if (rc)
		return rc;
	ne = &m->v[m->n];
	*ne = *e;
	ne->path = NULL;
	if (pathlen) {
		/* Most objects span several consecutive lines: share. */
		if (prev && strlen(prev) == pathlen &&
		    !memcmp(prev, path, pathlen)) {
			ne->path = prev;
		} else {
			char *s;

			rc = array_grow((void **)&m->paths, &m->paths_cap,
					m->npaths + 1, sizeof(*m->paths));
			if (rc)
				return rc;
			s = strndup(path, pathlen);
			if (!s)
				return -ENOMEM;
			m->paths[m->npaths++] = s;
			ne->path = s;
		}
	}
	if (m->n && ne->start < m->v[m->n - 1].start)
		m->unsorted = true;
	m->n++;
	return 0;
}

static int cmp_start(const void *a, const void *b)
{
	const struct map_entry *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

void maps_finish(struct maps *m)
{
	if (m->unsorted)
		sort(m->v, m->n, sizeof(*m->v), cmp_start);
	m->unsorted = false;
}

static int add_line(struct maps *m, const char *line, size_t len)
{
	struct map_entry e;
	const char *path;
	size_t pathlen;

	if (len == 0)
		return 0;
	if (len > MAPS_MAX_LINE ||
	    maps_parse_line(line, len, &e, &path, &pathlen)) {
		m->malformed++;
		return 0;
	}
	return maps_add(m, &e, path, pathlen);
}

int maps_read_file(FILE *f, struct maps **out)
{
	struct maps *m = maps_new();
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;

	if (!m)
		return -ENOMEM;
	errno = 0;
	while ((n = getline(&line, &cap, f)) > 0) {
		rc = add_line(m, line, (size_t)n);
		if (rc)
			break;
	}
	if (!rc && ferror(f))
		rc = errno ? -errno : -EIO;
	free(line);
	if (rc) {
		maps_free(m);
		return rc;
	}
	maps_finish(m);
	*out = m;
	return 0;
}

int maps_parse_buf(const char *buf, size_t len, struct maps **out)
{
	struct maps *m = maps_new();
	const char *p = buf, *end = buf + len;
	int rc = 0;

	if (!m)
		return -ENOMEM;
	while (p < end && !rc) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;

		rc = add_line(m, p, (size_t)(eol - p));
		p = nl ? nl + 1 : end;
	}
	if (rc) {
		maps_free(m);
		return rc;
	}
	maps_finish(m);
	*out = m;
	return 0;
}

int maps_load(pid_t pid, struct maps **out)
{
	FILE *f;
	int fd, rc;

	fd = proc_open(pid, "maps", O_RDONLY);
	if (fd < 0)
		return fd;
	f = fdopen(fd, "r");
	if (!f) {
		rc = -errno;
		close(fd);
		return rc;
	}
	rc = maps_read_file(f, out);
	fclose(f);
	/* Reading the maps of a process that exited in between. */
	if (rc == -ESRCH)
		rc = -ENOENT;
	return rc;
}

const struct map_entry *maps_find(const struct maps *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct map_entry *e = &m->v[mid];

		if (addr < e->start)
			hi = mid;
		else if (addr >= e->end)
			lo = mid + 1;
		else
			return e;
	}
	return NULL;
}

bool map_is_pseudo(const struct map_entry *e)
{
	return e->path && e->path[0] == '[';
}

void maps_free(struct maps *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < m->npaths; i++)
		free(m->paths[i]);
	free(m->paths);
	free(m->v);
	free(m);
}
