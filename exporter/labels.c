/*
 * The labels of a target: who the process is, in values of bounded
 * number (one set per process; no address, no stack), for a join with
 * what else watches it.
 */
#include "exporter/exporter_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define ID_LEN 64

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* A run of exactly ID_LEN hex digits at @s, bounded by @lo and @hi
 * (neither a letter nor a digit beside it). */
static bool id_at(const char *lo, const char *s, const char *hi)
{
	size_t i;

	if (hi - s < ID_LEN || (s > lo && isalnum((unsigned char)s[-1])))
		return false;
	for (i = 0; i < ID_LEN; i++)
		if (!is_hex(s[i]))
			return false;
	return s + ID_LEN == hi || !isalnum((unsigned char)s[ID_LEN]);
}

void container_id(const char *cgroup, char *id, size_t size)
{
	const char *p = cgroup, *found = NULL;

	if (size)
		id[0] = '\0';
	while (*p) {
		const char *c = p, *e = strchr(p, '/'), *s;

		if (!e)
			e = p + strlen(p);
		for (s = c; s < e; s++)
			if (id_at(c, s, e))
				found = s;
		p = *e ? e + 1 : e;
	}
	if (found && size > ID_LEN)
		snprintf(id, size, "%.*s", ID_LEN, found);
}

void render_labels(struct target *t)
{
	struct expo *l = &t->labels;

	expo_reset(l);
	expo_label_u64(l, "pid", (uint64_t)t->pin.proc.pid);
	expo_label_u64(l, "start", t->pin.proc.start_time);
	expo_label(l, "comm", t->st.comm);
	expo_label(l, "executable", t->exe);
	expo_label(l, "allocator", t->r.allocator ? t->r.allocator : "");
	expo_label(l, "cgroup", t->cgroup);
	expo_label(l, "container_id", t->container);
}
