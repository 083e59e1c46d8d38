/*
 * Fuzz /proc/PID/maps text (proc/maps.h) and the objects memsnap
 * groups out of it (symbols/objects.h).  The text comes from the target
 * (its file names) or from a dump's MAPPED_LIBRARIES: (anything), so
 * every line must parse or count as malformed, and what parses must
 * hold together:
 *
 *   - maps_parse_line: the path lies inside the line, no NUL in it,
 *     start < end;
 *   - maps_parse_buf: sorted by start, each entry as maps_parse_line
 *     says; maps_find answers only with an entry that holds the address,
 *     and finds every entry when none overlap;
 *   - maps_read_file (a FILE over the same bytes) gives the same entries;
 *   - objects_new/objects_find/objects_symbolize: an object spans its
 *     mappings, an address is named inside its object, never a crash
 *     when the file cannot be opened (the root below does not exist,
 *     so nothing on this machine is ever opened).
 */
#include "proc/maps.h"
#include "symbols/objects.h"

#include "tests/fuzz/fuzz.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

/* As proc/maps.c: longer lines count as malformed, and a line read by
 * maps_read_file() holds its newline, one byte more than in a buffer. */
#define MAPS_MAX_LINE (4096 + 256)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static void check_line(const char *line, size_t len)
{
	struct map_entry e;
	const char *path;
	size_t pathlen;

	if (maps_parse_line(line, len, &e, &path, &pathlen))
		return;
	FUZZ_CHECK(e.start < e.end);
	FUZZ_CHECK(e.path == NULL);
	FUZZ_CHECK((path == NULL) == (pathlen == 0));
	if (path) {
		FUZZ_CHECK(path >= line && path + pathlen <= line + len);
		FUZZ_CHECK(!memchr(path, '\0', pathlen));
	}
}

/* Every line alone, as maps_parse_buf() cuts them; also true when the
 * longest line is short enough for maps_read_file() to agree. */
static bool check_lines(const char *buf, size_t size)
{
	const char *p = buf, *end = buf + size;
	bool comparable = true;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;

		check_line(p, (size_t)(eol - p));
		if ((size_t)(eol - p) + 1 >= MAPS_MAX_LINE)
			comparable = false;
		p = nl ? nl + 1 : end;
	}
	return comparable;
}

static void check_maps(const struct maps *m)
{
	bool overlap = false;
	size_t i;

	for (i = 0; i < m->n; i++) {
		const struct map_entry *e = &m->v[i];

		FUZZ_CHECK(e->start < e->end);
		FUZZ_CHECK(e->prot <= 7);
		if (e->path)
			FUZZ_CHECK(e->path[0] != '\0');
		if (i) {
			FUZZ_CHECK(m->v[i - 1].start <= e->start);
			if (e->start < m->v[i - 1].end)
				overlap = true;
		}
	}
	for (i = 0; i < m->n; i++) {
		const struct map_entry *e = &m->v[i];
		uint64_t probes[3] = { e->start, e->end - 1,
				       e->start + (e->end - e->start) / 2 };
		size_t k;

		for (k = 0; k < 3; k++) {
			const struct map_entry *f = maps_find(m, probes[k]);

			if (f)
				FUZZ_CHECK(f->start <= probes[k] &&
					   probes[k] < f->end);
			else
				FUZZ_CHECK(overlap);
		}
		(void)map_is_pseudo(e);
	}
	if (m->n && m->v[0].start)
		FUZZ_CHECK(!maps_find(m, m->v[0].start - 1));
}

static bool same_entry(const struct map_entry *a, const struct map_entry *b)
{
	if (a->start != b->start || a->end != b->end ||
	    a->offset != b->offset || a->inode != b->inode ||
	    a->dev_major != b->dev_major || a->dev_minor != b->dev_minor ||
	    a->prot != b->prot || a->shared != b->shared ||
	    a->deleted != b->deleted)
		return false;
	if (!a->path || !b->path)
		return a->path == b->path;
	return !strcmp(a->path, b->path);
}

/* The same bytes through a FILE, as maps_load() reads /proc. */
static void check_read_file(const char *buf, size_t size,
			    const struct maps *m)
{
	struct maps *m2;
	FILE *f;
	size_t i;
	int rc;

	if (!size)
		return;
	f = fmemopen((void *)buf, size, "r");
	FUZZ_CHECK(f != NULL);
	rc = maps_read_file(f, &m2);
	fclose(f);
	FUZZ_CHECK(rc == 0 || rc == -ENOMEM);
	if (rc)
		return;
	FUZZ_CHECK(m2->n == m->n);
	for (i = 0; i < m->n; i++)
		FUZZ_CHECK(same_entry(&m->v[i], &m2->v[i]));
	maps_free(m2);
}

static void check_objects(const struct maps *m)
{
	/* no root: objects cannot be opened, only named */
	struct object_source src = { .pid = 0, .root_fd = -1 };
	struct objects *os;
	size_t i;

	if (objects_new(m, &src, &os))
		return;
	for (i = 0; i < os->n; i++) {
		struct object *obj = &os->v[i];
		struct object *f;
		struct symbol sym;
		int rc;

		FUZZ_CHECK(obj->path && obj->path[0] && obj->inode);
		FUZZ_CHECK(obj->lo < obj->hi);
		FUZZ_CHECK(obj->map_start == obj->lo);
		FUZZ_CHECK(obj->map_start < obj->map_end);
		if (i)
			FUZZ_CHECK(os->v[i - 1].lo <= obj->lo);
		f = objects_find(os, obj->lo);
		FUZZ_CHECK(f && f->lo <= obj->lo && obj->lo < f->hi);
		f = objects_find_inode(os, obj->dev_major, obj->dev_minor,
				       obj->inode);
		FUZZ_CHECK(f && f->inode == obj->inode);
		rc = objects_symbolize(os, obj->lo, &sym);
		FUZZ_CHECK(rc == 0 && sym.obj);
		FUZZ_CHECK(sym.obj->lo <= obj->lo && obj->lo < sym.obj->hi);
		/* Not opened: named by file offset, and the error kept. */
		FUZZ_CHECK(sym.name == NULL);
		FUZZ_CHECK(sym.obj->tried && sym.obj->err < 0 &&
			   !sym.obj->elf);
		FUZZ_CHECK(sym.offset == obj->lo - sym.obj->map_start +
						 sym.obj->map_offset);
	}
	objects_free(os);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct maps *m;
	bool comparable;
	int rc;

	comparable = check_lines(buf, size);
	rc = maps_parse_buf(buf, size, &m);
	FUZZ_CHECK(rc == 0 || rc == -ENOMEM);
	if (rc)
		return 0;
	check_maps(m);
	if (comparable)
		check_read_file(buf, size, m);
	check_objects(m);
	maps_free(m);
	return 0;
}
