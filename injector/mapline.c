/*
 * The engine's copy of /proc/PID/maps (injector/mapline.h): made from
 * the one maps parser's struct maps, taken into a session, read again
 * where a thread's stack may be newer than the caller's copy.
 */
#include "injector/engine.h"

#include <errno.h>
#include <stdlib.h>

/* The engine's compact copy of @m (the one maps parser, proc/maps.c). */
int inj_maplines(const struct maps *m, struct mapline **out)
{
	struct mapline *v = NULL;
	size_t i;

	*out = NULL;
	if (m->n) {
		v = calloc(m->n, sizeof(*v));
		if (!v)
			return -ENOMEM;
	}
	for (i = 0; i < m->n; i++) {
		const struct map_entry *e = &m->v[i];

		v[i] = (struct mapline){
			.start = e->start, .end = e->end, .offset = e->offset,
			.inode = e->inode, .dev_major = e->dev_major,
			.dev_minor = e->dev_minor,
			.perms = { e->prot & MAP_PROT_READ ? 'r' : '-',
				   e->prot & MAP_PROT_WRITE ? 'w' : '-',
				   e->prot & MAP_PROT_EXEC ? 'x' : '-',
				   e->shared ? 's' : 'p', '\0' },
			.has_path = e->path != NULL,
		};
	}
	*out = v;
	return 0;
}

int inj_maps_take(struct inject_session *s, const struct maps *m)
{
	struct mapline *v;
	int rc = inj_maplines(m, &v);

	if (rc)
		return rc;
	free(s->maps);
	s->maps = v;
	s->nmaps = m->n;
	s->maps_gen++;
	return 0;
}

/* /proc/PID/maps read now (a thread's stack may be newer than the
 * caller's copy). */
int inj_maps_snapshot(struct inject_session *s)
{
	struct maps *m;
	int rc = maps_load(s->pid, &m);

	if (rc)
		return rc;
	rc = inj_maps_take(s, m);
	maps_free(m);
	return rc;
}

/* Call @fn for each line of the session's copy until it returns
 * non-zero. */
int inj_snapshot_each(struct inject_session *s,
		      int (*fn)(void *, const struct mapline *), void *arg)
{
	size_t i;

	for (i = 0; i < s->nmaps; i++)
		if (fn(arg, &s->maps[i]))
			return 0;
	return 0;
}
