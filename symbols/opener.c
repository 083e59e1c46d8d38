/*
 * The opener of memsnap's own process (symbols/opener.h): the root's
 * directory, open O_PATH, and a debuginfod client made at the first
 * build-id asked for.
 */
#include "symbols/opener.h"

#include "common/fsio.h"
#include "common/util.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

/* libdebuginfod's API (its header is not always installed). */
struct debuginfod_client;
typedef struct debuginfod_client *(*dc_begin_fn)(void);
typedef int (*dc_find_fn)(struct debuginfod_client *c,
			  const unsigned char *id, int len, char **path);
typedef void (*dc_end_fn)(struct debuginfod_client *c);

struct local {
	struct opener pub;
	int root_fd;		/* O_PATH; -1: none */
	bool dc_tried;
	struct debuginfod_client *dc;
	dc_find_fn find;
	dc_end_fn end;
};

static int local_open(struct opener *op, const char *path, unsigned int how,
		      struct stat *st)
{
	struct local *l = op->arg;

	if (l->root_fd < 0)
		return -ENOENT;
	return open_regular_in_root(l->root_fd, path, how, st);
}

static int local_steady(struct opener *op, int fd, uint64_t max)
{
	(void)op;
	return fd_steady(fd, max);
}

/* The client, made once: libdebuginfod is loaded only when asked for. */
static struct debuginfod_client *client(struct local *l)
{
	dc_begin_fn begin;
	void *h;

	if (l->dc_tried)
		return l->dc;
	l->dc_tried = true;
	/* a static memsnap loads nothing: a library built for another
	 * libc than the one linked in would not work */
	if (linked_statically())
		return NULL;
	h = dlopen("libdebuginfod.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (!h)
		return NULL;
	*(void **)&begin = dlsym(h, "debuginfod_begin");
	*(void **)&l->find = dlsym(h, "debuginfod_find_debuginfo");
	*(void **)&l->end = dlsym(h, "debuginfod_end");
	if (begin && l->find && l->end)
		l->dc = begin();
	/* the library stays loaded: its client may hold its state */
	return l->dc;
}

static int local_debuginfod(struct opener *op, const unsigned char *id,
			    size_t len)
{
	struct local *l = op->arg;
	const char *urls = getenv("DEBUGINFOD_URLS");
	char *path = NULL;
	int fd;

	if (!urls || !*urls || !len || len > OPENER_ID_MAX || !client(l))
		return -ENOENT;
	fd = l->find(l->dc, id, (int)len, &path);
	free(path);
	return fd;
}

int opener_local_new(const char *root, struct opener **out)
{
	struct local *l = calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	l->pub = (struct opener){ .open = local_open, .steady = local_steady,
				  .debuginfod = local_debuginfod, .arg = l };
	l->root_fd = open(root ? root : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	*out = &l->pub;
	return 0;
}

void opener_local_free(struct opener *op)
{
	struct local *l;

	if (!op)
		return;
	l = op->arg;
	if (l->dc)
		l->end(l->dc);
	if (l->root_fd >= 0)
		close(l->root_fd);
	free(l);
}
